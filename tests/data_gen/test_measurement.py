import math
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import measurement as TASK
from eval.scorers import get_scorer


def _with_measure(sample, **changes):
    """The sample with the measure call's arguments changed."""
    crop, measure = sample.calls
    return replace(sample, calls=(crop, {"name": "measure", "arguments": {**measure["arguments"], **changes}}))


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
@pytest.mark.parametrize("answer_format", ["numeric", "choice"])
def test_same_seed_same_bytes(difficulty, answer_format):
    a, b = TASK.generate(7, difficulty, answer_format), TASK.generate(7, difficulty, answer_format)
    assert a.image.tobytes() == b.image.tobytes() and a.question == b.question and a.answer == b.answer
    assert a.meta == b.meta and a.calls == b.calls
    assert TASK.generate(8, difficulty, answer_format).image.tobytes() != a.image.tobytes()
    assert a.image.dtype == np.uint8 and a.image.ndim == 3 and a.image.shape[2] == 3


@pytest.mark.parametrize("difficulty,count", [("medium", 200), ("easy", 100), ("hard", 100)])
def test_audit_passes_on_every_sample(difficulty, count):
    for seed in range(count):
        trajectory = audit(TASK.generate(seed, difficulty), TASK.check)
        assert trajectory.meta["stop_reason"] == "answer"


def test_audit_passes_on_choice_samples():
    for seed in range(60):
        audit(TASK.generate(seed, ["easy", "medium", "hard"][seed % 3], "choice"), TASK.check)


def test_numeric_answers_are_exact_at_the_stated_step():
    numeric = get_scorer("numeric")
    for seed in range(80):
        s = TASK.generate(seed, ["easy", "medium", "hard"][seed % 3])
        m = s.meta
        assert s.scorer == "numeric" and numeric(s.answer, s.answer) == 1.0
        value, step = float(s.answer), m["step"]
        assert value == m["answer_value"] and abs(value / step - round(value / step)) < 1e-9 and value > 0
        assert abs(m["truth"] - value) < 0.5 * step  # the truth rounds to the answer
        assert m["unit"] in s.question and (f"nearest {step:g} {m['unit']}" in s.question
                                            or (step == 1 and "Answer with an integer." in s.question))
        assert s.question.startswith("Using the scale bar, what is the")
        assert s.calls[1]["arguments"]["scale_bar_length"] == m["bar_value"]
        assert m["bar_value"] in TASK.UNITS[m["unit"]][0]


def test_choice_answers_are_letters_of_increasing_options():
    letter = get_scorer("option_letter")
    answers = Counter()
    for seed in range(120):
        s = TASK.generate(seed, "medium", "choice")
        options = s.meta["options"]
        values = [options[k] for k in "ABCDE"]
        assert s.scorer == "option_letter" and letter(f"<answer>{s.answer}</answer>", s.answer) == 1.0
        assert options[s.answer] == s.meta["answer_value"]
        assert all(b > a and (b - a) / b >= 0.1 for a, b in zip(values, values[1:]))
        assert all(f"{k}. {v:g} {s.meta['unit']}" in s.question for k, v in options.items())
        answers[s.answer] += 1
    assert set(answers) == set("ABCDE")


def test_difficulties_draw_what_the_spec_says():
    easy = [TASK.generate(seed, "easy") for seed in range(40)]
    assert all(s.meta["kind"] == "segment" and s.meta["points"][1] == s.meta["points"][3] for s in easy)
    assert all(0.6 <= s.meta["length_px"] / s.meta["bar_px"] <= 1.6 for s in easy)
    medium = [TASK.generate(seed, "medium") for seed in range(60)]
    ratios = [s.meta["length_px"] / s.meta["bar_px"] for s in medium]
    assert min(ratios) < 0.8 and max(ratios) > 2.0 and all(0.2 <= r <= 4.5 for r in ratios)
    assert sum(s.meta["points"][1] != s.meta["points"][3] for s in medium) > 50  # any direction
    hard = [TASK.generate(seed, "hard") for seed in range(60)]
    assert {s.meta["kind"] for s in hard} == {"circle", "rectangle"}
    assert all(40 <= s.meta["bar_px"] <= 80 for s in hard)
    units = Counter(s.meta["unit"] for s in easy + medium + hard)
    assert set(units) == set(TASK.UNITS)
    assert len({s.meta["font"] for s in easy + medium + hard}) >= 6


def test_audit_rejects_points_off_the_target():
    sample = TASK.generate(3, "medium")
    x1, y1, x2, y2 = sample.calls[1]["arguments"]["points"]
    length = math.dist((x1, y1), (x2, y2))
    short = [x1, y1, round(x2 - 5 * (x2 - x1) / length), round(y2 - 5 * (y2 - y1) / length)]
    with pytest.raises(AuditError):
        audit(_with_measure(sample, points=short), TASK.check)
    circle = next(s for s in (TASK.generate(k, "hard") for k in range(40)) if s.meta["kind"] == "circle")
    x1, y1, x2, y2 = circle.calls[1]["arguments"]["points"]
    r = (x2 - x1) // 2
    chord = [x1 + 2, y1 + r // 2, x2 - 2, y2 + r // 2]  # a chord below the diameter
    with pytest.raises(AuditError):
        audit(_with_measure(circle, points=chord), TASK.check)
    rect = next(s for s in (TASK.generate(k, "hard") for k in range(40)) if s.meta["kind"] == "rectangle")
    x1, y1, x2, y2 = rect.calls[1]["arguments"]["points"]
    center = np.argwhere(np.all(rect.image == rect.meta["rgb"], axis=2))[:, ::-1].mean(axis=0)
    dx, dy = center - [(x1 + x2) / 2, (y1 + y2) / 2]  # the side moved onto the rectangle's mid-line
    mid = [round(x1 + dx), round(y1 + dy), round(x2 + dx), round(y2 + dy)]
    with pytest.raises(AuditError, match="edge"):
        audit(_with_measure(rect, points=mid), TASK.check)


def test_audit_rejects_a_wrong_scale_bar():
    sample = TASK.generate(4, "medium")
    value = sample.meta["bar_value"]
    with pytest.raises(AuditError, match="label says"):
        audit(_with_measure(sample, scale_bar_length=value * 2), TASK.check)
    bx1, by, bx2, _ = sample.calls[1]["arguments"]["scale_bar"]
    with pytest.raises(AuditError, match="bar's ends"):
        audit(_with_measure(sample, scale_bar=[bx1 + 6, by, bx2, by]), TASK.check)
    with pytest.raises(AuditError, match="has no length in"):
        audit(_with_measure(sample, unit="furlong"), TASK.check)
    crop = {"name": "crop", "arguments": {"image_index": 0, "box": [0, 0, 40, 40], "scale": 2.0}}
    with pytest.raises(AuditError, match="crop"):
        audit(replace(sample, calls=(crop, sample.calls[1])), TASK.check)


def test_audit_rejects_a_wrong_answer():
    sample = TASK.generate(5, "medium")
    off = f"{sample.meta['answer_value'] + sample.meta['step']:g}"
    with pytest.raises(AuditError, match="rounded"):
        audit(replace(sample, answer=off), TASK.check)
    choice = TASK.generate(5, "medium", "choice")
    other = next(k for k in "ABCDE" if k != choice.answer)
    with pytest.raises(AuditError, match="is not the option"):
        audit(replace(choice, answer=other), TASK.check)


def test_the_reference_trajectory_is_the_canonical_format():
    trajectory = audit(TASK.generate(1, "hard"), TASK.check)
    roles = [m["role"] for m in trajectory.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    names = [m["tool_calls"][0]["function"]["name"] for m in trajectory.messages if m.get("tool_calls")]
    assert names == ["crop", "measure"]
    assert len(trajectory.images) == 3 and all(i.dtype == np.uint8 for i in trajectory.images)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    with pytest.raises(ValueError, match="answer_format"):
        TASK.generate(0, "easy", "essay")
    with pytest.raises(ValueError, match="seed"):
        TASK.generate("0", "easy")
