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

Joins are checked rather than trusted: the reference pairs a task with its images by the number in the file name
only, so two task files with the same number (`9.json`, `0009.json`) would share one task's images: both are
skipped, naming each other. A task whose own `task_id` carries a number other than its file's, and images no task
file claims, are flagged on load (`notes`), since either means the files are numbered differently. The rows read
are compared with the paper's counts (Table 2: 418 tasks, L1 48.6 %, L2 32.1 %, L3 19.4 %, i.e. 203 / 134 / 81,
the only whole numbers that round to those shares).

The oracle-guidance ablation (`--ablation visual_cues` / `stepwise_guidance`, the paper's Table 5) also reads
`image_cause/`, the annotators' ground-truth intermediate images: a task's cues are found there by the rule its
input images follow (`image_NNNN_1..k`, else `image_NNNN`; png, jpg, jpeg). The published file names in that
folder are not documented by the benchmark's code or README; this rule is tirlab's assumption, and a dataset
where no task has a cue under it is refused rather than run without cues.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from PIL import Image

from eval.benchmarks.data import LazyImages, RowError, checked_rows, count_check, dataset_folder
from eval.suites import Skipped, Task
from tools.toolsets.agentic_mme import read_image  # the runner's PNG copy, then RGB, as its tools read it

HUB_REPO = "Crystal1047/Agentic-MME"
# The paper's item counts (Table 2's shares of 418 tasks). Its six domains (the code repository's README: Diagram
# 21.3 %, Finance 19.9 %, Society 19.4 %, Life 14.4 %, Culture 12.9 %, Science 12.2 %) have no field the code reads,
# so they are not checked.
PAPER_COUNTS = {"total": {"all": 418}, "level": {"L1": 203, "L2": 134, "L3": 81}}
CUE_FOLDER = "image_cause"
LEVELS = ("L1", "L2", "L3")
NO_LEVEL = "unknown level"  # a task whose meta.level is not 1-3: counted overall, in no level
SCORER = "agentic_mme"  # the benchmark's own scoring (eval/benchmarks/agentic_mme/scoring.py)
IMAGE_FOLDERS = ("image", "images")  # where the reference looks, in its order
EXTENSIONS = (".png", ".jpg", ".jpeg")


def load(data_dir: str | None = None, revision: str | None = None,
         cues: bool = False) -> tuple[list[Task], list[Skipped], str, dict]:
    """The tasks, the skipped rows, the dataset's name (hub repo@commit, or the local folder) and what the load
    found about the files: `counts` (the rows read against the paper's counts) and `flags` (joins that look wrong,
    each naming its rows). `cues`: also read each task's ground-truth intermediate images from image_cause/
    (`task.meta["cue_images"]`), for the oracle-guidance ablation."""
    patterns = ["json/**", "images/**", "image/**"] + ([f"{CUE_FOLDER}/**"] if cues else [])
    folder, source = dataset_folder(HUB_REPO, data_dir, revision, patterns)
    files = sorted((folder / "json").glob("*.json"))
    if not files:
        raise FileNotFoundError(f"{folder} has no json/*.json task files; give the folder that holds Agentic-MME's "
                                "json/ and images/")
    rows = _joined([_read(path) for path in files])
    tasks, skipped = checked_rows(rows, lambda row: _task(row, folder, cues),
                                  lambda number: f"json/{files[number].name}", category="level")
    counts = count_check("Agentic-MME", PAPER_COUNTS, [(row["id"], {"level": row["level"]}) for row in rows], skipped)
    flags = [*(f"json/{row['file']} holds task_id {row['config'].get('task_id')!r}, whose number is not the file's "
               f"({_number(row['file'])}); its images are image_{_number(row['file']):04d}*, by the file's number"
               for row in rows if _id_disagrees(row)),
             *_unclaimed_images(folder, rows)]
    if cues and not any(task.meta["cue_images"] for task in tasks):
        raise FileNotFoundError(f"no task has a ground-truth intermediate image in {folder / CUE_FOLDER} (looked for "
                                "image_NNNN.png / image_NNNN_k.png, .jpg, .jpeg by each task's number): the oracle-"
                                "guidance ablation needs the dataset's image_cause/ folder")
    return tasks, skipped, source, {"counts": counts, "flags": flags}


def _joined(rows: list[dict]) -> list[dict]:
    """The rows with those that share an image number refused: the reference would pair each of them with the
    same images, which belong to one task at most."""
    by_number: dict[int, list[dict]] = {}
    for row in rows:
        number = _number(row["file"])
        if number is not None and "error" not in row:
            by_number.setdefault(number, []).append(row)
    for number, group in by_number.items():
        for row in group if len(group) > 1 else ():
            others = ", ".join(f"json/{other['file']}" for other in group if other is not row)
            row["error"] = (f"its number {number} is also {others}'s; the reference pairs images by that number, so "
                            "the images cannot be told apart: keep one file per number")
    return rows


def _number(file_name: str) -> int | None:
    found = re.search(r"(\d+)", Path(file_name).stem)  # dataset_utils.extract_numeric_id_from_filename
    return int(found.group(1)) if found else None


def _id_disagrees(row: dict) -> bool:
    """A task_id with a number (e.g. amme_0012) that is not its file's number."""
    task_id = str((row.get("config") or {}).get("task_id") or "")
    found = re.findall(r"\d+", task_id)
    return bool(found) and _number(row["file"]) is not None and int(found[-1]) != _number(row["file"])


def _unclaimed_images(folder: Path, rows: list[dict]) -> list[str]:
    numbers = {_number(row["file"]) for row in rows}
    unclaimed = sorted(path.name for name in IMAGE_FOLDERS if (folder / name).is_dir()
                       for path in (folder / name).iterdir()
                       if path.suffix.lower() in EXTENSIONS and _image_number(path) not in numbers)
    if not unclaimed:
        return []
    shown = ", ".join(unclaimed[:8]) + (f" and {len(unclaimed) - 8} more" if len(unclaimed) > 8 else "")
    return [f"{len(unclaimed)} image(s) that no task file's number picks: {shown}"]


def _image_number(path: Path) -> int | None:
    found = re.match(r"image_(\d+)(?:_\d+)?$", path.stem)
    return int(found.group(1)) if found else None


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


def _task(row: dict, folder: Path, cues: bool) -> Task:
    if "error" in row:
        raise RowError("file", row["error"])
    config = row["config"]
    number = re.search(r"(\d+)", row["id"])
    if number is None:
        raise RowError("file", f"cannot infer the numeric id from {row['file']} (the reference names images by it)")
    paths = image_paths(folder, int(number.group(1)))
    cue_paths = cue_images(folder, int(number.group(1))) if cues else []
    for path in paths + cue_paths:
        try:
            with Image.open(path) as opened:
                opened.verify()
        except Exception as err:  # noqa: BLE001 - any decoder failure means the same: an unreadable image
            raise RowError("image", f"{path.name} does not decode ({type(err).__name__}: {err})") from None
    prompt = (config.get("input") or {}).get("prompt", "") if isinstance(config.get("input"), dict) else ""
    golden = config.get("golden_answer") if isinstance(config.get("golden_answer"), dict) else {}
    process = config.get("process_evaluation") if isinstance(config.get("process_evaluation"), dict) else {}
    reference = (process.get("efficiency") or {}).get("reference_tool_calls") \
        if isinstance(process.get("efficiency"), dict) else None
    return Task(id=row["id"], question=str(prompt or ""), images=LazyImages(tuple(paths), read_image),
                answer=str(golden.get("value", "")), scorer=SCORER, category=row["level"], toolset="agentic_mme",
                reference_calls=int(reference) if isinstance(reference, (int, float)) else None,
                meta={"config": config, "file": row["file"], "level": row["level"],
                      "search": any(str(c.get("axis", "")).upper() == "S" for c in checkpoints(config)),
                      "image_names": [p.name for p in paths], "cue_images": cue_paths})


def checkpoints(config: dict) -> list[dict]:
    """The task's process_evaluation.checkpoints, in their order (the reference trajectory's steps)."""
    process = config.get("process_evaluation") if isinstance(config.get("process_evaluation"), dict) else {}
    return [c for c in process.get("checkpoints") or [] if isinstance(c, dict)]


def image_paths(folder: Path, number: int, names: tuple[str, ...] = IMAGE_FOLDERS) -> list[Path]:
    """dataset_utils.resolve_image_path: `image_NNNN_1..k` (the first folder that has them), else `image_NNNN`."""
    padded = str(number).zfill(4)
    folders = [folder / name for name in names if (folder / name).is_dir()]
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


def cue_images(folder: Path, number: int) -> list[Path]:
    """A task's ground-truth intermediate images in image_cause/, by its input images' naming rule; none if absent."""
    try:
        return image_paths(folder, number, (CUE_FOLDER,))
    except RowError:
        return []


def _first(directory: Path, stem: str) -> Path | None:
    return next((directory / f"{stem}{ext}" for ext in EXTENSIONS if (directory / f"{stem}{ext}").is_file()), None)
