"""SFT throughput: tokens/s per training step, and the share of each step spent waiting for its batch.

    python train/bench.py                      # tiny Qwen2.5-VL on the pilot's agentic rows, batch 8, this CPU
    python train/bench.py --model Qwen/Qwen2.5-VL-7B-Instruct --steps 20   # a GPU: bf16, peak memory too

Each configuration runs train/sft.py's own trainer (`build_trainer`) with a callback that timestamps every
step: compute is on_step_begin -> on_step_end, the data wait is the gap before on_step_begin, where the
trainer fetches the next batch (encoding and collation in the main process, or waiting for the DataLoader's
workers). The first steps are left out (start-up, the workers' first batches).
Without workers, the time in `collate` alone (padding and concatenation of the encoded rows) is reported
too. Target: data collation at most 5% of step time at batch 8 on CPU.
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

from transformers import TrainerCallback  # noqa: E402

TARGET_SHARE = 0.05


class TimedCollator:
    """The trainer's collator, timed (in the training process; with DataLoader workers it runs in them)."""

    def __init__(self, collator):
        self.collator = collator
        self.seconds = []

    def __call__(self, examples):
        start = time.perf_counter()
        batch = self.collator(examples)
        self.seconds.append(time.perf_counter() - start)
        return batch


class StepTimer(TrainerCallback):
    """Timestamps at the start and the end of every step. On a GPU the host runs ahead of the kernels it
    queued, so each timestamp first waits for them (`sync`): otherwise a step's compute would be counted in
    the next step's data wait."""

    def __init__(self, sync=None):
        self.begins, self.ends, self.tokens = [], [], []
        self.sync = sync or (lambda: None)

    def on_step_begin(self, args, state, control, **kwargs):
        self.sync()
        self.begins.append(time.perf_counter())

    def on_step_end(self, args, state, control, **kwargs):
        self.sync()
        self.ends.append(time.perf_counter())
        self.tokens.append(state.num_input_tokens_seen)

    def result(self, skip: int) -> dict:
        waits = [self.begins[k] - self.ends[k - 1] for k in range(skip, len(self.ends))]
        computes = [self.ends[k] - self.begins[k] for k in range(skip, len(self.ends))]
        tokens = [self.tokens[k] - self.tokens[k - 1] for k in range(skip, len(self.ends))]
        total = sum(waits) + sum(computes)
        return {"steps": len(computes), "step_s": total / len(computes), "data_wait_share": sum(waits) / total,
                "tokens_per_step": statistics.mean(tokens), "tokens_per_s": sum(tokens) / total,
                "tokens_seen": self.tokens[-1]}


def run(model: str, data: str, workers: int, batch: int, steps: int, skip: int, out: str) -> dict:
    import torch

    from train.sft import build_trainer, parse

    gpu = torch.cuda.is_available()
    args = ["--model_name_or_path", model, "--dataset_name", data, "--mode", "agentic", "--output_dir", out,
            "--per_device_train_batch_size", str(batch), "--max_steps", str(steps + skip),
            "--dataloader_num_workers", str(workers),
            "--save_strategy", "no", "--report_to", "none", "--logging_steps", str(10 * steps),
            "--disable_tqdm", "true", "--learning_rate", "1e-5"]
    if gpu:
        args += ["--dtype", "bfloat16", "--max_pixels", str(1280 * 28 * 28)]
    else:
        args += ["--use_cpu", "--gradient_checkpointing", "false"]
    script_args, training_args, model_args = parse(args)
    training_args.include_num_input_tokens_seen = "non_padding"  # the flag only parses as a boolean
    trainer, _ = build_trainer(script_args, training_args, model_args)
    timer, collator = StepTimer(torch.cuda.synchronize if gpu else None), TimedCollator(trainer.data_collator)
    trainer.add_callback(timer)
    trainer.data_collator = collator
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    result = timer.result(skip)
    if workers == 0:  # one collate per step
        result["collate_share"] = statistics.mean(collator.seconds) / result["step_s"]
    if gpu:
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="default: a tiny random-weight Qwen2.5-VL built locally")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per configuration")
    parser.add_argument("--skip", type=int, default=3, help="first steps left out of the timing")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1],
                        help="DataLoader workers per configuration (the recipes use 4)")
    args = parser.parse_args(argv)

    from data_gen.make import main as make_data
    from runtime.tiny_model import build_model

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(build_model("qwen2_5_vl", Path(tmp) / "model"))
        n = args.batch * (args.steps + args.skip)
        make_data(["pilot", "--n", str(n), "--n-test", "0", "--out", f"{tmp}/data", "--workers", "2"])
        print(f"\nSFT steps, agentic pilot rows, batch {args.batch}, {args.steps} timed steps ({model})")
        print("| DataLoader workers | step (ms) | tokens/step | tokens/s | collate / step | data wait / step | "
              "target |")
        print("|---|---|---|---|---|---|---|")
        for workers in args.workers:
            r = run(model, f"{tmp}/data", workers, args.batch, args.steps, args.skip, f"{tmp}/out-{workers}")
            verdict = "PASS" if r["data_wait_share"] <= TARGET_SHARE else "over"
            memory = f", peak {r['peak_memory_gib']:.1f} GiB" if "peak_memory_gib" in r else ""
            collate = f"{100 * r['collate_share']:.2f}%" if "collate_share" in r else "(in workers)"
            print(f"| {workers} | {1000 * r['step_s']:.0f} | {r['tokens_per_step']:.0f} | {r['tokens_per_s']:,.0f} | "
                  f"{collate} | {100 * r['data_wait_share']:.1f}% | <= {100 * TARGET_SHARE:.0f}%: {verdict}{memory} |",
                  flush=True)


if __name__ == "__main__":
    main()
