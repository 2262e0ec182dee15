import math
import re
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import instrument as TASK
from eval.scorers import get_scorer

DIFFICULTIES = ["easy", "medium", "hard"]


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_same_seed_same_bytes(difficulty):
    a, b = TASK.generate(7, difficulty), TASK.generate(7, difficulty)
    assert a.image.tobytes() == b.image.tobytes() and a.question == b.question and a.answer == b.answer
    assert a.meta == b.meta and a.calls == b.calls
    assert TASK.generate(8, difficulty).image.tobytes() != a.image.tobytes()


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_audit_passes_on_200_of_200(difficulty):
    for seed in range(200):
        trajectory = audit(TASK.generate(seed, difficulty), TASK.check)
        assert trajectory.meta["stop_reason"] == "answer"


def test_reference_is_crop_hough_crop():
    sample = TASK.generate(3, "medium")
    assert [c["name"] for c in sample.calls] == ["crop", "hough_lines", "crop"]
    trajectory = audit(sample, TASK.check)
    assert [m["role"] for m in trajectory.messages] == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]
    assert [c["name"] for c in TASK.generate(3, "easy").calls] == ["crop", "hough_lines", "crop"]
    zoomed = trajectory.images[3]
    x1, y1, x2, y2 = sample.calls[2]["arguments"]["box"]
    assert zoomed.shape[1] > x2 - x1 and zoomed.shape[0] > y2 - y1  # the tight crop is enlarged


def test_answers_have_the_documented_format_and_score():
    for difficulty in DIFFICULTIES:
        for seed in range(25):
            s = TASK.generate(seed, difficulty)
            gauge = s.meta["gauges"][s.meta["asked"]]
            decimals = gauge["scale"]["decimals"]
            assert s.scorer in ("numeric", "option_letter") and s.meta["answer_format"] in ("numeric", "choice")
            if s.scorer == "numeric":
                assert re.fullmatch(r"-?\d+" + (r"\.\d" if decimals else ""), s.answer)
                assert ("one decimal place" in s.question) == (decimals == 1)
                assert float(s.answer) == gauge["value"]
            else:
                letters = re.findall(r"^([A-F])\. (-?[\d.]+)$", s.question, re.M)
                assert [k for k, _ in letters] == list("ABCDEF") and s.answer in "ABCDEF"
                values = [float(v) for _, v in letters]
                steps = np.diff(values)
                assert np.allclose(steps, gauge["scale"]["res"])  # six consecutive grid values
                assert dict(letters)[s.answer] == f"{gauge['value']:.{decimals}f}"
            assert s.meta["unit"] in s.question
            assert get_scorer(s.scorer)(f"<answer>{s.answer}</answer>", s.answer) == 1.0
    assert {TASK.generate(k, "medium", "numeric").scorer for k in range(5)} == {"numeric"}
    assert {TASK.generate(k, "medium", "choice").scorer for k in range(5)} == {"option_letter"}


def test_difficulty_sets_gauges_and_ticks():
    for seed in range(30):
        easy, hard = TASK.generate(seed, "easy"), TASK.generate(seed, "hard")
        assert len(easy.meta["gauges"]) == 1 and len(easy.meta["gauges"][0]["labels"]) in (5, 6)
        assert 2 <= len(hard.meta["gauges"]) <= 4
        ordinal = TASK.ORDINALS[hard.meta["asked"]]
        assert f"the {ordinal} gauge from the left" in hard.question
        xs = [g["center"][0] for g in hard.meta["gauges"]]
        assert xs == sorted(xs)
        assert max(g["radius"] for g in hard.meta["gauges"]) < easy.meta["gauges"][0]["radius"]


def test_scale_round_trip_and_needle_rendering():
    for seed in range(40):
        s = TASK.generate(seed, DIFFICULTIES[seed % 3])
        for gauge in s.meta["gauges"]:
            scale = gauge["scale"]
            steps = round((scale["hi"] - scale["lo"]) / scale["res"])
            for k in range(steps + 1):
                value = round(scale["lo"] + k * scale["res"], scale["decimals"])
                angle = TASK.value_to_angle(scale, value)
                assert abs(angle - round(angle)) < 1e-9  # whole degrees: Hough's bins follow the needle
                assert TASK.snap(scale, TASK.angle_to_value(scale, angle)) == value
                assert TASK.snap(scale, TASK.angle_to_value(scale, angle + 1.4)) == value
            assert TASK.value_to_angle(scale, gauge["value"]) == gauge["angle"]
            assert 240 <= scale["sweep"] <= 270
            # the needle is drawn at that angle: its colour halfway between the hub and the tip
            x, y = (gauge["center"][0] + 0.5 * gauge["tip_radius"] * math.cos(math.radians(gauge["angle"])),
                    gauge["center"][1] - 0.5 * gauge["tip_radius"] * math.sin(math.radians(gauge["angle"])))
            pixel = s.image[round(y), round(x)].astype(int)
            assert np.abs(pixel - np.array(s.evidence["needle_color"])).max() <= 40


def _with_call(sample, k, **arguments):
    calls = list(sample.calls)
    calls[k] = {"name": calls[k]["name"], "arguments": {**calls[k]["arguments"], **arguments}}
    return replace(sample, calls=tuple(calls))


def test_audit_rejects_a_wrong_reference():
    sample = TASK.generate(5, "medium")
    x1, y1, x2, y2 = sample.calls[2]["arguments"]["box"]
    gauge = sample.meta["gauges"][0]
    cx, cy = gauge["center"]
    # the tight crop moved to the opposite side of the dial: no needle tip there
    mx, my = 2 * cx - (x1 + x2) / 2, 2 * cy - (y1 + y2) / 2
    w, h = x2 - x1, y2 - y1
    moved = [max(0, int(mx - w / 2)), max(0, int(my - h / 2)), int(mx + w / 2), int(my + h / 2)]
    with pytest.raises(AuditError, match="last crop"):
        audit(_with_call(sample, 2, box=moved), TASK.check)
    # a dial crop cut short (half the face): the dial is not in view
    b = sample.calls[0]["arguments"]["box"]
    with pytest.raises(AuditError, match="whole dial"):
        audit(_with_call(sample, 0, box=[b[0], b[1], (b[0] + b[2]) // 2, b[3]]), TASK.check)
    # Hough tuned so that it finds no needle
    with pytest.raises(AuditError, match="no segment"):
        audit(_with_call(sample, 1, min_line_length=2000, threshold=2000), TASK.check)
    # in a row of gauges, a dial crop of the neighbouring gauge
    hard = next(s for s in (TASK.generate(k, "hard") for k in range(20)) if s.meta["asked"] > 0)
    left = hard.meta["gauges"][hard.meta["asked"] - 1]
    R, (lx, ly) = left["radius"], left["center"]
    wrong = _with_call(hard, 0, box=[int(lx - R - 3), int(ly - R - 3), int(lx + R + 4), int(ly + R + 4)])
    with pytest.raises(AuditError):
        audit(wrong, TASK.check)


def test_audit_rejects_a_wrong_answer():
    numeric = TASK.generate(11, "medium", "numeric")
    scale = numeric.meta["gauges"][0]["scale"]
    off = f"{float(numeric.answer) + scale['res']:.{scale['decimals']}f}"
    with pytest.raises(AuditError, match="not the reading"):
        audit(replace(numeric, answer=off), TASK.check)
    choice = TASK.generate(11, "hard", "choice")
    other = next(letter for letter in "ABCDEF" if letter != choice.answer)
    with pytest.raises(AuditError, match="not the option"):
        audit(replace(choice, answer=other), TASK.check)
    # the rendered needle does not show the claimed value: the measured angle reads something else
    meta = dict(numeric.meta)
    gauges = [dict(g) for g in meta["gauges"]]
    gauges[0]["value"] = round(gauges[0]["value"] + 3 * scale["res"], scale["decimals"])
    gauges[0]["angle"] = TASK.value_to_angle(scale, gauges[0]["value"])
    meta["gauges"] = gauges
    with pytest.raises(AuditError):
        audit(replace(numeric, meta=meta), TASK.check)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    with pytest.raises(ValueError, match="answer_format"):
        TASK.generate(0, "easy", "essay")
    with pytest.raises(ValueError, match="seed"):
        TASK.generate("0")
