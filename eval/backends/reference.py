"""A policy that replays each task's reference trajectory: turn k makes reference call k, then it answers
with the ground truth. Run through the same loop, tools and scorers as a model, it should score (nearly)
100%: anything less means a suite, a tool or a scorer disagrees with the others (`--backend reference`).

Tool sets that take file paths (VTC-Bench's) write the episode's files as `{workspace}/image_N.png` in their
reference calls: the policy fills in the episode's folder, which it reads off the prompt (the benchmark's
prompt states the image's path)."""

from __future__ import annotations

import json
import re

from eval.backends import Completion, Sampling
from eval.suites import Task
from runtime.protocols import Prompt
from runtime.protocols.hermes import call_block

WORKSPACE = "{workspace}"
FIRST_IMAGE = re.compile(r"(/[^\s\"']+)/image_0\.png")


def _workspace(prompt: Prompt) -> str:
    for message in prompt.messages:
        for part in message["content"] if isinstance(message["content"], list) else [{"text": message["content"]}]:
            found = FIRST_IMAGE.search(part.get("text") or "")
            if found:
                return found.group(1)
    raise ValueError("a reference call names {workspace}, but the prompt states no image path to take it from")


class ReferenceBackend:
    name = "reference"

    def __init__(self, tasks: list[Task]):
        self.tasks = {task.id: task for task in tasks}
        self._done: list[tuple[str, Completion]] = []

    def submit(self, key: str, prompt: Prompt, sampling: Sampling) -> None:
        turn, _mode, task_id = key.split(":", 2)  # the loop's request key: "<turn>:<mode>:<task id>"
        task = self.tasks[task_id]
        if int(turn) < len(task.reference):
            call = task.reference[int(turn)]
            arguments = json.dumps(call["arguments"], ensure_ascii=False)
            if WORKSPACE in arguments:
                arguments = arguments.replace(WORKSPACE, _workspace(prompt))
            reply = call_block(call["name"], arguments)
        else:
            reply = f"<answer>{task.answer}</answer>"
        self._done.append((key, Completion(reply)))

    def poll(self, timeout: float | None = None) -> list[tuple[str, Completion]]:
        done, self._done = self._done, []
        return done

    def in_flight(self) -> int:
        return len(self._done)

    def close(self) -> None:
        self._done.clear()
