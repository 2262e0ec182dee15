"""VisualToolBench's ablations and figures from the CLI on the fixture: the main setting, the weak system prompt, no
vision tool, the atomic vision tools (single-turn, as Table 14) and no tools, each a scripted run judged by the
scripted judge, merged by `run_vllm.py report` into one report with a row per setting beside the paper's (Table 14,
Figure 7) and Figures 3-7 drawn; the loader's count check and its refusal of rows whose fields disagree."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from eval.benchmarks.visualtoolbench import ABLATIONS, VISION_TOOL, data, figures, system_prompt
from eval.benchmarks.visualtoolbench.fixture import write_fixture
from eval.rundir import RunDir
from eval.run_vllm import evaluate, main, parse, resolve
from tests.eval.benchmarks.test_visualtoolbench_runs import CROP, ScriptedModel, call, listed_image

MODEL = "gpt-5"  # a model of the paper's Tables 3 and 14 and Figure 7, so its rows come beside ours
SETTINGS = {  # run folder -> (command-line settings, the scripted model's replies per task)
    "main": ([], {"vtb_fixture_s0": [lambda p: call(VISION_TOOL, code=CROP.format(path=listed_image(p))), "16."]}),
    "weak": (["--prompt_variant", "weak"], {}),
    "no_vision": (["--ablation", "no_vision_tools"],
                  {"vtb_fixture_s0": [call("calculator", expression="2 * 8"), "16."],
                   "vtb_fixture_s1": [call(VISION_TOOL, code="print(1)")]}),
    "atomic": (["--toolset", "visualtoolbench", "--tasks", "single"],
               {"vtb_fixture_s0": [call("crop_image", image_index=0, box=[0, 0, 32, 24]) +
                                   call("rotate_image", angle=90), "16."]}),
    "no_tools": (["--tools", "none"], {}),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("vtb-ablations")
    fixture = write_fixture(root / "VisualToolBench")
    done = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIRLAB_CACHE", str(root / "cache"))
        for name, (flags, script) in SETTINGS.items():
            model = ScriptedModel(script)
            config = resolve(parse(["--suite", "visualtoolbench", "--data_dir", str(fixture), "--model", MODEL,
                                    "--preset", "qwen2.5-vl", "--judge_model", "same", "--max_images", "8",
                                    "--out", str(root / name), *flags]))
            done[name] = (root / name, {r["id"]: r for r in evaluate(config, backend=model)}, model)
    return done


def test_each_setting_runs_as_the_paper_describes_it(runs):
    main_run, weak, no_vision, atomic = (runs[k][1:] for k in ("main", "weak", "no_vision", "atomic"))
    assert {r.get("variant") for r in main_run[0].values()} == {None}
    systems = {key: prompt.messages[0]["content"][0]["text"] for key, prompt in weak[1].prompts
               if not key.startswith("judge-")}
    # App. D.2's weak prompt, word for word (the preset puts the tools after it, as Qwen2.5-VL's template would)
    assert systems and all(text.startswith(system_prompt("low") + "\n\n# Tools") for text in systems.values())
    assert {r["variant"] for r in weak[0].values()} == {"weak prompt, general vision tool"}
    offered = [t["function"]["name"] for t in no_vision[0]["vtb_fixture_s0"]["trajectory"]["tools"]]
    assert VISION_TOOL not in offered and "calculator" in offered and len(offered) == 5
    assert no_vision[0]["vtb_fixture_s1"]["prediction"] == f"Processing Error: '{VISION_TOOL}'"
    crop = atomic[0]["vtb_fixture_s0"]
    names = [t["function"]["name"] for t in crop["trajectory"]["tools"]]
    assert VISION_TOOL not in names and {"crop_image", "apply_filter", "python_interpreter"} <= set(names)
    assert len(crop["trajectory"]["images"]) == 3 and crop["image_operations"] == {"cropping": 1, "rotation": 1}
    assert set(atomic[0]) == {"vtb_fixture_s0", "vtb_fixture_s1", "vtb_fixture_s2"}  # single-turn only
    assert crop["variant"] == "strong prompt, atomic vision tools" and crop["score"] == 1.0
    assert main_run[0]["vtb_fixture_s0"]["image_operations"] == {"cropping": 1}


def test_a_merged_report_has_one_row_per_setting_beside_the_papers(runs):
    folders = [runs[k][0] for k in SETTINGS]
    assert main(["report", *map(str, folders)]) == 0
    text = (folders[0] / "report.md").read_text()
    assert "## VisualToolBench Table 14: single-turn APR (%), general vs atomic vision tools" in text
    assert "| this run: strong prompt, atomic vision tools | 100.00 |" in text
    assert re.search(r"\| paper: GPT-5, atomic vision tools \(not like for like: judge same here, o4-mini in the "
                     r"paper\) \| 18\.15 \| 20\.69 \| 14\.05 \| 17\.07 \| 18\.49 \| 20\.95 \|", text)
    assert re.search(r"\| paper: GPT-5, general vision tool \([^|]*\) \| 23\.88 \|", text)
    assert "| tasks | 3 | 1 | 0 | 1 | 1 | 0 |" in text  # Table 14: the single-turn tasks only
    figure_7 = text.split("## VisualToolBench Figure 7")[1].split("\n## ")[0]
    for label, setting in (("this run", "strong prompt"), ("this run: weak prompt, general vision tool", "weak prompt"),
                           ("this run: strong prompt, no vision tool", "no vision tool"),
                           ("this run, without tools", "no tools")):
        assert f"| {label} | {setting} |" in figure_7
    assert "| this run: strong prompt, no vision tool | no vision tool | 83.33 | 66.67 | 100.00 | 6 |" in figure_7
    assert re.search(r"\| paper: GPT-5[^|]* \| strong prompt \(Table 3\) \| 17\.05 \|", figure_7)
    assert "VisualToolBench: a subset, 6 rows of the paper's 1204 items" in text
    for name in ("figure_3_apr_by_category.png", "figure_4_apr_vs_tool_use.png", "figure_5_image_operations.png",
                 "figure_6_general_vs_atomic.png", "figure_7_ablations.png"):
        assert f"(plots/{name})" in text and (folders[0] / "plots" / name).stat().st_size > 10_000


def test_the_figures_have_the_papers_axes(runs, tmp_path):
    records = [r for name in SETTINGS for r in RunDir(runs[name][0]).records()]
    drawn = figures.drawn(records, tmp_path)
    assert sorted(drawn) == [3, 4, 5, 6, 7]
    labels = {number: [(ax.get_xlabel(), ax.get_ylabel()) for ax in figure.axes]
              for number, (_, _, figure) in drawn.items()}
    assert labels[3] == labels[6] == labels[7] == [("", "APR (%)")] and labels[5] == [("", "operations")]
    assert labels[4] == [("tool-call proactivity (TCP)", "APR (%)"), ("tool-call success rate (TCSR)", "APR (%)"),
                         ("tool calls per task (TCV)", "APR (%)")]
    ticks = {n: [t.get_text() for t in drawn[n][2].axes[0].get_xticklabels()] for n in (3, 5, 7)}
    assert ticks[3][:5] == ["Region Switch Q&A", "Hybrid Tool-use", "Follow-up Test", "Temporal Reasoning",
                            "Progressive Reasoning"]
    assert ticks[5] == list(figures.OPERATIONS)
    assert ticks[7][:4] == ["strong prompt", "weak prompt", "no vision tool", "no tools"]
    paper = [t.get_text() for t in drawn[4][2].axes[0].texts if t.get_text().startswith("paper: ")]
    assert len(paper) == len(figures.FIGURE_4_MODELS)


@pytest.mark.parametrize("flags,error", [
    (["--prompt_variant", "medium"], "strong, weak"), (["--ablation", "no_search"], ", ".join(ABLATIONS)),
    (["--toolset", "agentic_mme"], "the one tool set it takes is 'visualtoolbench'"),
    (["--toolset", "visualtoolbench", "--ablation", "no_vision_tools"], "give one of them"),
    (["--prompt_variant", "weak", "--tools", "none"], "--prompt_variant weak changes the run with tools"),
    (["--ablation", "no_vision_tools", "--tools", "none"], "--tools none has none")])
def test_unknown_or_conflicting_settings_are_refused(flags, error, tmp_path):
    fixture = write_fixture(tmp_path / "vtb")
    with pytest.raises(ValueError, match=error):
        evaluate(resolve(parse(["--suite", "visualtoolbench", "--data_dir", str(fixture), "--model", MODEL,
                                "--out", str(tmp_path / "run"), *flags])), backend=ScriptedModel({}))


def test_operations_are_classified_from_the_code_and_the_atomic_tools():
    cell = ("from PIL import Image, ImageEnhance, ImageDraw\nim = Image.open(p)\nc = im.crop((0, 0, 9, 9))\n"
            "c = ImageEnhance.Brightness(c).enhance(1.5)\nImageDraw.Draw(c).rectangle((1, 1, 3, 3))\n"
            "arr = np.array(im)[10:20, 5:50]\nc.transpose(Image.FLIP_LEFT_RIGHT)")
    calls = [(VISION_TOOL, json.dumps({"code": cell})), (VISION_TOOL, {"code": "print(np.mean(a))"}),
             ("resize_image", {}), ("adjust_sharpness", {}), ("calculator", {})]
    assert figures.image_operations(calls) == {"cropping": 1, "brightness": 1, "editing": 1, "flipping": 1,
                                               "others": 2, "resizing": 1}


def full_copy(fixture, folder, rows: int) -> list[dict]:
    """`rows` single-turn rows in download_dataset.py's layout, each on the fixture's first image, with the
    paper's turn kinds, domains and categories in its proportions as far as they go."""
    template = json.loads((fixture / "data" / "single_turn" / "dataset.json").read_text())[0]
    (folder / "data" / "single_turn").mkdir(parents=True)
    shutil.copytree(fixture / "data" / "single_turn" / "images", folder / "data" / "single_turn" / "images")
    out, n = [], 0
    plan = [("single-turn", d, c) for d, c in (("stem", "region_switch"), ("medical", "hybrid_tool_use"))]
    for turncase, domain, focus in plan * (rows // 2):
        out.append({**template, "id": f"t{n}", "prompt_category": domain, "eval_focus": focus, "turncase": turncase})
        n += 1
    (folder / "data" / "single_turn" / "dataset.json").write_text(json.dumps(out))
    return out


def test_the_counts_name_what_differs_from_the_papers_table_2(tmp_path):
    fixture = write_fixture(tmp_path / "fixture")
    _, _, _, counts = data.load(str(fixture))
    assert counts.startswith("VisualToolBench: a subset, 6 rows of the paper's 1204 items (total all: 6 here, 1204 in "
                             "the paper; turncase single-turn: 3 here, 603 in the paper; turncase multi-turn: 3 here, "
                             "601 in the paper; domain STEM: 2 here, 238 in the paper;")
    rows = full_copy(fixture, tmp_path / "big", 1300)
    assert len(rows) == 1300
    _, skipped, _, counts = data.load(str(tmp_path / "big"))
    assert counts.startswith("VisualToolBench: differs from the paper's 1204 items: total all: 1300 here, 1204 in "
                             "the paper; turncase single-turn: 1300 here, 603 in the paper; domain STEM: 650 here")
    assert "category Region Switch Q&A: 650 here, 281 in the paper" in counts and skipped == []


def test_rows_whose_fields_disagree_are_skipped_with_the_disagreement(tmp_path):
    fixture = write_fixture(tmp_path / "fixture")
    path = fixture / "data" / "multi_turn" / "dataset.json"
    rows = json.loads(path.read_text())
    rows += [{**rows[0], "id": "short_rubrics", "rubrics_by_turn": rows[0]["rubrics_by_turn"][:1]},
             {**rows[0], "id": "wrong_turncase", "turncase": "single-turn"},
             {**rows[0], "id": "extra_answer", "turn_golden_answers": [*rows[0]["turn_golden_answers"], "more"]},
             {**rows[0], "id": "extra_images", "images_by_turn_paths": rows[0]["images_by_turn_paths"] * 2},
             {**rows[0], "id": "fewer_turns", "num_turns": 1}]
    path.write_text(json.dumps(rows))
    tasks, skipped, _, counts = data.load(str(fixture))
    reasons = {s.id: s.reason for s in skipped}
    assert len(tasks) == 6 and set(reasons) == {"short_rubrics", "wrong_turncase", "extra_answer", "extra_images",
                                                "fewer_turns"}
    assert "rubrics_by_turn" in reasons["short_rubrics"] and "1 entries for 2 turn(s)" in reasons["short_rubrics"]
    assert "'single-turn' disagrees with the 2 turn_prompts" in reasons["wrong_turncase"]
    assert "turn_golden_answers" in reasons["extra_answer"] and "images_by_turn_paths" in reasons["extra_images"]
    assert "num_turns" in reasons["fewer_turns"]
    assert "5 row(s) could not be loaded (short_rubrics, wrong_turncase" in counts


def test_only_the_test_splits_parquet_is_read(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    old = [{"id": "old", "prompt": "the earlier layout", "golden_answer": "", "rubrics": "{}"}]
    pq.write_table(pa.Table.from_pylist(old), tmp_path / "vistoolbench_1204.parquet")
    with pytest.raises(FileNotFoundError, match="only vistoolbench_1204.parquet, which no test split reads"):
        data.load(str(tmp_path))
