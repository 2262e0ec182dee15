"""TIR-Bench's data as published: the hub dataset `Agents-X/TIR-Bench` is `TIR-Bench.json` (a list of rows)
and `data.zip` (the images, `data/<task>/<file>`). A row:

    {"id": 10, "task": "maze", "prompt": "...", "answer": "D", "image_1": "data/maze/17.png", "image_2": null,
     "meta_data": {}}

`image_2` is the second picture of spot-the-difference rows; jigsaw rows carry `meta_data.difficulty` (the
grid side). A local copy (`--data_dir`) has the same files, with `data/` extracted or not.

Every row is checked; a row that cannot be a task (a missing field, an unknown task, a missing or unreadable
image, a repeated id) is skipped with its reason, and the run counts it as unscored.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from eval.benchmarks.data import LazyImages, RowError, checked_rows, dataset_folder, unpacked
from eval.suites import Skipped, Task

HUB_REPO = "Agents-X/TIR-Bench"
ANNOTATIONS = "TIR-Bench.json"
IMAGES = "data.zip"
# the task keys of the data and of the repository's scorer, in Table 2's column order
TASKS = ("color", "refcoco", "ocr", "symbolic", "maze", "math", "word_search", "contrast", "instrument",
         "spot_difference", "jigsaw", "visual_search", "rotation_game")
SCORER = "tir_bench"  # the benchmark's own scoring (eval/benchmarks/tir_bench/scoring.py)


def load(data_dir: str | None = None, revision: str | None = None) -> tuple[list[Task], list[Skipped], str]:
    """The tasks, the skipped rows and the dataset's name (hub repo@commit, or the local folder)."""
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
    return tasks, skipped, source


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
    paths = [_image_path(row, "image_1", root)]
    if row.get("image_2") is not None or name == "spot_difference":
        paths.append(_image_path(row, "image_2", root))
    return Task(id=str(ident), question=prompt, images=LazyImages(tuple(paths), _decode), answer=str(answer),
                scorer=SCORER, category=name, toolset="default",
                meta={"row": {k: v for k, v in row.items()}})


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
