"""OpenAI function calling: `tools=` in the request, structured `tool_calls` in the reply, results in
`tool` messages. Servers differ on images inside tool messages: `tool_images="user"` sends a tool's
images in a user message after the tool messages (VisualToolBench's harness does this, and many
servers accept only text in tool messages); `"tool"` keeps them in the tool message."""

from __future__ import annotations

import json
from dataclasses import dataclass

from runtime.protocols.base import (END_OF_TURN, Call, Finish, Parsed, Prompt, Protocol, merge_text, read_json,
                                    read_reply, wire_parts)
from runtime.trajectory import Trajectory, message_text


@dataclass(frozen=True)
class OpenAIProtocol(Protocol):
    name: str = "openai"
    tool_images: str = "user"  # "user" | "tool"

    def __post_init__(self):
        if self.tool_images not in ("user", "tool"):
            raise ValueError(f"tool_images must be 'user' or 'tool', got {self.tool_images!r}")

    def parse(self, completion: str | dict, finish: Finish = END_OF_TURN) -> Parsed:
        """`completion` is the reply message (`{"content": ..., "tool_calls": [...]}`) or its text. The
        server has read the calls; the text only gives the answer."""
        content, past_turn = self.own_turn(completion)
        answer = read_reply(content, None, None, finish).answer
        if not isinstance(completion, dict):
            return Parsed(content, (), answer, content, past_turn)
        raw_calls = completion.get("tool_calls") or []
        calls = [_read_call(raw, k) for k, raw in enumerate(raw_calls if isinstance(raw_calls, list) else [raw_calls])]
        return Parsed(content, tuple(calls), answer, content, past_turn)

    def render(self, trajectory: Trajectory) -> Prompt:
        images: list = []
        messages: list[dict] = []
        pending: list[dict] = []  # what the current run of tool messages cannot carry, sent after it
        for message in trajectory.messages:
            if message["role"] != "tool" and pending:
                messages.append({"role": "user", "content": merge_text(wire_parts(pending, trajectory.images, images))})
                pending = []
            if message["role"] == "tool" and message.get("tool_call_id") is None:
                # it answers a call that could not be read: no tool_call_id exists, so it goes in the user
                # message after the run of tool messages (servers reject anything between them)
                pending += message["content"]
            elif message["role"] == "tool":
                wired = {"role": "tool", "tool_call_id": message.get("tool_call_id"), "name": message.get("name")}
                if self.tool_images == "tool":
                    wired["content"] = merge_text(wire_parts(message["content"], trajectory.images, images))
                else:
                    wired["content"] = message_text(message)
                    shown = [p for p in message["content"] if p["type"] == "image"]
                    if shown:
                        pending += [{"type": "text", "text": f"Image(s) returned by {message.get('name')} "
                                                             f"({message.get('tool_call_id')}):"}, *shown]
                messages.append(wired)
            else:
                wired = {"role": message["role"], "content": merge_text(wire_parts(message["content"], trajectory.images, images))}
                if message.get("tool_calls"):
                    wired["tool_calls"] = [dict(call) for call in message["tool_calls"]]
                messages.append(wired)
        if pending:
            messages.append({"role": "user", "content": merge_text(wire_parts(pending, trajectory.images, images))})
        return Prompt(messages, images, tools=list(trajectory.tools) or None, stop=self.stop)


def _read_call(raw, k: int) -> Call:
    if not isinstance(raw, dict) or not isinstance(raw.get("function"), dict):
        return Call("", None, "the tool call is not an object with a 'function' member", id=_id(raw, k), parsed=False)
    function = raw["function"]
    name = function.get("name") if isinstance(function.get("name"), str) else ""
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, str):
        try:
            arguments = read_json(arguments) if arguments.strip() else {}
        except ValueError as err:
            return Call(name, None, f"the arguments are not valid JSON ({err})", id=_id(raw, k), raw=arguments)
    elif isinstance(arguments, dict):  # parsed by the server already: held to the strict JSON a string must be
        try:
            arguments = read_json(json.dumps(arguments, allow_nan=False))
        except (TypeError, ValueError, RecursionError) as err:
            reason = str(err).split(";")[0]
            return Call(name, None, f"the arguments are not valid JSON ({reason})", id=_id(raw, k),
                        raw=_as_sent(arguments))
    if not isinstance(arguments, dict):
        return Call(name, None, f"the arguments must be a JSON object, got {type(arguments).__name__}", id=_id(raw, k))
    if not name:
        return Call("", None, "the tool call has no function name", id=_id(raw, k))
    return Call(name, arguments, id=_id(raw, k))


def _as_sent(arguments: dict) -> str:
    """Arguments a server parsed, written back as close to what it received as JSON text allows (NaN kept)."""
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return ""


def _id(raw, k: int) -> str | None:
    value = raw.get("id") if isinstance(raw, dict) else None
    return value if isinstance(value, str) and value else None
