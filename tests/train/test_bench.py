"""train/bench.py end to end on the tiny model: it times the steps train/sft.py's trainer takes and counts the
tokens they train on. No timing assertions: speed is the benchmark's business, not CI's."""

from __future__ import annotations

import pytest

from data_gen.make import main as make_data
from runtime.tiny_model import build_model
from train.bench import main, run
from train.data import SFTEncoder, load_sft_dataset


def test_the_benchmark_counts_every_token_of_an_epoch(tmp_path):
    from transformers import AutoProcessor

    model = build_model("qwen2_5_vl", tmp_path / "model")
    make_data(["pilot", "--n", "8", "--n-test", "0", "--out", str(tmp_path / "data"), "--workers", "1"])
    result = run(str(model), str(tmp_path / "data"), workers=1, batch=2, steps=3, skip=1, out=str(tmp_path / "out"))
    assert result["steps"] == 3 and 0 <= result["data_wait_share"] < 1 and result["step_s"] > 0
    # 4 steps of batch 2 are one epoch of the 8 rows: every non-padding token once
    encoder = SFTEncoder(AutoProcessor.from_pretrained(model))
    lengths = [len(encoder(row)["input_ids"]) for row in load_sft_dataset(str(tmp_path / "data"), "agentic")]
    assert result["tokens_seen"] == sum(lengths)
    assert result["tokens_per_s"] == pytest.approx(result["tokens_per_step"] / result["step_s"])


def test_the_benchmark_prints_its_table(capsys):
    main(["--batch", "2", "--steps", "2", "--skip", "1", "--workers", "0"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 0 |")]
    assert len(rows) == 1 and "<= 5%" in rows[0] and rows[0].count("%") == 3  # collate, data wait, target


def test_the_step_timer_waits_for_queued_device_work_before_each_timestamp(monkeypatch):
    """On a GPU the step's kernels finish after on_step_end is called: the timer syncs first, so their time is
    the step's compute, not the next step's data wait. Here `sync` stands for the device finishing one
    second of queued work."""
    from types import SimpleNamespace

    from train.bench import StepTimer

    clock = [0.0]
    monkeypatch.setattr("train.bench.time.perf_counter", lambda: clock[0])

    def device_finishes_queued_work():
        clock[0] += 1.0

    timer = StepTimer(sync=device_finishes_queued_work)
    for step in range(3):
        timer.on_step_begin(None, SimpleNamespace(num_input_tokens_seen=10 * step), None)
        timer.on_step_end(None, SimpleNamespace(num_input_tokens_seen=10 * (step + 1)), None)
    result = timer.result(skip=1)
    assert result["step_s"] == 2.0 and result["data_wait_share"] == 0.5  # 1 s compute, 1 s wait (the begin sync)
