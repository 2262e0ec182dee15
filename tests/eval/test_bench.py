"""eval/bench.py end to end at toy size on the vLLM CPU engine: every scripted tool call runs, the batch makes
as many tokens as the harness, and both ratios are printed. No timing assertions: speed is the benchmark's
business, not CI's."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmark_runs_three_turn_episodes_and_prints_both_ratios():
    command = [sys.executable, "eval/bench.py", "--episodes", "4", "--sequential", "2", "--think", "4,8",
               "--max-tokens", "64", "--rounds", "1"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = result.stdout
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: a target missed, which is not CI's to judge
    harness = re.search(r"harness: +4 episodes, 3\.00 turns/episode, 8 tool calls ran, (\d+) tokens", out)
    matched = re.search(r"batch \(matched\): +one LLM\.chat of 4 prompts, [^:]+: (\d+) tokens", out)
    equal = re.search(r"batch \(equal\): +one LLM\.chat of 4 prompts, [^:]+: (\d+) tokens", out)
    assert harness and matched and equal, out
    assert int(matched[1]) == int(harness[1]) and int(equal[1]) == 4 * math.ceil(int(harness[1]) / 4)
    for ratio in ("batch (matched)", "batch (equal)", "sequential"):
        assert re.search(rf"harness / {re.escape(ratio)} += [\d.]+x", out), out
    assert re.search(r"batch \(matched\) = ([\d.]+)x, the median of \1 ", out), out  # one round: its own ratio
    assert ("FAIL" in out) == (result.returncode == 1)
