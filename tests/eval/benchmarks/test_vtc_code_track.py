"""VTC-Bench's code track end to end: model code run in the real sandbox through the ToolBox, replies as the
reference's Qwen-Agent tool and agent would show them. Cells sent through `prepare_code` stand for the
toolbox's `prepare` hook (eval/benchmarks/vtc_bench/CODE_TRACK.md, "Runtime change")."""

import json
from pathlib import Path

import numpy as np
import pytest

from eval.benchmarks.vtc_bench.code_track import (
    CODE_INTERPRETER,
    PROMPT_FILE,
    SANDBOX_CONFIG,
    SCHEMA,
    Reply,
    describe,
    prepare_code,
)
from runtime.code_tools import Saved
from runtime.episode import run_episodes
from runtime.profiles import get_profile
from runtime.protocols.hermes import call_block
from runtime.sandbox import CellResult, SandboxPool
from runtime.toolbox import ToolBox
from tools.images import demo_image

IMAGE_PATH = "IMAGE_PATH"  # stands for the input's path in a cell, as the prompt names it


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with SandboxPool(SANDBOX_CONFIG, root=tmp_path_factory.mktemp("sandbox")) as pool:
        yield pool


def run_cells(pool, cells, image=None, cell_timeout_s=None):
    """One episode whose model sends each cell as a `code_interpreter` call, then answers. Returns the
    episode, each tool message's text and image indices, and the input's path in the sandbox."""
    image = demo_image(48, 64) if image is None else image
    toolbox = ToolBox(None, code_tools=[CODE_INTERPRETER], sandbox=pool, cell_timeout_s=cell_timeout_s)
    episode = toolbox.start(get_profile("qwen3_vl"), "What is in the image?", [image])
    path = str(episode.resources["sandbox"].inputs_dir / "image_0.png")
    replies = [call_block("code_interpreter", json.dumps({"reasoning": "look", "code": cell.replace(IMAGE_PATH, path)}))
               for cell in cells] + ["<answer>done</answer>"]
    run_episodes([episode], lambda prompts: [replies.pop(0) for _ in prompts], toolbox)
    tools = [m["content"] for m in episode.trajectory.messages if m["role"] == "tool"]
    texts = [next((p["text"] for p in content if p["type"] == "text"), "") for content in tools]
    images = [[p["image"] for p in content if p["type"] == "image"] for content in tools]
    episode.close()
    return episode, texts, images, path


def section(kind, text):
    return f"{kind}:\n\n```\n{text}\n```"


def test_the_published_tool_description_is_the_schema_the_model_sees():
    spec = json.loads(PROMPT_FILE.read_text(encoding="utf-8"))
    assert spec["source"]["commit"] == "93a33a446c1a867b67dd76940a65b91b5b7d500d"
    assert SCHEMA == {"type": "function", "function": {"name": "code_interpreter", "description": spec["description"],
                                                       "parameters": spec["parameters"]}}
    assert list(spec["parameters"]["properties"]) == ["reasoning", "code"]
    assert spec["description"].startswith("A Python code interpreter specifically designed for image handling")
    assert spec["parameters"]["properties"]["code"]["description"].endswith("calculation logic).\n                ")


def test_a_cell_reads_the_input_image_and_displays_what_it_saved(pool):
    image = demo_image(48, 64)
    cell = ("import cv2\nfrom IPython.display import Image, display\n"
            f"img = cv2.imread('{IMAGE_PATH}')\nprint(img.shape)\n"
            "cv2.imwrite('flipped.png', cv2.flip(img, 1))\ncv2.imwrite('not_shown.png', img)\n"
            "display(Image(filename='flipped.png'))\nprint('done')")
    episode, texts, images, _ = run_cells(pool, [cell], image)
    assert episode.trajectory.tools[0] == SCHEMA
    output = texts[0].split("The saved image path is: ")
    assert output[0] == section("stdout", "(48, 64, 3)\n") + "\n\n\n\n" + section("stdout", "done\n")
    assert len(output) == 2 and output[1].endswith("/work/outputs/display-000001.png")
    assert images == [[1]] and len(episode.workspace) == 2  # what was only written is not shown
    np.testing.assert_array_equal(episode.workspace[1], image[:, ::-1])


def test_errors_read_as_ipythons_minimal_tracebacks(pool):
    cells = ["1/0", "import cv2\ncv2.cvtColor(None, cv2.COLOR_BGR2GRAY)", "x = 1\ny = ("]
    _, texts, _, _ = run_cells(pool, cells)
    assert texts[0] == section("error", "ZeroDivisionError: division by zero\n")
    assert texts[1].startswith("error:\n\n```\nerror: OpenCV(") and "!_src.empty()" in texts[1]
    # the third cell is In[6]; the reference's timer line before the code makes line 2 line 3; an open
    # bracket at the end is IPython's "incomplete input"
    assert texts[2] == section("error", "  Cell In[6], line 3\n    y = (\n         ^\n"
                                        "SyntaxError: incomplete input\n")
    _, texts, _, _ = run_cells(pool, ["while True: pass"], cell_timeout_s=1)
    assert texts == [section("error", "Timeout: Code execution exceeded the time limit.")]


def test_variables_persist_and_a_cell_without_output_finishes(pool):
    _, texts, _, _ = run_cells(pool, ["x = 41", "print(x + 1)"])
    assert texts == ["Finished execution.", section("stdout", "42\n")]


def test_plt_show_displays_the_figure_and_closes_it(pool):
    cell = "plt.plot([1, 3, 2])\nplt.title('t')\nplt.show()\nprint(len(plt.get_fignums()))"
    episode, texts, images, _ = run_cells(pool, [cell])
    assert texts[0].startswith(section("stdout", "0\n") + "The saved image path is: ")
    assert images == [[1]] and episode.workspace[1].std() > 0


def test_prepare_code_does_what_the_reference_does_before_running_code():
    assert prepare_code("!pip install opencv-contrib-python") == Reply(
        "❌ Package installation commands are not allowed. Detected forbidden command pattern: !pip\\s+install",
        error=True)
    assert prepare_code("import subprocess\nsubprocess.run(['pip', 'install', 'x'])").text.endswith(
        "pattern: subprocess.*pip.*install")
    assert prepare_code("") == prepare_code("  \n") == Reply("")
    assert prepare_code("cv2.imshow('a', img)\nkey = cv2.waitKey(0)\ncv2.destroyAllWindows()") == Reply("")
    assert prepare_code("Here:\n```python\nprint(1)\ncv2.imshow('a', img)\n```") == "_vtc_run_cell('print(1)')"
    assert prepare_code("%matplotlib inline\n  x = 1 ") == "_vtc_run_cell('pass\\n  x = 1')"


def test_prepared_cells_run_like_ipython_cells(pool):
    cells = [cell for cell in (
        f"import cv2\nimg = cv2.imread('{IMAGE_PATH}')\nprint('loaded {IMAGE_PATH}')\n"
        "plt.imshow(img[..., ::-1])\ncv2.imwrite('gray.png', cv2.cvtColor(img, cv2.COLOR_BGR2GRAY))",
        "import sys\nprint('out')\nprint('err', file=sys.stderr)\ndisplay(np.zeros(2))\nplt.plot([1, 2])\n1/0",
        "a = 1\na;",
        "x = (",
    )]
    episode, texts, images, path = run_cells(pool, cells)
    first = texts[0].split("The saved image path is: ")
    assert first[0] == section("stdout", f"loaded {path}\n") + "\n\n" + section("execute_result", "True")
    assert first[1].endswith("/work/outputs/display-000001.png") and first[2] == path  # the figure, the input
    assert images[0] == [1, 2]
    np.testing.assert_array_equal(episode.workspace[2], episode.workspace[0])
    second = texts[1].split("The saved image path is: ")
    assert second[0] == "\n\n".join([section("stdout", "out\n"), section("stderr", "err\n"),
                                     section("display_data", "array([0., 0.])"),
                                     section("error", "ZeroDivisionError: division by zero\n")])
    assert len(second) == 2 and images[1] == [3]  # the figure left open is shown after the error
    assert texts[2] == "Finished execution."
    assert texts[3] == section("error", "  Cell In[8], line 2\n    x = (\n         ^\nSyntaxError: incomplete input\n")


def test_describe_drops_a_marker_cut_by_the_output_limit():
    marker = '\x1evtc:{"kind": "image", "path": "/s/outputs/display-000001.png", "id": 1}\x1e'
    stdout = "x" * 20 + marker[:30] + "\n[... 99 characters dropped]\n"
    result = CellResult(True, stdout, "", None, False, False)
    saved = [Saved(Path("/s/outputs/display-000001.png"), 1)]
    assert describe(result, saved) == (section("stdout", "x" * 20 + "\n[... 99 characters dropped]\n")
                                       + "The saved image path is: /s/outputs/display-000001.png")
