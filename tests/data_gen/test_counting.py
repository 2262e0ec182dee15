from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import counting as TASK
from eval.scorers import get_scorer
from tools.executor import Executor, ToolCall

EXECUTOR = Executor(device="opencv")


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_same_seed_same_bytes(difficulty):
    a, b = TASK.generate(7, difficulty), TASK.generate(7, difficulty)
    assert a.image.tobytes() == b.image.tobytes() and a.answer == b.answer
    assert a.meta == b.meta and a.calls == b.calls
    assert TASK.generate(8, difficulty).image.tobytes() != a.image.tobytes()
    coins, cells = TASK.generate(7, difficulty, "coins"), TASK.generate(7, difficulty, "cells")
    assert coins.meta["kind"] == "coins" and cells.meta["kind"] == "cells"


def test_audit_passes_on_200_of_200_medium():
    for seed in range(200):
        trajectory = audit(TASK.generate(seed, "medium"), TASK.check)
        assert trajectory.meta["stop_reason"] == "answer"


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_audit_passes_on_easy_and_hard(difficulty):
    for seed in range(30):
        audit(TASK.generate(seed, difficulty), TASK.check)


@pytest.mark.parametrize("difficulty,low,high", [("easy", 3, 10), ("medium", 8, 20), ("hard", 15, 40)])
def test_answers_and_questions_have_the_documented_format(difficulty, low, high):
    samples = [TASK.generate(seed, difficulty) for seed in range(20)]
    for s in samples:
        assert s.answer.isdigit() and low <= int(s.answer) <= high and int(s.answer) == s.meta["count"]
        assert s.scorer == "numeric" and get_scorer(s.scorer)(f"<answer>{s.answer}</answer>", s.answer) == 1.0
        assert s.question == f"How many {s.meta['objects']} are in the image? Answer with an integer."
        assert s.image.dtype == np.uint8 and s.image.ndim == 3 and s.image.shape[2] == 3
        assert [c["name"] for c in s.calls] == (["in_range", "watershed"] if difficulty == "hard" else ["watershed"])
        assert (s.meta["distractors"] > 0) == (difficulty == "hard")
    assert {s.meta["kind"] for s in samples} == {"coins", "cells"}
    assert len({s.answer for s in samples}) >= 4


def _plain_components(sample) -> int:
    """Connected components (Otsu) of what the watershed looked at: the image, or the in_range mask."""
    image, binarize = sample.image, "otsu" if sample.meta["kind"] == "coins" else "otsu_inv"
    if sample.calls[0]["name"] == "in_range":
        args = {k: v for k, v in sample.calls[0]["arguments"].items() if k != "image_index"}
        (mask,) = EXECUTOR.run([ToolCall("in_range", image, args)])
        image, binarize = mask.image, "otsu"
    (result,) = EXECUTOR.run([ToolCall("connected_components", image, {"binarize": binarize, "min_area": 50})])
    return result.data["matching_components"]


def test_a_plain_connected_components_count_is_wrong_on_hard_samples():
    for seed in range(20):
        sample = TASK.generate(seed, "hard")
        assert _plain_components(sample) < sample.meta["count"], sample.id
    easy = [TASK.generate(seed, "easy") for seed in range(10)]
    assert all(_plain_components(s) == s.meta["count"] for s in easy)  # separated: no separation needed


def test_audit_rejects_a_wrong_reference():
    sample = TASK.generate(3, "hard")
    calls = list(sample.calls)
    calls[-1] = {"name": "watershed", "arguments": {**calls[-1]["arguments"], "fg_ratio": 0.2}}  # seeds merge
    with pytest.raises(AuditError, match="counted"):
        audit(replace(sample, calls=tuple(calls)), TASK.check)
    with pytest.raises(AuditError):  # the watershed on the raw picture also counts the distractors
        raw = {"name": "watershed", "arguments": {**calls[-1]["arguments"], "image_index": 0}}
        audit(replace(sample, calls=(raw,)), TASK.check)
    with pytest.raises(AuditError, match="in_range mask"):  # a colour range that lets the distractors through
        wide = {**sample.calls[0]["arguments"], "lower": [0, 0, 90], "upper": [179, 255, 255]}
        audit(replace(sample, calls=({"name": "in_range", "arguments": wide}, sample.calls[1])), TASK.check)
    with pytest.raises(AuditError, match="must end with a watershed"):
        audit(replace(sample, calls=sample.calls[:1]), TASK.check)


def test_a_right_count_by_luck_fails():
    sample = TASK.generate(5, "medium")
    trajectory = audit(sample, TASK.check)
    assert trajectory is not None
    args = {k: v for k, v in sample.calls[-1]["arguments"].items() if k != "image_index"}
    (result,) = EXECUTOR.run([ToolCall("watershed", sample.image, args)])
    TASK.check(sample, [sample.image, result.image], [result.data])
    moved = {**result.data, "regions": [{**r, "centroid": [r["centroid"][0] + 15, r["centroid"][1]]}
                                        for r in result.data["regions"]]}
    with pytest.raises(AuditError, match="no watershed region at their centre"):
        TASK.check(sample, [sample.image, result.image], [moved])
    with pytest.raises(AuditError, match="listed"):
        TASK.check(sample, [sample.image, result.image], [{**result.data, "regions": result.data["regions"][:-1]}])


def test_audit_rejects_a_wrong_answer():
    sample = TASK.generate(2, "medium")
    with pytest.raises(AuditError, match="answer"):
        audit(replace(sample, answer=str(int(sample.answer) + 1)), TASK.check)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    with pytest.raises(ValueError, match="kind"):
        TASK.generate(0, "easy", "marbles")
    with pytest.raises(ValueError, match="seed"):
        TASK.generate("0", "easy")
