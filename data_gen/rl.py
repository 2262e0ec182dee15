"""RL prompts: images, question, ground truth and the name of the scorer (`eval.scorers`), in verl's
parquet layout and in TRL's prompt layout.

- verl: `data_source, prompt, images, ability, reward_model{style, ground_truth}, extra_info{...}`, the
  prompt a chat list whose user content has one `<image>` per image (verl's RLHF dataset layout; DeepEyes
  adds `env_name`, here the tool set).
- TRL (GRPO): `prompt` (chat with `{"type": "image"}` parts), `images`, `answer`, `scorer`: TRL passes
  the extra columns to reward functions as keyword arguments.
"""

from __future__ import annotations

import datasets

from data_gen.export import png
from data_gen.sample import Sample

VERL_COLUMNS = ("`data_source`, `prompt` (chat, `<image>` placeholders), `images`, `ability`, `env_name` (the tool "
                "set), `reward_model{style, ground_truth}`, `extra_info{id, split, index, scorer, question}`; the "
                "scorer is a name in tirlab's `eval.scorers`")
TRL_COLUMNS = ("`prompt` (chat with image placeholders), `images`, `answer` (the ground truth), `scorer` (a name "
               "in tirlab's `eval.scorers`), `id`")
VERL_FEATURES = datasets.Features({
    "data_source": datasets.Value("string"),
    "prompt": [{"role": datasets.Value("string"), "content": datasets.Value("string")}],
    "images": [datasets.Image()],
    "ability": datasets.Value("string"),
    "env_name": datasets.Value("string"),
    "reward_model": {"style": datasets.Value("string"), "ground_truth": datasets.Value("string")},
    "extra_info": {"id": datasets.Value("string"), "split": datasets.Value("string"), "index": datasets.Value("int64"),
                   "scorer": datasets.Value("string"), "question": datasets.Value("string")},
})
TRL_FEATURES = datasets.Features({
    "prompt": [{"role": datasets.Value("string"), "content": [{"type": datasets.Value("string"),
                                                               "text": datasets.Value("string")}]}],
    "images": [datasets.Image()],
    "answer": datasets.Value("string"),
    "scorer": datasets.Value("string"),
    "id": datasets.Value("string"),
})


def verl_row(sample: Sample, split: str, index: int) -> dict:
    return {
        "data_source": f"tirlab/{sample.task}",
        "prompt": [{"role": "user", "content": "<image>" + sample.question}],
        "images": [png(sample.image)],
        "ability": sample.task,
        "env_name": sample.toolset,
        "reward_model": {"style": "rule", "ground_truth": sample.answer},
        "extra_info": {"id": sample.id, "split": split, "index": index, "scorer": sample.scorer, "question": sample.question},
    }


def trl_row(sample: Sample) -> dict:
    return {
        "prompt": [{"role": "user", "content": [{"type": "image", "text": None},
                                                {"type": "text", "text": sample.question}]}],
        "images": [png(sample.image)],
        "answer": sample.answer,
        "scorer": sample.scorer,
        "id": sample.id,
    }
