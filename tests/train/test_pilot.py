"""The pilot pipeline at toy scale: data_gen -> train/sft.py in both modes at two data scales -> train/pilot.py
(eval/run_vllm.py on every run, the tables and Figure 6), on a tiny local Qwen2.5-VL; the statistics, arms and
the figure on fake run folders (no training); the toy sweep's recipes and script."""

from __future__ import annotations

import io
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from data_gen.make import main as make_data
from data_gen.make import sft_rows
from runtime.tiny_model import build_model
from train import pilot as pilot_module
from train.pilot import main as pilot
from train.pilot import matched_steps, mean_interval, t_quantile, wilson_interval
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
    assert json.loads((runs / "pilot.json").read_text())["runs"] == summary["runs"]
    assert (runs / "figure6.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [(c["mode"], c["train_samples"], c["accuracy"]["n"]) for c in summary["cells"]] == [
        ("agentic", 4, 1), ("direct", 4, 1), ("agentic", 8, 1), ("direct", 8, 1)]  # one seed: no t interval
    assert all(c["accuracy"]["low"] is None for c in summary["cells"])
    table = (runs / "pilot.md").read_text()
    assert table.count("| equal_steps | agentic |") == 2 and table.count("| equal_steps | direct |") == 2
    assert "| agentic-4 | agentic | equal_steps | 4 | 42 |" in table

    # again: every evaluation is found finished and reused as it is
    before = {r["name"]: (runs / r["name"] / "eval" / "records.jsonl").read_text() for r in summary["runs"]}
    again = pilot([str(runs), "--per_task", "3", "--backend", "hf", "--max_tokens", "24"])
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


# ---- statistics, arms and the figure on fake run folders -------------------------------------------------

# scipy 1.17.1: scipy.stats.t.ppf(0.975, df)
SCIPY_T_975 = {1: 12.706204736174694, 2: 4.302652729749462, 3: 3.1824463052837078, 4: 2.7764451051977934,
               9: 2.262157162798205, 29: 2.045229642132703}


@pytest.mark.parametrize("df", sorted(SCIPY_T_975))
def test_t_quantile_matches_scipy(df):
    assert t_quantile(0.975, df) == pytest.approx(SCIPY_T_975[df], rel=1e-9)


def test_mean_interval_is_scipys_t_interval():
    # scipy.stats.t.interval(0.95, 2, loc=mean, scale=sd / sqrt(3)) for these three accuracies
    stats = mean_interval([0.62, 0.71, 0.55])
    assert stats["n"] == 3 and stats["mean"] == pytest.approx(0.6266666666666667)
    assert stats["sd"] == pytest.approx(0.08020806277010639)
    assert (stats["low"], stats["high"]) == pytest.approx((0.4274187931530078, 0.8259145401803256), rel=1e-9)
    single = mean_interval([0.4])
    assert single["mean"] == 0.4 and single["low"] is single["high"] is single["half_width"] is None


def test_wilson_interval_is_scipys():
    # scipy.stats.binomtest(k, n).proportion_ci(method="wilson")
    assert wilson_interval(8, 10) == pytest.approx((0.4901624715366418, 0.9433178485456248), rel=1e-9)
    assert wilson_interval(173, 200) == pytest.approx((0.8107086162924745, 0.9055342954521209), rel=1e-9)
    low, high = wilson_interval(0, 200)
    assert low == 0 and high == pytest.approx(0.018845326377266575, rel=1e-9)
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
    assert (agentic["accuracy"]["low"], agentic["accuracy"]["high"]) == pytest.approx(
        (0.4274187931530078, 0.8259145401803256), rel=1e-9)
    assert cells["equal_compute", 100, "agentic"]["accuracies"] == agentic["accuracies"]  # the same reference
    assert cells["equal_compute", 400, "direct"]["steps"] == 250
    assert cells["equal_compute", 400, "direct"]["accuracy"]["mean"] == pytest.approx(0.95)
    assert cells["equal_steps", 100, "direct"]["final_loss"]["n"] == 3

    gaps = {(g["arm"], g["train_samples"]): g for g in summary["gaps"]}
    steps_gap = gaps["equal_steps", 400]
    assert steps_gap["seeds"] == [0, 1, 2]
    assert steps_gap["differences"] == pytest.approx([0.5, 0.72, 0.64])  # paired by seed
    assert steps_gap["gap"] == mean_interval(steps_gap["differences"])
    assert steps_gap["gap"]["low"] > 0  # the gap is real at equal steps ...
    compute_gap = gaps["equal_compute", 400]["gap"]
    assert compute_gap["low"] < 0 < compute_gap["high"] or compute_gap["high"] < 0  # ... and not at equal compute

    written = json.loads((fake_sweep / "pilot.json").read_text())
    assert written["cells"] == summary["cells"] and written["gaps"] == summary["gaps"]
    assert (fake_sweep / "figure6.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (fake_sweep / "pilot.md").read_text()
    assert "| 100 | 3 | 62.7 [42.7, 82.6] | 20.0 [-4.8, 44.8] | 42.7 [21.2, 64.1] |" in table
    assert "| direct-100-s0-other | direct | none | 100 | 0 | 120 |" in table
    assert "| 400 | 3 | 92.0 [87.0, 97.0] |" in table and table.rstrip().endswith("| 0 |")


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

TOY = Path(__file__).resolve().parents[2] / "recipes" / "pilot_rotated_ocr" / "toy_cpu"


@pytest.mark.parametrize("mode", ["agentic", "direct"])
def test_the_toy_recipes_are_the_issues_settings(mode):
    script_args, training_args, model_args = parse(["--config", str(TOY / f"{mode}.yaml")])
    assert training_args.mode == mode and model_args.model_name_or_path == "toy:qwen2_5_vl"
    assert training_args.per_device_train_batch_size == 32 and training_args.gradient_accumulation_steps == 1
    assert training_args.learning_rate == 3e-3 and training_args.lr_scheduler_type == "warmup_stable_decay"
    assert training_args.lr_scheduler_kwargs == {"num_decay_steps": 100}
    assert 0 < training_args.warmup_steps < 1 and training_args.optim.startswith("adamw")
    assert model_args.dtype == "float32" and training_args.use_cpu and not training_args.bf16
    assert training_args.save_strategy == "no" and training_args.report_to == []


STUB = '''#!{python}
"""A stand-in for the sweep's python: records every command; sft.py and make.py leave finished outputs."""
import json, os, subprocess, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[0] == "-c":
    sys.exit(subprocess.call([{python!r}, *args]))
value = lambda flag: args[args.index(flag) + 1]
if args[0].endswith("make.py"):
    for form in ("agentic", "direct"):
        Path(value("--out"), form).mkdir(parents=True, exist_ok=True)
        Path(value("--out"), form, "generation.json").write_text(json.dumps({{"n": int(value("--n"))}}))
elif args[0].endswith("sft.py"):
    mode = Path(value("--config")).stem
    steps, seed = int(value("--max_steps")), int(value("--seed"))
    Path(value("--output_dir")).mkdir(parents=True)
    Path(value("--output_dir"), "tirlab_sft.json").write_text(json.dumps({{
        "mode": mode, "global_step": steps, "train_tokens": steps * {{"agentic": 10000, "direct": 2000}}[mode] + seed,
        "omp": os.environ.get("OMP_NUM_THREADS")}}))
'''


def test_the_sweep_trains_both_arms_then_summarizes(tmp_path):
    import sys

    stub = tmp_path / "python"
    stub.write_text(STUB.format(python=sys.executable))
    stub.chmod(0o755)
    log = tmp_path / "commands.jsonl"
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(stub), "STUB_LOG": str(log), "OUT": str(tmp_path / "sweep"),
           "SCALES": "100 400", "SEEDS": "0 1", "STEPS": "50", "JOBS": "2"}
    result = subprocess.run(["bash", str(TOY / "sweep.sh")], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    commands = [c for c in map(json.loads, log.read_text().splitlines()) if c[0] != "-c"]  # python -c: helpers
    assert commands[0][0] == "data_gen/make.py" and commands[0][commands[0].index("--n") + 1] == "400"
    assert "aligned" in commands[0]
    trained = {Path(c[c.index("--output_dir") + 1]).name: c for c in commands if c[0] == "train/sft.py"}
    assert sorted(trained) == sorted(f"{mode}-{scale}-s{seed}{arm}" for scale in (100, 400) for seed in (0, 1)
                                     for mode, arm in (("agentic", ""), ("direct", ""), ("direct", "-compute")))
    for name, command in trained.items():
        steps = int(command[command.index("--max_steps") + 1])
        seed = int(command[command.index("--seed") + 1])
        # equal compute: the agentic run's 50 x 10,000 + seed tokens at (50 x 2,000 + seed) / 50 tokens a step
        assert steps == (math.ceil((500_000 + seed) * 50 / (100_000 + seed)) if name.endswith("-compute") else 50)
        record = json.loads((tmp_path / "sweep" / "runs" / name / "tirlab_sft.json").read_text())
        assert record["omp"] == "1"  # one thread a run: two runs share the two cores
    summary = commands[-1]
    assert summary[:2] == ["train/pilot.py", str(tmp_path / "sweep" / "runs")]
    assert summary[summary.index("--jobs") + 1] == "2" and summary[summary.index("--per_task") + 1] == "300"

    # again: the data and every finished run are kept, only the summary runs
    log.write_text("")
    subprocess.run(["bash", str(TOY / "sweep.sh")], env=env, capture_output=True, text=True, check=True)
    again = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c[0] for c in again if c[0] != "-c"] == ["train/pilot.py"]
