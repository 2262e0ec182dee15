"""The pilot's summary: evaluate every finished SFT run on held-out rotated OCR and draw TIR-Bench's Figure 6.

    python train/pilot.py runs/pilot_rotated_ocr/qwen2_5_vl_7b              # after recipes/slurm/pilot_sweep.sh
    python train/pilot.py runs/pilot-toy --per_task 32 --max_tokens 64      # other flags go to eval/run_vllm.py

A run is a folder under RUNS_DIR that train/sft.py finished (its `tirlab_sft.json` names the mode, the data
scale and the model to load). Each run is evaluated by eval/run_vllm.py in a process of its own, into
`<run>/eval`: agentic runs with the rotate tool, direct runs without tools, both on the synthetic suite's
rotated-OCR tasks (the pilot's generator and settings, on seeds neither its train nor its test split used)
and at the image size the run trained with. A finished evaluation is reused, an interrupted one resumes.

Writes RUNS_DIR/pilot.json (every number), pilot.md (the table) and figure6.png: (a) the training loss of
both modes at the largest data scale they share, (b) accuracy against data scale.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if __name__ == "__main__":  # first, while this process is small: the evaluation it runs ends with it
    from runtime.lifecycle import supervise

    supervise()

from eval.config import TOOL_MODES  # noqa: E402
from runtime import cli  # noqa: E402
from train.sft import MERGED, RUN_RECORD  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"agentic": "on", "direct": "none"}  # training mode -> eval's --tools
TASK = "rotated_ocr"


def find_runs(runs_dir: Path) -> list[dict]:
    """The finished runs under runs_dir, sorted by mode and data scale."""
    if not runs_dir.is_dir():
        raise ValueError(f"{runs_dir} is not a directory of SFT runs (train/sft.py --output_dir RUNS_DIR/<name>)")
    runs = []
    for record in sorted(runs_dir.glob(f"*/{RUN_RECORD}")):
        run = json.loads(record.read_text())
        if run.get("mode") not in TOOLS:
            raise ValueError(f"{record}: unknown mode {run.get('mode')!r}")
        runs.append({**run, "dir": str(record.parent), "name": record.parent.name})
    if not runs:
        unfinished = sorted(p.name for p in runs_dir.iterdir() if p.is_dir())
        raise ValueError(f"no finished SFT run under {runs_dir} (a run writes {RUN_RECORD} when it ends); "
                         f"folders there: {unfinished or 'none'}")
    return sorted(runs, key=lambda run: (run["mode"], run["train_samples"]))


def evaluate(run: dict, per_task: int, eval_args: list[str]) -> dict:
    """Evaluate one run with eval/run_vllm.py (resumed if it was interrupted); returns its overall numbers."""
    tools = TOOLS[run["mode"]]
    (mode,) = TOOL_MODES[tools]  # the mode eval's records and summary use
    run_dir = Path(run["dir"]).resolve()
    model = run_dir / MERGED if run["lora"] else run_dir  # LoRA: the adapter merged into the base model
    out = run_dir / "eval"
    command = [sys.executable, str(ROOT / "eval" / "run_vllm.py"), "--model", str(model), "--tasks", TASK,
               "--per_task", str(per_task), "--difficulty", "medium", "--tools", tools, "--out", str(out),
               "--max_pixels", "0", *eval_args]  # 0: the run's own processor, i.e. its training image size
    print(f"== {run['name']}: {' '.join(command[1:])}", flush=True)
    if subprocess.run(command).returncode:
        raise RuntimeError(f"the evaluation of {run['dir']} failed (its output is above); fix the cause and run "
                           "the same command again: finished evaluations are kept, this one resumes")
    overall = json.loads((out / "summary.json").read_text())["modes"][mode]["overall"]
    return {key: overall[key] for key in ("n", "accuracy", "errors", "tool_call_rate", "calls_per_episode",
                                          "turns_mean")}


def loss_curve(run: dict) -> list[list[float]]:
    """(epoch, training loss) from the run's trainer_state.json."""
    state = json.loads((Path(run["dir"]) / "trainer_state.json").read_text())
    return [[entry["epoch"], entry["loss"]] for entry in state["log_history"] if "loss" in entry]


def summarize(runs_dir: Path, per_task: int, eval_args: list[str]) -> dict:
    runs = find_runs(runs_dir)
    for run in runs:
        run["eval"] = evaluate(run, per_task, eval_args)
        run["loss"] = loss_curve(run)
    shared = sorted({r["train_samples"] for r in runs if r["mode"] == "agentic"}
                    & {r["train_samples"] for r in runs if r["mode"] == "direct"})
    summary = {"runs_dir": str(runs_dir), "task": TASK, "per_task": per_task, "eval_args": eval_args,
               "loss_scale": shared[-1] if shared else None,
               "runs": [{k: v for k, v in run.items() if k != "dir"} for run in runs]}
    (runs_dir / "pilot.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    draw(summary, runs_dir / "figure6.png")
    (runs_dir / "pilot.md").write_text(markdown(summary), encoding="utf-8")
    return summary


def draw(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"agentic": "tab:red", "direct": "tab:blue"}
    labels = {"agentic": "tool-use SFT", "direct": "direct SFT"}
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(10, 4))
    for run in summary["runs"]:
        if run["train_samples"] == summary["loss_scale"] and run["loss"]:
            epochs, losses = zip(*run["loss"])
            loss_ax.plot(epochs, losses, color=colors[run["mode"]], label=labels[run["mode"]])
    loss_ax.set(title=f"(a) training loss, {summary['loss_scale']} samples", xlabel="epoch", ylabel="loss")
    styles = {"agentic": dict(marker="o", linestyle="-"), "direct": dict(marker="s", linestyle="--")}
    for mode in TOOLS:
        points = [(r["train_samples"], 100 * r["eval"]["accuracy"]) for r in summary["runs"] if r["mode"] == mode]
        if points:
            acc_ax.plot(*zip(*points), color=colors[mode], label=labels[mode], **styles[mode])
    accuracies = [100 * r["eval"]["accuracy"] for r in summary["runs"]]
    acc_ax.set_xticks(sorted({r["train_samples"] for r in summary["runs"]}))
    acc_ax.set_ylim(0, max(5.0, 1.15 * max(accuracies)))
    acc_ax.set(title=f"(b) rotated OCR accuracy ({summary['per_task']} held-out)", xlabel="training samples",
               ylabel="accuracy (%)")
    for ax in (loss_ax, acc_ax):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(summary: dict) -> str:
    lines = [f"# Rotated-OCR pilot: {summary['runs_dir']}", "",
             f"Each run evaluated on {summary['per_task']} held-out rotated-OCR tasks (`eval/run_vllm.py`; agentic "
             "runs with the rotate tool, direct runs without). Figure: `figure6.png`; every number: `pilot.json`.",
             "", "| mode | training samples | epochs | final loss | accuracy | tool-call rate | calls/episode | "
             "errors |", "|---|---|---|---|---|---|---|---|"]
    for run in summary["runs"]:
        result, final = run["eval"], run["loss"][-1][1] if run["loss"] else float("nan")
        lines.append(f"| {run['mode']} | {run['train_samples']} | {run['num_train_epochs']:g} | {final:.3f} | "
                     f"{100 * result['accuracy']:.1f}% ({result['n']}) | {100 * result['tool_call_rate']:.0f}% | "
                     f"{result['calls_per_episode']:.2f} | {result['errors']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs_dir", type=Path, help="the folder holding the sweep's runs (one folder per run)")
    parser.add_argument("--per_task", type=int, default=500, help="held-out rotated-OCR tasks per run")
    args, eval_args = parser.parse_known_args(argv)
    if args.per_task < 1:
        parser.error("--per_task must be at least 1")
    try:
        summary = summarize(args.runs_dir, args.per_task, eval_args)
    except ValueError as err:
        parser.error(str(err))
    except RuntimeError as err:
        parser.exit(1, f"{parser.prog}: {err}\n")
    print(markdown(summary))
    print(f"figure: {args.runs_dir / 'figure6.png'}")
    return summary


if __name__ == "__main__":
    sys.exit(cli.run(main))
