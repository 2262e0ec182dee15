"""VisualToolBench's data, protocol and tools: the loader on the fixture in both published layouts and on malformed
rows; the protocol files against their hashes and the runtime's copy; the tools against reference vectors made by
the benchmark's own scripts/tools.py (data/visualtoolbench_tool_vectors.json: the calculator, the python tools run in
our sandbox, the replies to wrong arguments and to web calls without an answer); the web tools through replay and
offline; the messages the model is shown."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from eval.benchmarks.visualtoolbench import (PROMPTS, VisualToolBench, VtbProtocol, bound, calculator,
                                             calculator_tool, history_answer, image_tool_schema, observation_of,
                                             runner_texts, system_prompt, tool_schemas, web_tools)
from eval.benchmarks.visualtoolbench import data
from eval.benchmarks.visualtoolbench.fixture import MULTI, SINGLE, write_fixture
from runtime.code_tools import CodeContext, get_code_tool, vtb_cell, vtb_result
from runtime.protocols import HermesProtocol
from runtime.sandbox import SandboxConfig, SandboxPool
from runtime.trajectory import Trajectory, image, text
from runtime.web import UNAVAILABLE_MARK, Web

VECTORS = json.loads((Path(__file__).parent / "data" / "visualtoolbench_tool_vectors.json").read_text())


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("vtb") / "VisualToolBench")


def test_the_fixture_loads_in_download_dataset_layout(fixture_dir):
    tasks, skipped, source, counts = data.load(str(fixture_dir))
    assert skipped == [] and "local copy of ScaleAI/VisualToolBench" in source
    assert [t.id for t in tasks] == [r["id"] for r in SINGLE + MULTI]
    by_id = {t.id: t for t in tasks}
    single, multi = by_id["vtb_fixture_s0"], by_id["vtb_fixture_m1"]
    assert not single.meta["multi_turn"] and single.follow_ups == () and len(single.images) == 1
    assert single.meta["rubrics_by_turn"][0]["rubric_1"]["weight"] == 5  # parsed from the stored JSON string
    np.testing.assert_array_equal(single.images[0], SINGLE[0]["images"][0])
    assert multi.meta["multi_turn"] and [f.text for f in multi.follow_ups] == MULTI[1]["turn_prompts"][1:]
    np.testing.assert_array_equal(multi.follow_ups[0].images[0], MULTI[1]["images_by_turn"][1][0])
    assert len(multi.follow_ups[1].images) == 0  # a turn without an image
    assert multi.meta["image_paths"] == ["data/multi_turn/images/sample_1/turn_0_image_0.png",
                                         "data/multi_turn/images/sample_1/turn_1_image_0.png", None]
    assert multi.meta["golden_answers"] == MULTI[1]["turn_golden_answers"] and multi.category == "generalist"
    assert [t.id for t in data.load(str(fixture_dir / "data"))[0]] == [t.id for t in tasks]  # data/ itself


def test_the_hub_parquet_layout_loads_the_same_tasks(fixture_dir, tmp_path):
    def cell(array):
        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="PNG")
        return {"bytes": buffer.getvalue(), "path": None}

    rows = []
    for row in SINGLE + MULTI:
        turns = len(row["turn_prompts"])
        by_turn = row.get("images_by_turn") or [row["images"]]
        rows.append({**{k: v for k, v in row.items() if k not in ("images", "images_by_turn")}, "num_turns": turns,
                     "turncase": "multi-turn" if turns > 1 else "single-turn",
                     "images": [cell(a) for turn in by_turn for a in turn],
                     "images_by_turn": [[cell(a) for a in turn] for turn in by_turn]})
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test.parquet")
    tasks, skipped, _, _ = data.load(str(tmp_path))
    expected = {t.id: t for t in data.load(str(fixture_dir))[0]}
    assert skipped == [] and [t.id for t in tasks] == list(expected)
    for task in tasks:
        np.testing.assert_array_equal(task.images[0], expected[task.id].images[0])
        assert task.meta["image_paths"] == expected[task.id].meta["image_paths"]  # download_dataset.py's names
        assert task.meta["rubrics_by_turn"] == expected[task.id].meta["rubrics_by_turn"]


def test_malformed_rows_are_skipped_with_their_reason(fixture_dir, tmp_path):
    rows = json.loads((fixture_dir / "data" / "single_turn" / "dataset.json").read_text())
    bad = [{**rows[0], "id": "no_prompts", "turn_prompts": []},
           {**rows[0], "id": "bad_rubrics", "rubrics_by_turn": ["{not json"]},
           {**rows[0], "id": "rubric_without_weight", "rubrics_by_turn": [json.dumps({"r": {"description": "x"}})]},
           {**rows[0], "id": "no_file", "image_paths": ["data/single_turn/images/missing.png"]},
           {**rows[0], "id": "too_many_turns", "num_turns": 3}, "not a row",
           {**rows[0], "id": "vtb_fixture_s0"}]
    folder = tmp_path / "copy"
    (folder / "data" / "single_turn").mkdir(parents=True)
    (folder / "data" / "single_turn" / "images").symlink_to(fixture_dir / "data" / "single_turn" / "images")
    (folder / "data" / "single_turn" / "dataset.json").write_text(json.dumps(rows + bad))
    tasks, skipped, _, _ = data.load(str(folder))
    assert len(tasks) == 3
    reasons = {s.id: s.reason for s in skipped}
    assert "turn_prompts" in reasons["no_prompts"] and "not JSON" in reasons["bad_rubrics"]
    assert "needs a description and a weight" in reasons["rubric_without_weight"]
    assert "does not exist" in reasons["no_file"] and "num_turns" in reasons["too_many_turns"]
    assert "not an object" in reasons["row-8"] and "repeats id" in reasons["vtb_fixture_s0#9"]
    assert all("data/single_turn/dataset.json row" in r for r in reasons.values())


def test_bad_data_folders_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        data.load(str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="download_dataset.py's layout"):
        data.load(str(tmp_path))
    (tmp_path / "data" / "multi_turn").mkdir(parents=True)
    (tmp_path / "data" / "multi_turn" / "dataset.json").write_text("{oops")
    with pytest.raises(ValueError, match="is not JSON"):
        data.load(str(tmp_path))


def test_protocol_files_match_their_hashes_and_the_runtime_copy():
    recorded = dict(reversed(line.split(None, 1)) for line in (PROMPTS / "SHA256SUMS").read_text().splitlines())
    for name in ("system_prompts.json", "tools.json", "runner.json"):
        assert hashlib.sha256((PROMPTS / name).read_bytes()).hexdigest() == recorded[name]
    assert system_prompt().startswith("\nYou are a *proactive, tool-empowered* visual-reasoning assistant.")
    assert runner_texts()["max_tool_calls"] == "Model hit the maximum number of tool calls"
    schemas = tool_schemas()
    assert list(schemas) == ["python_image_processing", "python_interpreter", "google_search",
                             "browser_get_page_text", "historical_weather", "calculator"]
    # the runtime's own python_image_processing (the `visualtoolbench` profile) shows the same words
    context = CodeContext((Path("/in/image_0.png"),), Path("/w"), Path("/out"), ((4, 4),))
    ours = get_code_tool("python_image_processing").schema(context)
    assert ours == image_tool_schema(schemas, ["image_0.png"], "/out")


@pytest.mark.parametrize("case", VECTORS["calculator"], ids=lambda c: repr(c["expression"]))
def test_the_calculator_answers_as_the_reference(case):
    result = calculator(case["expression"])
    assert result == case["result"] and str(result) == case["reply"]


def test_the_calculator_refuses_a_power_too_large_to_print_without_computing_it():
    result = calculator("10 ** 10 ** 10")  # the reference would compute ten billion digits, then fail to print them
    assert result["status"] == "error" and result["error"] == calculator("10 ** 5000")["error"]
    assert calculator("2 ** 10 ** 4 % 7")["result"] == str(2 ** 10 ** 4 % 7)  # large but cheap: computed


@pytest.mark.parametrize("case", VECTORS["bad_arguments"], ids=lambda c: f"{c['tool']}-{sorted(c['arguments'])}")
def test_wrong_arguments_fail_with_the_reference_message(case):
    with pytest.raises(TypeError) as failure:
        bound(case["tool"], case["arguments"])
    assert {"error": str(failure.value)} == case["result"]


def test_the_tools_reply_to_wrong_arguments_as_model_inference_does():
    reply = calculator_tool(tool_schemas()).run({"x": 1}, None)
    assert reply.error and reply.text == str(VECTORS["bad_arguments"][0]["result"])


def test_web_tools_replay_recorded_answers_and_say_when_they_have_none(tmp_path):
    recording = tmp_path / "replay.jsonl"
    answer = str({"results": [], "query": "q", "status": "success", "total_results": 0})
    recording.write_text(json.dumps({"tool": "google_search", "arguments": {"query": "q", "num_results": 5},
                                     "reply": answer}) + "\n")
    tools = {t.name: t for t in web_tools(Web("replay", [recording]), tool_schemas())}
    assert tools["google_search"].run({"query": "q"}, None).text == answer  # keyed with the default num_results
    offline = {t.name: t for t in web_tools(Web("offline"), tool_schemas())}
    for case in VECTORS["web_without_keys"]:
        reply = offline[case["tool"]].run(case["arguments"], None)
        ours = observation_of({"content": [text(reply.text)]})
        assert reply.error and UNAVAILABLE_MARK in ours["error"]
        assert list(ours) == list(case["result"]) and ours["status"] == "error"  # the tool's own error shape
        assert {k: v for k, v in ours.items() if k != "error"} == {k: v for k, v in case["result"].items()
                                                                   if k != "error"}


def _frames_in_the_model_code(stderr: str) -> str:
    """A traceback without the frames outside the model's code (the reference's first frame is its own tools.py,
    ours is our harness; library paths differ between machines)."""
    kept, skipping = [], False
    for line in stderr.splitlines():
        if line.startswith("  File "):
            skipping = '"<llm_code>"' not in line
        elif not (skipping and line.startswith("    ")):
            skipping = False
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


@pytest.fixture(scope="module")
def pool():
    config = SandboxConfig(cell_timeout_s=30, max_output_chars=131072,
                           preload=SandboxConfig().preload + ("matplotlib.pyplot",))
    with SandboxPool(config) as pool:
        yield pool


def test_the_python_tools_run_as_the_reference_runs_them(pool):
    picture = np.array(VECTORS["manifest"]["source_image"], np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(picture).save(buffer, format="PNG")
    cases = [(False, c) for c in VECTORS["python_image_processing"]]
    cases += [(True, c) for c in VECTORS["python_interpreter"]]
    for interpreter, case in cases:
        with pool.session(inputs={"image_0.png": buffer.getvalue()}) as session:
            source, save = str(session.inputs_dir / "image_0.png"), str(session.output_dir / "save")
            if case.get("preexisting"):  # a file of an earlier call, saved by the code itself
                session.run(vtb_cell(f"from PIL import Image\nImage.open({source!r}).save("
                                     "f'{PROCESSED_IMAGE_SAVE_PATH}/transformed_image_0.png')", save))
            code = case["code"].replace("SRC", repr(source)) if isinstance(case["code"], str) else case["code"]
            result = session.run(vtb_cell(code, save, interpreter))
            ours = json.loads(json.dumps(vtb_result(result, interpreter)).replace(save, "{save_dir}")
                              .replace(source, "{source}"))
            reference = case["result"]
            assert ours["stdout"] == reference["stdout"], case["case"]
            assert _frames_in_the_model_code(ours["stderr"]) == _frames_in_the_model_code(reference["stderr"]), \
                case["case"]
            if interpreter:
                continue
            assert ours["ok"] == reference["ok"] and ours["new"] == reference["output_paths"], case["case"]
            copies = {name: np.asarray(Image.open(copy).convert("RGB")) for copy, name in
                      zip(result.images, result.image_names)}
            for name, pixels in case["images"].items():
                np.testing.assert_array_equal(copies[f"save/{name}"], np.array(pixels, np.uint8))


def _trajectory(meta: dict) -> Trajectory:
    trajectory = Trajectory(tools=list(tool_schemas().values()), meta={"visualtoolbench": meta})
    for _ in range(3):
        trajectory.add_image(np.zeros((8, 8, 3), np.uint8))
    trajectory.add("system", "sys")
    trajectory.add("user", image(0), "turn one")
    trajectory.add("assistant", "my first answer")
    trajectory.add("user", image(1), "turn two")
    trajectory.add("assistant", "", tool_calls=[{"id": "c7", "type": "function", "function": {
        "name": "python_image_processing", "arguments": "{}"}}])
    trajectory.add("tool", image(2), str({"ok": "true", "output_paths": ["/s/t1/transformed_image_0.png"]}),
                   tool_call_id="c7", name="python_image_processing")
    return trajectory


def test_the_model_sees_the_reference_messages():
    meta = {"golden_answers": ["golden one", "golden two"], "history": "golden", "turns": [{"answer": "mine"}],
            "image_paths": ["/w/t0.png", "/w/t1.png"], "save_dirs": ["/s/t0", "/s/t1"], "turn_count": 2}
    suite = VisualToolBench([], [], "fixture", "official", None)
    protocol = suite.profile(suite_profile()).protocol
    assert isinstance(protocol, VtbProtocol) and isinstance(protocol.inner, HermesProtocol)
    trajectory = _trajectory(meta)
    wired = protocol.wire_messages(trajectory)
    assert [m["role"] for m in wired] == ["system", "user", "assistant", "user", "assistant", "tool", "user"]
    assert wired[1]["content"] == [text("turn one")]  # an earlier turn: its prompt, no image
    assert wired[2]["content"] == [text("golden one")]  # and the golden answer (--use_GT_answer 1)
    assert wired[3]["content"] == [text("turn two"), image(1)]  # the current turn: prompt, then its image
    assert wired[6]["content"] == [text("Here are the transformed images from the tool call c7."), image(2)]
    assert history_answer({**meta, "history": "model"}, 0) == "mine"
    tools = {s["function"]["name"]: s for s in protocol.wire_tools(trajectory)}
    description = tools["python_image_processing"]["function"]["description"]
    assert "file list: ['/w/t1.png', '/s/t1/transformed_image_0.png']." in description
    assert "PNG to /s/t1 " in description
    prompt = protocol.render(trajectory)
    assert len(prompt.images) == 2  # the current turn's image and the tool's


def test_images_reach_the_model_as_the_scripts_send_them():
    """encode_image_to_base64: RGB, JPEG quality 85, optimize; the tools still read the task's own pixels."""
    noisy = np.random.default_rng(0).integers(0, 256, (24, 40, 3), dtype=np.uint8)
    suite = VisualToolBench([], [], "fixture", "official", None)
    protocol = suite.profile(suite_profile()).protocol
    trajectory = _trajectory({"golden_answers": ["g1", "g2"], "history": "golden", "turns": [], "turn_count": 2})
    trajectory.images[1] = noisy
    sent = protocol.render(trajectory).images[0]
    buffer = io.BytesIO()
    Image.fromarray(noisy).save(buffer, format="JPEG", quality=85, optimize=True)
    np.testing.assert_array_equal(sent, np.asarray(Image.open(buffer).convert("RGB")))
    assert not np.array_equal(sent, noisy) and protocol.render(trajectory).images[0] is sent  # encoded once
    assert protocol.render(trajectory).images[1].shape == (8, 8, 3)  # the tool's image, encoded the same way


def suite_profile():
    from runtime.profiles import get_profile

    return get_profile("qwen2_5_vl")


def test_the_shipped_web_replay_answers_the_fixture_calls():
    from eval.benchmarks.visualtoolbench import WEB_REPLAY
    from eval.benchmarks.visualtoolbench.fixture import replay_lines

    shipped = [json.loads(line) for line in WEB_REPLAY.read_text(encoding="utf-8").splitlines()]
    assert shipped == replay_lines()
