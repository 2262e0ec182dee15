"""Generate audited samples and export them as Hugging Face datasets.

    python data_gen/make.py pilot --out data/pilot            # TIR-Bench's pilot: rotated OCR, direct + agentic
    python data_gen/make.py pilot --render aligned --n 2000 --n-test 500 --out data/pilot-toy   # for toy models
    python data_gen/make.py sft --task rotated_ocr --n 1000 --out data/rot --option angles=any
    python data_gen/make.py rl --task word_search --n 5000 --difficulty hard --out data/ws-rl
    python data_gen/make.py push data/pilot/agentic user/rotated-ocr-agentic   # to the Hub (HF_TOKEN)
    python data_gen/make.py sheet --out docs/data_gen_samples.png   # a contact sheet of every task

Every sample is generated from its seed, its reference calls are replayed through the tools and
audited, and a sample that fails the audit stops the run with its id (a generator bug, not noise).
Each export folder has a `viewer.html` (viewer/: its first rows, each sample's turns, calls and images), and each
SFT export folder also holds `generation.json`, the generation config (task, options, seeds), which
train/sft.py copies into its run record so an evaluation can draw held-out tasks the same way.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import datasets  # noqa: E402
from tqdm import tqdm  # noqa: E402

from data_gen.contact_sheet import contact_sheet  # noqa: E402
from data_gen.export import export, png, push, to_dataset  # noqa: E402
from data_gen.rl import TRL_COLUMNS, TRL_FEATURES, VERL_COLUMNS, VERL_FEATURES, trl_row, verl_row  # noqa: E402
from data_gen.sample import audit  # noqa: E402
from data_gen.sft import FORMS, agentic_row, direct_row  # noqa: E402
from data_gen.tasks import get_task  # noqa: E402
from data_gen.tasks.rotated_ocr import RENDERS  # noqa: E402
from runtime import cli  # noqa: E402
from runtime.trajectory import image_key  # noqa: E402
from viewer import view  # noqa: E402

PILOT_SIZES = (1000, 5000, 10000, 15000)
DIFFICULTIES = ("easy", "medium", "hard")
TEST_SEED_OFFSET = 10_000_000  # test seeds never overlap training seeds
GENERATION_FILE = "generation.json"
VIEWER_ROWS = 1000  # rows of each split in an export's viewer.html (python -m viewer EXPORT shows them all)


def sft_rows(job: tuple) -> dict[str, dict]:
    """Both SFT forms of one audited sample: {"direct": row, "agentic": row}."""
    task_name, seed, difficulty, options = job
    task = get_task(task_name)
    sample = task.generate(seed, difficulty, **options)
    trajectory = audit(sample, task.check)
    rows = {"direct": direct_row(sample), "agentic": agentic_row(trajectory)}
    encoded = {}  # the task image is in both forms: encode each distinct image once (PNG is most of the cost)

    def encode(image):
        key = image_key(image)
        if key not in encoded:
            encoded[key] = png(image)
        return encoded[key]
    return {form: {**row, "images": [encode(im) for im in row["images"]], "id": sample.id, "form": form}
            for form, row in rows.items()}


def rl_rows(job: tuple) -> dict[str, dict]:
    """The verl and TRL rows of one audited sample."""
    task_name, seed, difficulty, options, split, index = job
    task = get_task(task_name)
    sample = task.generate(seed, difficulty, **options)
    audit(sample, task.check)
    return {"verl": verl_row(sample, split, index), "trl": trl_row(sample)}


def generate(jobs: list[tuple], workers: int, label: str, make=sft_rows) -> list[dict[str, dict]]:
    if workers <= 1:
        return [make(job) for job in tqdm(jobs, desc=label, unit="sample")]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return list(tqdm(pool.imap(make, jobs, chunksize=64), total=len(jobs), desc=label, unit="sample"))


def build_rl(task: str, n: int, n_test: int, out: Path, difficulty: str, options: dict, workers: int,
             seed: int = 0) -> dict:
    started = time.perf_counter()
    splits = {"train": [(task, seed + k, difficulty, options, "train", k) for k in range(n)],
              "test": [(task, TEST_SEED_OFFSET + seed + k, difficulty, options, "test", k) for k in range(n_test)]}
    rows = {split: generate(jobs, workers, split, rl_rows) for split, jobs in splits.items()}
    config = {"task": task, "n": n, "n_test": n_test, "difficulty": difficulty, "options": options, "seed": seed,
              "test_seed_offset": TEST_SEED_OFFSET}
    for layout, features, columns in (("verl", VERL_FEATURES, VERL_COLUMNS), ("trl", TRL_FEATURES, TRL_COLUMNS)):
        data = {split: datasets.Dataset.from_list([r[layout] for r in split_rows], features=features)
                for split, split_rows in rows.items() if split_rows}  # --n-test 0: no test split
        export(data, out / layout, config, f"tirlab {task} RL prompts ({layout})", columns)
        view([out / layout], limit=VIEWER_ROWS)
    return {"samples": n + n_test, "total_s": time.perf_counter() - started}


def build(task: str, n: int, n_test: int, out: Path, difficulty: str, options: dict, workers: int,
          forms: tuple[str, ...], name: str, seed: int = 0) -> dict:
    started = time.perf_counter()
    train = generate([(task, seed + k, difficulty, options) for k in range(n)], workers, "train")
    test = generate([(task, TEST_SEED_OFFSET + seed + k, difficulty, options) for k in range(n_test)], workers, "test")
    generated = time.perf_counter() - started
    config = {"task": task, "n": n, "n_test": n_test, "difficulty": difficulty, "options": options, "seed": seed,
              "test_seed_offset": TEST_SEED_OFFSET, "forms": list(forms),
              "subsets": "the first N rows of train are the N-sample subset (seeds seed..seed+N-1)"}
    for form in forms:
        splits = {split: to_dataset(rows[form] for rows in split_rows)  # --n-test 0: no test split
                  for split, split_rows in (("train", train), ("test", test)) if split_rows}
        export(splits, out / form, config, f"{name} ({form})")
        (out / form / GENERATION_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        view([out / form], limit=VIEWER_ROWS)
    return {"samples": n + n_test, "generate_s": generated, "total_s": time.perf_counter() - started}


def task_options(parser: argparse.ArgumentParser, pairs: list[str]) -> dict:
    """`--option KEY=VALUE` pairs; a value that reads as JSON (1, true, [3, 4]) is taken as such."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            parser.error(f"--option takes KEY=VALUE, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options


def main(argv: list[str] | None = None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    pilot = sub.add_parser("pilot", help="TIR-Bench's pilot: rotated OCR, 15k train (1k/5k/10k prefixes) + test")
    pilot.add_argument("--n", type=int, default=max(PILOT_SIZES))
    pilot.add_argument("--render", default="realistic", choices=RENDERS,
                       help="realistic (real models) or aligned: one word on the token grid of a toy model trained "
                            "from scratch (runtime.tiny_model.build_toy_model); see data_gen/tasks/rotated_ocr.py")
    sft = sub.add_parser("sft", help="SFT data for one task")
    sft.add_argument("--task", required=True)
    sft.add_argument("--n", type=int, required=True)
    sft.add_argument("--forms", nargs="+", default=list(FORMS), choices=FORMS)
    rl = sub.add_parser("rl", help="RL prompts for one task, in verl's and TRL's layouts")
    rl.add_argument("--task", required=True)
    rl.add_argument("--n", type=int, required=True)
    for p in (sft, rl):
        p.add_argument("--difficulty", default="medium", choices=DIFFICULTIES)
        p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                       help="a task option, e.g. angles=any (rotated_ocr) or base=1 (jigsaw); repeatable")
    for p in (pilot, sft, rl):
        p.add_argument("--out", type=Path, required=True)
        p.add_argument("--n-test", type=int, default=500)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--workers", type=int, default=multiprocessing.cpu_count())
    publish = sub.add_parser("push", help="publish an export to a Hub dataset repo (needs HF_TOKEN) or a local folder")
    publish.add_argument("export", type=Path, help="an export folder, e.g. data/pilot/agentic")
    publish.add_argument("destination", help="user/name on the Hub, or a folder path starting with /, ., ~ or file://")
    publish.add_argument("--token", help="a Hub token (default: $HF_TOKEN)")
    publish.add_argument("--public", action="store_true", help="make a new Hub repo public (default private)")
    sheet = sub.add_parser("sheet", help="a contact-sheet PNG of audited samples of every task")
    sheet.add_argument("--out", type=Path, required=True)
    sheet.add_argument("--per-task", type=int, default=4)
    args = parser.parse_args(argv)
    if args.command == "push":
        try:
            print(f"pushed {args.export} to {push(args.export, args.destination, args.token, not args.public)}")
        except ValueError as err:
            parser.error(str(err))
        return
    if args.command == "sheet":
        print(f"contact sheet written to {contact_sheet(args.out, args.per_task)}")
        return
    if args.n < 1 or args.n_test < 0:
        parser.error("--n must be at least 1 and --n-test at least 0")
    options = {}
    if args.command in ("sft", "rl"):
        options = task_options(parser, args.option)
        try:
            get_task(args.task).generate(args.seed, args.difficulty, **options)
        except ValueError as err:  # a bad task or parameter: say so before starting workers
            parser.error(str(err))
        except TypeError:
            parser.error(f"task {args.task!r} takes no option(s) {sorted(options)}; see its module docstring")
    if args.command == "rl":
        result = build_rl(args.task, args.n, args.n_test, args.out, args.difficulty, options, args.workers,
                          args.seed)
        print(f"{result['samples']:,} RL prompts audited and exported to {args.out} in {result['total_s']:.1f} s")
        return
    if args.command == "pilot":
        result = build("rotated_ocr", args.n, args.n_test, args.out, "medium",
                       {"angles": "quarter", "render": args.render}, args.workers, FORMS,
                       "tirlab rotated-OCR pilot" + ("" if args.render == "realistic" else f" ({args.render})"),
                       args.seed)
    else:
        result = build(args.task, args.n, args.n_test, args.out, args.difficulty, options, args.workers,
                       tuple(args.forms), f"tirlab {args.task}", args.seed)
    print(f"{result['samples']:,} samples audited and exported to {args.out} in {result['total_s']:.1f} s "
          f"(generation and audit {result['generate_s']:.1f} s)")


if __name__ == "__main__":
    sys.exit(cli.run(main))
