"""No silent options: every setting of `eval/run_vllm.py`, tried on every suite and backend, is either read by the
run or refused with an error that names it."""

from __future__ import annotations

from dataclasses import fields

import pytest

from eval.config import BACKEND_SETTINGS, BACKENDS, SUITES, EvalConfig
from eval.run_vllm import parse, resolve
from eval.suites import BENCHMARKS, SUITE_SETTINGS, SYNTHETIC_SETTINGS, suite_class

# a valid value for every setting (a new setting must be added here, so that this test covers it)
VALUES = {
    "model": "Qwen/Qwen2.5-VL-7B-Instruct", "preset": "qwen2.5-vl", "backend": "vllm", "base_url": "http://127.0.0.1:9/v1",
    "api_key_env": "MY_KEY", "suite": "synthetic", "data_dir": "data", "revision": "main", "scoring": "strict",
    "prompt_variant": "strong", "track": "code", "ablation": "no_vision_tools", "study": "function_calling", "critical": "flag", "web": "offline",
    "web_replay": "{replay}", "web_record": "web.jsonl", "web_cache": "{out}/cache", "web_max_calls": "10",
    "web_max_cost": "0.5", "web_timeout_s": "5", "tasks": "maze", "per_task": "2",
    "difficulty": "easy", "limit": "3", "toolset": "default", "tools": "both", "out": "{out}", "overwrite": "true",
    "shard": "0/2", "seed": "1", "max_tokens": "0", "temperature": "0.5", "top_p": "0.9", "top_k": "5",
    "presence_penalty": "0.5", "max_turns": "4", "max_tool_calls": "4", "max_images": "8", "max_pixels": "0",
    "force_tool_calls": "1", "max_active": "4", "max_model_len": "8192", "tensor_parallel_size": "1",
    "gpu_memory_utilization": "0.8", "dtype": "bfloat16", "concurrency": "4", "timeout_s": "30", "retries": "1",
    "send_stop": "false", "api": "openai", "batch_size": "2", "judge_model": "none", "judge_retries": "1",
    "judge_base_url": "http://127.0.0.1:9/v1", "judge_api": "vllm",
}
SUITE_NAMES = (*SUITES, "tasks.jsonl")
LIVE_ONLY = ("web_record", "web_cache", "web_max_calls", "web_max_cost", "web_timeout_s")


def test_every_setting_has_a_value_here():
    assert set(VALUES) == {f.name for f in fields(EvalConfig)}


def _argv(tmp_path, suite: str, name: str, backend: str = "vllm") -> list[str]:
    replay = tmp_path / "replay.jsonl"
    replay.write_text("")
    (tmp_path / "tasks.jsonl").write_text("")
    suite_arg = str(tmp_path / suite) if suite.endswith(".jsonl") else suite
    argv = ["--suite", suite_arg, "--model", VALUES["model"], "--backend", backend, "--out", str(tmp_path / "run")]
    if backend == "openai":
        argv += ["--base_url", VALUES["base_url"]]
    live = ["--web", "live"] if name in LIVE_ONLY else []  # read only with --web live
    if name in ("suite", "model", "backend", "out") or (backend == "openai" and name == "base_url"):
        return argv
    value = VALUES[name].format(replay=replay, out=tmp_path / "run")
    return argv + live + [f"--{name}", value]


def _reads(suite: str) -> frozenset:
    return SYNTHETIC_SETTINGS if suite == "synthetic" else suite_class(suite if suite in BENCHMARKS else None).settings


@pytest.mark.parametrize("suite", SUITE_NAMES)
@pytest.mark.parametrize("name", [f.name for f in fields(EvalConfig)])
def test_every_setting_on_every_suite_is_read_or_refused(tmp_path, suite, name):
    argv = _argv(tmp_path, suite, name)
    unread = name in SUITE_SETTINGS and name not in _reads(suite)
    wrong_backend = name in BACKEND_SETTINGS and BACKEND_SETTINGS[name] != "vllm"
    if unread or wrong_backend:
        with pytest.raises(ValueError, match=f"does not use .*--{name}"):
            resolve(parse(argv))
    else:
        resolve(parse(argv))


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "vllm"])
def test_backend_settings_are_read_by_their_backend_only(tmp_path, backend):
    for name, owner in BACKEND_SETTINGS.items():
        argv = _argv(tmp_path, "synthetic", name, backend)
        if owner == backend:
            resolve(parse(argv))
        else:
            with pytest.raises(ValueError, match=f"--backend {backend} does not use --{name}"):
                resolve(parse(argv))


def test_each_benchmark_names_only_real_suite_settings():
    for name in BENCHMARKS:
        assert suite_class(name).settings <= set(SUITE_SETTINGS), name
