"""SFT data: load a data_gen export (or a Hub dataset in its layout), check it fits the mode, and turn rows into
model inputs whose labels are the assistant turns only.

A row is TRL's vision layout: `messages` with `{"type": "image"}` placeholders and `images` in placeholder
order. In an agentic row the tool results come back as user turns (`<tool_response>` around the image, see
data_gen/sft.py), so "assistant turns" are exactly the model's own tokens: its tool calls and its answer.
Prompts, tool responses and image tokens are labelled -100.

`SFTEncoder` encodes one row (chat template, tokens, pixels, labels); `encoded` applies it where the DataLoader
fetches, in its worker processes when `dataloader_num_workers` > 0; `collate` only pads and concatenates.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import torch

IGNORE = -100  # the label of tokens that carry no loss
CHECKED_ROWS = 64  # rows inspected for the mode check (a full scan would decode every image)
# per-token tensors (padded in a batch); every other key is per-image and concatenated
SEQUENCE_KEYS = ("input_ids", "labels", "attention_mask", "mm_token_type_ids", "token_type_ids")


def load_sft_dataset(name: str, mode: str, split: str = "train", config: str | None = None,
                     max_samples: int | None = None) -> datasets.Dataset:
    """`name`: a data_gen export root (its `<mode>/` folder is used), one form's folder, or a Hub dataset."""
    if (Path(name) / mode).is_dir():
        name = str(Path(name) / mode)
    try:
        dataset = load_split(name, config, split)
    except (FileNotFoundError, ValueError, ConnectionError) as err:  # missing path/repo, unknown split, offline
        raise ValueError(f"cannot load split {split!r} of dataset {name!r}: {err}. Give a data_gen export "
                         f"(python data_gen/make.py pilot --out data/pilot) or a Hub dataset with `messages` and "
                         f"`images` columns") from err
    check_dataset(dataset, mode, name)
    if max_samples is not None:
        if not 0 < max_samples <= len(dataset):
            raise ValueError(f"max_train_samples={max_samples}, but {name!r} ({split}) has {len(dataset)} rows")
        dataset = dataset.select(range(max_samples))
    return dataset


def generation_config(name: str, mode: str) -> dict | None:
    """The generation config a data_gen export keeps beside its rows (`generation.json`: task, options, seeds),
    None for other datasets."""
    for folder in (Path(name) / mode, Path(name)):
        path = folder / "generation.json"
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    return None


def load_split(name: str, config: str | None, split: str) -> datasets.Dataset:
    """One split of a data_gen export (its memory-mapped `hf/` copy when it has one), a local folder or a Hub
    dataset."""
    saved = Path(name) / "hf"
    if config is None and (saved / "dataset_dict.json").is_file():  # a data_gen export's memory-mapped copy
        splits = datasets.load_from_disk(str(saved))
        if split not in splits:
            raise ValueError(f"no split {split!r}; it has {list(splits)}")
        return splits[split]
    # datasets caches a local folder by its base name, whatever its files hold: a second export called `agentic`
    # would load the first one's rows. A local folder is therefore read afresh every time.
    fresh = "force_redownload" if Path(name).is_dir() else None
    return datasets.load_dataset(name, config, split=split, download_mode=fresh,
                                 verification_mode="no_checks" if fresh else None)


def check_dataset(dataset: datasets.Dataset, mode: str, name: str) -> None:
    missing = [column for column in ("messages", "images") if column not in dataset.column_names]
    if missing:
        raise ValueError(f"dataset {name!r} lacks the column(s) {missing} (it has {dataset.column_names}); SFT needs "
                         f"`messages` (TRL's vision format) and `images`, as data_gen/make.py writes them")
    head = dataset.select(range(min(CHECKED_ROWS, len(dataset))))
    if "form" in dataset.column_names:
        forms = set(head["form"])
        if forms != {mode}:
            raise ValueError(f"dataset {name!r} holds {sorted(forms)} rows but --mode is {mode!r}: point "
                             f"--dataset_name at the export root or at its {mode}/ folder")
    turns = [sum(m["role"] == "assistant" for m in row) for row in head["messages"]]
    if mode == "direct" and max(turns, default=0) > 1:
        raise ValueError(f"dataset {name!r} has multi-turn rows (up to {max(turns)} assistant turns): that is agentic "
                         f"data; use --mode agentic or a direct dataset")
    if mode == "agentic" and max(turns, default=0) < 2:
        raise ValueError(f"dataset {name!r} has no row with a tool turn (one assistant turn each): that is direct "
                         f"data; use --mode direct or an agentic dataset")


def training_template(processor) -> str:
    """A chat template that marks assistant turns with `{% generation %}`: the processor's own if it has the
    markers, else TRL's training twin of it (shipped for Qwen2.5-VL, Qwen3-VL and others), which renders the
    same text."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    template = processor.chat_template
    if template and has_generation_markers(template):
        return template
    twin = get_training_chat_template(processor) if template else None
    if twin is None:
        raise ValueError("the processor's chat template has no {% generation %} markers and TRL ships no training "
                         "version of it, so the assistant turns cannot be found for the loss mask; pass a template "
                         "with the markers (--chat_template_path FILE.jinja)")
    return twin


class SFTEncoder:
    """One row -> `input_ids`, `attention_mask`, `labels` and the processor's image tensors."""

    def __init__(self, processor, max_length: int | None = None, with_tools: bool = False):
        """`with_tools`: rows carry a `tools` column (JSON schemas) for the template to render. data_gen rows
        carry their tools in the system prompt instead, which works with any template (Qwen2.5-VL's
        multimodal template knows no tools)."""
        self.processor = processor
        self.template = training_template(processor)
        self.max_length = max_length
        self.with_tools = with_tools
        if with_tools and "tools" not in self.template:
            raise ValueError("the dataset has a `tools` column but the chat template has no tool support (it never "
                             "mentions `tools`): use the model's tool-calling template (--chat_template_path), or "
                             "render the tools into the system prompt as data_gen/sft.py does")
        self.image_token_id = getattr(processor, "image_token_id", None)

    def __call__(self, row: dict) -> dict[str, torch.Tensor]:
        from trl.data_utils import prepare_multimodal_messages

        messages = prepare_multimodal_messages(row["messages"], images=row["images"])
        tools = row["tools"] if self.with_tools else None
        # return_tensors=None: the assistant mask is computed over Python lists (tensors: 5x slower)
        out = self.processor.apply_chat_template(
            messages, tools=json.loads(tools) if isinstance(tools, str) else tools, chat_template=self.template,
            tokenize=True, return_dict=True, return_tensors=None, return_assistant_tokens_mask=True,
            processor_kwargs={"add_special_tokens": False})
        input_ids = torch.tensor(out.pop("input_ids")[0])
        mask = torch.tensor(out.pop("assistant_masks")[0], dtype=torch.bool)
        if not mask.any():
            raise ValueError(f"row {row.get('id', '?')}: no assistant turn to learn from")
        labels = torch.where(mask, input_ids, IGNORE)
        example = {"input_ids": input_ids, "labels": labels,
                   **{k: torch.as_tensor(v[0] if k in SEQUENCE_KEYS else v) for k, v in out.items()}}
        return self._fit(example, row)

    def _fit(self, example: dict, row: dict) -> dict:
        """Cut text after the last image down to max_length; an image past it is an error."""
        length = len(example["input_ids"])
        if self.max_length is None or length <= self.max_length:
            return example
        images = (example["input_ids"] == self.image_token_id).nonzero()
        if len(images) and images[-1].item() >= self.max_length:
            raise ValueError(f"row {row.get('id', '?')} is {length} tokens and its image tokens reach past "
                             f"max_length={self.max_length}; image tokens are never cut: raise --max_length, lower "
                             f"--max_pixels, or filter the dataset")
        return {k: v[:self.max_length] if k in SEQUENCE_KEYS else v for k, v in example.items()}



def collate(examples: list[dict], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Right-pad the per-token tensors, concatenate the per-image ones."""
    batch = {}
    pad = {"input_ids": pad_token_id, "labels": IGNORE}
    for key in examples[0]:
        values = [example[key] for example in examples]
        if key in SEQUENCE_KEYS:
            batch[key] = torch.nn.utils.rnn.pad_sequence(values, batch_first=True, padding_value=pad.get(key, 0))
        else:
            batch[key] = torch.cat(values)
    return batch


def encoded(rows: datasets.Dataset, encoder: SFTEncoder) -> datasets.Dataset:
    """The rows, encoded on access (in DataLoader workers when there are any), as TRL's trainer takes them."""
    def encode_batch(batch: dict[str, list]) -> dict[str, list]:
        examples = [encoder(dict(zip(batch, values))) for values in zip(*batch.values())]
        return {key: [example[key] for example in examples] for key in examples[0]}
    return rows.with_transform(encode_batch)
