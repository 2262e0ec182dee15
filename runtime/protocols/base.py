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
    reply: str = ""  # the reply as written, up to the model's own end of turn (what a harness reads)
    past_turn: str = ""  # text the model wrote after its own end of turn: dropped, kept for the record


@dataclass(frozen=True)
class Finish:
    """Why a generation ended, as the backend reports it: at the token limit (`length`), on a stop string
    that servers strip from the text (`stop` names it), or else at the model's own end of turn. A block
    left open at the end is closed only by its own closing tag as the stop string."""

    length: bool = False
    stop: str | None = None


END_OF_TURN = Finish()
TURN_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|im_start|>")  # Qwen's; templates of other models add theirs


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
    images_first: bool = True  # a tool message shows its images before its text (Qwen's tool turns), or after
    end_of_turn: tuple[str, ...] = TURN_MARKERS  # a reply ends at the first of these, whatever follows

    def render(self, trajectory: Trajectory) -> Prompt:
        raise NotImplementedError

    def parse(self, completion: str | dict, finish: Finish = END_OF_TURN) -> Parsed:
        raise NotImplementedError

    def own_turn(self, completion: str | dict) -> tuple[str, str]:
        """The reply up to the model's own end of turn, and what it wrote past it: a model that runs on
        past `<|im_end|>` (a server that does not stop on it, a template that does not end there) would
        otherwise write the next turn itself, tool results included. Any other control token it spelled
        out (`<|image_pad|>`, ...) is neutralised, so that the next prompt does not render it as one."""
        own, past = split_turn(reply_text(completion), self.end_of_turn)
        return neutralised(own, tags=False), past

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


def capped(calls: tuple[Call, ...], limit: int | None) -> tuple[Call, ...]:
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
    """The text of the last `<tag>...</tag>` in a final text (scorers read answers with it); an unclosed
    tag at the very end counts."""
    closed = re.findall(rf"<{tag}>(.*?)</{tag}>", content, re.S)
    if closed:
        return closed[-1].strip()
    start = content.rfind(f"<{tag}>")
    if start >= 0 and f"</{tag}>" not in content[start:]:
        return content[start + len(tag) + 2:].strip()
    return None


def split_turn(text: str, markers: tuple[str, ...]) -> tuple[str, str]:
    cut = min((k for k in (text.find(m) for m in markers) if k >= 0), default=-1)
    return (text, "") if cut < 0 else (text[:cut], text[cut:])


@dataclass(frozen=True)
class Block:
    """One top-level block of a reply (`<code>`, `<tool_call>`): where its body is, and whether its closing
    tag was written (or ended the generation as a stop string)."""

    start: int
    body: str
    end: int
    closed: bool


@dataclass(frozen=True)
class Reading:
    text: str  # the reply, with a closing tag that ended generation as a stop string written back
    blocks: tuple[Block, ...]
    answer: str | None
    outside: str  # the text around the blocks


def read_reply(text: str, opener: str | None, closer: str | None, finish: Finish, find_close=None,
               first_block_only: bool = False) -> Reading:
    """A reply read left to right as written. Inside an `<answer>` only `</answer>` ends it (a `<code>` or
    `<tool_call>` quoted in an answer is text); inside a block only its own closing tag does (an `<answer>`
    in code is not one). The answer is the last closed one; an unclosed one counts when `</answer>` was the
    stop string that ended generation. `find_close(text, body_start)` finds a block's closing tag (default:
    the next `closer`). With no `opener`, only the answer is read. `first_block_only`: the reply ends with
    its first closed block (generation stopped there; what follows was never really generated)."""
    find_close = find_close or (lambda t, k: t.find(closer, k))
    blocks: list[Block] = []
    answers: list[str] = []
    position = 0
    while True:
        at_answer, at_block = text.find("<answer>", position), text.find(opener, position) if opener else -1
        if at_answer < 0 and at_block < 0:
            break
        if at_block < 0 or 0 <= at_answer < at_block:
            body = at_answer + len("<answer>")
            close = text.find("</answer>", body)
            if close < 0:
                if finish.stop == "</answer>" and not finish.length:
                    answers.append(text[body:])
                    text += "</answer>"
                break
            answers.append(text[body:close])
            position = close + len("</answer>")
        else:
            body = at_block + len(opener)
            close = find_close(text, body)
            if close < 0:
                stopped = finish.stop == closer and not finish.length
                blocks.append(Block(at_block, text[body:], len(text) + (len(closer) if stopped else 0), stopped))
                text += closer if stopped else ""
                break
            blocks.append(Block(at_block, text[body:close], close + len(closer), True))
            position = close + len(closer)
            if first_block_only:
                text = text[:position]
                break
    pieces, cursor = [], 0
    for block in blocks:
        pieces.append(text[cursor:block.start])
        cursor = block.end
    outside = "".join(pieces) + text[cursor:]
    return Reading(text, tuple(blocks), answers[-1].strip() if answers else None, outside)


def unclosed_error(kind: str, closer: str, finish: Finish) -> str:
    if finish.length:
        return f"the reply reached the token limit inside this {kind}, so it was not run; keep it shorter"
    return f"this {kind} was not closed, so it was not run; end it with {closer}"



# Chat-template control tokens (`<|im_start|>`, `<|vision_start|>`, `<|image_pad|>`, ...) and the tags Qwen's
# tokenizers add as single tokens. Text from outside the model's own turns must never render as one of them.
_CONTROL = re.compile(r"<(?=\|[^<>|\s]{1,64}\|>)")
_CONTROL_OR_TAG = re.compile(r"<(?=\|[^<>|\s]{1,64}\|>)|<(?=/?(?:tool_call|tool_response|think)>)")
NEUTRAL = "<\u200b"  # "<" + zero-width space: reads the same, tokenizes as plain text


def neutralised(text: str, tags: bool = True) -> str:
    """`text` with every chat-template control token it spells (`<|...|>`) broken by a zero-width space
    after its `<`; with `tags`, also the tags Qwen's tokenizers read as one token (`<tool_call>`,
    `<tool_response>`, `<think>`), which a tool's output has no business writing but a question or a
    model's own turn may."""
    if "<" not in text:
        return text
    return (_CONTROL_OR_TAG if tags else _CONTROL).sub(NEUTRAL, text)


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
