"""The pilot pipeline at toy scale: data_gen -> train/sft.py in both modes at two data scales -> train/pilot.py
(eval/run_vllm.py on every run, the table and Figure 6), on a tiny local Qwen2.5-VL."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from data_gen.make import main as make_data
from data_gen.make import sft_rows
from runtime.tiny_model import build_model
from train.pilot import main as pilot
from train.sft import main as sft
from train.sft import parse

SCALES = (4, 8)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pilot")
    make_data(["pilot", "--n", str(max(SCALES)), "--n-test", "2", "--out", str(root / "data"), "--workers", "1"])
    model = build_model("qwen2_5_vl", root / "model")
    for mode in ("agentic", "direct"):
        for n in SCALES:
            sft(*parse(["--model_name_or_path", str(model), "--dataset_name", str(root / "data"), "--mode", mode,
                        "--max_train_samples", str(n), "--output_dir", str(root / "runs" / f"{mode}-{n}"),
                        "--num_train_epochs", "2", "--per_device_train_batch_size", "2", "--logging_steps", "1",
                        "--learning_rate", "1e-3", "--report_to", "none", "--use_cpu", "--save_strategy", "no"]))
    (root / "runs" / "unfinished").mkdir()  # a run that never wrote its record is not summarized
    return root / "runs"


def test_every_run_is_evaluated_in_its_mode_and_drawn(runs):
    summary = pilot([str(runs), "--per_task", "3", "--backend", "hf", "--max_tokens", "24"])
    assert [(r["mode"], r["train_samples"]) for r in summary["runs"]] == [
        ("agentic", 4), ("agentic", 8), ("direct", 4), ("direct", 8)]
    assert summary["loss_scale"] == 8
    for run in summary["runs"]:
        run_dir = runs / run["name"]
        config = json.loads((run_dir / "eval" / "config.json").read_text())
        assert config["model"] == str(run_dir) and config["tasks"] == ["rotated_ocr"]
        assert config["tools"] == ("on" if run["mode"] == "agentic" else "none")
        assert config["backend"] == "hf" and config["max_pixels"] == 0
        records = [json.loads(line) for line in (run_dir / "eval" / "records.jsonl").read_text().splitlines()]
        assert len(records) == run["eval"]["n"] == 3
        assert run["eval"]["accuracy"] == pytest.approx(sum(r["score"] for r in records) / 3)
        if run["mode"] == "direct":
            assert run["eval"]["tool_call_rate"] == 0
        # the loss curve is the trainer's own log: 2 epochs of n/2 steps
        assert len(run["loss"]) == run["train_samples"] and run["loss"][-1][0] == pytest.approx(2.0)
    assert json.loads((runs / "pilot.json").read_text())["runs"] == summary["runs"]
    assert (runs / "figure6.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (runs / "pilot.md").read_text()
    assert table.count("| agentic |") == 2 and table.count("| direct |") == 2

    # again: every evaluation is found finished and reused as it is
    before = {r["name"]: (runs / r["name"] / "eval" / "records.jsonl").read_text() for r in summary["runs"]}
    again = pilot([str(runs), "--per_task", "3", "--backend", "hf", "--max_tokens", "24"])
    assert again["runs"] == summary["runs"]
    assert before == {name: (runs / name / "eval" / "records.jsonl").read_text() for name in before}


def test_a_failed_evaluation_stops_the_summary_with_what_to_do(runs, capsys):
    with pytest.raises(SystemExit) as stopped:
        pilot([str(runs), "--per_task", "3", "--backend", "no-such-backend"])
    assert stopped.value.code == 1
    assert "the evaluation of" in capsys.readouterr().err


def test_no_finished_run_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "agentic-1000").mkdir()
    with pytest.raises(SystemExit):
        pilot([str(tmp_path)])
    error = capsys.readouterr().err
    assert "no finished SFT run under" in error and "folders there: ['agentic-1000']" in error


def _training_row_and_episode(preset: str, form: str):
    """The pilot's SFT row for the suite's first rotated-OCR task, its messages before the first answer (as
    the eval harness writes messages), and the eval episode of that task under `preset`."""
    from eval.loop import toolboxes
    from eval.presets import get_preset
    from eval.suites.synthetic import synthetic_suite

    task = next(synthetic_suite(("rotated_ocr",), per_task=1))
    row = sft_rows(("rotated_ocr", task.meta["seed"], "medium", {"angles": "quarter"}))[form]
    first_answer = next(k for k, m in enumerate(row["messages"]) if m["role"] == "assistant")
    trained = [{"role": m["role"], "content": [{k: v for k, v in part.items() if v is not None}
                                               for part in m["content"]]} for m in row["messages"][:first_answer]]
    profile = get_preset(preset).profile
    episode = toolboxes(profile)(task, "tools" if form == "agentic" else "no_tools").start(
        profile, task.question, task.images, budgets=profile.budgets)
    return row, trained, episode


@pytest.mark.parametrize("form", ["agentic", "direct"])
def test_training_prompts_are_the_prompts_eval_sends(form):
    """What an SFT row puts before the first answer is exactly the prompt eval/run_vllm.py builds for the task
    (qwen2.5-vl preset; tools on for agentic, none for direct): the trained model is evaluated in its own format."""
    row, trained, episode = _training_row_and_episode("qwen2.5-vl", form)
    prompt = episode.prompt()
    assert trained == prompt.messages
    first_image = np.asarray(Image.open(io.BytesIO(row["images"][0]["bytes"])).convert("RGB"))
    assert len(prompt.images) == 1 and np.array_equal(first_image, prompt.images[0])
    episode.close()


@pytest.mark.parametrize("form", ["agentic", "direct"])
def test_qwen3_vl_sees_the_same_text_in_training_and_eval(form, tmp_path):
    """Qwen3-VL's preset renders tools through the model's own template, the SFT rows carry them in the system
    prompt: the chat template turns both into the same text."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(build_model("qwen3_vl", tmp_path / "model"))
    _, trained, episode = _training_row_and_episode("qwen3-vl", form)
    prompt = episode.prompt()
    render = dict(tokenize=False, add_generation_prompt=True)
    assert processor.apply_chat_template(trained, **render) == processor.apply_chat_template(
        prompt.messages, tools=prompt.tools, **render)
    assert (form == "agentic") == bool(prompt.tools)
    episode.close()


def test_the_sweep_launcher_submits_every_run_then_the_summary(tmp_path):
    import subprocess

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(["bash", str(root / "recipes" / "slurm" / "pilot_sweep.sh")], capture_output=True,
                            text=True, check=True, env={"PATH": "/usr/bin:/bin", "DRY_RUN": "1", "SIZES": "1000 5000",
                                                        "DATA": str(tmp_path / "pilot"), "OUT": "runs/sweep"})
    commands = result.stderr.splitlines()
    assert len(commands) == 1 + 4 + 1  # the data, 2 modes x 2 scales, the summary
    assert "data_gen/make.py\\ pilot" in commands[0]
    for mode in ("direct", "agentic"):
        for n in (1000, 5000):
            assert any(f"{mode}.yaml" in c and f"--max_train_samples {n} --output_dir runs/sweep/{mode}-{n}" in c
                       and "--dependency=afterok:tirlab-pilot-data" in c for c in commands)
    assert "afterok:tirlab-pilot-direct-1000:tirlab-pilot-direct-5000:tirlab-pilot-agentic-1000" in commands[-1]
    assert "train/pilot.py\\ runs/sweep" in commands[-1]
    subprocess.run(["bash", "-n", str(root / "recipes" / "slurm" / "sft.sbatch")], check=True)
