"""VTC-Bench's official scoring against the reference's own outputs (data/vtc_bench_score_vectors.json, made by
scripts/reference/vtc_bench_score.py running cs-w0r1d/VTC-Bench's code; its header says how), its quirks one by
one, and the strict scoring."""

import json
from pathlib import Path

import pytest

from eval.benchmarks.vtc_bench import scoring
from eval.benchmarks.vtc_bench.scoring import (
    AGENT_RUNS,
    JUDGE_ATTEMPTS,
    JUDGE_MODEL,
    REFERENCE_COMMIT,
    ReferenceExportError,
    answer_needs_rerun,
    extract_agent_answer,
    final_response,
    gt_chain_length,
    judge_hit,
    judge_prompt,
    judge_request,
    official_accuracy,
    official_judge,
    official_score,
    official_tool_chain,
    parse_gt_chain,
    reference_cells,
    rule_score,
    strict_score,
    tool_chain_reply,
    tool_chain_request,
)
from tests.eval.benchmarks.helpers import ScriptedBackend

VECTORS = json.loads((Path(__file__).parent / "data" / "vtc_bench_score_vectors.json").read_text(encoding="utf-8"))
NUMBERS = {"A": "6", "B": "5", "C": "3", "D": "4"}
WORDS = {"A": "red", "B": "blue", "C": "cat", "D": "dog"}


def row(answer, prediction, options=None, question="How many?"):
    return {"index": "1", "id": "t_1", "category": "counting", "question": question, "answer": answer,
            **{k: None for k in "ABCDEFG"}, **(options or {}), "prediction": prediction}


def scripted(replies):
    """An `ask` that answers from a list and records the requests."""
    replies, sent = list(replies), []

    def ask(request):
        sent.append(request)
        return replies.pop(0)
    return ask, sent, replies


# ---------------------------------------------------------------- the reference's outputs


def test_vectors_record_their_reference_and_environment():
    header = VECTORS["header"]
    assert header["reference"]["commit"] == REFERENCE_COMMIT
    assert header["reference"]["repo"] == scoring.REFERENCE_REPO
    assert {"pandas", "openpyxl", "numpy", "math-verify", "latex2sympy2_extended", "sympy"} <= set(header["packages"])
    assert len(VECTORS["rows"]) >= 400 and len(VECTORS["extraction"]) >= 30


def test_cells_after_the_export_round_trip_match_the_reference():
    for vector in VECTORS["rows"]:
        given = vector["row"]
        expected = {k: given[k] or None for k in ["question", "answer", *"ABCDE", "prediction"]}
        assert reference_cells(given) == {**expected, **vector["reference_cells_changed"]}, given["index"]


def test_rule_scores_match_the_reference():
    mismatches = [v["row"]["index"] for v in VECTORS["rows"] if rule_score(v["row"]) != v["rule_score"]]
    assert not mismatches


def test_judging_matches_the_reference_request_by_request():
    judged = [v for v in VECTORS["rows"] if v["judge"]]
    assert len(judged) > 300 and any(v["judge"]["all_attempts_failed"] for v in judged)
    for vector in judged:
        expected = vector["judge"]
        ask, sent, left = scripted(expected["replies"])
        hit = official_judge(vector["row"], ask)
        assert hit == (None if expected["all_attempts_failed"] else expected["hit"]), vector["row"]["index"]
        assert not left and [r["temperature"] for r in sent] == expected["temperatures"]
        assert {r["messages"][0]["content"][0]["text"] for r in sent} == {expected["prompt"]}


def test_the_suites_judge_stage_reaches_the_reference_verdicts():
    """The path a run takes (VtcBench.judge through a backend), on the reference's recorded judge exchanges."""
    from eval.benchmarks.vtc_bench import VtcBench
    from eval.suites import Task

    suite = VtcBench([], [], "vectors", "official", JUDGE_MODEL)
    for vector in (v for v in VECTORS["rows"] if v["judge"]):
        expected, row = vector["judge"], vector["row"]
        task = Task(str(row["index"]), row["question"], (), row["answer"], "vtc_bench",
                    meta={"row": {k: v for k, v in row.items() if k != "prediction"}})
        record = {"prediction": row["prediction"], "scores": {"official": None, "strict": 0.0}}
        backend = ScriptedBackend(expected["replies"])
        ((_, fields),) = list(suite.judge([(task, record)], backend, JUDGE_MODEL, retries=1))
        hit = None if expected["all_attempts_failed"] else expected["hit"]
        assert fields["scores"]["official"] == (None if hit is None else float(hit)), row["index"]
        assert not backend.replies and [s.temperature for _, s in backend.sent] == expected["temperatures"]
        assert {p.messages[0]["content"][0]["text"] for p, _ in backend.sent} == {expected["prompt"]}


def test_judge_request_is_the_reference_payload():
    example = VECTORS["header"]["judge_request_example"]
    vector = next(v for v in VECTORS["rows"] if v["row"]["index"] == example["index"])
    reference = {k: v for k, v in example["payload"].items() if k != "api_key"}  # the --eval-api-key value
    assert judge_request(vector["row"], example["attempt"]) == reference
    assert reference["model"] == JUDGE_MODEL


def test_final_scores_and_accuracy_match_the_reference():
    for vector in VECTORS["rows"]:
        judge = vector["judge"]
        hit = None if not judge or judge["all_attempts_failed"] else judge["hit"]
        assert official_score(vector["row"], hit) == vector["final_score"], vector["row"]["index"]
    scores = [(v["row"]["category"], v["final_score"]) for v in VECTORS["rows"]]
    assert official_accuracy(scores) == VECTORS["accuracy"]
    assert list(official_accuracy(scores)) == list(VECTORS["accuracy"])


def test_answer_extraction_and_reruns_match_the_reference():
    for vector in VECTORS["extraction"]:
        answer, runs = None, 0
        while True:
            text, reasoning = final_response(vector["runs"][min(runs, len(vector["runs"]) - 1)])
            answer, runs = extract_agent_answer(text, reasoning, answer), runs + 1
            if not answer_needs_rerun(answer) or runs == AGENT_RUNS:
                break
        assert (answer, runs, text) == (vector["agent_answer"], vector["agent_runs"], vector["full_response"]), vector
    for vector in VECTORS["reruns"]:
        assert answer_needs_rerun(vector["answer"]) == vector["rerun"], vector


def test_gt_chain_lengths_match_the_reference():
    for vector in VECTORS["gt_tool_counts"]:
        assert gt_chain_length(vector["cell"]) == vector["count"], vector


def test_tool_chain_replies_match_the_reference():
    example = VECTORS["header"]["tool_chain_request_example"]
    assert tool_chain_request(example["python_code"], example["model"]) == example["payload"]
    for vector in VECTORS["tool_chain_replies"]:
        ask, sent, left = scripted(vector["replies"])
        assert official_tool_chain(example["python_code"], example["model"], ask) == vector["result"], vector["case"]
        assert len(sent) == vector["requests"] and not left


def test_prompt_texts_carry_their_source():
    data = (Path(scoring.__file__).parent / "prompts" / "judge.json").read_bytes()
    for entry in json.loads(data).values():
        assert entry["source"]["commit"] == REFERENCE_COMMIT


# ---------------------------------------------------------------- rule quirks


def test_a_missing_prediction_is_the_text_nan():
    assert rule_score(row("n", None)) == 1.0  # 'n' is inside 'nan'
    assert rule_score(row("banana", None)) == 0.0
    assert reference_cells(row("x", ""))["prediction"] is None


def test_missing_value_words_become_nan_on_both_sides():
    cells = reference_cells(row("None", "N/A"))
    assert cells["answer"] is None and cells["prediction"] is None
    assert rule_score(row("None", None)) == 1.0  # 'nan' == 'nan'
    assert rule_score(row("NA", "banana")) == 1.0  # the answer reads 'nan', inside 'banana'
    assert rule_score(row("None", "none")) == 0.0


def test_a_letter_answer_takes_the_letter_alone_or_before_dot_space_or_dash():
    for prediction in ["B", "b", " B ", "B. 5", "b 5", "B-5", "B.C", "b c"]:
        assert rule_score(row("B", prediction, NUMBERS)) == 1.0, prediction
    for prediction in ["(B)", "B) 5", "B:", "Option B", "The answer is B", "**B**", "5", "Ｂ"]:
        assert rule_score(row("B", prediction, NUMBERS)) == 0.0, prediction


def test_a_prediction_starting_with_a_to_g_is_read_as_an_option_letter():
    assert rule_score(row("blue", "b", WORDS)) == 1.0
    assert rule_score(row("blue", "blue", WORDS)) == 1.0  # 'b' names option B, which is blue
    assert rule_score(row("blue", "dark blue", WORDS)) == 0.0  # 'd' names option D, dog
    assert rule_score(row("5", "BLUE SKY", NUMBERS)) == 1.0  # 'b' names option B, which is 5
    assert rule_score(row("blue", "It is blue.", WORDS)) == 1.0  # otherwise any option text inside counts


def test_a_one_letter_a_to_d_answer_is_multiple_choice_even_without_options():
    assert rule_score(row("D", "D.")) == 1.0
    assert rule_score(row("D", "The answer is D")) == 0.0
    assert rule_score(row("E", "yes")) == 1.0  # e..g without options is open: 'e' is inside 'yes'
    assert rule_score(row("F", "Final answer: xenon")) == 1.0


def test_short_open_answers_count_inside_longer_predictions():
    assert rule_score(row("161", "1610")) == 1.0
    assert rule_score(row("the", "other")) == 1.0
    assert rule_score(row("a b c d", "x a b c d")) == 1.0
    assert rule_score(row("one two three four five", "one two three four five six")) == 0.0  # 5 words: equality
    assert rule_score(row("NEW MEXICO MUTUAL", "new  mexico\nmutual")) == 1.0  # case and spacing ignored


def test_the_math_verify_step_never_scores():
    for answer, prediction in [("0.5", "1/2"), ("2.0", "2"), ("26000", "26,000"), ("\\frac{1}{2}", "0.5")]:
        assert rule_score(row(answer, prediction)) == 0.0


def test_options_f_and_g_never_reach_the_scorer():
    options = {k: str(n) for n, k in enumerate("ABCDEFG", 1)}
    assert rule_score(row("F", "F", options)) == 1.0  # a letter answer needs no option text
    assert rule_score(row("6", "f", options)) == 0.0  # but 'f' names no option
    assert rule_score(row("6", "e", options)) == 0.0 and rule_score(row("5", "e", options)) == 1.0
    assert "F." not in judge_prompt(row("F", "?", options))


def test_the_xlsx_export_changes_cells():
    cells = reference_cells(row("=5", "mailto:x@y.z", {"A": "=1", "B": "internal:Sheet1!A1"}))
    assert (cells["answer"], cells["prediction"], cells["A"], cells["B"]) == (0, "x@y.z", 0, "Sheet1!A1")
    assert reference_cells(row("x", "a\rb\x01"))["prediction"] == "a_x000D_b_x0001_"
    assert reference_cells(row("x", "_x0041_ax005F_b"))["prediction"] == "_x0041_ab"
    assert len(reference_cells(row("x", "x" * 40000))["prediction"]) == 32767
    assert len(reference_cells(row("x", "\U0001F600" * 17000))["prediction"]) == 16383  # UTF-16 units
    assert reference_cells(row("x", "http://e.com/" + "a" * 2100))["prediction"] is None
    assert reference_cells(row("x", "file:///c:/dir/f.txt"))["prediction"] == "c:\\dir\\f.txt"
    assert rule_score(row("0", "=anything")) == 1.0


@pytest.mark.parametrize("prediction", ["file://a", "external:", "a\ud800b", "mailto:" + "a" * 2000 + "#" + "b" * 99])
def test_values_the_reference_export_crashes_on_raise(prediction):
    with pytest.raises(ReferenceExportError):
        rule_score(row("x", prediction))


# ---------------------------------------------------------------- judge quirks


def test_the_letter_judge_wants_bare_capitals_sorted_against_the_answer():
    mcq = row("B", "my pick is the second", NUMBERS)
    assert [judge_hit(mcq, r) for r in ["B", " B\n", "A", "Z", "BA"]] == [1, 1, 0, 0, 0]
    assert [judge_hit(mcq, r) for r in ["b", "B.", "(B)", "Answer: B", "", None]] == [None] * 6
    assert judge_hit(row("A, C", "x", NUMBERS), "CA") == 1
    assert judge_hit(row("blue", "x", WORDS), "B") == 0  # an option-text answer never matches a letter
    assert judge_hit(row(" B", "x", NUMBERS), "B") == 0  # nor an answer with a space around it


def test_the_yes_no_judge_reads_yes_or_no_in_any_case():
    open_row = row("161", "about one hundred sixty")
    assert [judge_hit(open_row, r) for r in ["yes", " YES \n", "No", "nO"]] == [1, 1, 0, 0]
    assert [judge_hit(open_row, r) for r in ["yes.", "Yes, it matches.", "y", "Failed to obtain answer via API."]] \
        == [None] * 4


def test_a_letter_answer_without_options_gets_the_yes_no_judge():
    request = judge_request(row("D", "the fourth"), 1)
    assert request["messages"][0]["content"][0]["text"].startswith("You are an answer evaluator")
    assert request["temperature"] == 0.5
    assert judge_request(row("D", "x", NUMBERS), 3)["temperature"] == 3 * 0.1


def test_the_judge_prompt_carries_the_unstripped_cells():
    text = judge_prompt(row("B", " maybe B ", NUMBERS, question="None"))
    assert "<start>\nnan\nOptions: A. 6 B. 5 C. 3 D. 4 <end>\nAnswer: <start>\n maybe B \n<end>" in text
    assert "Ground Truth: 161\nPredicted Answer: nan\n" in judge_prompt(row("161", None))


def test_a_failed_request_is_sent_again_before_the_next_attempt():
    ask, sent, left = scripted([None, "", "Failed to obtain answer via API.", "maybe", "yes"])
    assert official_judge(row("161", "one hundred"), ask) == 1
    assert [r["temperature"] for r in sent] == [0.0, 0.0, 0.0, 0.0, 0.5] and not left


def test_a_judge_without_a_verdict_scores_zero():
    ask, sent, _ = scripted(["maybe"] * JUDGE_ATTEMPTS)
    row_ = row("161", "one hundred")
    assert official_judge(row_, ask) is None and len(sent) == JUDGE_ATTEMPTS
    assert official_score(row_, None) == 0.0 and official_score(row_, 1) == 1.0
    assert official_score(row("161", "161"), 0) == 1.0  # the judge only sees what the rules reject


# ---------------------------------------------------------------- step 1 quirks


def test_answer_extraction_takes_the_first_tags():
    assert extract_agent_answer("<answer>A</answer> no, <answer>B</answer>") == "A"
    assert extract_agent_answer("</answer> then <answer>D</answer>") == ""
    assert extract_agent_answer("<answer>A</answer> <|answer|>C<|answer|>") == "C"  # InternVL's tags win
    assert extract_agent_answer("no tags", "<answer>D</answer>") == "D"
    assert extract_agent_answer("<answer></answer>", "<answer>A</answer>") == "A"
    assert extract_agent_answer("no tags", None, previous="I cannot tell") == "I cannot tell"


def test_the_final_response_is_the_last_message_with_text_of_any_role():
    messages = [{"role": "assistant", "content": "<answer>A</answer>"},
                {"role": "function", "content": "tool output: 42"}]
    assert final_response(messages) == ("tool output: 42", None)
    messages = [{"role": "assistant", "content": "final"},
                {"role": "assistant", "content": " ", "reasoning_content": "<answer>B</answer>"}]
    assert final_response(messages) == ("final", None)  # the blank message's reasoning is not read


def test_refusal_words_trigger_a_rerun():
    assert [answer_needs_rerun(a) for a in ["B", "I cannot tell", "UNABLE", "can't", "", None]] == \
        [False, True, True, False, True, True]


# ---------------------------------------------------------------- ground-truth chains (cells of the dataset)

DATASET_CELLS = [
    ('["Adjust Brightness", \u201cZoom in\u201d, "Rotate"]', ["Adjust Brightness", "Zoom in", "Rotate"], 3),
    ('["Adjust Brightness\u201d,\u201dRotate\u201d,"Flip","Crop"]', ["Adjust Brightness", "Rotate", "Flip", "Crop"], 4),
    ('[\u201cCrop\u201d,\u201dResize", "Convert Color", "Denoise", "Histogram Eq", "Sharpen"]',
     ["Crop", "Resize", "Convert Color", "Denoise", "Histogram Eq", "Sharpen"], 6),
    ('["Adjust Brightness",  "Draw Contours\u201d,  "Draw Line\u201d]',
     ["Adjust Brightness", "Draw Contours", "Draw Line"], 3),
    ('"[""Crop"", ""Flip"", ""Resize"", ""Sharpen""]"', ["Crop", "Flip", "Resize", "Sharpen"], 4),
    ('["Crop", "Flip", "Resize", "Sharpen"]', ["Crop", "Flip", "Resize", "Sharpen"], 4),
]


@pytest.mark.parametrize("cell, names, length", DATASET_CELLS)
def test_dataset_chain_cells_parse_and_count(cell, names, length):
    parsed, problem = parse_gt_chain(cell)
    assert parsed == names and gt_chain_length(cell) == length
    assert (problem is None) == (cell == '["Crop", "Flip", "Resize", "Sharpen"]')


@pytest.mark.parametrize("cell, names, length", [
    (None, [], 0), ("", [], 0), ("[]", [], 1), ("Crop, Flip", ["Crop", "Flip"], 2), ('["Crop",]', ["Crop"], 2),
    ('["Measure Area, Perimeter"]', ["Measure Area, Perimeter"], 2), ("[Crop, Flip]", ["Crop", "Flip"], 2),
    ('{"a": [', ["a"], 1)])
def test_malformed_chain_cells_never_raise(cell, names, length):
    assert parse_gt_chain(cell)[0] == names and gt_chain_length(cell) == length


def test_tool_chain_replies_read_from_the_first_to_the_last_brace():
    good = '{"code_tools": ["Crop"], "raw_tool_response": {"tool_chain": []}}'
    assert tool_chain_reply(f"```json\n{good}\n```") == json.loads(good)
    assert tool_chain_reply('{"code_tools": ["Crop"]}') == scoring.empty_tool_chain()
    assert tool_chain_reply("no tools") == scoring.empty_tool_chain()
    assert tool_chain_reply(good + " see {note}") is None and tool_chain_reply(None) is None
    request = tool_chain_request("x = {1: 2}", "m")
    assert request["messages"][0]["content"].endswith("Python Code:\n\nx = {1: 2}\n\nOutput:\n")


# ---------------------------------------------------------------- strict scoring

STRICT_VS_OFFICIAL = [  # (answer, prediction, options, official rule score, strict score)
    ("B", "(B)", NUMBERS, 0.0, 1.0),
    ("B", "The answer is B", NUMBERS, 0.0, 1.0),
    ("B", "5", NUMBERS, 0.0, 1.0),
    ("B", "B and C", NUMBERS, 1.0, 0.0),
    ("B", "B.C", NUMBERS, 1.0, 0.0),
    ("blue", "It is blue.", WORDS, 1.0, 0.0),
    ("5", "BLUE SKY", NUMBERS, 1.0, 0.0),
    ("13", "133", {"A": "3", "B": "13", "C": "31"}, 1.0, 0.0),
    ("161", "1610", None, 1.0, 0.0),
    ("2.0", "2", None, 0.0, 1.0),
    ("26000", "26,000", None, 0.0, 1.0),
    ("50%", "0.5", None, 0.0, 1.0),
    ("0.894, 1.53", "0.894,1.53", None, 0.0, 1.0),
    ("y=2x-6.5", "y = 2x - 6.5", None, 0.0, 1.0),
    ("Windy", "It is windy today", None, 1.0, 0.0),
    ("the", "other", None, 1.0, 0.0),
    ("n", None, None, 1.0, 0.0),
    ("None", "banana", None, 1.0, 0.0),
    ("E", "yes", None, 1.0, 0.0),
]


@pytest.mark.parametrize("answer, prediction, options, official, strict", STRICT_VS_OFFICIAL)
def test_strict_and_official_differ(answer, prediction, options, official, strict):
    assert rule_score(row(answer, prediction, options)) == official
    assert strict_score(row(answer, prediction, options)) == strict


@pytest.mark.parametrize("answer, prediction, options", [
    ("B", "B. 5", NUMBERS), ("b", "(b)", NUMBERS), ("blue", "b", WORDS), ("161", "161 cm", None),
    ("20.4", "20.40", None), ("NEW MEXICO MUTUAL", "New Mexico Mutual.", None), ("光陽機車", "光陽機車", None)])
def test_strict_accepts_the_same_answer_in_another_form(answer, prediction, options):
    assert strict_score(row(answer, prediction, options)) == 1.0


def test_strict_needs_an_answer():
    with pytest.raises(ValueError):
        strict_score(row(" ", "x"))
    assert strict_score(row("B", None, NUMBERS)) == 0.0
