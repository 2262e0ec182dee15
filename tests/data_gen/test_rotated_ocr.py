import json
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from data_gen.sample import AuditError, audit
from data_gen.tasks import get_task
from data_gen.text import ALIGNED_CELL, ALIGNED_CELLS, ALIGNED_HEIGHT, render_aligned, words
from eval.suites.synthetic import synthetic_suite, task_spec
from runtime.tiny_model import toy_words

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
    degree = sample.calls[0]["arguments"]["degree"]
    wrong = replace(sample, calls=({"name": "rotate", "arguments": {"degree": (degree + 90) % 360}},))
    with pytest.raises(AuditError, match="not the upright"):
        audit(wrong, TASK.check)
    tilted = next(s for s in (TASK.generate(k, "medium", "any") for k in range(50)) if s.meta["angle"] % 90)
    degree = tilted.calls[0]["arguments"]["degree"]
    off = replace(tilted, calls=({"name": "rotate", "arguments": {"degree": degree + 4}},))
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


# --- render="aligned": learnable data for toy models trained from scratch


def test_aligned_letters_sit_on_the_token_grid():
    """Each letter's ink lies in its own 16-px column (one merged image token of an 8-px-patch model wide),
    whatever letters are beside it, and a 32 x 96 canvas is 2 x 6 such tokens."""
    for word in ("mwmwmw", "jiqyfl", "abc"):
        image = render_aligned(word)
        assert image.shape == (ALIGNED_HEIGHT, ALIGNED_CELL * ALIGNED_CELLS, 3)
        for k, letter in enumerate(word):
            column = image[:, k * ALIGNED_CELL:(k + 1) * ALIGNED_CELL]
            alone = render_aligned(letter)[:, :ALIGNED_CELL]
            assert np.array_equal(column, alone), (word, k)  # no ink crosses into a neighbour's column
            assert (column < 128).any()
        blank = image[:, len(word) * ALIGNED_CELL:]
        assert (blank == 255).all()
    with pytest.raises(ValueError, match="1 to 6 letters"):
        render_aligned("toolong")


def test_aligned_samples_are_learnable_and_audited():
    samples = [TASK.generate(seed, "medium", render="aligned") for seed in range(400)]
    counts = Counter(s.meta["angle"] for s in samples)
    assert set(counts) == {90, 180, 270}
    assert abs(counts[180] / 400 - 0.5) < 0.08 and abs(counts[90] / 400 - 0.25) < 0.07
    prompt_words = toy_words()
    for sample in samples:
        assert sample.id.startswith("rotated_ocr-aligned-medium-quarter-")
        assert 3 <= len(sample.answer) <= 6 and sample.answer.isalpha() and sample.answer.islower()
        assert sample.answer not in prompt_words
        upright = sample.evidence["upright"]
        assert np.array_equal(upright, render_aligned(sample.answer))
        assert sample.image.shape == ((96, 32, 3) if sample.meta["angle"] in (90, 270) else (32, 96, 3))
    for sample in samples[:50]:
        assert audit(sample, TASK.check).meta["stop_reason"] == "answer"
    assert len({s.answer for s in samples}) > 380
    with pytest.raises(ValueError, match="render"):
        TASK.generate(0, "medium", render="handwritten")


@pytest.mark.parametrize("render", ["aligned", "realistic"])
def test_upright_samples_are_the_upright_render_with_no_reference_call(render):
    """angles="none": what a pretrained reader has seen (the toy pilot's base model learns to read from it)."""
    samples = [TASK.generate(seed, "medium", "none", render) for seed in range(40)]
    for sample in samples:
        assert sample.meta["angle"] == 0 and sample.calls == ()
        assert np.array_equal(sample.image, sample.evidence["upright"])
        assert sample.id.endswith(f"-medium-none-{sample.meta['seed']}")
        trajectory = audit(sample, TASK.check)
        assert trajectory.meta["stop_reason"] == "answer"
        assert not [m for m in trajectory.messages if m["role"] == "tool"]
    if render == "aligned":
        assert all(np.array_equal(s.image, render_aligned(s.answer)) for s in samples)
    # the upright words are drawn apart from the rotated ones of the same seeds
    rotated = [TASK.generate(seed, "medium", "quarter", render) for seed in range(40)]
    assert sum(a.answer == b.answer for a, b in zip(samples, rotated)) < 5
    assert task_spec("rotated_ocr", {"angles": "none", "render": render}) == f"rotated_ocr:angles=none,render={render}"


def test_realistic_samples_did_not_change_with_the_render_option():
    sample = TASK.generate(5, "medium")
    assert sample.id == "rotated_ocr-medium-quarter-5" and sample.meta["render"] == "realistic"
    assert TASK.generate(5, "medium", render="realistic").image.tobytes() == sample.image.tobytes()
    assert TASK.generate(5, "medium", render="aligned").answer != sample.answer


def test_pilot_aligned_export_has_a_disjoint_held_out_split(tmp_path):
    import datasets

    from data_gen.make import GENERATION_FILE
    from data_gen.make import main as make_data

    make_data(["pilot", "--render", "aligned", "--n", "12", "--n-test", "6", "--out", str(tmp_path), "--workers", "1"])
    for form in ("agentic", "direct"):
        config = json.loads((tmp_path / form / GENERATION_FILE).read_text())
        assert config["options"] == {"angles": "quarter", "render": "aligned"}
        splits = datasets.load_from_disk(str(tmp_path / form / "hf"))
        train_ids, test_ids = set(splits["train"]["id"]), set(splits["test"]["id"])
        assert len(train_ids) == 12 and len(test_ids) == 6 and not train_ids & test_ids
        assert all(i.startswith("rotated_ocr-aligned-") for i in train_ids | test_ids)
    # the evaluation's held-out tasks, drawn the same way, on seeds neither split used
    suite = list(synthetic_suite([task_spec(config["task"], config["options"])], per_task=4))
    assert all(t.id.startswith("rotated_ocr-aligned-medium-quarter-2000000") for t in suite)
    assert not {t.id for t in suite} & (train_ids | test_ids)
    assert {t.images[0].shape for t in suite} <= {(32, 96, 3), (96, 32, 3)}
    with pytest.raises(ValueError, match="takes no option"):
        list(synthetic_suite(["rotated_ocr:font=comic"], per_task=1))
    with pytest.raises(ValueError, match="key=value"):
        list(synthetic_suite(["rotated_ocr:aligned"], per_task=1))
