"""Answer scorers: one module for evaluation and RL rewards, so the two never drift apart.

A scorer takes the model's final text and the ground truth and returns a score in [0, 1]. The model's
answer is the text of its last `<answer>...</answer>` when there is one, else its whole text. Data
records the scorer's NAME with each item (`extra_info.scorer` in RL rows), never a copy of the logic.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Callable

from runtime.protocols.base import last_tag

Scorer = Callable[[str, str], float]


def extract_answer(text: str) -> str:
    """The last `<answer>...</answer>`, else the last `\\boxed{...}` (braces balanced), else the whole text."""
    text = text or ""
    tagged = last_tag(text, "answer")
    if tagged is not None:
        return tagged.strip()
    boxed = _last_boxed(text)
    return (boxed if boxed is not None else text).strip()


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, begin = 0, start + len("\\boxed{")
    for k in range(begin, len(text)):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        if depth < 0:
            return text[begin:k]
    return None


def normalize_text(text: str) -> str:
    """Case, accents of compatibility forms, punctuation at the ends and runs of whitespace ignored."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(text.split()).strip(" .,;:!?\"'")


def text_match(prediction: str, truth: str) -> float:
    return float(normalize_text(extract_answer(prediction)) == normalize_text(truth))


def option_letter(prediction: str, truth: str) -> float:
    """Multiple choice: the first standalone option letter A-Z of the answer ("B", "(B)", "B. 40%")."""
    match = re.search(r"(?<![A-Za-z])([A-Z])(?![A-Za-z])", extract_answer(prediction))
    return float(bool(match) and match.group(1) == truth.strip().upper())


def json_list(prediction: str, truth: str) -> float:
    """A list answer (e.g. a jigsaw permutation), compared element by element after JSON parsing."""
    try:
        predicted = json.loads(extract_answer(prediction))
    except (ValueError, RecursionError):
        return 0.0
    return float(isinstance(predicted, list) and predicted == json.loads(truth))


def jigsaw_positions(prediction: str, truth: str) -> float:
    """TIR-Bench's jigsaw score: the share of positions where the predicted permutation has the right
    piece. Accepts a JSON list or TIR-Bench's "1, 16, 15, 2" form."""
    expected = json.loads(truth)
    predicted = [int(x) for x in re.findall(r"-?\d+", extract_answer(prediction))]
    return sum(p == t for p, t in zip(predicted, expected)) / len(expected) if expected else 0.0


def list_iou(prediction: str, truth: str) -> float:
    """A set answer (e.g. the patches that differ): intersection over union of the predicted and true
    lists, as TIR-Bench scores spot the difference. The last `[...]` of the answer is the prediction, so
    `{"different_patches": [2, 6]}` in a code fence counts."""
    lists = re.findall(r"\[[^\[\]]*\]", extract_answer(prediction))
    try:
        predicted = json.loads(lists[-1]) if lists else None
    except ValueError:
        return 0.0
    if not isinstance(predicted, list) or not all(type(x) in (int, str) for x in predicted):
        return 0.0
    predicted, expected = set(predicted), set(json.loads(truth))
    union = predicted | expected
    return len(predicted & expected) / len(union) if union else 1.0


def numeric(prediction: str, truth: str, tolerance: float = 0.0) -> float:
    """The first number in the answer within `tolerance` (absolute) of the truth."""
    match = re.search(r"-?\d+(?:\.\d+)?", extract_answer(prediction).replace(",", ""))
    return float(bool(match) and abs(float(match.group(0)) - float(truth)) <= tolerance)


SCORERS: dict[str, Scorer] = {"text_match": text_match, "option_letter": option_letter, "json_list": json_list,
                              "list_iou": list_iou, "jigsaw_positions": jigsaw_positions,
                              "numeric": numeric}


def get_scorer(name: str) -> Scorer:
    try:
        return SCORERS[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; available: {', '.join(SCORERS)}") from None


def deepeyes_reward(prediction: str, truth: str, scorer: str, used_tool: bool) -> float:
    """DeepEyes' RL reward: 0.8 accuracy + 0.2 format (a well-formed <answer>) + 1.2 tool use, the tool
    term counting only when the answer is correct (so calling tools never pays by itself)."""
    accuracy = get_scorer(scorer)(prediction, truth)
    well_formed = float(last_tag(prediction or "", "answer") is not None and "</answer>" in (prediction or ""))
    return 0.8 * accuracy + 0.2 * well_formed + 1.2 * float(used_tool and accuracy > 0)
