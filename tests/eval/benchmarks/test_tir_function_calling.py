"""TIR-Bench's function-calling study (section 4.4): the variant's prompt after the question, the rotate function
of the original image, the return prompt after every call, and an answer without a call ends the episode; every
cell of Table 3 and Figure 3 from one command, resumable, a skipped row counted in every cell."""

import json

import numpy as np
import pytest

from eval.benchmarks.tir_bench.function_calling import VARIANTS, prompts, study_profile
from runtime.episode import Stop, run_episodes
from runtime.profiles import get_profile
from runtime.toolbox import ToolBox
from runtime.trajectory import message_text
from tools.images import demo_image


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_function_track_rotates_the_original_and_returns_the_variants_prompt(variant):
    profile = study_profile(get_profile("qwen2_5_vl"), "function", variant)
    texts = prompts("function", variant)
    toolbox = ToolBox(profile.toolset)
    image = demo_image(40, 24)
    episode = toolbox.start(profile, "How many degrees?\nA. 90\nB. 180", [image])
    call = {"name": "rotate", "arguments": {"degree": 90}}
    replies = [f"<tool_call>\n{json.dumps(call)}\n</tool_call>"] * 2 + ["B"]
    run_episodes([episode], lambda prompts: [replies.pop(0) for _ in prompts], toolbox)
    messages = episode.trajectory.messages
    assert message_text(next(m for m in messages if m["role"] == "user")).endswith(texts["question_suffix"] or "B. 180")
    results = [m for m in messages if m["role"] == "tool"]
    assert len(results) == 2 and all(message_text(m).endswith(texts["return_prompt"]) for m in results)
    np.testing.assert_array_equal(episode.workspace[2], np.rot90(image, -1))  # each call rotates the original
    assert episode.stop_reason is Stop.FINAL_MESSAGE and episode.answer == "B"


def test_the_code_track_uses_the_models_code_tool_or_pyvisions():
    assert study_profile(get_profile("qwen2_5_vl"), "code", "hint").code_tool == "pyvision"
    assert study_profile(get_profile("thyme"), "code", "hint").code_tool == "thyme"
    with pytest.raises(ValueError, match="unknown prompt variant 'loud'"):
        prompts("code", "loud")


# == the whole study from one command ================================================================================
@pytest.fixture(scope="module")
def study_data(tmp_path_factory):
    """Two rotation-game items, one with an image the archive lacks (skipped: it counts in every cell)."""
    from eval.benchmarks.tir_bench.fixture import write_fixture

    folder = write_fixture(tmp_path_factory.mktemp("tir") / "TIR-Bench", per_task=2)
    rows = json.loads((folder / "TIR-Bench.json").read_text())
    broken = [row for row in rows if row["task"] == "rotation_game"][1]
    broken["image_1"] = "data/rotation_game/missing.jpg"
    (folder / "TIR-Bench.json").write_text(json.dumps(rows))
    return folder, str(broken["id"])


def test_one_command_runs_every_cell_of_table_3_and_figure_3_and_resumes(study_data, tmp_path, monkeypatch, capsys):
    from eval.benchmarks.tir_bench.figures import figure3
    from eval.benchmarks.tir_bench.function_calling import TRACKS
    from eval.run_vllm import main
    from eval.rundir import RunDir

    monkeypatch.setenv("TIRLAB_CACHE", str(tmp_path / "cache"))
    folder, broken = study_data
    out = tmp_path / "study"
    argv = ["--suite", "tir_bench", "--study", "function_calling", "--data_dir", str(folder), "--model", "reference",
            "--backend", "reference", "--judge_model", "none", "--out", str(out)]
    assert main(argv) == 0
    assert "TIR-Bench: a subset, 26 rows of the paper's 1215 items" in capsys.readouterr().out
    records = RunDir(out).records()
    cells = [f"{t}/{v}" for t in TRACKS for v in VARIANTS]
    run = [r for r in records if r["stop_reason"] != "skipped"]
    skipped = [r for r in records if r["stop_reason"] == "skipped"]
    assert sorted(r["variant"] for r in run) == sorted(cells) and all(r["score"] == 1.0 for r in run)
    assert sorted(r["id"] for r in skipped) == sorted(f"{broken}@{cell}" for cell in cells)
    assert {r["tool_calls"] for r in run if r["variant"].startswith("function/")} == {1}  # rotate, replayed
    report = (out / "report.md").read_text()
    table = report.split("## TIR-Bench Table 3")[1].split("\n\n")[1].splitlines()
    assert table[2] == "| this run: calls per problem | 0.5 | 0.5 | 0.5 | 0.0 | 0.0 | 0.0 |"
    assert table[3] == "| this run: accuracy (%) | 50.0 | 50.0 | 50.0 | 50.0 | 50.0 | 50.0 |"  # the skipped row: wrong
    assert "| paper: o3 (another model): calls per problem | 0.33 | 1.57 | 3.59 | 6.05 | 5.77 | 5.76 |" in table
    assert "TIR-Bench Table 2" not in report and "(plots/tir_figure3.png)" in report
    assert (out / "plots" / "tir_figure3.png").stat().st_size > 10_000
    ax = figure3(records, tmp_path / "figure3.png").axes[0]
    assert ax.get_ylabel() == "accuracy (%)" and [t.get_text() for t in ax.get_xticklabels()][::3] == [
        "Function P1", "Write code P1"]

    assert main(argv) == 0  # resumed: every cell recorded, nothing runs again
    assert "6 tasks x 1 mode(s); 12 recorded, 0 to run" in capsys.readouterr().out

    some = tmp_path / "options"
    assert main([*argv[:-1], str(some), "--prompt_variant", "options"]) == 0  # one prompt, both tracks
    assert {r["variant"] for r in RunDir(some).records() if r["stop_reason"] != "skipped"} == {
        "function/options", "code/options"}
    rows = (some / "report.md").read_text().split("## TIR-Bench Table 3")[1].splitlines()
    assert "| this run: accuracy (%) | - | - | 50.0 | - | - | 50.0 |" in rows

    for flags in (["--tools", "both"], ["--tasks", "ocr"]):  # Table 3 has no run without tools, nor other tasks
        assert main([*argv[:-1], str(tmp_path / "refused"), *flags]) == 2
        assert "Table 3 has no run without tools" in capsys.readouterr().err


def test_the_study_runs_both_tracks_on_the_vllm_engine_in_one_run(tiny_engine, study_data, tmp_path, monkeypatch):
    """Each cell's own profile on the real engine: the rotate function in the model's call format, or code in
    PyVision's format, in the same run."""
    from eval.config import EvalConfig
    from eval.run_vllm import evaluate, resolve
    from eval.rundir import RunDir

    monkeypatch.setenv("TIRLAB_CACHE", str(tmp_path / "cache"))
    folder, _ = study_data
    out = tmp_path / "engine"
    evaluate(resolve(EvalConfig(suite="tir_bench", study="function_calling", data_dir=str(folder),
                                model=tiny_engine.model, force_tool_calls=1, max_tokens=64, judge_model="none",
                                max_images=4, dtype="float32", out=str(out))), backend=tiny_engine)
    run = [r for r in RunDir(out).records() if r["stop_reason"] != "skipped"]
    assert len(run) == 6 and not any(r["stop_reason"] == "error" for r in run)
    function = [r for r in run if r["variant"].startswith("function/")]
    assert all(r["tool_calls"] == 1 and r["profile"] != "pyvision" for r in function)
    calls = [m for r in function for m in r["trajectory"]["messages"] if m["role"] == "tool"]
    assert {m["name"] for m in calls} == {"rotate"}
    assert {r["profile"] for r in run if r["variant"].startswith("code/")} == {"pyvision"}
    assert "| this run: accuracy (%) |" in (out / "report.md").read_text()
