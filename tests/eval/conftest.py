"""Session fixtures: a tiny random-weight Qwen2.5-VL and one vLLM CPU engine serving it (an engine takes
30-90 s to start on two cores, so every test shares it); a tiny Qwen2.5-VL fine-tuned to call tools
(tests/eval/tool_caller.py) and a real `transformers serve` on 127.0.0.1 serving it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval.backends.openai_http import OpenAIHTTPBackend
from tests.eval.tool_caller import train_tool_caller

SERVER_START_S = 120  # about 7 s on an idle machine


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from runtime.tiny_model import build_model

    return build_model("qwen2_5_vl", tmp_path_factory.mktemp("tiny-qwen2_5_vl"))


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir):
    import psutil

    from eval.backends.vllm_engine import VLLMEngineBackend, pin_threads

    cores = sorted(os.sched_getaffinity(0))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
        # 32k: VTC-Bench's 35 tool schemas alone are ~14k tokens of the tiny tokenizer
        # prompt_checks=None: every prompt the session sends (every suite and preset that runs on the engine) is
        # also tokenized whole by the engine, and must give the ids its remembered pieces gave
        backend = VLLMEngineBackend(str(tiny_model_dir), max_model_len=32768, limit_images=4, dtype="float32",
                                    forced_replies=True, prompt_checks=None)
    # the engine moved this process off its worker's cores; the session's other tests start servers and runs
    # in subprocesses, which would inherit that: give it every core back
    pin_threads(psutil.Process(), cores)
    yield backend
    backend.close()
    assert backend.prompt_tokens.mismatch is None, backend.prompt_tokens.mismatch


@dataclass(frozen=True)
class Served:
    base_url: str
    model: str  # the name requests must give: the served directory
    log: Path


@pytest.fixture(scope="session")
def tool_caller(tmp_path_factory) -> Path:
    return train_tool_caller(tmp_path_factory.mktemp("tool_caller"))


@pytest.fixture(scope="session")
def transformers_server(tool_caller, tmp_path_factory):
    """`transformers serve` on a free port serving the tool caller, offline, one CPU thread per request (two
    threads spin-wait badly when the cores are shared)."""
    folder = tmp_path_factory.mktemp("transformers_serve")
    (folder / "hub").mkdir()  # the server answers /v1/models with HTTP 500 unless HF_HUB_CACHE exists
    env = {**os.environ, "HF_HUB_CACHE": str(folder / "hub"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    port = free_port()
    log = folder / "server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([str(Path(sys.executable).parent / "transformers"), "serve", str(tool_caller),
                                    "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"], env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
    served = Served(f"http://127.0.0.1:{port}/v1", str(tool_caller), log)
    try:
        wait_until_serving("transformers serve", process, served.base_url, log, SERVER_START_S)
        yield served
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until_serving(name: str, process: subprocess.Popen, base_url: str, log: Path, timeout_s: float,
                       every_poll=lambda: None) -> None:
    """Until the server `process` started answers `GET base_url/models`; it exiting first, or taking over
    `timeout_s`, raises with the tail of its log. `every_poll` runs between probes."""
    with OpenAIHTTPBackend(base_url, "probe") as probe:
        deadline = time.monotonic() + timeout_s
        while True:
            every_poll()
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with code {process.returncode}:\n{_tail(log)}")
            try:
                probe.wait_ready(timeout_s=1)
                return
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} did not answer in {timeout_s} s:\n{_tail(log)}") from None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
