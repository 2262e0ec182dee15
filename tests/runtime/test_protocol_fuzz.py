"""Fuzzing every protocol's `parse`, and whole episodes, with completions that mix random text with the real
syntax (tool calls, code blocks and fences, answers, end-of-turn tokens, broken JSON, unicode, NUL bytes, huge
numbers, deep nesting), each ending in one of the ways a backend reports: the end of turn, the token limit, or
a stop string.

Each of the 5,000 generated completions is parsed by every protocol configuration, and by the OpenAI ones
also as a server reply (a dict with random `tool_calls`), so every protocol sees 5,000 of each form it takes.
The oracles say which blocks may run: only closed ones (by their tag, or by the closing tag as the stop string),
never one cut by the token limit, never a fence in another language or a fence line, never anything past the
model's end of turn. The extreme inputs that once crashed parsers (integers over 4,300 digits, JSON nested past
the recursion limit, non-finite numbers) are in the strategies and pinned by the regression tests at the end.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runtime.episode import Budgets, Episode, State
from runtime.profiles import ModelProfile, get_profile
from runtime.protocols import CODE_TOOL, CodeProtocol, HermesProtocol, Observation, OpenAIProtocol
from runtime.protocols.base import Finish
from runtime.trajectory import Trajectory

HUGE_DIGITS = 4400  # over Python's 4,300-digit int conversion limit (sys.get_int_max_str_digits)
MAX_NESTING = 5000  # past json's recursion limit

FUZZ = settings(max_examples=5000, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FEWER = settings(FUZZ, max_examples=500)

HERMES = {
    "hermes_system": HermesProtocol(tools_in="system"),
    "hermes_template": HermesProtocol(tools_in="template"),
    "deepeyes": get_profile("deepeyes").protocol,  # custom wrappers, only closed calls run
}
CODE = {f"code_{style}_{'first' if first else 'all'}": CodeProtocol(style=style, first_block_only=first)
        for style in ("thyme", "pyvision", "plain") for first in (True, False)}
OPENAI = {"openai": OpenAIProtocol(tool_images="user"), "openai_tool_images": OpenAIProtocol(tool_images="tool")}
TEXT_PROTOCOLS = {**HERMES, **CODE, **OPENAI}  # OpenAI also takes a bare string completion
assert not get_profile("deepeyes").protocol.open_calls_run and get_profile("deepeyes").max_calls_per_turn == 1
TURN_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|im_start|>")
FINISHES = st.sampled_from([Finish(), Finish(), Finish(length=True), Finish(stop="</code>"),
                            Finish(stop="</answer>"), Finish(stop="</tool_call>"), Finish(stop="<|im_end|>")])

# -- strategies ------------------------------------------------------------------------------------------------

SYNTAX = st.sampled_from([
    "<tool_call>", "</tool_call>", "<tool_call>\n", "\n</tool_call>", "<tool_call><tool_call>",
    "</tool_call></tool_call>",
    "<code>", "</code>", "```python\n", "```py\n", "```", "\n```\n", "<answer>", "</answer>", "<answer></answer>",
    "<think>", "</think>", "<tool_response>", "</tool_response>", "<sandbox_output>", "<|im_end|>", "<|im_start|>",
    "<|endoftext|>", "<|im_start|>user\n", "<|vision_start|><|image_pad|><|vision_end|>", "<interpreter>", "~~~",
    "```bash\n", "```Python\n", "```json\n", "\n", "\n\n", " ", "\x00", '"', "\\", "{", "}", "[", "]", ":", ",", '{"name": ', '"arguments": ',
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
    fence = draw(st.sampled_from(["", "```python\n", "```py\n", "```\n", "  ```python3 \n", "```javascript\n",
                                  "```PYTHON {.x}\n", "~~~py\r\n", "```bash\n", "```json\n", "```text\n",
                                  "\n```Python3 title=a.py\n"]))
    body = draw(st.sampled_from(["print(1)", "x = '</code>'", "", "\n", "import os\nprint(os.getcwd())", "```",
                                 "a = 1\r\nprint(a)", "```python\nprint(2)\n```", "<code>print(3)</code>",
                                 "print('<answer>x</answer>')"]) | TEXT)
    close = draw(st.sampled_from(["", "\n```", "```\n", "\n```\n", "``", "\n~~~", "\n```\nmore text",
                                  "\n```\n```python\nprint(4)\n```"])) if fence else ""
    return "<code>" + fence + body + close + draw(st.sampled_from(["</code>", "</code>", ""]))


FRAGMENTS = st.one_of(TEXT, SYNTAX, SYNTAX, call_texts(), code_texts(),
                      st.builds(lambda t: f"<answer>{t}</answer>", TEXT),
                      st.builds(lambda t: f"<think>{t}</think>", TEXT))
OPEN_ENDS = st.sampled_from(["", "", "", '<tool_call>\n{"name": "crop", "arguments": {"box": [1, 2, 3, 4]}}\n',
                             "<code>\nprint(1)\n", "<code>```python\nprint(1)\n```", "<answer>42"])
COMPLETIONS = st.tuples(st.lists(FRAGMENTS, max_size=6).map("".join), OPEN_ENDS).map("".join)  # blocks left open

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

CONTROL = re.compile(r"<\|[^<>|\s]{1,64}\|>")
FENCE_LINE = re.compile(r"[ \t]*(`{3,}|~{3,})[^\n]*")


def own_turn(text: str) -> str:
    """The reply up to its first end-of-turn token, control tokens it spells broken (as the next prompt needs)."""
    cut = min((text.find(m) for m in TURN_MARKERS if m in text), default=len(text))
    return CONTROL.sub(lambda m: "<\u200b" + m.group()[1:], text[:cut])


def reading(text: str, opener: str | None, closer: str | None, finish: Finish):
    """Blocks (body, closed) and the answer, by a token scan: every tag position first, then consumed left to
    right. Inside an answer only </answer> counts, inside a block only its closer (for a tool call, the first
    of its next 8 closers that completes the JSON). The last closed answer wins; an unclosed one only when
    </answer> was the stop string."""
    tags = sorted((m.start(), m.group()) for m in re.finditer(
        "|".join(re.escape(t) for t in ("<answer>", "</answer>", opener, closer) if t), text))
    blocks, answers, state, since = [], [], None, 0
    for at, tag in tags:
        if at < since:
            continue
        if state is None and tag == "<answer>":
            state, body = "answer", at + 8
        elif state is None and tag == opener:
            state, body = "block", at + len(opener)
        elif state == "answer" and tag == "</answer>":
            answers.append(text[body:at])
            state, since = None, at + 9
        elif state == "block" and tag == closer:
            closes = [m.start() for m in re.finditer(re.escape(closer), text[body:])][:8]
            end = body + next((c for c in closes if opener == "<tool_call>" and is_json(text[body:body + c])), closes[0])
            blocks.append((text[body:end], True))
            state, since = None, end + len(closer)
    if state == "block":
        blocks.append((text[body:], finish.stop == closer and not finish.length))
    if state == "answer" and finish.stop == "</answer>" and not finish.length:
        answers.append(text[body:])
    return blocks, (answers[-1].strip() if answers else None)


def is_json(body: str) -> bool:
    try:
        json.loads(body)
        return True
    except (ValueError, RecursionError):
        return False


def check_calls(parsed) -> None:
    for call in parsed.calls:
        assert isinstance(call.name, str)
        assert (isinstance(call.arguments, dict) and call.error is None) or (isinstance(call.error, str) and call.error)
        if call.arguments is not None:
            json.dumps(call.arguments)  # recordable
        if not call.parsed:
            assert call.arguments is None


def check_code_call(call, body: str, closed: bool) -> None:
    """A block runs only when closed, holds no nested <code>, and is unfenced or fenced as Python with nothing
    after its closing fence; fence lines never reach the interpreter. A plain closed block always runs."""
    assert call.name == CODE_TOOL and isinstance(call.arguments["code"], str)
    lines = [line for line in body.replace("\r\n", "\n").split("\n") if line.strip()]
    fences = [k for k, line in enumerate(lines) if FENCE_LINE.fullmatch(line)]
    if call.error is None:
        code = call.arguments["code"]
        assert closed and "<code>" not in body and code.strip()
        assert not any(FENCE_LINE.fullmatch(line) for line in code.split("\n"))
        if fences:
            language = re.match(r"[\w+-]*", FENCE_LINE.fullmatch(lines[0]).group()[len(lines[0]) - len(lines[0].lstrip()):]
                                .lstrip("`~").strip()).group().lower()
            assert fences[0] == 0 and language in ("", "python", "py", "python3") and fences[1:] in ([], [len(lines) - 1])
    elif closed and lines and not fences and "<code>" not in body:
        raise AssertionError(f"a closed plain block did not run: {call.error}")


def check_text_parse(name: str, protocol, completion: str, finish: Finish) -> None:
    parsed = protocol.parse(completion, finish)
    own = own_turn(completion)
    assert parsed.past_turn == completion[len(completion[:min((completion.find(m) for m in TURN_MARKERS
                                                               if m in completion), default=len(completion))]):]
    assert not CONTROL.search(parsed.content)  # nothing in the kept text renders as a control token
    assert protocol.parse(own, finish).calls == parsed.calls  # nothing past the end of turn matters
    check_calls(parsed)
    if isinstance(protocol, CodeProtocol):
        found, answer = reading(own, "<code>", "</code>", finish)
        if protocol.first_block_only and found:
            found = found[:1]
            cut = own.find("</code>", own.find("<code>") + 6)
            _, answer = reading(own[:cut + 7] if cut >= 0 else own, "<code>", "</code>", finish)
        assert len(parsed.calls) == len(found)
        for call, (body, closed) in zip(parsed.calls, found):
            check_code_call(call, body, closed)
    elif isinstance(protocol, HermesProtocol):
        found, answer = reading(own, "<tool_call>", "</tool_call>", finish)
        assert len(parsed.calls) == len(found) and all(c.id is None for c in parsed.calls)
        for call, (_, closed) in zip(parsed.calls, found):
            assert call.error is not None or closed or (protocol.open_calls_run and not finish.length)
    else:
        _, answer = reading(own, None, None, finish)
        assert parsed.content == own and parsed.calls == ()
    assert parsed.answer == answer
    assert protocol.parse({"role": "assistant", "content": completion}, finish).content == parsed.content  # a reply dict


# -- parse fuzzing ---------------------------------------------------------------------------------------------

def check_openai_reply(protocol, reply: dict, finish: Finish) -> None:
    parsed = protocol.parse(reply, finish)
    raw = reply["tool_calls"]
    assert len(parsed.calls) == (len(raw) if isinstance(raw, list) else 1 if raw else 0)
    content = reply["content"]
    text = own_turn(content if isinstance(content, str) else "".join(p["text"] for p in content or []))
    assert parsed.content == text and parsed.answer == reading(text, None, None, finish)[1]
    check_calls(parsed)
    for call, original in zip(parsed.calls, raw if isinstance(raw, list) else [raw]):
        assert call.id is None or (isinstance(call.id, str) and call.id == original.get("id"))
        if call.error is None:
            assert call.name and call.name == original["function"]["name"]


@FUZZ
@given(COMPLETIONS, TOOL_CALLS, st.integers(0, 3), FINISHES)
def test_every_protocol_parses_fuzzed_completions(completion, tool_calls, form, finish):
    """Every text protocol parses the completion (as a string and as a reply dict); the OpenAI protocols also
    parse it as a server reply with random `tool_calls` and the text as a string, None, or content parts."""
    for name, protocol in TEXT_PROTOCOLS.items():
        check_text_parse(name, protocol, completion, finish)
    half = len(completion) // 2
    parts = [{"type": "text", "text": completion[:half]}, {"type": "text", "text": completion[half:]}]
    content = [completion, None, parts, []][form]
    for protocol in OPENAI.values():
        check_openai_reply(protocol, {"role": "assistant", "content": content, "tool_calls": tool_calls}, finish)


# -- round trip: valid blocks come back as written -------------------------------------------------------------

PLAIN = st.lists(TEXT | st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "</tool_call>", "\n", " ",
                                          "<code>", "\x00", "猫"]), max_size=4).map("".join).filter(
    lambda t: "<tool_call>" not in t and "<|im_" not in t and t.rfind("<answer>") <= t.rfind("</answer>"))


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
    for protocol in (HERMES["hermes_system"], ModelProfile("capped", HermesProtocol(tools_in="system"),
                                                          max_calls_per_turn=1)):
        episode = record(protocol, completion)
        recorded = episode.trajectory.messages[-1]
        assert len(recorded.get("tool_calls", [])) == n_calls
        rendered = episode.protocol.render(episode.trajectory).messages[-1]
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
        finish = data.draw(FINISHES)
        pending = episode.submit(data.draw(completions), truncated=finish.length, stop=finish.stop)
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


def nested(depth: int) -> list:
    value = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 10 ** 4301, nested(100_000)],
                         ids=["nan", "inf", "huge_int", "deep"])
def test_openai_arguments_parsed_by_the_server_are_held_to_strict_json(value):
    parsed = OpenAIProtocol().parse({"content": None, "tool_calls": [{"id": "a", "function": {
        "name": "crop", "arguments": {"box": [1, 2], "x": value}}}]})
    assert len(parsed.calls) == 1 and parsed.calls[0].arguments is None
    assert parsed.calls[0].error.startswith("the arguments are not valid JSON")
    if isinstance(value, float):  # what the server sent stays readable in the trajectory
        assert parsed.calls[0].raw.startswith('{"box": [1, 2], "x": ')
    good = OpenAIProtocol().parse({"content": None, "tool_calls": [{"id": "a", "function": {
        "name": "crop", "arguments": {"box": [1, 2], "label": "é", "x": -0.0}}}]})
    assert good.calls[0].error is None
    assert json.dumps(good.calls[0].arguments, ensure_ascii=False) == '{"box": [1, 2], "label": "é", "x": -0.0}'


@pytest.mark.parametrize("content", [[{"type": "text", "text": None}], [{"type": "text", "text": 5}], 5],
                         ids=["null_text", "int_text", "int_content"])
def test_openai_malformed_content_parts_do_not_raise(content):
    parsed = OpenAIProtocol().parse({"content": content, "tool_calls": []})
    assert isinstance(parsed.content, str)


# Number literals a strict JSON reader takes (extreme ones included), and ones it must refuse: NaN and Infinity
# (Python's json writes and reads them), floats that overflow, integers past Python's conversion limit.
STRICT_NUMBERS = st.sampled_from(["0", "-0", "-0.0", "1.5e-400", "5e-324", "1.7976931348623157e308", "-1e308",
                                  "0.1e1", "1E+2", "1" * 300, "9" * 4300, "-" + "7" * 4300])
LOOSE_NUMBERS = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "9" * HUGE_DIGITS])
JSON_STRINGS = st.text(max_size=6).flatmap(  # non-ASCII and control characters, written raw or escaped
    lambda s: st.sampled_from([json.dumps(s), json.dumps(s, ensure_ascii=False)]))


def json_texts(numbers):
    """JSON text (nested arrays and objects of strings, literals and `numbers`), written out as a model would."""
    leaves = numbers | JSON_STRINGS | st.sampled_from(["true", "false", "null"])
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]")
                        | objects(inner, 0), max_leaves=6)


def objects(values, min_size: int = 1):
    members = st.lists(st.tuples(JSON_STRINGS, values), min_size=min_size, max_size=3)
    return members.map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}")


STRICT_ARGUMENTS = objects(json_texts(STRICT_NUMBERS))
LOOSE_ARGUMENTS = st.tuples(STRICT_ARGUMENTS, LOOSE_NUMBERS).map(lambda a: '{"ok": ' + a[0] + ', "x": [' + a[1] + "]}")


def strict_json(text: str):
    return json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


@settings(FUZZ, max_examples=150)
@given(st.lists(STRICT_ARGUMENTS, min_size=1, max_size=3), st.lists(LOOSE_ARGUMENTS, max_size=2), st.randoms())
def test_recorded_arguments_are_strict_json(strict, loose, rng):
    """Every call whose arguments are strict JSON is recorded, meaning what the model wrote; one with NaN,
    Infinity or an out-of-range number is an error call, never recorded."""
    arguments = [(text, True) for text in strict] + [(text, False) for text in loose]
    rng.shuffle(arguments)
    completion = "\n".join('<tool_call>\n{"name": "crop", "arguments": ' + text + "}\n</tool_call>"
                           for text, _ in arguments)
    episode = record(HermesProtocol(), completion)
    recorded = [call["function"]["arguments"] for call in episode.trajectory.messages[-1].get("tool_calls", [])]
    assert [strict_json(text) for text in recorded] == [json.loads(text) for text, ok in arguments if ok]


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
