"""TIR-Bench scoring: `score_item` against the benchmark's own `calculate_score.py` (the reference vectors in
data/tir_bench_score_vectors.json, made by running it), its quirks by name, strict scoring, and threads."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path

import math_verify
import pytest

from eval.benchmarks.tir_bench.scoring import TASKS, UnscorableItem, score_item, strict_score

VECTORS = json.loads((Path(__file__).parent / "data" / "tir_bench_score_vectors.json").read_text(encoding="utf-8"))


def item(task="math", answer="B", extracted="B", **fields):
    """An item in the official result format; `extracted=...` with `fields` overriding or adding fields."""
    base = {"task": task, "prompt": "Pick one.\nA. cat\nB. dog\nC. bird", "model_response": "a response",
            "extracted_answer": extracted, "answer": answer, "question_id": 7, "image_1": "images/1.jpg"}
    return {**base, **fields}


def without(fields, *names):
    return {k: v for k, v in fields.items() if k not in names}


def official_ocr_without_extraction(vector_item):
    task = vector_item["task"] if "task" in vector_item else vector_item.get("category")
    return task == "ocr" and "extracted_answer" not in vector_item


# --- the reference vectors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=[v["id"] for v in VECTORS["vectors"]])
def test_reference_vector(vector):
    if "true_false" in vector:
        got = score_item(vector["item"])
        assert got == vector["true_false"] and type(got) is type(vector["true_false"])
    elif official_ocr_without_extraction(vector["item"]):
        # the reference fails on the missing key; OCR ignores the extraction, so we score it as None
        assert score_item(vector["item"]) == score_item({**vector["item"], "extracted_answer": None})
    else:
        with pytest.raises(UnscorableItem):
            score_item(vector["item"])


def test_vectors_cover_every_task_and_were_made_with_the_pinned_libraries():
    names = [v["item"].get("task", v["item"].get("category")) for v in VECTORS["vectors"]]
    assert set(TASKS) < {name for name in names if isinstance(name, str)}  # a proper subset: unknown names too
    assert len(VECTORS["vectors"]) >= 400
    reference = VECTORS["reference"]
    assert reference["commit"] == "f79c7562b59e4f8142b0437fc725eb3ee1aec76c"
    for package, pinned in reference["packages"].items():
        assert version(package) == pinned, f"the vectors were made with {package}=={pinned}"


# --- the quirks, one by one --------------------------------------------------------------------------------------

def test_task_is_read_from_category_when_there_is_no_task():
    assert score_item(without(item(answer="B", extracted="B", category="maze"), "task")) == 1
    assert score_item(item(task="ocr", category="math", answer="dog", model_response="dog")) == 1  # task wins


def test_an_unknown_task_is_scored_like_the_multiple_choice_and_number_tasks():
    assert score_item(item(task="counting", answer="12", extracted="12 cars")) == 1
    assert score_item(item(task="OCR", answer="hello", extracted="", model_response="hello")) == 0


def test_stars_and_the_extracted_answer_label_are_ignored():
    assert score_item(item(answer="B", extracted="**B**")) == 1
    assert score_item(item(answer="B", extracted="Extracted answer: B")) == 1


def test_an_option_text_picks_its_letter_but_only_in_a_few_option_layouts():
    assert score_item(item(answer="B", extracted="dog", prompt="A. cat\nB. dog")) == 1
    assert score_item(item(answer="B", extracted="dog", prompt="A.cat\nB.dog")) == 1
    assert score_item(item(answer="B", extracted="dog", prompt="A cat\nB dog")) == 1
    assert score_item(item(answer="B", extracted="dog", prompt="(A) cat (B) dog")) == 0  # "(B) dog": no match
    assert score_item(item(answer="A", extracted="dog", prompt="(A) cat (B) dog")) == 1  # nearest letter: A


def test_a_lowercase_letter_picks_the_option_whose_text_starts_with_it():
    assert score_item(item(answer="C", extracted="b", prompt="A. cat\nB. dog\nC. bird")) == 1  # "C. b"ird
    assert score_item(item(answer="B", extracted="b", prompt="A. cat\nB. dog\nC. bird")) == 0


def test_after_a_match_later_letters_are_tested_against_the_matched_letter():
    # "cat" matches A; then "BA" (in "ABBA") matches the letter A, so the pick moves on to B
    assert score_item(item(answer="B", extracted="cat", prompt="A. cat\nB. dog\nC. ABBA")) == 1
    assert score_item(item(answer="A", extracted="cat", prompt="A. cat\nB. dog\nC. ABBA")) == 0


def test_the_letter_list_has_H_twice_and_no_K():
    # the last letter tested is H again: "J. x" picks J, then "H J" moves the pick to H
    assert score_item(item(answer="H", extracted="x", prompt="A. 1\nJ. x\nnote: H J")) == 1
    assert score_item(item(answer="K", extracted="K")) == 0


def test_an_empty_extraction_picks_A():
    assert score_item(item(answer="A", extracted=None, prompt="A. x\nB. y")) == 1
    assert score_item(item(answer="A", extracted="", prompt="no options")) == 1  # nearest letter to ""
    assert score_item(item(answer="B", extracted=None, prompt="A. x\nB. y")) == 0


def test_text_is_the_nearest_letter_by_edit_distance():
    assert score_item(item(answer="B", extracted="Bob", prompt="")) == 1
    assert score_item(item(answer="A", extracted="Ｂ", prompt="")) == 1  # full width: as far from B as from A
    assert score_item(item(answer="B", extracted="B C", prompt="")) == 1


def test_several_letters_are_the_same_characters_in_any_order():
    assert score_item(item(task="symbolic", answer="CD", extracted="DC")) == 1
    assert score_item(item(task="symbolic", answer="CD", extracted="C, D")) == 0
    assert score_item(item(task="symbolic", answer="CD", extracted="Extracted answer: CD")) == 0  # label kept


def test_letters_are_whatever_isalpha_accepts():
    assert score_item(item(answer="京东", extracted="东京")) == 1
    assert score_item(item(answer=True, extracted="eurT")) == 1  # str(True) is letters
    assert score_item(item(answer="nan", extracted="ann")) == 1
    assert score_item(item(answer="é", extracted="é")) == 0  # one letter, but not one of A-J


def test_numbers_are_compared_after_removing_letters_and_whitespace():
    assert score_item(item(answer="5", extracted="5 apples")) == 1
    assert score_item(item(answer="1000", extracted="1 000")) == 1
    assert score_item(item(answer="5", extracted="５")) == 1  # int() reads any decimal digit
    assert score_item(item(answer="10", extracted="1e1")) == 0  # "11"
    assert score_item(item(answer="1_000", extracted="1000")) == 1  # int("1_000")


def test_an_exact_number_is_int_and_a_math_verify_match_is_float():
    exact, verified = score_item(item(answer="5", extracted="5")), score_item(item(answer="5", extracted="$5$"))
    assert (exact, type(exact)) == (1, int)
    assert (verified, type(verified)) == (1.0, float)
    assert score_item(item(answer="0.5", extracted="\\frac{1}{2}")) == 1.0
    assert score_item(item(answer="5", extracted="6 or 5")) == 1.0  # math-verify reads the 5


def test_math_verify_sees_the_converted_answer_when_the_extraction_converted():
    # "1e3" loses its e and reads 13, so the truth goes to math-verify as str(float("1e3")) = "1000.0"
    assert score_item(item(task="instrument", answer="1e3", extracted="1e3")) == 0


def test_answers_that_are_neither_letters_nor_numbers_score_0_and_need_a_question_id():
    assert score_item(item(answer="1/2", extracted="1/2")) == 0
    with pytest.raises(UnscorableItem, match="'question_id'"):
        score_item(without(item(answer="40%", extracted="40%"), "question_id"))


def test_word_search_compares_the_first_comma_pair():
    assert score_item(item(task="word_search", answer="[3, 6]", extracted="(3, 6)")) == 1
    assert score_item(item(task="word_search", answer="[3, 6]", extracted="3, 6, 7")) == 1
    assert score_item(item(task="word_search", answer="[3, 6]", extracted="3 6")) == 0
    assert score_item(item(task="word_search", answer=3, extracted="3 times")) == 1


def test_spot_the_difference_is_the_iou_of_all_integers():
    assert score_item(item(task="spot_difference", answer="[2, 6, 7, 11]", extracted="[2, 6]")) == 0.5
    assert score_item(item(task="spot_difference", answer="[2, 6]", extracted="patches 2 and 6 of 16")) == 2 / 3
    assert score_item(item(task="spot_difference", answer="[]", extracted="none")) == 1.0  # empty and empty
    got = score_item(item(task="spot_difference", answer="[2, 6]", extracted="none"))
    assert (got, type(got)) == (0.0, float)
    assert score_item(item(task="spot_difference", answer=6, extracted="6 differences")) == 1


def test_jigsaw_reads_the_first_run_of_exactly_n_squared_integers():
    def jigsaw(extracted, **meta):
        return score_item(item(task="jigsaw", answer="1, 3, 2, 4", extracted=extracted, **meta))
    assert jigsaw("1, 3, 2, 4", meta_data={"difficulty": 2}) == 1.0
    assert jigsaw("[1, 2, 3, 4]", meta_data={"difficulty": 2}) == 0.5
    assert jigsaw("The 4 pieces: 1, 3, 2, 4", meta_data={"difficulty": 2}) == 1.0  # "4" alone is a run of 1
    assert jigsaw("Row 1: 1, 3\nRow 2: 2, 4", meta_data={"difficulty": 2}) == 0  # ":" breaks the runs
    assert jigsaw("1, 3, 2, 4", meta_data={"difficulty": 2.0}) == 1.0
    assert jigsaw("1, 3, 2, 4", meta_data={"difficulty": "2"}) == 0  # "2" * "2" fails: 0
    assert jigsaw("1, 3, 2, 4", metadata={"difficulty": 2}, meta_data={"difficulty": 3}) == 1.0
    assert jigsaw("1, 3, 2, 4", metadata=None, meta_data={"difficulty": 2}) == 0  # metadata wins, even None
    assert jigsaw("1, 3, 2, 4") == 0  # no meta at all


def test_ocr_is_a_case_sensitive_substring_of_the_raw_response():
    def ocr(response, answer="hello", image="ocr/1.jpg"):
        return score_item(item(task="ocr", answer=answer, extracted=None, model_response=response, image_1=image))
    assert ocr("it says othello") == 1
    assert ocr("it says Hello") == 0
    assert ocr(["hello", "ignored"]) == 1 and ocr(["ignored", "hello"]) == 0
    assert ocr("anything", answer="") == 1


def test_ocr_answer_overrides_match_any_image_name_containing_60_or_62_jpg():
    def ocr(response, image):
        return score_item(item(task="ocr", answer="x", extracted=None, model_response=response, image_1=image))
    assert ocr("mobile", "ocr/60.jpg") == 1  # the answer becomes "mobi"
    assert ocr("mobile", "ocr/160.jpg") == 1
    assert ocr("mobile", "ocr/600.jpg") == 0
    assert ocr("buenos aires", "ocr/262.jpg") == 1  # "aires"


def test_an_ocr_item_without_an_extracted_answer_is_scored_on_its_response():
    assert score_item(without(item(task="ocr", answer="dog", model_response="a dog"), "extracted_answer")) == 1


@pytest.mark.parametrize("fields, named", [
    (without(item(), "extracted_answer"), "no 'extracted_answer' field"),
    (item(extracted=5), "'extracted_answer' is a int, not text"),
    (without(item(), "answer"), "no 'answer' field"),
    (without(item(), "task"), "no 'category' field"),
    (item(task=["math"]), "task is a list"),
    (without(item(extracted="dog"), "prompt"), "no 'prompt' field"),
    (item(extracted="dog", prompt=None), "'prompt' is a NoneType, not text"),
    (item(task="ocr", model_response=None), "'model_response' is a NoneType, not text"),
    (item(task="ocr", model_response=[]), "'model_response' is an empty list"),
    (without(item(task="ocr"), "image_1"), "no 'image_1' field"),
])
def test_an_item_the_reference_crashes_on_is_unscorable_naming_the_field(fields, named):
    with pytest.raises(UnscorableItem, match=named):
        score_item(fields)
    assert issubclass(UnscorableItem, ValueError)


# --- threads ------------------------------------------------------------------------------------------------------

def test_math_verify_itself_refuses_to_run_outside_the_main_thread():
    """Why score_item needs its helper: from a worker thread math-verify raises, and the official script's
    `except Exception` would turn that into a 0."""
    errors = []
    worker = threading.Thread(target=lambda: errors.append(_raises(math_verify.parse, "1/2")))
    worker.start()
    worker.join()
    assert errors == ["ValueError"]


def _raises(function, *args):
    try:
        function(*args)
    except Exception as error:
        return type(error).__name__
    return None


def test_score_item_gives_the_main_thread_result_in_any_thread():
    items = [item(answer="0.5", extracted="\\frac{1}{2}"), item(answer="5", extracted="6 or 5"),
             item(answer="1000", extracted="1,000"), item(answer="5", extracted="5 or 6"),
             item(task="word_search", answer="3", extracted="[3]"), item(answer="B", extracted="dog")]
    in_main = [score_item(i) for i in items]
    with ThreadPoolExecutor(3) as pool:
        in_threads = list(pool.map(score_item, items))
    assert in_threads == in_main == [1.0, 1.0, 1.0, 0, 0, 1]
    assert [type(s) for s in in_threads] == [type(s) for s in in_main]


# --- strict scoring -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, official, strict", [
    (item(answer="B", extracted="b", prompt="A. cat\nB. dog\nC. bird"), 0, 1.0),  # a lone lowercase letter
    (item(answer="B", extracted="dog", prompt="(A) cat (B) dog"), 0, 1.0),  # option text in any layout
    (item(answer="B", extracted="Dog", prompt="A. cat\nB. dog"), 0, 1.0),
    (item(answer="A", extracted=None, prompt="A. x\nB. y"), 1, 0.0),  # no answer is no pick
    (item(answer="B", extracted="B C"), 1, 0.0),  # two letters named
    (item(answer="A", extracted="cow", prompt="A. cat\nB. dog"), 1, 0.0),  # no nearest-letter guess
    (item(task="symbolic", answer="CD", extracted="C, D"), 0, 1.0),
    (item(answer="5", extracted="6 or 5"), 1.0, 0.0),  # a hedge
    (item(answer="0.5", extracted="\\frac{1}{2}"), 1.0, 0.0),  # no math-verify
    (item(answer="-3", extracted="\u22123"), 0, 1.0),  # a Unicode minus
    (item(answer="12", extracted="twelve (12)"), 0, 1.0),
    (item(task="word_search", answer="[3, 6]", extracted="row 3, column 6"), 0, 1.0),
    (item(task="word_search", answer="[3, 6]", extracted="3, 6, 7"), 1, 0.0),
    (item(task="spot_difference", answer="[2, 6]", extracted="patches 2 and 6 of 16"), 2 / 3, 0.0),
    (item(task="jigsaw", answer="1, 3, 2, 4", extracted="1, 3, 2, 4", meta_data={"difficulty": "2"}), 0, 1.0),
    (item(task="jigsaw", answer="1, 3, 2, 4", extracted="Pieces: 4. Order: 1, 3, 2, 4",
          meta_data={"difficulty": 2}), 1.0, 0.0),  # five numbers for four pieces
    (item(task="ocr", answer="hello", extracted=None, model_response="othello"), 1, 0.0),  # whole words only
    (item(task="ocr", answer="hello", extracted=None, model_response="HELLO"), 0, 1.0),  # case ignored
    (item(task="ocr", answer="x", extracted=None, model_response="mobile", image_1="ocr/160.jpg"), 1, 0.0),
])
def test_strict_and_official_differ(fields, official, strict):
    assert score_item(fields) == official
    assert strict_score(fields) == strict


@pytest.mark.parametrize("fields", [
    item(answer="B", extracted="B"), item(answer="B", extracted="**B**"), item(answer="7", extracted="7 cars"),
    item(task="instrument", answer="2.39", extracted="2.39 cm"), item(task="symbolic", answer="CD", extracted="DC"),
    item(task="word_search", answer="[3, 6]", extracted="[3, 6]"),
    item(task="spot_difference", answer="[2, 6, 7, 11]", extracted="[2, 6]"),
    item(task="jigsaw", answer="1, 3, 2, 4", extracted="1, 2, 3, 4", meta_data={"difficulty": 2}),
    item(task="ocr", answer="hello", extracted=None, model_response="The word is hello."),
])
def test_strict_and_official_agree_on_plain_answers(fields):
    assert strict_score(fields) == score_item(fields)


def test_strict_refuses_unknown_tasks_and_empty_answers():
    with pytest.raises(UnscorableItem, match="unknown TIR-Bench task 'counting'"):
        strict_score(item(task="counting"))
    with pytest.raises(UnscorableItem, match="'answer' is empty"):
        strict_score(item(answer=""))
