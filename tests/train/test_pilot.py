"""The pilot pipeline at toy scale: data_gen -> train/sft.py in both modes at two data scales -> train/pilot.py
(eval/run_vllm.py on every run, the tables and Figure 6), on a tiny local Qwen2.5-VL; the statistics, arms and
the figure on fake run folders (no training); the toy sweep's recipes and script."""

from __future__ import annotations

import io
import json
import math
import subprocess
from pathlib import Path

import datasets
import numpy as np
import pytest
from PIL import Image

from data_gen.make import main as make_data
from data_gen.make import sft_rows
from runtime.tiny_model import build_model
from train import pilot as pilot_module
from train.pilot import main as pilot
from train.pilot import bootstrap_mean, matched_steps, paired_gap, scale_slope, wilson_interval
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
    base = runs.parent / "model"  # the model every run was fine-tuned from
    summary = pilot([str(runs), "--per_task", "3", "--backend", "hf", "--max_tokens", "24", "--base", str(base)])
    assert [(r["mode"], r["train_samples"]) for r in summary["runs"]] == [
        ("agentic", 4), ("agentic", 8), ("direct", 4), ("direct", 8)]
    assert summary["loss_scale"] == 8
    for run in summary["runs"]:
        run_dir = runs / run["name"]
        config = json.loads((run_dir / "eval" / "config.json").read_text())
        # held-out tasks drawn as the training data was: the record's task spec
        assert run["eval_tasks"] == ["rotated_ocr:angles=quarter,render=realistic"]
        assert config["model"] == str(run_dir) and config["tasks"] == run["eval_tasks"]
        assert config["tools"] == ("on" if run["mode"] == "agentic" else "none")
        assert config["backend"] == "hf" and config["max_pixels"] == 0
        records = [json.loads(line) for line in (run_dir / "eval" / "records.jsonl").read_text().splitlines()]
        assert len(records) == run["eval"]["n"] == 3
        assert run["eval"]["accuracy"] == pytest.approx(sum(r["score"] for r in records) / 3)
        if run["mode"] == "direct":
            assert run["eval"]["tool_call_rate"] == 0
        # the loss curve is the trainer's own log: 2 epochs of n/2 steps, one entry a step
        assert [step for step, _ in run["loss"]] == list(range(1, run["train_samples"] + 1))
        assert run["arms"] == ["equal_steps"]  # same seed, same steps: the pairs of the equal-steps arm
        low, high = run["eval"]["wilson"]
        assert low <= run["eval"]["accuracy"] <= high
    # the base, zero-shot, without tools, on the same held-out tasks: the figure's starting point
    config = json.loads((runs / "base" / "eval" / "config.json").read_text())
    assert config["model"] == str(base) and config["tools"] == "none"
    assert config["tasks"] == ["rotated_ocr:angles=quarter,render=realistic"]
    assert summary["base"]["model"] == str(base) and summary["base"]["eval"]["n"] == 3
    assert json.loads((runs / "pilot.json").read_text())["runs"] == summary["runs"]
    assert (runs / "figure6.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [(c["mode"], c["train_samples"], c["accuracy"]["n"]) for c in summary["cells"]] == [
        ("agentic", 4, 1), ("direct", 4, 1), ("agentic", 8, 1), ("direct", 8, 1)]  # one seed: no interval
    assert all(c["accuracy"]["low"] is None for c in summary["cells"])
    table = (runs / "pilot.md").read_text()
    for mode in ("agentic", "direct"):  # a loss row per cell (arm, mode, samples, steps), a trend row per mode
        assert f"| equal_steps | {mode} | 4 | 4 |" in table and f"| equal_steps | {mode} | 8 | 8 |" in table
        assert f"| equal_steps | {mode} | 4, 8 |" in table
    assert "| agentic-4 | agentic | equal_steps | 4 | 42 |" in table

    # again: every evaluation is found finished and reused as it is
    before = {r["name"]: (runs / r["name"] / "eval" / "records.jsonl").read_text() for r in summary["runs"]}
    again = pilot([str(runs), "--per_task", "3", "--backend", "hf", "--max_tokens", "24", "--base", str(base)])
    assert again["runs"] == summary["runs"]
    assert before == {name: (runs / name / "eval" / "records.jsonl").read_text() for name in before}


def test_a_failed_evaluation_stops_the_summary_with_what_to_do(runs, capsys):
    with pytest.raises(SystemExit) as stopped:
        pilot([str(runs), "--per_task", "3", "--backend", "no-such-backend"])
    assert stopped.value.code == 1
    error = capsys.readouterr().err
    assert "the evaluation of" in error and "no-such-backend" in error  # the log's tail names the cause


def test_no_finished_run_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "agentic-1000").mkdir()
    with pytest.raises(SystemExit):
        pilot([str(tmp_path)])
    error = capsys.readouterr().err
    assert "no finished SFT run under" in error and "folders there: ['agentic-1000']" in error
    with pytest.raises(SystemExit):
        pilot([str(tmp_path), "--base", str(tmp_path / "agentic-1000")])
    assert "--base" in capsys.readouterr().err  # named before anything is evaluated
    with pytest.raises(SystemExit):
        pilot([str(tmp_path), "--restate"])
    assert "is not a pilot summary" in capsys.readouterr().err


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
    assert "--base\\ Qwen/Qwen2.5-VL-7B-Instruct" in commands[-1]  # the recipes' model: the figure's start
    subprocess.run(["bash", "-n", str(root / "recipes" / "slurm" / "sft.sbatch")], check=True)


# ---- statistics, arms and the figure on fake run folders -------------------------------------------------

def _runs(*accuracies: float, n: int = 300) -> list[dict]:
    return [{"correct": round(a * n), "n": n} for a in accuracies]


def test_a_cell_interval_counts_seeds_and_tasks_and_stays_within_0_and_1():
    # identical seeds: only the tasks vary, 5 x 300 binomial draws at 0.5: sd sqrt(.25 / 1500) = 0.0129
    same = bootstrap_mean(_runs(0.5, 0.5, 0.5, 0.5, 0.5))
    assert same["mean"] == 0.5 and same["n"] == 5
    assert (same["high"] - same["low"]) / 2 == pytest.approx(1.96 * math.sqrt(0.25 / 1500), rel=0.1)
    # bimodal seeds (a run reads or it does not): wide, but never past 0 or 1, unlike a t interval
    bimodal = bootstrap_mean(_runs(0.0, 0.98, 0.0, 0.95, 0.0))
    assert 0.0 <= bimodal["low"] < 0.15 and 0.7 < bimodal["high"] <= 1.0
    assert bootstrap_mean(_runs(0, 0, 0)) == {"n": 3, "mean": 0.0, "low": 0.0, "high": 0.0}
    assert bootstrap_mean(_runs(1, 1, 1))["low"] == 1.0
    assert bootstrap_mean(_runs(0.4)) == {"n": 1, "mean": 0.4, "low": None, "high": None}
    assert bootstrap_mean(_runs(0.2, 0.6, 0.9)) == bootstrap_mean(_runs(0.2, 0.6, 0.9))  # a function of the results


def test_the_gap_is_paired_by_seed():
    # seeds differ a lot, but in every pair tool use is 10 points ahead: paired, that is a clear gap
    direct = _runs(0.1, 0.5, 0.8, 0.3, 0.6, n=3000)
    agentic = _runs(0.2, 0.6, 0.9, 0.4, 0.7, n=3000)
    gap = paired_gap(agentic, direct)
    assert gap["mean"] == pytest.approx(0.1) and gap["agentic_ahead"] == 5 and gap["direct_ahead"] == 0
    assert 0.07 < gap["low"] < 0.1 < gap["high"] < 0.13
    unpaired = paired_gap(agentic, direct[1:] + direct[:1])  # the same runs, pairs broken: no clear gap
    assert unpaired["low"] < 0 < unpaired["high"]
    assert paired_gap(_runs(1, 1), _runs(0, 0))["low"] == 1.0
    one = paired_gap(_runs(0.9), _runs(0.2))
    assert one["mean"] == pytest.approx(0.7) and one["low"] is None
    with pytest.raises(ValueError, match="as many agentic as direct"):
        paired_gap(_runs(0.9, 0.8), _runs(0.2))


def test_the_slope_over_data_scales():
    # accuracy rising 10 points per doubling, measured on many tasks: the slope and its interval find it
    rising = {scale: _runs(0.1 * math.log2(scale / 64) + 0.2, 0.1 * math.log2(scale / 64) + 0.2, n=100_000)
              for scale in (64, 320, 640, 960)}
    trend = scale_slope(rising)
    assert trend["scales"] == [64, 320, 640, 960]
    assert trend["slope"] == pytest.approx(0.1, abs=1e-4) and trend["low"] < 0.1 < trend["high"]
    assert trend["high"] - trend["low"] < 0.01
    assert trend["change"]["mean"] == pytest.approx(0.1 * math.log2(15), abs=1e-4)
    # flat but noisy seeds: the interval includes 0
    flat = scale_slope({64: _runs(0.1, 0.9, 0.5), 320: _runs(0.9, 0.1, 0.5), 960: _runs(0.5, 0.1, 0.9)})
    assert flat["low"] < 0 < flat["high"] and -0.05 < flat["slope"] < 0.05
    assert scale_slope({64: _runs(0.5, 0.6)})["slope"] is None


def test_wilson_interval_is_scipys():
    # scipy.stats.binomtest(k, n).proportion_ci(method="wilson")
    assert wilson_interval(8, 10) == pytest.approx((0.4901624715366418, 0.9433178485456248), rel=1e-9)
    assert wilson_interval(173, 200) == pytest.approx((0.8107086162924745, 0.9055342954521209), rel=1e-9)
    low, high = wilson_interval(0, 200)
    assert low == 0 and high == pytest.approx(0.018845326377266575, rel=1e-9)
    assert wilson_interval(0, 300)[0] == 0.0 and wilson_interval(300, 300)[1] == 1.0  # exact at the edges
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(11, 10)


TOKENS_PER_STEP = {"agentic": 10_000, "direct": 2_000}
# (mode, scale, seed, steps) -> accuracy; at scale 100 the agentic accuracies are the scipy example above
FAKE_ACCURACY = {
    ("agentic", 100, 0, 50): 0.62, ("agentic", 100, 1, 50): 0.71, ("agentic", 100, 2, 50): 0.55,
    ("direct", 100, 0, 50): 0.10, ("direct", 100, 1, 50): 0.30, ("direct", 100, 2, 50): 0.20,
    ("direct", 100, 0, 250): 0.60, ("direct", 100, 1, 250): 0.70, ("direct", 100, 2, 250): 0.50,
    ("agentic", 400, 0, 50): 0.90, ("agentic", 400, 1, 50): 0.92, ("agentic", 400, 2, 50): 0.94,
    ("direct", 400, 0, 50): 0.40, ("direct", 400, 1, 50): 0.20, ("direct", 400, 2, 50): 0.30,
    ("direct", 400, 0, 250): 0.95, ("direct", 400, 1, 250): 0.97, ("direct", 400, 2, 250): 0.93,
    ("direct", 100, 0, 120): 0.33,  # neither equal steps nor equal compute: listed, in no arm
}


def fake_run(root: Path, name: str, mode: str, scale: int, seed: int, steps: int, tokens: int | None = None) -> Path:
    run = root / name
    run.mkdir(parents=True)
    tokens = steps * TOKENS_PER_STEP[mode] + seed if tokens is None else tokens  # a batch's tokens vary a little
    (run / "tirlab_sft.json").write_text(json.dumps({
        "mode": mode, "train_samples": scale, "seed": seed, "global_step": steps, "train_tokens": tokens,
        "num_train_epochs": 3.0, "lora": False, "train_runtime_s": steps * 0.5,
        "eval_tasks": ["rotated_ocr:angles=quarter,render=aligned"]}))
    start = 6.0 if mode == "agentic" else 4.0  # the agentic loss starts higher and falls faster
    rate = 0.05 if mode == "agentic" else 0.01
    history = [{"step": s, "loss": start * np.exp(-rate * s) + 0.01 * seed} for s in range(10, steps + 1, 10)]
    (run / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    return run


@pytest.fixture
def fake_sweep(tmp_path, monkeypatch):
    """A finished toy sweep's run folders, evaluated by a stand-in that returns FAKE_ACCURACY on 500 tasks."""
    for mode, scale, seed, steps in FAKE_ACCURACY:
        arm = "-compute" if steps == 250 else "-other" if steps == 120 else ""
        fake_run(tmp_path, f"{mode}-{scale}-s{seed}{arm}", mode, scale, seed, steps)

    def evaluate(run, per_task, eval_args):
        accuracy = FAKE_ACCURACY[run["mode"], run["train_samples"], run["seed"], run["global_step"]]
        correct = round(accuracy * per_task)
        return {"n": per_task, "accuracy": correct / per_task, "correct": correct, "errors": 0,
                "tool_call_rate": float(run["mode"] == "agentic"), "calls_per_episode": 1.0, "turns_mean": 2.0,
                "wilson": list(wilson_interval(correct, per_task))}

    monkeypatch.setattr(pilot_module, "evaluate", evaluate)
    return tmp_path


def test_runs_are_grouped_by_arm_and_seed_with_intervals(fake_sweep):
    summary = pilot([str(fake_sweep), "--per_task", "500", "--jobs", "2"])
    runs = {run["name"]: run for run in summary["runs"]}
    assert runs["agentic-100-s0"]["arms"] == ["equal_steps", "equal_compute"]
    assert runs["direct-100-s0"]["arms"] == ["equal_steps"] and runs["direct-100-s0"]["compute_ratio"] == 0.2
    assert runs["direct-100-s2-compute"]["arms"] == ["equal_compute"]
    assert runs["direct-100-s2-compute"]["compute_ratio"] == pytest.approx(1.0, abs=1e-5)
    assert runs["direct-100-s0-other"]["arms"] == []

    cells = {(c["arm"], c["train_samples"], c["mode"]): c for c in summary["cells"]}
    assert len(cells) == 2 * 2 * 2  # arm x scale x mode; the unmatched run is in none
    agentic = cells["equal_steps", 100, "agentic"]
    assert agentic["seeds"] == [0, 1, 2] and agentic["accuracies"] == [0.62, 0.71, 0.55]
    assert agentic["accuracy"] == bootstrap_mean([runs[f"agentic-100-s{seed}"]["eval"] for seed in (0, 1, 2)])
    assert 0.5 < agentic["accuracy"]["low"] < 0.6267 < agentic["accuracy"]["high"] < 0.75
    assert agentic["reading"] == 3 and cells["equal_steps", 100, "direct"]["reading"] == 0  # at least 50% exact
    assert cells["equal_compute", 100, "agentic"]["accuracies"] == agentic["accuracies"]  # the same reference
    assert cells["equal_compute", 400, "direct"]["steps"] == 250
    assert cells["equal_compute", 400, "direct"]["accuracy"]["mean"] == pytest.approx(0.95)
    assert cells["equal_steps", 100, "direct"]["final_loss"]["n"] == 3

    gaps = {(g["arm"], g["train_samples"]): g for g in summary["gaps"]}
    steps_gap = gaps["equal_steps", 400]
    assert steps_gap["seeds"] == [0, 1, 2]
    assert steps_gap["differences"] == pytest.approx([0.5, 0.72, 0.64])  # paired by seed
    assert steps_gap["gap"] == paired_gap([runs[f"agentic-400-s{seed}"]["eval"] for seed in (0, 1, 2)],
                                          [runs[f"direct-400-s{seed}"]["eval"] for seed in (0, 1, 2)])
    assert steps_gap["gap"]["low"] > 0 and steps_gap["gap"]["agentic_ahead"] == 3  # the gap is real at equal steps
    compute_gap = gaps["equal_compute", 400]["gap"]
    assert compute_gap["low"] < 0 < compute_gap["high"] or compute_gap["high"] < 0  # ... and not at equal compute

    trends = {(t["arm"], t["mode"]): t for t in summary["trends"]}
    assert trends["equal_steps", "agentic"]["scales"] == [100, 400]
    assert trends["equal_steps", "agentic"]["slope"] == pytest.approx((0.92 - 0.6267) / 2, abs=1e-3)  # 2 doublings
    assert trends["equal_steps", "agentic"]["low"] > 0
    findings = {(f["arm"], f["finding"]): f["holds"] for f in summary["findings"]}
    assert findings == {("equal_steps", "tool-use SFT beats direct SFT"): True,
                        ("equal_steps", "direct SFT gains little from more data"): True,
                        ("both", "tool-use SFT keeps improving with data"): True,
                        ("equal_compute", "tool-use SFT beats direct SFT"): False,
                        ("equal_compute", "direct SFT gains little from more data"): False}

    written = json.loads((fake_sweep / "pilot.json").read_text())
    assert written["cells"] == summary["cells"] and written["gaps"] == summary["gaps"]
    assert (fake_sweep / "figure6.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (fake_sweep / "pilot.md").read_text()
    cell = agentic["accuracy"]
    assert f"| 100 | {100 * cell['mean']:.1f} [{100 * cell['low']:.1f}, {100 * cell['high']:.1f}] | 3/3 | " in table
    assert "(3 of 3 seeds ahead)" in table
    assert "| direct-100-s0-other | direct | none | 100 | 0 | 120 |" in table
    assert "| tool-use SFT keeps improving with data | both |" in table and table.rstrip().endswith("| 0 |")

    # the same tables again from pilot.json alone, without evaluating
    (fake_sweep / "pilot.md").unlink()
    restated = pilot([str(fake_sweep), "--restate"])
    assert restated == json.loads(json.dumps(summary)) and (fake_sweep / "pilot.md").read_text() == table


def test_the_loss_band_is_over_seeds(fake_sweep):
    summary = pilot([str(fake_sweep), "--per_task", "500"])
    runs = [r for r in summary["runs"] if r["mode"] == "agentic" and r["train_samples"] == 400]
    steps, mean, low, high = pilot_module.loss_band(runs)
    assert steps == list(range(10, 51, 10)) and summary["loss_scale"] == 400
    first = [run["loss"][0][1] for run in runs]
    assert (mean[0], low[0], high[0]) == pytest.approx((np.mean(first), min(first), max(first)))


def test_two_agentic_runs_of_one_pair_are_a_clear_error(tmp_path, capsys):
    fake_run(tmp_path, "agentic-100-s0", "agentic", 100, 0, 50)
    fake_run(tmp_path, "agentic-100-s0-longer", "agentic", 100, 0, 80)
    with pytest.raises(SystemExit):
        pilot([str(tmp_path)])
    assert "two agentic runs at 100 samples and seed 0" in capsys.readouterr().err


def test_the_run_record_names_are_train_sfts():
    import train.sft

    assert (pilot_module.RUN_RECORD, pilot_module.MERGED) == (train.sft.RUN_RECORD, train.sft.MERGED)


def test_matched_steps_counts_the_direct_steps_for_the_agentic_tokens(tmp_path):
    agentic = fake_run(tmp_path, "agentic", "agentic", 100, 0, 50, tokens=500_001)
    direct = fake_run(tmp_path, "direct", "direct", 100, 0, 50, tokens=100_000)
    assert matched_steps(agentic, direct) == 251  # 2,000 tokens a step; rounded up
    with pytest.raises(ValueError, match="expected a direct run"):
        matched_steps(agentic, agentic)
    with pytest.raises(ValueError, match="not a finished SFT run"):
        matched_steps(agentic, tmp_path / "missing")


# ---- the toy sweep ---------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "recipes" / "pilot_rotated_ocr" / "toy_cpu"


@pytest.mark.parametrize("mode", ["agentic", "direct"])
def test_the_from_scratch_recipes_train_fixed_steps(mode):
    script_args, training_args, model_args = parse(["--config", str(TOY / f"{mode}.yaml")])
    assert training_args.mode == mode and model_args.model_name_or_path == "toy:qwen2_5_vl"
    assert training_args.per_device_train_batch_size == 32 and training_args.gradient_accumulation_steps == 1
    assert training_args.learning_rate == 3e-3 and training_args.lr_scheduler_type == "warmup_stable_decay"
    assert training_args.lr_scheduler_kwargs == {"num_decay_steps": 100} and training_args.max_steps == 400
    assert 0 < training_args.warmup_steps < 1 and training_args.optim.startswith("adamw")
    assert model_args.dtype == "float32" and training_args.use_cpu and not training_args.bf16
    assert training_args.save_strategy == "no" and training_args.report_to == []


@pytest.mark.parametrize("mode", ["agentic", "direct"])
def test_the_from_base_recipes_train_five_epochs_from_the_shipped_base(mode):
    script_args, training_args, model_args = parse(["--config", str(TOY / f"{mode}_from_base.yaml")])
    assert training_args.mode == mode
    assert ROOT / model_args.model_name_or_path == TOY / "checkpoints" / "base"
    assert training_args.num_train_epochs == 5 and training_args.max_steps == -1  # the paper's 5 epochs
    assert training_args.per_device_train_batch_size == 16 and training_args.learning_rate == 3e-3
    assert training_args.lr_scheduler_type == "cosine" and training_args.warmup_steps == 0.1
    assert model_args.dtype == "float32" and training_args.use_cpu and training_args.save_strategy == "no"


def test_the_base_recipe_pretrains_a_toy_reader_on_upright_words(tmp_path):
    script_args, training_args, model_args = parse(["--config", str(TOY / "base.yaml")])
    assert training_args.mode == "direct" and model_args.model_name_or_path == "toy:qwen2_5_vl"
    assert (script_args.max_train_samples, training_args.max_steps) == (4000, 1000)
    # the base's data: upright words (no rotation, no reference call), the recipe run for 2 steps on 4 of them
    make_data(["sft", "--task", "rotated_ocr", "--forms", "direct", "--option", "angles=none",
               "--option", "render=aligned", "--n", "4", "--n-test", "0", "--out", str(tmp_path / "data"),
               "--workers", "1"])
    rows = datasets.load_from_disk(str(tmp_path / "data" / "direct" / "hf"))["train"]
    assert all(row["images"][0].size == (96, 32) for row in rows)  # upright: as wide as the word
    sft(*parse(["--config", str(TOY / "base.yaml"), "--dataset_name", str(tmp_path / "data"),
                "--max_train_samples", "4", "--max_steps", "2", "--per_device_train_batch_size", "2",
                "--output_dir", str(tmp_path / "base")]))
    record = json.loads((tmp_path / "base" / "tirlab_sft.json").read_text())
    assert record["from_scratch"] == "toy:qwen2_5_vl" and record["global_step"] == 2
    assert record["eval_tasks"] == ["rotated_ocr:angles=none,render=aligned"]


def test_fine_tuning_from_the_base_takes_the_steps_of_its_epochs_on_a_cosine_schedule(tmp_path):
    """The paper's design: a fixed number of epochs, so the steps follow the data (5 epochs of 32 samples at a
    batch of 16: 2 steps an epoch, 10 in all), warmup then cosine decay to 0 over exactly those steps."""
    make_data(["pilot", "--render", "aligned", "--n", "32", "--n-test", "0", "--out", str(tmp_path / "data"),
               "--workers", "1"])
    sft(*parse(["--config", str(TOY / "direct_from_base.yaml"), "--dataset_name", str(tmp_path / "data"),
                "--max_train_samples", "32", "--logging_steps", "1", "--output_dir", str(tmp_path / "run")]))
    record = json.loads((tmp_path / "run" / "tirlab_sft.json").read_text())
    assert record["global_step"] == 10 and record["train_samples"] == 32 and record["from_scratch"] is None
    assert record["model_name_or_path"] == str(TOY.relative_to(ROOT) / "checkpoints" / "base")
    rates = [entry["learning_rate"] for entry in json.loads((tmp_path / "run" / "trainer_state.json").read_text())[
        "log_history"] if "learning_rate" in entry]
    # the rate each step used: one warmup step (10%) from 0, the full rate, then cosine decay to near 0
    assert len(rates) == 10 and rates[0] == 0 and rates[1] == pytest.approx(3e-3)
    assert all(a > b for a, b in zip(rates[1:], rates[2:])) and rates[-1] < 0.05 * 3e-3


STUB = '''#!{python}
"""A stand-in for the sweep's python: records every command; sft.py and make.py leave finished outputs."""
import json, math, os, subprocess, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[0] == "-c":
    sys.exit(subprocess.call([{python!r}, *args]))
value = lambda flag: args[len(args) - 1 - args[::-1].index(flag) + 1]  # the last one wins, as in argparse
if args[0].endswith("make.py"):
    for form in ("agentic", "direct"):
        Path(value("--out"), form).mkdir(parents=True, exist_ok=True)
        Path(value("--out"), form, "generation.json").write_text(json.dumps({{"n": int(value("--n"))}}))
elif args[0].endswith("sft.py"):
    mode = Path(value("--config")).stem.removesuffix("_from_base")
    steps, seed = int(value("--max_steps")), int(value("--seed"))
    if steps == -1:  # the epochs decide, at the from-base recipes' batch of 16
        steps = int(value("--num_train_epochs")) * math.ceil(int(value("--max_train_samples")) / 16)
    Path(value("--output_dir")).mkdir(parents=True)
    Path(value("--output_dir"), "tirlab_sft.json").write_text(json.dumps({{
        "mode": mode, "global_step": steps, "train_tokens": steps * {{"agentic": 10000, "direct": 2000}}[mode] + seed,
        "omp": os.environ.get("OMP_NUM_THREADS")}}))
'''


def _sweep(tmp_path, **variables) -> tuple[subprocess.CompletedProcess, Path, dict]:
    import sys

    stub = tmp_path / "python"
    stub.write_text(STUB.format(python=sys.executable))
    stub.chmod(0o755)
    log = tmp_path / "commands.jsonl"
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(stub), "STUB_LOG": str(log), "OUT": str(tmp_path / "sweep"),
           "JOBS": "2", **variables}
    return subprocess.run(["bash", str(TOY / "sweep.sh")], env=env, capture_output=True, text=True), log, env


def _trained(log: Path) -> tuple[list[list[str]], dict[str, list[str]]]:
    commands = [c for c in map(json.loads, log.read_text().splitlines()) if c[0] != "-c"]  # python -c: helpers
    return commands, {Path(c[c.index("--output_dir") + 1]).name: c for c in commands if c[0] == "train/sft.py"}


def test_the_sweep_from_scratch_trains_both_arms_for_fixed_steps_then_summarizes(tmp_path):
    result, log, env = _sweep(tmp_path, FROM="scratch", SCALES="100 400", SEEDS="0 1", STEPS="50", BASE="/ignored")
    assert result.returncode == 0, result.stderr
    commands, trained = _trained(log)
    assert commands[0][0] == "data_gen/make.py" and commands[0][commands[0].index("--n") + 1] == "400"
    assert "aligned" in commands[0]
    assert sorted(trained) == sorted(f"{mode}-{scale}-s{seed}{arm}" for scale in (100, 400) for seed in (0, 1)
                                     for mode, arm in (("agentic", ""), ("direct", ""), ("direct", "-compute")))
    for name, command in trained.items():
        assert command[command.index("--config") + 1] == f"{TOY.relative_to(ROOT)}/{name.split('-')[0]}.yaml"
        assert "--model_name_or_path" not in command  # the recipe's fresh toy model
        steps = int(command[command.index("--max_steps") + 1])
        seed = int(command[command.index("--seed") + 1])
        # equal compute: the agentic run's 50 x 10,000 + seed tokens at (50 x 2,000 + seed) / 50 tokens a step
        assert steps == (math.ceil((500_000 + seed) * 50 / (100_000 + seed)) if name.endswith("-compute") else 50)
        record = json.loads((tmp_path / "sweep" / "runs" / name / "tirlab_sft.json").read_text())
        assert record["omp"] == "1"  # one thread a run: two runs share the two cores
    summary = commands[-1]
    assert summary[:2] == ["train/pilot.py", str(tmp_path / "sweep" / "runs")] and "--base" not in summary
    assert summary[summary.index("--jobs") + 1] == "2" and summary[summary.index("--per_task") + 1] == "300"

    # again: the data and every finished run are kept, only the summary runs
    log.write_text("")
    subprocess.run(["bash", str(TOY / "sweep.sh")], env=env, capture_output=True, text=True, check=True)
    again = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c[0] for c in again if c[0] != "-c"] == ["train/pilot.py"]


def test_the_sweep_from_the_base_trains_a_fixed_number_of_epochs_at_every_scale(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "model.safetensors").write_bytes(b"")
    result, log, _ = _sweep(tmp_path, BASE=str(base), SEEDS="3")
    assert result.returncode == 0, result.stderr
    commands, trained = _trained(log)
    assert commands[0][commands[0].index("--n") + 1] == "960"  # the largest of 64 : 320 : 640 : 960 (1 : 5 : 10 : 15)
    equal_steps = {name: c for name, c in trained.items() if not name.endswith("-compute")}
    assert sorted(equal_steps) == sorted(f"{mode}-{scale}-s{seed}" for mode in ("agentic", "direct")
                                         for scale in (64, 320, 640, 960) for seed in (3,))
    for name, command in trained.items():
        mode, scale = name.split("-")[:2]
        assert command[command.index("--config") + 1] == f"{TOY.relative_to(ROOT)}/{mode}_from_base.yaml"
        assert command[command.index("--model_name_or_path") + 1] == str(base)  # every run fine-tunes BASE
        steps = json.loads((tmp_path / "sweep" / "runs" / name / "tirlab_sft.json").read_text())["global_step"]
        if name in equal_steps:  # 5 epochs: the steps grow with the data
            assert command[command.index("--num_train_epochs") + 1] == "5" and "-1" == command[
                command.index("--max_steps") + 1]
            assert steps == 5 * math.ceil(int(scale) / 16)
        else:  # equal compute: the steps that match the agentic run's tokens at the direct run's tokens a step
            epoch_steps, seed = 5 * math.ceil(int(scale) / 16), int(name.split("-s")[1][0])
            assert steps == math.ceil((epoch_steps * 10_000 + seed) * epoch_steps / (epoch_steps * 2_000 + seed))
    assert len(trained) == 2 * 4 + 4  # both modes at 4 scales, and the equal-compute direct runs
    summary = commands[-1]
    assert summary[summary.index("--base") + 1] == str(base)  # its zero-shot accuracy: the figure's start

    (tmp_path / "none").mkdir()
    result, _, _ = _sweep(tmp_path / "none", BASE=str(tmp_path / "missing"))
    assert result.returncode == 2 and "no base model at" in result.stderr and "train_base.sh" in result.stderr
