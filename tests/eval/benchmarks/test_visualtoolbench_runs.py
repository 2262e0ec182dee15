"""VisualToolBench end to end through `eval/run_vllm.py`: a scripted model on the fixture (an image the code saves
and is shown, the calculator, replayed search answers, a multi-turn task with the golden answers in context, the
20-round cap, a call to a tool that does not exist) judged by a scripted Met / Not Met judge, then resumed and
re-judged; the tiny random model through the real vLLM CPU engine with forced calls, judged by itself (malformed
verdicts, retries, unjudged counts), the report in the paper's layout naming the judge."""

from __future__ import annotations

import json
import re

import pytest

from eval.backends import Completion
from eval.benchmarks.visualtoolbench import MAX_ROUNDS, VisualToolBench, runner_texts
from eval.benchmarks.visualtoolbench.fixture import write_fixture
from eval.config import EvalConfig
from eval.run_vllm import evaluate, rejudge, resolve
from eval.rundir import RunDir
from tests.eval.benchmarks.helpers import ScriptedBackend

MET, NOT_MET = ('{"explanation": "fine", "judge_result": "Met"}', '{"explanation": "wrong", "judge_result": "Not Met"}')
CROP = ("from PIL import Image\nsrc = Image.open({path!r})\n"
        "src.crop((0, 0, 32, 24)).save(f'{{PROCESSED_IMAGE_SAVE_PATH}}/transformed_image_0.png')\nprint(src.size)")


def call(name: str, **arguments) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


def listed_image(prompt) -> str:
    """The first path of python_image_processing's file list, as the prompt shows it."""
    shown = json.dumps([prompt.tools, prompt.messages])
    return re.search(r"file list: \[\\?'([^'\\]+)\\?'", shown).group(1)


class ScriptedModel:
    """The evaluated model (replies per task, in order; a callable reply sees the prompt) and, for requests whose
    key is a judge's, a judge that says Not Met to answers that are processing errors and Met to the rest."""
    name = "scripted"

    def __init__(self, script: dict):
        self.script, self.done, self.prompts = {k: list(v) for k, v in script.items()}, [], []

    def submit(self, key, prompt, sampling):
        self.prompts.append((key, prompt))
        if key.startswith("judge-"):
            reply = NOT_MET if "Processing Error" in prompt.messages[0]["content"][0]["text"] else MET
        else:
            queue = self.script.get(key.split(":", 2)[2]) or ["The answer."]
            reply = queue.pop(0)
            reply = reply(prompt) if callable(reply) else reply
        self.done.append((key, Completion(reply)))

    def poll(self, timeout=None):
        done, self.done = self.done, []
        return done

    def in_flight(self):
        return len(self.done)

    def close(self):
        pass


@pytest.fixture(scope="module")
def vtb_data(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("vtb") / "VisualToolBench")


def config(data, **settings) -> EvalConfig:
    return resolve(EvalConfig(suite="visualtoolbench", data_dir=str(data), **settings))


@pytest.fixture(scope="module")
def scripted_run(vtb_data, tmp_path_factory):
    run = tmp_path_factory.mktemp("scripted") / "run"
    model = ScriptedModel({
        "vtb_fixture_s0": [lambda prompt: call("python_image_processing", code=CROP.format(path=listed_image(prompt))),
                           "It is 16 pixels wide."],
        "vtb_fixture_s1": [call("calculator", expression="12 * 1.08") + call("no_such_tool", x=1), "never asked"],
        "vtb_fixture_m0": [call("calculator", expression="2 ^ 3"), "Two blocks.",
                           call("google_search", query="red"), call("web_search", query="red")],
        "vtb_fixture_m2": [call("calculator", expression="1 + 1")] * MAX_ROUNDS + ["ignored after the cap",
                                                                                  "The right one is blue."]})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIRLAB_CACHE", str(run.parent / "cache"))
        records = evaluate(config(vtb_data, model="scripted-model", preset="qwen2.5-vl", judge_model="same",
                                  out=str(run), max_images=8), backend=model)
    return run, records, model


def test_a_scripted_run_follows_the_published_loop(scripted_run):
    run, records, model = scripted_run
    by_id = {r["id"]: r for r in records}
    assert len(records) == 6 and all(r["mode"] == "tools" for r in records)
    crop = by_id["vtb_fixture_s0"]
    tool = next(m for m in crop["trajectory"]["messages"] if m["role"] == "tool")
    reply = tool["content"][-1]["text"]
    assert reply.startswith("{'ok': 'true', 'stdout': '(64, 48)\\n', 'stderr': '', 'output_path': '")
    assert crop["trajectory"]["images"][1] != crop["trajectory"]["images"][0]  # the crop was shown to the model
    second = next(p for k, p in model.prompts if k == "1:tools:vtb_fixture_s0")
    users = [m for m in second.messages if m["role"] == "user"]
    assert users[-1]["content"][0]["text"] == "Here are the transformed images from the tool call call_0."
    assert "transformed_image_0.png']." in json.dumps(second.messages)  # the file list grew with the new image
    assert crop["turn_answers"] == [{"answer": "It is 16 pixels wide.", "ended": "answer", "rounds": 1}]


def test_a_multi_turn_task_keeps_golden_answers_in_context_and_an_unknown_tool_ends_it(scripted_run):
    run, records, model = scripted_run
    task = {r["id"]: r for r in records}["vtb_fixture_m0"]
    later = next(p for k, p in model.prompts if k == "2:tools:vtb_fixture_m0")
    texts = [json.dumps(m["content"]) for m in later.messages]
    assert "Two blocks on a pale background." in texts[2] and "Two blocks." not in texts[2]  # the golden answer
    assert "Compared with the first scan" in texts[3] and '"image"' in texts[3] and '"image"' not in texts[1]
    search = [m for m in task["trajectory"]["messages"] if m["role"] == "tool"][1]["content"][-1]["text"]
    assert search.startswith("{'results': [{'title': 'Red - Fixture Encyclopedia'") and task["web_unavailable"] == 0
    calc = [m for m in task["trajectory"]["messages"] if m["role"] == "tool"][0]["content"][-1]["text"]
    assert calc == "{'result': 'Error', 'expression': '2 ^ 3', 'status': 'error', 'error': \"<class 'ast.BitXor'>\"}"
    assert task["turn_answers"][-1]["answer"] == runner_texts()["processing_error"].format(error="'web_search'")
    assert task["score"] is None and "its judge cannot read" in task["score_error"]
    assert task["visualtoolbench"]["unscored"] == task["score_error"]


def test_the_round_cap_ends_a_turn_and_the_next_turn_runs(scripted_run):
    run, records, model = scripted_run
    task = {r["id"]: r for r in records}["vtb_fixture_m2"]
    first, second = task["turn_answers"]
    assert first["answer"] == "Model hit the maximum number of tool calls" and first["rounds"] == MAX_ROUNDS
    assert first["reply_after_cap"] == "ignored after the cap" and second["answer"] == "The right one is blue."
    assert task["trajectory"]["meta"]["turns_without_tools"]  # the call after the cap was shown no tools
    assert task["visualtoolbench"]["tool_calls"] == MAX_ROUNDS and task["score"] == 1.0


def test_the_rubric_judge_scores_each_rubric_and_the_report_names_it(scripted_run):
    run, records, model = scripted_run
    by_id = {r["id"]: r for r in records}
    judged = [k for k, _ in model.prompts if k.startswith("judge-")]
    rubrics = {"vtb_fixture_s0": 2, "vtb_fixture_s1": 3, "vtb_fixture_s2": 1, "vtb_fixture_m1": 4, "vtb_fixture_m2": 2}
    assert len(judged) == sum(rubrics.values())  # one request per rubric per turn; the unscored task asked none
    failed = by_id["vtb_fixture_s1"]  # the unknown tool ended it: its answer is the processing error
    assert failed["prediction"] == "Processing Error: 'no_such_tool'" and failed["score"] == 0.0
    assert failed["visualtoolbench"]["accuracy"] == 0 and failed["visualtoolbench"]["score"] == 0.0
    assert [m["content"][-1]["text"] for m in failed["trajectory"]["messages"] if m["role"] == "tool"][0] == \
        "{'result': '12.96', 'expression': '12 * 1.08', 'status': 'success'}"
    for ident, count in rubrics.items():
        entry = by_id[ident]["visualtoolbench"]
        assert entry["rubrics"] == count and entry["judge"] == "same" and entry["unjudged"] == 0
    assert by_id["vtb_fixture_m1"]["visualtoolbench"]["score"] == 1.0
    report = (run / "report.md").read_text()
    assert "Table 3" in report and "Table 7" in report and "same" in report


def test_a_finished_run_resumes_without_running_the_model_and_can_be_rejudged(scripted_run, vtb_data):
    run, records, model = scripted_run
    again = ScriptedModel({})
    evaluate(config(vtb_data, model="scripted-model", preset="qwen2.5-vl", judge_model="same", out=str(run),
                    max_images=8), backend=again)
    assert again.prompts == []
    judge = ScriptedBackend(["not a verdict"] * 12 + [MET] * 12)  # the caller's own judge: --judge_model same
    rejudged = {r["id"]: r for r in rejudge(run, {"judge_model": "same", "judge_retries": 3}, backend=judge)}
    assert len(judge.sent) == 12  # officially any reply ends the retries: judge requests only, no model turns
    entry = rejudged["vtb_fixture_s0"]["visualtoolbench"]
    assert entry["judge"] == "same" and entry["score"] is None and "json" in entry["unscored"].lower()
    assert {r["id"]: r["visualtoolbench"]["score"] for r in RunDir(run).records()}["vtb_fixture_s0"] == 1.0
    assert (run.parent / "run-judged-same" / "report.md").exists()


def test_the_tiny_model_runs_on_the_vllm_engine_and_judges_itself(tiny_engine, vtb_data, tmp_path, monkeypatch):
    monkeypatch.setenv("TIRLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(VisualToolBench, "judge_max_tokens", 48)
    records = evaluate(config(vtb_data, model=tiny_engine.model, force_tool_calls=2, max_tokens=96, max_images=8,
                              dtype="float32", judge_model="same", judge_retries=2, scoring="strict",
                              out=str(tmp_path / "run")), backend=tiny_engine)
    assert len(records) == 6
    assert all(r["web_unavailable"] == 0 for r in records)  # every forced web call was replayed
    assert sum(r["visualtoolbench"]["tool_calls"] for r in records) >= 6
    judged = [r for r in records if r.get("judge")]
    assert judged and all(r["visualtoolbench"]["judge"] == "same" for r in judged)
    # a random model writes no verdict: each rubric is asked twice, then unjudged, and its task unscored
    unjudged = sum(r["visualtoolbench"]["unjudged"] for r in judged)
    assert unjudged > 0 and all(r["score"] is None for r in judged if r["visualtoolbench"]["unjudged"])
    report = (tmp_path / "run" / "report.md").read_text()
    assert "Table 3" in report and "same" in report
