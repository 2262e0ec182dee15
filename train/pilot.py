"""The pilot's summary: evaluate every finished SFT run on held-out rotated OCR, compare the modes with
confidence intervals over seeds, and draw TIR-Bench's Figure 6.

    python train/pilot.py runs/pilot_rotated_ocr/qwen2_5_vl_7b              # after recipes/slurm/pilot_sweep.sh
    python train/pilot.py runs/pilot-toy/runs --jobs 2 --max_tokens 64      # other flags go to eval/run_vllm.py

A run is a folder under RUNS_DIR that train/sft.py finished (its `tirlab_sft.json` names the mode, the data
scale, the seed, the optimizer steps and the training tokens). Each run is evaluated by eval/run_vllm.py in a
process of its own, into `<run>/eval` (its output in `<run>/eval.log`): agentic runs with the rotate tool,
direct runs without tools, both on held-out tasks drawn the way the run's training data was (the record's
`eval_tasks`, else the pilot's rotated OCR; seeds neither the data's train nor its test split used), greedy,
at the image size the run trained with. A finished evaluation is reused, an interrupted one resumes.

Arms. Runs are paired by data scale and seed; in each pair the agentic run is the reference. A direct run
that took as many optimizer steps as its agentic run is in the `equal_steps` arm; one that processed as
many training tokens (within COMPUTE_TOLERANCE; tokens count image tokens and exclude padding, train/sft.py's
`train_tokens`) is in the `equal_compute` arm. Training FLOPs in transformers' estimate are 6 x parameters x
tokens, so equal tokens is equal FLOPs for one model. A direct run that matches neither is listed, in no arm.

Statistics. Per cell (mode x data scale x arm): the mean accuracy over seeds with a 95% Student-t interval
(none for a single seed), and the gap agentic - direct as a paired difference over seeds with its t interval.
Per run: the accuracy on n tasks with its 95% Wilson interval.

Writes RUNS_DIR/pilot.json (every number), pilot.md (the tables) and figure6.png: (a) the training loss of
both modes against optimizer steps, mean over seeds with a min-max band, at the largest data scale they
share in the equal-steps arm; (b) accuracy against data scale per arm, with the t intervals as error bars.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if __name__ == "__main__":  # first, while this process is small: the evaluation it runs ends with it
    from runtime.lifecycle import supervise

    supervise()

from eval.config import TOOL_MODES  # noqa: E402
from runtime import cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# train/sft.py's run record and LoRA merge folder, named here rather than imported: importing train/sft.py
# imports TRL (seconds), and the sweep asks this module for matched steps once per run
RUN_RECORD = "tirlab_sft.json"
MERGED = "merged"
TOOLS = {"agentic": "on", "direct": "none"}  # training mode -> eval's --tools
TASK = "rotated_ocr"  # held-out tasks for runs whose record names none
ARMS = ("equal_steps", "equal_compute")
COMPUTE_TOLERANCE = 0.05  # a direct run within 5% of its agentic run's training tokens is compute-matched
CONFIDENCE = 0.95
Z_95 = 1.959963984540054  # the standard normal's 97.5% quantile, for Wilson intervals
LOG_TAIL = 40  # lines of a failed evaluation's log shown with the error


# ---- statistics -----------------------------------------------------------------------------------------

def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz method)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 400):
        for numerator in (m * (b - m) * x / ((qam + 2 * m) * (a + 2 * m)),
                          -(a + m) * (qab + m) * x / ((a + 2 * m) * (qap + 2 * m))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0 or x >= 1.0:
        return max(0.0, min(1.0, x))
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):  # the fraction converges fast here; else use the symmetry
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(q: float, df: float) -> float:
    """Student t's q-quantile (scipy.stats.t.ppf), by bisection on its CDF; the project has no scipy."""
    if not 0.5 <= q < 1 or df <= 0:
        raise ValueError(f"t_quantile takes 0.5 <= q < 1 and df > 0, got q={q}, df={df}")
    high = 1.0
    while t_cdf(high, df) < q:
        high *= 2.0
    low = 0.0
    for _ in range(200):
        middle = (low + high) / 2.0
        low, high = (middle, high) if t_cdf(middle, df) < q else (low, middle)
        if high - low < 1e-13 * high:
            break
    return (low + high) / 2.0


def mean_interval(values: list[float], confidence: float = CONFIDENCE) -> dict:
    """Mean, sample standard deviation and the Student-t confidence interval of the mean (None below 2 values)."""
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return {"n": n, "mean": mean, "sd": None, "half_width": None, "low": None, "high": None}
    sd = statistics.stdev(values)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "half_width": half, "low": mean - half, "high": mean + half}


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95% at the default z)."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"wilson_interval needs 0 <= successes <= n and n >= 1, got {successes}/{n}")
    p, z2 = successes / n, z * z
    center = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


# ---- runs and arms --------------------------------------------------------------------------------------

def find_runs(runs_dir: Path) -> list[dict]:
    """The finished runs under runs_dir, sorted by mode, data scale and seed."""
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
    return sorted(runs, key=lambda run: (run["mode"], run["train_samples"], run.get("seed") or 0, run["name"]))


def assign_arms(runs: list[dict]) -> None:
    """Set each run's `arms` (agentic: the arms its pair has; direct: the one it matches, or none) and a direct
    run's `compute_ratio` (its training tokens over its agentic run's)."""
    agentic = {}
    for run in runs:
        if run["mode"] == "agentic":
            key = (run["train_samples"], run.get("seed"))
            if key in agentic:
                raise ValueError(f"two agentic runs at {key[0]} samples and seed {key[1]}: {agentic[key]['name']} "
                                 f"and {run['name']}; each direct run is compared with one agentic run")
            agentic[key] = run
            run["arms"] = []
    for run in runs:
        if run["mode"] != "direct":
            continue
        reference = agentic.get((run["train_samples"], run.get("seed")))
        run["arms"], run["compute_ratio"] = [], None
        if reference is None:
            continue
        if run.get("train_tokens") and reference.get("train_tokens"):
            run["compute_ratio"] = run["train_tokens"] / reference["train_tokens"]
        if run.get("global_step") == reference.get("global_step"):
            run["arms"] = ["equal_steps"]
        elif run["compute_ratio"] is not None and abs(run["compute_ratio"] - 1) <= COMPUTE_TOLERANCE:
            run["arms"] = ["equal_compute"]
        for arm in run["arms"]:
            if arm in reference["arms"]:
                raise ValueError(f"two direct runs in the {arm} arm at {run['train_samples']} samples and seed "
                                 f"{run.get('seed')} (one of them {run['name']}); keep one per arm, scale and seed")
            reference["arms"].append(arm)
    for run in runs:
        run["arms"] = [arm for arm in ARMS if arm in run["arms"]]


def matched_steps(agentic_run: Path, direct_run: Path) -> int:
    """Optimizer steps a direct run needs to process as many training tokens as `agentic_run`, at the tokens
    per step `direct_run` (a finished direct run at the same data scale and seed) processed."""
    records = {}
    for role, folder in (("agentic", agentic_run), ("direct", direct_run)):
        path = Path(folder) / RUN_RECORD
        if not path.is_file():
            raise ValueError(f"{folder} is not a finished SFT run (no {RUN_RECORD})")
        records[role] = json.loads(path.read_text())
        if records[role].get("mode") != role or not records[role].get("train_tokens"):
            raise ValueError(f"{path}: expected a {role} run with train_tokens, got mode "
                             f"{records[role].get('mode')!r}, train_tokens {records[role].get('train_tokens')!r}")
    per_step = records["direct"]["train_tokens"] / records["direct"]["global_step"]
    return math.ceil(records["agentic"]["train_tokens"] / per_step)


# ---- evaluation -----------------------------------------------------------------------------------------

def evaluate(run: dict, per_task: int, eval_args: list[str]) -> dict:
    """Evaluate one run with eval/run_vllm.py (resumed if it was interrupted); returns its overall numbers."""
    tools = TOOLS[run["mode"]]
    (mode,) = TOOL_MODES[tools]  # the mode eval's records and summary use
    run_dir = Path(run["dir"]).resolve()
    model = run_dir / MERGED if run["lora"] else run_dir  # LoRA: the adapter merged into the base model
    out = run_dir / "eval"
    difficulty = (run.get("generation") or {}).get("difficulty", "medium")
    command = [sys.executable, str(ROOT / "eval" / "run_vllm.py"), "--model", str(model),
               "--tasks", *(run.get("eval_tasks") or [TASK]), "--per_task", str(per_task),
               "--difficulty", difficulty, "--tools", tools, "--out", str(out),
               "--max_pixels", "0", *eval_args]  # 0: the run's own processor, i.e. its training image size
    log = run_dir / "eval.log"
    print(f"== {run['name']}: {' '.join(command[1:])} (log: {log})", flush=True)
    with open(log, "w", encoding="utf-8") as output:
        returncode = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT).returncode
    if returncode:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL:])
        raise RuntimeError(f"{tail}\nthe evaluation of {run['dir']} failed (its log, {log}, ends as above); fix "
                           "the cause and run the same command again: finished evaluations are kept, this one "
                           "resumes")
    overall = json.loads((out / "summary.json").read_text())["modes"][mode]["overall"]
    result = {key: overall[key] for key in ("n", "accuracy", "errors", "tool_call_rate", "calls_per_episode",
                                            "turns_mean")}
    result["correct"] = round(overall["accuracy"] * overall["n"])  # exact match scores each task 0 or 1
    result["wilson"] = list(wilson_interval(result["correct"], overall["n"]))
    print(f"   {run['name']}: {100 * result['accuracy']:.1f}% of {result['n']}", flush=True)
    return result


def loss_curve(run: dict) -> list[list[float]]:
    """(optimizer step, training loss) from the run's trainer_state.json."""
    state = json.loads((Path(run["dir"]) / "trainer_state.json").read_text())
    return [[entry["step"], entry["loss"]] for entry in state["log_history"] if "loss" in entry]


# ---- cells ----------------------------------------------------------------------------------------------

def cells(runs: list[dict]) -> list[dict]:
    """Per (arm, data scale, mode): the seeds, their accuracies and the t interval of the mean; per (arm, scale)
    the agentic - direct gap paired by seed."""
    groups = defaultdict(list)
    for run in runs:
        for arm in run["arms"]:
            groups[arm, run["train_samples"], run["mode"]].append(run)
    result = []
    for (arm, scale, mode), members in sorted(groups.items(), key=lambda item: (ARMS.index(item[0][0]),
                                                                                 *item[0][1:])):
        accuracies = [run["eval"]["accuracy"] for run in members]
        final_losses = [run["loss"][-1][1] for run in members if run["loss"]]
        result.append({"arm": arm, "train_samples": scale, "mode": mode,
                       "seeds": [run.get("seed") for run in members], "runs": [run["name"] for run in members],
                       "accuracies": accuracies, "accuracy": mean_interval(accuracies),
                       "steps": statistics.fmean(run["global_step"] for run in members),
                       "train_tokens": _mean_of(run.get("train_tokens") for run in members),
                       "train_runtime_s": _mean_of(run.get("train_runtime_s") for run in members),
                       "final_loss": mean_interval(final_losses) if final_losses else None})
    return result


def _mean_of(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def gaps(runs: list[dict]) -> list[dict]:
    """Per (arm, data scale): agentic - direct accuracy, paired by seed, with its t interval."""
    by_key = {(run["mode"], arm, run["train_samples"], run.get("seed")): run for run in runs for arm in run["arms"]}
    result = []
    for arm in ARMS:
        for scale in sorted({run["train_samples"] for run in runs if arm in run["arms"]}):
            seeds = sorted({seed for mode, a, s, seed in by_key if a == arm and s == scale and mode == "direct"},
                           key=lambda seed: (seed is None, seed))
            differences = [by_key["agentic", arm, scale, seed]["eval"]["accuracy"]
                           - by_key["direct", arm, scale, seed]["eval"]["accuracy"] for seed in seeds]
            if differences:
                result.append({"arm": arm, "train_samples": scale, "seeds": seeds, "differences": differences,
                               "gap": mean_interval(differences)})
    return result


def summarize(runs_dir: Path, per_task: int, eval_args: list[str], jobs: int = 1) -> dict:
    runs = find_runs(runs_dir)
    assign_arms(runs)
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # each evaluation is a process of its own
        results = list(pool.map(lambda run: evaluate(run, per_task, eval_args), runs))
    for run, result in zip(runs, results):
        run["eval"] = result
        run["loss"] = loss_curve(run)
    shared = sorted({r["train_samples"] for r in runs if r["mode"] == "agentic" and "equal_steps" in r["arms"]}
                    & {r["train_samples"] for r in runs if r["mode"] == "direct" and "equal_steps" in r["arms"]})
    summary = {"runs_dir": str(runs_dir), "per_task": per_task, "eval_args": eval_args, "confidence": CONFIDENCE,
               "compute": "training tokens (train/sft.py's train_tokens: image tokens in, padding out)",
               "loss_scale": shared[-1] if shared else None, "cells": cells(runs), "gaps": gaps(runs),
               "runs": [{k: v for k, v in run.items() if k != "dir"} for run in runs]}
    (runs_dir / "pilot.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    draw(summary, runs_dir / "figure6.png")
    (runs_dir / "pilot.md").write_text(markdown(summary), encoding="utf-8")
    return summary


# ---- the figure and the tables --------------------------------------------------------------------------

COLORS = {"agentic": "tab:red", "direct": "tab:blue"}
LABELS = {"agentic": "tool-use SFT", "direct": "direct SFT"}
SERIES = (  # panel (b): what each line shows
    ("agentic", "equal_steps", "tool-use SFT", dict(color="tab:red", marker="o", linestyle="-")),
    ("direct", "equal_steps", "direct SFT, equal steps", dict(color="tab:blue", marker="s", linestyle="--")),
    ("direct", "equal_compute", "direct SFT, equal compute", dict(color="tab:green", marker="^", linestyle=":")),
)


def loss_band(runs: list[dict]) -> tuple[list, list, list, list] | None:
    """Steps logged by every run, and the mean, min and max loss over the runs at each."""
    curves = [dict((step, loss) for step, loss in run["loss"]) for run in runs if run["loss"]]
    if not curves:
        return None
    steps = sorted(set.intersection(*(set(curve) for curve in curves)))
    values = [[curve[step] for curve in curves] for step in steps]
    return steps, [statistics.fmean(v) for v in values], [min(v) for v in values], [max(v) for v in values]


def draw(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode in TOOLS:
        runs = [r for r in summary["runs"] if r["mode"] == mode and r["train_samples"] == summary["loss_scale"]
                and "equal_steps" in r["arms"]]
        band = loss_band(runs)
        if band:
            steps, mean, low, high = band
            loss_ax.plot(steps, mean, color=COLORS[mode], label=f"{LABELS[mode]} ({len(runs)} seeds)")
            loss_ax.fill_between(steps, low, high, color=COLORS[mode], alpha=0.2, linewidth=0)
    loss_ax.set(title=f"(a) training loss, {summary['loss_scale']} samples, equal steps", xlabel="optimizer step",
                ylabel="loss (assistant tokens)")
    tops = [5.0]
    for mode, arm, label, style in SERIES:
        points = [c for c in summary["cells"] if c["mode"] == mode and c["arm"] == arm]
        if not points:
            continue
        x = [c["train_samples"] for c in points]
        y = [100 * c["accuracy"]["mean"] for c in points]
        errors = [[100 * (c["accuracy"]["mean"] - c["accuracy"]["low"]) if c["accuracy"]["low"] is not None else 0
                   for c in points],
                  [100 * (c["accuracy"]["high"] - c["accuracy"]["mean"]) if c["accuracy"]["high"] is not None else 0
                   for c in points]]
        seeds = max(c["accuracy"]["n"] for c in points)
        acc_ax.errorbar(x, y, yerr=errors, capsize=4, label=f"{label} (n={seeds} seeds)", **style)
        tops += [value + error for value, error in zip(y, errors[1])]
    scales = sorted({c["train_samples"] for c in summary["cells"]})
    if len(scales) > 1 and scales[-1] / scales[0] >= 8:
        acc_ax.set_xscale("log")
    acc_ax.set_xticks(scales, [str(s) for s in scales])
    acc_ax.set_ylim(0, min(105.0, 1.1 * max(tops)))
    acc_ax.set(title=f"(b) exact match on {summary['per_task']} held-out tasks (95% CI)",
               xlabel="training samples", ylabel="accuracy (%)")
    for ax in (loss_ax, acc_ax):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(summary: dict) -> str:
    cell = {(c["arm"], c["train_samples"], c["mode"]): c for c in summary["cells"]}
    gap = {(g["arm"], g["train_samples"]): g for g in summary["gaps"]}
    scales = sorted({c["train_samples"] for c in summary["cells"]})
    lines = [f"# Rotated-OCR pilot: {summary['runs_dir']}", "",
             f"Each run evaluated on {summary['per_task']} held-out rotated-OCR tasks, greedy (`eval/run_vllm.py`; "
             "agentic runs with the rotate tool, direct runs without). Accuracy in %: mean over seeds "
             "[95% Student-t interval]; the gap is agentic - direct paired by seed. Equal compute: the direct run "
             f"processed as many {summary['compute']} as the agentic run at the same scale and seed. Figure: "
             "`figure6.png`; every number: `pilot.json`.", "",
             "## Accuracy by arm", "",
             "| training samples | seeds | tool-use SFT | direct, equal steps | gap, equal steps | "
             "direct, equal compute | gap, equal compute | direct steps / agentic steps (equal compute) |",
             "|---|---|---|---|---|---|---|---|"]
    for scale in scales:
        agentic = cell.get(("equal_steps", scale, "agentic")) or cell.get(("equal_compute", scale, "agentic"))
        steps = cell.get(("equal_steps", scale, "direct"))
        compute = cell.get(("equal_compute", scale, "direct"))
        ratio = f"{compute['steps'] / agentic['steps']:.2f}" if compute and agentic else "-"
        lines.append(f"| {scale} | {agentic['accuracy']['n'] if agentic else '-'} | "
                     f"{_pct_interval(agentic and agentic['accuracy'])} | "
                     f"{_pct_interval(steps and steps['accuracy'])} | "
                     f"{_pct_interval(gap.get(('equal_steps', scale), {}).get('gap'))} | "
                     f"{_pct_interval(compute and compute['accuracy'])} | "
                     f"{_pct_interval(gap.get(('equal_compute', scale), {}).get('gap'))} | {ratio} |")
    lines += ["", "## Training loss", "",
              "Mean over seeds [95% t interval] of the first and the last logged loss (mean over the assistant tokens "
              "of a logging window), per cell.", "",
              "| arm | mode | training samples | steps | first loss | final loss | training tokens | "
              "training time (s) |", "|---|---|---|---|---|---|---|---|"]
    for c in summary["cells"]:
        members = [r for r in summary["runs"] if r["name"] in c["runs"] and r["loss"]]
        first = mean_interval([r["loss"][0][1] for r in members]) if members else None
        tokens = f"{c['train_tokens']:,.0f}" if c["train_tokens"] else "-"
        runtime = f"{c['train_runtime_s']:.0f}" if c["train_runtime_s"] else "-"
        lines.append(f"| {c['arm']} | {c['mode']} | {c['train_samples']} | {c['steps']:g} | {_interval(first)} | "
                     f"{_interval(c['final_loss'])} | {tokens} | {runtime} |")
    lines += ["", "## Every run", "",
              "Accuracy in % with its 95% Wilson interval over the held-out tasks.", "",
              "| run | mode | arm | training samples | seed | steps | training tokens | tokens / agentic | "
              "final loss | accuracy | tool-call rate | errors |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in summary["runs"]:
        result, final = run["eval"], run["loss"][-1][1] if run["loss"] else float("nan")
        low, high = result["wilson"]
        ratio = f"{run['compute_ratio']:.2f}" if run.get("compute_ratio") else "-"
        tokens = f"{run['train_tokens']:,}" if run.get("train_tokens") else "-"
        lines.append(f"| {run['name']} | {run['mode']} | {', '.join(run['arms']) or 'none'} | "
                     f"{run['train_samples']} | {run.get('seed')} | {run['global_step']} | {tokens} | {ratio} | "
                     f"{final:.3f} | {100 * result['accuracy']:.1f} [{100 * low:.1f}, {100 * high:.1f}] "
                     f"({result['correct']}/{result['n']}) | {100 * result['tool_call_rate']:.0f}% | "
                     f"{result['errors']} |")
    return "\n".join(lines) + "\n"


def _interval(stats: dict | None, scale: float = 1.0, digits: int = 3) -> str:
    """"mean [low, high]" (the mean alone for one seed), times `scale`."""
    if not stats:
        return "-"
    mean, low, high = (None if stats[k] is None else f"{scale * stats[k]:.{digits}f}" for k in ("mean", "low", "high"))
    return mean if low is None else f"{mean} [{low}, {high}]"


def _pct_interval(stats: dict | None) -> str:
    return _interval(stats, scale=100, digits=1)


def main(argv: list[str] | None = None) -> dict:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs_dir", type=Path, help="the folder holding the sweep's runs (one folder per run)")
    parser.add_argument("--per_task", type=int, default=500, help="held-out rotated-OCR tasks per run")
    parser.add_argument("--jobs", type=int, default=1, help="evaluations at once (each starts its own engine)")
    args, eval_args = parser.parse_known_args(argv)
    if args.per_task < 1:
        parser.error("--per_task must be at least 1")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    try:
        summary = summarize(args.runs_dir, args.per_task, eval_args, args.jobs)
    except ValueError as err:
        parser.error(str(err))
    except RuntimeError as err:
        parser.exit(1, f"{parser.prog}: {err}\n")
    print(markdown(summary))
    print(f"figure: {args.runs_dir / 'figure6.png'}")
    return summary


if __name__ == "__main__":
    sys.exit(cli.run(main))
