#!/usr/bin/env python
"""Benchmark the tool executor against a plain per-image OpenCV loop.

    python tools/bench.py [--sizes 512 1024] [--batches 1 8 64] [--cases rotate blur ...]
                          [--device-only] [--json OUT] [--quick] [--bandwidth]

For every case (one op with fixed arguments), image size and batch size it measures images per second of

- the baseline: a plain Python loop over the images making the very cv2 calls the op's OpenCV reference
  makes (hand-written below, same color handling), one image at a time;
- the executor on the CPU: `Executor(device="auto").run(calls)`, which on a machine without CUDA is the
  OpenCV path (on a CUDA machine "auto" means the GPU, so the CPU row uses device="opencv", what "auto"
  resolves to on a CPU). The list of `ToolCall`s is built outside the timed region (that is the
  caller's job), images are numpy arrays;
- when CUDA is present, the batched torch/kornia executor `Executor(device="cuda")` (a) on uint8
  (C, H, W) tensors already on the device with output="tensor" ("resident"), and (b) on numpy images in
  and out, host-device copies included ("numpy").

Before any timing, the outputs of every variant are compared with the baseline's: the CPU executor must
agree exactly, the torch path within the op's stated tolerance (`Op.tolerance`, the one the parity tests
use). A mismatch is printed and makes the exit status 1; failing a speed target does not (this is a
measurement).

Timing: time.perf_counter; one verification call and one calibration call of each variant as warm-up,
then rounds that interleave the variants (A/B/A/B, with the order reversed every other round); a sample
repeats a variant's call often enough to last a few milliseconds, the number of rounds is chosen so a
row takes about a second. Reported are the median images/s over rounds and, as ratio, the median over
rounds of the per-round ratio (the variants of one round run back to back, so a change in the machine's
load cancels out of it; it can differ slightly from the ratio of the two printed medians). GPU samples
are bracketed by torch.cuda.synchronize(). OpenCV keeps its default thread count (the same for the
baseline and the executor); torch uses one thread per available core. The 1-minute load average is
printed, with a warning when other work was running.

Targets (from the issue):
- CPU: the executor is within 1.3x of the plain loop, i.e. ratio executor/baseline >= 1/1.3 = 0.77 at
  every row;
- GPU: resident throughput at batch 64 x 1024^2 is >= 20x the OpenCV loop for rotate, blur and equalize.

Achieved memory bandwidth (GPU, resident) counts the bytes the op must move at least: the uint8 input
and output images, (in + out) * images/s. Intermediate float tensors are not counted, so it is a lower
bound on the traffic. The peak comes from the device's memory clock and bus width where torch reports
them, else from a table of known devices; the source is printed.

--bandwidth (needs a torch device) adds the memory-bound ops (invert, flip: each output byte is one input
byte, no arithmetic worth the name) on one (batch, 3, size, size) uint8 batch already on the device, at the
largest size and batch of the run (or --bandwidth-size / --bandwidth-batch): bytes moved per second by the
op's torch function in one launch (`Op.torch`, the "kernel"), by the executor on resident tensors (which
also stacks the batch: a copy the count leaves out), and by a plain device-to-device copy of the same bytes
for scale. Each is (bytes read + bytes written) / time, and a share of the peak above. Target: the best
memory-bound kernel reaches >= 50% of the peak (the executor's own overheads are the speedup target's
business). Before timing, the kernels' outputs on the first images are compared with the OpenCV reference.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

_ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # `python tools/bench.py` puts tools/ first; its modules must not shadow anything
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from tools import REGISTRY, Executor, ToolCall  # noqa: E402
from tools.executor import resolve_device  # noqa: E402
from tools.images import demo_image  # noqa: E402

CPU_TARGET = 1 / 1.3  # executor images/s over baseline images/s, at every row
GPU_TARGET = 20.0  # resident GPU images/s over the OpenCV loop's, at GPU_TARGET_AT
GPU_TARGET_AT = (1024, 64)  # (size, batch)
GPU_TARGET_CASES = ("rotate", "blur", "equalize")
BANDWIDTH_TARGET = 0.5  # memory-bound op kernels: share of the peak memory bandwidth
MEMORY_BOUND_OPS = (("invert", {}), ("flip", {"direction": "horizontal"}))  # (op, arguments)

# Peak memory bandwidth (bytes/s) by device name, when torch does not report clock and bus width.
# Checked in order: the first entry whose words all occur in the device name wins.
PEAK_BANDWIDTH = (
    (("H200",), 4.8e12),
    (("H100", "PCIe"), 2.0e12),
    (("H100", "NVL"), 3.9e12),
    (("H100",), 3.35e12),  # SXM, HBM3
    (("A100", "80GB"), 2.0e12),
    (("A100",), 1.555e12),  # 40GB
)


# -- cases ---------------------------------------------------------------------------------------------
@dataclass
class Case:
    """One op with fixed arguments, and the plain OpenCV code that does the same work on one image."""

    name: str
    op: str
    doc: str
    args: Callable[[int, int], dict]  # (height, width) -> the op's arguments
    baseline: Callable[[int, int], Callable[[np.ndarray], np.ndarray]]  # (height, width) -> per-image fn
    gpu_target: bool = False


def _rotate_args(h, w):
    return {"angle": 30.0, "expand": True, "interpolation": "linear"}


def _rotate_baseline(h, w):
    angle = 30.0

    def run(img):
        # rotate_cv for a counter-clockwise non-quarter angle with expand, INTER_LINEAR, black fill.
        h, w = img.shape[:2]
        center = ((w - 1) / 2.0, (h - 1) / 2.0)
        m = cv2.getRotationMatrix2D(center, angle, 1.0)
        cos, sin = abs(m[0, 0]), abs(m[0, 1])
        out_w = int(math.ceil(w * cos + h * sin - 1e-6))
        out_h = int(math.ceil(w * sin + h * cos - 1e-6))
        m[0, 2] += (out_w - 1) / 2.0 - center[0]
        m[1, 2] += (out_h - 1) / 2.0 - center[1]
        return cv2.warpAffine(img, m, (out_w, out_h), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=(0.0, 0.0, 0.0))

    return run


def _crop_box(h, w):
    return w // 4, h // 4, w // 4 + w // 2, h // 4 + h // 2  # the central half of each side


def _crop_args(h, w):
    return {"box": list(_crop_box(h, w)), "scale": 2.0, "interpolation": "linear"}


def _crop_baseline(h, w):
    x1, y1, x2, y2 = _crop_box(h, w)
    size = (2 * (x2 - x1), 2 * (y2 - y1))

    def run(img):
        return cv2.resize(img[y1:y2, x1:x2], size, interpolation=cv2.INTER_LINEAR)

    return run


def _blur_args(h, w):
    return {"method": "gaussian", "ksize": 5, "sigma": 0.0}


def _blur_baseline(h, w):
    def run(img):
        return cv2.GaussianBlur(img, (5, 5), 0.0, sigmaY=0.0)

    return run


def _equalize_args(h, w):
    return {"mode": "luma", "algorithm": "opencv"}


def _equalize_baseline(h, w):
    def run(img):
        # equalize_cv, mode 'luma': equalizeHist on the Y plane of YCrCb, back to RGB.
        planes = list(cv2.split(cv2.cvtColor(img, cv2.COLOR_RGB2YCrCb)))
        planes[0] = cv2.equalizeHist(planes[0])
        return cv2.cvtColor(cv2.merge(planes), cv2.COLOR_YCrCb2RGB)

    return run


def _clahe_args(h, w):
    return {"clip_limit": 2.0, "tile_grid": [8, 8], "mode": "lightness"}


def _clahe_baseline(h, w):
    def run(img):
        # clahe_cv, mode 'lightness': CLAHE on the L plane of Lab, back to RGB (a CLAHE object per call).
        clahe = cv2.createCLAHE(clipLimit=2.0, tileGridSize=(8, 8))
        planes = list(cv2.split(cv2.cvtColor(img, cv2.COLOR_RGB2Lab)))
        planes[0] = clahe.apply(planes[0])
        return cv2.cvtColor(cv2.merge(planes), cv2.COLOR_Lab2RGB)

    return run


def _canny_args(h, w):
    return {"low": 100.0, "high": 200.0, "aperture": 3, "l2gradient": False, "color": "gray"}


def _canny_baseline(h, w):
    def run(img):
        # canny_cv, color 'gray': RGB->gray, Canny, and the op's data (countNonZero).
        edges = cv2.Canny(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY), 100.0, 200.0, apertureSize=3, L2gradient=False)
        count = int(cv2.countNonZero(edges))
        return edges, {"edge_pixels": count, "edge_ratio": count / edges.size, "thresholds": [100.0, 200.0]}

    return run


def _threshold_args(h, w):
    return {"mode": "binary", "value": 127.0, "max_value": 255}


def _threshold_baseline(h, w):
    def run(img):
        # threshold_cv, mode 'binary' on gray: RGB->gray, threshold, and the op's data (nonzero ratio).
        used, out = cv2.threshold(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY), 127.0, 255, cv2.THRESH_BINARY)
        return out, {"threshold": float(used), "nonzero_ratio": float(np.count_nonzero(out)) / out.size}

    return run


CASES: dict[str, Case] = {c.name: c for c in (
    Case("rotate", "rotate", "rotate 30 deg counter-clockwise, expand, linear, black fill", _rotate_args,
         _rotate_baseline, gpu_target=True),
    Case("blur", "blur", "gaussian blur, ksize 5, sigma 0 (derived)", _blur_args, _blur_baseline, gpu_target=True),
    Case("equalize", "equalize", "histogram equalization of the luma (Y of YCrCb), cv2.equalizeHist",
         _equalize_args, _equalize_baseline, gpu_target=True),
    Case("clahe", "clahe", "CLAHE clip 2, 8x8 tiles, on L of Lab", _clahe_args, _clahe_baseline),
    Case("canny", "canny", "Canny 100/200, aperture 3, L1, on gray (+ edge count data)", _canny_args, _canny_baseline),
    Case("crop_resize", "crop", "crop the central half of each side, zoom x2 (linear)", _crop_args, _crop_baseline),
    Case("threshold", "threshold", "binary threshold at 127 on gray (+ nonzero ratio data)", _threshold_args,
         _threshold_baseline),
)}


# -- timing --------------------------------------------------------------------------------------------
def _measure(variants: dict[str, Callable[[], object]], n_images: int, *, budget: float, min_rounds: int,
             max_rounds: int, min_sample: float, syncs: dict[str, Callable[[], None]]) -> dict[str, dict]:
    """Median images/s of each variant over interleaved rounds, and the median per-round ratio of each
    to the first variant. Each variant was already run once (the verification call)."""
    names = list(variants)
    per_call = {}
    for name in names:  # calibration call (second warm-up)
        sync = syncs.get(name, _nosync)
        sync()
        t0 = time.perf_counter()
        variants[name]()
        sync()
        per_call[name] = max(time.perf_counter() - t0, 1e-7)
    inner = {n: max(1, math.ceil(min_sample / per_call[n])) for n in names}
    round_time = sum(inner[n] * per_call[n] for n in names)
    rounds = int(min(max_rounds, max(min_rounds, budget / round_time)))
    samples: dict[str, list[float]] = {n: [] for n in names}
    gc.collect()
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            fn, k, sync = variants[name], inner[name], syncs.get(name, _nosync)
            sync()
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            sync()
            samples[name].append(k * n_images / (time.perf_counter() - t0))
    base = samples[names[0]]
    return {n: {"images_per_s": statistics.median(samples[n]), "rounds": rounds, "calls_per_sample": inner[n],
                "spread": [min(samples[n]), max(samples[n])],
                # each round times every variant back to back, so a per-round ratio cancels slow drifts
                # in the machine's load; the median of these is the reported ratio
                "ratio_to_first": statistics.median(x / b for x, b in zip(samples[n], base))} for n in names}


def _nosync():
    pass


# -- verification --------------------------------------------------------------------------------------
def _compare(ref: np.ndarray, got, tol) -> str | None:
    """None when `got` agrees with `ref` within `tol` (None = exactly), else what differs."""
    if not isinstance(got, np.ndarray):
        got = got.detach().cpu().numpy()
        got = got[0] if got.shape[0] == 1 else np.ascontiguousarray(got.transpose(1, 2, 0))
    if ref.shape != got.shape or got.dtype != np.uint8:
        return f"shape/dtype {got.shape} {got.dtype} != baseline {ref.shape} {ref.dtype}"
    if tol is None:
        if not np.array_equal(ref, got):
            return f"{int(np.count_nonzero(ref != got))} values differ (exact agreement expected)"
        return None
    diff = np.abs(ref.astype(np.int16) - got.astype(np.int16))
    outliers, mean = float((diff > tol.pixel).mean()), float(diff.mean())
    if outliers > tol.outliers or mean > tol.mean + 1e-9:
        return (f"{outliers:.4f} of values differ by more than {tol.pixel} (allowed {tol.outliers}), "
                f"mean abs diff {mean:.3f} (allowed {tol.mean})")
    return None


def _same_data(ref, got) -> bool:
    if isinstance(ref, dict):
        return isinstance(got, dict) and set(ref) == set(got) and all(_same_data(ref[k], got[k]) for k in ref)
    if isinstance(ref, (list, tuple)):
        return isinstance(got, (list, tuple)) and len(ref) == len(got) and all(map(_same_data, ref, got))
    if isinstance(ref, float) or isinstance(got, float):
        return math.isclose(ref, got, rel_tol=1e-6, abs_tol=1e-9)
    return ref == got


def _verify(refs: list, results, tol) -> str | None:
    """Compare executor results with the baseline's outputs (an image, or (image, data))."""
    if len(results) != len(refs):
        return f"{len(results)} results for {len(refs)} calls"
    for k, (ref, res) in enumerate(zip(refs, results)):
        if not res.ok:
            return f"image {k}: executor error: {res.error}"
        ref_image, ref_data = ref if isinstance(ref, tuple) else (ref, None)
        problem = _compare(ref_image, res.image, tol)
        if problem:
            return f"image {k}: {problem}"
        if not _same_data(ref_data, res.data):
            return f"image {k}: data {res.data} != baseline {ref_data}"
    return None


# -- machine -------------------------------------------------------------------------------------------
def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_ROOT, capture_output=True, text=True,
                             timeout=5)
        return (out.stdout.strip() or None) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def peak_bandwidth(device: str) -> tuple[float | None, str]:
    """(bytes/s, where the number came from) of a CUDA device's memory."""
    props = torch.cuda.get_device_properties(torch.device(device))
    clock_khz = getattr(props, "memory_clock_rate", 0) or 0
    bus_bits = getattr(props, "memory_bus_width", 0) or 0
    if clock_khz and bus_bits:
        peak = clock_khz * 1e3 * 2 * bus_bits / 8
        return peak, f"device properties: {clock_khz / 1e3:.0f} MHz x 2 x {bus_bits}-bit bus"
    for words, peak in PEAK_BANDWIDTH:
        if all(word.lower() in props.name.lower() for word in words):
            return peak, (f"table: {' '.join(words)} = {peak / 1e12:.2f} TB/s "
                          "(torch reports no memory clock/bus width)")
    return None, f"unknown: no memory clock/bus width from torch and {props.name!r} is not in the table"


def machine_info(gpu_device: str | None) -> dict:
    info = {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": _cpu_model(),
        "cores": _cores(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "opencv": cv2.__version__,
        "opencv_threads": cv2.getNumThreads(),
        "numpy": np.__version__,
        "git_commit": _git_commit(),
        "load_average_at_start": _load(),
        "gpu": None,
    }
    try:
        import kornia

        info["kornia"] = kornia.__version__
    except ImportError:
        info["kornia"] = None
    if gpu_device is not None and gpu_device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(gpu_device))
        peak, source = peak_bandwidth(gpu_device)
        info["gpu"] = {"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                       "cuda": torch.version.cuda, "peak_bandwidth": peak, "peak_source": source}
    elif gpu_device is not None:
        info["gpu"] = {"name": f"torch device {gpu_device!r} (no GPU: exercises the batched path only)",
                       "peak_bandwidth": None, "peak_source": "n/a"}
    return info


# -- the run -------------------------------------------------------------------------------------------
def _demo_images(size: int, count: int) -> list[np.ndarray]:
    """The run's test images. From 2048² on they are made in parallel processes (one demo_image takes seconds at
    4096²); the images are the same either way."""
    seeds = [1000 * size + k for k in range(count)]
    workers = min(_cores(), count)
    if size < 2048 or workers == 1:
        return [demo_image(size, size, seed=seed) for seed in seeds]
    import concurrent.futures
    import multiprocessing

    # spawn, not fork: this process already runs torch's and OpenCV's threads
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(demo_image, [size] * count, [size] * count, seeds))


def _to_device(img: np.ndarray, device: str):
    chw = img[None] if img.ndim == 2 else np.ascontiguousarray(img.transpose(2, 0, 1))
    return torch.from_numpy(chw).to(device)


def bench_row(case: Case, images: list[np.ndarray], batch: int, *, cpu_device: str | None, gpu_device: str | None,
              timing: dict) -> dict:
    h, w = images[0].shape[:2]
    imgs = images[:batch]
    args = case.args(h, w)
    op = REGISTRY[case.op]
    base_one = case.baseline(h, w)

    def baseline():
        return [base_one(img) for img in imgs]

    row = {"case": case.name, "op": case.op, "args": args, "size": h, "batch": batch, "checks": {}, "errors": {}}
    variants = {"baseline": baseline}
    syncs = {}
    refs = baseline()  # first warm-up of the baseline; the reference outputs
    in_bytes = sum(img.nbytes for img in imgs)
    out_bytes = sum((r[0] if isinstance(r, tuple) else r).nbytes for r in refs)

    if cpu_device is not None:
        executor = Executor(device=cpu_device)
        calls = [ToolCall(case.op, img, args) for img in imgs]
        problem = _verify(refs, executor.run(calls), None)
        row["checks"]["cpu"] = problem is None
        if problem:
            row["errors"]["cpu"] = problem
        variants["cpu"] = lambda: executor.run(calls)

    if gpu_device is not None:
        sync = (lambda: torch.cuda.synchronize(gpu_device)) if gpu_device.startswith("cuda") else _nosync
        resident = Executor(device=gpu_device, output="tensor")
        dev_calls = [ToolCall(case.op, _to_device(img, gpu_device), args) for img in imgs]
        numpy_exec = Executor(device=gpu_device)
        np_calls = [ToolCall(case.op, img, args) for img in imgs]
        for key, ex, cl in (("gpu_resident", resident, dev_calls), ("gpu_numpy", numpy_exec, np_calls)):
            problem = _verify(refs, ex.run(cl), op.tolerance)
            sync()
            row["checks"][key] = problem is None
            if problem:
                row["errors"][key] = problem
            variants[key] = (lambda ex=ex, cl=cl: ex.run(cl))
            syncs[key] = sync
    del refs

    measured = _measure(variants, batch, syncs=syncs, **timing)
    base = measured["baseline"]["images_per_s"]
    row["baseline_ips"] = base
    row["timing"] = measured
    if "cpu" in measured:
        row["cpu_ips"] = measured["cpu"]["images_per_s"]
        row["cpu_ratio"] = measured["cpu"]["ratio_to_first"]
        row["cpu_pass"] = row["cpu_ratio"] >= CPU_TARGET
    for key in ("gpu_resident", "gpu_numpy"):
        if key in measured:
            row[f"{key}_ips"] = measured[key]["images_per_s"]
            row[f"{key}_speedup"] = measured[key]["ratio_to_first"]
    if "gpu_resident" in measured:
        row["bytes_per_image"] = (in_bytes + out_bytes) / batch
        row["gpu_bandwidth"] = row["bytes_per_image"] * row["gpu_resident_ips"]
        if case.gpu_target and (h, batch) == GPU_TARGET_AT:
            row["gpu_pass"] = row["gpu_resident_speedup"] >= GPU_TARGET
    return row


def bench_bandwidth(device: str, size: int, batch: int, peak: float | None, timing: dict) -> dict:
    """Bytes/s of the memory-bound ops on a resident (batch, 3, size, size) uint8 batch: the op's torch function in
    one launch, the executor on the same images as resident tensors, and a device-to-device copy for scale."""
    sync = (lambda: torch.cuda.synchronize(device)) if device.startswith("cuda") else _nosync
    generator = torch.Generator().manual_seed(0)
    host = torch.randint(0, 256, (batch, 3, size, size), dtype=torch.uint8, generator=generator)
    resident = host.to(device)
    copy_target = torch.empty_like(resident)
    bytes_per_image = 2 * 3 * size * size  # read once, written once
    variants = {"copy": lambda: copy_target.copy_(resident)}
    errors = {}
    for name, args in MEMORY_BOUND_OPS:
        op = REGISTRY[name]
        got = op.torch(resident[:2], **args)
        sync()
        for k in range(2):
            problem = _compare(op.opencv(np.ascontiguousarray(host[k].permute(1, 2, 0).numpy()), **args), got[k],
                               op.tolerance)
            if problem:
                errors[name] = f"image {k}: {problem}"
        executor = Executor(device=device, output="tensor")
        calls = [ToolCall(name, image, args) for image in resident.unbind(0)]
        variants[f"{name}_kernel"] = (lambda op=op, args=args: op.torch(resident, **args))
        variants[f"{name}_executor"] = (lambda executor=executor, calls=calls: executor.run(calls))
    measured = _measure(variants, batch, syncs={key: sync for key in variants}, **timing)
    results = {}
    for key, m in measured.items():
        rate = bytes_per_image * m["images_per_s"]
        results[key] = {"bytes_per_s": rate, "share_of_peak": rate / peak if peak else None,
                        "share_of_copy": m["ratio_to_first"], "images_per_s": m["images_per_s"]}
    kernels = {name: results[f"{name}_kernel"] for name, _ in MEMORY_BOUND_OPS}
    best = max(kernels, key=lambda name: kernels[name]["bytes_per_s"])
    share = kernels[best]["share_of_peak"]
    return {"device": device, "size": size, "batch": batch, "bytes_per_call": bytes_per_image * batch,
            "peak_bandwidth": peak, "results": results, "errors": errors, "best_kernel": best,
            "best_kernel_share": share, "target": BANDWIDTH_TARGET,
            "pass": None if share is None else share >= BANDWIDTH_TARGET}


def _print_bandwidth(bw: dict) -> None:
    print(f"\n### Memory bandwidth: memory-bound ops on a resident ({bw['batch']}, 3, {bw['size']}, {bw['size']}) "
          f"uint8 batch on {bw['device']}\n")
    print("| what | GB/s | % of peak | % of the copy |")
    print("| --- | ---: | ---: | ---: |")
    labels = {"copy": "device-to-device copy (tensor.copy_)"}
    for name, _ in MEMORY_BOUND_OPS:
        labels[f"{name}_kernel"] = f"{name}: Op.torch, one launch"
        labels[f"{name}_executor"] = f"{name}: Executor, resident tensors (stacks the batch first)"
    for key, r in bw["results"].items():
        share = f"{100 * r['share_of_peak']:.1f}" if r["share_of_peak"] is not None else "-"
        print(f"| {labels[key]} | {r['bytes_per_s'] / 1e9:.1f} | {share} | {100 * r['share_of_copy']:.0f} |")
    if bw["best_kernel_share"] is None:
        print("\nBandwidth target (>=50% of peak): not judged (no peak bandwidth for this device)")
    else:
        print(f"\nBandwidth target (>=50% of peak, best memory-bound kernel): {'PASS' if bw['pass'] else 'FAIL'} "
              f"({100 * bw['best_kernel_share']:.1f}%, {bw['best_kernel']})")


def _fmt_ips(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def _fmt_x(x: float) -> str:
    return f"{x:.1f}" if x >= 1 else f"{x:.2f}" if x >= 0.01 else f"{x:.1e}"


def _print_cpu_table(rows, cpu_label):
    print(f"\n### CPU: OpenCV loop vs Executor(device={cpu_label!r})\n")
    print("| case | size | batch | opencv loop img/s | executor img/s | ratio | target >= 0.77 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        if "cpu_ratio" not in r:
            continue
        ok = r["cpu_pass"] and r["checks"].get("cpu", False)
        verdict = "PASS" if ok else ("MISMATCH" if not r["checks"].get("cpu", False) else "FAIL")
        print(f"| {r['case']} | {r['size']}² | {r['batch']} | {_fmt_ips(r['baseline_ips'])} "
              f"| {_fmt_ips(r['cpu_ips'])} | {r['cpu_ratio']:.2f} | {verdict} |")


def _print_gpu_table(rows, peak):
    print("\n### GPU: OpenCV loop (CPU) vs batched Executor on the GPU\n")
    print("| case | size | batch | opencv loop img/s | resident img/s | x | numpy in/out img/s | x "
          "| bandwidth GB/s | % of peak | target >= 20x |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        if "gpu_resident_ips" not in r:
            continue
        share = f"{100 * r['gpu_bandwidth'] / peak:.1f}" if peak else "-"
        verdict = "" if "gpu_pass" not in r else ("PASS" if r["gpu_pass"] else "FAIL")
        if not (r["checks"].get("gpu_resident") and r["checks"].get("gpu_numpy")):
            verdict = (verdict + " MISMATCH").strip()
        print(f"| {r['case']} | {r['size']}² | {r['batch']} | {_fmt_ips(r['baseline_ips'])} "
              f"| {_fmt_ips(r['gpu_resident_ips'])} | {_fmt_x(r['gpu_resident_speedup'])} "
              f"| {_fmt_ips(r['gpu_numpy_ips'])} | {_fmt_x(r['gpu_numpy_speedup'])} "
              f"| {r['gpu_bandwidth'] / 1e9:.1f} | {share} | {verdict} |")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=None, help="square image sides (default 512 1024)")
    p.add_argument("--batches", type=int, nargs="+", default=None, help="calls per run (default 1 8 64)")
    p.add_argument("--cases", nargs="+", choices=sorted(CASES), default=None, help="cases to run (default all)")
    p.add_argument("--device-only", action="store_true",
                   help="only the GPU part (the OpenCV loop is still timed as its reference); needs CUDA")
    p.add_argument("--json", metavar="OUT", help="also write all results to this JSON file")
    p.add_argument("--quick", action="store_true", help="smoke run: 64² images, batches 1 2, few rounds")
    p.add_argument("--budget", type=float, default=None, help="seconds of timing per row (default 1.0)")
    p.add_argument("--bandwidth", action="store_true",
                   help="also measure the memory bandwidth of memory-bound ops on a resident batch (needs a torch "
                        "device)")
    p.add_argument("--bandwidth-size", type=int, default=None, help="its image side (default: the largest size)")
    p.add_argument("--bandwidth-batch", type=int, default=None, help="its batch (default: the largest batch)")
    p.add_argument("--torch-device", default=None,
                   help="device for the batched part (default: cuda when available, else none); "
                        "'cpu' exercises that code path on a machine without a GPU")
    a = p.parse_args(argv)
    a.sizes = a.sizes or ([64] if a.quick else [512, 1024])
    a.batches = a.batches or ([1, 2] if a.quick else [1, 8, 64])
    a.cases = a.cases or list(CASES)
    if a.torch_device is None and torch.cuda.is_available():
        a.torch_device = "cuda"
    if a.device_only and a.torch_device is None:
        p.error("--device-only needs CUDA (or --torch-device)")
    if a.bandwidth and a.torch_device is None:
        p.error("--bandwidth needs CUDA (or --torch-device)")
    a.bandwidth_size = a.bandwidth_size or max(a.sizes)
    a.bandwidth_batch = a.bandwidth_batch or max(a.batches)
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    torch.set_num_threads(_cores())
    timing = ({"budget": a.budget or 0.05, "min_rounds": 2, "max_rounds": 5, "min_sample": 0.001} if a.quick else
              {"budget": a.budget or 1.0, "min_rounds": 3, "max_rounds": 200, "min_sample": 0.005})
    cpu_device = None
    if not a.device_only:
        cpu_device = "auto" if resolve_device("auto") == "opencv" else "opencv"
    info = machine_info(a.torch_device)
    cpu_label = cpu_device if cpu_device != "opencv" else "opencv (what 'auto' means on a CPU)"

    print("## tools/bench.py: Executor vs a plain per-image OpenCV loop\n")
    print(f"- date: {info['date']}" + (f", commit {info['git_commit']}" if info["git_commit"] else ""))
    print(f"- CPU: {info['cpu']}, {info['cores']} cores; OpenCV threads {info['opencv_threads']}, "
          f"torch threads {info['torch_threads']}")
    print(f"- python {info['python']}, torch {info['torch']}, kornia {info['kornia']}, opencv {info['opencv']}, "
          f"numpy {info['numpy']}; {info['platform']}")
    gpu = info["gpu"]
    if gpu is None:
        print("- GPU: none (CUDA not available): GPU part skipped")
    else:
        print(f"- GPU: {gpu['name']}" + (f", {gpu['memory_gib']} GiB, CUDA {gpu['cuda']}" if "cuda" in gpu else ""))
        peak_text = f"{gpu['peak_bandwidth'] / 1e12:.2f} TB/s" if gpu["peak_bandwidth"] else "?"
        print(f"- peak memory bandwidth: {peak_text} ({gpu['peak_source']})")
    print(f"- sizes {a.sizes}, batches {a.batches}; timing: about {timing['budget']:g} s per row, "
          f"{timing['min_rounds']}-{timing['max_rounds']} interleaved rounds, samples of >= "
          f"{timing['min_sample'] * 1e3:g} ms, median")

    cases = [CASES[c] for c in a.cases]
    for c in cases:
        print(f"- {c.name}: {c.doc}")

    rows = []
    max_batch = max(a.batches)
    for size in a.sizes:
        images = _demo_images(size, max_batch)
        for case in cases:
            for batch in a.batches:
                row = bench_row(case, images, batch, cpu_device=cpu_device, gpu_device=a.torch_device, timing=timing)
                rows.append(row)
                print(f"  {case.name:12s} {size:5d}² x {batch:3d}: baseline {_fmt_ips(row['baseline_ips'])} img/s"
                      + (f", executor {_fmt_ips(row['cpu_ips'])} ({row['cpu_ratio']:.2f})" if "cpu_ips" in row else "")
                      + (f", gpu {_fmt_ips(row['gpu_resident_ips'])} ({_fmt_x(row['gpu_resident_speedup'])}x)"
                         if "gpu_resident_ips" in row else ""), flush=True)
        del images
        gc.collect()

    bandwidth = None
    if a.bandwidth:
        bandwidth = bench_bandwidth(a.torch_device, a.bandwidth_size, a.bandwidth_batch, gpu["peak_bandwidth"], timing)
    mismatches = [(r["case"], r["size"], r["batch"], k, v) for r in rows for k, v in r["errors"].items()]
    if bandwidth:
        mismatches += [("bandwidth", a.bandwidth_size, a.bandwidth_batch, op, problem)
                       for op, problem in bandwidth["errors"].items()]
    summary = {"mismatches": len(mismatches)}
    info["load_average_at_end"] = _load()
    start, end, cores = info["load_average_at_start"], info["load_average_at_end"], info["cores"]
    load_note = None
    if start is not None and end is not None:
        # At the end the load includes this run's own threads (up to one per core).
        busy = start > 0.5 * cores + 0.5 or end > 1.5 * cores + 0.5
        load_note = (f"1-minute load average at start / end: {start:.2f} / {end:.2f} on {cores} cores"
                     + ("  -- WARNING: other work was running; timings are noisy" if busy else ""))
    if cpu_device is not None:
        _print_cpu_table(rows, cpu_label)
        worst = min(rows, key=lambda r: r["cpu_ratio"])
        ok = all(r["cpu_pass"] for r in rows)
        summary["cpu"] = {"pass": ok, "worst_ratio": worst["cpu_ratio"],
                          "worst_at": [worst["case"], worst["size"], worst["batch"]]}
        print(f"\nCPU overhead target (<=1.3x): {'PASS' if ok else 'FAIL'} (worst ratio {worst['cpu_ratio']:.2f} = "
              f"{1 / worst['cpu_ratio']:.2f}x the loop's time, at {worst['case']} {worst['size']}² "
              f"x {worst['batch']})")
    if a.torch_device is not None:
        peak = gpu["peak_bandwidth"]
        _print_gpu_table(rows, peak)
        targeted = [r for r in rows if "gpu_pass" in r]
        if targeted:
            ok = all(r["gpu_pass"] for r in targeted)
            worst = min(targeted, key=lambda r: r["gpu_resident_speedup"])
            summary["gpu"] = {"pass": ok, "worst_speedup": worst["gpu_resident_speedup"], "worst_at": worst["case"]}
            print(f"\nGPU speedup target (>=20x at 64 x 1024², {', '.join(GPU_TARGET_CASES)}): "
                  f"{'PASS' if ok else 'FAIL'} (worst {worst['gpu_resident_speedup']:.1f}x, {worst['case']})")
        else:
            summary["gpu"] = None
            print("\nGPU speedup target (>=20x at 64 x 1024²): not measured (needs size 1024 and batch 64)")
        if peak:
            best = max((r for r in rows if "gpu_bandwidth" in r), key=lambda r: r["gpu_bandwidth"], default=None)
            if best:
                print(f"Best achieved bandwidth: {best['gpu_bandwidth'] / 1e9:.1f} GB/s = "
                      f"{100 * best['gpu_bandwidth'] / peak:.1f}% of peak "
                      f"({best['case']} {best['size']}² x {best['batch']})")
        for r in rows:
            if "gpu_bandwidth" in r:
                r["gpu_bandwidth_share"] = r["gpu_bandwidth"] / peak if peak else None
    if bandwidth:
        _print_bandwidth(bandwidth)
        summary["bandwidth"] = {"pass": bandwidth["pass"], "best_kernel_share": bandwidth["best_kernel_share"],
                                "best_kernel": bandwidth["best_kernel"]}
    for case, size, batch, key, problem in mismatches:
        print(f"MISMATCH {case} {size}² x {batch} [{key}]: {problem}")
    if load_note:
        print(load_note)
    verdict = "all outputs agree with the OpenCV loop" if not mismatches else f"{len(mismatches)} MISMATCHES"
    print(f"Correctness: {verdict}")

    if a.json:
        report = {"machine": info, "settings": {"sizes": a.sizes, "batches": a.batches, "cases": a.cases,
                                                 "cpu_device": cpu_device, "torch_device": a.torch_device,
                                                 "timing": timing},
                  "cases": {c.name: {"op": c.op, "doc": c.doc} for c in cases},
                  "rows": rows, "bandwidth": bandwidth, "summary": summary}
        Path(a.json).write_text(json.dumps(report, indent=1))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
