"""eval/run_vllm.py as a user runs it: the reference policy scores the default suite, a killed run resumes
with exactly one record per task, shards merge into one report, and bad settings fail early and clearly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval.config import EvalConfig
from eval.presets import preset_for
from eval.run_vllm import evaluate, main, resolve
from eval.rundir import RunDir

ROOT = Path(__file__).resolve().parents[2]


def _config(out, **overrides) -> EvalConfig:
    return resolve(EvalConfig(model="reference", backend="reference", out=str(out), **overrides))


def _records(out) -> list[dict]:
    return RunDir(out).records()


def test_reference_policy_scores_the_default_suite(tmp_path):
    """Tools, protocols and scorers agree: replaying every task's reference through the loop is right."""
    evaluate(_config(tmp_path / "run", per_task=8))
    records = _records(tmp_path / "run")
    assert len(records) == 13 * 8 and {r["category"] for r in records} == set(_categories())
    accuracy = sum(r["score"] for r in records) / len(records)
    assert accuracy >= 0.99, [(r["id"], r["prediction"], r["truth"]) for r in records if r["score"] < 1]
    assert all(r["stop_reason"] == "answer" and r["tool_calls"] == r["reference_calls"] for r in records)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["modes"]["tools"]["overall"]["accuracy"] == pytest.approx(accuracy)
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| tools | " in report and (tmp_path / "run" / "plots").is_dir()


def _categories():
    from data_gen.tasks import TASKS

    return TASKS


def test_a_killed_run_resumes_with_exactly_one_record_per_task(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, str(ROOT / "eval" / "run_vllm.py"), "--model", "reference", "--backend", "reference",
               "--per_task", "6", "--tools", "both", "--out", str(out)]
    records = out / "records.jsonl"
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)
    deadline = time.monotonic() + 600  # the run writes its first record after about 5 s on an idle machine
    try:
        while process.poll() is None and not (records.exists() and records.read_text().count("\n") >= 10):
            assert time.monotonic() < deadline, "the run recorded no 10 episodes within 600 s"
            time.sleep(0.01)
    finally:  # the kill, or the clean-up when the wait failed
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    done_before = records.read_text().count("\n")
    assert 10 <= done_before < 13 * 6 * 2
    with open(records, "a") as f:
        f.write('{"id": "cut short by the kill')  # a line the kill left half-written
    resumed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"{done_before} recorded" in resumed.stdout
    keys = [(r["id"], r["mode"]) for r in _records(out)]
    assert len(keys) == len(set(keys)) == 13 * 6 * 2
    assert (out / "report.md").exists()


def test_shards_cover_the_suite_once_and_merge_into_one_report(tmp_path):
    out = tmp_path / "run"
    for index in range(3):
        evaluate(_config(out, tasks=["maze", "jigsaw"], per_task=4, shard=f"{index}/3"))
    assert not (out / "report.md").exists() and len(list(out.glob("records.shard-*-of-3.jsonl"))) == 3
    assert main(["merge", str(out)]) == 0
    records = _records(out)
    assert len(records) == 8 and len({r["id"] for r in records}) == 8
    assert (out / "records.jsonl").exists() and not list(out.glob("records.shard-*"))
    assert "| maze |" in (out / "report.md").read_text()
    assert main(["merge", str(out)]) == 0 and len(_records(out)) == 8  # merging again changes nothing


def test_merge_refuses_a_split_with_a_missing_shard(tmp_path, capsys):
    out = tmp_path / "run"
    evaluate(_config(out, tasks=["maze"], per_task=2, shard="0/2"))
    assert main(["merge", str(out)]) == 2  # a user's mistake: the message, no traceback
    assert "shards of one split" in capsys.readouterr().err


def test_resuming_with_another_configuration_is_refused(tmp_path):
    out = tmp_path / "run"
    evaluate(_config(out, tasks=["maze"], per_task=1))
    with pytest.raises(ValueError, match="different configuration .*per_task"):
        evaluate(_config(out, tasks=["maze"], per_task=2))
    evaluate(_config(out, tasks=["maze"], per_task=2, overwrite=True))
    assert len(_records(out)) == 2


@pytest.mark.parametrize("overrides, message", [
    (dict(backend="tgi"), "--backend must be one of"),
    (dict(tools="sometimes"), "--tools must be one of"),
    (dict(shard="3/3"), "--shard must be 'i/n'"),
    (dict(shard="half"), "--shard must be 'i/n'"),
    (dict(backend="openai"), "needs --base_url"),
    (dict(backend="openai", base_url="http://127.0.0.1:8000/v1", api="sglang"), "--api must be 'vllm' or 'openai'"),
    (dict(suite="missing.jsonl"), "neither"),
    (dict(force_tool_calls=2, backend="hf"), "needs --backend vllm"),
    (dict(suite="visualtoolbench", critical="all"), "--critical must be 'weight' or 'flag'"),
    (dict(suite="agentic_mme", web="cached"), "--web must be one of"),
    (dict(suite="agentic_mme", web_max_calls=10), "--web_max_calls: only read by --web live"),
    (dict(suite="agentic_mme", web="live", web_max_cost=0), "--web_max_cost must be positive"),
    (dict(suite="agentic_mme", web_replay=["missing.jsonl"]), "missing.jsonl: no such file"),
])
def test_bad_settings_fail_early_with_what_to_do(overrides, message):
    with pytest.raises(ValueError, match=message):
        EvalConfig(**overrides)


def test_unknown_preset_and_task_are_named(tmp_path):
    with pytest.raises(ValueError, match="unknown preset 'llama'"):
        _config(tmp_path, preset="llama")
    with pytest.raises(ValueError, match="nonsense"):
        evaluate(_config(tmp_path / "run", tasks=["nonsense"]))


def test_a_jsonl_suite_runs_with_its_own_scorers(tmp_path):
    from eval.suites.jsonl import write_jsonl_suite
    from eval.suites.synthetic import synthetic_suite

    suite = write_jsonl_suite(synthetic_suite(("counting", "measurement"), per_task=2), tmp_path / "suite" / "t.jsonl")
    evaluate(_config(tmp_path / "run", suite=str(suite)))
    records = _records(tmp_path / "run")
    assert len(records) == 4 and all(r["score"] == 1.0 for r in records)


@pytest.mark.parametrize("recipe", sorted((ROOT / "recipes" / "eval").glob("*/*.yaml")), ids=lambda p: p.parent.name)
def test_recipes_parse_into_complete_configurations(recipe):
    from eval.run_vllm import parse

    config = resolve(parse(["--config", str(recipe)]))
    assert config.model and config.preset and config.out and config.max_tokens
    assert preset_for(config.model).name == config.preset  # the recipe's preset is the one its model implies


def test_the_slurm_launcher_is_valid_bash():
    subprocess.run(["bash", "-n", str(ROOT / "recipes" / "slurm" / "eval.sbatch")], check=True)


def test_a_run_against_transformers_serve_calls_tools_and_judges(transformers_server, tmp_path):
    """The whole job over HTTP: the tool-calling tiny model behind a real `transformers serve` answers the
    rotated-OCR tasks after real `rotate` calls; a task scored by 'judge' is judged by the same server."""
    from eval.suites import Task
    from eval.suites.jsonl import write_jsonl_suite
    from eval.suites.synthetic import synthetic_suite

    tasks = list(synthetic_suite(("rotated_ocr",), per_task=3, difficulty="easy"))
    judged = Task("judged-0", "What is written here?", tasks[0].images, tasks[0].answer, "judge",
                  category="judged", toolset=tasks[0].toolset)
    suite = write_jsonl_suite([*tasks, judged], tmp_path / "suite" / "tasks.jsonl")
    config = EvalConfig(model=transformers_server.model, backend="openai", base_url=transformers_server.base_url,
                        api="openai", suite=str(suite), send_stop=False, max_tokens=64, concurrency=4,
                        out=str(tmp_path / "run"),
                        judge_model=transformers_server.model, judge_base_url=transformers_server.base_url)
    evaluate(resolve(config))
    records = {r["id"]: r for r in _records(tmp_path / "run")}
    assert len(records) == 4
    for task in tasks:
        record = records[task.id]
        tools = [m for m in record["trajectory"]["messages"] if m["role"] == "tool"]
        assert record["stop_reason"] == "answer" and record["tool_calls"] >= 1 and record["error"] is None
        assert not tools[0]["error"] and record["score"] in (0.0, 1.0)
    judged_record = records["judged-0"]
    assert judged_record["judge"]["model"] == transformers_server.model and judged_record["judge"]["reply"]
    assert (judged_record["score"] in (0.0, 1.0)) != (judged_record["score_error"] is not None)


def test_tasks_scored_by_a_judge_need_one(tmp_path):
    from eval.suites import Task
    from eval.suites.jsonl import write_jsonl_suite
    from eval.suites.synthetic import synthetic_suite

    task = next(synthetic_suite(("maze",), per_task=1))
    judged = Task("judged", task.question, task.images, task.answer, "judge")
    suite = write_jsonl_suite([judged], tmp_path / "suite" / "tasks.jsonl")
    with pytest.raises(ValueError, match="scored by an LLM judge: pass --judge_model"):
        evaluate(_config(tmp_path / "run", suite=str(suite)))


def test_a_reply_without_a_cap_is_refused_on_a_strict_openai_server(tmp_path):
    """transformers serve and other OpenAI-API servers cap a request without max_tokens at their own default: a
    run whose suite sets no cap must say so, not be cut silently."""
    with pytest.raises(ValueError, match="no token cap .*--api vllm"):
        evaluate(resolve(EvalConfig(model="some/model", tasks=["maze"], per_task=1, backend="openai", max_tokens=0,
                                    base_url="http://127.0.0.1:9/v1", api="openai", out=str(tmp_path / "run"))))
