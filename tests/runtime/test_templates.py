"""Protocol adapters against the real chat templates (TRL's copies of Qwen's official ones) and the real
processors (runtime/tiny_model.py): what each protocol renders is what the model saw in training.

Trajectories are built the way eval/ and data_gen/ build them: `Episode` driven by scripted completions,
observations handed back as a tool runner would (errors as `Error: ...` text), plus a few by hand.
"""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest
from PIL import Image

from runtime.episode import Episode, State, Stop
from runtime.profiles import get_profile
from runtime.protocols import CodeProtocol, HermesProtocol, Observation, OpenAIProtocol, Prompt
from runtime.toolbox import ToolBox
from runtime.trajectory import Trajectory, image, message_text, tool_call
from runtime.tiny_model import chat_template
from tools.images import demo_image
from tools.toolsets import get_toolset

PH = "<|vision_start|><|image_pad|><|vision_end|>"  # one image placeholder, as both Qwen-VL templates write it

TOOLS = [s for s in get_toolset("default").schemas() if s["function"]["name"] in ("crop", "rotate", "flip")] + [{
    "type": "function",
    "function": {"name": "count", "description": "Zählt Objekte — 数える «quoted» \"x\" \\ ½",
                 "parameters": {"type": "object", "properties": {"what": {"type": "string"}}, "required": ["what"]}},
}]


def block(name: str, arguments: dict) -> str:
    """A tool call as Qwen writes it (the canonical formatting the templates reproduce)."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


# A script: (completion, observations for its calls); an observation is (text, new images[, error]).
# Calls that carry a parse error get `Error: <error>` as a tool runner would send it.
SCRIPTS = {
    "one_image_one_round": dict(system="Answer briefly.", images=1, turns=[
        ("<think>The sign is small.</think>\n" + block("crop", {"box": [10, 5, 30, 25]}),
         [("Cropped to 20×20 px.", 1)]),
        ("<think>It says STOP.</think>\n<answer>STOP</answer>", None),
    ]),
    "parallel_calls_errors_unicode": dict(system=None, images=2, turns=[
        ("Je regarde les deux images 👀\n" + block("crop", {"box": [0, 0, 16, 16], "label": "chat \"noir\" \\ 猫\n"})
         + "\n" + block("rotate", {"angle": 90, "image_index": 1}) + "\n" + block("count", {"what": "Äpfel 🍎"}),
         [("", 1), ("Error: image index 7 does not exist; the workspace has images 0 to 2", 0, True), ("3", 0)]),
        ("Retry.\n" + '<tool_call>\n{"name": "crop", "arguments": {"box": [1, 2}\n</tool_call>', []),
        ("Nothing more to do: two cats.", None),
    ]),
    "several_turns_multi_image_results": dict(system="You can use tools. Think step by step.", images=1, turns=[
        ("Step 1.\n" + block("crop", {"box": [0, 0, 20, 20], "scale": 2.5}), [("two views", 2)]),
        ("Step 2: compare\n\n" + block("flip", {"direction": "horizontal"}) + "\n"
         + block("crop", {"box": [5, 5, 9, 9]}),
         [("", 1), ("no image this time", 0)]),
        ("<think>\nstill unsure\n</think>\n" + block("count", {"what": "dogs"}), [("Error: no dogs", 0, True)]),
    ]),
    "text_only": dict(system="You are a careful assistant.", images=0, turns=[
        ("I will count.\n" + block("count", {"what": "people, \"quoted\""}), [("7", 0)]),
        ("Two checks.\n" + block("count", {"what": "a"}) + "\n" + block("count", {"what": "b"}), [("1", 0), ("2", 0)]),
        ("<answer>7</answer>", None),
    ]),
}


def openai_reply(completion: str) -> dict:
    """The reply an OpenAI-compatible server sends for a Hermes completion: the text, and the calls as `tool_calls`
    (arguments as the JSON text the model wrote, broken or not); the server assigns no ids here."""
    calls = []
    for body in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", completion, re.S):
        name = re.search(r'"name": "([^"]*)"', body).group(1)
        arguments = body[body.index('"arguments": ') + len('"arguments": '):-1]
        calls.append({"type": "function", "function": {"name": name, "arguments": arguments}})
    content = re.sub(r"\n?<tool_call>.*?</tool_call>", "", completion, flags=re.S)
    return {"role": "assistant", "content": content or None, "tool_calls": calls}


QUESTION = "How many cats are there? Wie viele Katzen? 猫は何匹？"


def play(protocol, script: dict, tools=TOOLS, question: str = QUESTION):
    """Drive an episode through `script`; returns it and the trajectory as it was at every prompt and at the end."""
    episode = Episode.start(protocol, question, [demo_image(40 + 8 * k, 30, seed=k) for k in range(script["images"])],
                            system=script["system"], tools=tools)
    snapshots = []
    for completion, observations in script["turns"]:
        episode.prompt()
        snapshots.append(copy.deepcopy(episode.trajectory))
        pending = episode.submit(openai_reply(completion) if isinstance(protocol, OpenAIProtocol) else completion)
        if not pending:
            continue
        specs = iter(observations)
        results = {}
        for p in pending:
            if p.call.error:
                results[p.id] = Observation(f"Error: {p.call.error}", error=True)
                continue
            text, count, *error = next(specs)
            indices = tuple(episode.add_image(demo_image(12 + 4 * k, 16, seed=len(episode.workspace) + k))
                            for k in range(count))
            results[p.id] = Observation(text, indices, error=bool(error))
        episode.observe(results)
    snapshots.append(copy.deepcopy(episode.trajectory))
    return episode, snapshots


def render(processor, prompt: Prompt, add_generation_prompt: bool | None = None) -> str:
    """The prompt through the processor's chat template, as a driver renders it (by default asking for the next
    turn unless the last message is the model's own or is continued)."""
    if add_generation_prompt is None:
        add_generation_prompt = not prompt.continue_final_message and prompt.messages[-1]["role"] != "assistant"
    return processor.apply_chat_template(copy.deepcopy(prompt.messages), tools=prompt.tools, tokenize=False,
                                         add_generation_prompt=add_generation_prompt,
                                         continue_final_message=prompt.continue_final_message)


def ends_with_tool_round(trajectory: Trajectory) -> bool:
    return trajectory.messages[-1]["role"] == "tool"


def assert_processor_accepts(processor, text: str, images: list) -> None:
    """Check 3: one placeholder per image, and the processor expands each into its grid's tokens."""
    assert text.count(PH) == len(images)
    pil = [Image.fromarray(a) for a in images]
    out = processor(text=[text], images=pil or None, return_tensors="np")
    ids = np.asarray(out["input_ids"])
    if images:
        grid = np.asarray(out["image_grid_thw"])
        assert grid.shape == (len(images), 3)
        merge = processor.image_processor.merge_size
        assert (ids == processor.image_token_id).sum() == int(grid.prod(axis=1).sum()) // merge**2
    else:
        assert "image_grid_thw" not in out or len(out["image_grid_thw"]) == 0
        assert (ids == processor.image_token_id).sum() == 0


# -- 1. Qwen3-VL: tools in the system prompt == the template's native tool rendering --------------------------------

@pytest.mark.parametrize("name", list(SCRIPTS))
def test_qwen3_vl_system_tools_are_byte_identical_to_native_template(qwen3_vl_processor, name):
    _, snapshots = play(HermesProtocol(tools_in="system"), SCRIPTS[name])
    system, native = HermesProtocol(tools_in="system"), HermesProtocol(tools_in="template")
    tool_rounds = 0
    for trajectory in snapshots:
        as_text, as_native = system.render(trajectory), native.render(trajectory)
        assert as_text.tools is None and as_native.tools == TOOLS
        has_tools = any(m["role"] == "tool" for m in trajectory.messages)
        assert any(m["role"] == "tool" for m in as_native.messages) == has_tools
        assert not any(m["role"] == "tool" or "tool_calls" in m for m in as_text.messages)
        for generation in (False, True):
            rendered = render(qwen3_vl_processor, as_text, generation)
            assert rendered == render(qwen3_vl_processor, as_native, generation)
        assert all(np.array_equal(a, b) for a, b in zip(as_text.images, as_native.images, strict=True))
        tool_rounds += ends_with_tool_round(trajectory)
        if ends_with_tool_round(trajectory):  # the prompt at the end of a tool round asks for the next turn
            assert render(qwen3_vl_processor, as_native, True).endswith(
                "</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert tool_rounds >= 1


def test_qwen3_vl_follow_up_user_turn_and_no_tools(qwen3_vl_processor):
    """A hand-built trajectory: a second user question after an answer; and the same without a tool list."""
    for tools in (TOOLS, []):
        t = Trajectory(tools=tools)
        t.add_image(demo_image(32, 32))
        t.add("system", "Be brief.")
        t.add("user", image(0), "What is it?")
        t.add("assistant", "Let me zoom.", tool_calls=[tool_call("call_0", "crop", {"box": [0, 0, 8, 8]})])
        t.add_image(demo_image(16, 16, seed=2))
        t.add("tool", image(1), "ok", tool_call_id="call_0", name="crop")
        t.add("assistant", "A cat.")
        t.add("user", "And its colour? Farbe? 色？")
        t.add("assistant", "<answer>black</answer>")
        a, b = HermesProtocol(tools_in="system").render(t), HermesProtocol(tools_in="template").render(t)
        for generation in (False, True):
            assert render(qwen3_vl_processor, a, generation) == render(qwen3_vl_processor, b, generation)


def test_qwen3_vl_call_without_preamble_is_byte_identical(qwen3_vl_processor):
    script = dict(system="Be brief.", images=1, turns=[
        (block("crop", {"box": [0, 0, 10, 10]}), [("ok", 1)]),
        ("<answer>1</answer>", None),
    ])
    _, snapshots = play(HermesProtocol(), script)
    prompt = HermesProtocol(tools_in="template").render(snapshots[1])
    rendered = render(qwen3_vl_processor, prompt, True)
    assert "<|im_start|>assistant\n" + block("crop", {"box": [0, 0, 10, 10]}) + "<|im_end|>" in rendered
    assert rendered == render(qwen3_vl_processor, HermesProtocol(tools_in="system").render(snapshots[1]), True)


# -- 2. Qwen2.5-VL: its multimodal template has no tools; the text path equals Qwen2.5's text template ----------------

def text_template_messages(trajectory: Trajectory) -> list[dict]:
    """The canonical messages in the native form Qwen2.5's text template takes: string contents (an image as its
    placeholder text), tool_calls with dict arguments (that template applies `tojson`), tool messages."""
    out = []
    for m in trajectory.messages:
        content = "".join(PH if p["type"] == "image" else p["text"] for p in m["content"])
        native = {"role": m["role"], "content": content}
        if m.get("tool_calls"):
            native["tool_calls"] = [
                {"type": "function", "function": {"name": c["function"]["name"],
                                                  "arguments": json.loads(c["function"]["arguments"])}}
                for c in m["tool_calls"]]
        if m["role"] == "tool":
            native["name"] = m["name"]
        out.append(native)
    return out


@pytest.mark.parametrize("tools", [TOOLS, []], ids=["tools", "no_tools"])
@pytest.mark.parametrize("name", [n for n in SCRIPTS if SCRIPTS[n]["system"]])  # that template's default system differs
def test_qwen2_5_vl_system_tools_equal_the_qwen2_5_text_template(qwen2_5_vl_processor, name, tools):
    text_template = chat_template("qwen2_5.jinja")
    protocol = HermesProtocol(tools_in="system")
    _, snapshots = play(protocol, SCRIPTS[name], tools=tools)
    for trajectory in snapshots:
        prompt = protocol.render(trajectory)
        for generation in (False, True):
            rendered = render(qwen2_5_vl_processor, prompt, generation)
            expected = qwen2_5_vl_processor.tokenizer.apply_chat_template(
                text_template_messages(trajectory), tools=tools or None, chat_template=text_template, tokenize=False,
                add_generation_prompt=generation)
            assert rendered == expected
            if not trajectory.images:
                assert PH not in rendered


def test_qwen2_5_vl_image_placeholders_are_where_the_images_are(qwen2_5_vl_processor):
    protocol = HermesProtocol(tools_in="system")
    episode, _ = play(protocol, SCRIPTS["parallel_calls_errors_unicode"])
    rendered = render(qwen2_5_vl_processor, protocol.render(episode.trajectory))
    assert f"<|im_start|>user\n{PH}{PH}{QUESTION}<|im_end|>\n" in rendered  # the two inputs, then the question
    assert (f"<|im_start|>user\n<tool_response>\n{PH}\n</tool_response>\n<tool_response>\nError: image index 7 "
            "does not exist; the workspace has images 0 to 2\n</tool_response>\n<tool_response>\n3\n</tool_response>"
            "<|im_end|>\n") in rendered  # the crop's image inside its own response; nothing in the others
    assert rendered.count(PH) == 3 == len(episode.trajectory.images)
    assert rendered.startswith("<|im_start|>system\n# Tools\n")  # the tool list is the system turn, no default one


# -- 3. one placeholder per image, and the processor takes (text, images) ---------------------------------------------

PROTOCOLS = {
    "hermes_system": HermesProtocol(tools_in="system"),
    "hermes_template": HermesProtocol(tools_in="template"),
    "openai_user_images": OpenAIProtocol(tool_images="user"),
    "openai_tool_images": OpenAIProtocol(tool_images="tool"),
    "deepeyes": get_profile("deepeyes").protocol,
}


# The Qwen2.5-VL template renders no tools and no tool messages: only the protocols that write them as text.
TEMPLATE_PROTOCOLS = [("qwen2_5_vl", "hermes_system"), ("qwen2_5_vl", "deepeyes")]
TEMPLATE_PROTOCOLS += [("qwen3_vl", protocol) for protocol in PROTOCOLS]


@pytest.mark.parametrize(("kind", "protocol"), TEMPLATE_PROTOCOLS)
def test_placeholders_match_images_and_the_processor_accepts_them(request, kind, protocol):
    processor = request.getfixturevalue(f"{kind}_processor")
    for name in ("one_image_one_round", "parallel_calls_errors_unicode", "several_turns_multi_image_results"):
        _, snapshots = play(PROTOCOLS[protocol], SCRIPTS[name])
        for trajectory in snapshots:
            prompt = PROTOCOLS[protocol].render(trajectory)
            assert len(prompt.images) == sum(p["type"] == "image" for m in trajectory.messages for p in m["content"])
            assert_processor_accepts(processor, render(processor, prompt), prompt.images)


CODE_TURNS = [
    ("<think>crop the top half</think>\n<code>\n```python\nfrom PIL import Image\nimg = Image.open(path)\n"
     "img.crop((0, 0, 40, 15)).save(out)\nprint(img.size)\n```\n</code>", [("(40, 30)", 1)]),
    ("The crop shows a cat.\n<code>\nprint('größe', 1/0)\n</code>",
     [("Traceback (most recent call last):\nZeroDivisionError: division by zero", 0, True)]),
    ("<code>\n```python\nimg2 = img.rotate(90)\nimg2.save(out2)\nimg.save(out3)\n```\n</code>", [("", 2)]),
    ("<answer>one cat</answer>", None),
]


def code_episode(profile_name: str, turns=CODE_TURNS, stop_after: int | None = None):
    profile = get_profile(profile_name)
    script = dict(system=profile.system_prompt, images=1, turns=turns[:stop_after])
    return play(profile.protocol, script, tools=())


# Qwen3-VL's template renders only the text of assistant messages: Thyme's in-turn images need the Qwen2.5-VL
# template (Thyme is a Qwen2.5-VL model).
CODE_TEMPLATES = [("qwen2_5_vl", "thyme"), ("qwen2_5_vl", "pyvision"), ("qwen2_5_vl", "agentic_mme_gen"),
                  ("qwen3_vl", "pyvision"), ("qwen3_vl", "agentic_mme_gen")]


@pytest.mark.parametrize(("kind", "profile_name"), CODE_TEMPLATES)
def test_code_protocol_placeholders_and_processor(request, kind, profile_name):
    processor = request.getfixturevalue(f"{kind}_processor")
    protocol = get_profile(profile_name).protocol
    _, snapshots = code_episode(profile_name)
    for trajectory in snapshots:
        prompt = protocol.render(trajectory)
        assert_processor_accepts(processor, render(processor, prompt), prompt.images)


# -- 4. Thyme: the sandbox output goes inside the assistant turn, which the model continues -------------------------

def test_thyme_prompt_continues_the_assistant_turn(qwen2_5_vl_processor):
    protocol = get_profile("thyme").protocol
    episode, snapshots = code_episode("thyme")
    after_image = snapshots[1]  # the first cell ran and saved an image
    prompt = protocol.render(after_image)
    assert prompt.continue_final_message and prompt.messages[-1]["role"] == "assistant"
    rendered = qwen2_5_vl_processor.apply_chat_template(copy.deepcopy(prompt.messages), tokenize=False,
                                                        continue_final_message=True, add_generation_prompt=False)
    assert rendered.endswith("</sandbox_output>")
    turn = rendered[rendered.rindex("<|im_start|>assistant\n"):]
    assert turn == ("<|im_start|>assistant\n" + CODE_TURNS[0][0] + f"<sandbox_output>{PH}(40, 30)</sandbox_output>")
    assert rendered.count(PH) == 2 == len(prompt.images)  # the input image and the cell's image
    assert "<|im_end|>" not in turn

    # the model continued the same turn: later cells and their outputs stay in it
    prompt = protocol.render(snapshots[3])
    rendered = render(qwen2_5_vl_processor, prompt)
    turn = rendered[rendered.index("<|im_start|>assistant\n"):]
    assert rendered.count("<|im_start|>assistant") == 1 and rendered.endswith("</sandbox_output>")
    assert turn == ("<|im_start|>assistant\n" + CODE_TURNS[0][0] + f"<sandbox_output>{PH}(40, 30)</sandbox_output>"
                    + CODE_TURNS[1][0] + "<sandbox_output>" + CODE_TURNS[1][1][0][0] + "</sandbox_output>"
                    + CODE_TURNS[2][0] + f"<sandbox_output>{PH}{PH}</sandbox_output>")
    assert rendered.count(PH) == 4 == len(prompt.images)

    # the final answer closes the turn; nothing is continued any more
    final = protocol.render(episode.trajectory)
    assert not final.continue_final_message and episode.stop_reason is Stop.ANSWER
    assert render(qwen2_5_vl_processor, final).endswith("<answer>one cat</answer><|im_end|>\n")


def test_thyme_stops_at_the_first_code_block():
    protocol = get_profile("thyme").protocol
    assert "</code>" in protocol.stop
    parsed = protocol.parse("<code>print(1)</code> text the model never produced <code>print(2)</code>")
    assert parsed.content == "<code>print(1)</code>" and [c.arguments for c in parsed.calls] == [{"code": "print(1)"}]


# -- 5. PyVision and plain (Agentic-MME Gen): results come back as a user turn ---------------------------------------

def test_pyvision_results_are_an_interpreter_user_turn(qwen2_5_vl_processor):
    protocol = get_profile("pyvision").protocol
    _, snapshots = code_episode("pyvision")
    rendered = render(qwen2_5_vl_processor, protocol.render(snapshots[3]))
    turns = rendered.split("<|im_start|>")[1:]
    roles = [t.split("\n", 1)[0] for t in turns]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert turns[3] == ("user\n<interpreter>\nText Result:\n(40, 30)\nImage Result:\n"
                        f"<image_clue_1>{PH}</image_clue_1></interpreter>\n<|im_end|>\n")
    assert turns[5] == ("user\n<interpreter>\nText Result:\nTraceback (most recent call last):\n"
                        "ZeroDivisionError: division by zero\nImage Result:\nNone</interpreter>\n<|im_end|>\n")
    assert turns[7] == ("user\n<interpreter>\nText Result:\n\nImage Result:\n"  # PyVision's f-string, empty text
                        f"<image_clue_2>{PH}</image_clue_2><image_clue_3>{PH}</image_clue_3></interpreter>\n<|im_end|>\n")
    assert turns[2] == "assistant\n" + CODE_TURNS[0][0] + "<|im_end|>\n"
    assert turns[-1] == "assistant\n"


def test_agentic_mme_gen_results_are_a_plain_user_turn(qwen2_5_vl_processor):
    protocol = get_profile("agentic_mme_gen").protocol
    _, snapshots = code_episode("agentic_mme_gen")
    rendered = render(qwen2_5_vl_processor, protocol.render(snapshots[3]))
    turns = rendered.split("<|im_start|>")[1:]
    assert turns[0].startswith("system\nYou are a multimodal reasoning agent")
    assert turns[3] == f"user\n{PH}(40, 30)<|im_end|>\n"  # images, then the text, unwrapped
    assert turns[5] == "user\nTraceback (most recent call last):\nZeroDivisionError: division by zero<|im_end|>\n"
    assert turns[7] == f"user\n{PH}{PH}<|im_end|>\n"
    assert [t.split("\n", 1)[0] for t in turns].count("user") == 4


def test_code_results_of_several_blocks_share_one_user_turn(qwen2_5_vl_processor):
    """Without first_block_only every block runs; their results come back together in one turn."""
    for style, wrapper in (("pyvision", "<interpreter>\nText Result:\n{}\nImage Result:\nNone</interpreter>\n"), ("plain", "{}")):
        protocol = CodeProtocol(style=style)
        script = dict(system="s", images=1,
                      turns=[("<code>print(1)</code> and <code>print(2)</code>", [("1", 0), ("2", 0)])])
        episode, _ = play(protocol, script, tools=())
        rendered = render(qwen2_5_vl_processor, protocol.render(episode.trajectory))
        assert rendered.endswith("<|im_start|>user\n" + wrapper.format(1) + wrapper.format(2)
                                 + "<|im_end|>\n<|im_start|>assistant\n")


# -- 6. OpenAI: where tool images go ------------------------------------------------------------------------------

def test_openai_tool_images_user_moves_images_after_the_tool_messages(qwen3_vl_processor):
    episode, _ = play(OpenAIProtocol(), SCRIPTS["several_turns_multi_image_results"])
    trajectory = episode.trajectory
    prompt = OpenAIProtocol(tool_images="user").render(trajectory)
    assert prompt.tools == TOOLS
    tools_out = [m for m in prompt.messages if m["role"] == "tool"]
    assert len(tools_out) == sum(m["role"] == "tool" for m in trajectory.messages) == 4
    assert all(isinstance(m["content"], str) for m in tools_out)  # text only
    assert [m["content"] for m in tools_out] == [message_text(m) for m in trajectory.messages if m["role"] == "tool"]
    roles = [m["role"] for m in prompt.messages]
    assert roles == ["system", "user", "assistant", "tool", "user", "assistant", "tool", "tool", "user", "assistant",
                     "tool"]
    first = prompt.messages[4]["content"]
    assert [p["type"] for p in first] == ["text", "image", "image"]
    assert first[0]["text"] == "Image(s) returned by crop (call_0):"
    second = prompt.messages[8]["content"]
    assert [p["type"] for p in second] == ["text", "image"] and "flip (call_1)" in second[0]["text"]
    assert len(prompt.images) == 4
    for got, want in zip(prompt.images, trajectory.images, strict=True):  # input, then tool images in order
        assert np.array_equal(got, want)
    assert_processor_accepts(qwen3_vl_processor, render(qwen3_vl_processor, prompt), prompt.images)


def test_openai_tool_images_tool_keeps_them_in_the_tool_messages(qwen3_vl_processor):
    episode, _ = play(OpenAIProtocol(), SCRIPTS["several_turns_multi_image_results"])
    prompt = OpenAIProtocol(tool_images="tool").render(episode.trajectory)
    roles = [m["role"] for m in prompt.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "tool", "assistant", "tool"]
    tools_out = [m for m in prompt.messages if m["role"] == "tool"]
    assert [[p["type"] for p in m["content"]] for m in tools_out] == [
        ["image", "image", "text"], ["image"], ["text"], ["text"]]
    assert [m["tool_call_id"] for m in tools_out] == ["call_0", "call_1", "call_2", "call_3"]
    rendered = render(qwen3_vl_processor, prompt)
    assert f"<tool_response>\n{PH}{PH}two views\n</tool_response>" in rendered
    assert_processor_accepts(qwen3_vl_processor, rendered, prompt.images)


def test_openai_parses_server_tool_calls():
    reply = {"content": None, "tool_calls": [
        {"id": "abc", "type": "function", "function": {"name": "crop", "arguments": '{"box": [1, 2, 3, 4]}'}},
        {"id": "def", "type": "function", "function": {"name": "crop", "arguments": '{"box": [1, 2'}}]}
    parsed = OpenAIProtocol().parse(reply)
    assert parsed.content == "" and parsed.calls[0].arguments == {"box": [1, 2, 3, 4]} and parsed.calls[0].id == "abc"
    assert parsed.calls[1].arguments is None and "not valid JSON" in parsed.calls[1].error
    assert parsed.calls[1].raw == '{"box": [1, 2'


# -- 7. DeepEyes ---------------------------------------------------------------------------------------------------

# Visual-Agent/DeepEyes, verl/workers/agent/envs/mm_process_engine/prompt.py: PROMPT.SYSTEM_PROMPT_V2 and
# PROMPT.USER_PROMPT_V2, written out here independently of runtime/profiles.py.
DEEPEYES_SYSTEM_PROMPT_V2 = (
    "You are a helpful assistant.\n\n# Tools\nYou may call one or more functions to assist with the user query.\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type":"function","function":{"name":"image_zoom_in_tool","description":"Zoom in on a specific region of an '
    'image by cropping it based on a bounding box (bbox) and an optional object label.","parameters":{"type":"object",'
    '"properties":{"bbox_2d":{"type":"array","items":{"type":"number"},"minItems":4,"maxItems":4,"description":"The '
    'bounding box of the region to zoom in, as [x1, y1, x2, y2], where (x1, y1) is the top-left corner and (x2, y2) is '
    'the bottom-right corner."},"label":{"type":"string","description":"The name or label of the object in the '
    'specified bounding box (optional)."}},"required":["bbox"]}}}\n</tools>\n\n# How to call a tool\n'
    "Return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n\n**Example**:  \n<tool_call>  \n'
    '{"name": "image_zoom_in_tool", "arguments": {"bbox_2d": [10, 20, 100, 200], "label": "the apple on the desk"}}  \n'
    "</tool_call>"
)
DEEPEYES_USER_PROMPT_V2 = ("\nThink first, call **image_zoom_in_tool** if needed, then answer. Format strictly as:  "
                           "<think>...</think>  <tool_call>...</tool_call> (if tools needed)  <answer>...</answer> ")


def zoom(box, label="the cat"):
    return block("image_zoom_in_tool", {"bbox_2d": box, "label": label})


def deepeyes_episode(replies):
    profile = get_profile("deepeyes")
    toolbox = ToolBox(profile.toolset)
    episode = toolbox.start(profile, "What is written on the sign?", [demo_image(120, 160)])
    prompts = []
    for reply in replies:
        prompts.append(episode.prompt())
        episode.submit(reply)
        if episode.state is State.RUNNING_TOOLS:
            toolbox.run([episode])
    return episode, prompts


def test_deepeyes_system_prompt_and_observation_turn(qwen2_5_vl_processor):
    profile = get_profile("deepeyes")
    assert profile.question_suffix == DEEPEYES_USER_PROMPT_V2
    episode, prompts = deepeyes_episode(["<think>zoom on the sign</think>\n" + zoom([10, 20, 100, 90]),
                                         "<think>it says STOP</think>  <answer>STOP</answer>"])
    first = prompts[0]
    assert first.messages[0] == {"role": "system", "content": [{"type": "text", "text": DEEPEYES_SYSTEM_PROMPT_V2}]}
    rendered = render(qwen2_5_vl_processor, prompts[1])
    assert rendered.startswith(f"<|im_start|>system\n{DEEPEYES_SYSTEM_PROMPT_V2}<|im_end|>\n<|im_start|>user\n{PH}"
                               f"What is written on the sign?{DEEPEYES_USER_PROMPT_V2}<|im_end|>\n")
    assert rendered.endswith("<|im_start|>assistant\n<think>zoom on the sign</think>\n" + zoom([10, 20, 100, 90])
                             + f"<|im_end|>\n<|im_start|>user\n<tool_response>{PH}</tool_response>"
                             + DEEPEYES_USER_PROMPT_V2 + "<|im_end|>\n<|im_start|>assistant\n")
    assert len(prompts[1].images) == 2 and prompts[1].images[1].shape[:2] == (70, 90)  # the zoomed crop
    assert_processor_accepts(qwen2_5_vl_processor, rendered, prompts[1].images)
    assert episode.stop_reason is Stop.ANSWER and episode.answer == "STOP"


def test_deepeyes_runs_only_the_first_call_of_a_turn(qwen2_5_vl_processor):
    episode, prompts = deepeyes_episode([zoom([0, 0, 50, 50], "left") + "\n" + zoom([60, 60, 150, 110], "right"),
                                         "<answer>x</answer>"])
    tool_messages = [m for m in episode.trajectory.messages if m["role"] == "tool"]
    assert len(tool_messages) == 2 and len(episode.workspace) == 2  # only the first zoom made an image
    assert [p["type"] for p in tool_messages[0]["content"]] == ["image"]
    assert message_text(tool_messages[1]).startswith("Error: only 1 tool call(s) per turn are run")
    rendered = render(qwen2_5_vl_processor, prompts[1])
    observation = rendered[rendered.rindex("<|im_start|>user\n"):]
    assert observation == ("<|im_start|>user\n" + f"<tool_response>{PH}</tool_response>\n<tool_response>"
                           + message_text(tool_messages[1]) + "</tool_response>" + DEEPEYES_USER_PROMPT_V2
                           + "<|im_end|>\n<|im_start|>assistant\n")
    assert observation.count(DEEPEYES_USER_PROMPT_V2) == 1 and observation.count(PH) == 1
    assert_processor_accepts(qwen2_5_vl_processor, rendered, prompts[1].images)


def test_deepeyes_assistant_turn_is_rendered_as_generated(qwen2_5_vl_processor):
    completion = ('<think>zoom on the sign</think>  <tool_call>  \n{"name": "image_zoom_in_tool", "arguments": '
                  '{"bbox_2d": [10,20,100,90]}}  \n</tool_call>')
    _, prompts = deepeyes_episode([completion, "<answer>STOP</answer>"])
    rendered = render(qwen2_5_vl_processor, prompts[1])
    assert f"<|im_start|>assistant\n{completion}<|im_end|>\n" in rendered
