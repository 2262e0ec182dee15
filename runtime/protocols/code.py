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

from runtime.protocols.base import Call, Parsed, Prompt, Protocol, capped, last_tag, merge_text, reply_text, wire_parts
from runtime.trajectory import Trajectory

CODE_TOOL = "python"  # the call name code blocks get in the trajectory
BLOCK = re.compile(r"<code>(.*?)(?:</code>|\Z)", re.S)
FENCE = re.compile(r"^\s*```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)\n?[ \t]*```\s*$", re.S)
STYLES = ("thyme", "pyvision", "plain")


def code_of(block: str) -> str:
    fenced = FENCE.match(block)
    return fenced.group(1) if fenced else block.strip("\n")


@dataclass(frozen=True)
class CodeProtocol(Protocol):
    name: str = "code"
    style: str = "plain"
    first_block_only: bool = False  # the model is stopped at </code>: text after it was never really generated

    def __post_init__(self):
        if self.style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {self.style!r}")

    def parse(self, completion: str | dict) -> Parsed:
        completion = self._closed(reply_text(completion))
        matches = list(BLOCK.finditer(completion))
        if self.first_block_only and matches:
            matches = matches[:1]
            completion = completion[: matches[0].end()]
        calls = []
        for match in matches:
            code = code_of(match.group(1))
            if code.strip():
                calls.append(Call(CODE_TOOL, {"code": code}))
            else:
                calls.append(Call(CODE_TOOL, {"code": code}, "the <code> block is empty; put Python code inside it"))
        outside = BLOCK.sub("", completion)  # an <answer> written inside code is not one
        return Parsed(completion, capped(calls, self.max_calls_per_turn), last_tag(outside, "answer"))

    def _closed(self, completion: str) -> str:
        """Servers strip the stop string that ended a generation; the history must show it as generated."""
        for tag in ("code", "answer"):
            start = completion.rfind(f"<{tag}>")
            if start >= 0 and f"</{tag}>" not in completion[start:] and f"</{tag}>" in self.stop:
                return completion + f"</{tag}>"
        return completion

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
