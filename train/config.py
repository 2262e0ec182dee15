"""The settings of `train/sft.py`, TRL style: `SFTScriptArguments` says what to train on, `ToolSFTConfig` (TRL's
`SFTConfig` plus the tool-use options) how, and TRL's `ModelConfig` which model (LoRA included)."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import ScriptArguments, SFTConfig

MODES = ("agentic", "direct")


@dataclass
class SFTScriptArguments(ScriptArguments):
    """`dataset_name`: a data_gen export (`data/pilot`, whose `agentic/` and `direct/` folders hold the two
    forms, or one form's folder) or a Hub dataset in the same layout (`messages`, `images`)."""

    max_train_samples: int | None = field(
        default=None, metadata={"help": "Train on the first N rows (the data scale of the pilot: 1000, 5000, ...)."})


@dataclass
class ToolSFTConfig(SFTConfig):
    mode: str = field(default="agentic", metadata={
        "help": "agentic: the full trajectory (tool calls, the images tools return, the answer), loss on every "
                "assistant turn; direct: the image and question straight to the answer.", "choices": list(MODES)})
    freeze_vision: bool = field(default=False, metadata={"help": "Keep the vision encoder's weights fixed."})
    max_pixels: int | None = field(default=None, metadata={
        "help": "Resize images above this many pixels (the processor's own limit when unset). Use the same value "
                "at evaluation."})
    # TRL's default of 1024 would cut through image tokens; unset, nothing is truncated
    max_length: int | None = field(default=None, metadata={
        "help": "Longest example in tokens. Text after the last image may be cut; an example whose image tokens "
                "reach past it is an error, never silently truncated."})
    bf16: bool | None = field(default=None, metadata={"help": "bf16 mixed precision; default: on where the GPU can."})
    # set by train/sft.py, not a flag: the toy model spec (toy:KIND) a run from scratch started with
    from_scratch: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"--mode must be one of {list(MODES)}, got {self.mode!r}")
        if self.bf16 is None:
            import torch

            self.bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        # the examples are encoded by train.data (assistant-only labels, images never truncated); TRL must
        # neither re-tokenize them nor drop the columns its collator does not know
        self.dataset_kwargs = {**(self.dataset_kwargs or {}), "skip_prepare_dataset": True}
        self.remove_unused_columns = False
        super().__post_init__()
