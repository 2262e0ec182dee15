import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval.scorers import SCORERS, check_scorer, deepeyes_reward, extract_answer, get_scorer, normalize_text
from eval.suites.jsonl import jsonl_suite


@pytest.mark.parametrize("name, prediction, truth, score", [
    ("text_match", "<think>hm</think><answer> Hello  World. </answer>", "hello world", 1.0),
    ("text_match", "hello world", "hello world", 1.0),  # no tags: the whole reply
    ("text_match", "<answer>hello</answer> <answer>world</answer>", "world", 1.0),  # the last answer
    ("text_match", "<answer>hello word</answer>", "hello world", 0.0),
    ("option_letter", "<answer>(B) 40%</answer>", "B", 1.0),
    ("option_letter", "<answer>B. forty</answer>", "b", 1.0),
    ("option_letter", "<answer>Both</answer>", "B", 0.0),
    ("option_letter", "<answer>A</answer>", "B", 0.0),
    ("json_list", "<answer>[2, 0, 1]</answer>", "[2, 0, 1]", 1.0),
    ("json_list", "<answer>[2, 1, 0]</answer>", "[2, 0, 1]", 0.0),
    ("json_list", "<answer>[2, 0,</answer>", "[2, 0, 1]", 0.0),
    ("list_iou", "<answer>[2, 6, 7]</answer>", "[2, 6, 11]", 0.5),
    ("list_iou", '```json\n{"different_patches": [11, 2, 6]}\n```', "[2, 6, 11]", 1.0),
    ("list_iou", "<answer>[]</answer>", "[]", 1.0),
    ("list_iou", "<answer>[2, true]</answer>", "[2]", 0.0),
    ("list_iou", "<answer>none</answer>", "[2]", 0.0),
    ("text_match", "so the reading is \\boxed{\\text{6.7}}", "\\text{6.7}", 1.0),  # the last box, braces balanced
    ("numeric", "first \\boxed{3} then \\boxed{12}", "12", 1.0),
    ("jigsaw_positions", "<answer>[1, 3, 2, 4]</answer>", "[1, 2, 3, 4]", 0.5),
    ("jigsaw_positions", "<answer>1, 2, 3</answer>", "[1, 2, 3, 4]", 0.75),  # TIR-Bench's comma form, short
    ("jigsaw_positions", "<answer>none</answer>", "[1, 2]", 0.0),
    ("numeric", "<answer>about 1,024.0 px</answer>", "1024", 1.0),
    ("numeric", "<answer>none</answer>", "3", 0.0),
])
def test_scorers(name, prediction, truth, score):
    assert get_scorer(name)(prediction, truth) == score


def test_unknown_scorer_is_named():
    with pytest.raises(ValueError, match="unknown scorer 'bleu'"):
        get_scorer("bleu")


def test_deepeyes_reward_pays_tools_only_with_a_correct_answer():
    assert deepeyes_reward("<answer>cat</answer>", "cat", "text_match", used_tool=True) == pytest.approx(2.2)
    assert deepeyes_reward("<answer>dog</answer>", "cat", "text_match", used_tool=True) == pytest.approx(0.2)
    assert deepeyes_reward("cat", "cat", "text_match", used_tool=False) == pytest.approx(0.8)
    assert extract_answer("<answer>x") == "x"
    assert deepeyes_reward("<answer>10.4</answer>", "10", "numeric(abs=0.5)", used_tool=True) == pytest.approx(2.2)


# --- text_match: variants, the last line, normalization ---------------------------------------------------------

@pytest.mark.parametrize("prediction, truth, score", [
    ("<answer>nyc</answer>", '["NYC", "New York City"]', 1.0),  # a JSON array of strings: accepted variants
    ("<answer>New  York city.</answer>", '["NYC", "New York City"]', 1.0),
    ("<answer>New York</answer>", '["NYC", "New York City"]', 0.0),
    ("<answer>[1, 2]</answer>", "[1, 2]", 1.0),  # valid JSON but not strings: the literal text
    ("<answer>1</answer>", "[1, 2]", 0.0),
    ("<answer>[]</answer>", "[]", 1.0),  # an empty array is literal text too
    ("<answer>3</answer>", "3", 1.0),
    ('<answer>["a", "b"]</answer>', '["[\\"a\\", \\"b\\"]"]', 1.0),  # text that is itself an array: wrapped
    ("<answer>a</answer>", '["a", 1]', 0.0),  # mixed array: literal text, so "a" does not match
    ("Let me think...\nParis", "Paris", 1.0),  # no tag: the last non-empty line
    ("Let me think...\nParis\n\n  \n", "Paris", 1.0),
    ("Looking at the map.\nThe final answer is: **Paris**", "Paris", 1.0),
    ("Looking at the map.\nAnswer: Paris.", "Paris", 1.0),
    ("Paris is my guess.\nLondon", "Paris", 0.0),  # the last line decides, not any line
    ("Paris\nLondon", "Paris London", 1.0),  # the whole reply still counts
    ("<answer>London</answer>\nParis", "Paris", 0.0),  # a tagged answer disables the last-line rule
    ("ＰＡＲＩＳ", "paris", 1.0),  # compatibility forms (full width)
    ("STRASSE", "Straße", 1.0),  # casefolding
    ("<answer>**Paris**</answer>", "Paris", 1.0),  # markdown emphasis at the ends
    ("<answer><answer>Paris</answer></answer>", "Paris", 0.0),  # nested tags: malformed, never a crash
    ("", "Paris", 0.0),
    ("<answer></answer>", "Paris", 0.0),
    ("Answers vary", "vary", 0.0),  # "Answers" is not an "Answer:" label
])
def test_text_match(prediction, truth, score):
    assert get_scorer("text_match")(prediction, truth) == score


# --- contains ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("prediction, truth, score", [
    ("I believe it is New York City, definitely.", '["NYC", "New York City"]', 1.0),
    ("<answer>It's nyc</answer>", '["NYC", "New York City"]', 1.0),
    ("Yorkshire", "York", 0.0),  # whole words only
    ("new-york", "york", 1.0),  # punctuation separates words
    ("<answer>London</answer> Paris", "Paris", 0.0),  # only the tagged answer is searched
    ("The flag of the U.S. is shown", "U.S.", 1.0),
    ("It costs $16 in total", "$16", 1.0),
    ("It costs $160 in total", "$16", 0.0),
    ("Die Stadt ist Zürich.", "zürich", 1.0),
    ("ＺＵＲＩＣＨ", "zurich", 1.0),
    ("anything", "", 0.0),  # an empty truth never matches
    ("anything", '["", "  "]', 0.0),
    ("", "Paris", 0.0),
    ("not Paris", "Paris", 1.0),  # containment ignores negation, as Agentic-MME's contains match does
])
def test_contains(prediction, truth, score):
    assert get_scorer("contains")(prediction, truth) == score


# --- choice -----------------------------------------------------------------------------------------------------

OPTIONS = json.dumps({"answer": "B", "options": {"A": "12 cm", "B": "40%", "C": "A cat"}})
VITAMINS = json.dumps({"answer": "A", "options": {"A": "Vitamin B", "B": "Vitamin C"}})


@pytest.mark.parametrize("prediction, truth, score", [
    ("<answer>B</answer>", "B", 1.0),
    ("<answer>b</answer>", "B", 1.0),  # a lone letter in any case
    ("<answer>(b) forty</answer>", "B", 1.0),
    ("<answer>**B**</answer>", "B", 1.0),
    ("<answer>Option B</answer>", "B", 1.0),
    ("<answer>The answer is B.</answer>", "B", 1.0),
    ("<answer>I think B</answer>", "B", 1.0),  # the pronoun "I" is not a letter
    ("<answer>I think A is right</answer>", "A", 1.0),  # "A is": a letter, not an article
    ("<answer>B. A cat</answer>", "B", 1.0),  # "A cat": an article
    ("<answer>A or B</answer>", "B", 0.0),  # two letters: wrong
    ("<answer>A, B</answer>", "A", 0.0),
    ("<answer>(A) or (B)</answer>", "A", 0.0),
    ("<answer>Answer: A and B</answer>", "A", 0.0),
    ("<answer>B (B)</answer>", "B", 1.0),  # the same letter twice is one letter
    ("<answer>Both</answer>", "B", 0.0),
    ("<answer></answer>", "B", 0.0),
    ("", "B", 0.0),
    ("<answer>Ｂ</answer>", "B", 1.0),  # full width
    ("<answer>B</answer>", " b ", 1.0),
    # options in the truth: by letter or by the option's text
    ("<answer>40%</answer>", OPTIONS, 1.0),
    ("<answer>40 %</answer>", OPTIONS, 0.0),  # normalized text, not numbers
    ("<answer>12 cm</answer>", OPTIONS, 0.0),
    ("<answer>B. 40%</answer>", OPTIONS, 1.0),
    ("<answer>A. 40%</answer>", OPTIONS, 0.0),  # letter A with B's text: A is named
    ("<answer>A cat</answer>", OPTIONS, 0.0),  # C's text, though it starts with a capital A
    ("<answer>B, since X is longer</answer>", OPTIONS, 1.0),  # X is no option
    ("<answer>B, since X is longer</answer>", "B", 0.0),  # without options, X counts as a letter
    ("<answer>A. Vitamin B</answer>", VITAMINS, 1.0),  # an option's text is masked before letters are read
    ("<answer>Vitamin B</answer>", VITAMINS, 1.0),
    ("<answer>B. Vitamin C</answer>", VITAMINS, 0.0),
    # untagged replies: the whole reply decides when it names one option, else its last line
    ("Comparing A and B, B is longer.\nAnswer: (b)", "B", 1.0),
    ("The bars differ.\nB", "B", 1.0),
    ("B is longer than the others.\nThat is my answer.", "B", 1.0),  # the whole reply names one option
    ("(A) is what I would say.\nB", "A", 0.0),  # the whole names A and B: its last line decides, once
    ("(A) is what I would say.\nB", "B", 1.0),
    ("A or B?\nA or B", "A", 0.0),
    ("Let me check.\n40%", OPTIONS, 1.0),
])
def test_choice(prediction, truth, score):
    assert get_scorer("choice")(prediction, truth) == score


@pytest.mark.parametrize("truth", ["BC", "", "1", "{", '{"answer": "D", "options": {"A": "x"}}', '{"answer": "A"}',
                                   '{"answer": "A", "options": {"AA": "x", "A": "y"}}', '{"answer": 1, "options": {}}',
                                   '["A"]'])
def test_choice_refuses_unreadable_truths(truth):
    with pytest.raises(ValueError, match="choice truth"):
        get_scorer("choice")("<answer>A</answer>", truth)


def test_option_letter_is_choice():
    assert SCORERS["option_letter"] is SCORERS["choice"]


# --- numeric ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, prediction, truth, score", [
    ("numeric", "<answer>1,234.5</answer>", "1234.5", 1.0),
    ("numeric", "<answer>1,234,567</answer>", "1234567", 1.0),
    ("numeric", "<answer>1,2,3</answer>", "1", 1.0),  # not groups of three: a list, first number 1
    ("numeric", "<answer>-3</answer>", "-3", 1.0),
    ("numeric", "<answer>\u22123</answer>", "-3", 1.0),  # the minus sign
    ("numeric", "<answer>+3</answer>", "3", 1.0),
    ("numeric", "<answer>3</answer>", "-3", 0.0),
    ("numeric", "<answer>.5</answer>", "0.5", 1.0),
    ("numeric", "<answer>3.5 cm</answer>", "3.5", 1.0),
    ("numeric", "<answer>3.5cm</answer>", "3.50", 1.0),
    ("numeric", "<answer>1e3</answer>", "1000", 1.0),
    ("numeric", "<answer>2.5E-2</answer>", "0.025", 1.0),
    ("numeric", "<answer>3/4</answer>", "0.75", 1.0),
    ("numeric", "<answer>0.75</answer>", "3/4", 1.0),
    ("numeric", "<answer>1/3</answer>", "0.333", 0.0),  # exact by default
    ("numeric(abs=0.001)", "<answer>1/3</answer>", "0.333", 1.0),
    ("numeric", "<answer>3/4/2020</answer>", "3", 1.0),  # a date is not a fraction
    ("numeric", "<answer>3/0</answer>", "3", 0.0),  # unreadable first number: wrong, no crash
    ("numeric", "<answer>0.1</answer>", "1/10", 1.0),  # exact arithmetic, no float error
    ("numeric", "<answer>0.7%</answer>", "0.007", 1.0),
    # percentages: one side only is read both ways, in the truth's units
    ("numeric", "<answer>40%</answer>", "40", 1.0),
    ("numeric", "<answer>40%</answer>", "0.4", 1.0),
    ("numeric", "<answer>0.4</answer>", "40%", 1.0),
    ("numeric", "<answer>40</answer>", "40%", 1.0),
    ("numeric", "<answer>40 %</answer>", "40%", 1.0),
    ("numeric", "<answer>0.4%</answer>", "40%", 0.0),  # both percentages: as written
    ("numeric", "<answer>4</answer>", "40%", 0.0),
    ("numeric(abs=1)", "<answer>0.9</answer>", "40%", 0.0),  # the tolerance is in percentage points here
    ("numeric(abs=1)", "<answer>0.405</answer>", "40%", 1.0),
    # tolerances
    ("numeric(abs=0.5)", "<answer>3.4 cm</answer>", "3", 1.0),
    ("numeric(abs=0.5)", "<answer>3.5</answer>", "3", 1.0),  # the bound is inclusive
    ("numeric(abs=0.5)", "<answer>3.6</answer>", "3", 0.0),
    ("numeric(rel=0.02)", "<answer>101.9</answer>", "100", 1.0),
    ("numeric(rel=0.02)", "<answer>103</answer>", "100", 0.0),
    ("numeric(rel=0.02)", "<answer>-98</answer>", "-100", 1.0),  # relative to |truth|
    ("numeric(rel=0.1)", "<answer>0.05</answer>", "0", 0.0),  # rel of a zero truth is zero
    ("numeric(abs=0.1, rel=0.1)", "<answer>0.05</answer>", "0", 1.0),  # either tolerance suffices
    ("numeric(abs=1)", "<answer>101.5</answer>", "100", 0.0),
    ("numeric(abs=1, rel=0.02)", "<answer>101.5</answer>", "100", 1.0),
    # the first number of the extracted answer, the whole reply when untagged
    ("numeric", "<answer>12 apples, not 13</answer>", "12", 1.0),
    ("numeric", "<answer>about 13 or 12</answer>", "12", 0.0),
    ("numeric", "I count 3 rows of 4, so 12", "12", 0.0),
    ("numeric", "x2 is 7", "7", 1.0),  # digits inside a word are not a number
    ("numeric", "\\boxed{\\frac{3}{4}}", "0.75", 0.0),  # LaTeX fractions are not read
    # adversarial
    ("numeric", "<answer>" + "9" * 5000 + "</answer>", "3", 0.0),  # past Python's digit limit: no number
    ("numeric", "<answer>" + "9" * 400 + "</answer>", "9" * 400, 1.0),
    ("numeric", "<answer>1e999</answer>", "1" + "0" * 999, 1.0),  # exact, no float overflow
    ("numeric", "<answer>1e1000000000</answer>", "1", 1.0),  # exponents past 3 digits are not read
    ("numeric", "<answer>NaN</answer>", "3", 0.0),
    ("numeric", "<answer>inf</answer>", "3", 0.0),
    ("numeric", "<answer>３</answer>", "3", 1.0),  # full width digits
    ("numeric", "", "3", 0.0),
])
def test_numeric(spec, prediction, truth, score):
    assert get_scorer(spec)(prediction, truth) == score


@pytest.mark.parametrize("truth", ["", "none", "NaN", "inf"])
def test_numeric_refuses_truths_without_a_number(truth):
    with pytest.raises(ValueError, match="numeric truth needs a number"):
        get_scorer("numeric")("<answer>3</answer>", truth)


# --- specs ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, problem", [
    ("bleu", "unknown scorer 'bleu'"),
    ("bleu(abs=1)", "unknown scorer 'bleu'"),
    ("numeric(tol=1)", "numeric has no parameter 'tol'; it takes numeric(abs=0.0, rel=0.0)"),
    ("numeric(abs=-1)", "abs must be a finite number >= 0, got '-1'"),
    ("numeric(abs=x)", "abs must be a finite number >= 0, got 'x'"),
    ("numeric(abs=nan)", "abs must be a finite number >= 0"),
    ("numeric(rel=inf)", "rel must be a finite number >= 0"),
    ("numeric(abs='1')", "abs must be a finite number >= 0"),
    ("numeric(abs=)", "abs must be a finite number >= 0"),
    ("numeric(abs)", "'abs' is not key=number"),
    ("numeric(=1)", "'=1' is not key=number"),
    ("numeric(abs=1,)", "'' is not key=number"),
    ("numeric(abs=1, abs=2)", "'abs' is given twice"),
    ("numeric(abs=1", "is not NAME or NAME(key=number, ...)"),
    ("numeric abs=1", "is not NAME or NAME"),
    ("", "is not NAME or NAME"),
    ("text_match(abs=1)", "text_match takes no parameters"),
    (None, "a scorer spec is a string, got NoneType"),
    (5, "a scorer spec is a string, got int"),
])
def test_bad_specs_name_the_problem_and_what_exists(spec, problem):
    with pytest.raises(ValueError) as caught:
        check_scorer(spec)
    assert problem in str(caught.value)
    assert "numeric(abs=0.0, rel=0.0)" in str(caught.value) or "text_match" in str(caught.value)


@pytest.mark.parametrize("spec", ["numeric", "numeric()", " numeric ( abs = 1 , rel=0.1 ) ", "numeric(abs=0)",
                                  "numeric(rel=2e-2)", "choice", "option_letter", "contains", "text_match"])
def test_good_specs(spec):
    assert check_scorer(spec) is None and callable(get_scorer(spec))


def test_specs_configure_the_scorer():
    assert get_scorer("numeric(rel=0.02)")("<answer>102</answer>", "100") == 1.0
    assert get_scorer("numeric(abs=2)")("<answer>102</answer>", "100") == 1.0
    assert get_scorer("numeric")("<answer>102</answer>", "100") == 0.0


def test_jsonl_suites_validate_scorer_specs(tmp_path):
    path = tmp_path / "suite.jsonl"
    row = {"id": "a", "question": "q", "images": [], "answer": "3", "scorer": "numeric(rel=0.02)"}
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "id": "b", "scorer": "numeric(tol=1)"}) + "\n")
    tasks = jsonl_suite(path)
    assert next(tasks).scorer == "numeric(rel=0.02)"
    with pytest.raises(ValueError, match=re.escape(f"{path}:2: scorer spec 'numeric(tol=1)': numeric has no "
                                                   "parameter 'tol'")):
        next(tasks)


# --- properties -------------------------------------------------------------------------------------------------

TRUTHS = {"text_match": "Paris", "choice": OPTIONS, "contains": '["NYC", "New York City"]', "numeric": "40%",
          "json_list": "[2, 0, 1]", "list_iou": "[2, 6]", "jigsaw_positions": "[1, 2, 3]"}
PIECES = st.sampled_from(["<answer>", "</answer>", "\\boxed{", "{", "}", "\n", " ", "A", "B", "(b)", "40", "%",
                          "1,000", "/", "e9", "-", "Paris", "NYC", "[", "]", ",", "\u2212", "Ｂ", "I ", "answer:"])


@given(st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=30).map("".join))
def test_any_reply_scores_in_the_unit_interval(reply):
    for name, truth in TRUTHS.items():
        assert 0.0 <= get_scorer(name)(reply, truth) <= 1.0


@given(st.one_of(st.integers(-10**30, 10**30), st.decimals(allow_nan=False, allow_infinity=False, places=4)))
def test_numbers_read_back_exactly_in_their_written_forms(value):
    numeric = get_scorer("numeric")
    assert numeric(f"<answer>{value}</answer>", str(value)) == 1.0
    assert numeric(f"<answer>{value:,} units</answer>", str(value)) == 1.0  # thousands separators
    assert numeric(f"<answer>{value}</answer>", str(value + 1)) == 0.0


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<[\\"), min_size=1,
               max_size=40))
def test_a_tagged_truth_matches_itself(truth):
    assert get_scorer("text_match")(f"<answer>{truth}</answer>", truth) == 1.0
    if normalize_text(truth):
        assert get_scorer("contains")(f"<answer>{truth}</answer>", truth) == 1.0


@given(st.sampled_from("ABCDE"), st.sampled_from("ABCDE"), st.sampled_from(["{}", "({})", "{}.", "Answer: {}",
                                                                           "**{}**", "{}) 40%", "I think {}"]))
def test_one_named_letter_decides_and_two_are_wrong(letter, other, form):
    choice = get_scorer("choice")
    assert choice(f"<answer>{form.format(letter)}</answer>", "C") == float(letter == "C")
    hedge = f"<answer>{form.format(letter)} or {form.format(other)}</answer>"
    assert choice(hedge, "C") == float(letter == other == "C")
