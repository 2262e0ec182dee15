import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import maze as TASK
from eval.scorers import get_scorer


def _options(sample):
    return dict(re.findall(r"^([A-E])\. ([RLUD]+)$", sample.question, flags=re.M))


def _with_options(sample, options):
    head = sample.question.split("\nA. ")[0]
    return head + "".join(f"\n{k}. {options[k]}" for k in "ABCDE") + "\nF. No answer"


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_same_seed_same_bytes(difficulty):
    a, b = TASK.generate(7, difficulty), TASK.generate(7, difficulty)
    assert a.image.tobytes() == b.image.tobytes()
    assert a.question == b.question and a.answer == b.answer and a.calls == b.calls and a.meta == b.meta
    c = TASK.generate(8, difficulty)
    assert c.image.tobytes() != a.image.tobytes() and c.question != a.question


def test_audit_passes_on_200_of_200_medium():
    for seed in range(200):
        assert audit(TASK.generate(seed, "medium"), TASK.check).meta["stop_reason"] == "answer"


@pytest.mark.parametrize("difficulty, count", [("easy", 60), ("hard", 10)])
def test_audit_passes_on_other_difficulties(difficulty, count):
    for seed in range(count):
        assert audit(TASK.generate(seed, difficulty), TASK.check).meta["stop_reason"] == "answer"


@pytest.mark.parametrize("difficulty, low, high", [("easy", 5, 12), ("medium", 13, 30), ("hard", 31, 62)])
def test_sizes_and_rendering(difficulty, low, high):
    sizes = set()
    for seed in range(10):
        s = TASK.generate(seed, difficulty)
        n, cell, wall = s.meta["n"], s.meta["cell"], s.meta["wall"]
        sizes.add(n)
        assert low <= n <= high and s.image.dtype == np.uint8 and s.image.shape == (n * cell + wall,) * 2 + (3,)
        assert 400 <= s.image.shape[0] <= 1000
        for border in (s.image[:wall], s.image[-wall:], s.image[:, :wall], s.image[:, -wall:]):
            assert (border == 0).all()  # a closed black border
        c0, c1 = wall + (cell - wall) // 2, (n - 1) * cell + wall + (cell - wall) // 2
        assert tuple(s.image[c0, c0]) == TASK.RED and tuple(s.image[c1, c1]) == TASK.GREEN
        assert not (s.image == TASK.PATH).all(axis=2).any()  # the path's color is used nowhere in the maze
    assert len(sizes) >= 5


def test_answer_format_and_options():
    samples = [TASK.generate(seed, "easy") for seed in range(300)]
    answers = Counter(s.answer for s in samples)
    assert set(answers) == set("ABCDEF") and abs(answers["F"] / 300 - 1 / 6) < 0.06
    kinds = Counter(k for s in samples for k in s.meta["options"])
    assert set(kinds) == {"true", "swap", "shortcut", "truncate", "branch", "walk"}
    for s in samples:
        assert s.question.startswith(TASK.QUESTION + "\nA. ") and s.question.endswith("\nE. " + _options(s)["E"] + "\nF. No answer")
        options = _options(s)
        assert list(options) == list("ABCDE") and len(set(options.values())) == 5
        solution = s.evidence["solution"]
        if s.answer == "F":
            assert solution not in options.values() and "true" not in s.meta["options"]
        else:
            assert options[s.answer] == solution and s.meta["options"]["ABCDE".index(s.answer)] == "true"
        assert get_scorer(s.scorer)(f"<answer>{s.answer}</answer>", s.answer) == 1.0


def test_reference_draws_the_route_in_chunks_of_at_most_256_points():
    long = next(s for s in (TASK.generate(seed, "hard") for seed in range(40)) if len(s.calls) >= 2)
    for k, call in enumerate(long.calls):
        args = call["arguments"]
        assert call["name"] == "draw_polygon" and args["closed"] is False and args["image_index"] == (0 if k == 0 else -1)
        assert 4 <= len(args["points"]) <= 512 and len(args["points"]) % 2 == 0
    for a, b in zip(long.calls, long.calls[1:]):  # each chunk starts where the previous one ended
        assert a["arguments"]["points"][-2:] == b["arguments"]["points"][:2]
    trajectory = audit(long, TASK.check)
    assert len(trajectory.images) == len(long.calls) + 1


def test_the_reference_trajectory_is_the_canonical_format():
    s = TASK.generate(1, "medium")
    trajectory = audit(s, TASK.check)
    assert [m["role"] for m in trajectory.messages] == ["user", "assistant", "tool", "assistant"]
    assert trajectory.messages[1]["tool_calls"][0]["function"]["name"] == "draw_polygon"
    assert len(trajectory.images) == 2 and trajectory.images[1].dtype == np.uint8


def test_audit_rejects_a_wrong_answer():
    s = next(s for s in (TASK.generate(seed, "medium") for seed in range(20)) if s.answer != "F")
    wrong = "ABCDE"[("ABCDE".index(s.answer) + 1) % 5]
    with pytest.raises(AuditError, match="reach the goal"):
        audit(replace(s, answer=wrong), TASK.check)
    with pytest.raises(AuditError, match="reach the goal"):
        audit(replace(s, answer="F"), TASK.check)
    options = _options(s)  # a second option that works
    options[wrong] = options[s.answer]
    with pytest.raises(AuditError, match="reach the goal"):
        audit(replace(s, question=_with_options(s, options)), TASK.check)
    f = next(s for s in (TASK.generate(seed, "medium") for seed in range(40)) if s.answer == "F")
    with pytest.raises(AuditError, match="reach the goal"):
        audit(replace(f, answer="C"), TASK.check)


def test_audit_rejects_a_distractor_that_only_works_when_blocked_moves_are_skipped():
    s = next(s for s in (TASK.generate(seed, "easy") for seed in range(20)) if s.answer != "F")
    options = _options(s)
    other = next(k for k in "ABCDE" if k != s.answer)
    options[other] = "U" + options[s.answer]  # bumps into the top border first, then follows the route
    with pytest.raises(AuditError, match="skipping blocked moves"):
        audit(replace(s, question=_with_options(s, options)), TASK.check)


def _redraw(sample, points):
    call = sample.calls[0]
    return replace(sample, calls=({"name": call["name"], "arguments": {**call["arguments"], "points": points}},))


def test_audit_rejects_a_wrong_drawing():
    s = next(s for s in (TASK.generate(seed, "medium") for seed in range(30)) if len(s.calls) == 1)
    points = s.calls[0]["arguments"]["points"]
    half = s.meta["cell"] // 2
    with pytest.raises(AuditError, match="crosses"):  # shifted half a cell: onto the walls
        audit(_redraw(s, [v + half for v in points]), TASK.check)
    with pytest.raises(AuditError, match="misses"):  # stops one turn early
        audit(_redraw(s, points[:-2]), TASK.check)
    with pytest.raises(AuditError, match="crosses"):  # straight from start to goal
        audit(_redraw(s, points[:2] + points[-2:]), TASK.check)
    with pytest.raises(AuditError, match="misses"):  # a dot in the start cell
        audit(_redraw(s, points[:2] + [points[0] + 1, points[1]]), TASK.check)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
