"""Smoke test of tools/bench.py: it runs end to end, covers every case, and checks its outputs against the
plain OpenCV loop before timing. No timing assertions: speed is the benchmark's business, not CI's."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.bench import CASES, MEMORY_BOUND_OPS

ROOT = Path(__file__).resolve().parents[2]


def run_bench(tmp_path, *extra):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench.py"), "--quick", "--json", str(out), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout, json.loads(out.read_text())


def check_rows(report, variants):
    assert set(report["cases"]) == set(CASES)
    rows = report["rows"]
    sizes, batches = report["settings"]["sizes"], report["settings"]["batches"]
    assert {(r["case"], r["size"], r["batch"]) for r in rows} == {
        (c, s, b) for c in CASES for s in sizes for b in batches}
    for r in rows:
        label = f"{r['case']} {r['size']}x{r['batch']}"
        assert r["baseline_ips"] > 0, label
        # the correctness check ran for every variant, and passed
        assert set(r["checks"]) == set(variants), label
        assert all(r["checks"].values()) and not r["errors"], f"{label}: {r['errors']}"
        for v in variants:
            assert r[f"{v}_ips"] > 0, label
    return rows


def test_quick_cpu(tmp_path):
    stdout, report = run_bench(tmp_path)
    variants = ["cpu"] + (["gpu_resident", "gpu_numpy"] if report["settings"]["torch_device"] else [])
    rows = check_rows(report, variants)
    for r in rows:
        assert r["cpu_ratio"] > 0 and isinstance(r["cpu_pass"], bool)
    assert report["summary"]["mismatches"] == 0
    assert isinstance(report["summary"]["cpu"]["pass"], bool)
    assert "CPU overhead target (<=1.3x): " in stdout
    assert report["machine"]["cores"] >= 1 and report["machine"]["opencv"]


@pytest.mark.parametrize("cases", [["rotate", "blur", "equalize", "threshold"]])
def test_quick_batched_path_on_cpu(tmp_path, cases):
    """The GPU part's code (resident tensors, numpy in/out, bandwidth) run on torch's CPU device."""
    stdout, report = run_bench(tmp_path, "--torch-device", "cpu", "--device-only", "--batches", "2", "--cases", *cases,
                               "--bandwidth")
    rows = report["rows"]
    assert {r["case"] for r in rows} == set(cases)
    for r in rows:
        assert set(r["checks"]) == {"gpu_resident", "gpu_numpy"} and all(r["checks"].values()), r["errors"]
        assert r["gpu_resident_ips"] > 0 and r["gpu_numpy_ips"] > 0 and r["gpu_bandwidth"] > 0
        assert "cpu_ips" not in r
    # the memory-bound ops on a resident batch: checked against OpenCV, then timed with a copy for scale
    bandwidth = report["bandwidth"]
    assert (bandwidth["size"], bandwidth["batch"]) == (64, 2) and bandwidth["errors"] == {}
    assert set(bandwidth["results"]) == {"copy"} | {f"{op}_{how}" for op, _ in MEMORY_BOUND_OPS
                                                    for how in ("kernel", "executor")}
    assert all(r["bytes_per_s"] > 0 for r in bandwidth["results"].values())
    assert bandwidth["results"]["copy"]["share_of_copy"] == 1.0
    assert bandwidth["best_kernel_share"] is None and bandwidth["pass"] is None  # no peak for a CPU
    assert "### Memory bandwidth" in stdout and report["summary"]["bandwidth"]["pass"] is None


def test_bandwidth_needs_a_torch_device(monkeypatch):
    import torch

    from tools import bench

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without a GPU, whichever runs this
    with pytest.raises(SystemExit):
        bench.parse_args(["--bandwidth"])
    args = bench.parse_args(["--bandwidth", "--torch-device", "cpu", "--sizes", "64", "128", "--batches", "3"])
    assert (args.bandwidth_size, args.bandwidth_batch) == (128, 3)


def test_bandwidth_defaults_to_cuda_when_available(monkeypatch):
    import torch

    from tools import bench

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # parsing only: nothing touches the device
    args = bench.parse_args(["--bandwidth", "--sizes", "64", "--batches", "2"])
    assert args.torch_device == "cuda" and (args.bandwidth_size, args.bandwidth_batch) == (64, 2)


class _Props:
    def __init__(self, name, **attrs):
        self.name = name
        self.__dict__.update(attrs)


@pytest.mark.parametrize("props, peak, source", [
    (_Props("NVIDIA H100 80GB HBM3", memory_clock_rate=2_619_000, memory_bus_width=5120), 3.352e12,
     "device properties"),
    (_Props("NVIDIA H100 80GB HBM3", memory_clock_rate=0, memory_bus_width=5120), 3.35e12, "table"),
    (_Props("NVIDIA H100 PCIe"), 2.0e12, "table"),
    (_Props("NVIDIA H200"), 4.8e12, "table"),
    (_Props("NVIDIA A100-SXM4-80GB"), 2.0e12, "table"),
    (_Props("NVIDIA A100-SXM4-40GB"), 1.555e12, "table"),
    (_Props("NVIDIA A100 80GB PCIe"), 2.0e12, "table"),
    (_Props("Some Future GPU"), None, "unknown"),
])
def test_peak_bandwidth(monkeypatch, props, peak, source):
    import torch

    from tools import bench

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    got, where = bench.peak_bandwidth("cuda")
    assert where.startswith(source)
    assert (got is None) if peak is None else got == pytest.approx(peak, rel=1e-3)
