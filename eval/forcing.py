"""Scripted replies for random-weight smoke models (`--force_tool_calls N`, vLLM engine backend only).

A random-weight model never calls a tool by itself. With `--force_tool_calls N` each episode's first N
replies are scripted as a think block of the model's own tokens, then one well-formed call of one of the
episode's tools, and the next reply as a think block, then an answer of the model's own tokens:

    <think>{model tokens}</think>
    <tool_call>
    {"name": "rotate", "arguments": {"degree": 137}}
    </tool_call>

The harness draws the tool and its arguments from the tool's JSON schema (seeded per episode and turn), so
a smoke run drives real tool calls through the whole loop; a drawn argument the tool rejects comes back as
its error, as for any model. The vLLM engine enforces the script with a logits processor
(`eval/backends/vllm_engine.py`): forced tokens, then free tokens the model samples among whole-word tokens,
so the reply tokenizes back to the ids generated. That costs an add per row and step, where structured
outputs (xgrammar) cost a third of a small model's decoding speed on vLLM's CPU backend. Do not use it to
measure a real model: it overrides the model's own decisions.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from runtime.protocols.hermes import call_block

Script = tuple[str | int, ...]  # forced text, and counts of free tokens, in order


@dataclass(frozen=True)
class ForcedReplies:
    """The first `calls` replies of an episode are each one tool call, the next one an answer; each starts with
    a think block of `think` free tokens (min, max) and an answer has 1-`answer_tokens` free tokens."""
    calls: int
    think: tuple[int, int] = (4, 24)
    answer_tokens: int = 6

    def script(self, schemas: list[dict], turn: int, seed: int) -> Script:
        """The script of reply `turn` (0-based) of an episode that shows these tool schemas."""
        rng = random.Random(seed)
        think = ("<think>", rng.randint(*self.think), "</think>\n")
        if schemas and turn < self.calls:
            schema = rng.choice(schemas)
            function = schema.get("function", schema)
            arguments = draw_arguments(function.get("parameters") or {}, rng)
            return think + (call_block(function["name"], json.dumps(arguments)),)
        return think + ("<answer>", rng.randint(1, self.answer_tokens), "</answer>")


def draw_arguments(parameters: dict, rng: random.Random) -> dict:
    """Values for the required arguments of a JSON schema's `properties`, within the shapes it allows."""
    properties = parameters.get("properties") or {}
    # an image index names an image of the episode's workspace; the original (0) is the one every episode has
    return {name: 0 if name == "image_index" else _draw(properties.get(name) or {}, rng)
            for name in parameters.get("required") or []}


def _draw(schema: dict, rng: random.Random):
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    low = schema.get("minimum", schema.get("exclusiveMinimum", -100 if kind in ("integer", "number") else 0))
    high = schema.get("maximum", schema.get("exclusiveMaximum", 999))
    if kind == "integer":
        return rng.randint(int(low), int(high))
    if kind == "number":
        return round(rng.uniform(low, high), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        low_items = max(1, schema.get("minItems", 1))
        count = rng.randint(low_items, max(low_items, schema.get("maxItems", 8)))
        return [_draw(schema.get("items") or {"type": "number"}, rng) for _ in range(count)]
    if kind == "object":
        return {}
    return rng.choice(("red", "the left part", "north", "a b c"))
