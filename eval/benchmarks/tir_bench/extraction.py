"""TIR-Bench's answer-extraction step (`extract_answer.py`): a judge model reads the question and the model's
response after a task's few-shot demos and writes the short answer that `scoring.score_item` compares.

The demos are protocol data, word for word from the benchmark's `demo_prompts.py`, in
prompts/extraction_demos.json with their source. OCR has no demo: it is scored on the raw response, so the
official step skips it, and so does this one (an error, like any task without a demo).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

EXTRACTION_MODEL = "gpt-4.1"  # the official script's default judge
# Sent as the system message, leading space included.
EXTRACTION_SYSTEM_PROMPT = " Assistant is a large language model trained by OpenAI."
DEMOS_PATH = Path(__file__).parent / "prompts" / "extraction_demos.json"


@cache
def _demos_file() -> dict:
    return json.loads(DEMOS_PATH.read_text(encoding="utf-8"))


def demo_prompts() -> dict[str, str]:
    """The few-shot demo text of each task that has one (12: every task but OCR)."""
    return dict(_demos_file()["prompts"])


def demo_source() -> dict[str, str]:
    """Where the demos come from: repository, commit and file."""
    return dict(_demos_file()["source"])


def extraction_prompt(task: str, question, response) -> str:
    """The user message: the task's demos, then the question and the response, ending in "Extracted answer: ".
    Question and response are formatted as the official f-string does (a list response prints as a list).
    A task without demos, or a response of None (the official step asserts there is one), is a ValueError."""
    demos = _demos_file()["prompts"]
    if task not in demos:
        raise ValueError(f"TIR-Bench has no extraction demos for task {task!r} (OCR is scored on the raw "
                         f"response); the tasks with demos are {', '.join(demos)}")
    if response is None:
        raise ValueError(f"a TIR-Bench {task} item needs a model response to extract an answer from")
    return f"{demos[task].strip()}\n\nQuestion: {question}\n\nModel response: {response}\n\nExtracted answer: "


def extraction_messages(task: str, question, response) -> list[dict]:
    """The chat messages the official step sends to the judge (OpenAI format, content as text parts)."""
    return [{"role": "system", "content": [{"type": "text", "text": EXTRACTION_SYSTEM_PROMPT}]},
            {"role": "user", "content": [{"type": "text", "text": extraction_prompt(task, question, response)}]}]
