import json
import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit, reference_episode
from data_gen.tasks import visual_search as TASK
from data_gen.text import words
from eval.scorers import get_scorer
from tools.images import DEFAULT_MAX_PIXELS


def _by_kind(kind, difficulty="medium", seed=0):
    return TASK.generate(seed, difficulty, kind)


def _one_letter_apart(a, b):
    return len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1


@pytest.mark.parametrize("kind", [None, "price"])
def test_same_seed_same_bytes(kind):
    a, b = TASK.generate(7, "medium", kind), TASK.generate(7, "medium", kind)
    assert a.image.tobytes() == b.image.tobytes() and a.answer == b.answer and a.question == b.question
    assert a.meta == b.meta and a.calls == b.calls
    assert TASK.generate(8, "medium", kind).image.tobytes() != a.image.tobytes()


def test_audit_passes_on_200_of_200_medium():
    kinds = Counter()
    for seed in range(200):
        sample = TASK.generate(seed, "medium")
        trajectory = audit(sample, TASK.check)
        assert trajectory.meta["stop_reason"] == "answer"
        kinds[sample.meta["kind"]] += 1
    assert set(kinds) == set(TASK.KINDS) and min(kinds.values()) > 40


@pytest.mark.parametrize("difficulty,count", [("easy", 60), ("hard", 8)])
def test_audit_passes_on_other_difficulties(difficulty, count):
    for seed in range(count):
        assert audit(TASK.generate(seed, difficulty), TASK.check).meta["stop_reason"] == "answer"


def test_difficulty_sets_canvas_size_and_reference():
    expected = (("easy", (1500, 1700), 1), ("medium", (2500, 3000), 2), ("hard", (4000, 4800), 2))
    for difficulty, (low, high), crops in expected:
        for seed in range(4):
            s = TASK.generate(seed, difficulty)
            h, w = s.image.shape[:2]
            assert low <= max(h, w) <= high and h * w <= DEFAULT_MAX_PIXELS and s.image.dtype == np.uint8
            assert len(s.calls) == crops and all(c["name"] == "crop" for c in s.calls)
            assert s.calls[-1]["arguments"]["scale"] * s.meta["target"]["size"] >= TASK.MIN_ZOOMED_TEXT
            assert s.meta["text_px_at_view"] <= TASK.MAX_TEXT_AT_VIEW  # unreadable at ~1 megapixel


def test_answers_have_the_documented_format():
    vocabulary = set(words(4, 8))
    for seed in range(15):
        for kind in TASK.KINDS:
            s = TASK.generate(seed, "easy", kind)
            assert s.scorer == TASK.SCORERS[kind]
            assert get_scorer(s.scorer)(f"<answer>{s.answer}</answer>", s.answer) == 1.0
            assert json.loads(json.dumps(s.meta)) == s.meta
            texts = [sign["text"] for sign in s.meta["signs"]]
            if kind == "word":
                assert s.answer in vocabulary and s.answer == s.meta["target"]["text"]
                assert f"the {s.meta['target']['frame']} frame" in s.question
                assert sum(_one_letter_apart(t, s.answer) for t in texts) >= 3
            elif kind == "price":
                assert re.fullmatch(r"\d{1,2}\.\d{2}", s.answer)
                assert "Answer with a number to two decimal places" in s.question and s.meta["item"] in s.question
                assert texts.count(s.meta["target"]["text"]) == 1
                assert sum(_one_letter_apart(t.split(" $")[0], s.meta["item"]) for t in texts) >= 3
            else:
                assert s.answer in "ABCD" and len(s.answer) == 1
                options = re.findall(r"^([A-D])\) (\w+)$", s.question, re.M)
                assert [o[0] for o in options] == list("ABCD")
                assert dict(options)[s.answer].lower() == s.meta["target"]["frame"]
                assert texts.count(s.meta["target"]["text"]) == 1


def test_audit_rejects_a_wrong_reference():
    sample = _by_kind("word", "easy")
    args = dict(sample.calls[0]["arguments"])
    x1, y1, x2, y2 = args["box"]
    far = [0, 0, 60, 40] if x1 > 200 or y1 > 200 else [1200, 900, 1260, 940]
    with pytest.raises(AuditError, match="does not contain the target"):
        audit(replace(sample, calls=({"name": "crop", "arguments": {**args, "box": far}},)), TASK.check)
    with pytest.raises(AuditError, match="does not contain the target"):  # cuts the sign in half
        half = [x1, y1, (x1 + x2) // 2, y2]
        audit(replace(sample, calls=({"name": "crop", "arguments": {**args, "box": half}},)), TASK.check)
    with pytest.raises(AuditError, match="zoomed text"):  # no zoom: the text stays tiny
        audit(replace(sample, calls=({"name": "crop", "arguments": {**args, "scale": 1.0}},)), TASK.check)
    candidates = (TASK.generate(k, "medium", "price") for k in range(10))
    two = next(s for s in candidates if min(s.calls[0]["arguments"]["box"][:2]) > 0)
    tight_on_image_0 = {"name": "crop", "arguments": {**two.calls[1]["arguments"], "image_index": 0}}
    with pytest.raises(AuditError, match="does not contain the target"):  # window coordinates read as image-0 ones
        audit(replace(two, calls=(two.calls[0], tight_on_image_0)), TASK.check)


def test_audit_rejects_a_wrong_answer():
    for kind, bad in (("word", "wordx"), ("price", "99.99"), ("color", None)):
        sample = _by_kind(kind)
        if bad is None:
            bad = next(letter for letter in "ABCD" if letter != sample.answer)
        with pytest.raises(AuditError, match="is not the target's"):
            audit(replace(sample, answer=bad), TASK.check)
    sample = _by_kind("word")
    wrong_text = {**sample.meta, "target": {**sample.meta["target"], "text": sample.meta["signs"][1]["text"]}}
    with pytest.raises(AuditError, match="is not the target sign"):
        audit(replace(sample, meta=wrong_text), TASK.check)
    duplicate = [dict(s, frame=sample.meta["target"]["frame"]) for s in sample.meta["signs"]]
    with pytest.raises(AuditError, match="another sign also has"):
        audit(replace(sample, meta={**sample.meta, "signs": duplicate}), TASK.check)


def test_audit_rejects_a_final_crop_that_is_not_the_zoomed_target():
    sample = _by_kind("color", "medium")
    episode = reference_episode(sample)
    try:
        workspace = list(episode.workspace)
        TASK.check(sample, workspace, [])
        workspace[-1] = 255 - workspace[-1]
        with pytest.raises(AuditError, match="not the zoomed target"):
            TASK.check(sample, workspace, [])
    finally:
        episode.close()


def test_the_reference_trajectory_is_the_canonical_format():
    trajectory = audit(TASK.generate(1, "medium"), TASK.check)
    roles = [m["role"] for m in trajectory.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert all(m["tool_calls"][0]["function"]["name"] == "crop" for m in trajectory.messages[1:5:2])
    assert len(trajectory.images) == 3 and trajectory.images[2].dtype == np.uint8


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    with pytest.raises(ValueError, match="kind"):
        TASK.generate(0, "easy", "shape")
    with pytest.raises(ValueError, match="seed"):
        TASK.generate("0", "easy")
