"""Your own tasks as a suite: a JSONL file, one task per line, with its images as files beside it.

    {"id": "gauge-7", "question": "What does the gauge read?", "images": ["images/gauge-7.png"],
     "answer": "3.5", "scorer": "numeric", "category": "instruments", "reference_calls": 2}

Required: `id` (unique), `question`, `images` (paths relative to the JSONL file; PNG, JPEG, ...), `answer`
(a string in the scorer's format). Optional: `scorer` (a spec in `eval.scorers`, e.g. `numeric(rel=0.02)`, or
`judge`: an LLM judge compares the answer with `answer` and the criteria in `meta.rubric`, if given;
default `text_match`), `category`, `toolset`, `reference_calls` (length of a reference tool chain),
`reference` (the reference tool calls, `[{"name": ..., "arguments": {...}}]`, one per turn;
`--backend reference` replays them), `follow_ups` (scripted user turns after the answer:
`[{"text": ..., "images": [...]}]`) and `meta` (anything JSON). Unknown fields are refused, so a typo cannot
silently drop information. `write_jsonl_suite` writes any suite in this format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator, NoReturn

import numpy as np
from PIL import Image

from eval.judge import JUDGE
from eval.scorers import check_scorer
from eval.suites import FollowUp, Task
from runtime.trajectory import image_key

REQUIRED = ("id", "question", "images", "answer")
OPTIONAL = ("scorer", "category", "toolset", "reference_calls", "reference", "follow_ups", "meta")


def jsonl_suite(path: str | Path) -> Iterator[Task]:
    """The tasks of a JSONL file, checked line by line; an error names the file, the line and the field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"suite file {path} does not exist")
    seen: set[str] = set()
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                _fail(path, number, f"is not valid JSON ({err})")
            task = _task(row, path, number)
            if task.id in seen:
                _fail(path, number, f"repeats the id {task.id!r}; ids must be unique")
            seen.add(task.id)
            yield task


def write_jsonl_suite(tasks: Iterable[Task], path: str | Path) -> Path:
    """Write tasks as a JSONL suite; images go to `images/` beside it, named by their pixels' hash."""
    path = Path(path)
    (path.parent / "images").mkdir(parents=True, exist_ok=True)

    def save(image: np.ndarray) -> str:
        name = f"images/{image_key(image)}.png"
        if not (path.parent / name).exists():
            Image.fromarray(image).save(path.parent / name)
        return name
    with path.open("w", encoding="utf-8") as out:
        for task in tasks:
            row = {"id": task.id, "question": task.question, "images": [save(im) for im in task.images],
                   "answer": task.answer, "scorer": task.scorer, "category": task.category, "toolset": task.toolset,
                   "reference_calls": task.reference_calls, "reference": list(task.reference), "meta": task.meta,
                   "follow_ups": [{"text": f.text, "images": [save(im) for im in f.images]} for f in task.follow_ups]}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def _fail(path: Path, number: int, problem: str) -> NoReturn:
    raise ValueError(f"{path}:{number}: {problem}")


def _task(row, path: Path, number: int) -> Task:
    if not isinstance(row, dict):
        _fail(path, number, "must be a JSON object")
    missing = [k for k in REQUIRED if k not in row]
    unknown = sorted(set(row) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        _fail(path, number, f"missing {missing} / unknown {unknown} fields; a task has {list(REQUIRED)} and "
                            f"optionally {list(OPTIONAL)}")
    for key in ("id", "question", "answer"):
        if not isinstance(row[key], str) or (key == "id" and not row[key]):
            _fail(path, number, f"field {key!r} must be a{' non-empty' if key == 'id' else ''} string")
    scorer = row.get("scorer", "text_match")
    try:
        if scorer != JUDGE:
            check_scorer(scorer)
    except ValueError as err:
        _fail(path, number, f"{err}; or '{JUDGE}' for an LLM judge (meta.rubric: its criteria)")
    reference = row.get("reference_calls")
    if reference is not None and (type(reference) is not int or reference < 0):
        _fail(path, number, "field 'reference_calls' must be a non-negative integer")
    calls = row.get("reference") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                              and isinstance(c.get("arguments"), dict) for c in calls):
        _fail(path, number, "field 'reference' must be a list of {\"name\": ..., \"arguments\": {...}}")
    if calls and reference is not None and reference != len(calls):
        _fail(path, number, f"'reference_calls' is {reference} but 'reference' has {len(calls)} calls")
    follow_ups = row.get("follow_ups") or []
    if not isinstance(follow_ups, list) or not all(isinstance(f, dict) and isinstance(f.get("text"), str)
                                                   for f in follow_ups):
        _fail(path, number, "field 'follow_ups' must be a list of {\"text\": ..., \"images\": [...]}")
    return Task(
        id=row["id"], question=row["question"], images=_images(row["images"], path, number), answer=row["answer"],
        scorer=scorer, category=str(row.get("category", "default")), toolset=str(row.get("toolset", "default")),
        reference_calls=len(calls) if calls else reference, reference=tuple(calls), meta=row.get("meta") or {},
        follow_ups=tuple(FollowUp(f["text"], _images(f.get("images", []), path, number)) for f in follow_ups),
    )


def _images(names, path: Path, number: int) -> tuple[np.ndarray, ...]:
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        _fail(path, number, "field 'images' must be a list of file paths (relative to the JSONL file)")
    images = []
    for name in names:
        file = path.parent / name
        if not file.is_file():
            _fail(path, number, f"image {name!r} not found (looked for {file})")
        try:
            with Image.open(file) as image:
                images.append(np.asarray(image.convert("RGB")))
        except OSError as err:
            _fail(path, number, f"image {name!r} cannot be read: {err}")
    return tuple(images)
