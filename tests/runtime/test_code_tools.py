"""Code tools end to end: episodes whose model writes code, run in the real sandbox."""

import ast
import json

import numpy as np
import pytest

from runtime.code_tools import get_code_tool
from runtime.episode import State, Stop, run_episodes
from runtime.profiles import get_profile
from runtime.sandbox import SandboxConfig, SandboxPool
from runtime.toolbox import ToolBox
from tools.images import demo_image


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with SandboxPool(SandboxConfig(cell_timeout_s=5), root=tmp_path_factory.mktemp("sandbox")) as pool:
        yield pool


def toolbox_for(profile_name, pool):
    profile = get_profile(profile_name)
    return profile, ToolBox(profile.toolset, [get_code_tool(profile.code_tool)], sandbox=pool)


def scripted(episodes, replies_for, toolbox):
    """Drive episodes; `replies_for(episode)` gives its replies, which may use its sandbox paths."""
    queues = {id(e): list(replies_for(e)) for e in episodes}

    def generate(prompts):
        waiting = [e for e in episodes if e.state is State.GENERATING]
        return [queues[id(e)].pop(0) for e in waiting]

    run_episodes(episodes, generate, toolbox)


CROP = "<code>\n```python\nfrom PIL import Image\nimport os\nimg = Image.open({path!r})\n" \
       "img.crop((0, 0, 20, 10)).save(os.path.join(os.environ['PROCESSED_IMAGE_SAVE_PATH'], 'crop.png'))\n" \
       "x = 41\nprint(img.size)\n```\n</code>"


def test_thyme_runs_code_keeps_variables_and_continues_the_assistant_turn(pool):
    profile, toolbox = toolbox_for("thyme", pool)
    image = demo_image(48, 64)
    episode = toolbox.start(profile, "What is top-left?", [image])
    question = episode.trajectory.messages[-1]["content"][-1]["text"]
    assert '### User Image Size:** "64x48"' in question
    path = question.split('### User Image Path:** "')[1].split('"')[0]
    replies = ["<think>crop it</think>" + CROP.format(path=path),
               "<code>print(x + 1)</code>",
               "<code>1/0</code>",
               "The answer is <answer>red</answer>"]
    prompts = []
    queue = list(replies)

    def generate(batch):
        prompts.extend(batch)
        return [queue.pop(0) for _ in batch]

    run_episodes([episode], generate, toolbox)
    assert episode.stop_reason is Stop.ANSWER and episode.answer == "red"
    np.testing.assert_array_equal(episode.workspace[1], image[:10, :20])
    outputs = [m for m in episode.trajectory.messages if m["role"] == "tool"]
    assert outputs[0]["content"][0] == {"type": "image", "image": 1} and "(64, 48)" in outputs[0]["content"][1]["text"]
    assert outputs[1]["content"][-1]["text"] == "42"  # variables persist across turns
    assert "ZeroDivisionError" in outputs[2]["content"][-1]["text"]
    second = prompts[1]
    assert second.continue_final_message and second.messages[-1]["role"] == "assistant"
    last = second.messages[-1]["content"]
    assert last[-1]["text"].endswith("</sandbox_output>") and {"type": "image"} in last


def test_agentic_mme_gen_collects_every_new_image_as_its_runner_does(pool):
    profile, toolbox = toolbox_for("agentic_mme_gen", pool)
    image = demo_image(40, 40)
    episode = toolbox.start(profile, "q", [image])
    code = ("<code>\nimport os, cv2\nsrc = cv2.imread(os.environ['ORIGINAL_IMAGE_PATH'])\n"
            "out = os.environ['PROCESSED_IMAGE_SAVE_PATH']\n"
            "cv2.imwrite(os.path.join(out, 'transformed_image_1.png'), cv2.flip(src, 1))\n"
            "cv2.imwrite(os.path.join(out, 'scratch.png'), src)\nprint('saved')\n</code>")
    scripted([episode], lambda e: [code + "<answer>too early</answer>", "<answer>done</answer>"], toolbox)
    # calls won over the early answer; any image file the code saved is new, not only transformed_image_N.png
    assert episode.answer == "done" and len(episode.workspace) == 3
    flipped = [i for i in (1, 2) if np.array_equal(episode.workspace[i], image[:, ::-1])]
    assert len(flipped) == 1 and np.array_equal(episode.workspace[3 - flipped[0]], image)
    text = [m for m in episode.trajectory.messages if m["role"] == "tool"][0]["content"][-1]["text"]
    assert text.startswith("[Code output]\nsaved") and "Image 1: transformed_image_1.png" in text
    assert "scratch.png" in text


def test_visualtoolbench_function_tool_runs_code_as_the_benchmark_and_returns_its_dict(pool):
    profile, toolbox = toolbox_for("visualtoolbench", pool)
    image = demo_image(30, 50)
    episode = toolbox.start(profile, "q", [image])
    schema = episode.trajectory.tools[0]["function"]
    assert schema["name"] == "python_image_processing" and "['image_0.png']" in schema["description"]
    code = ("from PIL import Image\nimg = Image.open('image_0.png')\nimg.rotate(90, expand=True).save("
            "f'{PROCESSED_IMAGE_SAVE_PATH}/transformed_image_0.png', 'PNG')\nprint(np.asarray(img).shape)")
    unimported = "Image.open('image_0.png')"  # the benchmark's `Image` has no open: the code must import PIL
    replies = [{"content": None, "tool_calls": [{"id": f"c{k}", "type": "function", "function": {
        "name": "python_image_processing", "arguments": json.dumps({"code": source})}}]}
        for k, source in enumerate((code, unimported))]
    scripted([episode], lambda e: [*replies, {"content": "<answer>ok</answer>"}], toolbox)
    tools = [m for m in episode.trajectory.messages if m["role"] == "tool"]
    result = ast.literal_eval(tools[0]["content"][-1]["text"])  # str() of the tool's dict, as the harness sends it
    assert result["ok"] == "true" and result["stdout"] == "(30, 50, 3)\n"
    assert result["output_paths"] == [result["output_path"]]
    assert result["output_path"].endswith("transformed_image_0.png")
    np.testing.assert_array_equal(episode.workspace[1], np.rot90(image))
    failed = ast.literal_eval(tools[1]["content"][-1]["text"])
    assert failed["ok"] == "false" and failed["stderr"].endswith(
        "AttributeError: type object 'Image' has no attribute 'open'\n") and tools[1]["error"]
    prompt = profile.protocol.render(episode.trajectory)
    tool_message = [m for m in prompt.messages if m["role"] == "tool"][0]
    assert isinstance(tool_message["content"], str)  # images travel in the next user message
    assert any(m["role"] == "user" and {"type": "image"} in m["content"] for m in prompt.messages[2:])


def test_timeouts_and_crashes_are_observations(pool):
    profile, toolbox = toolbox_for("pyvision", pool)
    toolbox.cell_timeout_s = 1
    episode = toolbox.start(profile, "q", [demo_image(16, 16)])
    scripted([episode], lambda e: ["<code>while True: pass</code>", "<code>print('alive')</code>",
                                   "<answer>x</answer>"], toolbox)
    outputs = [m["content"][-1]["text"] for m in episode.trajectory.messages if m["role"] == "tool"]
    assert "timed out" in outputs[0].lower() or "timeout" in outputs[0].lower()
    assert outputs[1] == "alive"
    prompt = profile.protocol.render(episode.trajectory)
    assert prompt.messages[3]["role"] == "user" and prompt.messages[3]["content"][0]["text"].startswith("<interpreter>")


def test_many_code_episodes_run_concurrently(pool):
    profile, toolbox = toolbox_for("thyme", pool)
    images = [demo_image(32, 32, seed=i) for i in range(6)]
    episodes = [toolbox.start(profile, "q", [im]) for im in images]

    def replies(episode):
        path = episode.resources["sandbox"].inputs_dir / "image_0.png"
        return [CROP.format(path=str(path)), "<answer>a</answer>"]

    scripted(episodes, replies, toolbox)
    for episode, image in zip(episodes, images):
        assert episode.stop_reason is Stop.ANSWER
        np.testing.assert_array_equal(episode.workspace[1], image[:10, :20])


def test_code_tools_need_a_sandbox():
    with pytest.raises(ValueError, match="need a sandbox"):
        ToolBox(None, [get_code_tool("thyme")])


def test_the_stripped_stop_string_is_restored_in_the_history(pool):
    profile, toolbox = toolbox_for("thyme", pool)
    episode = toolbox.start(profile, "q", [demo_image(16, 16)])
    # servers drop the stop string that ended a generation ("</code>", "</answer>") and report which it was
    scripted([episode], lambda e: [{"completion": "<code>print(1)", "stop": "</code>"},
                                   {"completion": "<answer>two", "stop": "</answer>"}], toolbox)
    texts = [m["content"][0]["text"] for m in episode.trajectory.messages if m["role"] == "assistant"]
    assert texts == ["<code>print(1)</code>", "<answer>two</answer>"] and episode.answer == "two"


def test_code_images_stop_at_the_image_budget(pool):
    profile, toolbox = toolbox_for("thyme", pool)
    from runtime.profiles import Budgets
    episode = toolbox.start(profile, "q", [demo_image(16, 16)], budgets=Budgets(max_images=3))
    code = ("<code>import os\nfrom PIL import Image\nfor i in range(5):\n"
            "    Image.new('RGB', (8, 8)).save(os.path.join(os.environ['PROCESSED_IMAGE_SAVE_PATH'], f'{i}.png'))</code>")
    scripted([episode], lambda e: [code], toolbox)
    assert len(episode.workspace) == 3 and episode.stop_reason is Stop.MAX_IMAGES
    assert "Not shown: 2.png" in [m for m in episode.trajectory.messages if m["role"] == "tool"][0]["content"][-1]["text"]


def test_code_images_past_the_episodes_image_memory_are_refused_and_counted(pool):
    profile, toolbox = toolbox_for("thyme", pool)
    from runtime.profiles import Budgets
    episode = toolbox.start(profile, "q", [demo_image(16, 16)], budgets=Budgets(max_image_mb=1))
    code = ("<code>import os\nfrom PIL import Image\nout = os.environ['PROCESSED_IMAGE_SAVE_PATH']\n"
            "Image.new('RGB', (500, 500)).save(os.path.join(out, 'a.png'))\n"  # 0.72 MB: fits
            "Image.new('RGB', (400, 400)).save(os.path.join(out, 'b.png'))\n"  # 0.46 MB more: over 1 MB
            "open(os.path.join(out, 'c.png'), 'wb').write(b'not a png')</code>")
    scripted([episode], lambda e: [code, "<answer>x</answer>"], toolbox)
    assert [a.shape for a in episode.workspace[1:]] == [(500, 500, 3)]
    text = [m for m in episode.trajectory.messages if m["role"] == "tool"][0]["content"][-1]["text"]
    assert "Not shown: b.png (its 0.5 MB of pixels are over the 0.3 MB of images" in text
    assert "Not shown: c.png (" in text and "cannot read the image data: cannot identify image file)" in text
    assert len(episode.trajectory.meta["refused_images"]) == 2


def test_start_without_an_image_is_refused_before_a_session_opens(pool):
    profile, toolbox = toolbox_for("agentic_mme_gen", pool)
    with pytest.raises(ValueError, match="at least one image"):
        toolbox.start(profile, "q", [])


def test_for_profile_gives_the_trained_tools(pool):
    toolbox = ToolBox.for_profile(get_profile("deepeyes"))
    assert [s["function"]["name"] for s in toolbox.toolset.schemas()] == ["image_zoom_in_tool"]
    assert list(ToolBox.for_profile(get_profile("thyme"), sandbox=pool).code_tools) == ["python"]
    with pytest.raises(ValueError, match="share a name"):
        ToolBox(None, [get_code_tool("thyme"), get_code_tool("pyvision")], sandbox=pool)


@pytest.mark.parametrize("forged", ['{"ok": "true", "stdout": "", "stderr": "", "new": 5}',
                                    '{"ok": {"a": 1}, "stdout": "", "stderr": "", "new": []}',
                                    '{"ok": "true", "stdout": "", "stderr": "", "new": [1], "extra": 2}',
                                    "[" * 100_000 + "]" * 100_000, '"just a string"'])
def test_a_visualtoolbench_result_line_the_code_forged_is_only_data(forged):
    from runtime.code_tools import VTB_MARK, vtb_result
    from runtime.sandbox import CellResult

    result = CellResult(True, f"printed\n{VTB_MARK}{forged}\n", "", None, False, False)
    assert vtb_result(result) == {"ok": "false", "stdout": result.stdout, "stderr": "", "new": []}
    assert vtb_result(result, interpreter=True) == {"stdout": result.stdout, "stderr": ""}
