"""Agentic-MME end to end through `eval/run_vllm.py`: the Atm track on the tiny random model through the real vLLM
CPU engine (forced calls, replayed search answers, both checkpoint judges on the same model, the paper-layout
report), then `rejudge` of that run with another judge; the two judges on the same real model made to write
readable and unreadable verdicts (retries, unjudged counts); the Gen track with scripted replies (code in the
sandbox, the V judge on the image it saved, a failed judge request retried); the judges' rules on scripted
verdicts."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from eval.benchmarks.agentic_mme import AgenticMme, process, runner_texts, tables
from eval.benchmarks.agentic_mme.fixture import STRINGS, write_fixture
from eval.config import EvalConfig
from eval.forcing import _draw
from eval.run_vllm import evaluate, rejudge, resolve
from eval.rundir import RunDir
from runtime.trajectory import image_key
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


class Counting:
    """A backend that counts the requests it passes on."""

    def __init__(self, backend):
        self.backend, self.submitted = backend, 0
        self.name = backend.name

    def submit(self, key, prompt, sampling):
        self.submitted += 1
        self.backend.submit(key, prompt, sampling)

    def poll(self, timeout=None):
        return self.backend.poll(timeout)

    def in_flight(self):
        return self.backend.in_flight()


@pytest.fixture(scope="module")
def atm_run(tiny_engine, amme_data, tmp_path_factory):
    run = tmp_path_factory.mktemp("atm") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIRLAB_CACHE", str(run.parent / "cache"))
        patch.setattr(AgenticMme, "judge_regex", True)  # a random model writes the S verdict's format only so
        evaluate(config(amme_data, model=tiny_engine.model, tools="on", force_tool_calls=2, max_tokens=160,
                        max_images=4, dtype="float32", judge_model="same", out=str(run)), backend=tiny_engine)
    return run


def test_atm_on_the_vllm_engine_runs_tools_search_and_both_judges(atm_run):
    records = RunDir(atm_run).records()
    assert len(records) == 10 and sum(r["stop_reason"] == "skipped" for r in records) == 4
    ran = [r for r in records if r["stop_reason"] not in ("skipped", "error")]
    assert len(ran) == 6 and all(r["web_unavailable"] == 0 for r in ran)  # every forced search call was replayed
    assert all(r["tool_calls"] == 2 or r["stop_reason"] == "max_images" for r in ran)
    assert not any(r.get("judge_pending") for r in records)
    judged = [r for r in ran if r.get("judge")]
    assert judged and all(r["judge"]["model"] == "same" and r["process"]["missing"] == 0 for r in judged)
    assert sum(r["process"]["judge_requests"] for r in judged) >= 4  # every task with a visual check asked
    for record in judged:  # the judgments are what the walk read: every request it made has one
        assert record["process"]["judge_requests"] == len(record["judgments"])
        assert all(j["status"] == process.OK for j in record["judgments"].values() if j["kind"] == "S")
    first = next(r for r in ran if r["id"] == "0001")
    assert first["score"] is None and "tolerance" in first["score_error"]  # the reference's verifier fails on null
    assert first["trajectory"]["messages"][0]["content"][0]["text"] == runner_texts()["atm_system"]
    saved = json.loads((atm_run / "config.json").read_text())
    assert saved["temperature"] == 0.0 and saved["max_tokens"] == 160
    text = (atm_run / "report.md").read_text()
    for title in ("Agentic-MME Table 3", "Agentic-MME Table 6", "Agentic-MME evaluator report, Atm mode"):
        assert title in text
    assert "Judge: same" in text


def test_rejudge_judges_the_run_again_without_running_the_model(atm_run, tiny_engine, monkeypatch):
    monkeypatch.setattr(AgenticMme, "judge_regex", False)  # the random judge now writes what it likes
    before = {r["id"]: r.get("judgments") for r in RunDir(atm_run).records()}
    judge = Counting(tiny_engine)
    records = rejudge(atm_run, {"judge_model": "same", "judge_retries": 2}, backend=judge)
    judged = [r for r in records if r.get("judge")]
    attempts = [j["attempts"] for r in judged for j in r["judgments"].values()]
    assert judge.submitted == sum(attempts) > 0  # judge requests only: the model did not run again
    for record in judged:
        statuses = [j["status"] for j in record["judgments"].values()]
        assert record["process"]["unjudged"] == sum(s != process.OK for s in statuses)
        assert all(j["attempts"] == (1 if j["status"] == process.OK else 2) for j in record["judgments"].values())
    assert {r["id"]: r.get("judgments") for r in RunDir(atm_run).records()} == before  # the run keeps its own
    assert (atm_run.parent / "run-judged-same" / "report.md").exists()


def search_use(index: int, query: str) -> dict:
    return {"index": index, "tool_name": "google_search", "raw_tool_name": "google_search",
            "arguments": {"query": query}, "output": {"context": f"results for {query}: Acme"}}


def judged(checkpoints: list, uses: list, backend, retries: int = 1, made: int = 0, tmp_path=None):
    """The suite's judge on one record of a task with these checkpoints, its model's calls `uses` and `made`
    images of its own (saved under tmp_path), the original first."""
    pictures = [np.full((32 + k, 32, 3), 40 * k, np.uint8) for k in range(made + 1)]
    for picture in pictures if tmp_path else ():
        Image.fromarray(picture).save(tmp_path / f"{image_key(picture)}.png")
    record = {"tool_use_list": uses, "prediction": "", "effective_calls": len(uses),
              "images_made": [{"index": k, "name": f"transformed_image_{k}.png"} for k in range(1, made + 1)],
              "trajectory": {"images": [image_key(p) for p in pictures]}}
    task = SimpleNamespace(meta={"config": {"process_evaluation": {"checkpoints": checkpoints}}})
    suite = AgenticMme([], [], "fixture", "official", "judge", images_dir=tmp_path)
    [(_, fields)] = list(suite.judge([(task, record)], backend, "judge", retries))
    return fields


S_CHECKPOINTS = [
    {"id": "S1", "axis": "S", "tools": ["google_search"], "description": "Find the maker (expected: Acme)"},
    {"id": "S2", "axis": "S", "tools": ["google_search"], "description": "Find the year"}]
VISUAL = {"id": "V1", "axis": "V", "tools": ["crop"],
          "visual_check": {"question": "Is it dark?", "expected_answer": "x"}}


def test_the_judges_on_a_real_model_read_well_formed_and_malformed_verdicts(tiny_engine, tmp_path, monkeypatch):
    uses = [search_use(0, "maker"), search_use(1, "year")]
    monkeypatch.setattr(AgenticMme, "judge_regex", True)
    judge = Counting(tiny_engine)
    fields = judged([*S_CHECKPOINTS, VISUAL], uses, judge, retries=3, tmp_path=tmp_path)
    searches = [j for j in fields["judgments"].values() if j["kind"] == "S"]
    assert len(searches) == 2 and all(j["status"] == process.OK and j["attempts"] == 1 for j in searches)
    assert [j["reply"].startswith("VERDICT: ") for j in searches] == [True, True]
    results = fields["eval"]["checkpoint_results"]
    assert results["S1"]["search_check"]["judge_response"] == searches[0]["reply"].strip()
    assert fields["judge"]["model"] == "judge" and judge.submitted == sum(
        j["attempts"] for j in fields["judgments"].values())
    # the same model made to write verdicts that say neither PASS nor FAIL: asked 3 times, then unjudged
    monkeypatch.setattr(process, "S_VERDICT", r"MAYBE[0-9 ]{0,20}")
    judge = Counting(tiny_engine)
    fields = judged(S_CHECKPOINTS, uses, judge, retries=3, tmp_path=tmp_path)
    assert [(j["status"], j["attempts"]) for j in fields["judgments"].values()] == [(process.MALFORMED, 3)] * 2
    assert judge.submitted == 6 and fields["process"]["unjudged"] == 2 and fields["judge"]["unjudged"] == 2
    assert fields["eval"]["scores"]["S"] == 0.0  # read as the reference reads them: not passed, still counted


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
    assert first["images_made"] == [{"index": 1, "name": "transformed_image_1.png"}]
    check = first["eval"]["checkpoint_results"]["V1"]
    assert check["passed"] and check["visual_check"]["judge_results"] == [
        {"image": "transformed_image_1.png", "judge_answer": "Yes, there is one.", "expected": "Yes", "passed": True}]
    assert [j["attempts"] for j in first["judgments"].values()] == [2] and first["process"]["unjudged"] == 0
    assert second["prediction"] == "two" and second["score"] == 0.0
    assert second["eval"]["checkpoint_results"]["V1"]["visual_check"]["judge_results"][0]["image"] == "orig.png"
    assert second["process"]["V"] == 0.0 and second["overthink"] == 0.0
    assert [prompt.images[0].shape for prompt, _ in backend.sent[-3:-1]] == [(24, 32, 3), (48, 64, 3)]
    assert records["0097"]["stop_reason"] == "skipped"
    report = (run / "report.md").read_text()
    assert "Agentic-MME evaluator report, Gen mode" in report


def test_the_s_judge_reads_the_first_line_and_a_passing_checkpoint_takes_its_query():
    lens = {"index": 2, "tool_name": "google_lens_search", "raw_tool_name": "google_lens_search", "arguments": {},
            "output": {"context": "lens"}}
    checkpoints = [{**S_CHECKPOINTS[0], "description": "Find the maker (expected to find: Acme)."}, S_CHECKPOINTS[1],
                   {"id": "S3", "axis": "S", "tools": ["google_lens_search"], "description": "Lens"}]
    backend = ScriptedBackend(["VERDICT: [PASS/FAIL]\nREASONING: the template echoed", "maybe\nPASS",
                               "still unsure\nPASS"])
    fields = judged(checkpoints, [search_use(0, "maker"), search_use(1, "year"), lens], backend, retries=2)
    results = fields["eval"]["checkpoint_results"]
    assert results["S1"]["passed"] and results["S1"]["hit_index"] == 0  # PASS appears in the first line
    assert results["S2"]["passed"] is False  # PASS only on the second line: malformed, asked again, not passed
    assert results["S3"]["passed"] and fields["process"]["S"] == pytest.approx(2 / 3)
    assert fields["process"]["unjudged"] == 1
    first, second = (prompt.messages[0]["content"][0]["text"] for prompt, _ in backend.sent[:2])
    assert "**CRITICAL: Expected Answer to Find:**\nAcme" in first and "1. maker\n2. year" in first
    assert "1. year" in second and "maker" not in second.split("**Model's Actual Search Queries:**")[1]
    assert [sampling.max_tokens for _, sampling in backend.sent] == [300] * 3


def test_a_failed_request_is_retried_and_a_malformed_verdict_can_be_read_on_retry():
    fields = judged(S_CHECKPOINTS[:1], [search_use(0, "it")], ScriptedBackend([None, None]), retries=2)
    assert fields["eval"]["checkpoint_results"]["S1"]["passed"] is False
    assert [(j["status"], j["attempts"]) for j in fields["judgments"].values()] == [(process.FAILED, 2)]
    assert fields["process"]["unjudged"] == 1
    fields = judged(S_CHECKPOINTS[:1], [search_use(0, "it")], ScriptedBackend(["hmm", "VERDICT: PASS"]), retries=2)
    assert fields["eval"]["checkpoint_results"]["S1"]["passed"] and fields["process"]["unjudged"] == 0


def test_the_visual_judge_stops_at_the_first_image_that_passes(tmp_path):
    backend = ScriptedBackend(["No, it is light.", "", "", "X marks it"])
    fields = judged([VISUAL], [], backend, retries=2, made=3, tmp_path=tmp_path)
    check = fields["eval"]["checkpoint_results"]["V1"]["visual_check"]
    assert [r["judge_answer"] for r in check["judge_results"]] == ["No, it is light.", "", "X marks it"]
    assert check["passed"] and len(backend.sent) == 4 and fields["process"]["unjudged"] == 1  # the empty answer
    assert [prompt.images[0].shape[0] for prompt, _ in backend.sent] == [33, 34, 34, 35]
    assert backend.sent[0][0].messages[0]["content"][0]["text"].startswith("You are a helpful assistant")


def test_without_a_judge_s_and_v_true_stay_unscored_in_the_tables():
    record = {"mode": "tools", "variant": "atm", "category": "L1", "score": 1.0, "overthink": 0.0,
              "eval": {"checkpoint_results": {"S1": {"axis": "S", "passed": False}},
                       "scores": {"S": 0.0, "V": None, "R": 1.0, "base": 0.0, "penalty": 0.0, "PQS": 0.0},
                       "efficiency": {"effective_tool_calls": 1, "reference_tool_calls": 1, "excess_calls": 0}},
              "process": {"S": 0.0, "V": None, "judge_requests": 1, "unjudged": 0, "missing": 1}}
    scores = tables.Scores([record])
    assert scores.get("Overall", "Acc") == 100.0 and scores.get("Overall", "S") is None
    assert scores.get("L1", "Overthink") == 1.0
    text = "\n".join(tables.sections([record], {"judge_model": "none"}))
    assert "Judge: none" in text and "without a judge: 1" in text


def test_the_fixture_replays_every_string_a_forced_call_draws():
    class Pick:
        def __init__(self, k):
            self.k = k

        def choice(self, items):
            return items[self.k]

    assert {_draw({"type": "string"}, Pick(k)) for k in range(len(STRINGS))} == set(STRINGS)
