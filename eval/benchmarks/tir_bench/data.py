"""TIR-Bench's data as published: the hub dataset `Agents-X/TIR-Bench` is `TIR-Bench.json` (a list of rows)
and `data.zip` (the images, `data/<task>/<file>`). A row:

    {"id": 10, "task": "maze", "prompt": "...", "answer": "D", "image_1": "data/maze/17.png", "image_2": null,
     "meta_data": {}}

`image_2` is the second picture of spot-the-difference rows; jigsaw rows carry `meta_data.difficulty` (the
grid side). A local copy (`--data_dir`) has the same files, with `data/` extracted or not.

Every row is checked; a row that cannot be a task (a missing field, an unknown task, a missing or unreadable
image, a repeated id, a jigsaw row without the grid size or the piece numbers the official scorer reads) is
skipped with its reason, and the run counts it as unscored. A row whose fields disagree in a way the official
scorer still scores (a multiple-choice answer that is not one of the options its prompt lists) is kept, as the
benchmark scores it, and flagged. Every load compares the rows read with the paper's Table 1 counts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image

from eval.benchmarks.data import LazyImages, RowError, checked_rows, count_check, dataset_folder, unpacked
from eval.benchmarks.papers import paper_table
from eval.benchmarks.tir_bench.scoring import listed_options
from eval.suites import Skipped, Task

HUB_REPO = "Agents-X/TIR-Bench"
# The hub dataset's commit a run reads unless --revision names another. The paper names none and the hub has
# published no correction; this is its main as a public audit of the dataset recorded it (OpenBench's TIR-Bench
# notes, beside the code repository's f79c756). A run names the commit it read in its report.
REVISION = "ae9976e81e86c4797fd0d28f9119393b37d9d006"
ANNOTATIONS = "TIR-Bench.json"
IMAGES = "data.zip"
# the task keys of the data and of the repository's scorer, in Table 2's column order
TASKS = ("color", "refcoco", "ocr", "symbolic", "maze", "math", "word_search", "contrast", "instrument",
         "spot_difference", "jigsaw", "visual_search", "rotation_game")
SCORER = "tir_bench"  # the benchmark's own scoring (eval/benchmarks/tir_bench/scoring.py)
PAPER = "eval/benchmarks/tir_bench/paper_results.json"


class Loaded(NamedTuple):
    tasks: list[Task]
    skipped: list[Skipped]
    source: str  # hub repo@commit, or the local folder
    counts: str  # the rows read against the paper's counts (eval.benchmarks.data.count_check)
    flagged: list[str]  # kept rows whose fields disagree, each with its reason


def paper_counts() -> dict[str, dict[str, int]]:
    """The paper's item counts: 1,215 in all, per task as its Table 1 gives them (paper_results.json)."""
    table = paper_table(PAPER, "Table 2")
    return {"total": {"all": 1215}, "task": dict(table["samples"])}


def load(data_dir: str | None = None, revision: str | None = None) -> Loaded:
    """Every row of the dataset (a local copy, else the hub at `revision`, REVISION by default), checked."""
    if data_dir is None:
        revision = revision or REVISION
    folder, source = dataset_folder(HUB_REPO, data_dir, revision, [ANNOTATIONS, IMAGES])
    annotations = folder / ANNOTATIONS
    if not annotations.is_file():
        raise FileNotFoundError(f"{folder} has no {ANNOTATIONS}: give the folder of the {HUB_REPO} dataset")
    try:
        rows = json.loads(annotations.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ValueError(f"{annotations} is not valid JSON ({err})") from None
    if not isinstance(rows, list):
        raise ValueError(f"{annotations} must hold a JSON list of rows, found a {type(rows).__name__}")
    root = _image_root(folder)
    tasks, skipped = checked_rows(rows, lambda row: _task(row, root), lambda number: f"{annotations.name}: row {number}",
                                  category="task")
    read = [(t.id, {"task": t.category}) for t in tasks] + [(s.id, {"task": s.category}) for s in skipped]
    counts = count_check("TIR-Bench", paper_counts(), read, skipped)
    flagged = [f"{t.id} ({t.category}): {t.meta['flag']}" for t in tasks if t.meta.get("flag")]
    return Loaded(tasks, skipped, source, counts, flagged)


def _image_root(folder: Path) -> Path:
    """Where `image_1` paths (`data/...`) resolve: the dataset folder once `data/` is there, else `data.zip`
    unpacked into tirlab's cache."""
    if (folder / "data").is_dir():
        return folder
    if (folder / IMAGES).is_file():
        return unpacked(folder / IMAGES, "tir_bench")
    raise FileNotFoundError(f"{folder} has neither data/ nor {IMAGES}: the images of {HUB_REPO} are missing")


def _task(row, root: Path) -> Task:
    if not isinstance(row, dict):
        raise RowError("row", f"must be a JSON object, got {type(row).__name__}")
    ident = row.get("id")
    if isinstance(ident, bool) or not isinstance(ident, (int, str)) or str(ident) == "":
        raise RowError("id", f"must be an integer or a non-empty string, got {ident!r}")
    name = row.get("task")
    if name not in TASKS:
        raise RowError("task", f"unknown task {name!r}; TIR-Bench's tasks are {', '.join(TASKS)}")
    prompt = row.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise RowError("prompt", "must be a non-empty string")
    answer = row.get("answer")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)) or str(answer).strip() == "":
        raise RowError("answer", f"must be a non-empty string or a number, got {answer!r}")
    meta = row.get("meta_data", row.get("metadata")) or {}
    if not isinstance(meta, dict):
        raise RowError("meta_data", f"must be an object, got {type(meta).__name__}")
    if name == "jigsaw":
        _check_jigsaw(meta, str(answer))
    paths = [_image_path(row, "image_1", root)]
    if row.get("image_2") is not None or name == "spot_difference":
        paths.append(_image_path(row, "image_2", root))
    flag = _choice_disagreement(prompt, str(answer).strip())
    return Task(id=str(ident), question=prompt, images=LazyImages(tuple(paths), _decode), answer=str(answer),
                scorer=SCORER, category=name, toolset="default",
                meta={"row": {k: v for k, v in row.items()}, **({"flag": flag} if flag else {})})


def _check_jigsaw(meta: dict, answer: str) -> None:
    """The official scorer reads the grid side from `meta_data.difficulty` and the first run of n^2 integers of the
    answer; without them it scores every reply 0, so such a row cannot be a task."""
    side = meta.get("difficulty")
    # the scorer compares difficulty * difficulty with a count, so 3.0 reads as 3; a side of 1 is one piece
    whole = (isinstance(side, int) and not isinstance(side, bool)) or (isinstance(side, float) and side.is_integer())
    if not whole or side < 1:
        raise RowError("meta_data", f"a jigsaw row needs meta_data.difficulty, the grid side (a whole number >= 1), "
                                    f"got {side!r}")
    side = int(side)
    runs = [re.findall(r"\d+", stretch) for stretch in re.findall(r"[\d\s,\uff0c]+", answer)]
    if not any(len(run) == side * side for run in runs):
        raise RowError("answer", f"a {side}x{side} jigsaw answer must list {side * side} piece numbers, got {answer!r}")


def _choice_disagreement(prompt: str, answer: str) -> str | None:
    """Why a letter answer disagrees with the options its prompt lists, or None. The official scorer still scores
    such a row (only that letter is right), so it is kept and flagged."""
    options = listed_options(prompt)
    if not options or not re.fullmatch(r"[A-J]+", answer):
        return None
    missing = [letter for letter in answer if letter not in options]
    if missing:
        return f"answer {answer!r} is not among the options its prompt lists ({', '.join(options)})"
    return None


def _image_path(row: dict, field: str, root: Path) -> Path:
    name = row.get(field)
    if not isinstance(name, str) or not name:
        raise RowError(field, "must be the image's path in the dataset (e.g. data/maze/17.png)")
    path = root / name
    if not path.is_file():
        raise RowError(field, f"image {name} not found (looked for {path})")
    try:
        with Image.open(path) as image:
            image.verify()
    except Exception as err:  # noqa: BLE001 - any decoder failure means the same: an unreadable image
        raise RowError(field, f"image {name} cannot be read ({type(err).__name__}: {err})") from None
    return path


def _decode(path: Path) -> np.ndarray:
    """An RGB array, as a chat request would carry the image (PIL's conversion: alpha dropped)."""
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))
