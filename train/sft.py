"""Direct vs agentic tool-use SFT (TIR-Bench's pilot, section 4.5) on TRL's SFTTrainer.

    accelerate launch train/sft.py --config recipes/pilot_rotated_ocr/qwen2_5_vl_7b/agentic.yaml
    accelerate launch --config_file recipes/accelerate/zero3.yaml train/sft.py \\
        --config recipes/pilot_rotated_ocr/qwen2_5_vl_7b/direct.yaml --max_train_samples 5000
    python train/sft.py --model_name_or_path DIR --dataset_name data/pilot --mode agentic --output_dir runs/sft
    python train/sft.py --model_name_or_path toy:qwen2_5_vl --dataset_name data/pilot-toy --mode agentic \
        --output_dir runs/toy --use_cpu --max_steps 1000 --per_device_train_batch_size 32 --learning_rate 3e-3

`--mode agentic` learns every assistant turn of the reference trajectories (the tool call, then the answer
after the tool's image came back); `--mode direct` learns the answer from the image and question alone. The
loss covers the assistant tokens only (train/data.py). A run that stops resumes from its last checkpoint in
`output_dir` when started again with the same command. LoRA: `--use_peft --lora_r 16` saves the adapter, and
the adapter merged into the base model under `output_dir/merged` (what eval/run_vllm.py loads).

`--model_name_or_path toy:qwen2_5_vl` (or `toy:qwen3_vl`) trains from scratch: a toy model of about 0.9M
parameters (runtime.tiny_model.build_toy_model, seeded by --seed) is built into `output_dir/init` and
training starts there; it learns rotated OCR on the pilot's aligned data (data_gen/make.py pilot --render
aligned).

`output_dir/tirlab_sft.json` records the run for train/pilot.py and the pilot sweep:
- `mode`, `dataset_name`, `train_samples`, `max_train_samples`, `num_train_epochs`, `max_pixels`, `lora`;
- `model_name_or_path`: the model training started from (for `toy:KIND`, its `output_dir/init`);
  `from_scratch`: `toy:KIND` or null;
- `generation`: the data's generation config (`generation.json` of a data_gen export; null for other data)
  and `eval_tasks`: the synthetic-suite task specs that draw held-out tasks the same way (eval/run_vllm.py
  `--tasks`, e.g. `rotated_ocr:angles=quarter,render=aligned`; null without `generation`);
- `seed`, `max_steps` (-1: set by epochs), `global_step` (optimizer steps taken), `learning_rate`,
  `per_device_train_batch_size`, `gradient_accumulation_steps`, `world_size`, `train_runtime_s` (this
  process's training time);
- `train_tokens`: tokens the model processed in training, image tokens included and padding not (TRL's
  `num_tokens`: the attention mask's sum over every batch, all processes); `total_flos`: transformers'
  estimate of the training FLOPs (6 x parameters x tokens, padding included). Either measures compute for
  an equal-compute comparison; a run resumed from a checkpoint counts its tokens from the resume on.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import importlib.util  # noqa: E402
import json  # noqa: E402

from eval.suites.synthetic import task_spec  # noqa: E402
from runtime import cli  # noqa: E402
from train.config import SFTScriptArguments, ToolSFTConfig  # noqa: E402
from train.data import SFTEncoder, collate, encoded, generation_config, load_sft_dataset  # noqa: E402

LOGGERS = ("tensorboard", "trackio", "wandb")  # report_to values whose package has the same name
RUN_RECORD = "tirlab_sft.json"
# LoRA targets unless --lora_target_modules says otherwise: the language model's linear layers (peft has no
# default for most VLMs, and bare names such as gate_proj would match the vision tower's MLPs too)
LORA_LANGUAGE_MODEL = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
MERGED = "merged"  # LoRA runs: the adapter merged into the base model, a plain checkpoint
TOY = "toy:"  # --model_name_or_path toy:KIND: a fresh toy model, trained from scratch
INIT = "init"  # where a toy model is built, under output_dir


def vision_encoder(model):
    for owner in (model, getattr(model, "model", None)):
        for name in ("visual", "vision_tower", "vision_model"):
            module = getattr(owner, name, None)
            if module is not None:
                return module
    raise ValueError(f"--freeze_vision: {type(model).__name__} has no visual, vision_tower or vision_model module")


def check_loggers(report_to) -> None:
    for logger in [report_to] if isinstance(report_to, str) else report_to or []:
        if logger in LOGGERS and importlib.util.find_spec(logger) is None:
            raise ValueError(f"--report_to {logger} needs the `{logger}` package: pip install {logger}")


def last_checkpoint(output_dir: str) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(output_dir) if Path(output_dir).is_dir() else None


def toy_init(spec: str, training_args: ToolSFTConfig) -> str:
    """`toy:KIND` -> a toy model built into output_dir/init, seeded by --seed; a resumed run reuses it."""
    from runtime.tiny_model import KINDS, build_toy_model

    kind = spec.removeprefix(TOY)
    if kind not in KINDS:
        raise ValueError(f"--model_name_or_path {spec}: toy models are {', '.join(TOY + k for k in KINDS)}")
    init = Path(training_args.output_dir) / INIT
    with training_args.main_process_first(desc="toy model"):
        if not (init / "config.json").is_file():
            build_toy_model(kind, init, seed=training_args.seed)
    return str(init)


def build_trainer(script_args: SFTScriptArguments, training_args: ToolSFTConfig, model_args):
    """The run's SFTTrainer, and the checkpoint it resumes from (None for a fresh start)."""
    from transformers import AutoModelForImageTextToText, AutoProcessor, set_seed
    from trl import SFTTrainer, get_peft_config

    if not script_args.dataset_name:
        raise ValueError("--dataset_name is required: a data_gen export (data/pilot) or a Hub dataset")
    if not model_args.model_name_or_path:
        raise ValueError("--model_name_or_path is required (e.g. Qwen/Qwen2.5-VL-7B-Instruct, or toy:qwen2_5_vl)")
    if model_args.model_name_or_path.startswith(TOY):
        training_args.from_scratch = model_args.model_name_or_path
        model_args.model_name_or_path = toy_init(model_args.model_name_or_path, training_args)
    cli.check_model(model_args.model_name_or_path, "--model_name_or_path", model_args.model_revision)
    check_loggers(training_args.report_to)
    set_seed(training_args.seed)
    limits = {"max_pixels": training_args.max_pixels} if training_args.max_pixels else {}
    processor = AutoProcessor.from_pretrained(model_args.model_name_or_path, revision=model_args.model_revision,
                                              **limits)
    if training_args.chat_template_path:
        processor.chat_template = Path(training_args.chat_template_path).read_text(encoding="utf-8")
    train_rows = load_sft_dataset(script_args.dataset_name, training_args.mode, script_args.dataset_train_split,
                                  script_args.dataset_config, script_args.max_train_samples)
    encoder = SFTEncoder(processor, training_args.max_length, with_tools="tools" in train_rows.column_names)
    eval_dataset = None
    if training_args.eval_strategy != "no":
        eval_rows = load_sft_dataset(script_args.dataset_name, training_args.mode, script_args.dataset_test_split,
                                     script_args.dataset_config)
        eval_dataset = encoded(eval_rows, encoder)

    checkpoint = training_args.resume_from_checkpoint or last_checkpoint(training_args.output_dir)
    # resuming a full fine-tune: the weights come from the checkpoint through from_pretrained, which maps the
    # key names Qwen-VL checkpoints are saved with (transformers 5.19's Trainer loads them without that mapping
    # and silently keeps the initial weights; it then warns of "unexpected keys")
    source = checkpoint if checkpoint and not model_args.use_peft else model_args.model_name_or_path
    model = AutoModelForImageTextToText.from_pretrained(
        source, revision=None if checkpoint else model_args.model_revision, dtype=torch_dtype(model_args),
        attn_implementation=model_args.attn_implementation)
    if training_args.freeze_vision:
        vision_encoder(model).requires_grad_(False)
    if model_args.use_peft and not model_args.lora_target_modules:
        model_args.lora_target_modules = LORA_LANGUAGE_MODEL
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=encoded(train_rows, encoder),
                         eval_dataset=eval_dataset, processing_class=processor,
                         data_collator=partial(collate, pad_token_id=processor.tokenizer.pad_token_id),
                         peft_config=get_peft_config(model_args))
    return trainer, checkpoint


def main(script_args: SFTScriptArguments, training_args: ToolSFTConfig, model_args) -> str:
    """Train; returns the output directory (the final model and processor are saved there)."""
    trainer, checkpoint = build_trainer(script_args, training_args, model_args)
    if checkpoint:
        print(f"resuming from {checkpoint}", flush=True)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    trainer.save_model(training_args.output_dir)
    trainer.save_state()  # trainer_state.json: the loss curve train/pilot.py draws
    if trainer.is_world_process_zero():
        output = Path(training_args.output_dir)
        trainer.processing_class.save_pretrained(output)
        if model_args.use_peft:
            merge_lora(output, model_args, trainer.processing_class)
        generation = generation_config(script_args.dataset_name, training_args.mode)
        record = {"mode": training_args.mode, "dataset_name": script_args.dataset_name,
                  "train_samples": len(trainer.train_dataset), "max_train_samples": script_args.max_train_samples,
                  "model_name_or_path": model_args.model_name_or_path,
                  "from_scratch": training_args.from_scratch,
                  "num_train_epochs": training_args.num_train_epochs,
                  "max_pixels": training_args.max_pixels, "lora": bool(model_args.use_peft),
                  "generation": generation,
                  "eval_tasks": [task_spec(generation["task"], generation["options"])] if generation else None,
                  "seed": training_args.seed, "max_steps": training_args.max_steps,
                  "global_step": trainer.state.global_step,
                  "learning_rate": training_args.learning_rate,
                  "per_device_train_batch_size": training_args.per_device_train_batch_size,
                  "gradient_accumulation_steps": training_args.gradient_accumulation_steps,
                  "world_size": training_args.world_size, "train_runtime_s": result.metrics["train_runtime"],
                  "train_tokens": trained_tokens(trainer.state.log_history),
                  "total_flos": trainer.state.total_flos}
        (output / RUN_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return training_args.output_dir


def trained_tokens(log_history: list[dict]) -> int | None:
    """TRL's running count of training tokens at the last log (the trainer logs at the end of training too)."""
    counts = [entry["num_tokens"] for entry in log_history if "num_tokens" in entry]
    return int(counts[-1]) if counts else None


def torch_dtype(model_args):
    import torch

    return model_args.dtype if model_args.dtype in (None, "auto") else getattr(torch, model_args.dtype)


def merge_lora(output: Path, model_args, processor) -> None:
    """Merge the saved adapter into a fresh copy of the base model (works whatever sharded the training) and
    save it, with the processor, under output/merged."""
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText

    base = AutoModelForImageTextToText.from_pretrained(model_args.model_name_or_path,
                                                       revision=model_args.model_revision,
                                                       dtype=torch_dtype(model_args))
    PeftModel.from_pretrained(base, output).merge_and_unload().save_pretrained(output / MERGED)
    processor.save_pretrained(output / MERGED)


def parse(argv: list[str] | None = None):
    from trl import ModelConfig

    return cli.parse_trl((SFTScriptArguments, ToolSFTConfig, ModelConfig), sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(cli.run(lambda argv: main(*parse(argv)), debug_takes_values=True))  # transformers' --debug VALUE
