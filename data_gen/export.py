"""Export to Hugging Face `datasets`: typed features with `Image` columns, sharded parquet files under
`data/`, `save_to_disk` under `hf/`, and a dataset card (README.md with YAML metadata and the generation
config). `push` publishes an export: the card and the parquet shards, which is what `load_dataset(repo)`
reads, to a Hub dataset repo or to a local folder laid out exactly like that repo."""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
from pathlib import Path
from typing import Iterable

import datasets
import numpy as np
from PIL import Image

PART = {"type": datasets.Value("string"), "text": datasets.Value("string")}
SFT_FEATURES = datasets.Features({
    "messages": [{"role": datasets.Value("string"), "content": [PART]}],
    "images": [datasets.Image()],
    "id": datasets.Value("string"),
    "form": datasets.Value("string"),
})
ROWS_PER_SHARD = 5000


def png(image: np.ndarray) -> dict:
    """An image as the `Image` feature stores it. Encoding here (in the generating workers) keeps the
    single-process export from re-encoding every image."""
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(image)).save(buffer, format="PNG", compress_level=1)
    return {"bytes": buffer.getvalue(), "path": None}


def to_dataset(rows: Iterable[dict]) -> datasets.Dataset:
    """Rows whose images are arrays, PIL images or `png()` dicts."""
    def encoded(row):
        return {**row, "images": [im if isinstance(im, dict) else png(np.asarray(im)) for im in row["images"]]}
    return datasets.Dataset.from_list([encoded(row) for row in rows], features=SFT_FEATURES)


SFT_COLUMNS = ("`messages` (TRL vision format, image placeholders), `images` (in placeholder order), `id`, "
               "`form` (`direct` or `agentic`)")


def export(splits: dict[str, datasets.Dataset], out: str | Path, config: dict, name: str,
           columns: str = SFT_COLUMNS) -> Path:
    """Write every split as parquet shards and the whole as `save_to_disk`, with a dataset card."""
    out = Path(out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    files = {}
    for split, dataset in splits.items():
        shards = max(1, math.ceil(len(dataset) / ROWS_PER_SHARD))
        files[split] = []
        for k in range(shards):
            path = out / "data" / f"{split}-{k:05d}-of-{shards:05d}.parquet"
            dataset.shard(shards, k, contiguous=True).to_parquet(str(path))
            files[split].append(path.relative_to(out).as_posix())
    datasets.DatasetDict(splits).save_to_disk(str(out / "hf"))
    (out / "README.md").write_text(_card(name, splits, files, config, columns), encoding="utf-8")
    return out


HUB_FILES = ("README.md", "data/*.parquet")  # a dataset repo: the card (with its data_files) and the shards
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def push(out: str | Path, destination: str, token: str | None = None, private: bool = True) -> str:
    """Publish the export in `out` to `destination`: a Hub dataset repo id (`user/name`; needs a token,
    `token` or $HF_TOKEN, and network) or a local folder (a path starting with /, ., ~ or file://), which
    gets the same files in the same layout, so `load_dataset(folder)` reads what `load_dataset(repo)`
    would. Shards of an earlier push that this export no longer has are removed."""
    out = Path(out)
    files = [path for pattern in HUB_FILES for path in sorted(out.glob(pattern))]
    if not (out / "README.md").is_file() or len(files) < 2:
        raise ValueError(f"{out} is not an export (no README.md or data/*.parquet): run data_gen/make.py first")
    if destination.startswith(("/", ".", "~", "file://")):
        folder = Path(destination.removeprefix("file://")).expanduser().resolve()
        if folder == out.resolve():
            raise ValueError(f"push destination {folder} is the export itself; give another folder")
        (folder / "data").mkdir(parents=True, exist_ok=True)
        for stale in (folder / "data").glob("*.parquet"):
            stale.unlink()
        for path in files:
            shutil.copyfile(path, folder / path.relative_to(out))
        return str(folder)
    if not REPO_ID.match(destination):
        raise ValueError(f"push destination {destination!r} is neither a Hub repo id (user/name) nor a local folder "
                         "(a path starting with /, ., ~ or file://)")
    token = token or os.environ.get("HF_TOKEN")
    if not token:
        raise ValueError(f"pushing to the Hub repo {destination!r} needs a token: set HF_TOKEN or pass --token")
    from huggingface_hub import HfApi
    api = HfApi(token=token)
    api.create_repo(destination, repo_type="dataset", private=private, exist_ok=True)
    api.upload_folder(repo_id=destination, repo_type="dataset", folder_path=out, allow_patterns=list(HUB_FILES),
                      delete_patterns=["data/*.parquet"], commit_message="tirlab data_gen export")
    return f"https://huggingface.co/datasets/{destination}"


def _card(name: str, splits: dict, files: dict, config: dict, columns: str) -> str:
    yaml_files = "\n".join(f"  - split: {split}\n    path: data/{split}-*.parquet" for split in files)
    sizes = "\n".join(f"| {split} | {len(dataset):,} |" for split, dataset in splits.items())
    return f"""---
configs:
- config_name: default
  data_files:
{yaml_files}
license: apache-2.0
task_categories:
- image-text-to-text
tags:
- tirlab
- thinking-with-images
- synthetic
---

# {name}

Generated by tirlab's `data_gen` (`python data_gen/make.py`). Every sample's reference tool calls were
replayed through tirlab's tools and audited before export. Columns: {columns}.

| split | rows |
|---|---|
{sizes}

## Generation config

```json
{json.dumps(config, indent=2, sort_keys=True)}
```
"""
