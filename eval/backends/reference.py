"""A policy that replays each task's reference trajectory: turn k makes reference call k, then it answers
with the ground truth. Run through the same loop, tools and scorers as a model, it should score (nearly)
100%: anything less means a suite, a tool or a scorer disagrees with the others (`--backend reference`)."""

from __future__ import annotations

import json

from eval.backends import Completion, Sampling
from eval.suites import Task
from runtime.protocols import Prompt
from runtime.protocols.hermes import call_block


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
            reply = call_block(call["name"], json.dumps(call["arguments"], ensure_ascii=False))
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
