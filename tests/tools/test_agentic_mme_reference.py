"""The `agentic_mme` tool set reproduces Agentic-MME's own atomic tools. Every task recorded from the reference
(tests/tools/data/agentic_mme; manifest.json says how it was run) runs its calls in order on a fresh episode
here and gets, call by call, the same verdict, the same tool message (the run directory normalized), a
pixel-identical image and the same number of images afterwards. Plus the loader and the published schemas."""

import gzip
import hashlib
import json
from collections import defaultdict
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.tools.helpers import MemoryFiles
from tools.toolsets.agentic_mme import PUBLISHED, SCHEMAS, TOOLSET, parse_arguments, read_image

DATA = Path(__file__).parent / "data" / "agentic_mme"
CASES = json.loads(gzip.decompress((DATA / "cases.json.gz").read_bytes()))
OUTPUTS = np.load(DATA / "outputs.npz")
ORIGINAL = "/episode/image_0.png"  # where MemoryFiles keeps the task image; it saves image_1.png, ... beside it
SCHEMAS_SHA256 = "d10b55aa0ede240725453ab9a90aee8592d6e6d33cb9dcf0e61c2bd5f1bb1194"
# The reference numbers its files by its own count, which a failed save also advances (see the package docstring).
PATH_NUMBER_DEVIATION = "file number taken by a failed save"

TASKS = defaultdict(list)
for _task in CASES:
    TASKS[_task["calls"][0]["tool"]].append(_task)


def mismatches(task) -> list[str]:
    """How our replies to a recorded task's calls differ from the reference's."""
    files = MemoryFiles({ORIGINAL: read_image(DATA / "inputs" / task["image"])}, original=ORIGINAL)
    problems = []
    for number, call in enumerate(task["calls"]):
        saved_before = len(files.saved)
        reply = TOOLSET.run(call["tool"], call["arguments"], files)
        text = reply.text.replace('"/episode/tool_images/', '"<run>/tool_images/')
        where = f"{task['id']} call {number} {call['tool']}({json.dumps(call['arguments'], ensure_ascii=False)[:200]})"
        if text != call["reply"] and not (task["tag"] == PATH_NUMBER_DEVIATION and number > 0):
            problems.append(f"{where}: reply\n  ours: {text!r}\n  ref:  {call['reply']!r}")
        if reply.error != (call["verdict"] == "error"):
            problems.append(f"{where}: ours error={reply.error}, reference {call['verdict']}")
        if len(files.images) != call["images"]:
            problems.append(f"{where}: {len(files.images)} images afterwards, reference {call['images']}")
        added = files.saved[saved_before:]
        if call["output"] is None:
            if added:
                problems.append(f"{where}: an image the reference did not make")
            continue
        expected = OUTPUTS[call["output"]]
        if len(added) != 1 or added[0].shape != expected.shape:
            problems.append(f"{where}: images {[image.shape for image in added]}, reference {expected.shape}")
        elif (differ := added[0] != expected).any():
            problems.append(f"{where}: {differ.sum()} of {differ.size} values differ")
    return problems


@pytest.mark.parametrize("tool", sorted(TASKS))
def test_every_recorded_call_matches_the_reference(tool):
    problems = [problem for task in TASKS[tool] for problem in mismatches(task)]
    assert not problems, "\n".join(problems[:5]) + f"\n({len(problems)} problems in {len(TASKS[tool])} tasks)"


def test_every_tool_has_cases_of_both_verdicts_and_the_set_is_large_enough():
    calls = [call for task in CASES for call in task["calls"]]
    assert len(calls) >= 150
    for name in TOOLSET.names():
        verdicts = [call["verdict"] for call in calls if call["tool"] == name]
        assert len(verdicts) >= 5 and {"ok", "error"} <= set(verdicts), (name, verdicts)


def test_a_failed_save_takes_a_file_number_in_the_reference_only():
    """The one recorded difference, documented: the reference's second file is transformed_image_2.png after
    the zero-area crop failed while saving; ours is numbered by the workspace index, 1."""
    (task,) = [task for task in CASES if task["tag"] == PATH_NUMBER_DEVIATION]
    files = MemoryFiles({ORIGINAL: read_image(DATA / "inputs" / task["image"])}, original=ORIGINAL)
    failed, passed = (TOOLSET.run(call["tool"], call["arguments"], files) for call in task["calls"])
    assert failed.error and failed.text == task["calls"][0]["reply"]
    assert failed.text == '{"ok": "false", "error": "cannot write empty image"}'
    ours = json.loads(passed.text)
    reference = json.loads(task["calls"][1]["reply"])
    assert reference["output_path"] == "<run>/tool_images/transformed_image_2.png"
    assert ours["output_path"] == "/episode/tool_images/transformed_image_1.png"
    assert {**ours, "output_path": None} == {**reference, "output_path": None}


def test_a_resize_that_fails_after_saving_keeps_its_image_as_the_reference_does():
    (task,) = [task for task in CASES if task["tag"] == "saved despite the error"]
    first, second = task["calls"][:2]
    assert first["verdict"] == "error" and first["output"] is not None and first["images"] == 2
    assert json.loads(second["reply"])["new_image_index"] == 2


def test_argument_strings_are_read_as_the_runner_reads_them():
    assert parse_arguments("") == {} and parse_arguments("{bad") == {} and parse_arguments("[1]") == [1]
    files = MemoryFiles({ORIGINAL: np.zeros((4, 6, 3), np.uint8)}, original=ORIGINAL)
    reply = TOOLSET.run("flip", "{not json", files)  # unreadable: the defaults, image 0 flipped horizontally
    assert not reply.error and json.loads(reply.text)["direction"] == "horizontal"
    not_a_dict = TOOLSET.run("flip", "[1]", files)
    assert not_a_dict.error
    assert json.loads(not_a_dict.text) == {"ok": "false", "error": "'list' object has no attribute 'get'"}


def test_loader_sees_each_kind_of_file_as_the_reference_tools_do():
    """A whole-image crop hands back what the tools loaded: alpha and palette transparency dropped (not
    composited), L replicated; bytes and paths read the same; a mode PNG cannot write is a clear error."""
    loaded = {}
    for task in CASES:
        call = task["calls"][0]
        if call["tool"] == "crop" and call["arguments"] == {"image_index": 0} and call["verdict"] == "ok":
            loaded[task["image"]] = OUTPUTS[call["output"]]
    assert {"l.png", "la.png", "bw.png", "i16.png"} <= set(loaded)
    for name, expected in loaded.items():
        path = DATA / "inputs" / name
        for source in (path, str(path), path.read_bytes()):
            np.testing.assert_array_equal(read_image(source), expected)
    rgba = read_image(DATA / "inputs" / "rgba.png")
    with Image.open(DATA / "inputs" / "rgba.png") as original:
        np.testing.assert_array_equal(rgba, np.array(original)[..., :3])
    cmyk = BytesIO()
    Image.new("CMYK", (3, 2)).save(cmyk, "JPEG")
    with pytest.raises(ValueError, match="cannot copy this CMYK image as PNG"):
        read_image(cmyk.getvalue())


def test_published_schemas_are_the_reference_schemas_unchanged():
    assert hashlib.sha256(SCHEMAS.read_bytes()).hexdigest() == SCHEMAS_SHA256
    assert PUBLISHED["source"] == {"repo": "https://github.com/ChoS3nE11ven/Agentic-MME",
                                   "commit": "5e5dfbdc7b40b53dea17d5ce754c14034acb185b",
                                   "path": "atomic_toolbox.py", "function": "build_atomic_tools_schema"}
    assert TOOLSET.schemas() == PUBLISHED["tools"] and len(TOOLSET.tools) == 14
    assert all(TOOLSET.runs(name) for name in TOOLSET.names())
