"""Backends: what turns a rendered prompt into a completion. One interface, three engines and a replay:

- `vllm_engine.VLLMEngineBackend`: the vLLM engine in this process. Every active episode's next turn is
  a request in the same engine, so the scheduler batches across episodes continuously;
- `openai_http.OpenAIHTTPBackend`: any OpenAI-compatible server (`vllm serve`, `transformers serve`, an
  API), with bounded concurrency, timeouts and retries;
- `hf_generate.HFGenerateBackend`: Hugging Face `generate`, batching what is queued (the fallback);
- `reference.ReferenceBackend`: replays each task's reference trajectory (checks suites, tools and scorers).

The harness submits requests and polls for finished ones; a backend never sees episodes or tools:

    backend.submit("task-7/turn-2", prompt, sampling)
    for key, completion in backend.poll(timeout=0.05): ...
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Protocol as Interface

import numpy as np
from PIL import Image

from runtime.protocols import Prompt


@dataclass(frozen=True)
class Sampling:
    max_tokens: int | None = 1024  # per reply; None: no cap, up to the context length (as vLLM's server)
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0  # OpenAI's: subtracted from the logit of every token already generated
    seed: int | None = None  # per request; the harness derives one per episode and turn
    regex: str | None = None  # structured outputs: the reply must match (vLLM engines and servers only)
    script: tuple | None = None  # a forced reply (eval/forcing.py; the vLLM engine backend only)

    def __post_init__(self):
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1 (or None: no cap), got {self.max_tokens}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"need temperature >= 0 and 0 < top_p <= 1, got {self.temperature}, {self.top_p}")


@dataclass(frozen=True)
class Completion:
    reply: str | dict  # the text, or an OpenAI reply message {"content": ..., "tool_calls": [...]}
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    truncated: bool = False  # stopped by max_tokens mid-reply
    stop: str | None = None  # the stop string that ended it (stripped from the text); None: the end of turn
    latency_s: float = 0.0  # from submit to completion
    error: str | None = None  # the request failed for good (after retries); the episode ends with it


class Backend(Interface):
    name: str

    def submit(self, key: str, prompt: Prompt, sampling: Sampling) -> None:
        """Queue one generation; its completion comes back from `poll` under `key`."""

    def poll(self, timeout: float | None = None) -> list[tuple[str, Completion]]:
        """Completions finished since the last poll. Waits up to `timeout` seconds (None: until at least one)
        when none is ready; returns [] at once when nothing is in flight."""

    def in_flight(self) -> int:
        """Requests submitted and not yet returned by `poll`."""

    def close(self) -> None:
        ...


def pil_images(prompt: Prompt) -> list[Image.Image]:
    return [Image.fromarray(np.asarray(image)) for image in prompt.images]


def render_text(processor, prompt: Prompt) -> str:
    """The prompt as the model's chat template writes it (engines that take text plus images)."""
    return processor.apply_chat_template(
        prompt.messages, tools=prompt.tools, tokenize=False,
        add_generation_prompt=not prompt.continue_final_message,
        continue_final_message=prompt.continue_final_message)


def data_url(image: np.ndarray) -> str:
    """A PNG data URL, the form OpenAI-compatible servers accept for `image_url`."""
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(image)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
