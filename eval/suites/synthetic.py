"""The default suite: `data_gen/` tasks generated from seeds, each with its audited reference.

Seeds start at `SEED_OFFSET`, far from the training seeds `data_gen/make.py` uses (0...) and its test
seeds (10,000,000...), so an evaluation never scores a model on data it was trained on."""

from __future__ import annotations

from typing import Iterator, Sequence

from data_gen.tasks import TASKS, get_task
from eval.suites import Task

SEED_OFFSET = 20_000_000


def synthetic_suite(tasks: Sequence[str] = tuple(TASKS), per_task: int = 8, difficulty: str = "medium",
                    seed: int = 0) -> Iterator[Task]:
    if per_task < 1:
        raise ValueError(f"per_task must be at least 1, got {per_task}")
    modules = [get_task(name) for name in tasks]  # an unknown name fails here, before any generation
    for module in modules:
        for k in range(per_task):
            sample = module.generate(SEED_OFFSET + seed + k, difficulty)
            yield Task(id=sample.id, question=sample.question, images=(sample.image,), answer=sample.answer,
                       scorer=sample.scorer, category=sample.task, toolset=sample.toolset,
                       reference_calls=len(sample.calls), reference=sample.calls,
                       meta={"difficulty": difficulty, "seed": sample.meta["seed"]})
