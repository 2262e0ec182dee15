"""Agentic-MME end to end through `eval/run_vllm.py`'s `evaluate` on the fixture: the Atm track on the tiny random
model through the real vLLM CPU engine (forced calls, replayed search answers, the checkpoint judges on the same
model, the paper-layout report), the Gen track with scripted replies (code in the sandbox, the V judge on the image
it saved, a failed judge request retried); then the judges' own rules on scripted verdicts."""

from __future__ import annotations

import json

import pytest

from eval.benchmarks.agentic_mme import (AgenticMme, aggregate, checkpoint_results, final_answer_correct,
                                         runner_texts, strict_correct)
from eval.benchmarks.agentic_mme.fixture import STRINGS, TASKS, write_fixture
from eval.config import EvalConfig
from eval.forcing import _draw
from eval.run_vllm import evaluate, resolve
from eval.rundir import RunDir
from tests.eval.benchmarks.helpers import ScriptedBackend


@pytest.fixture(scope="module")
def amme_data(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("amme") / "Agentic-MME")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRLAB_CACHE", str(tmp_path / "cache"))


def config(data, **settings) -> EvalConfig:
    return resolve(EvalConfig(suite="agentic_mme", data_dir=str(data), web_replay=[str(data / "web_replay.jsonl")],
                              **settings))


def test_atm_on_the_vllm_engine_runs_tools_search_and_both_judges(tiny_engine, amme_data, tmp_path, monkeypatch):
    monkeypatch.setattr(AgenticMme, "judge_regex", True)  # a random model writes the S verdict's format only so
    run = tmp_path / "atm"
    evaluate(config(amme_data, model=tiny_engine.model, tools="on", force_tool_calls=2, max_tokens=160, max_images=4,
                    dtype="float32", judge_model="same", out=str(run)), backend=tiny_engine)
    records = RunDir(run).records()
    assert len(records) == 10 and sum(r["stop_reason"] == "skipped" for r in records) == 4
    ran = [r for r in records if r["stop_reason"] not in ("skipped", "error")]
    assert len(ran) == 6 and all(r["web_unavailable"] == 0 for r in ran)  # every forced search call was replayed
    assert all(r["tool_calls"] == 2 or r["stop_reason"] == "max_images" for r in ran)
    assert not any(r.get("judge_pending") for r in records)
    judged = [r for r in ran if r.get("judge")]
    assert judged and all(r["judge"]["model"] == "same" for r in judged)
    assert all(c["passed"] is not None for r in ran for c in r["checkpoints"]["checkpoints"].values()
               if c["axis"] in ("S", "V") and not c.get("final_answer") and "error" not in c)
    first = next(r for r in ran if r["id"] == "0001")
    assert first["score"] is None and "tolerance" in first["score_error"]  # the reference's verifier fails on null
    system = first["trajectory"]["messages"][0]
    assert system["content"][0]["text"] == runner_texts()["atm_system"]
    saved = json.loads((run / "config.json").read_text())
    assert saved["temperature"] == 0.0 and saved["max_tokens"] == 160
    text = (run / "report.md").read_text()
    assert "Agentic-MME Table 3" in text and "Atm (atomic tools, Track B)" in text and "Table 6" in text


def test_gen_runs_code_in_the_sandbox_and_its_image_goes_to_the_v_judge(amme_data, tmp_path):
    code = ("<code>\nimport os\nfrom PIL import Image\nim = Image.open(os.environ['ORIGINAL_IMAGE_PATH'])\n"
            "im.crop((0, 0, 32, 24)).save(os.path.join(os.environ['PROCESSED_IMAGE_SAVE_PATH'], "
            "'transformed_image_1.png'))\n</code>")
    # task 0001: code, then the answer; task 0002: a reply without tags (the answer); then the V judge: 0001's
    # request fails once and is retried, 0002 is judged on the original (no image was made)
    backend = ScriptedBackend([code, "<answer>red</answer>", "two", None, "No", "Yes, there is one."])
    run = tmp_path / "gen"
    evaluate(config(amme_data, model="scripted", backend="openai", base_url="http://unused", track="gen",
                    tools="on", tasks=["L1"], max_active=1, judge_model="same", judge_retries=2, out=str(run)),
             backend=backend)
    records = {r["id"]: r for r in RunDir(run).records()}
    first, second = records["0001"], records["0002"]
    assert first["prediction"] == "red" and first["scores"]["strict"] == 1.0
    assert first["tool_use_list"][0]["tool_name"] == "crop" and first["effective_calls"] == 1
    assert first["checkpoints"]["checkpoints"]["V1"]["visual"]["answers"] == ["Yes, there is one."]
    assert first["process"]["V_true"] == {"passed": 1, "total": 1, "pending": 0}
    assert second["prediction"] == "two" and second["score"] == 0.0
    assert second["process"]["V_true"]["passed"] == 0 and second["overthink"] == 0.0
    assert [prompt.images[0].shape for prompt, _ in backend.sent[-3:-1]] == [(24, 32, 3), (48, 64, 3)]
    assert records["0097"]["stop_reason"] == "skipped"


def judged(task: dict, uses: list[dict], replies: list, retries: int = 1, images: int = 1):
    process = checkpoint_results(task, uses, 1, images)
    record = {"checkpoints": process, "tool_use_list": uses, "trajectory": {"images": []}}
    backend = ScriptedBackend(replies)
    suite = AgenticMme([], [], "fixture", "official", "scripted")
    [(_, fields)] = list(suite.judge([(None, record)], backend, "scripted", retries))
    return fields, backend


def search(index: int, query: str) -> dict:
    return {"index": index, "tool_name": "google_search", "raw_tool_name": "google_search",
            "arguments": {"query": query}, "output": {"context": f"results for {query}"}}


def test_the_s_judge_reads_the_first_line_and_a_passing_checkpoint_takes_its_query():
    lens = {"index": 2, "tool_name": "google_lens_search", "raw_tool_name": "google_lens_search", "arguments": {},
            "output": {"context": "lens"}}
    task = {"process_evaluation": {"checkpoints": [
        {"id": "S1", "axis": "S", "tools": ["google_search"], "description": "Find the maker (expected to find: Acme)."},
        {"id": "S2", "axis": "S", "tools": ["google_search"], "description": "Find the year"},
        {"id": "S3", "axis": "S", "tools": ["google_lens_search"], "description": "Lens"}]}}
    fields, backend = judged(task, [search(0, "maker"), search(1, "year"), lens],
                             ["VERDICT: [PASS/FAIL]\nREASONING: the template echoed", "maybe\nPASS"])
    results = fields["checkpoints"]["checkpoints"]
    assert results["S1"]["passed"] and results["S1"]["hit_index"] == 0  # PASS appears in the first line
    assert results["S2"]["passed"] is False  # PASS only on the second line: the reference reads a FAIL
    assert results["S3"]["passed"] and fields["process"]["S"] == pytest.approx(2 / 3)
    first, second = (prompt.messages[0]["content"][0]["text"] for prompt, _ in backend.sent)
    assert "**CRITICAL: Expected Answer to Find:**\nAcme" in first and "1. maker\n2. year" in first
    assert "1. year" in second and "maker" not in second.split("**Model's Actual Search Queries:**")[1]


def test_a_judge_that_never_answers_fails_the_checkpoint_and_is_counted():
    task = {"process_evaluation": {"checkpoints": [
        {"id": "S1", "axis": "S", "tools": ["google_search"], "description": "Find it"}]}}
    fields, backend = judged(task, [search(0, "it")], [None, None], retries=2)
    assert len(backend.sent) == 2 and fields["checkpoints"]["checkpoints"]["S1"]["passed"] is False
    assert fields["judge"]["unjudged"] == 1 and fields["process"]["unjudged"] == 1
    no_query = checkpoint_results(task, [], 1, 1)
    assert aggregate(no_query)["S"] is None and no_query["to_judge"] == ["S1"]  # unscored until judged


def test_the_final_answer_checks_follow_the_reference_quirks():
    def golden(value, match_type="contains", **extra):
        return {"golden_answer": {"value": value, "match_type": match_type, "tolerance": 0, **extra}}

    assert final_answer_correct(golden(""), "anything")  # an empty golden answer is in every answer
    assert final_answer_correct(golden("1"), "The answer is 1.") and not final_answer_correct(golden("1"), "in 2017")
    assert final_answer_correct(golden("Paris", "fuzzy"), "paris, France")  # unknown match type: contains
    assert final_answer_correct(golden("3.5", "numeric", tolerance=0.5), "3.9")
    assert not final_answer_correct(golden("3.5", "numeric", tolerance=0.5), "about 3.9")
    assert strict_correct(golden("3.5", "numeric", tolerance=0.5), "about 3.9") == 1.0
    assert strict_correct(golden(""), "x") is None and strict_correct(golden("cat"), "concatenate") == 0.0
    assert TASKS[1]["golden_answer"]["tolerance"] is None


def test_the_fixture_replays_every_string_a_forced_call_draws():
    class Pick:
        def __init__(self, k):
            self.k = k

        def choice(self, items):
            return items[self.k]

    assert {_draw({"type": "string"}, Pick(k)) for k in range(len(STRINGS))} == set(STRINGS)
