"""The viewer's files, without a browser: the regions calls named (as the runtime read them), the index and chunks,
rebuilds, datasets, the report's link and the command line's errors."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from data_gen.make import main as make_data
from runtime.profiles import get_profile
from runtime.toolbox import ToolBox
from tests.viewer.runs import HOSTILE, make_run
from tools.images import demo_image
from tools.toolsets import get_toolset
from viewer import ViewerError, view
from viewer.episodes import from_dataset, from_records
from viewer.page import write_viewer
from viewer.regions import call_region, reply_region, toolset_of

ROOT = Path(__file__).resolve().parents[2]


def _index(page: Path) -> dict:
    return json.loads(page.read_text(encoding="utf-8").split('id="tirlab-index">')[1].split("</script>")[0])


def _chunk(page: Path, number: int = 0) -> list[dict]:
    text = (page.with_name(page.stem + "_files") / "chunks" / f"{number:05d}.js").read_text(encoding="utf-8")
    return json.loads(text[text.index(", ") + 2:text.rindex(");")])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("run")
    return path, make_run(path)


SIZES = {0: (200, 100), 1: (50, 40), 2: (400, 300)}  # image -> (width, height)


@pytest.mark.parametrize("toolset, profile, name, arguments, workspace, expected", [
    # Qwen2.5-VL: pixels on the latest image
    ("default", "qwen2_5_vl", "crop", {"box": [20, 10, 120, 60]}, 1, (0, [0.1, 0.1, 0.6, 0.6])),
    # Qwen3-VL: 0-1000 on the latest image (image 2 of 3)
    ("default", "qwen3_vl", "crop", {"box": [250, 0, 750, 500]}, 3, (2, [0.25, 0.0, 0.75, 0.5])),
    # the tool set's own units, an explicit image, corners in any order, clamped to the image
    ("default", None, "crop", {"image_index": 1, "box": [40, 30, 10, 0], "units": "pixels"}, 3,
     (1, [0.2, 0.0, 0.8, 0.75])),
    ("default", None, "crop", {"image_index": 1, "box": [60, 30, 10, 0]}, 3, None),  # its bounds: "error"
    ("default", "qwen2_5_vl", "crop", {"image_index": 1, "box": [60, 30, 10, 0]}, 3,  # the profile clamps
     (1, [0.2, 0.0, 1.0, 0.75])),
    # DeepEyes zooms on the original whatever the workspace holds; a 10-pixel box grows to 28 about its center
    ("deepeyes", "deepeyes", "image_zoom_in_tool", {"bbox_2d": [10, 10, 20, 20], "label": "x"}, 3,
     (0, [0.005, 0.01, 0.145, 0.29])),
    ("default", None, "draw_box", {"box": [100, 0, 500, 1000], "units": "norm1000"}, 1, (0, [0.1, 0.0, 0.5, 1.0])),
    ("default", "qwen2_5_vl", "rotate", {"angle": 90}, 1, None),  # no region
    ("default", "qwen2_5_vl", "crop", {"box": [300, 300, 400, 400]}, 1, None),  # outside: the crop failed
    ("default", "qwen2_5_vl", "crop", {"image_index": 5, "box": [0, 0, 10, 10]}, 2, None),  # no such image
    ("default", "qwen2_5_vl", "crop", "{not json", 1, None),
    ("agentic_mme", None, "crop", {"image_index": 0, "bbox_2d": [0, 0, 500, 500]}, 1, None),  # its reply says
])
def test_a_call_names_the_region_the_runtime_cut(toolset, profile, name, arguments, workspace, expected):
    arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
    region = call_region(get_toolset(toolset), profile, name, arguments, workspace, lambda i: SIZES[i])
    assert (region and (region["image"], region["box"])) == (expected or None)


def test_a_benchmark_tools_reply_names_its_region():
    reply = json.dumps({"ok": "true", "op": "crop", "source_image_index": 1, "bbox_absolute": [5, 4, 25, 40]})
    assert reply_region(reply, 2, lambda i: SIZES[i]) == {"image": 1, "box": [0.1, 0.1, 0.5, 1.0]}
    assert reply_region(reply, 1, lambda i: SIZES[i]) is None  # image 1 was not there
    assert reply_region('{"bbox_absolute": "x", "source_image_index": 0}', 1, lambda i: SIZES[i]) is None
    assert reply_region("Error: Invalid image_index 3", 1, lambda i: SIZES[i]) is None


def test_the_tool_set_is_known_from_the_schemas_shown():
    for name in ("default", "deepeyes", "tir_rotate", "agentic_mme", "vtc_bench"):
        assert toolset_of(get_toolset(name).schemas()).name == name
        assert toolset_of(get_toolset(name).schemas()[:1]) is not None
    changed = get_toolset("deepeyes").schemas()
    changed = [{**changed[0], "function": {**changed[0]["function"], "description": "something else"}}]
    assert toolset_of(changed) is None and toolset_of([]) is None and toolset_of([{"x": 1}]) is None


def test_each_episode_is_indexed_and_its_turns_chunked(run):
    path, records = run
    page = path / "report.html"
    index = _index(page)
    assert [(r["id"], r["g"], r["st"], r["calls"]) for r in index["rows"]] == [
        (r["id"], r["mode"], {1.0: "correct", 0.0: "wrong", 0.5: "partial", None: "unscored"}[r["score"]],
         r["tool_calls"]) for r in records]
    assert all((page.parent / row["thumb"]).is_file() for row in index["rows"])
    episodes = _chunk(page)
    crop = episodes[0]["messages"][1]["calls"][0]
    assert crop["name"] == "crop" and crop["region"]["box"] == [0.1, 0.16667, 0.9, 0.58333]
    assert (page.parent / crop["region"]["image"]).is_file()
    assert episodes[0]["scores"] == {"official": 1.0, "strict": 0.0}
    tool = episodes[0]["messages"][2]
    assert tool["role"] == "tool" and tool["name"] == "crop" and "image" in tool["parts"][0]
    assert "<script>" not in page.read_text().split('id="tirlab-index">')[1].split("</script>")[0]
    assert HOSTILE in json.dumps(_index(page))  # kept, as text


def test_a_rebuild_replaces_the_chunks_and_keeps_the_thumbnails(run, tmp_path):
    path, records = run
    few = tmp_path / "few"
    make_run(few, modes=("tools",))
    assert len(_index(view([few]))["rows"]) == 6
    thumbs = sorted((few / "report_files" / "thumbs").iterdir())
    stamps = [t.stat().st_mtime_ns for t in thumbs]
    lines = (few / "records.jsonl").read_text().splitlines()
    (few / "records.jsonl").write_text(lines[0] + "\n")
    assert [r["id"] for r in _index(view([few]))["rows"]] == ["task-0"]
    assert [t.stat().st_mtime_ns for t in thumbs] == stamps
    assert [p.name for p in (few / "report_files" / "chunks").iterdir()] == ["00000.js"]
    assert len(_chunk(few / "report.html")) == 1
    assert [p.name for p in (few / "report_files").iterdir() if p.name not in ("chunks", "thumbs")] == []


def test_long_model_text_is_cut_for_the_page(run, tmp_path):
    path, records = run
    record = {**records[0], "prediction": "x" * 100_000, "question": "q" * 5_000}
    episode = from_records([record], [path / "images"])[0]
    assert len(episode["prediction"]) < 21_000 and episode["prediction"].endswith("more characters]")
    row = _index(write_viewer(tmp_path / "p.html", [episode], "t"))["rows"][0]
    assert len(row["q"]) == 300


def test_a_missing_image_is_named(run, tmp_path):
    path, records = run
    with pytest.raises(ViewerError, match=r"image \w+\.png is in none of"):
        from_records(records[:1], [tmp_path])


def test_the_report_links_the_viewer_and_stands_without_it(run, tmp_path):
    path, records = run
    report = (path / "report.md").read_text()
    assert "[report.html](report.html)" in report and "report.html#a=tools&b=no_tools" in report
    from eval.report import write_report
    write_report(tmp_path, records, {})  # the images are elsewhere: the numbers are still reported
    text = (tmp_path / "report.md").read_text()
    assert "The episode viewer was not written: ViewerError: image" in text and "## Headline" in text


def test_a_dataset_export_of_each_layout(tmp_path):
    pilot, rl = tmp_path / "pilot", tmp_path / "rl"
    make_data(["pilot", "--render", "aligned", "--n", "3", "--n-test", "1", "--out", str(pilot), "--workers", "1"])
    make_data(["rl", "--task", "rotated_ocr", "--n", "2", "--n-test", "0", "--option", "angles=quarter",
               "--option", "render=aligned", "--out", str(rl), "--workers", "1"])
    agentic = from_dataset(pilot / "agentic", tmp_path / "images")
    assert [e["group"] for e in agentic] == ["agentic test"] + ["agentic train"] * 3
    first = agentic[1]
    assert first["calls"] == 1 and first["tools"] == ["rotate"] and first["status"] == "reference"
    assert first["category"] == "rotated_ocr" and first["prediction"] == f"<answer>{first['truth']}</answer>"
    tool_turn = next(m for m in first["messages"] if m["role"] == "user" and len(first["messages"]) > 2
                     and m is not first["messages"][1])
    assert any("image" in p for p in tool_turn["parts"])
    direct = from_dataset(pilot / "direct", tmp_path / "images", limit=2)
    assert [e["calls"] for e in direct] == [0, 0, 0]  # test 1, train 2 of 3
    for layout in ("trl", "verl"):
        rows = from_dataset(rl / layout, tmp_path / "images")
        assert len(rows) == 2 and rows[0]["truth"] and rows[0]["question"].startswith("What")
        assert [p for m in rows[0]["messages"] for p in m["parts"] if "image" in p]
    assert _index(pilot / "agentic" / "viewer.html")["note"].endswith("(the first 1000 rows of each split)")


def test_the_command_line_names_the_problem(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "viewer", *args], capture_output=True, text=True, cwd=ROOT)

    result = cli(str(tmp_path))
    assert result.returncode == 2 and "is not a run directory" in result.stderr and "Traceback" not in result.stderr
    result = cli(str(tmp_path), str(tmp_path))
    assert result.returncode == 2 and "--out" in result.stderr


def test_a_dataset_tool_call_names_its_region(tmp_path):
    """An agentic SFT row (the hermes rendering: tools in the system prompt, calls as text) whose call crops."""
    from data_gen.export import export, to_dataset
    from data_gen.sft import agentic_row
    from runtime.episode import run_episodes

    toolbox = ToolBox("default")
    episode = toolbox.start(get_profile("qwen2_5_vl"), "q", [demo_image(80, 100)])
    replies = ['<tool_call>\n{"name": "crop", "arguments": {"box": [10, 20, 60, 60]}}\n</tool_call>',
               "<answer>x</answer>"]
    run_episodes([episode], lambda prompts: [replies[min(episode.turns, 1)]], toolbox)
    row = {**agentic_row(episode.trajectory), "id": "crop-0", "form": "agentic"}
    export({"train": to_dataset([row])}, tmp_path / "agentic", {}, "test")
    (shown,) = from_dataset(tmp_path / "agentic", tmp_path / "images")
    (call,) = [c for m in shown["messages"] for c in m["calls"]]
    assert call["name"] == "crop" and call["region"]["box"] == [0.1, 0.25, 0.6, 0.75]  # 100 wide, 80 high
    assert call["region"]["image"] == next(p["image"] for m in shown["messages"] for p in m["parts"] if "image" in p)


def test_a_report_of_two_runs_links_each_runs_images(tmp_path):
    """make run's report of both toy models: each model's run in its own folder, one report above them."""
    from eval.report import write_report

    agentic, direct = make_run(tmp_path / "agentic", modes=("tools",)), make_run(tmp_path / "direct", ("no_tools",))
    write_report(tmp_path, agentic + direct, {}, [tmp_path / "agentic" / "images", tmp_path / "direct" / "images"])
    assert [r["g"] for r in _index(tmp_path / "report.html")["rows"]] == ["tools"] * 6 + ["no_tools"] * 6
    linked = {p["image"] for e in _chunk(tmp_path / "report.html") for m in e["messages"] for p in m["parts"]
              if "image" in p}
    assert linked and all(link.startswith("agentic/images/") and (tmp_path / link).is_file() for link in linked)
    shutil.rmtree(tmp_path / "agentic")  # the no-tool episodes' images are also in the direct run's own folder
    write_report(tmp_path, direct, {}, [tmp_path / "agentic" / "images", tmp_path / "direct" / "images"])
    linked = {p["image"] for e in _chunk(tmp_path / "report.html") for m in e["messages"] for p in m["parts"]
              if "image" in p}
    assert linked and all(link.startswith("direct/images/") and (tmp_path / link).is_file() for link in linked)


def test_odd_numbers_and_text_cost_nothing(run, tmp_path):
    """NaN rewards (TRL's for a reward function that returned None), infinity, lone surrogates a model's bytes
    decode to, a missing mode: the page is written, and such a score is no score."""
    path, records = run
    odd = [{**records[0], "score": float("nan"), "scores": {"official": float("inf"), "strict": None},
            "rewards": {"accuracy": float("nan")}, "reward": float("-inf"), "latency_s": float("nan"),
            "prediction": "abc\ud800def", "category": "cat\udfff"},
           {**records[1], "mode": None, "id": "\ud83d"}]
    page = write_viewer(tmp_path / "odd.html", from_records(odd, [path / "images"]), "t\ud800")
    rows = _index(page)["rows"]
    assert rows[0]["st"] == "unscored" and rows[0]["score"] is None and "lat" not in rows[0] and "rew" not in rows[0]
    assert rows[0]["pred"] == "abc\ufffddef" and rows[1]["g"] == "-" and rows[1]["id"] == "\ufffd"
    assert _chunk(page)[0]["scores"] == {"official": None, "strict": None}
    assert "\ufffd" in page.read_text(encoding="utf-8") or "\\ufffd" in page.read_text(encoding="utf-8")


def test_the_reports_side_by_side_link_names_the_runs_groups(run):
    from eval.report import side_by_side

    path, records = run
    assert side_by_side(records) == "#a=tools&b=no_tools"
    assert side_by_side([{**r, "variant": "cot-1"} for r in records]) == "#a=tools+cot-1&b=no_tools+cot-1"
    assert side_by_side([r for r in records if r["mode"] == "tools"]) == ""


def test_a_region_is_read_past_a_harness_note_and_not_drawn_for_a_call_that_did_not_run(run):
    reply = json.dumps({"source_image_index": 0, "bbox_absolute": [20, 10, 120, 60]})
    assert reply_region(reply + "\n\nYou have one round left.", 1, lambda i: SIZES[i])["box"] == [0.1, 0.1, 0.6, 0.6]
    path, records = run
    record = json.loads(json.dumps(records[0]))
    record["trajectory"]["messages"][2]["error"] = True  # say the crop's image was refused
    messages = from_records([record], [path / "images"])[0]["messages"]
    assert messages[1]["calls"][0]["region"] is None
    assert from_records(records[:1], [path / "images"])[0]["messages"][1]["calls"][0]["region"] is not None
