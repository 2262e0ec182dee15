"""Fuzzing every protocol's `parse`, and whole episodes, with completions that mix random text with the real
syntax (tool calls, code blocks, answers, broken JSON, unicode, NUL bytes, huge numbers, deep nesting).

Each of the 5,000 generated completions is parsed by every protocol configuration, and by the OpenAI ones
also as a server reply (a dict with random `tool_calls`), so every protocol sees 5,000 of each form it takes.
The extreme inputs that once crashed parsers (integers over 4,300 digits, JSON nested past the recursion
limit, non-finite numbers) are in the strategies and pinned by the regression tests at the end.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runtime.episode import Budgets, Episode, State
from runtime.profiles import get_profile
from runtime.protocols import CODE_TOOL, CodeProtocol, HermesProtocol, Observation, OpenAIProtocol
from runtime.trajectory import Trajectory

HUGE_DIGITS = 4400  # over Python's 4,300-digit int conversion limit (sys.get_int_max_str_digits)
MAX_NESTING = 5000  # past json's recursion limit

FUZZ = settings(max_examples=5000, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FEWER = settings(FUZZ, max_examples=500)

HERMES = {
    "hermes_system": HermesProtocol(tools_in="system"),
    "hermes_template": HermesProtocol(tools_in="template"),
    "deepeyes": get_profile("deepeyes").protocol,  # max_calls_per_turn=1, custom wrappers
}
CODE = {f"code_{style}_{'first' if first else 'all'}": CodeProtocol(style=style, first_block_only=first)
        for style in ("thyme", "pyvision", "plain") for first in (True, False)}
CODE["code_plain_capped"] = CodeProtocol(style="plain", max_calls_per_turn=2)
OPENAI = {"openai": OpenAIProtocol(tool_images="user"),
          "openai_capped": OpenAIProtocol(tool_images="tool", max_calls_per_turn=2)}
TEXT_PROTOCOLS = {**HERMES, **CODE, **OPENAI}  # OpenAI also takes a bare string completion
assert get_profile("deepeyes").protocol.max_calls_per_turn == 1

# -- strategies ------------------------------------------------------------------------------------------------

SYNTAX = st.sampled_from([
    "<tool_call>", "</tool_call>", "<tool_call>\n", "\n</tool_call>", "<tool_call><tool_call>",
    "</tool_call></tool_call>",
    "<code>", "</code>", "```python\n", "```py\n", "```", "\n```\n", "<answer>", "</answer>", "<answer></answer>",
    "<think>", "</think>", "<tool_response>", "</tool_response>", "<sandbox_output>", "<|im_end|>", "<|im_start|>",
    "<interpreter>", "\n", "\n\n", " ", "\x00", '"', "\\", "{", "}", "[", "]", ":", ",", '{"name": ', '"arguments": ',
    "\ufeff", "\u2028", "🐱", "猫", "é", "\r\n", "\t",
])
TEXT = st.text(max_size=16)
NAMES = st.sampled_from(["crop", "rotate", "image_zoom_in_tool", "python", "数える", "zoom in", "a_b-c.d", "x" * 40,
                         ""])
KEYS = st.sampled_from(["box", "bbox_2d", "x", "label", "code", "é", "", "a b", "\x00"]) | st.text(max_size=4)
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-10**40, max_value=10**40)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=4)
# Generating nested JSON is the slow part of these strategies: most arguments come from a varied pool.
ARGUMENT_POOL = [
    {}, {"box": [10, 20, 100, 200]}, {"bbox_2d": [0.5, 1e-9, 1e300, -0.0], "label": "the apple on the desk"},
    {"angle": 90, "direction": "clockwise", "expand": True, "fill": None}, {"code": "print('</code>')\n"},
    {"label": "猫 🐱 \"quoted\" \\ back\nslash \u2028 \x00"}, {"nested": {"a": [1, [2, [3, {"b": None}]]]}},
    {"big": 10**40, "small": -10**40, "float": 1.7976931348623157e308}, {"": "", " ": [" "]},
    {"<tool_call>": "</tool_call>", "<answer>": "</answer>"}, {"list": list(range(30))}, {"text": "x" * 200},
]
POOLED = st.sampled_from(ARGUMENT_POOL)
ARGUMENTS = st.one_of(POOLED, POOLED, POOLED, st.dictionaries(KEYS, SCALARS | st.lists(SCALARS, max_size=4), max_size=3))
NUMBERS = st.sampled_from(["1e400", "-1e400", "1.5e-400", "-0", "0.1e1", "NaN", "Infinity", "-Infinity", "1" * 300,
                           "9" * HUGE_DIGITS, "-" + "7" * HUGE_DIGITS, "0" * 50, "1_000", "0x10", "+1", ".5", "5."])


def block(name: str, arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


@st.composite
def call_texts(draw) -> str:
    """A tool call: valid (canonical, compact, double-encoded, loosely spaced), or broken in some way."""
    kind = draw(st.integers(0, 9))
    if kind == 8:  # random text inside
        return "<tool_call>" + draw(TEXT) + draw(st.sampled_from(["</tool_call>", ""]))
    if kind == 6:  # wrong shapes
        return "<tool_call>" + json.dumps(draw(JSON_VALUES | st.fixed_dictionaries(
            {"name": SCALARS, "arguments": JSON_VALUES}))) + "</tool_call>"
    name = draw(NAMES)
    if kind == 4:  # a number JSON has no Python value for, or a huge one
        return '<tool_call>\n{"name": "' + name + '", "arguments": {"x": ' + draw(NUMBERS) + "}}\n</tool_call>"
    if kind == 5:  # nesting
        depth = draw(st.integers(1, MAX_NESTING))
        inner = "[" * depth + "]" * depth if draw(st.booleans()) else "[" * depth
        return '<tool_call>{"name": "' + name + '", "arguments": {"deep": ' + inner + "}}</tool_call>"
    arguments = draw(ARGUMENTS)
    if kind == 1:
        compact = json.dumps({"name": name, "arguments": arguments}, separators=(",", ":"))
        return "<tool_call>" + compact + "</tool_call>"
    if kind == 2:  # double-encoded arguments
        return block(name, json.dumps(arguments))
    if kind == 3:  # truncated JSON, closed or not
        body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        return "<tool_call>\n" + body[: draw(st.integers(0, len(body)))] + draw(st.sampled_from(["\n</tool_call>", ""]))
    if kind == 7:  # nested tags
        return "<tool_call>" + block(name, arguments) + "</tool_call>"
    if kind == 9:  # loose spacing
        return block(name, arguments).replace("\n", draw(st.sampled_from(["", " ", "\n\n", "\r\n"])))
    return block(name, arguments)


@st.composite
def code_texts(draw) -> str:
    fence = draw(st.sampled_from(["", "```python\n", "```py\n", "```\n", "  ```python3 \n", "```javascript\n"]))
    body = draw(st.sampled_from(["print(1)", "x = '</code>'", "", "\n", "import os\nprint(os.getcwd())", "```"]) | TEXT)
    close = draw(st.sampled_from(["", "\n```", "```\n", "\n```\n", "``"])) if fence else ""
    return "<code>" + fence + body + close + draw(st.sampled_from(["</code>", "</code>", ""]))


FRAGMENTS = st.one_of(TEXT, SYNTAX, SYNTAX, call_texts(), code_texts(),
                      st.builds(lambda t: f"<answer>{t}</answer>", TEXT),
                      st.builds(lambda t: f"<think>{t}</think>", TEXT))
COMPLETIONS = st.lists(FRAGMENTS, max_size=6).map("".join)

ODD = st.sampled_from([None, True, 0, -1.5, "", "x", [], {}, [None], {"name": 1}])  # wrong types, cheaply
STRUCTURED_CALLS = st.fixed_dictionaries(
    {"id": st.sampled_from([None, "", "call_1", "chatcmpl-tool-9f", 7]), "type": st.just("function"),
     "function": st.fixed_dictionaries({"name": NAMES | ODD, "arguments": st.one_of(
         ARGUMENTS.map(json.dumps), ARGUMENTS.map(json.dumps), ARGUMENTS, ODD,
         ARGUMENTS.map(json.dumps).flatmap(lambda s: st.integers(0, len(s)).map(lambda k: s[:k])),
         NUMBERS.map(lambda n: '{"x": ' + n + "}"), TEXT)})},
    optional={"extra": ODD})
RAW_CALLS = st.one_of(STRUCTURED_CALLS, STRUCTURED_CALLS, STRUCTURED_CALLS, ODD, JSON_VALUES,
                      st.fixed_dictionaries({"function": ODD}))
TOOL_CALLS = st.one_of(st.lists(RAW_CALLS, max_size=3), st.none(), RAW_CALLS)


# -- oracles ---------------------------------------------------------------------------------------------------

def expected_answer(text: str) -> str | None:
    """The text inside the last closed <answer>...</answer> (scanning left to right); failing that, an unclosed
    <answer> with nothing closing it runs to the end (generation stopped on the closing tag)."""
    closed, position = [], 0
    while (start := text.find("<answer>", position)) >= 0 and (end := text.find("</answer>", start + 8)) >= 0:
        closed.append(text[start + 8:end])
        position = end + 9
    if closed:
        return closed[-1].strip()
    start = text.rfind("<answer>")
    return text[start + 8:].strip() if start >= 0 else None


def blocks(text: str, tag: str) -> list[tuple[int, int]]:
    """(start, end) of each `<tag>...</tag>` block, an unclosed last one running to the end. A tool call
    whose JSON quotes its closing tag runs to the first of its next 8 closing tags that completes the JSON."""
    spans, position, close = [], 0, f"</{tag}>"
    while (start := text.find(f"<{tag}>", position)) >= 0:
        body = start + len(tag) + 2
        ends, search = [], body
        while len(ends) < 8 and (end := text.find(close, search)) >= 0:
            ends.append(end)
            search = end + len(close)
        if not ends:
            spans.append((start, len(text)))
            break
        end = next((e for e in ends if tag == "tool_call" and is_json(text[body:e])), ends[0])
        spans.append((start, end + len(close)))
        position = end + len(close)
    return spans


def is_json(body: str) -> bool:
    try:
        json.loads(body)
        return True
    except (ValueError, RecursionError):
        return False


def outside(text: str, spans: list[tuple[int, int]]) -> str:
    """The text around the blocks: an <answer> quoted inside code or call arguments is not an answer."""
    pieces, cursor = [], 0
    for start, end in spans:
        pieces.append(text[cursor:start])
        cursor = end
    return "".join(pieces) + text[cursor:]


def check_parsed(protocol, parsed, answer_source: str) -> None:
    assert isinstance(parsed.content, str)
    for call in parsed.calls:
        assert isinstance(call.name, str)
        assert (isinstance(call.arguments, dict) and call.error is None) or (isinstance(call.error, str) and call.error)
        if call.arguments is not None:
            json.dumps(call.arguments)  # recordable
        if not call.parsed:
            assert call.arguments is None
    if protocol.max_calls_per_turn is not None:
        assert sum(call.error is None for call in parsed.calls) <= protocol.max_calls_per_turn
    assert parsed.answer == expected_answer(answer_source)


def check_text_parse(name: str, protocol, completion: str) -> None:
    parsed = protocol.parse(completion)
    if isinstance(protocol, CodeProtocol):
        spans = blocks(completion, "code")
        if protocol.first_block_only and spans:
            spans = spans[:1]
            assert parsed.content == completion[:spans[0][1]]
        else:
            assert parsed.content == completion  # the code stays in the text as written
        assert len(parsed.calls) == len(spans)
        assert all(c.name == CODE_TOOL and isinstance(c.arguments["code"], str) for c in parsed.calls)
        check_parsed(protocol, parsed, outside(parsed.content, blocks(parsed.content, "code")))
    elif isinstance(protocol, HermesProtocol):
        spans = blocks(completion, "tool_call")
        assert len(parsed.calls) == len(spans)
        check_parsed(protocol, parsed, outside(completion, spans))
        assert all(c.id is None for c in parsed.calls)
    else:
        assert parsed.content == completion and parsed.calls == ()
        check_parsed(protocol, parsed, completion)
    assert protocol.parse({"role": "assistant", "content": completion}).content == parsed.content  # a reply dict


# -- parse fuzzing ---------------------------------------------------------------------------------------------

def check_openai_reply(protocol, reply: dict) -> None:
    parsed = protocol.parse(reply)
    raw = reply["tool_calls"]
    assert len(parsed.calls) == (len(raw) if isinstance(raw, list) else 1 if raw else 0)
    content = reply["content"]
    text = content if isinstance(content, str) else "".join(p["text"] for p in content or [])
    assert parsed.content == text
    check_parsed(protocol, parsed, text)
    for call, original in zip(parsed.calls, raw if isinstance(raw, list) else [raw]):
        assert call.id is None or (isinstance(call.id, str) and call.id == original.get("id"))
        if call.error is None:
            assert call.name and call.name == original["function"]["name"]


@FUZZ
@given(COMPLETIONS, TOOL_CALLS, st.integers(0, 3))
def test_every_protocol_parses_fuzzed_completions(completion, tool_calls, form):
    """Every text protocol parses the completion (as a string and as a reply dict); the OpenAI protocols also
    parse it as a server reply with random `tool_calls` and the text as a string, None, or content parts."""
    for name, protocol in TEXT_PROTOCOLS.items():
        check_text_parse(name, protocol, completion)
    half = len(completion) // 2
    parts = [{"type": "text", "text": completion[:half]}, {"type": "text", "text": completion[half:]}]
    content = [completion, None, parts, []][form]
    for protocol in OPENAI.values():
        check_openai_reply(protocol, {"role": "assistant", "content": content, "tool_calls": tool_calls})


# -- round trip: valid blocks come back as written -------------------------------------------------------------

PLAIN = st.lists(TEXT | st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "</tool_call>", "\n", " ",
                                          "<code>", "\x00", "猫"]), max_size=4).map("".join).filter(
    lambda t: "<tool_call>" not in t and "<|im_" not in t)


@st.composite
def canonical_completions(draw, preamble=PLAIN):
    text = draw(preamble)
    calls = [block(draw(NAMES), draw(ARGUMENTS)) for _ in range(draw(st.integers(0, 3)))]
    return text + ("\n" if text and calls else "") + "\n".join(calls), len(calls)


def record(protocol, completion: str) -> Episode:
    episode = Episode.start(protocol, "q", tools=[{"type": "function", "function": {"name": "crop"}}])
    episode.prompt()
    episode.submit(completion)
    return episode


@settings(FUZZ, max_examples=600)
@given(canonical_completions())
def test_hermes_system_round_trips_valid_blocks(case):
    completion, n_calls = case
    for protocol in (HERMES["hermes_system"], HermesProtocol(tools_in="system", max_calls_per_turn=1)):
        episode = record(protocol, completion)
        recorded = episode.trajectory.messages[-1]
        assert len(recorded.get("tool_calls", [])) == n_calls
        rendered = protocol.render(episode.trajectory).messages[-1]
        assert rendered["role"] == "assistant" and rendered["content"] == [{"type": "text", "text": completion}]


@settings(FUZZ, max_examples=600)
@given(canonical_completions())
def test_hermes_template_round_trips_valid_blocks(qwen3_vl_processor, case):
    completion, n_calls = case
    episode = record(HERMES["hermes_template"], completion)
    prompt = HERMES["hermes_template"].render(episode.trajectory)
    assert len(prompt.messages[-1].get("tool_calls", [])) == n_calls
    rendered = qwen3_vl_processor.apply_chat_template(prompt.messages, tools=prompt.tools, tokenize=False)
    assert rendered.endswith("<|im_start|>assistant\n" + completion + "<|im_end|>\n")


# -- whole episodes --------------------------------------------------------------------------------------------

ALL = {**HERMES, **CODE, **OPENAI}
POOL = [np.full((6 + k, 5 + 2 * k, 3), 40 * k, np.uint8) for k in range(3)]
POOL.append(np.arange(35, dtype=np.uint8).reshape(5, 7))  # gray
TOOLS = [{"type": "function", "function": {"name": "crop", "description": "Crop «x» ½",
                                            "parameters": {"type": "object", "properties": {}}}}]


# biased towards calls, so that episodes run several turns
EPISODE_COMPLETIONS = st.tuples(
    st.lists(TEXT | SYNTAX | call_texts() | code_texts(), max_size=3).map("".join),
    st.one_of(call_texts(), code_texts(), call_texts(), code_texts(), COMPLETIONS)).map("".join)


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz_images")


PH = "<|vision_start|><|image_pad|><|vision_end|>"


def check_renders(processor, prompt) -> None:
    """The prompt goes through the real chat template, with one placeholder per image."""
    assert sum(p.get("type") == "image" for m in prompt.messages if isinstance(m["content"], list)
               for p in m["content"]) == len(prompt.images)
    rendered = processor.apply_chat_template(json.loads(json.dumps(prompt.messages)), tools=prompt.tools,
                                             tokenize=False, continue_final_message=prompt.continue_final_message,
                                             add_generation_prompt=not prompt.continue_final_message)
    assert rendered.count(PH) == len(prompt.images)
    if prompt.continue_final_message:
        assert rendered.endswith("</sandbox_output>")


@FEWER
@given(st.sampled_from(sorted(ALL)), st.data())
def test_episodes_on_fuzzed_completions_stay_valid_and_round_trip(image_dir, qwen2_5_vl_processor, qwen3_vl_processor,
                                                                   name, data):
    protocol = ALL[name]
    # Qwen2.5-VL's template for tools as text and for code (images in assistant turns); Qwen3-VL's for native tools
    processor = qwen3_vl_processor if name == "hermes_template" or name.startswith("openai") else qwen2_5_vl_processor
    episode = Episode.start(protocol, data.draw(TEXT), POOL[: data.draw(st.integers(0, 2))],
                            system=data.draw(st.none() | TEXT), tools=data.draw(st.sampled_from([(), TOOLS])),
                            budgets=Budgets(max_turns=4, max_tool_calls=6, max_images=7))
    completions = (st.fixed_dictionaries({"content": st.none() | COMPLETIONS, "tool_calls": TOOL_CALLS})
                   if name.startswith("openai") else EPISODE_COMPLETIONS)
    while not episode.done:
        check_renders(processor, episode.prompt())
        pending = episode.submit(data.draw(completions), truncated=data.draw(st.sampled_from([False] * 9 + [True])))
        episode.trajectory.validate()
        if episode.state is State.RUNNING_TOOLS:
            results = {}
            for p in pending:
                images = tuple(episode.add_image(POOL[k]) for k in data.draw(st.lists(st.integers(0, 3), max_size=2)))
                results[p.id] = Observation(data.draw(TEXT | SYNTAX), images, data.draw(st.booleans()))
            episode.observe(results)
            episode.trajectory.validate()
    trajectory = episode.trajectory
    assert trajectory.meta["stop_reason"] == episode.stop_reason.value
    event(f"stop: {episode.stop_reason.value}, turns: {episode.turns}")
    line = json.dumps(trajectory.to_dict(image_dir), ensure_ascii=False)
    back = Trajectory.from_dict(json.loads(line), image_dir)
    assert back == trajectory and back.messages == trajectory.messages and back.meta == trajectory.meta
    check_renders(processor, protocol.render(back))  # a reloaded trajectory renders


# -- regressions: inputs that once crashed or corrupted a trajectory ----------------------------------------------------------------

HUGE_INT = '<tool_call>\n{"name": "crop", "arguments": {"x": ' + "1" * 4301 + "}}\n</tool_call>"
DEEP = '<tool_call>\n{"name": "crop", "arguments": {"x": ' + "[" * 100_000 + "}}\n</tool_call>"


@pytest.mark.parametrize("name", sorted(HERMES))
def test_hermes_huge_integer_is_an_error_call(name):
    parsed = HERMES[name].parse(HUGE_INT)
    assert len(parsed.calls) == 1 and parsed.calls[0].error


@pytest.mark.parametrize("name", sorted(HERMES))
def test_hermes_deep_nesting_is_an_error_call(name):
    parsed = HERMES[name].parse(DEEP)
    assert len(parsed.calls) == 1 and parsed.calls[0].error


@pytest.mark.parametrize("arguments", ['{"x": ' + "1" * 4301 + "}", "[" * 100_000], ids=["huge_int", "deep"])
def test_openai_unreadable_arguments_are_an_error_call(arguments):
    parsed = OpenAIProtocol().parse({"content": None, "tool_calls": [{"id": "a", "function": {"name": "crop",
                                                                                             "arguments": arguments}}]})
    assert len(parsed.calls) == 1 and parsed.calls[0].error and parsed.calls[0].arguments is None


@pytest.mark.parametrize("content", [[{"type": "text", "text": None}], [{"type": "text", "text": 5}], 5],
                         ids=["null_text", "int_text", "int_content"])
def test_openai_malformed_content_parts_do_not_raise(content):
    parsed = OpenAIProtocol().parse({"content": content, "tool_calls": []})
    assert isinstance(parsed.content, str)


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN"])
def test_recorded_arguments_are_strict_json(number):
    completion = '<tool_call>\n{"name": "crop", "arguments": {"x": ' + number + "}}\n</tool_call>"
    episode = record(HermesProtocol(), completion)
    calls = episode.trajectory.messages[-1].get("tool_calls", [])
    for call in calls:
        json.loads(call["function"]["arguments"], parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


def test_openai_tool_messages_answer_recorded_calls():
    episode = Episode.start(OpenAIProtocol(), "q", tools=TOOLS)
    episode.prompt()
    pending = episode.submit({"content": "", "tool_calls": [{"id": "x1", "type": "function"}]})
    episode.observe({p.id: Observation(f"Error: {p.call.error}", error=True) for p in pending})
    messages = OpenAIProtocol().render(episode.trajectory).messages
    ids = {c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])}
    assert all(m["tool_call_id"] in ids for m in messages if m["role"] == "tool")


def test_hermes_call_with_closing_tag_in_a_string_round_trips():
    completion = block("python", {"code": "print('</tool_call>')"})
    episode = record(HermesProtocol(), completion)
    assert [c["function"]["name"] for c in episode.trajectory.messages[-1].get("tool_calls", [])] == ["python"]
    assert HermesProtocol().render(episode.trajectory).messages[-1]["content"][0]["text"] == completion
