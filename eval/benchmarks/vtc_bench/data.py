"""VTC-Bench's data as published: a TSV with the columns `index id category image question answer A B C D`
(GitHub `data/VTC-Bench.tsv`: `image` is a path such as `images/attention_focusing/attention_focusing_1.jpg`;
the hub dataset `zzzhu/VTC-Bench`: `image` holds the picture as base64) and the ground-truth tool chains,
`VTC-Bench_GTToolChain.tsv` (the same columns plus `model_tools_gt`, e.g. `["Crop", "Flip", "Resize"]`).
Open questions leave the options empty. A folder given by `--data_dir` holds the same files.

Every row is checked; a row that cannot be a task (a missing field, an unknown category, an image that is
missing or does not decode, a repeated id) is skipped with its reason and counted as unscored. Images are
decoded as the benchmark's own tools read them (`tools.toolsets.vtc_bench.read_image`), so the episode's
image is the one the tools see.

`reference_calls.json` (a tirlab extension, not published: `{id: [{"name", "arguments"}]}`) gives rows reference
tool calls for `--backend reference`; their image paths are written `{workspace}/image_N.png`.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
import sys
from pathlib import Path

from PIL import Image

from eval.benchmarks.data import LazyImages, RowError, checked_rows, dataset_folder
from eval.benchmarks.vtc_bench.scoring import gt_chain_length
from eval.suites import Skipped, Task
from tools.toolsets.vtc_bench import read_image

HUB_REPO = "zzzhu/VTC-Bench"
QUESTIONS = "VTC-Bench.tsv"
CHAINS = "VTC-Bench_GTToolChain.tsv"
REFERENCE_CALLS = "reference_calls.json"
COLUMNS = ("index", "id", "category", "image", "question", "answer")
OPTIONS = ("A", "B", "C", "D", "E")
# the three tiers of the paper's cognitive hierarchy, and their categories as the data names them
TIERS = {"perception enhancement": ("ocr", "perceptual", "attention"),
         "quantitative estimation": ("measure", "color", "counting"),
         "compositional reasoning": ("chart", "math", "spatial")}
CATEGORIES = tuple(c for categories in TIERS.values() for c in categories)
SCORER = "vtc_bench"  # the benchmark's own scoring (eval/benchmarks/vtc_bench/scoring.py)


def load(data_dir: str | None = None, revision: str | None = None) -> tuple[list[Task], list[Skipped], str]:
    """The tasks, the skipped rows and the dataset's name (hub repo@commit, or the local folder)."""
    folder, source = dataset_folder(HUB_REPO, data_dir, revision, ["*.tsv", "*.json", "images/**"])
    questions = folder / QUESTIONS if (folder / QUESTIONS).is_file() else folder / CHAINS
    if not questions.is_file():
        found = sorted(p.name for p in folder.glob("*.tsv"))
        raise FileNotFoundError(f"{folder} has neither {QUESTIONS} nor {CHAINS} (TSV files there: {found or 'none'})")
    rows = _read_tsv(questions)
    chains = {row.get("id"): row.get("model_tools_gt") for row in _read_tsv(folder / CHAINS)} \
        if (folder / CHAINS).is_file() else {}
    references = _reference_calls(folder / REFERENCE_CALLS)
    # line 1 is the header
    tasks, skipped = checked_rows(rows, lambda row: _task(row, folder, chains, references),
                                  lambda number: f"{questions.name}: line {number}", category="category", first=2)
    return tasks, skipped, source


def _read_tsv(path: Path) -> list[dict]:
    """The rows as the benchmark's own script reads them (csv.DictReader, tab-separated); base64 image cells
    are longer than the csv module's default field limit."""
    limit = csv.field_size_limit(sys.maxsize)
    try:
        with open(path, encoding="utf-8", newline="") as lines:
            reader = csv.DictReader(lines, delimiter="\t")
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise ValueError(f"{path}: missing column(s) {missing}; VTC-Bench's TSV has {' '.join(COLUMNS)} "
                                 "A B C D")
            return list(reader)
    finally:
        csv.field_size_limit(limit)


def _reference_calls(path: Path) -> dict:
    if not path.is_file():
        return {}
    calls = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(calls, dict) or not all(
            isinstance(v, list) and all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                        and isinstance(c.get("arguments"), dict) for c in v) for v in calls.values()):
        raise ValueError(f'{path} must map ids to lists of {{"name": ..., "arguments": {{...}}}} calls')
    return calls


def _task(row: dict, folder: Path, chains: dict, references: dict) -> Task:
    for field in ("id", "question", "answer", "image"):
        if not (row.get(field) or "").strip():
            raise RowError(field, "is empty")
    if row["category"] not in CATEGORIES:
        raise RowError("category", f"unknown category {row['category']!r}; VTC-Bench's are {', '.join(CATEGORIES)}")
    image = _image_source(row["image"], folder)
    try:
        with Image.open(io.BytesIO(image) if isinstance(image, bytes) else image) as opened:
            size = opened.size  # the size the prompt states: the file's, as the benchmark reads it
            opened.verify()  # a broken file is this row's problem, not a crash in the middle of the run
    except Exception as err:  # noqa: BLE001 - any decoder failure means the same: an unreadable image
        raise RowError("image", f"does not decode ({type(err).__name__}: {err})") from None
    chain = chains.get(row["id"], row.get("model_tools_gt"))
    options = {k: row[k] for k in OPTIONS if (row.get(k) or "").strip()}
    kept = {k: v for k, v in row.items() if k != "image"}
    return Task(id=row["id"], question=row["question"], images=LazyImages((image,), read_image), answer=row["answer"],
                scorer=SCORER, category=row["category"], toolset="vtc_bench",
                reference_calls=gt_chain_length(chain) if chain else None,
                reference=tuple(references.get(row["id"], ())),
                meta={"row": {**kept, "model_tools_gt": chain}, "options": options, "image_size": list(size)})


def _image_source(cell: str, folder: Path) -> Path | bytes:
    """A path relative to the data folder (GitHub's TSV), or the picture itself as base64 (the hub's)."""
    path = folder / cell
    if len(cell) < 1024 and path.is_file():
        return path
    try:
        return base64.b64decode(cell, validate=True)
    except (binascii.Error, ValueError):
        raise RowError("image", f"is neither a file under {folder} nor base64 image data: {cell[:80]!r}") from None
