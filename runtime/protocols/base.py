"""What every protocol shares: parsed completions, rendered prompts, tool observations, and the helpers
that turn canonical messages into what a chat template or an OpenAI-compatible server takes."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from runtime.trajectory import Trajectory, message_text, text


@dataclass(frozen=True)
class Call:
    """One tool call as parsed from a completion. `arguments` is None and `error` says why when the
    call cannot run; the episode sends the error back to the model instead of running it."""

    name: str
    arguments: dict | None
    error: str | None = None
    id: str | None = None  # set by servers that return tool calls (OpenAI); the episode numbers the rest
    parsed: bool = True  # False: the call's text could not be read and stays in the assistant content
    raw: str = ""  # the arguments as sent, when they are not valid JSON (OpenAI replies)

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False) if self.arguments is not None else self.raw


@dataclass(frozen=True)
class Parsed:
    content: str  # the assistant text the trajectory keeps
    calls: tuple[Call, ...] = ()
    answer: str | None = None  # the text inside <answer>...</answer>, when present


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt. Image parts in `messages` are `{"type": "image"}` placeholders filled from
    `images` in order (the convention of HF processors, TRL and vLLM's `LLM.chat` with PIL images)."""

    messages: list[dict]
    images: list[np.ndarray]
    tools: list[dict] | None = None  # for templates/servers that render tools themselves
    continue_final_message: bool = False  # the last (assistant) message is continued, not answered
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Observation:
    """What a tool gave back: text and workspace image indices."""

    text: str
    images: tuple[int, ...] = ()
    error: bool = False


@dataclass(frozen=True)
class Protocol:
    """How one model family spells tool calls and where their results go. Subclasses implement
    `render` (trajectory -> prompt) and `parse` (completion -> text, calls, answer)."""

    name: str = ""
    stop: tuple[str, ...] = ()
    max_calls_per_turn: int | None = None  # calls beyond it are answered with an error, not run
    images_first: bool = True  # a tool message shows its images before its text (Qwen's tool turns), or after

    def render(self, trajectory: Trajectory) -> Prompt:
        raise NotImplementedError

    def parse(self, completion: str | dict) -> Parsed:
        raise NotImplementedError

    def observation_parts(self, observation: Observation) -> list[dict]:
        """Canonical content of a tool message: images first, then text (as Qwen's tool turns show them),
        or the other way round where a benchmark's harness writes the text first."""
        images = [{"type": "image", "image": i} for i in observation.images]
        words = [text(observation.text)] if observation.text else []
        return images + words if self.images_first else words + images


def reply_text(completion) -> str:
    """A completion's text, whatever shape a backend gave it: a string, a reply dict whose content is a
    string or a list of text parts, or nothing."""
    if isinstance(completion, dict):
        completion = completion.get("content")
    if isinstance(completion, list):
        return "".join(p["text"] for p in completion if isinstance(p, dict) and isinstance(p.get("text"), str))
    return completion if isinstance(completion, str) else ""


def capped(calls: list[Call], limit: int | None) -> tuple[Call, ...]:
    if limit is None or len(calls) <= limit:
        return tuple(calls)
    error = (f"only {limit} tool call(s) per turn are run; this call was skipped. Call it again in a later turn "
             "if you still need it")
    return tuple(calls[:limit]) + tuple(Call(c.name, c.arguments, c.error or error, c.id, c.parsed, c.raw) for c in calls[limit:])


def read_json(text: str):
    """Strict JSON as the trajectory must store it: no NaN/Infinity, no float overflow. Raises ValueError
    with a short reason for anything else (bad syntax, over-long integers, nesting past the recursion limit)."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as err:
        raise ValueError(f"{err.msg} at position {err.pos}") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as err:  # e.g. integers over Python's 4300-digit conversion limit
        raise ValueError(str(err).split(";")[0]) from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def _finite(literal: str) -> float:
    value = float(literal)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"number {literal[:20]} is out of range")
    return value


def last_tag(content: str, tag: str) -> str | None:
    """The text of the last `<tag>...</tag>`; an unclosed tag at the very end counts (generation stopped
    on the closing tag, which servers strip)."""
    closed = re.findall(rf"<{tag}>(.*?)</{tag}>", content, re.S)
    if closed:
        return closed[-1].strip()
    start = content.rfind(f"<{tag}>")
    if start >= 0 and f"</{tag}>" not in content[start:]:
        return content[start + len(tag) + 2:].strip()
    return None


def wire_parts(parts: list[dict], images: list[np.ndarray], out_images: list[np.ndarray]) -> list[dict]:
    """Canonical parts -> template parts; image references become placeholders, images collected in order."""
    wired = []
    for part in parts:
        if part["type"] == "image":
            out_images.append(images[part["image"]])
            wired.append({"type": "image"})
        else:
            wired.append({"type": "text", "text": part["text"]})
    return wired


def merge_text(parts: list[dict]) -> list[dict]:
    """Adjacent text parts joined (templates render them back to back anyway)."""
    merged: list[dict] = []
    for part in parts:
        if part["type"] == "text" and merged and merged[-1]["type"] == "text":
            merged[-1] = {"type": "text", "text": merged[-1]["text"] + part["text"]}
        elif part["type"] != "text" or part["text"]:
            merged.append(dict(part))
    return merged


def final_text(trajectory: Trajectory) -> str:
    """The last assistant message's text, the answer of a model that does not use <answer> tags."""
    for message in reversed(trajectory.messages):
        if message["role"] == "assistant":
            content = message_text(message)
            return re.sub(r"<think>.*?</think>", "", content, flags=re.S).strip()
    return ""
