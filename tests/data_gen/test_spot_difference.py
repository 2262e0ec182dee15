import json
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import spot_difference as TASK
from eval.scorers import get_scorer


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_same_seed_same_bytes(difficulty):
    a, b = TASK.generate(7, difficulty), TASK.generate(7, difficulty)
    assert a.image.tobytes() == b.image.tobytes() and a.answer == b.answer and a.meta == b.meta
    assert a.question == b.question and a.calls == b.calls
    assert TASK.generate(8, difficulty).image.tobytes() != a.image.tobytes()


@pytest.mark.parametrize("difficulty, count", [("easy", 50), ("medium", 200), ("hard", 50)])
def test_audit_passes_on_every_sample(difficulty, count):
    for seed in range(count):  # 200 of 200 at medium, 50 of 50 at the other levels to keep the file fast
        trajectory = audit(TASK.generate(seed, difficulty), TASK.check)
        assert trajectory.meta["stop_reason"] == "answer"


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_grid_and_changes_follow_the_difficulty(difficulty):
    samples = [TASK.generate(seed, difficulty) for seed in range(40)]
    low, high = TASK.GRID[difficulty]
    for s in samples:
        rows, cols, (w, h) = s.meta["rows"], s.meta["cols"], s.meta["half"]
        assert low <= rows <= high and low <= cols <= high
        assert w % cols == 0 and h % rows == 0 and s.image.shape == (h, 2 * w + s.meta["gap"], 3)
        assert s.image.dtype == np.uint8
        assert 1 <= len(s.meta["changes"]) <= TASK.CHANGES[difficulty][1]
        assert {c["type"] for c in s.meta["changes"]} <= set(TASK.KINDS_OF_CHANGE[difficulty])
        assert f"n is {rows} and m is {cols}" in s.question and "different_patches" in s.question
        json.dumps(s.meta)  # plain data
    assert sum(len(s.meta["changes"]) >= TASK.CHANGES[difficulty][0] for s in samples) >= 36
    kinds = {c["type"] for s in samples for c in s.meta["changes"]}
    assert kinds == set(TASK.KINDS_OF_CHANGE[difficulty])  # every kind of change occurs
    assert any(len(c["cells"]) > 1 for s in samples for c in s.meta["changes"])  # objects spanning patches


def test_answer_format_and_scoring():
    partial_scores = 0
    for seed in range(30):
        s = TASK.generate(seed, "medium")
        answer = json.loads(s.answer)
        assert s.answer == json.dumps(answer) and answer == sorted(set(answer)) and answer
        assert all(isinstance(k, int) and 1 <= k <= s.meta["rows"] * s.meta["cols"] for k in answer)
        assert answer == sorted({k for c in s.meta["changes"] for k in c["cells"]})
        assert s.scorer == "list_iou" and s.toolset == "default"
        score = get_scorer(s.scorer)
        assert score(f'```json\n{{"different_patches": {s.answer}}}\n```', s.answer) == 1.0
        if len(answer) > 1:
            assert 0 < score(json.dumps(answer[1:]), s.answer) < 1
            partial_scores += 1
    assert partial_scores  # some answers had several patches, so a partial answer was scored


def test_the_reference_is_crop_crop_difference():
    s = TASK.generate(3, "hard")
    w, h, gap = *s.meta["half"], s.meta["gap"]
    assert [c["name"] for c in s.calls] == ["crop", "crop", "difference"]
    assert s.calls[0]["arguments"]["box"] == [0, 0, w, h]
    assert s.calls[1]["arguments"]["box"] == [w + gap, 0, 2 * w + gap, h]
    assert s.calls[2]["arguments"]["grid"] == [s.meta["rows"], s.meta["cols"]]
    trajectory = audit(s, TASK.check)
    assert [m["role"] for m in trajectory.messages] == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]


def test_audit_rejects_a_wrong_reference():
    s = TASK.generate(5, "medium")
    shifted = [dict(c, arguments=dict(c["arguments"])) for c in s.calls]
    x1, y1, x2, y2 = shifted[1]["arguments"]["box"]
    shifted[1]["arguments"]["box"] = [x1 - 1, y1, x2 - 1, y2]
    with pytest.raises(AuditError, match="right crop"):
        audit(replace(s, calls=tuple(shifted)), TASK.check)
    regrid = [dict(c, arguments=dict(c["arguments"])) for c in s.calls]
    rows, cols = s.meta["rows"], s.meta["cols"]
    regrid[2]["arguments"]["grid"] = [rows, cols + 1]
    with pytest.raises(AuditError, match="report's cells"):
        audit(replace(s, calls=tuple(regrid)), TASK.check)
    same = [dict(c, arguments=dict(c["arguments"])) for c in s.calls]
    same[2]["arguments"]["other_index"] = 1  # the left half against itself: nothing differs
    with pytest.raises(AuditError, match="difference image"):
        audit(replace(s, calls=tuple(same)), TASK.check)
    with pytest.raises(AuditError, match="expected crop, crop, difference"):
        audit(replace(s, calls=s.calls[:2]), TASK.check)


def test_audit_rejects_a_wrong_answer():
    s = TASK.generate(5, "medium")
    answer = json.loads(s.answer)
    missing = replace(s, answer=json.dumps(answer[1:]))
    with pytest.raises(AuditError, match="not the differing patches"):
        audit(missing, TASK.check)
    extra = next(k for k in range(1, s.meta["rows"] * s.meta["cols"] + 1) if k not in answer)
    with pytest.raises(AuditError, match="not the differing patches"):
        audit(replace(s, answer=json.dumps(sorted(answer + [extra]))), TASK.check)


def test_audit_rejects_evidence_that_is_not_the_image():
    s = TASK.generate(6, "easy")
    right = s.evidence["right"].copy()
    right[5, 5] = 255 - right[5, 5]
    with pytest.raises(AuditError, match="side by side"):
        audit(replace(s, evidence={**s.evidence, "right": right}), TASK.check)


def test_every_changed_patch_is_visible_and_grid_lines_match():
    for seed in range(20):
        s = TASK.generate(seed, "hard")
        left, right = s.evidence["left"], s.evidence["right"]
        rows, cols, (w, h) = s.meta["rows"], s.meta["cols"], s.meta["half"]
        diff = np.abs(left.astype(int) - right.astype(int)).max(axis=2)
        cells = diff.reshape(rows, h // rows, cols, w // cols)
        for k in json.loads(s.answer):
            r, c = divmod(k - 1, cols)
            assert (cells[r, :, c, :] >= TASK.VISIBLE).sum() >= TASK.MIN_VISIBLE
        for r in range(1, rows):
            assert (left[r * h // rows] == 255).all() and (right[r * h // rows - 1] == 255).all()


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    with pytest.raises(ValueError, match="seed"):
        TASK.generate("0")
