"""VisualToolBench's data as published: the hub dataset `ScaleAI/VisualToolBench` (split `test`) at revision
`REVISION`, read with `datasets.load_dataset` as the benchmark's download_dataset.py reads it, or a local folder
(`--data_dir`) in either layout:

- what download_dataset.py writes: `data/single_turn/dataset.json` and `data/multi_turn/dataset.json` (a list of
  rows each) with the images under `data/<kind>/images/sample_<k>/`, named by the rows' `image_paths` and
  `images_by_turn_paths` (relative to the folder that holds `data/`; the folder given may be either);
- the hub repository's files (`hf download`): the parquet file(s) the `test` split is made of, `test.parquet` (or
  `test-*.parquet`, also under `data/`), as `datasets` picks a split's files by name; image columns as
  `{"bytes", "path"}`. The repository also keeps `vistoolbench_1204.parquet`, an earlier layout (one `prompt`,
  `golden_answer` and `rubrics` per task) that no split reads: it is not read here either.

A row (the fields the reference's scripts read): `id` (or `task_id`), `turn_prompts` (one per turn; a task is
multi-turn when it has more than one), `num_turns`, `turn_golden_answers`, `rubrics_by_turn` (each turn's rubrics,
`{rubric_id: {"description", "weight", ...}}`, stored as a JSON string), `turn_tool_trajectories`, `turncase`,
`prompt_category` (the domain), `eval_focus`, and the images: `images` / `image_paths` (a single-turn task's) and
`images_by_turn` / `images_by_turn_paths` (each turn's). The reference's loop shows the model the first image of a
turn (single-turn: the first of `image_paths`) and nothing else, so that is what a task carries: `Task.images` is
turn 0's first image and each later turn is a `FollowUp` with its prompt and its first image. A row the reference
could not run (no prompt, rubrics that do not parse, a missing or unreadable image) is skipped with its reason and
counted as unscored.

The rows' fields must agree with each other, as the reference pairs them by position: a row whose `num_turns`,
`turncase`, `turn_golden_answers`, `rubrics_by_turn` or `images_by_turn` disagree with the number of prompts is
skipped with the disagreement named (the reference would judge a turn against another turn's rubrics, or none).

Every row read (before `--tasks`) is counted against the paper's Table 2: 1,204 tasks, 603 single-turn and 601
multi-turn, per domain and per task category (`counts`); a local copy with fewer rows says it is a subset.

`--tasks` picks a part of it: `single` and/or `multi` (the turn kinds, as the reference's two scripts run them) and
/or the paper's domains (`stem`, `medicine`, `finance`, `sports`, `generalist`); rows outside the part, skipped ones
included, are not loaded.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

from eval.benchmarks.data import LazyImages, RowError, checked_rows, count_check
from eval.benchmarks.visualtoolbench.scoring import domain
from eval.suites import FollowUp, Skipped, Task

HUB_REPO = "ScaleAI/VisualToolBench"
# The hub's main at the time of writing (its README lists the turn_* columns download_dataset.py reads and 603 + 601
# tasks). The paper names no revision; its Table 2 counts are those of this one.
REVISION = "3f806404430201201120226222b74fc49565b712"
SPLIT = "test"  # download_dataset.py reads ds['test']
SCORER = "visualtoolbench"  # the benchmark's rubric judge (scoring.py)
KINDS = ("single_turn", "multi_turn")
TURNS = {"single": "single_turn", "multi": "multi_turn"}  # --tasks names of the kinds
# The paper's domain columns and the domains (prompt_category after analyze_results' STEM merge, any case) each
# gathers.
DOMAINS = {"STEM": ("stem",), "Medicine": ("medical", "medicine"), "Finance": ("finance",),
           "Sports": ("sports",), "Generalist": ("generalist", "general")}


# The paper's Table 2: tasks per turn kind, domain (STEM merged, as analyze_results does) and task category
# (eval_focus; Figure 3's categories).
PAPER_COUNTS = {"total": {"all": 1204}, "turncase": {"single-turn": 603, "multi-turn": 601},
                "domain": {"STEM": 238, "Medicine": 238, "Finance": 243, "Sports": 240, "Generalist": 245},
                "category": {"Region Switch Q&A": 281, "Hybrid Tool-use": 322, "Follow-up Test": 198,
                             "Temporal Reasoning": 205, "Progressive Reasoning": 198}}
# A word of each eval_focus value -> the paper's category (the values' exact spelling is the dataset's, not stated in
# the paper: region_switch, "Region Switch Q&A", ... all name the same category)
CATEGORY_WORDS = (("region", "Region Switch Q&A"), ("hybrid", "Hybrid Tool-use"), ("follow", "Follow-up Test"),
                  ("temporal", "Temporal Reasoning"), ("progressive", "Progressive Reasoning"))


def category_name(eval_focus) -> str:
    """The paper's task category of an eval_focus value; the value itself when it names none of them."""
    value = str(eval_focus or "")
    return next((name for word, name in CATEGORY_WORDS if word in value.lower()), value or "unknown")


def domain_column(value) -> str | None:
    """The paper's domain column of a domain (`scoring.domain` of a prompt_category), None outside them."""
    value = str(value or "").strip().lower()
    return next((column for column, names in DOMAINS.items() if value in names), None)


def selection(names) -> tuple[set[str], set[str] | None]:
    """`--tasks` as the turn kinds and the domain columns it keeps (None: every domain, those outside the paper's
    five included); an unknown name is an error that lists the known ones."""
    columns = {column.lower(): column for column in DOMAINS}
    picked = {str(name).lower() for name in names}
    unknown = sorted(picked - set(TURNS) - set(columns))
    if unknown:
        raise ValueError(f"unknown --tasks value(s) {unknown}; VisualToolBench's are {', '.join(TURNS)} (the turn "
                         f"kinds) and {', '.join(columns)} (the paper's domains), e.g. --tasks single")
    kinds = {TURNS[name] for name in picked & set(TURNS)} or set(KINDS)
    domains = {columns[name] for name in picked & set(columns)} or None
    return kinds, domains


def load(data_dir: str | None = None, revision: str | None = None, kinds=frozenset(KINDS),
         domains=None) -> tuple[list[Task], list[Skipped], str, str]:
    """The tasks, the skipped rows, the dataset's name (hub repo@revision, or the local folder) and how every row
    read compares with the paper's counts (`count_check`), of the rows whose kind is in `kinds` and (unless None)
    whose domain column is in `domains` (see `selection`)."""
    if data_dir is None:
        revision = revision or REVISION
        rows, source = _hub_rows(revision), f"{HUB_REPO}@{revision} (split {SPLIT})"
        root = None
    else:
        folder = Path(data_dir).expanduser().resolve()
        if not folder.is_dir():
            raise FileNotFoundError(f"--data_dir {data_dir} is not a folder; give the folder download_dataset.py "
                                    f"wrote (data/ with single_turn/ and multi_turn/) or the {HUB_REPO} parquet files")
        rows, root = _folder_rows(folder)
        source = f"{folder} (local copy of {HUB_REPO})"
    rows = _numbered(rows)
    counts = _counts(rows, root)
    kept = [row for row in rows if row["_kind"] in kinds
            and (domains is None or domain_column(domain(row.get("prompt_category"))) in domains)]
    if not kept:
        raise ValueError(f"{source} has no row of the selection (--tasks: {', '.join(sorted(kinds))}"
                         f"{'; ' + ', '.join(sorted(domains)) if domains else ''}); choose another")
    tasks, skipped = checked_rows(kept, lambda row: _task(row, root), lambda n: kept[n]["_where"],
                                  category="prompt_category")
    return tasks, skipped, source, counts


def _counts(rows: list[dict], root: Path | None) -> str:
    """Every row read against the paper's Table 2, the rows that would not load named (rows are checked here
    once more, before `--tasks`, so that a selection does not hide them)."""
    listed, unloadable = [], []
    for row in rows:
        ident = str(row.get("id", row.get("task_id", row["_where"])))
        listed.append((ident, {"turncase": row["_kind"].replace("_", "-"),
                               "domain": domain_column(domain(row.get("prompt_category"))) or
                               str(row.get("prompt_category")),
                               "category": category_name(row.get("eval_focus"))}))
        try:
            _check_row(row)
        except RowError as err:
            unloadable.append(Skipped(ident, str(row.get("prompt_category")), str(err)))
    return count_check("VisualToolBench", PAPER_COUNTS, listed, unloadable)


def _hub_rows(revision: str | None) -> list[dict]:
    try:
        from datasets import load_dataset

        dataset = load_dataset(HUB_REPO, revision=revision)[SPLIT]
    except Exception as err:  # noqa: BLE001 - offline, gated, a bad revision: all end the same way for the user
        raise FileNotFoundError(f"could not get the dataset {HUB_REPO} from the hub ({type(err).__name__}: {err}); "
                                "run the benchmark's download_dataset.py where there is access (or `hf download "
                                f"{HUB_REPO} --repo-type dataset --local-dir DIR`) and pass --data_dir DIR") from None
    return [{**row, "_where": f"{HUB_REPO} {SPLIT} row {n}"} for n, row in enumerate(dataset)]


def _folder_rows(folder: Path) -> tuple[list[dict], Path | None]:
    """Rows from download_dataset.py's JSON files (and the folder their relative image paths start from), else
    from parquet files."""
    for root in (folder, folder.parent):
        files = [root / "data" / kind / "dataset.json" for kind in KINDS]
        if any(path.is_file() for path in files):
            rows = []
            for path in (p for p in files if p.is_file()):
                try:
                    listed = json.loads(path.read_text(encoding="utf-8"))
                except (ValueError, UnicodeDecodeError) as err:
                    raise ValueError(f"{path} is not JSON ({err}); download it again") from None
                if not isinstance(listed, list):
                    raise ValueError(f"{path} holds a {type(listed).__name__}, not the list of rows "
                                     "download_dataset.py writes")
                rows += [{**row, "_where": f"{path.relative_to(root)} row {n}"} if isinstance(row, dict) else
                         {"_where": f"{path.relative_to(root)} row {n}", "_error": "the row is not an object"}
                         for n, row in enumerate(listed)]
            return rows, root
    found = sorted(folder.glob("*.parquet")) + sorted(folder.glob("data/*.parquet"))
    # `datasets` makes a split of the files named after it (test.parquet, test-00000-of-00001.parquet, ...)
    parquet = [path for path in found if path.stem == SPLIT or path.stem.startswith(f"{SPLIT}-")]
    if not parquet:
        others = f" (only {', '.join(p.name for p in found)}, which no {SPLIT} split reads)" if found else ""
        raise FileNotFoundError(f"{folder} has neither data/single_turn/dataset.json nor data/multi_turn/dataset.json "
                                f"(download_dataset.py's layout) nor the {SPLIT} split's parquet files ({HUB_REPO}'s "
                                f"{SPLIT}.parquet){others}")
    import pyarrow.parquet as pq

    rows = []
    for path in parquet:
        for n, row in enumerate(pq.read_table(path).to_pylist()):
            rows.append({**row, "_where": f"{path.name} row {n}"})
    return rows, None


def _numbered(rows: list[dict]) -> list[dict]:
    """Each row with its kind (download_dataset.py's rule, and the task's: more than one prompt is multi-turn) and
    the sample number download_dataset.py gives it (its place among the rows of its kind), which names its image
    folder."""
    counts = {kind: 0 for kind in KINDS}
    for row in rows:
        prompts = row.get("turn_prompts")
        kind = "multi_turn" if isinstance(prompts, list) and len(prompts) > 1 else "single_turn"
        row["_kind"], row["_sample"] = kind, counts[kind]
        counts[kind] += 1
    return rows


def _check_row(row: dict) -> int:
    """The row's number of turns, or a RowError naming the field that is missing or disagrees with the prompts."""
    if "_error" in row:
        raise RowError("row", row["_error"])
    ident = row.get("id", row.get("task_id"))
    if ident in (None, ""):
        raise RowError("id", "missing; every row needs an id")
    prompts = row.get("turn_prompts")
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise RowError("turn_prompts", "must be a non-empty list of strings (one prompt per turn)")
    turns = row.get("num_turns") or len(prompts)
    if not isinstance(turns, int) or isinstance(turns, bool) or turns != len(prompts):
        raise RowError("num_turns", f"{turns!r} disagrees with the {len(prompts)} turn_prompts (the reference runs "
                                    "num_turns turns with a prompt each)")
    turncase = row.get("turncase")
    if turncase and turncase != ("multi-turn" if turns > 1 else "single-turn"):
        raise RowError("turncase", f"{turncase!r} disagrees with the {turns} turn_prompts")
    for name in ("turn_golden_answers", "rubrics_by_turn"):
        value = row.get(name)
        if isinstance(value, list) and len(value) != turns:
            raise RowError(name, f"{len(value)} entries for {turns} turn(s): the turns cannot be paired with them")
    for name in ("images_by_turn", "images_by_turn_paths"):
        value = row.get(name)
        if turns > 1 and isinstance(value, list) and len(value) > turns:
            raise RowError(name, f"{len(value)} turns of images for {turns} turn_prompts: the turns cannot be "
                                 "paired with them")
    return turns


def _task(row: dict, root: Path | None) -> Task:
    turns = _check_row(row)
    ident, prompts = row.get("id", row.get("task_id")), row["turn_prompts"]
    multi = len(prompts) > 1
    golden = _listed(row, "turn_golden_answers", turns)
    rubrics = [_rubrics(value, turn) for turn, value in enumerate(_listed(row, "rubrics_by_turn", turns))]
    sources = _image_sources(row, root, turns, multi)
    shown = [_shown_path(row, turn, multi) if source is not None else None for turn, source in enumerate(sources)]
    for turn, source in enumerate(sources):
        if source is not None:
            _check_image(source, turn)
    first = LazyImages(tuple(s for s in sources[:1] if s is not None), read_image)
    follow_ups = tuple(FollowUp(prompts[t], LazyImages((sources[t],), read_image) if sources[t] is not None else ())
                       for t in range(1, turns))
    category = str(row.get("prompt_category") or "unknown")
    return Task(id=str(ident), question=prompts[0], images=first, answer=str(golden[0] or ""), scorer=SCORER,
                category=category, toolset="visualtoolbench", follow_ups=follow_ups,
                meta={"turncase": row.get("turncase") or ("multi-turn" if multi else "single-turn"),
                      "prompt_category": row.get("prompt_category", ""), "eval_focus": row.get("eval_focus", ""),
                      "multi_turn": multi, "turn_prompts": list(prompts[:turns]),
                      "golden_answers": [str(g or "") for g in golden], "rubrics_by_turn": rubrics,
                      "image_paths": shown, "sample": row["_sample"]})


def _listed(row: dict, name: str, turns: int) -> list:
    """A per-turn field, as long as the turns (the reference reads a missing entry as "")."""
    value = row.get(name)
    if value is None:
        value = []
    if not isinstance(value, list):
        raise RowError(name, f"must be a list with one entry per turn, got {type(value).__name__}")
    return [value[t] if t < len(value) else "" for t in range(turns)]


def _rubrics(value, turn: int) -> dict:
    """A turn's rubrics as a dict: the dataset stores them as a JSON string."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as err:
            raise RowError("rubrics_by_turn", f"turn {turn}: not JSON ({err})") from None
    if not isinstance(value, dict):
        raise RowError("rubrics_by_turn", f"turn {turn}: must be an object of rubrics by id, got "
                                          f"{type(value).__name__}")
    for rubric_id, rubric in value.items():
        if not isinstance(rubric, dict) or "description" not in rubric or "weight" not in rubric:
            raise RowError("rubrics_by_turn", f"turn {turn}, rubric {rubric_id!r}: needs a description and a weight")
    return value


def _image_sources(row: dict, root: Path | None, turns: int, multi: bool) -> list:
    """The first image of each turn (a path or encoded bytes), None for a turn without one; the single-turn
    script reads `image_paths` (else `image`), the multi-turn one `images_by_turn_paths`."""
    if root is not None:
        if multi:
            listed = row.get("images_by_turn_paths") or []
            firsts = [(listed[t] or [None])[0] if t < len(listed) and isinstance(listed[t], list) else None
                      for t in range(turns)]
        else:
            paths = row.get("image_paths", row.get("image")) or []
            firsts = [paths[0] if isinstance(paths, list) and paths else paths or None]
        return [_resolved(root, p) if p is not None else None for p in firsts]
    if multi:
        listed = row.get("images_by_turn") or []
        return [_encoded(listed[t][0]) if t < len(listed) and listed[t] else None for t in range(turns)]
    images = row.get("images") or []
    return [_encoded(images[0]) if images else None]


def _resolved(root: Path, path) -> Path:
    if not isinstance(path, str):
        raise RowError("image_paths", f"{path!r} is not a path")
    resolved = Path(path) if Path(path).is_absolute() else root / path
    if not resolved.is_file():
        raise RowError("image_paths", f"{path} does not exist under {root}")
    return resolved


def _encoded(cell) -> bytes:
    if isinstance(cell, dict) and isinstance(cell.get("bytes"), (bytes, bytearray)):
        return bytes(cell["bytes"])
    if isinstance(cell, Image.Image):  # `datasets` decodes image columns itself
        buffer = io.BytesIO()
        cell.save(buffer, format="PNG")
        return buffer.getvalue()
    raise RowError("images", f"an image cell must be {{'bytes': ..., 'path': ...}}, got {type(cell).__name__}")


def _shown_path(row: dict, turn: int, multi: bool) -> str:
    """The path the reference's tool description lists for a turn's image: the row's own relative path, or the
    one download_dataset.py gives it."""
    if multi:
        listed = row.get("images_by_turn_paths") or []
        if turn < len(listed) and isinstance(listed[turn], list) and listed[turn]:
            return str(listed[turn][0])
        return f"data/multi_turn/images/sample_{row['_sample']}/turn_{turn}_image_0.png"
    paths = row.get("image_paths")
    if isinstance(paths, list) and paths:
        return str(paths[0])
    return f"data/single_turn/images/sample_{row['_sample']}/image_0.png"


def _check_image(source, turn: int) -> None:
    try:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as opened:
            opened.verify()
    except Exception as err:  # noqa: BLE001 - any decoder failure means the same: an unreadable image
        raise RowError("images", f"turn {turn}'s image does not decode ({type(err).__name__}: {err})") from None


def read_image(source) -> np.ndarray:
    with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as opened:
        return np.asarray(opened.convert("RGB")).copy()
