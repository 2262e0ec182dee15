import json
import re
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import low_light as TASK
from data_gen.text import words
from eval.scorers import get_scorer

DIFFICULTIES = ["easy", "medium", "hard"]


def _first(difficulty: str, question: str, seed: int = 0):
    return TASK.generate(seed, difficulty, question)


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
@pytest.mark.parametrize("question", ["count", "sign"])
def test_same_seed_same_bytes(difficulty, question):
    a, b = TASK.generate(7, difficulty, question), TASK.generate(7, difficulty, question)
    assert a.image.tobytes() == b.image.tobytes() and a.question == b.question and a.answer == b.answer
    assert a.meta == b.meta and a.calls == b.calls
    assert TASK.generate(8, difficulty, question).image.tobytes() != a.image.tobytes()


def test_audit_passes_on_200_of_200():
    kinds = set()
    for seed in range(200):
        sample = TASK.generate(seed, "medium")
        kinds.add(sample.meta["question"])
        assert audit(sample, TASK.check).meta["stop_reason"] == "answer"
    assert kinds == {"count", "sign"}


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
@pytest.mark.parametrize("question", ["count", "sign"])
def test_audit_passes_at_every_difficulty(difficulty, question):
    for seed in range(20):
        assert audit(TASK.generate(seed, difficulty, question), TASK.check).meta["stop_reason"] == "answer"


@pytest.mark.parametrize("difficulty,low,high", [("easy", 18, 26), ("medium", 13, 20), ("hard", 8, 13)])
def test_images_are_dark_and_harder_is_darker(difficulty, low, high):
    for seed in range(5):
        sample = TASK.generate(seed, difficulty)
        assert sample.image.dtype == np.uint8 and sample.image.ndim == 3 and sample.image.shape[2] == 3
        assert low - 1 <= sample.image.mean() <= high + 1
        json.dumps(sample.meta)  # plain data


def test_answer_formats():
    questions = set()
    for seed in range(40):
        sample = TASK.generate(seed, "hard")
        questions.add(sample.meta["question"])
        if sample.meta["question"] == "count":
            assert sample.scorer == "numeric" and re.fullmatch(r"[1-9]\d*", sample.answer)
            kind = sample.meta["kind"]
            assert sample.question == f"How many {kind}s are in the image? Answer with an integer."
            assert int(sample.answer) == sum(o["kind"] == kind for o in sample.meta["objects"])
        else:
            options = sample.meta["options"]
            assert sample.scorer == "option_letter" and sample.answer in "ABCDE" and list(options) == list("ABCDE")
            assert len(set(options.values())) == 5 and options[sample.answer] == sample.meta["sign"]["text"]
            assert all(f"{k}. {v}" in sample.question for k, v in options.items())
            word_tokens = [t for t in sample.meta["sign"]["text"].split() if not t.isdigit()]
            assert word_tokens and all(t in words() for t in word_tokens)
        assert get_scorer(sample.scorer)(f"<answer>{sample.answer}</answer>", sample.answer) == 1.0
    assert questions == set(TASK.QUESTIONS)  # every format was checked


def test_the_reference_trajectory():
    count = TASK.generate(1, "medium", "count")
    trajectory = audit(count, TASK.check)
    names = [m["tool_calls"][0]["function"]["name"] for m in trajectory.messages if m.get("tool_calls")]
    assert names == ["autocontrast", "blur", "contours"]
    sign = TASK.generate(1, "medium", "sign")
    trajectory = audit(sign, TASK.check)
    names = [m["tool_calls"][0]["function"]["name"] for m in trajectory.messages if m.get("tool_calls")]
    assert names == ["autocontrast", "crop"]


def test_audit_rejects_a_wrong_answer():
    count = _first("medium", "count")
    with pytest.raises(AuditError, match="contours show"):
        audit(replace(count, answer=str(int(count.answer) + 1)), TASK.check)
    sign = _first("medium", "sign")
    wrong = next(k for k in "ABCDE" if k != sign.answer)
    with pytest.raises(AuditError, match="is not the sign's text"):
        audit(replace(sign, answer=wrong), TASK.check)


def test_audit_rejects_a_reference_without_enhancement():
    count = _first("medium", "count")
    dark_blur = {"name": "blur", "arguments": {"image_index": 0, "method": "gaussian", "ksize": 5}}
    with pytest.raises(AuditError, match="after enhancement"):
        audit(replace(count, calls=(dark_blur, *count.calls[1:])), TASK.check)
    sign = _first("medium", "sign")
    dark_crop = {"name": "crop", "arguments": {**sign.calls[1]["arguments"], "image_index": 0}}
    with pytest.raises(AuditError, match="stands out by"):
        audit(replace(sign, calls=(sign.calls[0], dark_crop)), TASK.check)


def test_audit_rejects_a_wrong_measurement():
    count = _first("hard", "count")
    inverted = {"name": "contours", "arguments": {**count.calls[2]["arguments"], "binarize": "otsu_inv"}}
    with pytest.raises(AuditError, match="contour"):
        audit(replace(count, calls=(*count.calls[:2], inverted)), TASK.check)
    exact = {"name": "contours", "arguments": {**count.calls[2]["arguments"], "epsilon_ratio": 0.0}}
    with pytest.raises(AuditError, match="reads as"):
        audit(replace(count, calls=(*count.calls[:2], exact)), TASK.check)
    sign = _first("medium", "sign")
    x1, y1, x2, y2 = sign.meta["crop"]
    off = {"name": "crop", "arguments": {"box": [x1, y1 + 8, x2, y2 + 8], "scale": 2.0, "bounds": "clamp"}}
    with pytest.raises(AuditError):
        audit(replace(sign, calls=(sign.calls[0], off)), TASK.check)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    with pytest.raises(ValueError, match="question"):
        TASK.generate(0, "easy", "color")
    with pytest.raises(ValueError, match="seed"):
        TASK.generate("0", "easy")
