"""Regexes that constrain a reply to a Hermes tool call or to an answer (vLLM structured outputs).

A random-weight smoke model never calls a tool by itself. With `--force_tool_calls N` the harness
constrains each episode's first N replies to a well-formed call of one of the episode's tools (arguments
drawn by the model within the shapes the tool's JSON schema allows) and the next reply to an answer, so
a smoke run drives real tool calls through the whole loop. The model still chooses which tool and which
arguments; a call the tool rejects comes back as an error, as for any model. Do not use it to measure a
real model: it overrides the model's own decision to call a tool.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

ANSWER = r"<answer>[A-Za-z0-9 ,.\[\]-]{1,24}</answer>"


@dataclass(frozen=True)
class ForcedReplies:
    """The first `calls` replies of an episode must each be one tool call, the next one an answer; each may
    start with a `<think>` block of `think` characters (min, max; min 0 makes it optional)."""
    calls: int
    think: tuple[int, int] = (0, 120)

    def regex(self, schemas: list[dict], turn: int) -> str:
        """The regex for reply `turn` (0-based) of an episode that shows these tool schemas."""
        low, high = self.think
        think = r"<think>[a-z ,.]{%d,%d}</think>\n" % (max(low, 1), high)
        think = f"({think})?" if low == 0 else think
        if schemas and turn < self.calls:
            return think + tool_call_regex(schemas)
        return think + ANSWER


def tool_call_regex(schemas: list[dict]) -> str:
    """One `<tool_call>` of any of these tools, with the required arguments in schema order."""
    if not schemas:
        raise ValueError("forcing tool calls needs tools: this episode has none (--tools none?)")
    calls = "|".join(_call(schema["function"] if "function" in schema else schema) for schema in schemas)
    return r"<tool_call>\n(" + calls + r")\n</tool_call>"


def _call(function: dict) -> str:
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    arguments = [re.escape(json.dumps(name)) + ": " + _value(properties.get(name) or {})
                 for name in parameters.get("required") or []]
    return (re.escape('{"name": ' + json.dumps(function["name"]) + ', "arguments": {') + ", ".join(arguments)
            + re.escape("}}"))


def _value(schema: dict) -> str:
    if "enum" in schema:
        return "(" + "|".join(re.escape(json.dumps(v, ensure_ascii=False)) for v in schema["enum"]) + ")"
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    low, high = schema.get("minimum", schema.get("exclusiveMinimum")), schema.get("maximum")
    sign = "" if low is not None and low >= 0 else "-?"
    width = min(3, len(str(int(abs(high))))) if high is not None else 3
    whole = f"(0|[1-9][0-9]{{0,{width - 1}}})"  # JSON numbers have no leading zeros
    if kind == "integer":
        return sign + whole
    if kind == "number":
        return sign + whole + r"(\.[0-9]{1,2})?"
    if kind == "boolean":
        return "(true|false)"
    if kind == "array":
        item = _value(schema.get("items") or {"type": "number"})
        low = max(1, schema.get("minItems", 1))
        high = max(low, schema.get("maxItems", 8))
        return r"\[" + item + "(, " + item + "){" + f"{low - 1},{high - 1}" + r"}\]"
    if kind == "object":
        return r"\{\}"
    return r'"[a-z ]{1,16}"'
