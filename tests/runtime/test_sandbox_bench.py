"""Smoke test of runtime/sandbox/bench.py: a quick run end to end, with every figure present and every
concurrent episode successful. No timing assertions: speed is the benchmark's business, not CI's."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the sandbox needs Linux")


def test_quick_bench_runs_and_reports_every_figure(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "runtime.sandbox.bench", "--quick", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    report = json.loads(out.read_text())
    for key in ("trivial_cell", "crop_save", "crop_save_in_process", "decode", "decode_in_process"):
        assert report[key]["n"] >= 5 and 0 < report[key]["p50_ms"] <= report[key]["p95_ms"], key
    assert report["trivial_cell"]["target_p50_ms"] == 30 and isinstance(report["trivial_cell"]["passed"], bool)
    for variant in ("with_torch", "without_torch"):
        assert report[variant]["pool_start_s"] > 0 and report[variant]["session_start"]["p50_ms"] > 0
    assert "tools" in report["with_torch"]["preload"] and "tools" not in report["without_torch"]["preload"]
    concurrent = report["concurrent"]
    assert concurrent["episodes"] == 16 and concurrent["ok"] == 16, concurrent["problems"]
    text = proc.stdout
    assert re.search(r"trivial cell `x = 1` on a warm worker: p50 [\d.]+ ms, p95 [\d.]+ ms \(n=\d+\); "
                     r"target p50 <= 30 ms: (PASS|FAIL)", text)
    assert re.search(r"16 concurrent episodes on \d+ cores .*: 16/16 ok \(PASS\), wall [\d.]+ s", text)
    for phrase in ("zygote start, preloading", "zygote start without torch", "session start (fork",
                   "crop + save of a 1024x1024 PNG", "the same code in this process",
                   "decoded by the worker (session.decode)", "to_array on it in this process"):
        assert phrase in text, phrase
