"""VTC-Bench's data as published: a TSV with the columns `index id category image question answer A B C D`
(GitHub `data/VTC-Bench.tsv`: `image` is a path such as `images/attention_focusing/attention_focusing_1.jpg`;
the hub dataset `zzzhu/VTC-Bench`: `image` holds the picture as base64) and `VTC-Bench_GTToolChain.tsv` (the
same columns plus the ground-truth tool chain `model_tools_gt`, e.g. `["Crop", "Flip", "Resize"]`). Open
questions leave the options empty. A folder given by `--data_dir` holds the same files.

Each track reads the file its configuration names (cs-w0r1d/VTC-Bench@93a33a4, `eval/eval_config/`): the
interface track `VTC_Bench_GTToolChain.tsv` (`*_interface*.yaml`), questions, answers and chains from one file,
as `VTC_Bench_Eval.py` reads them (`load_tsv_data`, and `convert_jsonl_to_xlsx` for scoring, from the same
`tsv_path`); the code track `VTC_Bench_680.tsv` (`*_code.yaml`; the Thyme framework's VLMEvalKit dataset
`VTCBench_680` likewise), the 680 rows without chains, published as `VTC-Bench.tsv`. The two published files
are not the same rows under the same ids: the first release numbers the color and counting problems
differently in each and edits questions and answers in one of them. So a chain is never taken from the other
file by id alone: the code track takes a row's chain from `VTC-Bench_GTToolChain.tsv` only where that file's
row of the same id has the same question, answer, options and image; otherwise the task has no chain and
`meta["no_chain"]` says why.

Every row is checked; a row that cannot be a task (a missing field, an unknown category, an image that is
missing or does not decode, a repeated id) is skipped with its reason and counted as unscored. Images are
decoded as the benchmark's own tools read them (`tools.toolsets.vtc_bench.read_image`), so the episode's
image is the one the tools see. Every row read is counted against the paper's item counts (Tables 2 and 3).

`reference_calls.json` (a tirlab extension, not published: `{id: [{"name", "arguments"}]}`) gives rows reference
tool calls for `--backend reference`; their image paths are written `{workspace}/image_N.png`.
"""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import NamedTuple

from PIL import Image

from eval.benchmarks.data import LazyImages, RowError, checked_rows, count_check, dataset_folder
from eval.benchmarks.vtc_bench.scoring import gt_chain_length
from eval.suites import Skipped, Task
from tools.toolsets.vtc_bench import read_image

HUB_REPO = "zzzhu/VTC-Bench"
# The corrected release (hub a91ba593, GitHub zhuzil/VTC-Bench 5e0a5533): the maintainers fixed the images
# missing from the first release and 26 question-image mismatches, which they call a packaging error of the
# upload. The paper's runs predate every public release; this is the closest to the data they describe.
HUB_REVISION = "a91ba593ca0a6dff8ca960d22286387c44a91bdd"
QUESTIONS = "VTC-Bench.tsv"
CHAINS = "VTC-Bench_GTToolChain.tsv"
TRACK_FILES = {"interface": CHAINS, "code": QUESTIONS}
REFERENCE_CALLS = "reference_calls.json"
COLUMNS = ("index", "id", "category", "image", "question", "answer")
OPTIONS = ("A", "B", "C", "D", "E")
CHAIN_COLUMN = "model_tools_gt"
# what must agree before a chain is taken from the other file's row of the same id
AGREEING = ("question", "answer", "image", *OPTIONS)
# published files known by their sha256, and what they are
KNOWN_FILES = {
    "0d285c01aea74d1cae646c762ec8369041bfba8c15431d3fdcf474a347fd81ca":
        "VTC-Bench.tsv of the first release (GitHub cs-w0r1d/VTC-Bench@93a33a4, before the corrections of "
        "zhuzil/VTC-Bench@5e0a5533)",
    "8138cf8bc32b311cc790a78e5134ed64b06c428c551e8160932d658c8715ff8e":
        "VTC-Bench_GTToolChain.tsv of the first release (GitHub cs-w0r1d/VTC-Bench@93a33a4, before the "
        "corrections of zhuzil/VTC-Bench@5e0a5533)",
}
# the three tiers of the paper's cognitive hierarchy, and their categories as the data names them
TIERS = {"perception enhancement": ("ocr", "perceptual", "attention"),
         "quantitative estimation": ("measure", "color", "counting"),
         "compositional reasoning": ("chart", "math", "spatial")}
CATEGORIES = tuple(c for categories in TIERS.values() for c in categories)
# the paper's item counts: Table 2 (680 items, 538 multiple choice, 142 open) and Table 3 (per category)
PAPER_COUNTS = {"total": {"all": 680},
                "category": {"attention": 45, "chart": 100, "color": 90, "counting": 85, "math": 110, "measure": 105,
                             "perceptual": 50, "ocr": 50, "spatial": 45},
                "answer type": {"multiple choice": 538, "open": 142}}
SCORER = "vtc_bench"  # the benchmark's own scoring (eval/benchmarks/vtc_bench/scoring.py)


class Loaded(NamedTuple):
    tasks: list[Task]
    skipped: list[Skipped]
    source: str  # hub repo@commit, or the local folder, and the file read
    counts: str  # the rows read against the paper's item counts (eval.benchmarks.data.count_check)


def load(data_dir: str | None = None, revision: str | None = None, track: str = "interface") -> Loaded:
    """The tasks of `track` (the file its configuration reads), the skipped rows, the dataset's name and the
    count check. Without `data_dir` the hub dataset at `revision` (default: the corrected release)."""
    folder, source = dataset_folder(HUB_REPO, data_dir, revision or (None if data_dir else HUB_REVISION),
                                    ["*.tsv", "*.json", "images/**"])
    path = folder / TRACK_FILES[track]
    if not path.is_file():
        found = sorted(p.name for p in folder.glob("*.tsv"))
        raise FileNotFoundError(f"{folder} has no {path.name}, the file the {track} track reads (TSV files there: "
                                f"{found or 'none'}); download the whole dataset ({HUB_REPO})")
    rows = _read_tsv(path)
    chain_of = _own_chain if rows and CHAIN_COLUMN in rows[0] else _checked_join(folder / CHAINS)
    references = _reference_calls(folder / REFERENCE_CALLS)
    # line 1 is the header
    tasks, skipped = checked_rows(rows, lambda row: _task(row, folder, chain_of, references),
                                  lambda number: f"{path.name}: line {number}", category="category", first=2)
    counted = [(row.get("id") or f"line {number}", {"category": row.get("category"), "answer type": _answer_type(row)})
               for number, row in enumerate(rows, 2)]
    known = KNOWN_FILES.get(_sha256(path))
    return Loaded(tasks, skipped, f"{source}, {path.name}" + (f" ({known})" if known else ""),
                  count_check("VTC-Bench", PAPER_COUNTS, counted, skipped))


def _answer_type(row: dict) -> str:
    return "multiple choice" if any((row.get(k) or "").strip() for k in OPTIONS) else "open"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _own_chain(row: dict) -> tuple[str | None, str | None]:
    """The chain of a row that carries one (the interface track's file), or why it has none."""
    cell = (row.get(CHAIN_COLUMN) or "").strip()
    return (cell, None) if cell else (None, f"its {CHAIN_COLUMN} cell is empty")


def _checked_join(path: Path):
    """The chain of a row without one: the chain file's row of the same id, where that row is the same problem
    (question, answer, options and image agree, whitespace aside); otherwise none, and why."""
    if not path.is_file():
        return lambda row: (None, f"there is no {CHAINS} beside the questions")
    lines = {row.get("id"): (number, row) for number, row in enumerate(_read_tsv(path), 2)}

    def chain_of(row: dict) -> tuple[str | None, str | None]:
        if row.get("id") not in lines:
            return None, f"{CHAINS} has no row {row.get('id')!r}"
        number, other = lines[row["id"]]
        differing = [field for field in AGREEING if _plain(row.get(field)) != _plain(other.get(field))]
        if differing:
            return None, (f"{CHAINS} line {number} has the id {row['id']!r} but another {', '.join(differing)}: "
                          "not the same problem for certain, so its chain is not taken")
        return _own_chain(other)

    return chain_of


def _plain(text: str | None) -> str:
    return " ".join((text or "").split())


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


def _task(row: dict, folder: Path, chain_of, references: dict) -> Task:
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
    chain, no_chain = chain_of(row)
    options = {k: row[k] for k in OPTIONS if (row.get(k) or "").strip()}
    kept = {k: v for k, v in row.items() if k != "image"}
    return Task(id=row["id"], question=row["question"], images=LazyImages((image,), read_image), answer=row["answer"],
                scorer=SCORER, category=row["category"], toolset="vtc_bench",
                reference_calls=gt_chain_length(chain) if chain else None,
                reference=tuple(references.get(row["id"], ())),
                meta={"row": {**kept, CHAIN_COLUMN: chain}, "options": options, "image_size": list(size),
                      **({"no_chain": no_chain} if no_chain else {})})


def _image_source(cell: str, folder: Path) -> Path | bytes:
    """A path relative to the data folder (GitHub's TSV), or the picture itself as base64 (the hub's)."""
    path = folder / cell
    if len(cell) < 1024 and path.is_file():
        return path
    try:
        return base64.b64decode(cell, validate=True)
    except (binascii.Error, ValueError):
        raise RowError("image", f"is neither a file under {folder} nor base64 image data: {cell[:80]!r}") from None
