"""Agentic-MME's scoring against the reference's own verdicts (data/agentic_mme_score_vectors.json, made by running
the benchmark's evaluator with scripts/reference/agentic_mme_score.py; its header names the commit and versions), the
judge prompts' hashes, and strict scoring."""

import hashlib
import json
from pathlib import Path

import pytest

from eval.benchmarks.agentic_mme import scoring
from eval.benchmarks.agentic_mme.scoring import UnscorableItem

VECTORS = json.loads((Path(__file__).parent / "data" / "agentic_mme_score_vectors.json").read_text(encoding="utf-8"))
PROMPT_HASHES = {"search": "7f6416fdbfb34f47aca153d91cb9650d1c4ce0ab9423e1eb7e96b36a252ea1f0",
                 "search_expected_section": "4b5d72374113fc14b5be11040d2ca82ad0991a97d6cdefe9c444bdfe693ec9bb",
                 "visual_system": "d06321839e51f70ecd2889a51bafddfe95a1a27e0e0ee20a8f41f1df8a75346a"}


def outcome(function, *args, **kwargs):
    try:
        return {"result": function(*args, **kwargs)}
    except UnscorableItem:
        return {"raises": True}


def reference_outcome(vector: dict) -> dict:
    return {"raises": True} if "raises" in vector else {"result": vector["result"]}


def assert_all_match(pairs) -> None:
    pairs = list(pairs)
    assert pairs, "no vectors to compare"
    misses = [(case, got, want) for case, got, want in pairs if got != want]
    assert not misses, f"{len(misses)} differ from the reference, e.g. {misses[:3]}"


def test_header_names_the_reference():
    header = VECTORS["header"]
    assert header["commit"] == "5e5dfbdc7b40b53dea17d5ce754c14034acb185b"
    assert header["python"] and header["packages"]["pillow"]
    assert len(VECTORS["final_answer"]) + len(VECTORS["check_answer"]) >= 250


def test_final_answer_check_matches_the_reference():
    assert_all_match((v, outcome(scoring.check_final_answer_only, v["task_cfg"], v["model_answer"]),
                      reference_outcome(v)) for v in VECTORS["final_answer"])


def test_answer_extraction_matches_the_runners():
    assert_all_match(((v["text"], kind), got, v[kind]) for v in VECTORS["extraction"] for kind, got in (
        ("atomic", scoring.extract_answer_text(v["text"])), ("general", scoring.parse_model_output_answer(v["text"])),
        ("general_final", scoring.general_final_answer(v["text"]))))


def test_checkpoint_answer_check_matches_the_reference():
    assert_all_match((v, outcome(scoring.check_answer, v["checkpoint"], v["model_answer"]), reference_outcome(v))
                     for v in VECTORS["check_answer"])


def test_gen_code_operations_match_ast_ops():
    assert_all_match((v["code"], [list(op) for op in scoring.infer_tool_ops(v["code"])], v["ops"])
                     for v in VECTORS["code_ops"])


def test_search_judge_prompt_and_verdict_match_the_reference():
    def judged(vector):
        sent = []

        def judge(messages):
            sent.append({"messages": messages, **scoring.SEARCH_JUDGE_SAMPLING})
            if vector["reply"] == "RAISE":
                raise RuntimeError("connection reset by peer")
            return vector["reply"]
        result = scoring.run_search_judge(judge, vector["description"], vector["queries"], vector["results"])
        return {"sent": sent, "result": result}
    assert_all_match((v["description"], judged(v), {"sent": v["sent"], "result": v["result"]})
                     for v in VECTORS["search_judge"])


def test_visual_check_matching_matches_the_reference():
    assert_all_match(((v["expected"], v["answer"]), scoring.visual_check_passes(v["expected"], v["answer"]),
                      v["passed"]) for v in VECTORS["visual_match"])


def run_process(vector: dict, images: list[str], effective_tool_calls: int,
                unknown: str = "I cannot tell") -> tuple[dict, list, list]:
    replies, searches, visuals = list(vector["judge_replies"]), [], []
    answers = {(question, image): answer for question, image, answer in vector["visual_answers"]}

    def search_judge(messages):
        searches.append({"messages": messages, **scoring.SEARCH_JUDGE_SAMPLING})
        reply = replies.pop(0) if replies else "VERDICT: FAIL"
        if reply == "RAISE":
            raise RuntimeError("connection reset by peer")
        return reply

    def visual_judge(question, image):
        visuals.append([question, image])
        return answers.get((question, image), unknown)

    result = scoring.eval_process(vector["task_cfg"], vector["tool_use_list"], vector["model_answer"],
                                  search_judge=search_judge, visual_judge=visual_judge, images=images,
                                  effective_tool_calls=effective_tool_calls)
    return result, searches, visuals


def test_eval_process_matches_the_reference():
    for vector in VECTORS["eval_process"]:
        result, searches, visuals = run_process(vector, vector["images"], len(vector["tool_use_list"]))
        assert result == vector["result"], vector["name"]
        assert searches == vector["search_requests"], vector["name"]
        assert visuals == vector["visual_requests"], vector["name"]


def test_aggregation_matches_the_reference():
    aggregation = VECTORS["aggregation"]
    results, tasks = [], []
    for run in aggregation["runs"]:
        if run.get("incomplete_run"):
            evaluation = scoring.incomplete_run_eval()
            assert evaluation == run["eval"]
            results.append({"eval": evaluation, "level": None, "incomplete_run": True, "task_cfg": run["task_cfg"]})
            tasks.append(run["task_cfg"])
            continue
        # the driver's visual judge answers by the question alone
        answers = {"Is the sign red?": "yes", "What number?": "42", "Is it a cat?": "no"}
        visual = [[question, image, answer] for question, answer in answers.items()
                  for image in run["images"] or ["orig.png"]]
        evaluation, _, _ = run_process({**run, "visual_answers": visual}, run["images"], run["effective_tool_calls"],
                                       unknown="unsure")
        evaluation["final_answer_accuracy"] = scoring.check_final_answer_only(run["task_cfg"], run["model_answer"])
        assert evaluation == run["eval"], run["run_id"]
        results.append({"eval": evaluation, "level": run["task_cfg"]["meta"]["level"],
                        "tool_use_list": run["tool_use_list"]})
        tasks.append(run["task_cfg"])
    summary = scoring.summarize(results)
    assert summary.pop("overall") == aggregation["overall_scores"]
    assert summary == aggregation["level_scores"]
    # the reference does not find the task of a run that never finished
    analysis = scoring.overthink_analysis([{**r, "task_cfg": None if r.get("incomplete_run") else task}
                                           for r, task in zip(results, tasks)])
    assert analysis == aggregation["overthink_analysis"]
    assert scoring.v_checkpoint_stats(results) == aggregation["v_checkpoint_stats"]


def test_judge_prompts_are_the_reference_texts():
    texts = scoring.judge_prompts()
    assert {key: hashlib.sha256(text.encode()).hexdigest() for key, text in texts.items()} == PROMPT_HASHES
    source = json.loads(scoring.PROMPTS.read_text(encoding="utf-8"))["source"]
    assert source["commit"] == VECTORS["header"]["commit"] and source["path"] == "evaluation/eval_runs_search.py"


def test_every_protocol_file_is_listed_with_its_hash():
    folder = scoring.PROMPTS.parent
    recorded = dict(reversed(line.split(None, 1)) for line in (folder / "SHA256SUMS").read_text().splitlines())
    assert sorted(recorded) == sorted(p.name for p in folder.iterdir() if p.name != "SHA256SUMS")
    assert {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in recorded} == recorded


def test_visual_judge_request():
    messages = scoring.visual_judge_messages("Is it red?", "data:image/png;base64,AAAA")
    assert messages[0] == {"role": "system", "content": scoring.judge_prompts()["visual_system"]}
    assert messages[1]["content"] == [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                                      {"type": "text", "text": "Is it red?"}]
    assert scoring.visual_judge_answer(None, "timeout " * 30).startswith("Error: timeout")


def test_overthink_is_the_papers_formula():
    assert scoring.overthink(5, 2) == 1.0
    assert scoring.overthink(1, 2) == 0.0
    assert scoring.overthink(3, 0) == 3.0


@pytest.mark.parametrize(("golden", "answer", "score"), [
    ({"value": "Paris"}, "The answer is Paris.", 1.0),
    ({"value": "Paris"}, "Parisian", 0.0),  # the reference: a substring is enough
    ({"value": "red"}, "red or blue", 0.0),  # the reference: correct
    ({"value": "red or blue"}, "Red or Blue", 1.0),
    ({"value": "1"}, "2017", 0.0),
    ({"value": "Paris", "match_type": "exact"}, "  paris. ", 1.0),  # the reference: wrong
    ({"value": "5", "match_type": "numeric", "tolerance": 0.5}, "about 5.4 m", 1.0),  # the reference: wrong
    ({"value": "5", "match_type": "numeric"}, "no number", 0.0),
])
def test_strict_score(golden, answer, score):
    assert scoring.strict_score({"golden_answer": golden}, answer) == score


@pytest.mark.parametrize("golden", [{"value": ""}, {"value": None}, {"value": "x", "match_type": "fuzzy"},
                                    {"value": "x", "match_type": "numeric"}, {"value": "5", "match_type": "numeric",
                                                                              "tolerance": "wide"}])
def test_strict_score_refuses_what_it_cannot_score(golden):
    with pytest.raises(ValueError, match="golden_answer"):
        scoring.strict_score({"golden_answer": golden}, "x")
