"""What each step of the GPU check does. The runner starts each one as its own process:

    python -m gpu_check.steps NAME        # NAME: wheels, tool_parity, tool_bench, sft, grpo, eval, versions

with GPU_CHECK_MODE (gpu or rehearsal), GPU_CHECK_WORK (a scratch folder), GPU_CHECK_WHEELS, GPU_CHECK_SITE (where
the wheels are installed; first on PYTHONPATH), GPU_CHECK_TRACE_DIR (the processes' import traces) and
GPU_CHECK_RESULT (where the step writes its result, see runner.py) in its environment. A step reports what it
measured and what it checked; a step that cannot do its work raises, and the runner reports it as crashed with its
log's tail. The sizes of each mode are in check.py.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from gpu_check import PACKAGE_DIR, ROOT, wheelset
from gpu_check.check import SETTINGS

TOY_CHECKPOINTS = ROOT / "recipes" / "pilot_rotated_ocr" / "toy_cpu" / "checkpoints"
TOY_EVAL_REFERENCE = PACKAGE_DIR / "toy_eval_reference.json"
GRPO_RECIPE = ROOT / "recipes" / "grpo_rotated_ocr" / "toy_cpu" / "grpo.yaml"
NOISE_ALPHA = 0.05  # "equal within noise": a two-sided two-proportion z-test does not reject at this level


@dataclass
class Context:
    mode: str
    work: Path
    wheels: Path
    site: Path
    trace: Path

    @property
    def gpu(self) -> bool:
        return self.mode == "gpu"

    @property
    def settings(self) -> dict:
        return SETTINGS[self.mode]

    @classmethod
    def from_environment(cls) -> "Context":
        env = os.environ
        work = Path(env["GPU_CHECK_WORK"])
        work.mkdir(parents=True, exist_ok=True)
        return cls(env["GPU_CHECK_MODE"], work, Path(env["GPU_CHECK_WHEELS"]), Path(env["GPU_CHECK_SITE"]),
                   Path(env["GPU_CHECK_TRACE_DIR"]))


class Result:
    """What a step writes: metrics, checks (correctness), targets (performance), tables, notes, a headline."""

    def __init__(self):
        self.data = {"metrics": {}, "checks": [], "targets": [], "tables": [], "notes": [], "headline": ""}

    def metric(self, name: str, value) -> None:
        self.data["metrics"][name] = value

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.data["checks"].append({"name": name, "ok": bool(ok), "detail": detail})

    def target(self, name: str, value, target: str, met: bool | None, unit: str = "") -> None:
        self.data["targets"].append({"name": name, "value": value, "target": target, "met": met, "unit": unit})

    def table(self, markdown: str) -> None:
        self.data["tables"].append(markdown)

    def note(self, text: str) -> None:
        self.data["notes"].append(text)

    def headline(self, text: str) -> None:
        self.data["headline"] = text


def run_command(command: list[str], env: dict | None = None) -> tuple[int, str]:
    """Run a command of the step, its output streamed into the step's log; returns (status, output)."""
    print("$ " + " ".join(str(c) for c in command), flush=True)
    process = subprocess.Popen([str(c) for c in command], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=env, text=True, errors="replace")
    chunks = []
    for line in process.stdout:
        sys.stdout.write(line)
        chunks.append(line)
    sys.stdout.flush()
    return process.wait(), "".join(chunks)


def must_run(command: list[str], what: str, env: dict | None = None) -> str:
    status, output = run_command(command, env)
    if status != 0:
        raise RuntimeError(f"{what} exited with status {status} (its output is above)")
    return output


# -- wheels ---------------------------------------------------------------------------------------------
def step_wheels(ctx: Context, result: Result) -> None:
    """The wheel set: complete for the machine, installed where PYTHONPATH points, every requirement met. The
    rehearsal also checks the size of what travels and that the cp312 wheels install for the machine's Python."""
    check = wheelset.check_wheels(ctx.wheels)
    result.check("complete for the machine (machine_packages.txt)", check.ok, "; ".join(check.problems))
    result.metric("wheels", len(check.wheels))
    result.metric("wheels MiB", round(sum(w.size for w in check.wheels) / 2**20, 1))
    rows = ["| wheel | size |", "|---|---:|"] + [f"| {w.path.name} | {wheelset.mib(w.size)} |" for w in check.wheels]
    result.table("\n".join(rows))
    for note in check.notes:
        result.note(note)
    if ctx.gpu:
        install = check.wheels
    else:
        size = wheelset.travel_size(wheel_dir=ctx.wheels)
        result.metric("project MiB", round(size["project_bytes"] / 2**20, 1))
        result.metric("project + wheels MiB", round(size["total_bytes"] / 2**20, 1))
        result.check(f"project + wheels fit the {wheelset.mib(size['limit_bytes'])} that travel", size["fits"],
                     f"{wheelset.mib(size['total_bytes'])}")
        for line in check.unverified:
            result.note(f"unverified here, checked on the machine: {line}")
        problems = wheelset.check_rehearsal_wheels()
        result.check("the machine's versions the rehearsal imitates (rehearsal_wheels.txt) are in place", not problems,
                     "; ".join(problems))
        imitated = ", ".join(f"{n}=={v}" for n, v in wheelset.read_pins(wheelset.REHEARSAL_PINS_FILE).items())
        result.note(f"rehearsal: the machine's versions of {imitated} in place of the venv's")
        try:
            wheelset.install(check.wheels, ctx.work / "site-cp312", for_machine=True)
            result.check("the wheels install for CPython 3.12 manylinux x86_64", True)
        except subprocess.CalledProcessError as err:
            result.check("the wheels install for CPython 3.12 manylinux x86_64", False, str(err))
        # this Python is not the machine's: only pure-Python wheels go on PYTHONPATH; the venv has the others
        install = [w for w in check.wheels if w.pure]
        result.note(f"rehearsal: {len(install)} pure-Python wheels installed on PYTHONPATH, the "
                    f"{len(check.wheels) - len(install)} built for CPython 3.12 come from this venv (same versions)")
    started = time.monotonic()
    wheelset.install(install, ctx.site)
    result.metric("install s", round(time.monotonic() - started, 1))
    output = must_run([sys.executable, "-m", "gpu_check.steps", "verify-installed"], "the installed-wheel check")
    problems = json.loads(output.strip().splitlines()[-1])
    result.check("carried wheels come first on PYTHONPATH and their requirements are met by what is installed",
                 not problems, "; ".join(problems))
    result.headline(f"{len(check.wheels)} wheels, {result.data['metrics']['wheels MiB']} MiB"
                    + ("" if check.ok and not problems else ": PROBLEMS"))


def print_installed_problems() -> None:
    """`verify-installed`: run in a fresh interpreter, so the new PYTHONPATH folder's packages are seen."""
    check = wheelset.check_wheels(Path(os.environ["GPU_CHECK_WHEELS"]))
    print(json.dumps(wheelset.verify_installed(check.wheels)))


# -- the tool library -----------------------------------------------------------------------------------
def step_tool_parity(ctx: Context, result: Result) -> None:
    """tests/tools/test_parity.py on the device: every op with a torch version against its OpenCV reference."""
    device = ctx.settings["parity_device"]
    report = ctx.work / "parity.xml"
    status, _ = run_command([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                             f"--junitxml={report}", "tests/tools/test_parity.py", "-k", f"{device} or mixed_batch"])
    if not report.exists():
        raise RuntimeError(f"pytest wrote no report (status {status})")
    ops, others = parity_results(report, device)
    from tools import REGISTRY

    torch_ops = sorted(name for name, op in REGISTRY.items() if not op.cpu_only)
    opencv_only = sorted(name for name, op in REGISTRY.items() if op.cpu_only)
    passed = [name for name in torch_ops if ops.get(name, {}).get("ok")]
    failed = {name: ops.get(name, {}).get("detail", "did not run") for name in torch_ops if name not in passed}
    result.metric("device", device)
    result.metric("ops passed", len(passed))
    result.metric("ops failed", len(failed))
    result.metric("ops without a torch version (OpenCV on the host, not compared)", len(opencv_only))
    result.check(f"every op with a torch version matches OpenCV on {device}", not failed,
                 "; ".join(f"{name}: {detail}" for name, detail in failed.items()))
    result.check("mixed batch: call order kept, errors isolated", all(o["ok"] for o in others.values()) and others,
                 "; ".join(f"{k}: {o['detail']}" for k, o in others.items() if not o["ok"]) or "")
    result.note(f"OpenCV-only ops: {', '.join(opencv_only)}")
    result.headline(f"{len(passed)}/{len(torch_ops)} ops match OpenCV on {device}")


def parity_results(report: Path, device: str) -> tuple[dict, dict]:
    """From pytest's JUnit XML: {op: {"ok", "detail"}} for test_torch_matches_opencv[op-device], and the other
    tests' outcomes."""
    ops, others = {}, {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        problem = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        detail = "" if problem is None else f"{problem.tag}: {(problem.get('message') or '').splitlines()[0][:300]}"
        outcome = {"ok": problem is None, "detail": detail}
        match = re.fullmatch(r"test_torch_matches_opencv\[(.+)-(\w+)\]", case.get("name", ""))
        if match and match.group(2) == device:
            ops[match.group(1)] = outcome
        elif not match:
            others[case.get("name")] = outcome
    return ops, others


def step_tool_bench(ctx: Context, result: Result) -> None:
    """tools/bench.py on the device: the batched executor vs the per-image OpenCV loop, and memory bandwidth."""
    from tools.bench import GPU_TARGET, GPU_TARGET_AT, GPU_TARGET_CASES

    reports = []
    for k, args in enumerate(ctx.settings["bench_runs"]):
        out = ctx.work / f"bench-{k}.json"
        status, _ = run_command([sys.executable, "tools/bench.py", "--device-only", *args, "--json", out])
        if not out.exists():
            raise RuntimeError(f"tools/bench.py {' '.join(args)} wrote no results (status {status})")
        reports.append(json.loads(out.read_text()))
    rows = [row for report in reports for row in report["rows"]]
    mismatches = [f"{r['case']} {r['size']}² x {r['batch']} [{key}]: {problem}"
                  for r in rows for key, problem in r["errors"].items()]
    bandwidth = next((r["bandwidth"] for r in reports if r.get("bandwidth")), None)
    if bandwidth:
        mismatches += [f"bandwidth {op}: {problem}" for op, problem in bandwidth["errors"].items()]
    result.check("every GPU output agrees with the OpenCV loop (op tolerance)", not mismatches, "; ".join(mismatches))
    gpu = reports[0]["machine"]["gpu"] or {}
    result.metric("device", gpu.get("name"))
    peak = gpu.get("peak_bandwidth")
    result.metric("peak bandwidth TB/s", round(peak / 1e12, 2) if peak else None)
    result.metric("peak bandwidth source", gpu.get("peak_source"))

    size, batch = GPU_TARGET_AT
    for case in GPU_TARGET_CASES:
        row = next((r for r in rows if r["case"] == case and r["size"] == size and r["batch"] == batch), None)
        value = round(row["gpu_resident_speedup"], 1) if row else None
        met = None if not ctx.gpu else (value is not None and value >= GPU_TARGET)
        result.target(f"{case}: executor vs OpenCV loop at {batch} x {size}²", value, f">= {GPU_TARGET:g}x", met, "x")
    lines = ["| case | size | batch | OpenCV loop img/s | executor (resident) img/s | speedup | numpy in/out speedup "
             "| bytes moved / peak |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        share = f"{100 * r['gpu_bandwidth_share']:.1f}%" if r.get("gpu_bandwidth_share") else "-"
        lines.append(f"| {r['case']} | {r['size']}² | {r['batch']} | {r['baseline_ips']:,.1f} | "
                     f"{r['gpu_resident_ips']:,.1f} | {r['gpu_resident_speedup']:.2f}x | {r['gpu_numpy_speedup']:.2f}x "
                     f"| {share} |")
    result.table("\n".join(lines))
    if bandwidth is None:
        raise RuntimeError("no bandwidth measurement: a bench run needs --bandwidth")
    share = bandwidth["best_kernel_share"]
    result.target(f"memory bandwidth, best memory-bound op ({bandwidth['best_kernel']}) on a resident "
                  f"{bandwidth['batch']} x {bandwidth['size']}² batch, share of peak",
                  None if share is None else round(100 * share, 1), f">= {100 * bandwidth['target']:.0f}%",
                  None if not ctx.gpu else (share is not None and share >= bandwidth["target"]), "%")
    lines = ["| what | GB/s | share of peak | share of a device-to-device copy |", "|---|---:|---:|---:|"]
    for key, r in bandwidth["results"].items():
        what = {"copy": "device-to-device copy", "kernel": "Op.torch, one launch",
                "executor": "Executor on resident tensors"}[key.rsplit("_", 1)[-1]]
        what = what if key == "copy" else f"{key.rsplit('_', 1)[0]}: {what}"
        of_peak = f"{100 * r['share_of_peak']:.1f}%" if r["share_of_peak"] is not None else "-"
        lines.append(f"| {what} | {r['bytes_per_s'] / 1e9:.1f} | {of_peak} | {100 * r['share_of_copy']:.0f}% |")
    result.table("\n".join(lines))
    copy = bandwidth["results"]["copy"]["bytes_per_s"]
    result.metric("device-to-device copy TB/s (read + written)", round(copy / 1e12, 3))
    result.note("bandwidth counts each uint8 byte read once and written once; the share is of the peak named "
                "above (device properties or the card's name), the copy is measured for scale, not the peak")
    speedups = [f"{t['name'].split(':')[0]} {t['value']}x" for t in result.data["targets"] if t["unit"] == "x"
                and t["value"] is not None]
    result.headline(f"speedup at {batch} x {size}²: {', '.join(speedups) or 'not measured at this size'}"
                    + (f"; bandwidth {100 * share:.0f}% of peak" if share is not None else ""))


# -- training -------------------------------------------------------------------------------------------
def _training_process_peak(ctx: Context, script: str) -> float | None:
    """Peak GPU memory (GiB) of the process that ran `script`, from the import traces."""
    peaks = []
    for path in ctx.trace.glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except ValueError:
            continue
        if record.get("argv") and str(record["argv"][0]).endswith(script) and "cuda_peak_allocated_bytes" in record:
            peaks.append(record["cuda_peak_allocated_bytes"])
    return round(max(peaks) / 2**30, 3) if peaks else None


def _log_history(output_dir: Path) -> list[dict]:
    return json.loads((output_dir / "trainer_state.json").read_text())["log_history"]


def step_sft(ctx: Context, result: Result) -> None:
    """A toy agentic SFT through `accelerate launch train/sft.py --mode agentic` on a tiny Qwen2.5-VL."""
    from data_gen.make import main as make_data
    from runtime.tiny_model import build_model

    s = ctx.settings["sft"]
    model = build_model("qwen2_5_vl", ctx.work / "model")
    data, out = ctx.work / "pilot", ctx.work / "sft"
    make_data(["pilot", "--n", str(s["batch"] * s["steps"]), "--n-test", "0", "--out", str(data),
               "--workers", str(s["data_workers"])])
    must_run([sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
              "--dynamo_backend", "no", *s["launch"], "train/sft.py", "--model_name_or_path", model,
              "--dataset_name", data, "--mode", "agentic", "--output_dir", out,
              "--per_device_train_batch_size", str(s["batch"]), "--max_steps", str(s["steps"]),
              "--learning_rate", "3e-3", "--logging_steps", "1", "--save_strategy", "no", "--report_to", "none",
              "--disable_tqdm", "true", "--seed", "0", *s["args"]], "accelerate launch train/sft.py")
    history = _log_history(out)
    record = json.loads((out / "tirlab_sft.json").read_text())
    final = history[-1]
    losses = [entry["loss"] for entry in history if "loss" in entry]
    runtime = final["train_runtime"]
    result.check(f"{s['steps']} optimizer steps", record["global_step"] == s["steps"], f"took {record['global_step']}")
    result.check("losses are finite", losses and all(math.isfinite(x) for x in losses), f"{losses}")
    result.metric("precision", s["precision"])
    result.metric("steps", record["global_step"])
    result.metric("batch", s["batch"])
    result.metric("steps/s", round(final["train_steps_per_second"], 3))
    result.metric("tokens/s", round(record["train_tokens"] / runtime, 1) if record["train_tokens"] else None)
    result.metric("train_runtime s (start-up steps included)", round(runtime, 2))
    result.metric("peak GPU memory GiB (torch.cuda.max_memory_allocated)", _training_process_peak(ctx, "train/sft.py"))
    result.metric("loss first / last", f"{losses[0]:.3f} / {losses[-1]:.3f}")
    result.headline(f"{record['global_step']} steps, {final['train_steps_per_second']:.2f} steps/s, "
                    f"{result.data['metrics']['tokens/s']} tokens/s, {s['precision']}")


def step_grpo(ctx: Context, result: Result) -> None:
    """A few toy GRPO steps: train/grpo.py with the toy recipe, rollouts by transformers' generate."""
    from data_gen.make import main as make_data

    s = ctx.settings["grpo"]
    data, out = ctx.work / "rl", ctx.work / "grpo"
    make_data(["rl", "--task", "rotated_ocr", "--n", str(s["prompts"]), "--n-test", "2", "--option", "angles=quarter",
               "--option", "render=aligned", "--seed", "500", "--out", str(data), "--workers", "1"])
    must_run([sys.executable, "train/grpo.py", "--config", GRPO_RECIPE, "--dataset_name", data, "--output_dir", out,
              "--max_steps", str(s["steps"]), "--per_device_train_batch_size", str(s["batch"]),
              "--num_generations", str(s["generations"]), "--save_strategy", "no", "--save_rollouts_steps", "0",
              "--logging_steps", "1", *s["args"]], "train/grpo.py")
    history = _log_history(out)
    steps = [entry for entry in history if "reward" in entry]
    final = history[-1]
    result.check(f"{s['steps']} GRPO steps logged", len(steps) == s["steps"], f"{len(steps)} logged")
    rewards = [entry["reward"] for entry in steps]
    result.check("rewards are finite", rewards and all(math.isfinite(x) for x in rewards), f"{rewards}")
    step_times = [entry["step_time"] for entry in steps if "step_time" in entry]
    mean_step = sum(step_times) / len(step_times) if step_times else None
    result.metric("steps", len(steps))
    result.metric("episodes per step", s["batch"])
    result.metric("mean step time s (TRL's step_time: rollouts, rewards and the update)",
                  round(mean_step, 3) if mean_step else None)
    result.metric("episodes/s (rollouts and training)", round(s["batch"] / mean_step, 2) if mean_step else None)
    result.metric("steps/s (trainer)", round(final["train_steps_per_second"], 3))
    result.metric("reward per step", ", ".join(f"{x:.3f}" for x in rewards))
    result.metric("tool-call rate per step", ", ".join(f"{entry.get('tools/call_rate', float('nan')):.3f}"
                                                      for entry in steps))
    result.metric("peak GPU memory GiB (torch.cuda.max_memory_allocated)", _training_process_peak(ctx, "train/grpo.py"))
    result.headline(f"{len(steps)} steps of {s['batch']} episodes, reward {rewards[-1]:.2f} at the last")


# -- evaluation -----------------------------------------------------------------------------------------
def toy_eval_command(form: str, out: Path, per_task: int, batch_size: int) -> list[str]:
    """eval/run_vllm.py with the HF backend on a shipped toy model, with the settings of its embedded toy run
    (eval/run_vllm.py TOY_DEFAULTS): the agentic model with tools, the direct one without."""
    from eval.run_vllm import TOY_DEFAULTS, TOY_FORMS

    settings = {**TOY_DEFAULTS, "per_task": per_task}
    command = [sys.executable, "eval/run_vllm.py", "--backend", "hf", "--model",
               str((TOY_CHECKPOINTS / form).relative_to(ROOT)),
               "--tools", TOY_FORMS[form], "--batch_size", str(batch_size), "--out", str(out / form)]
    for key, value in settings.items():
        command += [f"--{key}", *map(str, value)] if isinstance(value, list) else [f"--{key}", str(value)]
    return command


def run_toy_eval(form: str, out: Path, per_task: int, batch_size: int, cpu: bool = False) -> dict:
    """One toy model's run: its per-task scores, the content hash of each task's image, its episodes/s.
    `cpu`: on this machine's CPU even where CUDA is available (the HF backend takes the GPU when it sees one)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""} if cpu else None
    started = time.monotonic()
    output = must_run(toy_eval_command(form, out, per_task, batch_size), f"eval/run_vllm.py ({form})", env)
    wall = time.monotonic() - started
    records = [json.loads(line) for line in (out / form / "records.jsonl").read_text().splitlines() if line]
    scores = {r["id"]: float(r["score"] or 0.0) for r in records}
    overall = next(iter(json.loads((out / form / "summary.json").read_text())["modes"].values()))["overall"]
    return {"n": len(scores), "correct": int(sum(scores.values())), "accuracy": overall["accuracy"],
            "tool_call_rate": overall["tool_call_rate"], "scores": scores,
            "images": {r["id"]: r["trajectory"]["images"][0] for r in records}, "wall_s": round(wall, 2),
            "episodes_per_s": episodes_per_second(output, len(scores), wall)}


def episodes_per_second(output: str, n: int, wall_s: float) -> dict:
    """The progress bar's final rate (episodes only), else the command's (start-up included)."""
    rates = re.findall(r"(\d+)/(\d+) \[[^\]]*?([\d.]+)(episode/s|s/episode)", output)
    for done, total, value, unit in reversed(rates):
        if done == total and float(value) > 0:
            return {"value": round(float(value) if unit == "episode/s" else 1 / float(value), 2),
                    "how": "progress bar: episodes only"}
    return {"value": round(n / wall_s, 2), "how": "whole command, start-up included"}


def two_proportion_p(x1: int, n1: int, x2: int, n2: int) -> float:
    """Two-sided p-value of the pooled two-proportion z-test (1.0 where the proportions are equal)."""
    pooled = (x1 + x2) / (n1 + n2)
    if pooled in (0.0, 1.0) or x1 / n1 == x2 / n2:
        return 1.0
    z = (x1 / n1 - x2 / n2) / math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return math.erfc(abs(z) / math.sqrt(2))


def compare_with_reference(got: dict, reference: dict) -> dict:
    """This run's scores against the CPU reference's on the same tasks."""
    common = [task for task in got["scores"] if task in reference["scores"]]
    x1 = int(sum(got["scores"][t] for t in common))
    x2 = int(sum(reference["scores"][t] for t in common))
    n = len(common)
    p = two_proportion_p(x1, n, x2, n) if n else 0.0
    return {"tasks": n, "correct": x1, "reference_correct": x2, "p_value": round(p, 4),
            "tasks_scored_differently": sum(got["scores"][t] != reference["scores"][t] for t in common),
            "equal_within_noise": bool(n) and p >= NOISE_ALPHA, "missing_from_reference": len(got["scores"]) - n}


def step_eval(ctx: Context, result: Result) -> None:
    """The shipped toy models through eval/run_vllm.py --backend hf on the device; accuracy against the CPU's.

    The CPU accuracy is the committed reference's (toy_eval_reference.json) on the same tasks. The task images are
    rendered on this machine (data_gen: Pillow, matplotlib's fonts); where any differs from the reference's (content
    hashes), a difference in accuracy could come from that rather than the device, so the same runs are made on
    this machine's CPU too and the GPU is judged against those."""
    s = ctx.settings["eval"]
    reference = json.loads(TOY_EVAL_REFERENCE.read_text())
    heads = []
    for form in ("agentic", "direct"):
        got = run_toy_eval(form, ctx.work / "eval", s["per_task"], s["batch_size"])
        ref = reference["models"][form]
        same_images = sum(ref["images"].get(task) == key for task, key in got["images"].items())
        result.check(f"{form}: {got['n']} tasks scored", got["n"] == s["per_task"], f"{got['n']} of {s['per_task']}")
        result.metric(f"{form} accuracy", f"{got['correct']}/{got['n']} = {got['accuracy']:.3f}")
        result.metric(f"{form} task images identical to the reference's", f"{same_images}/{got['n']}")
        cpu, where = ref, "the CPU reference"
        if same_images < got["n"]:
            cpu = run_toy_eval(form, ctx.work / "eval-cpu", s["per_task"], s["batch_size"], cpu=True)
            where = "this machine's CPU"
            result.note(f"{form}: {got['n'] - same_images} task images differ from the reference's (this machine's "
                        f"Pillow / FreeType / fonts render them differently): judged against this machine's CPU, "
                        f"{compare_with_reference(got, ref)['reference_correct']}/{got['n']} in the reference")
        cmp = compare_with_reference(got, cpu)
        result.check(f"{form}: accuracy equal to {where}'s within noise", cmp["equal_within_noise"],
                     f"{cmp['correct']}/{cmp['tasks']} here vs {cmp['reference_correct']}/{cmp['tasks']} on "
                     f"{where}, p = {cmp['p_value']}")
        result.metric(f"{form} on {where}, same tasks", f"{cmp['reference_correct']}/{cmp['tasks']}")
        result.metric(f"{form} two-proportion z-test p", cmp["p_value"])
        result.metric(f"{form} tasks scored differently", cmp["tasks_scored_differently"])
        result.metric(f"{form} tool-call rate", got["tool_call_rate"])
        result.metric(f"{form} episodes/s", f"{got['episodes_per_s']['value']} ({got['episodes_per_s']['how']})")
        heads.append(f"{form} {got['correct']}/{got['n']} (CPU {cmp['reference_correct']}/{cmp['tasks']})")
    result.note(f"reference: {reference['source']}")
    result.note(f"rule: equal within noise when a two-sided two-proportion z-test does not reject at alpha = "
                f"{NOISE_ALPHA} (p >= {NOISE_ALPHA}); decoding is greedy, so tasks scored differently come from "
                f"numerics (device kernels, batch padding)")
    result.note(reference.get("vllm_cpu", ""))
    result.headline(", ".join(heads))


def make_reference(per_task: int = 100, batch_size: int = 64) -> dict:
    """`python -m gpu_check reference`: the toy models' scores on this CPU with the GPU run's settings, written to
    toy_eval_reference.json (commit it)."""
    import platform
    import tempfile

    import torch
    import transformers

    models = {}
    with tempfile.TemporaryDirectory(prefix="gpu-check-reference-") as tmp:
        for form in ("agentic", "direct"):
            got = run_toy_eval(form, Path(tmp), per_task, batch_size)
            models[form] = {k: got[k] for k in ("n", "correct", "accuracy", "tool_call_rate", "scores", "images")}
    reference = {
        "source": (f"measured on a CPU by `python -m gpu_check reference` on {time.strftime('%Y-%m-%d')}: "
                   f"eval/run_vllm.py --backend hf, the toy settings, {per_task} tasks, batch {batch_size}; "
                   f"python {platform.python_version()}, torch {torch.__version__}, transformers "
                   f"{transformers.__version__}"),
        "vllm_cpu": "for scale: the vLLM CPU engine (make run) reads 95/100 with the agentic model and 0/100 with "
                    "the direct one on these tasks (README.md, docs/benchmarks.md)",
        "command": toy_eval_command("agentic", Path("OUT"), per_task, batch_size)[1:],
        "models": models,
    }
    TOY_EVAL_REFERENCE.write_text(json.dumps(reference, indent=1) + "\n", encoding="utf-8")
    return reference


# -- versions -------------------------------------------------------------------------------------------
def step_versions(ctx: Context, result: Result) -> None:
    """The versions of everything the check used: Python, torch, CUDA, the GPU and its driver, and every
    package a step's process imported (from the import traces), with where it came from."""
    import platform

    import torch

    result.metric("python", f"{platform.python_version()} ({sys.executable})")
    result.metric("torch", torch.__version__)
    result.metric("CUDA (torch built with)", torch.version.cuda)
    result.metric("cuDNN", torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        result.metric("GPU", f"{props.name}, {props.total_memory / 2**30:.1f} GiB, compute capability "
                             f"{props.major}.{props.minor}, {props.multi_processor_count} SMs")
    else:
        result.metric("GPU", "none (CUDA not available)")
    result.metric("driver", nvidia_driver())
    result.metric("platform", platform.platform())
    packages = imported_packages(ctx.trace)
    lines = ["| package | version | from | imported in steps |", "|---|---|---|---|"]
    lines += [f"| {p['name']} | {p['version']} | {p['origin']} | {', '.join(p['steps'])} |" for p in packages]
    result.table("\n".join(lines))
    result.metric("packages imported", len(packages))
    machine = wheelset.read_machine_packages()
    carried = set(wheelset.read_pins())
    # rehearsal: packages linked only because this venv's version of a machine package needs them
    info = os.environ.get("GPU_CHECK_MACHINE_SITE_INFO")
    venv_only = set(json.loads(Path(info).read_text())["dependencies_only"]) if info else set()
    uncovered, venv_needs = [], []
    for p in packages:
        name = canonicalize_name(p["name"])
        if p["origin"] == "project" or name in machine or name in carried:
            continue
        (venv_needs if name in venv_only else uncovered).append(p["name"])
    if ctx.gpu:  # it imported, so it is there: the recorded list is what is out of date
        if uncovered:
            result.note(f"imported here but missing from gpu_check/machine_packages.txt (update it): "
                        f"{', '.join(uncovered)}")
    else:
        result.check("every imported package is on the machine or carried", not uncovered, ", ".join(uncovered))
    astray = [f"{p['name']}: {p['origin']}" for p in packages if p["origin"].startswith("NOT")]
    result.check("every carried package was imported from the carried folder", not astray, "; ".join(astray))
    if venv_needs:
        result.note(f"rehearsal: imported only through this venv's versions of machine packages (not checked): "
                    f"{', '.join(venv_needs)}")
    result.headline(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {len(packages)} packages imported")


def nvidia_driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        import pynvml

        pynvml.nvmlInit()
        return str(pynvml.nvmlSystemGetDriverVersion())
    except Exception:  # noqa: BLE001 - no NVIDIA driver here
        return None


def imported_packages(trace: Path) -> list[dict]:
    """The distributions behind every top-level module the steps' processes imported, and where each came from:
    a carried wheel (the PYTHONPATH folder), the machine's Python (in a rehearsal: this venv), or the project."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    modules: dict[str, tuple[str | None, set]] = {}
    for path in trace.glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except ValueError:
            continue
        for name, file in record["modules"].items():
            modules.setdefault(name, (file, set()))[1].add(record.get("step") or "?")
    carried_site = Path(os.environ.get("GPU_CHECK_SITE", "/nonexistent")).resolve()
    carried = set(wheelset.read_pins())
    by_module = packages_distributions()
    packages: dict[str, dict] = {}
    for name, (file, steps) in sorted(modules.items()):
        if name in sys.stdlib_module_names or name in ("__main__", "__mp_main__", "sitecustomize"):
            continue
        dists = by_module.get(name)
        if not dists and (file is None or _in_stdlib(file)):
            continue  # built-in modules, namespace folders, the standard library's private modules
        where = Path(file).resolve() if file else None
        if not dists:  # a module no installed distribution owns: the project's own (tools, train, ...) or unknown
            # tirlab installs compat/*.py as top-level modules (the CPU torch's torchvision hook)
            own = (where and _in_project(where)) or (ROOT / "compat" / f"{name}.py").exists()
            origin = "project" if own else f"unknown ({file})"
            dists = [name]
        elif where and where.is_relative_to(carried_site):
            origin = "carried wheel"
        else:
            origin = "machine"
        for dist in dists:
            if origin == "machine" and canonicalize_name(dist) in carried:
                # a carried package not taken from the carried folder: in a rehearsal the cp312 builds come from
                # the venv; on the GPU machine it means PYTHONPATH did not put the carried folder first
                origin = ("this venv (carried on the GPU machine)" if os.environ.get("GPU_CHECK_MODE") == "rehearsal"
                          else f"NOT the carried wheel: {file}")
            try:
                found = version(dist) if origin != "project" else "-"
            except PackageNotFoundError:
                found = "?"
            entry = packages.setdefault(dist.lower(), {"name": dist, "version": found, "origin": origin,
                                                       "steps": set()})
            entry["steps"] |= steps
    return [dict(p, steps=sorted(p["steps"])) for _, p in sorted(packages.items())]


def _in_project(path: Path) -> bool:
    """Under the repository, but not in a virtual environment or site folder inside it."""
    return path.is_relative_to(ROOT) and "site-packages" not in path.parts and not path.is_relative_to(
        Path(sys.prefix).resolve())


def _in_stdlib(file: str) -> bool:
    import sysconfig

    return Path(file).resolve().is_relative_to(Path(sysconfig.get_paths()["stdlib"]).resolve())


STEPS = {"wheels": step_wheels, "tool_parity": step_tool_parity, "tool_bench": step_tool_bench, "sft": step_sft,
         "grpo": step_grpo, "eval": step_eval, "versions": step_versions}


def main(argv: list[str]) -> int:
    if argv == ["verify-installed"]:
        print_installed_problems()
        return 0
    if len(argv) != 1 or argv[0] not in STEPS:
        print(f"usage: python -m gpu_check.steps {{{','.join(STEPS)}}} (the runner starts these)", file=sys.stderr)
        return 2
    ctx, result = Context.from_environment(), Result()
    STEPS[argv[0]](ctx, result)
    Path(os.environ["GPU_CHECK_RESULT"]).write_text(json.dumps(result.data, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
