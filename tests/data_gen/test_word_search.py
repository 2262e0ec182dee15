import json
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit, reference_episode
from data_gen.tasks import word_search as TASK
from data_gen.text import fonts
from eval.scorers import get_scorer


def _sample(kind, difficulty="medium", seeds=range(200), where=lambda s: True):
    return next(s for s in (TASK.generate(k, difficulty, kind) for k in seeds) if where(s))


def _workspace(sample):
    episode = reference_episode(sample)
    try:
        return [image.copy() for image in episode.workspace]
    finally:
        episode.close()


@pytest.mark.parametrize("kind", ["position", "count", "mixed"])
def test_same_seed_same_bytes(kind):
    a, b = TASK.generate(7, "hard", kind), TASK.generate(7, "hard", kind)
    assert a.image.tobytes() == b.image.tobytes() and a.answer == b.answer and a.calls == b.calls
    assert a.meta == b.meta and a.question == b.question
    assert TASK.generate(8, "hard", kind).image.tobytes() != a.image.tobytes()


def test_audit_passes_on_200_of_200_medium():
    for seed in range(200):
        assert audit(TASK.generate(seed, "medium"), TASK.check).meta["stop_reason"] == "answer"


@pytest.mark.parametrize("difficulty, count", [("easy", 25), ("hard", 8)])
def test_audit_passes_on_other_difficulties(difficulty, count):
    for seed in range(count):
        for kind in ("position", "count"):
            assert audit(TASK.generate(seed, difficulty, kind), TASK.check).meta["stop_reason"] == "answer"


def test_grid_sizes_and_image_limits():
    for difficulty, (low, high) in TASK.GRID.items():
        samples = [TASK.generate(seed, difficulty) for seed in range(40)]
        for s in samples:
            assert low <= s.meta["rows"] <= high and low <= s.meta["cols"] <= high
            assert s.image.dtype == np.uint8 and s.image.ndim == 3 and s.image.shape[2] == 3
            assert max(s.image.shape[:2]) < 2500
            json.dumps(s.meta)  # plain JSON
        assert len({s.meta["rows"] for s in samples}) > 3
    # the largest grid at the largest hard font still fits
    widest = max(TASK._cell(f, TASK.FONT_SIZE["hard"][1], p)[0][0] for f in fonts() for p in TASK.PAIRS)
    tallest = max(TASK._cell(f, TASK.FONT_SIZE["hard"][1], p)[0][1] for f in fonts() for p in TASK.PAIRS)
    assert 72 * widest < 2500 and 72 * tallest < 2500


def test_position_answers():
    scorer = get_scorer("json_list")
    for seed in range(30):
        s = TASK.generate(seed, "medium", "position")
        row, col = json.loads(s.answer)
        assert s.scorer == "json_list" and s.answer == f"[{row}, {col}]"
        assert scorer(f"<answer>{s.answer}</answer>", s.answer) == 1
        assert 1 <= row <= s.meta["rows"] and 1 <= col <= s.meta["cols"] and s.meta["odd_positions"] == [[row, col]]
        assert f"does the {'number' if s.meta['odd'].isdigit() else 'letter'} {s.meta['odd']} appear?" in s.question
        assert "For example, [1, 2] means the first row and the second column." in s.question
        assert len(s.calls) == 1 and s.calls[0]["name"] == "crop" and s.calls[0]["arguments"]["scale"] >= 2


def test_count_answers_include_zero():
    scorer = get_scorer("numeric")
    answers = Counter()
    for seed in range(80):
        s = TASK.generate(seed, "easy", "count")
        assert s.scorer == "numeric" and s.answer == str(len(s.meta["odd_positions"]))
        assert scorer(f"<answer>{s.answer}</answer>", s.answer) == 1
        assert s.question.endswith("appear in this image? Answer with an integer, such as 1,2,3.")
        answers[int(s.answer)] += 1
    assert set(answers) == set(range(TASK.MAX_ODD["easy"] + 1))


def test_mixed_draws_both_kinds_and_many_pairs():
    samples = [TASK.generate(seed, "medium") for seed in range(80)]
    assert {s.meta["kind"] for s in samples} == {"position", "count"}
    pairs = Counter(s.meta["base"] + s.meta["odd"] for s in samples)
    assert len(pairs) >= 12 and all(p in TASK.PAIRS or p[::-1] in TASK.PAIRS for p in pairs)
    assert len({s.meta["font"] for s in samples}) >= 8


def test_every_font_keeps_several_pairs():
    for font in fonts():
        assert sum(TASK._shapes_close(font, p) for p in TASK.PAIRS) >= 4, font.name
    assert not TASK._shapes_close(next(f for f in fonts() if f.name == "DejaVuSans.ttf"), "Il")  # drawn alike


def test_audit_rejects_a_crop_that_misses_the_odd_glyph():
    s = _sample("position", where=lambda s: s.meta["odd_positions"][0][0] > 6)
    (x1, y1, x2, y2), ch = s.calls[0]["arguments"]["box"], s.meta["cell"][1]
    rows = (y2 - y1) // ch
    shifted = {"name": "crop", "arguments": {**s.calls[0]["arguments"], "box": [x1, y1 - rows * ch, x2, y1]}}
    with pytest.raises(AuditError, match="does not contain the odd glyph|not covered"):
        audit(replace(s, calls=(shifted,)), TASK.check)


def test_audit_rejects_an_incomplete_scan():
    s = _sample("count", where=lambda s: int(s.answer) > 0 and len(s.calls) > 1)
    r, c = s.meta["odd_positions"][0]
    (cw, ch), (x0, y0) = s.meta["cell"], s.meta["origin"]
    x, y = x0 + (c - 1) * cw, y0 + (r - 1) * ch
    kept = tuple(call for call in s.calls if not (call["arguments"]["box"][0] <= x < call["arguments"]["box"][2]
                                                  and call["arguments"]["box"][1] <= y < call["arguments"]["box"][3]))
    assert len(kept) == len(s.calls) - 1
    with pytest.raises(AuditError, match="not covered"):
        audit(replace(s, calls=kept), TASK.check)
    zero = _sample("count", where=lambda s: s.answer == "0" and len(s.calls) > 1)
    with pytest.raises(AuditError, match="scan covers"):
        audit(replace(zero, calls=zero.calls[1:]), TASK.check)


def test_audit_rejects_a_misaligned_crop():
    s = _sample("position")
    box = list(s.calls[0]["arguments"]["box"])
    box[0] += 3
    with pytest.raises(AuditError, match="whole cells"):
        audit(replace(s, calls=({"name": "crop", "arguments": {**s.calls[0]["arguments"], "box": box}},)), TASK.check)


@pytest.mark.parametrize("kind", ["position", "count"])
def test_audit_rejects_a_wrong_answer(kind):
    s = _sample(kind)
    if kind == "position":
        row, col = json.loads(s.answer)
        wrong = [json.dumps([row + 1, col]), json.dumps([col, row]) if row != col else "[0, 0]", "[3]"]
    else:
        wrong = [str(int(s.answer) + 1), "-1"]
    for answer in wrong:
        with pytest.raises(AuditError, match="answer"):
            audit(replace(s, answer=answer), TASK.check)


def test_audit_rejects_a_crop_showing_the_odd_glyph_in_a_base_cell():
    s = _sample("count", where=lambda s: len(s.calls) > 1)
    workspace = _workspace(s)
    TASK.check(s, workspace, [])  # the untouched workspace passes
    m = s.meta
    (cw, ch), scale = m["cell"], m["scale"]
    x1, y1, _, _ = s.calls[0]["arguments"]["box"]
    r1, c1 = (y1 - m["origin"][1]) // ch, (x1 - m["origin"][0]) // cw
    r, c = next((r, c) for r in range(r1, r1 + 3) for c in range(c1, c1 + 3)
                if [r + 1, c + 1] not in m["odd_positions"])
    odd = TASK._zoomed(TASK._tile(m, m["odd"]), scale)
    top, left = (r - r1) * ch * scale, (c - c1) * cw * scale
    workspace[1][top:top + ch * scale, left:left + cw * scale] = odd
    with pytest.raises(AuditError, match="where the grid has the other glyph"):
        TASK.check(s, workspace, [])
    workspace[1][top:top + ch * scale, left:left + cw * scale] = np.array(m["paper"], np.uint8)  # a blank cell
    with pytest.raises(AuditError, match="shows neither"):
        TASK.check(s, workspace, [])


def test_audit_rejects_an_image_that_is_not_the_described_grid():
    s = _sample("position")
    image = s.image.copy()
    (cw, ch), (x0, y0) = s.meta["cell"], s.meta["origin"]
    row, col = s.meta["odd_positions"][0]
    other = (row % s.meta["rows"], col - 1)  # a base cell next to the odd one becomes odd too
    image[y0 + other[0] * ch:y0 + (other[0] + 1) * ch, x0 + other[1] * cw:x0 + (other[1] + 1) * cw] = \
        image[y0 + (row - 1) * ch:y0 + row * ch, x0 + (col - 1) * cw:x0 + col * cw]
    with pytest.raises(AuditError, match="not the grid its meta describes"):
        audit(replace(s, image=image), TASK.check)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    with pytest.raises(ValueError, match="kind"):
        TASK.generate(0, "easy", "where")
    with pytest.raises(ValueError, match="seed"):
        TASK.generate("0", "easy")
