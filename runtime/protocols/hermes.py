"""Hermes tool calls: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>` in the assistant
text, results in a user turn as `<tool_response>...</tool_response>` (Qwen2.5-VL, Qwen3-VL, DeepEyes).

`tools_in="template"` hands the canonical messages and `tools=` to the chat template (Qwen3-VL's renders
tools, tool calls and tool messages with images). `tools_in="system"` renders all of it into plain
system/user/assistant text, for templates without tool support (Qwen2.5-VL's multimodal template,
DeepEyes) and for trainers that cannot take tool messages; with the Qwen wrapper strings the two are
byte-identical (tests/runtime/test_templates.py checks it against the real templates).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from runtime.protocols.base import (END_OF_TURN, Call, Finish, Parsed, Prompt, Protocol, merge_text, read_json,
                                    read_reply, unclosed_error, wire_parts)
from runtime.trajectory import Trajectory, message_text

TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>"
)
OPEN, CLOSE = "<tool_call>", "</tool_call>"
MAX_CLOSE_TRIES = 8  # how many later closing tags a call may span when its JSON quotes "</tool_call>"


def tools_section(tools: list[dict]) -> str:
    """The tool list exactly as Qwen's templates write it (`tojson` = json.dumps without ASCII escaping)."""
    return TOOLS_HEADER + "".join("\n" + _schema_json(tool) for tool in tools) + TOOLS_FOOTER


_SCHEMA_JSON: dict[int, tuple[dict, str]] = {}  # id(schema) -> (the schema, kept alive so ids stay unique; its JSON)


def _schema_json(schema: dict) -> str:
    """A schema's JSON, encoded once: every turn of every episode shows the same schema objects (a tool
    set's), and encoding ~50 of them per prompt dominated replaying long references. Schemas are what a
    model was shown, so they are never changed after an episode starts."""
    hit = _SCHEMA_JSON.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    text = json.dumps(schema, ensure_ascii=False)
    if len(_SCHEMA_JSON) >= 4096:  # trajectories loaded from disk bring fresh dicts: stay bounded
        _SCHEMA_JSON.clear()
    _SCHEMA_JSON[id(schema)] = (schema, text)
    return text


def call_block(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


@dataclass(frozen=True)
class HermesProtocol(Protocol):
    name: str = "hermes"
    tools_in: str = "system"  # "system": rendered as text here; "template": `tools=` for the chat template
    response_prefix: str = "<tool_response>\n"
    response_suffix: str = "\n</tool_response>"
    observation_suffix: str = ""  # text after the tool responses in the same user turn (DeepEyes' reminder)
    tools_prompt: str | None = None  # verbatim text in place of the generated tool list (DeepEyes' system prompt)
    verbatim: bool = False  # keep replies exactly as generated (harnesses that append the raw completion)
    # a call left open at the end of the turn runs, as vLLM's hermes parser reads it; DeepEyes' harness
    # reads only closed calls
    open_calls_run: bool = True

    def __post_init__(self):
        if self.tools_in not in ("system", "template"):
            raise ValueError(f"tools_in must be 'system' or 'template', got {self.tools_in!r}")
        if self.tools_in == "template" and (self.response_prefix, self.response_suffix, self.observation_suffix,
                                            self.tools_prompt) != ("<tool_response>\n", "\n</tool_response>", "", None):
            raise ValueError("custom tool-response wrappers need tools_in='system': the chat template writes its own")

    def plain(self) -> "HermesProtocol":
        """The same call format as vLLM's hermes parser and Qwen's templates read it, without a model's own
        tool prompt, wrappers and reminder: what the model is shown when a benchmark offers its own tools
        (DeepEyes' verbatim prompt and reminder name a zoom tool the benchmark does not have)."""
        return HermesProtocol(stop=self.stop, images_first=self.images_first, end_of_turn=self.end_of_turn,
                              tools_in=self.tools_in)

    def render(self, trajectory: Trajectory) -> Prompt:
        images: list = []
        if self.tools_in == "template":
            messages = [_native(m, trajectory.images, images) for m in trajectory.messages]
            return Prompt(messages, images, tools=list(trajectory.tools) or None, stop=self.stop)
        messages: list[dict] = []
        canonical = list(trajectory.messages)
        if trajectory.tools or self.tools_prompt:
            system = message_text(canonical.pop(0)) + "\n\n" if canonical and canonical[0]["role"] == "system" else ""
            listed = self.tools_prompt if self.tools_prompt is not None else tools_section(trajectory.tools)
            messages.append({"role": "system", "content": [{"type": "text", "text": system + listed}]})
        for message in canonical:
            if message["role"] == "tool":
                parts = [{"type": "text", "text": self.response_prefix if not _continues_tools(messages) else
                          "\n" + self.response_prefix}]
                parts += wire_parts(message["content"], trajectory.images, images)
                parts.append({"type": "text", "text": self.response_suffix})
                if _continues_tools(messages):
                    _strip_suffix(messages[-1], self.observation_suffix)
                    messages[-1]["content"] = merge_text(messages[-1]["content"] + parts)
                else:
                    messages.append({"role": "user", "content": merge_text(parts), "_tools": True})
                if self.observation_suffix:
                    messages[-1]["content"] = merge_text(messages[-1]["content"] + [{"type": "text", "text": self.observation_suffix}])
            elif message["role"] == "assistant":
                content = message_text(message)
                for k, call in enumerate(message.get("tool_calls", ()) if OPEN not in content else ()):
                    if content or k:
                        content += "\n"
                    content += call_block(call["function"]["name"], call["function"]["arguments"])
                messages.append({"role": "assistant", "content": [{"type": "text", "text": content}]})
            else:
                messages.append({"role": message["role"], "content": merge_text(wire_parts(message["content"], trajectory.images, images))})
        for message in messages:
            message.pop("_tools", None)
        return Prompt(messages, images, stop=self.stop)

    def parse(self, completion: str | dict, finish: Finish = END_OF_TURN) -> Parsed:
        """Calls are read from every `<tool_call>` block outside an answer. When all blocks parse, they leave
        the text and go to `tool_calls` (the template writes them back); when one does not, or would not
        render back as written but for whitespace (escaped quotes, duplicate keys, number spellings), or
        `verbatim` is set, the text is kept exactly as generated, blocks included, and the renderer does
        not add them again. A call cut by the token limit never runs."""
        text, past_turn = self.own_turn(completion)
        reading = read_reply(text, OPEN, CLOSE, finish, _close_of)
        completion, blocks = reading.text, reading.blocks
        calls = [self._call(block, finish) for block in blocks]
        if self.verbatim or not all(c.parsed and c.error is None and _canonical(c, block.body)
                                    for c, block in zip(calls, blocks)):
            return Parsed(completion, tuple(calls), reading.answer, text, past_turn)
        kept, cursor = [], 0
        for block in blocks:
            before = completion[cursor:block.start]
            kept.append(before[:-1] if before.endswith("\n") else before)  # the template writes this newline back
            cursor = block.end
        tail = completion[cursor:]
        kept.append(tail if tail.strip() or not blocks else "")
        return Parsed("".join(kept), tuple(calls), reading.answer, text, past_turn)

    def _call(self, block, finish: Finish) -> Call:
        call = _read_call(block.body)
        if block.closed or (self.open_calls_run and not finish.length):
            return call
        return Call(call.name, None, unclosed_error("tool call", CLOSE, finish), parsed=False)


def _close_of(text: str, body_start: int) -> int:
    """Where a call's closing tag is: the first one, or a later one (of the next few) when the JSON quotes
    "</tool_call>" in a string and only ends there; -1 when there is none."""
    closes, search = [], body_start
    while len(closes) < MAX_CLOSE_TRIES and (close := text.find(CLOSE, search)) >= 0:
        closes.append(close)
        search = close + len(CLOSE)
    return next((c for c in closes if _is_json(text[body_start:c])), closes[0] if closes else -1)


def _canonical(call: Call, body: str) -> bool:
    rendered = call_block(call.name, call.arguments_json())[len(OPEN):-len(CLOSE)]
    return re.sub(r"\s", "", rendered) == re.sub(r"\s", "", body)


def _is_json(body: str) -> bool:
    try:
        read_json(body.strip())
        return True
    except ValueError:
        return False


def _read_call(body: str) -> Call:
    body = body.strip()
    try:
        data = read_json(body)
    except ValueError as err:
        name = re.search(r'"name"\s*:\s*"([^"]*)"', body)
        return Call(name.group(1) if name else "", None, f"the tool call is not valid JSON ({err}); write "
                    '{"name": <function-name>, "arguments": {...}} inside <tool_call></tool_call>', parsed=False)
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return Call("", None, 'the tool call must be a JSON object with a string "name" and an object "arguments"',
                    parsed=False)
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # some models double-encode the arguments
        try:
            arguments = read_json(arguments) if arguments.strip() else {}
        except ValueError:
            pass
    if not isinstance(arguments, dict):
        return Call(data["name"], None, f'"arguments" must be a JSON object, got {type(arguments).__name__}', parsed=False)
    return Call(data["name"], arguments)


def _native(message: dict, workspace: list, images: list) -> dict:
    # Empty text parts dropped: Qwen's templates test `message.content` before the first call's newline.
    wired = {"role": message["role"], "content": merge_text(wire_parts(message["content"], workspace, images))}
    if "tool_calls" in message and OPEN not in message_text(message):
        wired["tool_calls"] = [dict(call) for call in message["tool_calls"]]
    if message["role"] == "tool":
        wired["tool_call_id"] = message.get("tool_call_id")
        wired["name"] = message.get("name")
    return wired


def _continues_tools(messages: list[dict]) -> bool:
    return bool(messages) and messages[-1].get("_tools", False)


def _strip_suffix(message: dict, suffix: str) -> None:
    if suffix and message["content"] and message["content"][-1]["type"] == "text" and message["content"][-1]["text"].endswith(suffix):
        last = message["content"][-1]["text"][: -len(suffix)]
        message["content"] = message["content"][:-1] + ([{"type": "text", "text": last}] if last else [])
