"""The settings of `train/sft.py` and `train/grpo.py`, TRL style: `SFTScriptArguments` and `GRPOScriptArguments`
say what to train on; `ToolSFTConfig` (TRL's `SFTConfig` plus the tool-use options) and `ToolGRPOConfig` (TRL's
`GRPOConfig` plus the episode, reward and tool-use watch options) how; TRL's `ModelConfig` which model (LoRA
included)."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig, ScriptArguments, SFTConfig

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


REWARDS = ("accuracy", "format", "tool")
DEEPEYES_WEIGHTS = (0.8, 0.2, 1.2)  # Visual-Agent/DeepEyes, verl/utils/reward_score/vl_agent.py, compute_score


@dataclass
class GRPOScriptArguments(ScriptArguments):
    """`dataset_name`: a `data_gen/make.py rl` export (its `trl/` folder is used) or a Hub dataset in TRL's layout
    (`prompt`: one user message with image placeholders and the question, `images`, `answer`, `scorer`)."""

    max_train_samples: int | None = field(default=None, metadata={"help": "Train on the first N prompts."})


@dataclass
class ToolGRPOConfig(GRPOConfig):
    preset: str = field(default="qwen2.5-vl", metadata={
        "help": "The model's preset, as in eval/run_vllm.py (qwen2.5-vl, qwen3-vl, deepeyes): its profile "
                "(protocol, system prompt, box units) and image size. Rollouts are the episodes the evaluation "
                "runs. Presets whose replies end on stop strings (thyme's code) are not supported yet."})
    toolset: str | None = field(default=None, metadata={
        "help": "The image tool set the episodes offer (tools/toolsets); default: the profile's own. rotated OCR: "
                "tir_rotate."})
    max_turns: int = field(default=10, metadata={"help": "Model replies per episode."})
    max_tool_calls: int = field(default=20, metadata={"help": "Tool calls per episode."})
    max_images: int = field(default=32, metadata={"help": "Images per episode, the task's included."})
    max_tokens_per_turn: int | None = field(default=None, metadata={
        "help": "Tokens per model reply (default: what is left of max_completion_length, which bounds the whole "
                "episode after the prompt: replies, tool results and their images)."})
    max_pixels: int | None = field(default=None, metadata={
        "help": "Resize images above this many pixels (default: the preset's). Use the same value at evaluation."})
    tool_call_rate_floor: float = field(default=0.05, metadata={
        "help": "Warn when the share of episodes with a tool call stays below this for tool_collapse_steps "
                "generation batches in a row (0: never)."})
    tool_collapse_steps: int = field(default=10, metadata={"help": "See tool_call_rate_floor."})
    stop_on_tool_collapse: bool = field(default=False, metadata={
        "help": "Stop training (after saving) when tool use collapses, instead of only warning."})
    save_rollouts_steps: int = field(default=50, metadata={
        "help": "Every N steps write a sample of the step's episodes under output_dir/rollouts/step-N (records "
                "eval/report.py reads, with each reward term); 0: never."})
    save_rollouts_count: int = field(default=8, metadata={"help": "Episodes per saved sample."})
    bf16: bool | None = field(default=None, metadata={"help": "bf16 mixed precision; default: on where the GPU can."})

    def __post_init__(self):
        if self.bf16 is None:
            import torch

            self.bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        if self.reward_weights is None:
            self.reward_weights = list(DEEPEYES_WEIGHTS)
        if len(self.reward_weights) != len(REWARDS):
            raise ValueError(f"reward_weights: one weight per reward term {list(REWARDS)}, got {self.reward_weights}")
        if not 0 <= self.tool_call_rate_floor <= 1:
            raise ValueError(f"tool_call_rate_floor must be in [0, 1], got {self.tool_call_rate_floor}")
        for name in ("max_turns", "max_tool_calls", "max_images", "tool_collapse_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("save_rollouts_steps", "save_rollouts_count"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        self.remove_unused_columns = False  # the reward terms read `answer`, `scorer` and `id`
        super().__post_init__()
