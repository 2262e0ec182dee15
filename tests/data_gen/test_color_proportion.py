import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import color_proportion as TASK

DIFFICULTIES = ["easy", "medium", "hard"]


def _call(lower, upper, **extra):
    return ({"name": "in_range", "arguments": {"image_index": 0, "space": "rgb", "lower": lower, "upper": upper,
                                               "output": "mask", **extra}},)


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


def test_the_tool_reports_the_share_in_its_data():
    sample = TASK.generate(11, "hard")
    trajectory = audit(sample, TASK.check)
    roles = [m["role"] for m in trajectory.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert trajectory.messages[1]["tool_calls"][0]["function"]["name"] == "in_range"
    text = next(part["text"] for part in trajectory.messages[2]["content"] if part["type"] == "text")
    fraction = float(re.search(r'"fraction": ([0-9.e-]+)', text).group(1))
    truth = (sample.evidence["labels"] == sample.evidence["target"]).mean()
    assert abs(fraction - truth) < 1e-12  # exact colors: the tight range selects exactly the color's pixels
    assert abs(100 * truth - sample.meta["truth_pct"]) < 1e-4


def test_palette_is_distinct_and_the_image_is_exactly_the_palette():
    colors = TASK.COLORS.astype(int)
    gaps = [np.abs(colors[i] - colors[j]).max() for i in range(len(colors)) for j in range(i + 1, len(colors))]
    assert min(gaps) > 2 * TASK.TOLERANCE
    for seed in range(10):
        sample = TASK.generate(seed, "hard")
        assert sample.image.dtype == np.uint8 and sample.image.ndim == 3 and sample.image.shape[2] == 3
        assert np.array_equal(sample.image, TASK.COLORS[sample.evidence["labels"]])
        present = {TASK.NAMES[k] for k in np.unique(sample.evidence["labels"])}
        assert present == set(sample.meta["colors"])


@pytest.mark.parametrize("difficulty,low,high", [("easy", 2, 3), ("medium", 4, 5), ("hard", 6, 8)])
def test_difficulty_sets_the_number_of_colors(difficulty, low, high):
    counts = Counter(len(TASK.generate(seed, difficulty).meta["colors"]) for seed in range(40))
    assert set(counts) <= set(range(low, high + 1)) and len(counts) > 1
    shapes = [len(TASK.generate(seed, difficulty).meta["shapes"]) for seed in range(10)]
    assert all(TASK.SETTINGS[difficulty]["shapes"][0] <= n <= TASK.SETTINGS[difficulty]["shapes"][1] for n in shapes)


def test_answers_have_the_documented_format():
    letters = Counter()
    for seed in range(120):
        sample = TASK.generate(seed, ["easy", "medium", "hard"][seed % 3])
        options, truth = sample.meta["options"], sample.meta["truth_pct"]
        assert sample.answer in "ABCD" and len(sample.answer) == 1 and list(options) == list("ABCD")
        assert options[sample.answer] == round(truth, 1)
        values = sorted(options.values())
        assert all(abs(b - a - TASK.STEP) < 0.051 for a, b in zip(values, values[1:]))
        assert 0 <= values[0] and values[-1] <= 100
        assert sample.meta["color"] in sample.question
        for letter, value in options.items():
            assert f"{letter}. {value:.1f}%" in sample.question
        letters[sample.answer] += 1
    assert all(letters[k] >= 15 for k in "ABCD"), letters  # the letter does not give the answer away


def test_audit_rejects_a_wrong_reference():
    sample = TASK.generate(3, "medium")
    labels = sample.evidence["labels"]
    other = next(name for name in sample.meta["colors"] if name != sample.meta["color"])
    rgb = TASK.PALETTE[other]
    wrong = replace(sample, calls=_call([max(0, v - 10) for v in rgb], [min(255, v + 10) for v in rgb]))
    with pytest.raises(AuditError, match="measured|overlaps"):
        audit(wrong, TASK.check)
    loose = replace(sample, calls=_call([0, 0, 0], [255, 255, 255]))
    with pytest.raises(AuditError, match="measured"):
        audit(loose, TASK.check)
    # a mask of the right size but the wrong place is caught even when the share matches
    shifted = replace(sample, evidence={**sample.evidence, "labels": np.roll(labels, 40, axis=1)})
    with pytest.raises(AuditError, match="overlaps"):
        audit(shifted, TASK.check)
    no_tool = replace(sample, calls=())
    with pytest.raises(AuditError, match="no mask"):
        audit(no_tool, TASK.check)


def test_audit_rejects_a_wrong_answer():
    for seed in range(5):
        sample = TASK.generate(seed, "hard")
        for letter in "ABCD":
            if letter != sample.answer:
                with pytest.raises(AuditError, match="answer"):
                    audit(replace(sample, answer=letter), TASK.check)
        with pytest.raises(AuditError, match="not an option"):
            audit(replace(sample, answer="E"), TASK.check)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="difficulty"):
        TASK.generate(0, "extreme")
    with pytest.raises(ValueError, match="seed"):
        TASK.generate("0", "easy")
