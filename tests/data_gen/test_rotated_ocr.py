from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import get_task
from data_gen.text import words

TASK = get_task("rotated_ocr")


@pytest.mark.parametrize("angles", ["quarter", "any"])
def test_same_seed_same_bytes(angles):
    a, b = TASK.generate(7, "hard", angles), TASK.generate(7, "hard", angles)
    assert a.image.tobytes() == b.image.tobytes() and a.answer == b.answer and a.meta == b.meta
    assert TASK.generate(8, "hard", angles).image.tobytes() != a.image.tobytes()


@pytest.mark.parametrize("angles", ["quarter", "any"])
def test_audit_passes_on_200_of_200(angles):
    for seed in range(200):
        trajectory = audit(TASK.generate(seed, "medium", angles), TASK.check)
        assert trajectory.meta["stop_reason"] == "answer"


def test_quarter_turns_follow_tir_bench_probabilities():
    counts = Counter(TASK.generate(seed, "easy").meta["angle"] for seed in range(800))
    assert set(counts) == {90, 180, 270}
    assert abs(counts[180] / 800 - 0.5) < 0.06 and abs(counts[90] / 800 - 0.25) < 0.05


def test_text_uses_the_corpus_and_several_fonts():
    samples = [TASK.generate(seed, "medium") for seed in range(60)]
    vocabulary = set(words())
    assert all(w in vocabulary for s in samples for w in s.answer.split())
    assert len({s.meta["font"] for s in samples}) >= 6
    assert len({s.answer for s in samples}) == 60


def test_audit_rejects_a_wrong_reference():
    sample = TASK.generate(3, "medium")
    wrong = replace(sample, calls=({"name": "rotate", "arguments": {"degree": (sample.calls[0]["arguments"]["degree"] + 90) % 360}},))
    with pytest.raises(AuditError, match="not the upright"):
        audit(wrong, TASK.check)
    tilted = next(s for s in (TASK.generate(k, "medium", "any") for k in range(50)) if s.meta["angle"] % 90)
    off = replace(tilted, calls=({"name": "rotate", "arguments": {"degree": tilted.calls[0]["arguments"]["degree"] + 4}},))
    with pytest.raises(AuditError, match="agrees with the upright render"):
        audit(off, TASK.check)


def test_the_reference_trajectory_is_the_canonical_format():
    trajectory = audit(TASK.generate(1, "medium"), TASK.check)
    roles = [m["role"] for m in trajectory.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert trajectory.messages[1]["tool_calls"][0]["function"]["name"] == "rotate"
    assert len(trajectory.images) == 2 and trajectory.images[1].dtype == np.uint8


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    with pytest.raises(ValueError, match="angles"):
        TASK.generate(0, "easy", "diagonal")
