"""The `vtc_bench` tool set reproduces VTC-Bench's own tool code. Every call recorded from the reference
(tests/tools/data/vtc_bench, made by scripts/reference/vtc_bench_tools.py; manifest.json says how) gets the
same verdict, the same reply text and a pixel-identical image here. Plus the loader, the published schemas,
and our one answer where the reference has none (its process dies)."""

import gzip
import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from tests.tools.helpers import MemoryFiles
from tools.toolsets.vtc_bench import PUBLISHED, SCHEMAS, TOOLSET, read_image

DATA = Path(__file__).parent / "data" / "vtc_bench"
CASES = json.loads(gzip.decompress((DATA / "cases.json.gz").read_bytes()))
OUTPUTS = np.load(DATA / "outputs.npz")
REFERENCE_INPUTS = "/tmp/vtc/in/"  # where the reference read the input files: the paths in the recorded calls
SCHEMAS_SHA256 = "e32d4ba61af70b3548d79a96c040cb24d10e308f7c9e57286f870e6656f9d609"


def _readable_inputs() -> dict:
    """Each input file at its recorded path, as the episode would hold it; files read_image refuses are absent."""
    images = {}
    for path in sorted((DATA / "inputs").iterdir()):
        try:
            images[REFERENCE_INPUTS + path.name] = read_image(path)
        except ValueError:
            pass
    return images


INPUTS = _readable_inputs()
TOOL_CASES = defaultdict(list)
for _case in CASES:
    if _case["verdict"] != "crash" and "loader" not in _case:
        TOOL_CASES[_case["tool"]].append(_case)


def mismatch(case) -> str | None:
    """How our reply to a recorded call differs from the reference's, or None."""
    files = MemoryFiles(INPUTS, original=case["original"])
    reply = TOOLSET.run(case["tool"], case["arguments"], files)
    text = re.sub(r"Edited Image Path: .*$", "Edited Image Path: <output>", reply.text)
    if text != case["reply"]:
        return f"reply\n  ours: {text!r}\n  ref:  {case['reply']!r}"
    if reply.error != (case["verdict"] != "ok"):
        return f"verdict: ours error={reply.error}, reference {case['verdict']}"
    if case["output"] is None:
        return f"an image the reference did not make: {len(files.saved)}" if files.saved else None
    expected = OUTPUTS[case["output"]]
    if len(files.saved) != 1 or files.saved[0].shape != expected.shape:
        return f"image {[image.shape for image in files.saved]}, reference {expected.shape}"
    differ = files.saved[0] != expected
    if differ.any():
        return f"{differ.sum()} of {differ.size} values differ: ours {files.saved[0][differ][:8]}, reference {expected[differ][:8]}"
    return None


@pytest.mark.parametrize("tool", sorted(TOOL_CASES))
def test_every_recorded_call_matches_the_reference(tool):
    problems = [f"{case['id']} {json.dumps(case['arguments'])[:300]}: {problem}"
                for case in TOOL_CASES[tool] if (problem := mismatch(case))]
    assert not problems, "\n".join(problems[:5]) + f"\n({len(problems)} of {len(TOOL_CASES[tool])} cases differ)"


def test_every_tool_has_cases_of_every_verdict_it_can_give():
    names = set(TOOLSET.names())
    assert set(TOOL_CASES) >= names
    for name in names:
        verdicts = {case["verdict"] for case in TOOL_CASES[name]}
        assert len(TOOL_CASES[name]) >= 10 and {"ok", "failed", "rejected"} <= verdicts, (name, verdicts)
    assert {case["tool"] for case in CASES if case["verdict"] == "unknown_tool"}


def test_loader_sees_each_kind_of_file_as_the_reference_tools_do():
    """A full-size crop hands back what the reference's tools loaded: RGBA drops alpha, CMYK keeps C, M, Y
    as if RGB, L and palette files replicate their one channel (palette indices, not colors), 16-bit RGB
    keeps PIL's high byte. Files it cannot hold as 8-bit (16-bit gray, gray + alpha, bilevel) are refused."""
    loaders = [case for case in CASES if "loader" in case]
    assert {case["loader"] for case in loaders} >= {"rgba.png", "l.png", "p.png", "l.jpg", "cmyk.jpg", "rgb16.png", "i16.png", "la.png"}
    for case in loaders:
        path = DATA / "inputs" / case["loader"]
        if case["verdict"] == "ok":
            expected = OUTPUTS[case["output"]]
            for source in (path, str(path), path.read_bytes()):
                np.testing.assert_array_equal(read_image(source), expected)
        else:
            assert case["reply"].startswith("Failed to run OpenCV operation 'crop':\n")
            with pytest.raises(ValueError, match="VTC-Bench's tools"):
                read_image(path)


def test_clahe_with_a_zero_tile_side_answers_where_the_reference_process_dies():
    (crash,) = [case for case in CASES if case["verdict"] == "crash"]
    reply = TOOLSET.run(crash["tool"], crash["arguments"], MemoryFiles(INPUTS, original=crash["original"]))
    assert reply.error and reply.text.startswith("Failed to run OpenCV operation 'histogram':\ntile_grid_size [0, 0] has a zero side")


def test_published_schemas_are_the_reference_file_unchanged():
    assert hashlib.sha256(SCHEMAS.read_bytes()).hexdigest() == SCHEMAS_SHA256
    assert PUBLISHED["source"] == {"repo": "https://github.com/cs-w0r1d/VTC-Bench", "commit": "93a33a446c1a867b67dd76940a65b91b5b7d500d",
                                   "path": "eval/qwen_agent/tools/opencv_tools.py"}
    assert TOOLSET.schemas() == [{"type": "function", "function": {k: entry[k] for k in ("name", "description", "parameters")}}
                                 for entry in PUBLISHED["tools"]]
    assert len(TOOLSET.tools) == 35 and all(name.startswith("opencv_") for name in TOOLSET.names())


def test_argument_strings_are_read_as_the_agent_reads_them():
    files = MemoryFiles(INPUTS, original=REFERENCE_INPUTS + "shapes.png")
    call = '{"image": "%sshapes.png", "param": {"direction": "vertical"},}' % REFERENCE_INPUTS  # repaired: trailing comma
    assert TOOLSET.run("opencv_flip", call, files).text.startswith("Flipped image vertical.")
    reply = TOOLSET.run("opencv_flip", "{'image': 'x'}", files)  # json5 syntax: not read here (a documented difference)
    assert reply.text.startswith("An error occurred when calling tool `opencv_flip`:\nValueError: Parameters must be formatted as a valid JSON!")
