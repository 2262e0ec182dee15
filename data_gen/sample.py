"""A generated task: the image and question a model sees, the answer, and the tool calls that solve it
(the reference trajectory). `audit` replays those calls through the agent runtime and `tools/` and
checks the task's evidence, so every sample is proven solvable with the tools it claims to need."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from runtime.episode import Episode, State
from runtime.profiles import Budgets, ModelProfile
from runtime.protocols import HermesProtocol
from runtime.toolbox import ToolBox
from runtime.trajectory import Trajectory

REFERENCE_PROFILE = ModelProfile("reference", HermesProtocol(tools_in="system"))


class AuditError(AssertionError):
    pass


def require_choice(name: str, value, choices) -> None:
    """A generator's parameter check: a bad value is a ValueError that names the parameter."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


def require_seed(seed) -> None:
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an int, got {seed!r}")


@dataclass(frozen=True)
class Sample:
    task: str
    id: str
    image: np.ndarray  # what the model sees: uint8 RGB (H, W, 3)
    question: str
    answer: str
    scorer: str  # how an answer is scored: a name in eval.scorers
    toolset: str  # the tool set the reference calls use
    calls: tuple[dict, ...]  # the reference: {"name": ..., "arguments": {...}}, one turn each
    evidence: dict = field(default_factory=dict)  # what the audit compares against (e.g. the upright render)
    meta: dict = field(default_factory=dict)  # generation parameters: seed, difficulty, font, angle, ...


def reference_budgets(calls: int, images: int = 1) -> Budgets:
    """Budgets that fit a reference chain of `calls` calls, however long (a 6x6 jigsaw makes 36 crops)."""
    return Budgets(max_turns=calls + 1, max_tool_calls=max(calls, 1), max_images=images + calls + 1)


def reference_episode(sample: Sample, toolbox: ToolBox | None = None) -> Episode:
    """The reference trajectory, played through the runtime: each call is one assistant turn, its result
    comes back from `tools/`, and the last turn answers."""
    toolbox = toolbox or ToolBox(sample.toolset)
    budgets = reference_budgets(len(sample.calls))
    episode = toolbox.start(REFERENCE_PROFILE, sample.question, [sample.image], budgets=budgets,
                            meta={"task": sample.task, "id": sample.id})
    for call in sample.calls:
        episode.prompt()
        block = json.dumps({"name": call["name"], "arguments": call["arguments"]}, ensure_ascii=False)
        episode.submit(f"<tool_call>\n{block}\n</tool_call>")
        if episode.state is not State.RUNNING_TOOLS:
            raise AuditError(f"{sample.id}: the reference call {call} did not run ({episode.stop_reason})")
        toolbox.run([episode])
    episode.prompt()
    episode.submit(f"<answer>{sample.answer}</answer>")
    return episode


Check = Callable[[Sample, list[np.ndarray], list[dict]], None]


def audit(sample: Sample, check: Check) -> Trajectory:
    """Replay the reference and run the task's check on the workspace (the episode's images) and the
    reports (what each reference call returned besides an image: contours, counts, lengths...);
    returns the trajectory."""
    episode = reference_episode(sample)
    try:
        tool_messages = [m for m in episode.trajectory.messages if m["role"] == "tool"]
        errors = [m for m in tool_messages if m.get("error")]
        if errors:
            raise AuditError(f"{sample.id}: a reference call failed: {errors[0]['content']}")
        check(sample, episode.workspace, [_report(m) for m in tool_messages])
        return episode.trajectory
    finally:
        episode.close()


def _report(message: dict) -> dict:
    text = "".join(part["text"] for part in message["content"] if part["type"] == "text")
    return json.loads(text) if text else {}
