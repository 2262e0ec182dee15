"""GRPO rollout speed: generated tokens/s of train/grpo.py's tool-using rollouts, measured in one run against the
same trainer's rollouts with tools disabled and against the same episodes run one at a time.

    python train/bench_grpo.py                       # the shipped toy agentic model on rotated OCR, this CPU
    python train/bench_grpo.py --model runs/sft --prompts 16 --generations 8 --rounds 3

Each configuration calls the trainer's `rollout_func` (train/rollout.py: episodes of evaluation, their image
tools batched, HF `generate` on the policy on a CPU) on the same prompts, sampling as training does
(temperature 1). Generated tokens are the model's own (tool results are not counted). Targets: tool-using rollouts
at least 0.7x the tokens/s of rollouts without tools, and at least 5x the tokens/s of one episode at a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOOLS_TARGET, SEQUENTIAL_TARGET = 0.7, 5.0


def tokens_per_s(rollouts, prompts: list, batch: int, rounds: int) -> dict:
    """Calls `rollouts` on `prompts` `batch` prompts at a time, `rounds` times; the median round's rate."""
    rates, calls, tokens = [], [], []
    for _ in range(rounds):
        start, generated, episodes_with_calls = time.perf_counter(), 0, 0
        for first in range(0, len(prompts), batch):
            out = rollouts(prompts[first:first + batch])
            generated += sum(sum(mask) for mask in out["env_mask"])
            episodes_with_calls += sum(e["tool_calls"] > 0 for e in out["episode"])
        rates.append(generated / (time.perf_counter() - start))
        calls.append(episodes_with_calls / len(prompts))
        tokens.append(generated / len(prompts))
    return {"tokens_per_s": statistics.median(rates), "call_rate": statistics.mean(calls),
            "tokens_per_episode": statistics.mean(tokens)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="an agentic checkpoint; default: the shipped toy agentic model")
    parser.add_argument("--prompts", type=int, default=8, help="distinct prompts (tasks)")
    parser.add_argument("--generations", type=int, default=8, help="episodes per prompt (GRPO's group size)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per configuration (the median counts)")
    args = parser.parse_args(argv)

    import torch
    from trl.data_utils import prepare_multimodal_messages

    from data_gen.make import main as make_data
    from eval.config import TOY_CHECKPOINTS
    from runtime.toolbox import ToolBox
    from train.grpo import build_trainer, parse
    from train.rollout import ToolRollouts

    model = args.model or str(TOY_CHECKPOINTS / "agentic")
    episodes = args.prompts * args.generations
    with tempfile.TemporaryDirectory() as tmp:
        make_data(["rl", "--task", "rotated_ocr", "--n", str(args.prompts), "--n-test", "0", "--option",
                   "angles=quarter", "--option", "render=aligned", "--seed", "200000", "--out", f"{tmp}/data",
                   "--workers", "1"])
        flags = ["--model_name_or_path", model, "--dataset_name", f"{tmp}/data", "--toolset", "tir_rotate",
                 "--output_dir", f"{tmp}/out", "--per_device_train_batch_size", str(episodes),
                 "--num_generations", str(args.generations), "--max_completion_length", "256",
                 "--max_tokens_per_turn", "64", "--max_images", "4", "--report_to", "none", "--seed", "0"]
        flags += [] if torch.cuda.is_available() else ["--use_cpu", "--dtype", "float32"]
        trainer, _ = build_trainer(*parse(flags))
        rows = trainer.train_dataset
        prompts = [prepare_multimodal_messages(row["prompt"], images=row["images"])
                   for row in rows for _ in range(args.generations)]  # as GRPO's sampler repeats them
        with_tools = trainer.rollouts
        without_tools = ToolRollouts(trainer.processing_class, with_tools.profile, ToolBox(None), with_tools.budgets,
                                     with_tools.max_completion_length, with_tools.max_tokens_per_turn,
                                     generator=with_tools.generator)
        trainer.model.eval()
        tokens_per_s(with_tools, prompts[:args.generations], args.generations, 1)  # warm-up
        results = {"tools, batched": tokens_per_s(with_tools, prompts, episodes, args.rounds),
                   "no tools, batched": tokens_per_s(without_tools, prompts, episodes, args.rounds),
                   "tools, one episode at a time": tokens_per_s(with_tools, prompts, 1, 1)}
    tools = results["tools, batched"]["tokens_per_s"]
    ratios = {"no tools, batched": (tools / results["no tools, batched"]["tokens_per_s"], TOOLS_TARGET),
              "tools, one episode at a time": (tools / results["tools, one episode at a time"]["tokens_per_s"],
                                               SEQUENTIAL_TARGET)}
    print(f"\nGRPO rollouts, {args.prompts} prompts x {args.generations} episodes, {model}, "
          f"{'GPU' if torch.cuda.is_available() else 'CPU'}")
    print("| rollouts | generated tokens/s | tokens / episode | tool-call rate | tools, batched / this | target |")
    print("|---|---|---|---|---|---|")
    for name, result in results.items():
        ratio, target = ratios.get(name, (None, None))
        verdict = "-" if ratio is None else f"{ratio:.2f}x {'PASS' if ratio >= target else 'miss'}"
        print(f"| {name} | {result['tokens_per_s']:,.0f} | {result['tokens_per_episode']:.1f} | "
              f"{result['call_rate']:.0%} | {verdict} | {'-' if target is None else f'>= {target}x'} |", flush=True)
    return {"results": results, "ratios": {name: ratio for name, (ratio, _) in ratios.items()}}


if __name__ == "__main__":
    main()
