import json
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import jigsaw as TASK
from data_gen.text import words
from eval.scorers import get_scorer


def _tiles(image, n):
    h, w = image.shape[0] // n, image.shape[1] // n
    return [image[r * h:(r + 1) * h, c * w:(c + 1) * w] for r in range(n) for c in range(n)]


def _assemble(tiles, n):
    return np.concatenate([np.concatenate(tiles[r * n:(r + 1) * n], axis=1) for r in range(n)], axis=0)


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_same_seed_same_bytes(difficulty):
    a, b = TASK.generate(7, difficulty), TASK.generate(7, difficulty)
    assert a.image.tobytes() == b.image.tobytes() and a.evidence["original"].tobytes() == b.evidence["original"].tobytes()
    assert a.answer == b.answer and a.calls == b.calls and a.meta == b.meta and a.question == b.question
    c = TASK.generate(8, difficulty)
    assert c.image.tobytes() != a.image.tobytes() and c.evidence["original"].tobytes() != a.evidence["original"].tobytes()


def test_audit_passes_on_200_of_200_medium():
    for seed in range(200):
        trajectory = audit(TASK.generate(seed, "medium"), TASK.check)
        assert trajectory.meta["stop_reason"] == "answer"


@pytest.mark.parametrize("difficulty, count", [("easy", 25), ("hard", 15)])
def test_audit_passes_on_other_difficulties(difficulty, count):
    for seed in range(count):
        assert audit(TASK.generate(seed, difficulty), TASK.check).meta["stop_reason"] == "answer"


def test_easy_fits_the_stock_reference_budgets():
    trajectory = audit(TASK.generate(0, "easy"), TASK.check)
    roles = [m["role"] for m in trajectory.messages]
    assert roles == ["user"] + ["assistant", "tool"] * 9 + ["assistant"]
    assert len(trajectory.images) == 10 and all(image.dtype == np.uint8 for image in trajectory.images)


def test_grid_sizes_and_exact_tiles():
    grids = {d: {TASK.generate(seed, d).meta["grid"] for seed in range(40)} for d in ("easy", "medium", "hard")}
    assert grids == {"easy": {3}, "medium": {4}, "hard": {5, 6}}
    for seed in range(20):
        s = TASK.generate(seed, "hard")
        n, (tw, th) = s.meta["grid"], s.meta["tile"]
        assert s.image.shape == s.evidence["original"].shape == (n * th, n * tw, 3) and s.image.dtype == np.uint8
        assert len({t.tobytes() for t in map(np.ascontiguousarray, _tiles(s.evidence["original"], n))}) == n * n


@pytest.mark.parametrize("base", [0, 1])
def test_answer_is_the_documented_permutation(base):
    for seed in range(30):
        s = TASK.generate(seed, "medium", base=base)
        n = s.meta["grid"]
        answer = json.loads(s.answer)
        assert isinstance(answer, list) and all(type(a) is int for a in answer)
        assert sorted(answer) == list(range(base, base + n * n)) and answer != sorted(answer)
        # answer[i] = the shuffled tile (row-major, numbered from base) that belongs at position i
        shuffled = _tiles(s.image, n)
        assert np.array_equal(_assemble([shuffled[a - base] for a in answer], n), s.evidence["original"])
        assert f"from {base} to {base + n * n - 1}" in s.question and "JSON list" in s.question
        tw, th = s.meta["tile"]
        assert len(s.calls) == n * n and s.toolset == "default"
        for call, a in zip(s.calls, answer):
            row, col = divmod(a - base, n)
            assert call == {"name": "crop", "arguments": {"image_index": 0,
                                                          "box": [col * tw, row * th, (col + 1) * tw, (row + 1) * th]}}


def test_words_come_from_the_corpus():
    vocabulary = set(words())
    drawn = [w for seed in range(20) for w in TASK.generate(seed, "medium").meta["words"]]
    assert drawn and all(w in vocabulary for w in drawn)


def test_audit_rejects_a_wrong_reference():
    s = TASK.generate(3, "medium")
    calls = list(s.calls)
    swapped = calls[:]
    swapped[0], swapped[1] = swapped[1], swapped[0]
    with pytest.raises(AuditError, match="crop 0 is not tile 0"):
        audit(replace(s, calls=tuple(swapped)), TASK.check)
    with pytest.raises(AuditError, match="not the 16 tiles"):
        audit(replace(s, calls=tuple(calls[:-1])), TASK.check)
    x1, y1, x2, y2 = calls[5]["arguments"]["box"]
    shifted = calls[:5] + [{"name": "crop", "arguments": {"image_index": 0, "box": [x1 + 1, y1, x2 + 1, y2]}}] + calls[6:]
    if x2 + 1 > s.image.shape[1]:
        shifted[5] = {"name": "crop", "arguments": {"image_index": 0, "box": [x1 - 1, y1, x2 - 1, y2]}}
    with pytest.raises(AuditError, match="crop 5 is not tile 5"):
        audit(replace(s, calls=tuple(shifted)), TASK.check)
    workspace = [s.evidence["original"]] + _tiles(s.evidence["original"], 4)  # image 0 is not the puzzle
    with pytest.raises(AuditError, match="not the shuffled image"):
        TASK.check(s, workspace, [{}] * (len(workspace) - 1))


def test_audit_rejects_a_wrong_answer():
    s = TASK.generate(4, "easy")
    answer = json.loads(s.answer)
    swapped = answer[:]
    swapped[2], swapped[7] = swapped[7], swapped[2]
    with pytest.raises(AuditError, match="does not restore"):
        audit(replace(s, answer=json.dumps(swapped)), TASK.check)
    with pytest.raises(AuditError, match="not a permutation"):
        audit(replace(s, answer=json.dumps(answer[:-1] + [answer[0]])), TASK.check)
    with pytest.raises(AuditError, match="not a permutation"):
        audit(replace(s, answer=json.dumps([a + 1 for a in answer])), TASK.check)  # off by one (base 1)
    with pytest.raises(AuditError, match="not JSON"):
        audit(replace(s, answer=" ".join(map(str, answer))), TASK.check)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    for base in (2, -1, True, "0"):
        with pytest.raises(ValueError, match="base"):
            TASK.generate(0, "easy", base=base)


def test_the_scorer_accepts_the_reference_answer():
    s = TASK.generate(5, "medium")
    scorer = get_scorer(TASK.SCORER)
    assert scorer(f"<answer>{s.answer}</answer>", s.answer) == 1.0
    wrong = json.loads(s.answer)
    wrong[0], wrong[1] = wrong[1], wrong[0]
    assert scorer(f"<answer>{json.dumps(wrong)}</answer>", s.answer) == 0.0
