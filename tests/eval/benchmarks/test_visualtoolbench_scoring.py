"""VisualToolBench's scoring against the reference's own judge scripts (data/visualtoolbench_score_vectors.json,
made by scripts/reference/visualtoolbench_score.py, which runs run_judge_single_turn.py / run_judge_multi_turn.py
with a fake OpenAI client; its manifest names the commit and versions): the prompts sent, the per-task results, the
analysis. Then our strict mode, the critical setting, the tool metrics, the tables and the prompt hashes."""

import hashlib
import json
import re
from pathlib import Path

import pytest

from eval.benchmarks.visualtoolbench import scoring, tables
from eval.benchmarks.visualtoolbench.scoring import (FALLBACK_REPLY, JUDGE_ATTEMPTS, JudgeRequestError,
                                                     analyze_results, judge_prompt, parse_judge_reply,
                                                     reference_reply, rubric_requests, score_task, tool_metrics)

DATA = Path(__file__).parent / "data" / "visualtoolbench_score_vectors.json"
VECTORS = json.loads(DATA.read_text(encoding="utf-8"))
PROMPTS = Path(scoring.__file__).parent / "prompts"
JUDGE_PROMPT_SHA256 = "9b351e63e2ea2e1e8247b8b7fa29d252a918680ec321cc532c00b8a3e6c97ae3"
MET = '{"explanation": "ok", "judge_result": "Met"}'
NOT_MET = '{"explanation": "no", "judge_result": "Not Met"}'


def decode(behaviour):
    return JudgeRequestError("designed failure") if isinstance(behaviour, dict) else behaviour


def attempts_for(case: dict, request) -> list:
    """What the fake client answered for this rubric, attempt by attempt (past the script it raised)."""
    if request.prompt is None:
        return []
    tag = re.search(r"\[(r\d+)\]", request.rubric["description"]).group(1)
    replies = [decode(b) for b in case["replies"][tag]]
    return (replies + [JudgeRequestError("script exhausted")] * JUDGE_ATTEMPTS)[:JUDGE_ATTEMPTS]


def sent_prompts(requests, attempts) -> list[str]:
    """The requests the reference's retry loop makes: each prompt until a truthy reply, at most 3 times."""
    sent = []
    for request, tries in zip(requests, attempts):
        for attempt in tries:
            sent.append(request.prompt)
            if attempt and not isinstance(attempt, BaseException):
                break
    return sent


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


CASES = VECTORS["cases"]


def test_manifest_names_the_reference_and_the_coverage():
    manifest = VECTORS["manifest"]
    assert manifest["reference"]["commit"] == "d4f200a0a44790349667bed09334ac88623074b2"
    assert any(v.startswith("openai==") for v in manifest["libraries"])
    counts = manifest["counts"]
    assert counts["tasks"] >= 40 and counts["judge_requests"] >= 150 and counts["rubrics"] >= 150
    assert {c["script"] for c in CASES} == {"single", "multi"}
    assert sum(bool(c["fatal"]) for c in CASES) >= 10 and sum(c["skipped"] for c in CASES) >= 2


def test_prompts_and_requests_match_the_reference():
    checked = 0
    for case in CASES:
        example, clean_rubrics = case["examples"][0], case["clean_rubrics"]
        multi = case["script"] == "multi"
        requests = rubric_requests(example, clean_rubrics, multi_turn=multi)
        attempts = [attempts_for(case, r) for r in requests]
        sent = sent_prompts(requests, attempts)
        reference = [c["prompt_sha256"] for c in case["calls"]]
        if case["fatal"]:  # the reference stops at its crash; we list every request up to a data-borne crash
            assert [sha(p) for p in sent[:len(reference)]] == reference, case["name"]
        else:
            assert [sha(p) for p in sent] == reference, case["name"]
        if case["prompts"]:
            assert list(dict.fromkeys(sent))[:len(case["prompts"])] == case["prompts"], case["name"]
        for call in case["calls"]:
            assert call["kwargs"] == scoring.JUDGE_REQUEST and call["model"] == scoring.JUDGE_MODEL
            assert call["messages"] == len(scoring.judge_messages("x")) and call["role"] == "user"
        checked += len(reference)
    assert checked == VECTORS["manifest"]["counts"]["judge_requests"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_official_task_results_match_the_reference(case):
    example, clean_rubrics = case["examples"][0], case["clean_rubrics"]
    multi = case["script"] == "multi"
    requests = rubric_requests(example, clean_rubrics, multi_turn=multi)
    task = score_task(example, clean_rubrics, [attempts_for(case, r) for r in requests], "official",
                      multi_turn=multi)
    if case["results"]:
        assert task.unscored is None and task.result == case["results"][0]
    else:  # the reference crashed (lost the chunk) or skipped the task: unscored, with the reason
        assert task.result is None and task.unscored
        assert ("skips" in task.unscored) == bool(case["skipped"])


def test_a_crash_loses_the_reference_chunk_but_only_the_task_here():
    chunk = VECTORS["chunk"]
    assert chunk["results"] == [] and chunk["fatal"]
    scored = [score_task(e, chunk["clean_rubrics"], [attempts_for(chunk, r) for r in
                                                     rubric_requests(e, chunk["clean_rubrics"])])
              for e in chunk["examples"]]
    assert [t.unscored is None for t in scored] == [True, False, True]


@pytest.mark.parametrize("analysis", VECTORS["analyses"], ids=lambda a: a["name"])
def test_analysis_matches_the_reference(analysis):
    assert analyze_results(analysis["eval_results"]) == analysis["output"]


def test_judge_prompt_is_the_reference_string():
    text = judge_prompt("Q?", "G.", "A.", "R.")
    assert text.startswith("\n        You are an expert evaluator") and text.endswith("}\n        ")
    assert "criterion.  \n        You will be provided with:  \n" in text
    assert "**Question:** Q?  \n\n        **Golden Answer:** G.  \n" in text
    assert '"judge_result": "Met" or "Not Met"\n        }\n        ' in text
    odd = judge_prompt("{x}", None, ["a"], "r")
    assert odd.count("{x}") == 1 and "**Golden Answer:** None  " in odd and "**Model Answer:** ['a']  " in odd


def test_prompt_files_match_sha256sums():
    recorded = dict(reversed(line.split(None, 1)) for line in (PROMPTS / "SHA256SUMS").read_text().splitlines())
    assert recorded["judge_prompt.json"] == JUDGE_PROMPT_SHA256
    assert sorted(recorded) == sorted(p.name for p in PROMPTS.iterdir() if p.name != "SHA256SUMS")
    for name, digest in recorded.items():
        assert hashlib.sha256((PROMPTS / name).read_bytes()).hexdigest() == digest, f"{name} changed"
    source = json.loads((PROMPTS / "judge_prompt.json").read_text(encoding="utf-8"))["source"]
    assert source["commit"] == VECTORS["manifest"]["reference"]["commit"]


# --- the retry rules -------------------------------------------------------------------------------------------

def test_reference_reply_follows_the_retry_loop():
    fail = JudgeRequestError("down")
    assert reference_reply([MET]) == MET
    assert reference_reply([None, fail, MET]) == MET
    assert reference_reply([fail, fail, fail]) == FALLBACK_REPLY
    assert reference_reply([None, None, fail]) == FALLBACK_REPLY
    assert reference_reply([fail, fail, None]) is None
    assert reference_reply([None] * (JUDGE_ATTEMPTS - 1) + [""]) == ""
    with pytest.raises(ValueError, match="asked 3 times"):
        reference_reply([fail])
    assert scoring.reply_accepted(" ") and not scoring.reply_accepted("", "official")
    assert not scoring.reply_accepted(" ", "strict") and scoring.reply_accepted(MET, "strict")


# --- strict mode ----------------------------------------------------------------------------------------------

def _task(rubrics: dict, **fields):
    example = {"task_id": "t", "prompt": "Q", "golden_answer": "G", "model_answer": "A", "turncase": "single-turn",
               "eval_focus": "region_switch", "prompt_category": "maths", **fields}
    return example, [{"task_id": "t", "rubrics": rubrics}]


def test_parse_judge_reply_is_strict():
    assert parse_judge_reply(MET)[0] == "Met" and parse_judge_reply(NOT_MET)[:2] == ("Not Met", "no")
    assert parse_judge_reply('```json\n' + MET + '\n```')[0] == "Met"
    for bad in ('{"judge_result": "met"}', '{"judge_result": "Partially Met"}', "Met", "", None, '["Met"]',
                'Verdict: ' + MET, '{"explanation": "x"}'):
        verdict, _, error = parse_judge_reply(bad)
        assert verdict is None and error, bad


def test_strict_retries_a_malformed_verdict_then_counts_it_unjudged():
    example, rubrics = _task({"a": {"description": "d", "weight": 5}, "b": {"description": "e", "weight": 1}})
    good = score_task(example, rubrics, [['{"judge_result": "met"}', MET], [NOT_MET]], "strict")
    assert good.result["score"] == 5 / 6 and good.result["accuracy"] == 1 and good.unjudged == 0
    official = score_task(example, rubrics, [['{"judge_result": "met"}'], [NOT_MET]], "official")
    assert official.result["score"] == 0 and official.result["accuracy"] == 1  # "met" is neither, officially
    bad = score_task(example, rubrics, [["no", "Met", '{"judge_result": "met"}'], [NOT_MET]], "strict")
    assert bad.result is None and bad.unjudged == 1 and "unjudged" in bad.unscored
    failed = score_task(example, rubrics, [[JudgeRequestError("down")] * 3, [MET]], "strict")
    assert failed.result is None and "request failed" in failed.unscored
    officially = score_task(example, rubrics, [[JudgeRequestError("down")] * 3, [MET]], "official")
    assert officially.result["accuracy"] == 0 and officially.result["score"] == 1 / 6  # the fallback


def test_strict_leaves_tasks_without_weight_or_prompt_unscored():
    example, rubrics = _task({})
    assert score_task(example, rubrics, [], "official").result["score"] == 0
    assert "no rubric weight" in score_task(example, rubrics, [], "strict").unscored
    example, rubrics = _task({"a": {"weight": 5}})
    assert score_task(example, rubrics, [[]], "official").result["accuracy"] == 0  # fallback: Not Met
    assert "no description" in score_task(example, rubrics, [[]], "strict").unscored


def test_critical_setting():
    rubrics = {"a": {"description": "d", "weight": 4, "critical": "No"},
               "b": {"description": "e", "weight": 2, "critical": True}}
    example, clean = _task(rubrics)
    by_weight = score_task(example, clean, [[NOT_MET], [MET]], "official", critical="weight")
    by_flag = score_task(example, clean, [[NOT_MET], [MET]], "official", critical="flag")
    assert by_weight.result["accuracy"] == 0 and by_flag.result["accuracy"] == 1
    assert score_task(example, clean, [[MET], [NOT_MET]], "strict", critical="flag").result["accuracy"] == 0
    rubrics["b"]["critical"] = "maybe"
    assert "critical flag" in score_task(example, clean, [[MET], [MET]], "strict", critical="flag").unscored
    with pytest.raises(ValueError):
        score_task(example, clean, [[MET], [MET]], "lenient")


def test_attempts_must_match_the_requests():
    example, clean = _task({"a": {"description": "d", "weight": 4}})
    with pytest.raises(ValueError, match="1 rubric"):
        score_task(example, clean, [], "official")


# --- tool metrics ---------------------------------------------------------------------------------------------

def test_tool_metrics_follow_the_paper():
    metrics = tool_metrics([[True, False, True], [], [True]])
    assert metrics == {"tasks": 3, "calls": 4, "proactivity": 2 / 3, "success_rate": 3 / 4, "volume": 4 / 3}
    assert tool_metrics([[], []])["success_rate"] is None and tool_metrics([])["proactivity"] is None
    assert not scoring.call_succeeded({"status": "error", "error": "Location not found"})
    assert not scoring.call_succeeded({"error": "boom"}) and not scoring.call_succeeded({"ok": "false"})
    assert scoring.call_succeeded({"ok": "true", "stdout": "", "output_paths": []})
    assert scoring.call_succeeded({"status": "success", "result": 3})


# --- tables ---------------------------------------------------------------------------------------------------

def _records():
    records = []
    for k, (turncase, category, score, accuracy, calls) in enumerate([
            ("single-turn", "maths", 0.5, 1, [True, False]), ("single-turn", "finance", 1.0, 1, []),
            ("multi-turn", "medical", 0.25, 0, [True, True, True]), ("single-turn", "sports", None, None, [True])]):
        example, clean = _task({"a": {"description": "d", "weight": 1}}, task_id=f"t{k}", turncase=turncase,
                               prompt_category=category)
        task = scoring.TaskScore(f"t{k}", "official", "weight", None if score is None else
                                 {"score": score, "accuracy": accuracy}, None if score is not None else "judge down")
        records.append({"id": f"t{k}", "mode": "tools", "category": category,
                        "visualtoolbench": scoring.task_record(task, example, calls, judge="o4-mini")})
    return records


def test_tables_render_in_the_paper_layout():
    out = tables.tables(_records(), {"model": "o4-mini"})
    text = "\n".join(out)
    assert len(out) == 5
    assert "Table 3: APR (%)" in out[0] and "Table 5: single-turn APR" in out[1] and "Table 7: ARS" in out[2]
    assert "Table 8" in out[3]
    assert all("judge: o4-mini" in section for section in out)
    assert "| this run | 50.00 | 100.00 | - | 100.00 | 0.00 | - | - | 0.00 | - | - | - |" in out[0]
    assert "| paper: o4-mini | 11.21 |" in out[0]
    assert "1 of 4 episode(s) unscored" in out[0]
    assert "| tasks | 4 | 1 | 0 | 1 | 1 | 0 | 0 | 1 | 0 | 0 | 0 |" in out[0]
    both = tables.tables(_records() + [{**r, "mode": "no_tools"} for r in _records()], {"model": "o4-mini"})
    assert "| tasks | 4 | 1 | 0 | 1 | 1 |" in both[0]  # a task run with and without tools counts once
    assert "| this run | 6 | 0.6667 | 0.6667 | 1.00 | 1.0000 | 1.0000 | 3.00 |" in out[3]
    assert "| paper: o4-mini | 5337 | 0.8159 |" in out[3]
    assert "region_switch" in text
