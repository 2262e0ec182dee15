"""TIR-Bench scoring: the benchmark's official `calculate_score.py`, reproduced, beside our strict scoring.

`score_item(item)` returns exactly what the official script writes as `item["true_false"]` for one item of
its result format (`task` or else `category`, `prompt`, `model_response`, `extracted_answer`, `answer`,
`question_id`, `image_1`, `meta_data` or `metadata`), quirks included: the value, and its type where that
shows (int 0/1 from exact comparisons, float from IoU, jigsaw and math-verify). This is our own code; the
reference vectors in tests/eval/benchmarks/data/ prove it against the benchmark's own. SCORING.md lists the
rules with an example per quirk.

- An item the official script would crash on raises `UnscorableItem`, naming the field. One exception: an
  OCR item without `extracted_answer` (the official extraction step skips OCR, and the official scorer then
  fails on the missing key) is scored as if it were None, since OCR is scored on the raw response.
- Any thread gives the main thread's result: math-verify's timeouts need the main thread, so from other
  threads its check runs in a helper process (see `_math_verify_agrees`).

`strict_score(item)` scores the same item with `eval.scorers`, without the quirks.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import Levenshtein
from math_verify import parse, verify

from eval.scorers import choice, contains, jigsaw_positions, list_iou, numeric, text_match

TASKS = ("ocr", "maze", "color", "math", "word_search", "jigsaw", "rotation_game", "refcoco", "spot_difference",
         "visual_search", "symbolic", "contrast", "instrument")

# The official letter list: "H" twice and no "K", which matters in the option-text loop below.
_CHOICE_LETTERS = ("A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "H")
_OPTION_SEPARATORS = (". ", ".", " ", "")
# OCR items whose answer the official script replaces; the test is a substring test, so "160.jpg" matches too.
_OCR_ANSWER_OVERRIDES = (("60.jpg", "mobi"), ("62.jpg", "aires"))
_LETTER, _INT, _FLOAT, _OTHER = 1, 2, 3, 4


class UnscorableItem(ValueError):
    """An item the official scorer would crash on; the message names the field and what is wrong."""


def score_item(item: dict) -> int | float:
    """The official `true_false` of one item (see the module docstring)."""
    task = _task(item)
    extracted = _extracted_text(item, task).replace("*", "").strip()
    answer = str(_field(item, "answer"))
    if task == "ocr":
        return _official_ocr(item, answer)
    if task == "word_search":
        return _official_word_search(extracted, answer)
    if task == "spot_difference":
        return _official_spot_difference(extracted, answer)
    if task == "jigsaw":
        return _official_jigsaw(item, extracted, answer)
    kind = _answer_kind(answer)
    if kind == _LETTER:
        return _official_choice(item, extracted, answer)
    if kind in (_INT, _FLOAT):
        return _official_number(extracted, answer, int if kind == _INT else float)
    _field(item, "question_id")  # the official script prints the id of such an item and scores it 0
    return 0


def _field(item: dict, name: str):
    if name not in item:
        raise UnscorableItem(f"TIR-Bench item has no {name!r} field{_which(item)}")
    return item[name]


def _which(item: dict) -> str:
    return f" (question_id {item['question_id']!r})" if "question_id" in item else ""


def _task(item: dict):
    if not isinstance(item, dict):
        raise UnscorableItem(f"a TIR-Bench item is a dict, got {type(item).__name__}")
    task = item["task"] if "task" in item else _field(item, "category")
    try:
        hash(task)  # the official script keys its per-task tally by it
    except TypeError:
        raise UnscorableItem(f"TIR-Bench item's task is a {type(task).__name__}, not a name{_which(item)}") from None
    return task


def _extracted_text(item: dict, task) -> str:
    """The extracted answer as text; None and other empty values are ''."""
    if "extracted_answer" not in item and task != "ocr":
        raise UnscorableItem(f"TIR-Bench item has no 'extracted_answer' field (run the extraction step first)"
                             f"{_which(item)}")
    value = item.get("extracted_answer")
    if not value:
        return ""
    if not isinstance(value, str):
        raise UnscorableItem(f"TIR-Bench item's 'extracted_answer' is a {type(value).__name__}, not text"
                             f"{_which(item)}")
    return value


def _contains(container, part: str, field: str, item: dict) -> bool:
    """`part in container` as the official script tests it (a list field is tested for membership)."""
    try:
        return part in container
    except TypeError:
        raise UnscorableItem(f"TIR-Bench item's {field!r} is a {type(container).__name__}, not text"
                             f"{_which(item)}") from None


def _ocr_response(item: dict):
    response = _field(item, "model_response")
    if type(response) is list:
        if not response:
            raise UnscorableItem(f"TIR-Bench item's 'model_response' is an empty list{_which(item)}")
        response = response[0]
    return response


def _official_ocr(item: dict, answer: str) -> int:
    """A case-sensitive substring test of the raw response, after the per-image answer overrides."""
    response = _ocr_response(item)
    image = _field(item, "image_1")
    for image_name, replacement in _OCR_ANSWER_OVERRIDES:
        if _contains(image, image_name, "image_1", item):
            answer = replacement
    return int(_contains(response, answer, "model_response", item))


def _official_word_search(extracted: str, answer: str) -> int | float:
    """An integer answer, or the first "a, b" pair of the answer against the response's first pair."""
    if _answer_kind(answer) == _INT:
        return _official_number(extracted, answer, int)
    truth, predicted = _first_pair(answer), _first_pair(extracted)
    return int(truth is not None and truth == predicted)


def _first_pair(text: str) -> tuple[int, int] | None:
    match = re.search(r"\b(\d+)\s*,\s*(\d+)\b", text)
    try:
        return (int(match[1]), int(match[2])) if match else None
    except ValueError:  # more digits than int() reads
        return None


def _official_spot_difference(extracted: str, answer: str) -> int | float:
    """An integer answer, or the IoU of every integer of the response with every integer of the answer."""
    if _answer_kind(answer) == _INT:
        return _official_number(extracted, answer, int)
    try:
        truth = {int(digits) for digits in re.findall(r"\d+", answer)}
        predicted = {int(digits) for digits in re.findall(r"\d+", extracted)}
    except ValueError:  # more digits than int() reads
        return 0
    union = truth | predicted
    return len(truth & predicted) / len(union) if union else 1.0


def _official_jigsaw(item: dict, extracted: str, answer: str) -> int | float:
    """The share of positions right, both orders read as the first run of exactly n^2 integers."""
    try:
        meta = item["metadata"] if "metadata" in item else item["meta_data"]
        pieces = meta["difficulty"] * meta["difficulty"]
        predicted, truth = _run_of_integers(extracted, pieces), _run_of_integers(answer, pieces)
        return sum(t == p for t, p in zip(truth, predicted)) / len(truth)
    except Exception:  # the official script scores any failure here (no meta, a text difficulty, no run) as 0
        return 0


def _run_of_integers(text: str, count) -> list[int]:
    """The first stretch of digits, whitespace and commas holding exactly `count` integers."""
    for stretch in re.findall(r"[\d\s,，]+", text):
        numbers = re.findall(r"\d+", stretch)
        if len(numbers) == count:
            return [int(n) for n in numbers]
    raise ValueError(f"no run of {count} integers")


def _answer_kind(answer: str) -> int:
    """The official classification: letters (Unicode-aware isalpha), else what int(), else float() accepts."""
    if answer.isalpha():
        return _LETTER
    for kind, convert in ((_INT, int), (_FLOAT, float)):
        try:
            convert(answer)
            return kind
        except ValueError:
            pass
    return _OTHER


def _official_choice(item: dict, extracted: str, answer: str) -> int:
    """One letter: the extraction, else the letter whose option text it is, nearest letter by edit distance.
    Several letters: the same characters in any order."""
    if len(answer) != 1:
        return int(sorted(answer) == sorted(extracted))
    if answer not in _CHOICE_LETTERS:
        return 0
    picked = extracted.replace("Extracted answer:", "").strip()
    if picked not in _CHOICE_LETTERS:
        prompt = _field(item, "prompt")
        for letter in _CHOICE_LETTERS:
            # once a letter matched, later letters are tested against that letter, not the original text
            if any(_contains(prompt, letter + separator + picked, "prompt", item)
                   for separator in _OPTION_SEPARATORS):
                picked = letter
        picked = min(_CHOICE_LETTERS, key=lambda letter: Levenshtein.distance(picked, letter))
    return int(picked == answer)


def _official_number(extracted: str, answer: str, convert: type) -> int | float:
    """Letters, '*', ':' and whitespace removed, compared exactly (1); else math-verify on the extraction (1.0)."""
    digits = re.sub(r"[A-Za-z*:\s]+", "", extracted.replace("Extracted answer:", "").strip()).strip()
    truth: object = answer
    try:
        predicted = convert(digits)
    except ValueError:
        pass
    else:
        truth = convert(answer)  # the official script keeps this converted truth for math-verify below
        if predicted == truth:
            return 1
    return 1.0 if _math_verify_agrees(extracted, str(truth)) else 0


def _math_verify_agrees(prediction: str, truth: str) -> bool:
    """`verify(parse(prediction), parse(truth))`, the official argument order, as the official script runs it:
    in a main thread. math-verify's timeouts use SIGALRM, which only a main thread may set; from any other
    thread math-verify raises (and the official script would score 0), so there the check runs in the main
    thread of a helper process, timeouts and all."""
    if threading.current_thread() is threading.main_thread():
        return _math_verify_here(prediction, truth)
    return _math_verify_in_helper(prediction, truth)


def _math_verify_here(prediction: str, truth: str) -> bool:
    try:
        return float(verify(parse(prediction), parse(truth))) > 0
    except Exception:
        return False


_helper_lock = threading.Lock()
_helper: subprocess.Popen | None = None
# The helper's program runs this file alone: not the caller's __main__, nor this package's heavy __init__.
_SCORING_FILE = Path(__file__).resolve()
_HELPER_MAIN = (f"import runpy, sys; sys.path.insert(0, {str(_SCORING_FILE.parents[__name__.count('.')])!r}); "
                f"runpy.run_path({str(_SCORING_FILE)!r})['_serve_math_verify']()")


def _math_verify_in_helper(prediction: str, truth: str) -> bool:
    global _helper
    with _helper_lock:
        if _helper is None or _helper.poll() is not None:
            _helper = subprocess.Popen([sys.executable, "-c", _HELPER_MAIN], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)
        _helper.stdin.write(json.dumps([prediction, truth]) + "\n")
        _helper.stdin.flush()
        reply = _helper.stdout.readline()
    if not reply:
        raise RuntimeError("the math-verify helper process of TIR-Bench scoring ended unexpectedly")
    return json.loads(reply)


def _serve_math_verify() -> None:
    """The helper process: one JSON [prediction, truth] per stdin line, one JSON bool per stdout line."""
    replies, sys.stdout = sys.stdout, sys.stderr  # nothing else may write to the reply stream
    for line in sys.stdin:
        replies.write(json.dumps(_math_verify_here(*json.loads(line))) + "\n")
        replies.flush()


# --- strict scoring ---------------------------------------------------------------------------------------------

_NUMBERS = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?(?:/\d+)?")  # 1,000 | 2.5 | 1e3 | 3/4
_MAX_DIGITS = 100  # longer runs of digits are not numbers to strict scoring (int() refuses 4300+ anyway)
_OPTION_LINE = re.compile(r"^[ \t]*\(?([A-J])(?:[.):：]|(?=\s))[ \t]*(\S.*?)[ \t]*$", re.M)  # "A. cat", "(B) 40%"
_INLINE_OPTION = re.compile(r"\(([A-J])\)\s*(.*?)\s*(?=\([A-J]\)|$)", re.M)  # "(A) 9% (B) 13%" on one line


def strict_score(item: dict) -> float:
    """Our scoring of the item, in [0, 1], with eval.scorers: the extracted answer (OCR: the raw response)
    against the answer, with no per-image overrides, no nearest-letter guess, no math-verify, and a hedge
    ("5 or 6", a jigsaw order of the wrong length) wrong. Same fields and errors as `score_item`; an unknown
    task or an empty answer is an UnscorableItem too."""
    task = _task(item)
    if task not in TASKS:
        raise UnscorableItem(f"unknown TIR-Bench task {task!r}; the tasks are {', '.join(TASKS)}")
    extracted = _extracted_text(item, task)
    answer = str(_field(item, "answer")).strip()
    if not answer:
        raise UnscorableItem(f"TIR-Bench item's 'answer' is empty{_which(item)}")
    if task == "ocr":
        response = _ocr_response(item)
        if not isinstance(response, str):
            raise UnscorableItem(f"TIR-Bench item's 'model_response' is a {type(response).__name__}, not text"
                                 f"{_which(item)}")
        return contains(response, answer)  # whole words, case and width ignored
    if task == "jigsaw":
        predicted, truth = _integers(extracted), _integers(answer)
        return jigsaw_positions(json.dumps(predicted), json.dumps(truth)) if len(predicted) == len(truth) else 0.0
    if task == "spot_difference" and not _is_number(answer):
        bracketed = f"[{extracted}]" if extracted.strip() and "[" not in extracted else extracted
        return list_iou(bracketed, json.dumps(_integers(answer)))
    if task == "word_search" and not _is_number(answer):
        return float(bool(_integers(answer)) and _integers(extracted) == _integers(answer))
    if re.fullmatch(r"[A-Z]", answer):
        return choice(extracted, _choice_truth(answer, item.get("prompt")))
    if re.fullmatch(r"[A-Z]{2,}", answer) and len(set(answer)) == len(answer):
        return float(_letter_set(extracted) == set(answer))
    if _is_number(answer):
        return numeric(extracted, answer) if len(_NUMBERS.findall(extracted)) == 1 else 0.0
    return text_match(extracted, answer)


def _integers(text: str) -> list[int]:
    """The non-negative integers of the text (positions, patches)."""
    return [int(n) for n in re.findall(r"\d+", text) if len(n) <= _MAX_DIGITS]


def _is_number(text: str) -> bool:
    return len(text) <= _MAX_DIGITS and re.fullmatch(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)", text) is not None


def _letter_set(text: str) -> set[str] | None:
    """The letters of a multi-letter answer ("CD", "C, D"); None for anything else."""
    text = text.replace("*", "").strip().rstrip(".")
    return set(re.findall(r"[A-Z]", text)) if re.fullmatch(r"[A-Z](?:\s*[,;、&]?\s*[A-Z])*", text) else None


def listed_options(prompt: str) -> dict[str, str]:
    """The options a prompt lists ("A. cat" lines, or inline "(A) 9% (B) 13%"), letters from A in order; {} when it
    lists none."""
    for pattern in (_OPTION_LINE, _INLINE_OPTION):
        options = dict(pattern.findall(prompt))
        if len(options) >= 2 and "ABCDEFGHIJ".startswith("".join(options)):
            return options
    return {}


def _choice_truth(answer: str, prompt) -> str:
    """The answer with the options the prompt lists ("A. cat" lines or inline "(A) 9% (B) 13%"), so an
    extraction that is an option's text counts; the bare letter when the prompt lists none."""
    for pattern in (_OPTION_LINE, _INLINE_OPTION):
        options = dict(pattern.findall(prompt)) if isinstance(prompt, str) else {}
        letters = "".join(options)
        if len(letters) >= 2 and "ABCDEFGHIJ".startswith(letters) and answer in options:
            return json.dumps({"answer": answer, "options": options})
    return answer
