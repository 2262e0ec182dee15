"""SFT rows in TRL's vision format: `messages` (content as lists of parts, images as `{"type": "image"}`
placeholders) and `images` (in placeholder order).

- direct: image + question -> the answer.
- agentic: the reference trajectory rendered by the hermes protocol with tools in the system prompt:
  the tool call, its image back in a user turn as `<tool_response>\\n<image>\\n</tool_response>` (what
  Qwen3-VL's template writes for a tool message, and what TRL can fill, since it skips tool messages when
  placing images), then the answer. No `tool` role and no `tool_calls`, so assistant-only loss masking
  covers exactly the model's own turns.
"""

from __future__ import annotations

from data_gen.sample import Sample
from runtime.protocols import HermesProtocol
from runtime.trajectory import Trajectory

FORMS = ("direct", "agentic")
AGENTIC = HermesProtocol(tools_in="system")


def answer_text(sample: Sample) -> str:
    return f"<answer>{sample.answer}</answer>"


def direct_row(sample: Sample) -> dict:
    return {
        "messages": [
            {"role": "user", "content": [_image(), _text(sample.question)]},
            {"role": "assistant", "content": [_text(answer_text(sample))]},
        ],
        "images": [sample.image],
    }


def agentic_row(trajectory: Trajectory) -> dict:
    prompt = AGENTIC.render(trajectory)
    messages = [{"role": m["role"], "content": [_image() if p["type"] == "image" else _text(p["text"])
                                                for p in m["content"]]} for m in prompt.messages]
    return {"messages": messages, "images": list(prompt.images)}


def _text(value: str) -> dict:
    return {"type": "text", "text": value}


def _image() -> dict:
    return {"type": "image", "text": None}  # one struct type for every part, as Arrow wants
