import json
import re
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import symbolic as TASK
from eval.scorers import SCORERS, get_scorer


@pytest.mark.parametrize("form", ["mixed", "integer", "choice"])
def test_same_seed_same_bytes(form):
    a, b = TASK.generate(7, "hard", form), TASK.generate(7, "hard", form)
    assert a.image.tobytes() == b.image.tobytes() and a.answer == b.answer and a.question == b.question
    assert a.meta == b.meta and a.calls == b.calls
    assert TASK.generate(8, "hard", form).image.tobytes() != a.image.tobytes()


@pytest.mark.parametrize("difficulty,count", [("easy", 60), ("medium", 200), ("hard", 60)])
def test_audit_passes_on_every_sample(difficulty, count):
    for seed in range(count):
        trajectory = audit(TASK.generate(seed, difficulty), TASK.check)
        assert trajectory.meta["stop_reason"] == "answer"


def test_edge_counts_and_geometry_follow_the_difficulty():
    for difficulty, (low, high) in (("easy", (3, 8)), ("medium", (9, 16)), ("hard", (17, 30))):
        samples = [TASK.generate(seed, difficulty) for seed in range(30)]
        counts = {s.meta["edges"] for s in samples}
        assert counts <= set(range(low, high + 1)) and len(counts) >= min(5, high - low)
        cfg = TASK.SETTINGS[difficulty]
        for s in samples:
            vertices = np.asarray(s.meta["vertices"])
            length, turn, height, distance = TASK._measures(vertices)
            assert length.min() >= cfg["min_edge"] - 0.05 and height.min() >= cfg["min_height"] - 0.05
            assert TASK.MIN_TURN <= np.abs(turn).min() and np.abs(turn).max() <= TASK.MAX_TURN
            assert distance.min() >= TASK.MIN_CLEARANCE - 0.05
            width, height_px = s.meta["size"]
            assert s.image.shape == (height_px, width, 3) and s.image.dtype == np.uint8
            assert (vertices >= 0).all() and (vertices[:, 0] < width).all() and (vertices[:, 1] < height_px).all()
            assert (len(s.meta["distractors"]) > 0) == (difficulty == "hard")
        if difficulty == "easy":
            assert {s.meta["style"] for s in samples} == {"outline", "filled"}
            assert {s.meta["convex"] for s in samples} == {True, False}


def test_answer_formats():
    forms = set()
    for seed in range(40):
        s = TASK.generate(seed, "medium")
        forms.add(s.meta["form"])
        json.dumps(s.meta)  # plain JSON
        assert s.scorer in SCORERS and s.toolset == "default"
        n = s.meta["edges"]
        if s.meta["form"] == "integer":
            assert s.question == TASK.QUESTION and s.answer == str(n) and s.scorer == "numeric"
        else:
            options = s.meta["options"]
            assert s.scorer == "option_letter" and s.answer in "ABCDE" and options[s.answer] == n
            low = min(options.values())
            assert sorted(options) == list("ABCDE") and sorted(options.values()) == list(range(low, low + 5))
            assert re.fullmatch(r"How many edges does the polygon have\? A\.\d+ B\.\d+ C\.\d+ D\.\d+ E\.\d+\n"
                                r"Answer with the option's letter\.", s.question)
        assert get_scorer(s.scorer)(f"<answer>{s.answer}</answer>", s.answer) == 1.0
    assert forms == {"integer", "choice"}
    assert TASK.generate(3, "easy", "integer").scorer == "numeric"
    assert TASK.generate(3, "easy", "choice").scorer == "option_letter"


def test_the_reference_is_contours_then_numbered_corners():
    s = TASK.generate(2, "hard", "integer")
    trajectory = audit(s, TASK.check)
    assert [m["role"] for m in trajectory.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [c["name"] for c in s.calls] == ["contours", "draw_points"]
    assert len(s.calls[1]["arguments"]["points"]) == 2 * s.meta["edges"]


def test_audit_rejects_a_wrong_reference():
    s = TASK.generate(5, "medium", "integer")
    contours, points = s.calls
    coarse = replace(s, calls=({**contours, "arguments": {**contours["arguments"], "epsilon_ratio": 0.05}}, points))
    with pytest.raises(AuditError, match="corners"):
        audit(coarse, TASK.check)
    background = replace(s, calls=({**contours, "arguments": {**contours["arguments"], "binarize": "otsu"}}, points))
    with pytest.raises(AuditError):
        audit(background, TASK.check)
    moved = list(points["arguments"]["points"])
    moved[0] += 3
    wrong_marks = replace(s, calls=(contours, {**points, "arguments": {**points["arguments"], "points": moved}}))
    with pytest.raises(AuditError, match="draw_points"):
        audit(wrong_marks, TASK.check)
    shifted = [[x + 12, y] for x, y in s.meta["vertices"]]  # the tool's corners are not where the polygon is
    corners = [[round(x), round(y)] for x, y in s.meta["vertices"]]
    report = {"contours": [{"vertices": s.meta["edges"], "polygon": corners}]}
    with pytest.raises(AuditError, match="px from the nearest vertex"):
        TASK.check(replace(s, meta={**s.meta, "vertices": shifted}), [s.image] * 3, [report, {}])


def test_audit_rejects_a_wrong_answer():
    s = TASK.generate(5, "medium", "integer")
    with pytest.raises(AuditError, match="answer"):
        audit(replace(s, answer=str(s.meta["edges"] + 1)), TASK.check)
    c = TASK.generate(5, "medium", "choice")
    wrong = next(k for k in "ABCDE" if k != c.answer)
    with pytest.raises(AuditError, match="answer"):
        audit(replace(c, answer=wrong), TASK.check)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    with pytest.raises(ValueError, match="form"):
        TASK.generate(0, "easy", "essay")
    with pytest.raises(ValueError, match="seed"):
        TASK.generate("0", "easy")
