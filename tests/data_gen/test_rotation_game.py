import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import rotation_game as TASK
from data_gen.text import words
from tools.executor import Executor, ToolCall


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_same_seed_same_bytes(difficulty):
    a, b = TASK.generate(7, difficulty), TASK.generate(7, difficulty)
    assert a.image.tobytes() == b.image.tobytes() and a.answer == b.answer and a.meta == b.meta
    assert a.question == b.question and a.calls == b.calls
    assert a.evidence["upright"].tobytes() == b.evidence["upright"].tobytes()
    assert TASK.generate(8, difficulty).image.tobytes() != a.image.tobytes()


@pytest.mark.parametrize("difficulty,count", [("easy", 100), ("medium", 200), ("hard", 100)])
def test_audit_passes_on_every_sample(difficulty, count):
    for seed in range(count):
        trajectory = audit(TASK.generate(seed, difficulty), TASK.check)
        assert trajectory.meta["stop_reason"] == "answer"


@pytest.mark.parametrize("difficulty,step", [("easy", 15), ("medium", 10), ("hard", 5)])
def test_options_answer_and_question_format(difficulty, step):
    letters = Counter()
    for seed in range(80):
        sample = TASK.generate(seed, difficulty)
        options = sample.meta["options"]
        assert len(options) == 4 and len(set(options)) == 4 and options == sorted(options)
        assert all(d % step == 0 and 0 < d < 360 for d in options)
        assert re.fullmatch(r"[ABCD]", sample.answer)
        assert options["ABCD".index(sample.answer)] == sample.meta["angle"]
        listed = re.findall(r"^([ABCD])\. (\d+)$", sample.question, re.M)
        assert listed == [(letter, str(d)) for letter, d in zip("ABCD", options)]
        assert "clockwise" in sample.question
        assert [c["arguments"]["degree"] for c in sample.calls] == options  # each option once, in order
        assert {c["name"] for c in sample.calls} == {"rotate"} and sample.toolset == "tir_rotate"
        assert sample.image.dtype == np.uint8 and sample.image.ndim == 3 and sample.image.shape[2] == 3
        assert 256 <= max(sample.evidence["upright"].shape[:2]) <= 384
        assert sample.meta["word"] in words(4, 8)
        letters[sample.answer] += 1
    assert set(letters) == set("ABCD") and min(letters.values()) >= 8


def test_the_task_image_is_the_upright_turned_counterclockwise():
    sample = TASK.generate(5, "hard")
    (expected,) = Executor(device="opencv").run([ToolCall("rotate", sample.evidence["upright"], {
        "angle": sample.meta["angle"], "direction": "counterclockwise", "expand": True})])
    assert np.array_equal(expected.image, sample.image)


def test_the_reference_trajectory_tries_every_option():
    sample = TASK.generate(1, "medium")
    trajectory = audit(sample, TASK.check)
    roles = [m["role"] for m in trajectory.messages]
    assert roles == ["user"] + ["assistant", "tool"] * 4 + ["assistant"]
    assert len(trajectory.images) == 5 and all(i.dtype == np.uint8 for i in trajectory.images)


def _wrong_letter(sample):
    return "ABCD"[("ABCD".index(sample.answer) + 1) % 4]


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_audit_rejects_a_wrong_answer(difficulty):
    for seed in range(5):
        sample = TASK.generate(seed, difficulty)
        with pytest.raises(AuditError, match="does not restore"):
            audit(replace(sample, answer=_wrong_letter(sample)), TASK.check)
    with pytest.raises(AuditError, match="option letter"):
        audit(replace(sample, answer="E"), TASK.check)


def test_audit_rejects_a_wrong_reference():
    sample = TASK.generate(3, "medium")
    missing = replace(sample, calls=sample.calls[:3])
    with pytest.raises(AuditError, match="each option once"):
        audit(missing, TASK.check)
    index = "ABCD".index(sample.answer)
    off = list(sample.calls)
    off[index] = {"name": "rotate", "arguments": {"degree": sample.meta["angle"] + 5}}
    with pytest.raises(AuditError, match="each option once"):
        audit(replace(sample, calls=tuple(off)), TASK.check)
    counter = tuple({"name": "rotate", "arguments": {"degree": -c["arguments"]["degree"]}} for c in sample.calls)
    with pytest.raises(AuditError, match="each option once"):
        audit(replace(sample, calls=counter), TASK.check)


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_audit_rejects_an_image_turned_by_another_angle(difficulty):
    """The check reads the pixels: an image turned one step further than the answer says fails it."""
    sample = TASK.generate(11, difficulty)
    (wrong,) = Executor(device="opencv").run([ToolCall("rotate", sample.evidence["upright"], {
        "angle": sample.meta["angle"] + sample.meta["step"], "direction": "counterclockwise", "expand": True})])
    with pytest.raises(AuditError, match="does not restore|not clearly better"):
        audit(replace(sample, image=wrong.image), TASK.check)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    with pytest.raises(ValueError, match="size"):
        TASK.generate(0, "easy", size=20)
    with pytest.raises(ValueError, match="size"):
        TASK.generate(0, "easy", size=300.5)
