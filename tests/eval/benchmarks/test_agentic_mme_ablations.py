"""Agentic-MME's published layout as the loader reads it (joins checked, counts against the paper's), the paper's
ablations run from the CLI settings on the fixture with scripted replies (Table 4's tool availability, Table 5's
oracle guidance), merged into one report with one row per setting beside the paper's, and the paper's figures drawn
from the records."""

from __future__ import annotations

import json
import shutil

import matplotlib
import pytest
from PIL import Image

from eval.benchmarks.agentic_mme import AgenticMme, guidance_steps, tables
from eval.benchmarks.agentic_mme import data as amme_data
from eval.benchmarks.agentic_mme.fixture import TASKS, write_fixture
from eval.config import EvalConfig
from eval.run_vllm import evaluate, main, parse, resolve
from eval.rundir import RunDir
from tests.eval.benchmarks.helpers import ScriptedBackend


@pytest.fixture(scope="module")
def amme_data_dir(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("amme-ablations") / "Agentic-MME")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRLAB_CACHE", str(tmp_path / "cache"))


def config(data, **settings) -> EvalConfig:
    """The run's configuration as the command line gives it (`--ablation image_only ...`)."""
    argv = ["--suite", "agentic_mme", "--data_dir", str(data), "--web_replay", str(data / "web_replay.jsonl"),
            "--model", "scripted", "--backend", "openai", "--base_url", "http://unused", "--max_active", "1",
            "--judge_model", "none"]
    for name, value in settings.items():
        argv += [f"--{name}", *(value if isinstance(value, list) else [str(value)])]
    return resolve(parse(argv))


def call(name: str, **arguments) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


def tool_replies(record: dict) -> list[str]:
    return [part["text"] for m in record["trajectory"]["messages"] if m["role"] == "tool"
            for part in m["content"] if part["type"] == "text"]


def test_the_loader_checks_its_joins_and_the_papers_counts(amme_data_dir, tmp_path):
    tasks, skipped, _, loaded = amme_data.load(str(amme_data_dir))
    assert loaded["counts"].startswith("Agentic-MME: differs from the paper's 418 items")
    assert "level L1: 5 here, 203 in the paper" in loaded["counts"] and "(0098)" in loaded["counts"]
    assert loaded["flags"] == [
        "json/0099.json holds task_id 'fixture_0002', whose number is not the file's (99); its images are "
        "image_0099*, by the file's number", "1 image(s) that no task file's number picks: image_0100.png"]
    # a clean copy of part of the data is a subset; two files with one number are both refused, naming each other
    folder = tmp_path / "copy"
    shutil.copytree(amme_data_dir, folder)
    for name in ("0097.json", "0098.json", "0099.json", "extra.json"):
        (folder / "json" / name).unlink()
    for name in ("image_0099.png", "image_0100.png"):
        (folder / "images" / name).unlink()
    tasks, skipped, _, loaded = amme_data.load(str(folder))
    assert loaded == {"counts": "Agentic-MME: a subset, 6 rows of the paper's 418 items (total all: 6 here, 418 in "
                                "the paper; level L1: 2 here, 203 in the paper; level L2: 2 here, 134 in the paper; "
                                "level L3: 2 here, 81 in the paper)", "flags": []}
    (folder / "json" / "6.json").write_text(json.dumps(TASKS[5]), encoding="utf-8")
    tasks, skipped, _, loaded = amme_data.load(str(folder))
    reasons = {s.id: s.reason for s in skipped}
    assert "0006" not in {t.id for t in tasks} and set(reasons) == {"0006", "6"}
    assert "also json/6.json's" in reasons["0006"] and "also json/0006.json's" in reasons["6"]


def test_oracle_cues_are_read_from_image_cause_and_guidance_masks_the_answers(amme_data_dir, tmp_path):
    tasks, _, _, _ = amme_data.load(str(amme_data_dir), cues=True)
    cues = {t.id: [p.name for p in t.meta["cue_images"]] for t in tasks}
    assert cues["0003"] == ["image_0003.png"] and cues["0006"] == []  # 0006 has no checkpoint, so no cue
    # the golden answer (1999) and the answers a search checkpoint names (Acme) are masked, whole words only
    assert guidance_steps(TASKS[5]) == ["Identify the logo", "Search the founding year (Expected: [MASKED])",
                                        "Crop the coloured block"]
    assert guidance_steps(TASKS[3])[1] == "Search the block's maker (expected to find: [MASKED])"
    folder = tmp_path / "no-cues"
    shutil.copytree(amme_data_dir, folder, ignore=shutil.ignore_patterns("image_cause"))
    with pytest.raises(FileNotFoundError, match="no task has a ground-truth intermediate image"):
        amme_data.load(str(folder), cues=True)


def test_ablation_settings_are_checked(amme_data_dir):
    with pytest.raises(ValueError, match="unknown --ablation 'perception_only'.*image_only.*stepwise_guidance"):
        AgenticMme.from_config(config(amme_data_dir, ablation="perception_only"))
    with pytest.raises(ValueError, match="Perception-only row is the run with --tools none"):
        AgenticMme.from_config(config(amme_data_dir, ablation="image_only", tools="both"))
    with pytest.raises(ValueError, match="search_only runs in Atm mode only"):
        AgenticMme.from_config(config(amme_data_dir, ablation="search_only", track="gen"))
    with pytest.raises(ValueError, match="local runner"):
        AgenticMme.from_config(config(amme_data_dir, ablation="image_only", preset="thyme"))
    suite = AgenticMme.from_config(config(amme_data_dir, ablation="stepwise_guidance", track="gen"))
    assert suite.variant_name == "gen-stepwise_guidance"
    assert suite.describe()["counts"].startswith("Agentic-MME: differs") and "image_0100.png" in \
        suite.describe()["flags"]


@pytest.fixture(scope="module")
def ablation_runs(amme_data_dir, tmp_path_factory):
    """Every ablation of Tables 4 and 5 on the Level-1 tasks (0001, 0002) with scripted replies, plus the plain run
    with its no-tool baseline: each run's backend, by name."""
    root = tmp_path_factory.mktemp("amme-ablation-runs")
    scripts = {"full": ({"tools": "both"}, ["<answer>red</answer>", "<answer>1</answer>", "red", "2"]),
               "image_only": ({"ablation": "image_only"},
                              [call("google_search", query="red"), "<answer>red</answer>", "<answer>1</answer>"]),
               "search_only": ({"ablation": "search_only"},
                               [call("crop", image_index=0, bbox_2d=[0, 0, 500, 500]), "<answer>blue</answer>",
                                "<answer>1</answer>"]),
               "visual_cues": ({"ablation": "visual_cues"}, ["<answer>red</answer>", "<answer>1</answer>"]),
               "stepwise_guidance": ({"ablation": "stepwise_guidance"}, ["<answer>red</answer>", "<answer>1</answer>"])}
    backends = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIRLAB_CACHE", str(root / "cache"))
        for name, (settings, replies) in scripts.items():
            backends[name] = ScriptedBackend(replies)
            evaluate(config(amme_data_dir, tasks=["L1"], out=str(root / name), **settings), backend=backends[name])
    return root, backends


def test_tool_availability_runs_offer_and_answer_as_the_runner_does(ablation_runs):
    root, backends = ablation_runs
    image_only = {r["id"]: r for r in RunDir(root / "image_only").records()}
    offered = {t["function"]["name"] for t in backends["image_only"].sent[0][0].tools}
    assert "crop" in offered and not offered & {"google_search", "google_lens_search", "fetch_webpage"}
    assert tool_replies(image_only["0001"]) == ["Error: Search is not enabled"]  # the runner without --enable_search
    assert image_only["0001"]["variant"] == "atm-image_only" and image_only["0001"]["prediction"] == "red"
    search_only = {r["id"]: r for r in RunDir(root / "search_only").records()}
    offered = {t["function"]["name"] for t in backends["search_only"].sent[0][0].tools}
    assert offered == {"google_search", "google_lens_search", "fetch_webpage"}
    assert tool_replies(search_only["0001"]) == ["Error: Unknown tool: crop"]


def test_oracle_runs_show_the_cue_image_and_the_masked_steps(ablation_runs):
    root, backends = ablation_runs
    cue_prompt = backends["visual_cues"].sent[0][0]
    assert len(cue_prompt.images) == 2 and cue_prompt.images[1].shape == (24, 32, 3)  # the input, then its cue
    turn = cue_prompt.messages[-1]["content"][-1]["text"]
    assert turn.endswith("Answer with one word.\n\n[Image 1: ground-truth intermediate image from the reference "
                         "solution]")
    steps = backends["stepwise_guidance"].sent[0][0].messages[-1]["content"][-1]["text"]
    assert steps.endswith("solution]\n\nReference solution, step by step (answer-related words are masked as "
                          "[MASKED]):\n1. Crop the coloured block")
    record = next(r for r in RunDir(root / "visual_cues").records() if r["id"] == "0001")
    assert record["cue_images"] == 1 and record["images_made"] == [] and record["variant"] == "atm-visual_cues"


def test_merged_ablations_report_one_row_per_setting_beside_the_papers_and_draw_its_figures(ablation_runs):
    root, _ = ablation_runs
    runs = [root / name for name in ("full", "image_only", "search_only", "visual_cues", "stepwise_guidance")]
    assert main(["report", *map(str, runs)]) == 0
    report = (root / "full" / "report.md").read_text()
    table4 = report.split("## Agentic-MME Table 4")[1].split("##")[0]
    assert [line.split("|")[1].strip() for line in table4.splitlines() if line.startswith("| this run")] == [
        "this run: Perception-only (no tools)", "this run: Atm Full", "this run: Atm Image-only",
        "this run: Atm Search-only"]
    # 0002 right of the 2 tasks and 3 skipped rows (0001's null tolerance leaves it unscored, as the reference does)
    assert "| this run: Atm Image-only | 20.0 | 20.0 | - | - |" in table4
    assert "| paper: Qwen3-VL-235B Image-only (another model) | 36.93 | 57.67 | 25.58 | 6.25 |" in table4
    table5 = report.split("## Agentic-MME Table 5")[1].split("##")[0]
    assert "| this run: Atm + Stepwise Guidance |" in table5 and "| this run: Atm Full (baseline) |" in table5
    assert "| paper: Gemini-3-Flash + Visual Cues (another model) | 58.37 |" in table5
    table3 = report.split("## Agentic-MME Table 3")[1].split("##")[0]
    assert "Image-only" not in table3 and "this run: Atm |" in table3  # the ablations stay out of Table 3
    figures = report.split("## The paper's figures")[1]
    for name in ("accuracy", "process", "density", "overthink"):
        path = root / "full" / "plots" / f"agentic_mme_level_{name}.png"
        assert f"(plots/{path.name})" in figures and Image.open(path).size[0] >= 600


def test_the_figures_put_the_papers_points_for_the_same_model_beside_ours(ablation_runs, tmp_path):
    root, _ = ablation_runs
    records = [r for name in ("full", "image_only") for r in RunDir(root / name).records()]
    with matplotlib.rc_context({"text.parse_math": False}):
        drawn = tables.figures(records, {"model": "Qwen/Qwen3-VL-8B-Thinking"}, tmp_path)
    assert [name for _, name in drawn] == ["agentic_mme_level_accuracy.png", "agentic_mme_level_process.png",
                                           "agentic_mme_level_density.png", "agentic_mme_level_overthink.png"]
    assert all((tmp_path / name).stat().st_size > 10_000 for _, name in drawn)


def test_runs_of_both_tracks_merged_count_the_no_tool_baseline_once(ablation_runs):
    root, _ = ablation_runs
    atm = [r for name in ("full", "image_only") for r in RunDir(root / name).records()]
    # the same runs made in Gen mode, each with its own no-tool baseline (--tools both): the same tasks again, the
    # baseline answering right this time
    gen = [{**r, "variant": r["variant"].replace("atm", "gen", 1),
            **({"score": 1.0} if r["mode"] == "no_tools" else {})} for r in atm]
    alone = tables.sections(atm, {"model": "scripted"})
    merged = tables.sections(atm + gen, {"model": "scripted"})

    def rows(sections, table: str, label: str) -> list[str]:
        text = next(s for s in sections if s.startswith(f"## Agentic-MME {table}"))
        return [line for line in text.splitlines() if line.startswith(f"| {label}")]

    (perception,) = rows(merged, "Table 4", "this run: Perception-only")  # once, not once per track
    assert rows(alone, "Table 4", "this run: Perception-only") == [perception]
    assert rows(merged, "Table 3", "this run: Base") == rows(alone, "Table 3", "this run: Base")
    assert len(rows(merged, "Table 4", "this run: Gen Image-only")) == 1
