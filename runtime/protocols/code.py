"""Code as the tool: the model writes Python in `<code>...</code>` and the sandbox's output comes back.

Three published styles differ only in where the output goes:
- `thyme`: inside the same assistant turn, `<sandbox_output>...</sandbox_output>`, and generation then
  continues that turn (Thyme);
- `pyvision`: a user turn `<interpreter>\\nText Result:\\n...\\nImage Result:\\n<image_clue_k>...</image_clue_k>
  </interpreter>\\n` (`None` when there is no image; errors are reported as text results);
- `plain`: a user turn with the text and images as they are (Agentic-MME's Gen mode, whose output text
  names the new images itself).

The code stays in the assistant text exactly as written; the trajectory's `tool_calls` carry it too, so
every protocol's calls can be counted and audited the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.protocols.base import (END_OF_TURN, Call, Finish, Parsed, Prompt, Protocol, merge_text, read_reply,
                                    unclosed_error, wire_parts)
from runtime.trajectory import Trajectory

CODE_TOOL = "python"  # the call name code blocks get in the trajectory
STYLES = ("thyme", "pyvision", "plain")
FENCE = re.compile(r"([ \t]*)(`{3,}|~{3,})[ \t]*([^\n]*)")  # a fence line: indent, fence, info string
PYTHON = ("", "python", "py", "python3")  # the languages a fence may name (any case)
ONE_BLOCK = "write one block: <code>\n```python\n...\n```\n</code>"


def code_of(block: str) -> tuple[str, str | None]:
    """The Python a `<code>` block holds, or why it holds none that may run. Unfenced code is taken as it
    is; a fence may be ``` or ~~~, name python/py/python3 in any case with more info after it, and lack its
    closing line (the block itself is closed). Fence lines never reach the interpreter."""
    lines = block.replace("\r\n", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    opening = FENCE.fullmatch(lines[0]) if lines else None
    if opening is None:
        if any(FENCE.fullmatch(line) for line in lines):
            return "", f"the code has a ``` fence line inside it but does not start with one; {ONE_BLOCK}"
        return "\n".join(lines), None
    indent, fence, info = opening.groups()
    language = re.match(r"[\w+-]*", info).group().lower()
    if language not in PYTHON:
        return "", f"only Python runs here, and this block is fenced as {fence}{language}; {ONE_BLOCK}"
    code, rest = [], []
    for k, line in enumerate(lines[1:], 1):
        closing = FENCE.fullmatch(line)
        if closing and closing.group(2)[0] == fence[0] and len(closing.group(2)) >= len(fence) and not closing.group(3).strip():
            rest = lines[k + 1:]
            break
        if closing:
            return "", f"a {closing.group(2)} fence line opens a second block inside this one; {ONE_BLOCK}"
        code.append(line.removeprefix(indent))
    if any(line.strip() for line in rest):
        what = "another code block" if any(FENCE.fullmatch(line) for line in rest) else "text"
        return "", f"this <code> block has {what} after its closing fence; {ONE_BLOCK}"
    return "\n".join(code), None


@dataclass(frozen=True)
class CodeProtocol(Protocol):
    name: str = "code"
    style: str = "plain"
    first_block_only: bool = False  # the model is stopped at </code>: text after it was never really generated

    def __post_init__(self):
        if self.style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {self.style!r}")

    def parse(self, completion: str | dict, finish: Finish = END_OF_TURN) -> Parsed:
        """A block runs only when it is closed: by `</code>`, or by `</code>` as the stop string that ended
        generation (servers strip it; the history shows it as generated). A block cut by the token limit
        or left open, a fence in another language, two blocks in one and a nested `<code>` are format
        errors the model reads instead of a result."""
        text, past_turn = self.own_turn(completion)
        reading = read_reply(text, "<code>", "</code>", finish, first_block_only=self.first_block_only)
        calls = [self._call(block, finish) for block in reading.blocks]
        return Parsed(reading.text, tuple(calls), reading.answer, text, past_turn)

    @staticmethod
    def _call(block, finish: Finish) -> Call:
        if not block.closed:
            return Call(CODE_TOOL, {"code": block.body}, unclosed_error("<code> block", "</code>", finish))
        if "<code>" in block.body:
            return Call(CODE_TOOL, {"code": block.body}, f"a <code> block cannot hold another <code>; {ONE_BLOCK}")
        code, error = code_of(block.body)
        if error is None and not code.strip():
            error = "the <code> block is empty; put Python code inside it"
        return Call(CODE_TOOL, {"code": code if error is None else block.body}, error)

    def render(self, trajectory: Trajectory) -> Prompt:
        images: list = []
        messages: list[dict] = []
        for message in trajectory.messages:
            parts = wire_parts(message["content"], trajectory.images, images)
            if message["role"] == "tool":
                output = self._wrap(parts, trajectory, message)
                if self.style == "thyme":
                    messages[-1]["content"] = merge_text(messages[-1]["content"] + output)
                elif messages[-1].get("_results"):
                    messages[-1]["content"] = merge_text(messages[-1]["content"] + output)
                else:
                    messages.append({"role": "user", "content": merge_text(output), "_results": True})
            elif message["role"] == "assistant" and self.style == "thyme" and messages and messages[-1]["role"] == "assistant":
                messages[-1]["content"] = merge_text(messages[-1]["content"] + parts)  # generation continued
            else:
                messages.append({"role": message["role"], "content": merge_text(parts)})
        for message in messages:
            message.pop("_results", None)
        continues = self.style == "thyme" and bool(trajectory.messages) and trajectory.messages[-1]["role"] == "tool"
        return Prompt(messages, images, continue_final_message=continues, stop=self.stop)

    def _wrap(self, parts: list[dict], trajectory: Trajectory, message: dict) -> list[dict]:
        if self.style == "thyme":
            return [{"type": "text", "text": "<sandbox_output>"}, *parts, {"type": "text", "text": "</sandbox_output>"}]
        if self.style == "plain":
            return parts
        texts = [p for p in parts if p["type"] == "text"]
        indices = [p["image"] for p in message["content"] if p["type"] == "image"]
        out = [{"type": "text", "text": "<interpreter>\nText Result:\n"}, *texts,
               {"type": "text", "text": "\nImage Result:\n" + ("" if indices else "None")}]
        for index in indices:
            out += [{"type": "text", "text": f"<image_clue_{index}>"}, {"type": "image"},
                    {"type": "text", "text": f"</image_clue_{index}>"}]
        out.append({"type": "text", "text": "</interpreter>\n"})
        return out
