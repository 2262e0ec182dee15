"""Synthetic thinking-with-images tasks with audited reference trajectories, and the datasets built
from them.

- `data_gen.tasks`: one module per task generator (seeded, deterministic, by difficulty).
- `data_gen.sample`: the Sample, its reference trajectory and the audit that replays it through `tools/`.
- `data_gen.text`: the fonts and the word corpus used for rendered text.
- `data_gen.sft`: SFT rows in TRL's vision format (direct and agentic forms).
- `data_gen.export`: Hugging Face `datasets` export (parquet shards, save_to_disk, dataset card).
- `data_gen/make.py`: the command line.
"""
