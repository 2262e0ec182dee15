"""`run_vllm.py rejudge`: a finished run judged again by another judge without running the model again; the
original keeps its judgments, the new directory resumes, and settings that would change the run are refused."""

import json

import pytest

from eval.benchmarks.tir_bench.fixture import write_fixture
from eval.config import EvalConfig
from eval.run_vllm import _judge_stage, evaluate, main, rejudge, resolve
from eval.rundir import RunDir
from eval.suites import load_suite
from tests.eval.benchmarks.helpers import ScriptedBackend


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRLAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def judged_run(tmp_path):
    """A TIR-Bench run whose 12 extracted items waited for a judge that answered "A" to each."""
    data = write_fixture(tmp_path / "TIR-Bench")
    settings = resolve(EvalConfig(suite="tir_bench", data_dir=str(data), model="reference", backend="reference",
                                  tools="on", judge_model="none", out=str(tmp_path / "run")))
    evaluate(settings)
    run = RunDir(settings.out)
    lines = [json.loads(line) for line in run.records_path.read_text().splitlines()]
    for line in lines:
        if line["category"] != "ocr":
            line.update(judge_pending=True, score=None)
    run.records_path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    saved = json.loads((run.path / "config.json").read_text())
    (run.path / "config.json").write_text(json.dumps({**saved, "judge_model": "first-judge"}))
    suite = load_suite(EvalConfig(**{**{k: saved[k] for k in ("suite", "data_dir")}, "judge_model": "same"}))
    _judge_stage(EvalConfig(**{**{k: saved[k] for k in ("suite", "data_dir")}, "judge_model": "same"}), suite, run,
                 suite.tasks, ScriptedBackend(["A"] * 12, as_message=True), owned=False)
    return run


def test_a_run_is_judged_again_into_a_new_directory_and_keeps_its_own_judgments(judged_run, tmp_path):
    judge = ScriptedBackend(["B"] * 12, as_message=True)
    records = rejudge(judged_run.path, {"judge_model": "same"}, backend=judge)
    assert len(judge.sent) == 12 and len(records) == 13
    extracted = [r for r in records if r["category"] != "ocr"]
    assert all(r["extracted"] == "B" and r["judge"]["reply"] == "B" for r in extracted)
    assert all(r["extracted"] == "A" for r in judged_run.records() if r["category"] != "ocr")
    new = tmp_path / "run-judged-same"
    assert json.loads((new / "config.json").read_text())["judge_model"] == "same"
    assert (new / "report.md").exists() and sorted(p.name for p in (new / "images").iterdir()) == sorted(
        p.name for p in judged_run.images.iterdir())
    again = ScriptedBackend([])  # a second call resumes: every record has its new judgment
    assert [r.get("extracted") for r in rejudge(judged_run.path, {"judge_model": "same"}, backend=again)] == [
        r.get("extracted") for r in records] and not again.sent


@pytest.mark.parametrize("settings, problem", [
    ({"judge_model": "same", "max_turns": 3}, "--max_turns would change the run"),
    ({"judge_retries": 2}, "rejudge needs --judge_model"),
    ({"judge_model": "none"}, "rejudge needs --judge_model"),
])
def test_settings_that_are_not_the_judges_are_refused(judged_run, settings, problem):
    with pytest.raises(ValueError, match=problem):
        rejudge(judged_run.path, settings)


def test_the_run_directory_must_be_a_finished_run_and_the_target_a_new_one(judged_run, tmp_path, capsys):
    with pytest.raises(ValueError, match="must name a new directory"):
        rejudge(judged_run.path, {"judge_model": "same", "out": str(judged_run.path)})
    (tmp_path / "empty").mkdir()
    assert main(["rejudge", str(tmp_path / "empty"), "--judge_model", "m"]) == 2
    assert "is not a finished run directory" in capsys.readouterr().err
    assert main(["rejudge", "--judge_model", "m"]) == 2
    assert "usage: python eval/run_vllm.py rejudge RUN_DIR" in capsys.readouterr().err


@pytest.mark.parametrize("api", ["openai", "vllm"])
def test_a_judge_server_is_asked_in_the_api_it_understands(judged_run, tmp_path, api):
    """--judge_api: a vLLM judge server gets every sampling field (none filled from the judge checkpoint's
    generation_config.json), a strict one (OpenAI) only the OpenAI API's."""
    from tests.eval.test_openai_http import ScriptedServer

    server = ScriptedServer()
    try:
        rejudge(judged_run.path, {"judge_model": "judge", "judge_base_url": server.url, "judge_api": api,
                                  "out": str(tmp_path / f"judged-{api}")})
    finally:
        server.close()
    bodies = [request["body"] for request in server.requests]
    assert len(bodies) == 12
    vllm_fields = {"top_k", "min_p", "repetition_penalty", "frequency_penalty"}
    assert all((vllm_fields <= set(body)) is (api == "vllm") for body in bodies)
    assert all(not (vllm_fields & set(body)) for body in bodies) is (api == "openai")
