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


def test_the_benchmark_runs_three_turn_episodes_and_prints_every_ratio_and_the_harness_cpu():
    command = [sys.executable, "eval/bench.py", "--episodes", "4", "--sequential", "2", "--think", "4,8",
               "--max-tokens", "64", "--rounds", "1"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = result.stdout
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: a target missed, which is not CI's to judge
    harness = re.search(r"harness: +4 episodes, 3\.00 turns/episode, 8 tool calls ran "
                        r"\(their images [\d.]+-[\d.]+ MP\), (\d+) tokens", out)
    batches = {name: re.search(rf"batch \({re.escape(name)}\): +one LLM\.chat of 4 prompts, [^:]+: (\d+) tokens", out)
               for name in ("matched", "equal", "matched + tool images")}
    assert harness and all(batches.values()), out
    made = int(harness[1])
    assert int(batches["matched"][1]) == int(batches["matched + tool images"][1]) == made
    assert int(batches["equal"][1]) == 4 * math.ceil(made / 4)
    for ratio in ("batch (matched)", "batch (equal)", "batch (matched + tool images)", "sequential"):
        assert re.search(rf"harness / {re.escape(ratio)} += [\d.]+x", out), out
    assert re.search(r"batch \(matched\) = ([\d.]+)x, the median of \1 ", out), out  # one round: its own ratio
    assert ("FAIL" in out) == (result.returncode == 1)
    # the harness's CPU per turn, by part, and the parts add up to no more than the whole process
    cpu = dict((name, float(ms)) for ms, name in re.findall(r"^ +([\d.]+)  (.+)$", out.split("harness CPU per turn")[1],
                                                             re.MULTILINE))
    assert {"vLLM input processing (image preprocessing, requests)", "prompt token ids (remembered pieces)",
            "run the tools (tool thread)", "parse the reply (episode state machine)",
            "the whole harness process"} <= set(cpu), out
    parts = sum(ms for name, ms in cpu.items() if not name.startswith(("the whole", "the rest")))
    assert 0 < parts <= cpu["the whole harness process"] + 0.01, out
