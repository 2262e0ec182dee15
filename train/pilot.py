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

Statistics. Per run: the accuracy on n tasks with its 95% Wilson interval. Per cell (mode x data scale x
arm): the mean accuracy over seeds with a 95% two-level bootstrap interval (seeds with replacement, then each
drawn run's tasks; none for a single seed) and how many seeds read (READS); the gap agentic - direct paired by
seed, bootstrapped over the pairs; per mode, the slope of accuracy over log2(data scale) with its interval;
the paper's three findings as tests on these. `--base MODEL`: that model's zero-shot accuracy too.

Writes RUNS_DIR/pilot.json (every number), pilot.md (the tables) and figure6.png: (a) the training loss of
both modes against optimizer steps, mean over seeds with a min-max band, at the largest data scale they
share in the equal-steps arm; (b) accuracy against data scale per arm, with the intervals as error bars
(and the base's zero-shot accuracy at 0). `--restate` writes them again from pilot.json, evaluating nothing.
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

import numpy as np

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
BOOTSTRAP_RESAMPLES = 20_000
BOOTSTRAP_SEED = 0  # the intervals are a function of the results: the same runs give the same tables
READS = 0.5  # a run "reads" when it gets at least half of its held-out words exactly right
LOG_TAIL = 40  # lines of a failed evaluation's log shown with the error


# ---- statistics -----------------------------------------------------------------------------------------

def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95% at the default z)."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"wilson_interval needs 0 <= successes <= n and n >= 1, got {successes}/{n}")
    p, z2 = successes / n, z * z
    center = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # at 0 or n the bound is exactly 0 or 1 (the formula leaves a rounding error there)
    return (0.0 if successes == 0 else max(0.0, center - half)), (1.0 if successes == n else min(1.0, center + half))


def _resampled_accuracies(results: list[dict], rng: np.random.Generator, picks: np.ndarray | None = None
                          ) -> np.ndarray:
    """BOOTSTRAP_RESAMPLES x len(results) accuracies of a two-level bootstrap: the seeds (runs) drawn with
    replacement (`picks`, when given: the same draws for paired runs), then each drawn run's held-out tasks (a
    binomial draw at its own accuracy)."""
    correct = np.array([r["correct"] for r in results])
    n = np.array([r["n"] for r in results])
    if picks is None:
        picks = rng.integers(0, len(results), size=(BOOTSTRAP_RESAMPLES, len(results)))
    return rng.binomial(n[picks], correct[picks] / n[picks]) / n[picks]


def _percentiles(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    low, high = np.quantile(draws, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def bootstrap_mean(results: list[dict], confidence: float = CONFIDENCE) -> dict:
    """The mean accuracy of a cell's runs (one a seed; each {"correct", "n"}) with a two-level percentile
    bootstrap interval: it counts both the seed-to-seed spread and each run's task sampling, and it stays within
    0-1 (the resampled means are accuracies). None for a single run."""
    accuracies = [r["correct"] / r["n"] for r in results]
    mean = statistics.fmean(accuracies)
    if len(results) < 2:
        return {"n": len(results), "mean": mean, "low": None, "high": None}
    draws = _resampled_accuracies(results, np.random.default_rng(BOOTSTRAP_SEED)).mean(axis=1)
    return {"n": len(results), "mean": mean, **dict(zip(("low", "high"), _percentiles(draws, confidence)))}


def paired_gap(agentic: list[dict], direct: list[dict], confidence: float = CONFIDENCE) -> dict:
    """agentic - direct accuracy over seed pairs (agentic[k] and direct[k] share a seed): the mean difference with
    a two-level bootstrap interval that draws the pairs together (so the seed's shared part cancels), within
    -1..1; and how many pairs favour each mode."""
    if len(agentic) != len(direct) or not agentic:
        raise ValueError(f"paired_gap needs as many agentic as direct runs, at least one, got {len(agentic)} and "
                         f"{len(direct)}")
    differences = [a["correct"] / a["n"] - d["correct"] / d["n"] for a, d in zip(agentic, direct)]
    result = {"n": len(differences), "mean": statistics.fmean(differences), "low": None, "high": None,
              "agentic_ahead": sum(d > 0 for d in differences), "direct_ahead": sum(d < 0 for d in differences)}
    if len(differences) > 1:
        rng = np.random.default_rng(BOOTSTRAP_SEED)
        picks = rng.integers(0, len(differences), size=(BOOTSTRAP_RESAMPLES, len(differences)))
        draws = (_resampled_accuracies(agentic, rng, picks).mean(axis=1)
                 - _resampled_accuracies(direct, rng, picks).mean(axis=1))
        result["low"], result["high"] = _percentiles(draws, confidence)
    return result


def scale_slope(by_scale: dict[int, list[dict]], confidence: float = CONFIDENCE) -> dict:
    """Does accuracy improve with data? The least-squares slope of run accuracy on log2(training samples), in
    accuracy per doubling of the data, with a two-level bootstrap interval (seeds redrawn within each scale, then
    each run's tasks); and the change from the smallest to the largest scale with its interval. None below two
    scales."""
    scales = sorted(by_scale)
    if len(scales) < 2:
        return {"scales": scales, "slope": None, "low": None, "high": None, "change": None}
    x = np.concatenate([np.full(len(by_scale[s]), math.log2(s)) for s in scales])
    x_centered = x - x.mean()
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = np.concatenate([_resampled_accuracies(by_scale[s], rng) for s in scales], axis=1)
    observed = np.concatenate([[r["correct"] / r["n"] for r in by_scale[s]] for s in scales])
    slopes = draws @ x_centered / (x_centered @ x_centered)
    first, last = len(by_scale[scales[0]]), len(by_scale[scales[-1]])
    changes = draws[:, -last:].mean(axis=1) - draws[:, :first].mean(axis=1)
    return {"scales": scales, "slope": float(observed @ x_centered / (x_centered @ x_centered)),
            **dict(zip(("low", "high"), _percentiles(slopes, confidence))),
            "change": {"mean": float(observed[-last:].mean() - observed[:first].mean()),
                       **dict(zip(("low", "high"), _percentiles(changes, confidence)))}}


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
    run_dir = Path(run["dir"]).resolve()
    model = run_dir / MERGED if run["lora"] else run_dir  # LoRA: the adapter merged into the base model
    difficulty = (run.get("generation") or {}).get("difficulty", "medium")
    return run_eval(run["name"], model, run_dir / "eval", run_dir / "eval.log", TOOLS[run["mode"]],
                    run.get("eval_tasks") or [TASK], difficulty, per_task, eval_args)


def run_eval(name: str, model: Path | str, out: Path, log: Path, tools: str, tasks: list[str], difficulty: str,
             per_task: int, eval_args: list[str]) -> dict:
    (mode,) = TOOL_MODES[tools]  # the mode eval's records and summary use
    command = [sys.executable, str(ROOT / "eval" / "run_vllm.py"), "--model", str(model),
               "--tasks", *tasks, "--per_task", str(per_task), "--difficulty", difficulty, "--tools", tools,
               "--out", str(out), "--max_pixels", "0", *eval_args]  # 0: the model's own processor (training size)
    print(f"== {name}: {' '.join(command[1:])} (log: {log})", flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as output:
        returncode = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT).returncode
    if returncode:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL:])
        raise RuntimeError(f"{tail}\nthe evaluation of {model} failed (its log, {log}, ends as above); fix "
                           "the cause and run the same command again: finished evaluations are kept, this one "
                           "resumes")
    overall = json.loads((out / "summary.json").read_text())["modes"][mode]["overall"]
    result = {key: overall[key] for key in ("n", "accuracy", "errors", "tool_call_rate", "calls_per_episode",
                                            "turns_mean")}
    result["correct"] = round(overall["accuracy"] * overall["n"])  # exact match scores each task 0 or 1
    result["wilson"] = list(wilson_interval(result["correct"], overall["n"]))
    print(f"   {name}: {100 * result['accuracy']:.1f}% of {result['n']}", flush=True)
    return result


def evaluate_base(base: str, runs: list[dict], runs_dir: Path, per_task: int, eval_args: list[str]) -> dict:
    """The zero-shot accuracy of the model the runs were fine-tuned from, on their held-out tasks, without tools
    (it was never taught to call one): the figure's starting point."""
    tasks = {tuple(run.get("eval_tasks") or [TASK]) for run in runs}
    if len(tasks) != 1:
        raise ValueError(f"the runs were evaluated on different tasks ({sorted(tasks)}): one base evaluation "
                         "cannot be the starting point of all of them")
    difficulty = (runs[0].get("generation") or {}).get("difficulty", "medium")
    model = Path(base).resolve() if Path(base).exists() else base  # a folder, or a Hub name
    result = run_eval("base (zero-shot)", model, runs_dir / "base" / "eval", runs_dir / "base" / "eval.log",
                      "none", list(tasks.pop()), difficulty, per_task, eval_args)
    return {"model": str(base), "eval": result}


def loss_curve(run: dict) -> list[list[float]]:
    """(optimizer step, training loss) from the run's trainer_state.json."""
    state = json.loads((Path(run["dir"]) / "trainer_state.json").read_text())
    return [[entry["step"], entry["loss"]] for entry in state["log_history"] if "loss" in entry]


# ---- cells, gaps, trends --------------------------------------------------------------------------------

def cells(runs: list[dict]) -> list[dict]:
    """Per (arm, data scale, mode): the seeds, their accuracies, the mean with its bootstrap interval and how many
    runs read; the steps, tokens and final loss (mean, min, max over seeds)."""
    groups = defaultdict(list)
    for run in runs:
        for arm in run["arms"]:
            groups[arm, run["train_samples"], run["mode"]].append(run)
    result = []
    for (arm, scale, mode), members in sorted(groups.items(), key=lambda item: (ARMS.index(item[0][0]),
                                                                                 *item[0][1:])):
        final_losses = [run["loss"][-1][1] for run in members if run["loss"]]
        result.append({"arm": arm, "train_samples": scale, "mode": mode,
                       "seeds": [run.get("seed") for run in members], "runs": [run["name"] for run in members],
                       "accuracies": [run["eval"]["accuracy"] for run in members],
                       "accuracy": bootstrap_mean([run["eval"] for run in members]),
                       "reading": sum(run["eval"]["accuracy"] >= READS for run in members),
                       "steps": statistics.fmean(run["global_step"] for run in members),
                       "train_tokens": _mean_of(run.get("train_tokens") for run in members),
                       "train_runtime_s": _mean_of(run.get("train_runtime_s") for run in members),
                       "final_loss": _spread(final_losses)})
    return result


def _mean_of(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _spread(values: list[float]) -> dict | None:
    return {"n": len(values), "mean": statistics.fmean(values), "min": min(values), "max": max(values)} if values \
        else None


def gaps(runs: list[dict]) -> list[dict]:
    """Per (arm, data scale): agentic - direct accuracy, paired by seed, with its bootstrap interval."""
    by_key = {(run["mode"], arm, run["train_samples"], run.get("seed")): run for run in runs for arm in run["arms"]}
    result = []
    for arm in ARMS:
        for scale in sorted({run["train_samples"] for run in runs if arm in run["arms"]}):
            seeds = sorted({seed for mode, a, s, seed in by_key if a == arm and s == scale and mode == "direct"},
                           key=lambda seed: (seed is None, seed))
            if seeds:
                agentic = [by_key["agentic", arm, scale, seed]["eval"] for seed in seeds]
                direct = [by_key["direct", arm, scale, seed]["eval"] for seed in seeds]
                result.append({"arm": arm, "train_samples": scale, "seeds": seeds,
                               "differences": [a["accuracy"] - d["accuracy"] for a, d in zip(agentic, direct)],
                               "gap": paired_gap(agentic, direct)})
    return result


def trends(runs: list[dict]) -> list[dict]:
    """Per (arm, mode): the slope of accuracy over the data scales (per doubling) with its interval; the agentic
    runs once (they are every arm's reference)."""
    result = []
    for arm in ARMS:
        for mode in TOOLS:
            if arm != "equal_steps" and mode == "agentic":
                continue  # the agentic runs are the reference of every arm: one trend
            by_scale = defaultdict(list)
            for run in runs:
                if run["mode"] == mode and arm in run["arms"]:
                    by_scale[run["train_samples"]].append(run["eval"])
            if len(by_scale) > 1:
                result.append({"arm": arm, "mode": mode, **scale_slope(dict(by_scale))})
    return result


def findings(summary: dict) -> list[dict]:
    """The paper's three findings, each stated as a test on this sweep's numbers (per arm)."""
    result = []
    agentic = next((t for t in summary["trends"] if t["mode"] == "agentic"), None)  # one trend: every arm's
    for arm in ARMS:
        arm_gaps = [g for g in summary["gaps"] if g["arm"] == arm]
        direct = next((t for t in summary["trends"] if t["mode"] == "direct" and t["arm"] == arm), None)
        if not arm_gaps:
            continue
        ahead = [g["train_samples"] for g in arm_gaps if g["gap"]["low"] is not None and g["gap"]["low"] > 0]
        result.append({"arm": arm, "finding": "tool-use SFT beats direct SFT",
                       "test": "the paired gap's 95% interval lies above 0 at every scale",
                       "holds": len(ahead) == len(arm_gaps),
                       "evidence": f"above 0 at {len(ahead)} of {len(arm_gaps)} scales"})
        if direct and direct["low"] is not None:
            no_gain = direct["low"] <= 0
            below = agentic is not None and agentic["low"] is not None and direct["high"] < agentic["low"]
            result.append({"arm": arm, "finding": "direct SFT gains little from more data",
                           "test": "the direct slope's interval does not lie above 0, or lies below the tool-use "
                                   "slope's",
                           "holds": no_gain or below, "evidence": f"direct slope {_slope_text(direct)}"})
        if agentic and agentic["low"] is not None and arm == "equal_steps":  # stated once
            result.append({"arm": "both", "finding": "tool-use SFT keeps improving with data",
                           "test": "the tool-use slope's interval lies above 0",
                           "holds": agentic["low"] > 0, "evidence": f"tool-use slope {_slope_text(agentic)}"})
    return result


def _slope_text(trend: dict) -> str:
    return f"{100 * trend['slope']:+.1f} [{100 * trend['low']:+.1f}, {100 * trend['high']:+.1f}] points per doubling"


def summarize(runs_dir: Path, per_task: int, eval_args: list[str], jobs: int = 1, base: str | None = None) -> dict:
    runs = find_runs(runs_dir)
    assign_arms(runs)
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # each evaluation is a process of its own
        results = list(pool.map(lambda run: evaluate(run, per_task, eval_args), runs))
    for run, result in zip(runs, results):
        run["eval"] = result
        run["loss"] = loss_curve(run)
    summary = {"runs_dir": str(runs_dir), "per_task": per_task, "eval_args": eval_args,
               "base": evaluate_base(base, runs, runs_dir, per_task, eval_args) if base else None,
               "runs": [{k: v for k, v in run.items() if k != "dir"} for run in runs]}
    return write(tabulate(summary), runs_dir)


def tabulate(summary: dict) -> dict:
    """Cells, gaps, trends and findings from the evaluated runs of a summary (`summary["runs"]`)."""
    runs = summary["runs"]
    shared = sorted({r["train_samples"] for r in runs if r["mode"] == "agentic" and "equal_steps" in r["arms"]}
                    & {r["train_samples"] for r in runs if r["mode"] == "direct" and "equal_steps" in r["arms"]})
    summary = {**summary, "confidence": CONFIDENCE, "reads_threshold": READS,
               "intervals": f"two-level percentile bootstrap ({BOOTSTRAP_RESAMPLES:,} resamples: seeds with "
                            "replacement, then each run's held-out tasks); per run: Wilson",
               "compute": "training tokens (train/sft.py's train_tokens: image tokens in, padding out)",
               "loss_scale": shared[-1] if shared else None, "cells": cells(runs), "gaps": gaps(runs),
               "trends": trends(runs)}
    summary["findings"] = findings(summary)
    summary.pop("runs")
    return {**summary, "runs": runs}  # the runs last: pilot.json reads top-down


def write(summary: dict, folder: Path) -> dict:
    (folder / "pilot.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    draw(summary, folder / "figure6.png")
    (folder / "pilot.md").write_text(markdown(summary), encoding="utf-8")
    return summary


def restate(path: Path) -> dict:
    """pilot.json, pilot.md and figure6.png again from a pilot.json's evaluated runs (no evaluation): the
    tables of an earlier sweep with this module's statistics."""
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
        runs = summary["runs"]
        for run in runs:
            run["eval"]["correct"] = run["eval"].get("correct", round(run["eval"]["accuracy"] * run["eval"]["n"]))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a pilot summary (train/pilot.py's pilot.json): {err}") from err
    keep = ("runs_dir", "per_task", "eval_args", "base", "runs")
    return write(tabulate({key: summary.get(key) for key in keep}), path.parent)


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
    base = summary.get("base")
    if base:  # the fine-tunings' starting point, as the paper's figure draws it
        start = 100 * base["eval"]["accuracy"]
        low, high = (100 * v for v in base["eval"]["wilson"])
        acc_ax.errorbar([0], [start], yerr=[[max(0.0, start - low)], [max(0.0, high - start)]], capsize=4,
                        color="black", marker="D", linestyle="none", label="base model, zero-shot")
    for mode, arm, label, style in SERIES:
        points = [c for c in summary["cells"] if c["mode"] == mode and c["arm"] == arm]
        if not points:
            continue
        x = [c["train_samples"] for c in points]
        y = [100 * c["accuracy"]["mean"] for c in points]
        errors = [[max(0.0, 100 * (c["accuracy"]["mean"] - c["accuracy"]["low"])) if c["accuracy"]["low"] is not None
                   else 0 for c in points],  # max: an interval's end and the mean may differ in the last bit
                  [max(0.0, 100 * (c["accuracy"]["high"] - c["accuracy"]["mean"])) if c["accuracy"]["high"] is not None
                   else 0 for c in points]]
        if base:
            acc_ax.plot([0, x[0]], [start, y[0]], color=style["color"], linestyle=style["linestyle"], alpha=0.5)
        seeds = max(c["accuracy"]["n"] for c in points)
        acc_ax.errorbar(x, y, yerr=errors, capsize=4, label=f"{label} (n={seeds} seeds)", **style)
    scales = sorted({c["train_samples"] for c in summary["cells"]})
    acc_ax.set_xticks(([0] if base else []) + scales, (["0"] if base else []) + [f"{s:,}" for s in scales])
    acc_ax.set_ylim(0, 105)
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
    reads = f"{100 * summary['reads_threshold']:.0f}%"
    lines = [f"# Rotated-OCR pilot: {summary['runs_dir']}", "",
             f"Each run evaluated on {summary['per_task']} held-out rotated-OCR tasks, greedy (`eval/run_vllm.py`; "
             "agentic runs with the rotate tool, direct runs without). Accuracy in %: mean over seeds "
             f"[95% interval: {summary['intervals']}], and how many seeds read (at least {reads} exact). The gap is "
             "agentic - direct paired by seed. Equal compute: the direct run processed as many "
             f"{summary['compute']} as the agentic run at the same scale and seed. Figure: `figure6.png`; every "
             "number: `pilot.json`.", ""]
    base = summary.get("base")
    if base:
        result = base["eval"]
        lines += [f"Base model (`{base['model']}`), zero-shot, no tools: {_run_accuracy(result)}.", ""]
    lines += ["## Accuracy by arm", "",
              "| training samples | tool-use SFT | reads | direct, equal steps | reads | gap, equal steps | "
              "direct, equal compute | reads | gap, equal compute | direct steps / agentic steps (equal compute) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for scale in scales:
        agentic = cell.get(("equal_steps", scale, "agentic")) or cell.get(("equal_compute", scale, "agentic"))
        steps = cell.get(("equal_steps", scale, "direct"))
        compute = cell.get(("equal_compute", scale, "direct"))
        ratio = f"{compute['steps'] / agentic['steps']:.2f}" if compute and agentic else "-"
        lines.append(f"| {scale:,} | {_pct_interval(agentic and agentic['accuracy'])} | {_reading(agentic)} | "
                     f"{_pct_interval(steps and steps['accuracy'])} | {_reading(steps)} | "
                     f"{_gap_text(gap.get(('equal_steps', scale)))} | "
                     f"{_pct_interval(compute and compute['accuracy'])} | {_reading(compute)} | "
                     f"{_gap_text(gap.get(('equal_compute', scale)))} | {ratio} |")
    if summary["trends"]:
        lines += ["", "## Accuracy against data", "",
                  "Least-squares slope of run accuracy on log2(training samples), in points per doubling of the data "
                  "[95% interval], and the change from the smallest to the largest scale.", "",
                  "| arm | mode | scales | slope | smallest -> largest scale |", "|---|---|---|---|---|"]
        for t in summary["trends"]:
            lines.append(f"| {t['arm']} | {t['mode']} | {', '.join(f'{s:,}' for s in t['scales'])} | "
                         f"{_slope_text(t) if t['low'] is not None else '-'} | "
                         f"{_pct_interval(t['change'], signed=True)} |")
    if summary["findings"]:
        lines += ["", "## The paper's findings", "", "| finding | arm | test | here | holds |", "|---|---|---|---|---|"]
        for f in summary["findings"]:
            lines.append(f"| {f['finding']} | {f['arm']} | {f['test']} | {f['evidence']} | "
                         f"{'yes' if f['holds'] else 'no'} |")
    lines += ["", "## Training loss", "",
              "Mean over seeds [min, max] of the first and the last logged loss (mean over the assistant tokens of a "
              "logging window), per cell.", "",
              "| arm | mode | training samples | steps | first loss | final loss | training tokens | "
              "training time (s) |", "|---|---|---|---|---|---|---|---|"]
    for c in summary["cells"]:
        members = [r for r in summary["runs"] if r["name"] in c["runs"] and r["loss"]]
        first = _spread([r["loss"][0][1] for r in members])
        tokens = f"{c['train_tokens']:,.0f}" if c["train_tokens"] else "-"
        runtime = f"{c['train_runtime_s']:.0f}" if c["train_runtime_s"] else "-"
        lines.append(f"| {c['arm']} | {c['mode']} | {c['train_samples']:,} | {c['steps']:g} | {_range_text(first)} | "
                     f"{_range_text(c['final_loss'])} | {tokens} | {runtime} |")
    lines += ["", "## Every run", "",
              "Accuracy in % with its 95% Wilson interval over the held-out tasks.", "",
              "| run | mode | arm | training samples | seed | steps | training tokens | tokens / agentic | "
              "final loss | accuracy | tool-call rate | errors |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in summary["runs"]:
        result, final = run["eval"], run["loss"][-1][1] if run["loss"] else float("nan")
        ratio = f"{run['compute_ratio']:.2f}" if run.get("compute_ratio") else "-"
        tokens = f"{run['train_tokens']:,}" if run.get("train_tokens") else "-"
        lines.append(f"| {run['name']} | {run['mode']} | {', '.join(run['arms']) or 'none'} | "
                     f"{run['train_samples']} | {run.get('seed')} | {run['global_step']} | {tokens} | {ratio} | "
                     f"{final:.3f} | {_run_accuracy(result)} | {100 * result['tool_call_rate']:.0f}% | "
                     f"{result['errors']} |")
    return "\n".join(lines) + "\n"


def _run_accuracy(result: dict) -> str:
    low, high = result["wilson"]
    return f"{100 * result['accuracy']:.1f} [{100 * low:.1f}, {100 * high:.1f}] ({result['correct']}/{result['n']})"


def _pct_interval(stats: dict | None, signed: bool = False) -> str:
    """"mean [low, high]" in % (the mean alone for one seed)."""
    if not stats:
        return "-"
    form = "+.1f" if signed else ".1f"
    mean, low, high = (None if stats[k] is None else f"{100 * stats[k]:{form}}" for k in ("mean", "low", "high"))
    return mean if low is None else f"{mean} [{low}, {high}]"


def _gap_text(gap: dict | None) -> str:
    if not gap:
        return "-"
    stats = gap["gap"]
    return f"{_pct_interval(stats, signed=True)} ({stats['agentic_ahead']} of {stats['n']} seeds ahead)"


def _reading(cell: dict | None) -> str:
    return f"{cell['reading']}/{cell['accuracy']['n']}" if cell else "-"


def _range_text(stats: dict | None) -> str:
    return f"{stats['mean']:.3f} [{stats['min']:.3f}, {stats['max']:.3f}]" if stats else "-"


def main(argv: list[str] | None = None) -> dict:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs_dir", type=Path, help="the folder holding the sweep's runs (one folder per run)")
    parser.add_argument("--per_task", type=int, default=500, help="held-out rotated-OCR tasks per run")
    parser.add_argument("--jobs", type=int, default=1, help="evaluations at once (each starts its own engine)")
    parser.add_argument("--base", help="the model the runs were fine-tuned from (a folder or a Hub name): its "
                                       "zero-shot accuracy on the same held-out tasks is the figure's starting point")
    parser.add_argument("--restate", action="store_true",
                        help="no evaluation: the tables and figure again from RUNS_DIR/pilot.json's evaluated runs")
    args, eval_args = parser.parse_known_args(argv)
    if args.per_task < 1:
        parser.error("--per_task must be at least 1")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    try:
        if args.base is not None:
            cli.check_model(args.base, "--base")
        if args.restate:
            summary = restate(args.runs_dir / "pilot.json")
        else:
            summary = summarize(args.runs_dir, args.per_task, eval_args, args.jobs, args.base)
    except ValueError as err:
        parser.error(str(err))
    except RuntimeError as err:
        parser.exit(1, f"{parser.prog}: {err}\n")
    print(markdown(summary))
    print(f"figure: {args.runs_dir / 'figure6.png'}")
    return summary


if __name__ == "__main__":
    sys.exit(cli.run(main))
