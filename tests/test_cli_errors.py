"""Every command line program reads a user's mistake back as a message, not a crash (runtime/cli.py): status 2,
a line or two that name the problem and what to do, no traceback unless asked for with --debug or
TIRLAB_DEBUG=1. Each case fails before any model loads."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runtime import cli

ROOT = Path(__file__).resolve().parents[1]
RUN_VLLM = ["eval/run_vllm.py"]
SFT = ["train/sft.py", "--output_dir", "{tmp}/out"]
GRPO = ["train/grpo.py", "--output_dir", "{tmp}/out"]
PILOT = ["train/pilot.py"]
MAKE = ["data_gen/make.py"]
TOOLS = ["-m", "tools"]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """Broken inputs: config files, a suite whose image is missing, a folder that is not a model, a tiny model."""
    from runtime.tiny_model import build_model

    folder = tmp_path_factory.mktemp("inputs")
    (folder / "bad.yaml").write_text("model: [unclosed\n")
    (folder / "unknown.yaml").write_text("modle: Qwen/Qwen2.5-VL-7B-Instruct\n")
    (folder / "list.yaml").write_text("- model\n")
    (folder / "suite.jsonl").write_text('{"id": "a", "question": "What is written?", "images": ["gone.png"], '
                                        '"answer": "x", "scorer": "text_match"}\n')
    (folder / "not-a-model").mkdir()
    build_model("qwen2_5_vl", folder / "model")
    return folder


def _run(args: list[str], files: Path, tmp_path: Path, **env) -> subprocess.CompletedProcess:
    args = [arg.format(files=files, tmp=tmp_path) for arg in args]
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TIRLAB_DEBUG": "", **env})


CASES = [  # (program and arguments, what the message says)
    (RUN_VLLM + ["--per_tsk", "3"], "unknown option(s) --per_tsk (did you mean --per_task?)"),
    (RUN_VLLM + ["--per_task", "many"], "argument --per_task/--per-task: invalid int value: 'many'"),
    (RUN_VLLM + ["--config", "{files}/missing.yaml"], "missing.yaml: no such file"),
    (RUN_VLLM + ["--config", "{files}/bad.yaml"], "bad.yaml is not valid YAML: expected ',' or ']'"),
    (RUN_VLLM + ["--config", "{files}/unknown.yaml"], "unknown.yaml: modle (did you mean model?)"),
    (RUN_VLLM + ["--config", "{files}/list.yaml"], "must hold a YAML mapping"),
    (RUN_VLLM + ["--suite", "{files}/missing.jsonl"], "or a tasks .jsonl file; '{files}/missing.jsonl' is neither"),
    (RUN_VLLM + ["--suite", "{files}/suite.jsonl", "--backend", "reference", "--model", "reference",
                 "--out", "{tmp}/run"], "image 'gone.png' not found"),
    (RUN_VLLM + ["--suite", "tir_bench", "--data_dir", "{files}/missing", "--backend", "reference", "--model",
                 "reference", "--judge_model", "none", "--out", "{tmp}/run"], "missing is not a folder"),
    (RUN_VLLM + ["--model", "/no/such/model"], "--model /no/such/model: no such folder"),
    (RUN_VLLM + ["--model", "{files}/not-a-model"], "not-a-model: the folder has no config.json"),
    (RUN_VLLM + ["--model", "nobody/no-such-model", "--out", "{tmp}/run"], "not in the Hugging Face cache"),
    (RUN_VLLM + ["--model", "{files}/model", "--judge_model", "nobody/no-such-judge", "--out", "{tmp}/run"],
     "--judge_model nobody/no-such-judge: not a local folder"),
    (SFT + ["--nonsense"], "unknown option(s) --nonsense"),
    (SFT + ["--mode", "sideways"], "argument --mode: invalid choice: 'sideways'"),
    (SFT + ["--config", "{files}/unknown.yaml"], "unknown.yaml: modle (did you mean mode?)"),
    (SFT + ["--model_name_or_path", "nobody/no-such-model", "--dataset_name", "{files}"], "not in the Hugging Face"),
    (SFT + ["--model_name_or_path", "{files}/model", "--dataset_name", "{files}/missing"],
     "cannot load split 'train' of dataset"),
    (SFT + ["--model_name_or_path", "{files}/model", "--dataset_name", "nobody/no-such-dataset"],
     "Couldn't reach 'nobody/no-such-dataset' on the Hub"),
    (GRPO + ["--config", "{files}/unknown.yaml"], "Unknown arguments from config file {files}/unknown.yaml: modle"),
    (GRPO + ["--tool_call_rate_flor", "0.1"], "unknown option(s) --tool_call_rate_flor (did you mean "
                                              "--tool_call_rate_floor?)"),
    (GRPO + ["--model_name_or_path", "{files}/model", "--dataset_name", "{files}/missing", "--toolset",
             "tir_rotate"], "cannot load split 'train' of dataset"),
    (PILOT + ["{files}/missing"], "is not a directory of SFT runs"),
    (MAKE + ["sft", "--task", "rotated_ocr", "--n", "many", "--out", "{tmp}/data"], "invalid int value: 'many'"),
    (MAKE + [], "the following arguments are required: command"),
    (TOOLS + ["list", "--toolset", "nope"], "argument --toolset: invalid choice: 'nope'"),
    (TOOLS + ["list", "--markdown", "--update", "{files}/missing.md"], "No such file or directory"),
]


DEBUG_CASES = [
    (RUN_VLLM + ["--model", "/no/such/model", "--debug"], {}),
    (RUN_VLLM + ["--model", "/no/such/model"], {"TIRLAB_DEBUG": "1"}),
    (SFT + ["--debug", "--model_name_or_path", "/no/such/model", "--dataset_name", "{files}"], {}),
    (TOOLS + ["list", "--markdown", "--update", "{files}/missing.md", "--debug"], {}),
]


@pytest.fixture(scope="module")
def ran(files, tmp_path_factory) -> dict[tuple, subprocess.CompletedProcess]:
    """Every case's program, run two at a time up front (each starts Python, torch and transformers: seconds of
    imports before it reads its arguments); each test then reads its own case's result."""
    jobs = [(tuple(args), ()) for args, _ in CASES] + [(tuple(args), tuple(env.items())) for args, env in DEBUG_CASES]

    def run(job):
        args, env = job
        return job, _run(list(args), files, tmp_path_factory.mktemp("case"), **dict(env))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, jobs))


@pytest.mark.parametrize("args, message", CASES, ids=lambda case: " ".join(case) if isinstance(case, list) else None)
def test_a_mistake_is_a_short_message_and_status_2(files, ran, args, message):
    result = ran[tuple(args), ()]
    assert result.returncode == 2, result.stderr[-3000:]
    assert message.format(files=files) in result.stderr and "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [line for line in result.stderr.strip().splitlines() if "--debug" not in line]  # not the hint
    assert len(lines) <= 2, result.stderr


@pytest.mark.parametrize("args, env", DEBUG_CASES,
                         ids=["run_vllm --debug", "run_vllm TIRLAB_DEBUG=1", "sft --debug", "tools --debug"])
def test_debug_shows_the_traceback(ran, args, env):
    result = ran[tuple(args), tuple(env.items())]
    assert result.returncode == 2 and "Traceback (most recent call last)" in result.stderr, result.stderr[-3000:]


def test_a_debug_flag_with_a_value_is_the_programs_own(monkeypatch):
    """train/sft.py: transformers' `--debug underflow_overflow` stays an option of the trainer."""
    monkeypatch.setenv(cli.DEBUG_ENV, "")
    seen = []
    assert cli.run(seen.append, ["--debug", "underflow_overflow", "--mode", "direct"], debug_takes_values=True) == 0
    assert cli.run(seen.append, ["--mode", "direct", "--debug"], debug_takes_values=True) == 0
    assert seen == [["--debug", "underflow_overflow", "--mode", "direct"], ["--mode", "direct"]]
    assert cli.debugging()  # the second had tirlab's --debug, which the programs a run starts inherit
