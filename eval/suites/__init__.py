"""Evaluation suites: where the tasks come from. A suite yields `Task`s; the harness runs each one as an
episode and scores its final answer with the task's scorer (`eval.scorers`).

- `synthetic`: the `data_gen/` tasks, generated from seeds on the fly (the default suite);
- `jsonl`: the user's own tasks, one JSON object per line with image files beside it (format in
  `eval/suites/jsonl.py` and the README).
The public benchmarks become suites of their own here, each with its tool set and prompts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class FollowUp:
    """A scripted user turn sent after the model answers (VisualToolBench's multi-turn tasks)."""
    text: str
    images: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class Task:
    id: str
    question: str
    images: tuple[np.ndarray, ...]  # uint8 RGB, in the order the question refers to them
    answer: str  # the ground truth, in the scorer's format
    scorer: str  # a name in eval.scorers
    category: str = "default"  # reports break accuracy down by it
    toolset: str = "default"  # the tool set the task was made for (a model profile may bring its own)
    reference_calls: int | None = None  # length of a reference tool chain, for chain-length MAE / overthink
    reference: tuple[dict, ...] = ()  # the reference calls themselves, {"name", "arguments"}, when known
    follow_ups: tuple[FollowUp, ...] = ()
    meta: dict = field(default_factory=dict)
