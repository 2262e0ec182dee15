"""Nothing a run starts outlives it (runtime/lifecycle.py): not a helper, not a process that detached itself, not
the vLLM engine of eval/run_vllm.py, whether the run is killed with `kill -9`, stopped with SIGTERM or Ctrl-C, or
ends by itself. Every process below the command is recorded before the signal; all must be gone soon after.
Every wait polls for what it awaits, bounded generously: a loaded machine makes each step several times slower."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
GONE_S = 60  # how soon after the signal no process the run started may be left (the watcher's graces are 4 + 2 s)
STARTED_S = 120  # how long the run may take to start its helper, its detached process and say so
ENGINE_S = 1200  # how long eval/run_vllm.py may take to start its engine and record (30-90 s on two idle cores)

# A run with a helper process and a detached one (its parent exits at once, so the kernel hands it to the
# nearest subreaper); it prints its pid, then waits until the file named by its argument exists (the test
# creates it once it has seen every process), then prints "closed" when its `finally` runs.
RUN = '''
import os, subprocess, sys, time
from runtime.lifecycle import supervise

supervise()
from runtime import cli


def main(argv):
    subprocess.Popen(["sleep", "600"])
    subprocess.Popen(["sh", "-c", "sleep 600 & exit 0"], start_new_session=True)
    print("run", os.getpid(), flush=True)
    try:
        while not os.path.exists(argv[0]):
            time.sleep(0.05)
    finally:
        print("closed", flush=True)
    return 3


sys.exit(cli.run(main))
'''


def _start(command: list[str], log: Path) -> subprocess.Popen:
    """The command in a session of its own: a signal to its process group is a Ctrl-C at its terminal. It starts
    with Ctrl-C's default action, as a program started at a terminal does: a test suite started in the background
    (`make test &`) inherits SIGINT ignored, which would make every Ctrl-C case a no-op."""
    with open(log, "wb") as out:
        return subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}, preexec_fn=_terminal_signals)


def _terminal_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def _below(process: subprocess.Popen, seen: dict[int, psutil.Process]) -> dict[int, str]:
    """Adds the processes now below `process` to `seen`; returns their names (vLLM renames its processes)."""
    names = {}
    try:
        for child in psutil.Process(process.pid).children(recursive=True):
            seen.setdefault(child.pid, child)
            names[child.pid] = child.name()
    except psutil.Error:  # ended meanwhile
        pass
    return names


def _running(processes) -> list[psutil.Process]:
    running = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                running.append(process)
        except psutil.Error:
            pass
    return running


def _wait_until_started(process: subprocess.Popen, log: Path, seen: dict[int, psutil.Process]) -> None:
    """Until the run has said its pid and its helper and detached `sleep`s are both below the command."""
    deadline = time.monotonic() + STARTED_S
    while list(_below(process, seen).values()).count("sleep") < 2 or "run" not in log.read_text():
        assert process.poll() is None, f"the run ended before it started its processes:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no run with its two sleeps within {STARTED_S} s:\n{log.read_text()}"
        time.sleep(0.05)


def _left_after(processes, timeout_s: float) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    while _running(processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _running(processes)


def _kill(process: subprocess.Popen, seen: dict[int, psutil.Process]) -> None:
    """A failed test leaves nothing behind either."""
    if process.poll() is None:
        process.kill()
    for leftover in _running(seen.values()):
        try:
            leftover.kill()
        except psutil.Error:
            pass
    process.wait()


def _signal(process: subprocess.Popen, how: str, run_pid: int | None = None) -> None:
    if how == "kill -9":
        os.kill(process.pid, signal.SIGKILL)
    elif how == "kill -9 the run":  # what the OOM killer does: the biggest process, not the one a user sees
        os.kill(run_pid, signal.SIGKILL)
    elif how == "SIGTERM":
        os.kill(process.pid, signal.SIGTERM)
    else:  # Ctrl-C: the terminal signals every process of the foreground group, engines included
        os.killpg(process.pid, signal.SIGINT)


EXIT = {"kill -9": -signal.SIGKILL, "kill -9 the run": -signal.SIGKILL, "SIGTERM": 128 + signal.SIGTERM,
        "Ctrl-C": -signal.SIGINT}


@pytest.mark.parametrize("how", list(EXIT))
def test_nothing_a_run_started_outlives_a_signal(tmp_path, how):
    log = tmp_path / "log"
    process = _start([sys.executable, "-c", RUN, str(tmp_path / "never")], log)
    seen: dict[int, psutil.Process] = {}
    try:
        _wait_until_started(process, log, seen)
        run_pid = int(log.read_text().split()[1])
        _signal(process, how, run_pid)
        process.wait(timeout=GONE_S)
        left = _left_after(seen.values(), GONE_S)
        assert not left, f"still running {GONE_S} s after {how}: {[(p.pid, p.name()) for p in left]}"
    finally:
        _kill(process, seen)
    output = log.read_text()
    assert process.returncode == EXIT[how], output
    assert output.count("closed") == (0 if how == "kill -9 the run" else 1), output  # a repeated signal is one
    assert "Traceback" not in output
    assert len(seen) >= 4  # the watcher, the run, the helper and the detached sleep


def test_what_a_run_leaves_behind_ends_with_it(tmp_path):
    log, go = tmp_path / "log", tmp_path / "go"
    process = _start([sys.executable, "-c", RUN, str(go)], log)
    seen: dict[int, psutil.Process] = {}
    try:
        _wait_until_started(process, log, seen)
        go.touch()
        process.wait(timeout=GONE_S)
        left = _left_after(seen.values(), GONE_S)
        assert not left, f"still running {GONE_S} s after the run ended: {[(p.pid, p.name()) for p in left]}"
    finally:
        _kill(process, seen)
    assert process.returncode == 3 and "closed" in log.read_text()  # the run's own exit status
    assert len(seen) >= 4  # the watcher, the run, the helper and the detached sleep


@pytest.mark.parametrize("how", ["kill -9", "SIGTERM", "Ctrl-C"])
def test_no_engine_process_outlives_run_vllm(tiny_model_dir, tmp_path, how):
    """The real thing: eval/run_vllm.py on the vLLM CPU engine (EngineCore, its worker, the resource tracker).
    kill -9 as soon as the engine's worker exists; SIGTERM and Ctrl-C once episodes are being recorded."""
    out, log = tmp_path / "run", tmp_path / "log"
    process = _start([sys.executable, "eval/run_vllm.py", "--model", str(tiny_model_dir), "--tasks", "rotated_ocr",
                      "--per_task", "500", "--tools", "on", "--force_tool_calls", "2", "--max_tokens", "96",
                      "--max_images", "4", "--max_pixels", "0", "--max_model_len", "4096", "--dtype", "float32",
                      "--out", str(out)], log)
    seen: dict[int, psutil.Process] = {}
    try:
        awaited = "the engine's worker" + ("" if how == "kill -9" else " and a recorded episode")
        deadline = time.monotonic() + ENGINE_S
        while True:
            names = _below(process, seen)
            recording = (out / "records.jsonl").exists() and (out / "records.jsonl").read_text().count("\n") >= 1
            if "VLLM::Worker" in names.values() and (how == "kill -9" or recording):
                break
            assert process.poll() is None, f"the run ended first:\n{log.read_text(errors='replace')[-3000:]}"
            assert time.monotonic() < deadline, (f"no {awaited} within {ENGINE_S} s:\n"
                                                 f"{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        _signal(process, how)
        process.wait(timeout=2 * GONE_S)  # the run closes its engine first
        left = _left_after(seen.values(), GONE_S)
        assert not left, f"still running {GONE_S} s after {how}: {[(p.pid, p.name()) for p in left]}"
    finally:
        _kill(process, seen)
    output = log.read_text(errors="replace")
    assert process.returncode == EXIT[how], output[-3000:]
    if how != "kill -9":  # the run closed its engine itself and says how to resume
        assert "records are saved in" in output, output[-3000:]
