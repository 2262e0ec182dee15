"""The default suite: `data_gen/` tasks generated from seeds, each with its audited reference.

Seeds start at `SEED_OFFSET`, far from the training seeds `data_gen/make.py` uses (0...) and its test
seeds (10,000,000...), so an evaluation never scores a model on data it was trained on.

A task may carry generator options as `name:key=value,key=value` (`rotated_ocr:render=aligned`), so held-out
tasks are drawn the way a model's training data was (train/sft.py records the spec of its data as
`eval_tasks`); a value that reads as JSON (1, true) is taken as such."""

from __future__ import annotations

import json
from typing import Iterator, Sequence

from data_gen.tasks import TASKS, get_task
from eval.suites import Task

SEED_OFFSET = 20_000_000


def task_spec(task: str, options: dict) -> str:
    """`task` with its generator options, as `synthetic_suite` reads it back."""
    return task + (":" + ",".join(f"{k}={v}" for k, v in sorted(options.items())) if options else "")


def parse_task_spec(spec: str) -> tuple[str, dict]:
    name, sep, pairs = spec.partition(":")
    options = {}
    for pair in pairs.split(",") if sep else ():
        key, eq, value = pair.partition("=")
        if not eq or not key.isidentifier():
            raise ValueError(f"task {spec!r}: options are key=value pairs after the name, e.g. "
                             "rotated_ocr:render=aligned")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return name, options


def synthetic_suite(tasks: Sequence[str] = tuple(TASKS), per_task: int = 8, difficulty: str = "medium",
                    seed: int = 0) -> Iterator[Task]:
    if per_task < 1:
        raise ValueError(f"per_task must be at least 1, got {per_task}")
    specs = [parse_task_spec(spec) for spec in tasks]
    modules = [(get_task(name), options) for name, options in specs]  # an unknown name fails here, before generation
    for module, options in modules:
        try:
            if options:
                module.generate(SEED_OFFSET + seed, difficulty, **options)
        except TypeError:
            raise ValueError(f"task {module.NAME!r} takes no option(s) {sorted(options)}; see its module "
                             "docstring") from None
        for k in range(per_task):
            sample = module.generate(SEED_OFFSET + seed + k, difficulty, **options)
            yield Task(id=sample.id, question=sample.question, images=(sample.image,), answer=sample.answer,
                       scorer=sample.scorer, category=sample.task, toolset=sample.toolset,
                       reference_calls=len(sample.calls), reference=sample.calls,
                       meta={"difficulty": difficulty, "seed": sample.meta["seed"], **options})
