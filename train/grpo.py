"""Tool-use GRPO on TRL's GRPOTrainer: every rollout is an episode of evaluation, images included in the loss.

    python train/grpo.py --config recipes/grpo_rotated_ocr/toy_cpu/grpo.yaml
    accelerate launch --config_file recipes/accelerate/zero3.yaml train/grpo.py \\
        --config recipes/grpo_rotated_ocr/qwen2_5_vl_7b/grpo.yaml
    python train/grpo.py --model_name_or_path runs/sft --dataset_name data/rot-rl --toolset tir_rotate \\
        --output_dir runs/grpo --use_cpu --max_steps 100

Rollouts (train/rollout.py) run through TRL's `rollout_func`, not its `tools` / `environment_factory` loop: that
loop parses calls with the tokenizer's response schema (Qwen3-VL's template only) and runs Python functions,
whereas evaluation runs a model profile's protocol (Hermes in the system prompt, Qwen3-VL's template, DeepEyes'
prompt) and our tool sets through the batched executor. With `rollout_func` the episode a model is trained on is the one
eval/run_vllm.py evaluates: `runtime.episode.Episode`, driven by `run_episodes`, its prompts rendered by
`eval.backends.render_text`, with the same preset, tool set and budgets.

TRL's `rollout_func` path builds the forward pass from the dataset's images only; `ToolGRPOTrainer` hands it every
image of each sequence (the prompt's, then each tool's) through the path TRL uses for its own tool images, whose
image-token positions are read from the token ids. Tool results are `env_mask` 0: out of the loss.

Rewards: train/rewards.py (accuracy by the task's scorer, DeepEyes' format and tool terms; `--reward_weights`).
Each step logs the tool-use watch (tools/call_rate, tools/calls_per_episode, tools/success_rate,
episodes/answer_rate, episodes/turns, episodes/response_tokens, stop/<reason>), warns when the tool-call rate
stays under `--tool_call_rate_floor` for `--tool_collapse_steps` generation batches (and stops with
`--stop_on_tool_collapse`), and every `--save_rollouts_steps` writes a sample of episodes to
`output_dir/rollouts/step-N/records.jsonl` (eval/report.py's record format, with each reward term), all of them
shown in `output_dir/rollouts/viewer.html` (viewer/: each episode's turns, calls and images, rewards per step).
A run that stops resumes from its last checkpoint in `output_dir` when started again with the same command; the
sampler's seed gives the same data order.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import json  # noqa: E402
import os  # noqa: E402

from runtime import cli  # noqa: E402
from train.config import GRPOScriptArguments, ToolGRPOConfig  # noqa: E402

RUN_RECORD = "tirlab_grpo.json"
TRL_COLUMNS = ("prompt", "images", "answer", "scorer")


def load_rl_dataset(name: str, split: str = "train", config: str | None = None, max_samples: int | None = None):
    """`name`: a data_gen/make.py rl export (its `trl/` folder), TRL's folder of one, or a Hub dataset."""
    from eval.scorers import check_scorer
    from train.data import load_split

    if (Path(name) / "trl").is_dir():
        name = str(Path(name) / "trl")
    try:
        dataset = load_split(name, config, split)
    except (FileNotFoundError, ValueError, ConnectionError) as err:
        raise ValueError(f"cannot load split {split!r} of dataset {name!r}: {err}. Give a data_gen RL export "
                         f"(python data_gen/make.py rl --task rotated_ocr --n 1000 --out data/rot-rl) or a Hub "
                         f"dataset in TRL's layout ({', '.join(TRL_COLUMNS)})") from err
    missing = [column for column in TRL_COLUMNS if column not in dataset.column_names]
    if missing:
        raise ValueError(f"dataset {name!r} lacks the column(s) {missing} (it has {dataset.column_names}); GRPO "
                         f"needs {list(TRL_COLUMNS)} as data_gen/make.py rl writes them (its trl/ folder)")
    for spec in set(dataset["scorer"]):
        check_scorer(spec)
    if max_samples is not None:
        if not 0 < max_samples <= len(dataset):
            raise ValueError(f"max_train_samples={max_samples}, but {name!r} ({split}) has {len(dataset)} rows")
        dataset = dataset.select(range(max_samples))
    return dataset


def build_trainer(script_args: GRPOScriptArguments, training_args: ToolGRPOConfig, model_args):
    """The run's trainer and the checkpoint it resumes from (None for a fresh start)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL's documented extension point
    from transformers import AutoModelForImageTextToText, AutoProcessor, set_seed
    from trl import get_peft_config

    from eval.presets import get_preset
    from runtime.profiles import Budgets
    from runtime.toolbox import ToolBox
    from tools.toolsets import get_toolset
    from train.rewards import REWARD_FUNCS
    from train.rollout import ToolRollouts
    from train.sft import check_loggers, last_checkpoint, torch_dtype

    if not script_args.dataset_name:
        raise ValueError("--dataset_name is required: a data_gen RL export (data/rot-rl) or a Hub dataset")
    if not model_args.model_name_or_path:
        raise ValueError("--model_name_or_path is required: an agentic SFT checkpoint (train/sft.py --mode agentic) "
                         "or a tool-calling VLM such as Qwen/Qwen2.5-VL-7B-Instruct")
    preset = get_preset(training_args.preset)
    profile = preset.profile
    toolset = training_args.toolset or profile.toolset
    if toolset is None:
        raise ValueError(f"--toolset is required: preset {preset.name!r} brings no tool set of its own (e.g. "
                         f"--toolset tir_rotate for rotated OCR, default for the general tools)")
    if toolset is not None:
        get_toolset(toolset)  # an unknown name fails here, listing the tool sets
    if not training_args.use_vllm and training_args.world_size > 1:
        raise ValueError(f"{training_args.world_size} processes: generate with vLLM (--use_vllm, colocate or server); "
                         f"transformers' generate serves one process")
    cli.check_model(model_args.model_name_or_path, "--model_name_or_path", model_args.model_revision)
    check_loggers(training_args.report_to)
    set_seed(training_args.seed)
    max_pixels = training_args.max_pixels or preset.max_pixels
    processor = AutoProcessor.from_pretrained(model_args.model_name_or_path, revision=model_args.model_revision,
                                              **({"max_pixels": max_pixels} if max_pixels else {}))
    stops = [stop for stop in profile.protocol.stop if stop != processor.tokenizer.eos_token]
    if stops or profile.code_tool:
        raise ValueError(f"preset {preset.name!r}: its replies end on {stops} (code for the sandbox), and GRPO "
                         f"rollouts need replies that end at the end-of-turn token "
                         f"{processor.tokenizer.eos_token!r} (presets qwen2.5-vl, qwen3-vl, deepeyes)")
    if training_args.use_vllm:
        check_vllm_images(model_args, processor)
    train_rows = load_rl_dataset(script_args.dataset_name, script_args.dataset_train_split,
                                 script_args.dataset_config, script_args.max_train_samples)
    checkpoint = training_args.resume_from_checkpoint or last_checkpoint(training_args.output_dir)
    source = checkpoint if checkpoint and not model_args.use_peft else model_args.model_name_or_path
    model = AutoModelForImageTextToText.from_pretrained(
        source, revision=None if checkpoint else model_args.model_revision, dtype=torch_dtype(model_args),
        attn_implementation=model_args.attn_implementation)
    toolbox = ToolBox(toolset)  # as evaluation builds it for an image tool set (eval.loop.toolboxes)
    budgets = Budgets(training_args.max_turns, training_args.max_tool_calls, training_args.max_images)
    rollouts = ToolRollouts(processor, profile, toolbox, budgets, max_completion_length=
                            training_args.max_completion_length, max_tokens_per_turn=training_args.max_tokens_per_turn)
    from train.grpo_trainer import ToolGRPOTrainer  # imports TRL's vLLM support: after the cheap checks

    trainer = ToolGRPOTrainer(model=model, reward_funcs=REWARD_FUNCS, args=training_args, train_dataset=train_rows,
                              processing_class=processor, peft_config=get_peft_config(model_args), rollouts=rollouts)
    return trainer, checkpoint


def check_vllm_images(model_args, processor) -> None:
    """TRL's vLLM sizes images with the checkpoint's own processor config: it must size them as this run does,
    or an image's tokens in the sequence and its features in vLLM would differ in number."""
    from transformers import AutoProcessor

    saved = AutoProcessor.from_pretrained(model_args.model_name_or_path, revision=model_args.model_revision)
    if saved.image_processor.size != processor.image_processor.size:
        raise ValueError(f"vLLM will size images with {model_args.model_name_or_path}'s processor config "
                         f"({saved.image_processor.size}), this run with {processor.image_processor.size}: leave "
                         f"--max_pixels unset, or save the processor with it into the checkpoint (train/sft.py "
                         f"--max_pixels does)")


def main(script_args: GRPOScriptArguments, training_args: ToolGRPOConfig, model_args) -> str:
    """Train; returns the output directory (the final model and processor are saved there)."""
    trainer, checkpoint = build_trainer(script_args, training_args, model_args)
    if checkpoint:
        print(f"resuming from {checkpoint}", flush=True)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    trainer.save_model(training_args.output_dir)
    trainer.save_state()  # trainer_state.json: the reward and tool-use curves
    if trainer.is_world_process_zero():
        output = Path(training_args.output_dir)
        trainer.processing_class.save_pretrained(output)
        record = {"model_name_or_path": model_args.model_name_or_path, "dataset_name": script_args.dataset_name,
                  "train_samples": len(trainer.train_dataset), "preset": training_args.preset,
                  "toolset": trainer.rollouts.toolbox.toolset.name,
                  "seed": training_args.seed, "max_steps": training_args.max_steps,
                  "global_step": trainer.state.global_step, "learning_rate": training_args.learning_rate,
                  "num_generations": training_args.num_generations,
                  "reward_weights": list(training_args.reward_weights),
                  "tool_collapse": trainer.watch.collapsed, "train_runtime_s": result.metrics["train_runtime"]}
        (output / RUN_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return training_args.output_dir


def parse(argv: list[str] | None = None):
    from trl import ModelConfig

    return cli.parse_trl((GRPOScriptArguments, ToolGRPOConfig, ModelConfig), sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(cli.run(lambda argv: main(*parse(argv)), debug_takes_values=True))
