"""Agentic-MME's data as published (hub dataset `Crystal1047/Agentic-MME`; a folder given by `--data_dir` holds the
same): `json/NNNN.json`, one task each, and `images/image_NNNN.png` (or `image_NNNN_1.png`, `image_NNNN_2.png`, ...
for a task with several images; `.jpg`/`.jpeg` too, in `image/` or `images/`), found as the reference's
dataset_utils.py finds them. `image_cause/` and `search_url/` hold the annotators' evidence; the runners do not
read them, and neither does the suite.

A task JSON is read as the reference's runners and evaluator read it: `input.prompt` (the question, sent as it
is), `golden_answer {value, match_type, tolerance}`, `meta.level` (1-3), `process_evaluation.checkpoints[{id,
axis S|V, tools, description, code_check, visual_check}]` and `process_evaluation.efficiency.reference_tool_calls`.
Of `meta` the reference reads only `level` (eval_runs_search.py and analyze_v.py group by it); neither its code
nor the paper names a field for the six domains, so the suite reads none.
The reference runs a task with an empty prompt or no golden answer (its verifier then counts the answer
correct), so those rows stay; a row the reference cannot run at all (a file name without a number, an image that
is missing or does not decode, JSON that does not parse) is skipped with its reason and counted as unscored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from PIL import Image

from eval.benchmarks.data import LazyImages, RowError, checked_rows, dataset_folder
from eval.suites import Skipped, Task
from tools.toolsets.agentic_mme import read_image  # the runner's PNG copy, then RGB, as its tools read it

HUB_REPO = "Crystal1047/Agentic-MME"
LEVELS = ("L1", "L2", "L3")
NO_LEVEL = "unknown level"  # a task whose meta.level is not 1-3: counted overall, in no level
SCORER = "agentic_mme"  # the benchmark's own scoring (eval/benchmarks/agentic_mme/scoring.py)
IMAGE_FOLDERS = ("image", "images")  # where the reference looks, in its order
EXTENSIONS = (".png", ".jpg", ".jpeg")


def load(data_dir: str | None = None, revision: str | None = None) -> tuple[list[Task], list[Skipped], str]:
    """The tasks, the skipped rows and the dataset's name (hub repo@commit, or the local folder)."""
    folder, source = dataset_folder(HUB_REPO, data_dir, revision, ["json/**", "images/**", "image/**"])
    files = sorted((folder / "json").glob("*.json"))
    if not files:
        raise FileNotFoundError(f"{folder} has no json/*.json task files; give the folder that holds Agentic-MME's "
                                "json/ and images/")
    rows = [_read(path) for path in files]
    tasks, skipped = checked_rows(rows, lambda row: _task(row, folder), lambda number: f"json/{files[number].name}",
                                  category="level")
    return tasks, skipped, source


def _read(path: Path) -> dict:
    """A task file as a row: its JSON, with the file's stem as the id (the reference names a run by it)."""
    row = {"id": path.stem, "file": path.name, "level": NO_LEVEL}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        return {**row, "error": f"the file is not JSON ({err})"}
    if not isinstance(config, dict):
        return {**row, "error": f"the file holds a {type(config).__name__}, not a task object"}
    return {**row, "level": level_name(config), "config": config}


def level_name(config: dict) -> str:
    level = (config.get("meta") or {}).get("level") if isinstance(config.get("meta"), dict) else None
    return f"L{level}" if level in (1, 2, 3) and not isinstance(level, bool) else NO_LEVEL


def _task(row: dict, folder: Path) -> Task:
    if "error" in row:
        raise RowError("file", row["error"])
    config = row["config"]
    number = re.search(r"(\d+)", row["id"])
    if number is None:
        raise RowError("file", f"cannot infer the numeric id from {row['file']} (the reference names images by it)")
    paths = image_paths(folder, int(number.group(1)))
    for path in paths:
        try:
            with Image.open(path) as opened:
                opened.verify()
        except Exception as err:  # noqa: BLE001 - any decoder failure means the same: an unreadable image
            raise RowError("image", f"{path.name} does not decode ({type(err).__name__}: {err})") from None
    prompt = (config.get("input") or {}).get("prompt", "") if isinstance(config.get("input"), dict) else ""
    golden = config.get("golden_answer") if isinstance(config.get("golden_answer"), dict) else {}
    process = config.get("process_evaluation") if isinstance(config.get("process_evaluation"), dict) else {}
    checkpoints = [c for c in process.get("checkpoints") or [] if isinstance(c, dict)]
    reference = (process.get("efficiency") or {}).get("reference_tool_calls") \
        if isinstance(process.get("efficiency"), dict) else None
    return Task(id=row["id"], question=str(prompt or ""), images=LazyImages(tuple(paths), read_image),
                answer=str(golden.get("value", "")), scorer=SCORER, category=row["level"], toolset="agentic_mme",
                reference_calls=int(reference) if isinstance(reference, (int, float)) else None,
                meta={"config": config, "file": row["file"], "level": row["level"],
                      "search": any(str(c.get("axis", "")).upper() == "S" for c in checkpoints),
                      "image_names": [p.name for p in paths]})


def image_paths(folder: Path, number: int) -> list[Path]:
    """dataset_utils.resolve_image_path: `image_NNNN_1..k` (the first folder that has them), else `image_NNNN`."""
    padded = str(number).zfill(4)
    folders = [folder / name for name in IMAGE_FOLDERS if (folder / name).is_dir()]
    for directory in folders:
        found, index = [], 1
        while (path := _first(directory, f"image_{padded}_{index}")) is not None:
            found.append(path)
            index += 1
        if found:
            return found
    for directory in folders:
        path = _first(directory, f"image_{padded}")
        if path is not None:
            return [path]
    raise RowError("image", f"no image_{padded}.png (or image_{padded}_N.png, .jpg, .jpeg) in "
                            f"{' or '.join(str(f) for f in folders) or folder / 'images'}")


def _first(directory: Path, stem: str) -> Path | None:
    return next((directory / f"{stem}{ext}" for ext in EXTENSIONS if (directory / f"{stem}{ext}").is_file()), None)
