"""data_gen throughput: samples/s of every task at every difficulty, and the pilot against its budget.

    python data_gen/bench.py                  # every task x difficulty, markdown table
    python data_gen/bench.py --pilot          # also build the whole pilot dataset once and time it

Per task and difficulty it times, in this process, `generate` and the audit (the reference replayed
through the runtime and `tools/`) of --n seeds, then the whole SFT pipeline (generate, audit, both
forms, PNG encoding) of the same seeds on --workers processes: the rate a `make.py sft` run gets before
export. `--pilot` runs `make.py pilot` (15k direct + 15k agentic + 500 test each) into a temporary
folder and prints its wall time against its 3-minute budget.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data_gen.make import DIFFICULTIES, PILOT_SIZES, build, sft_rows  # noqa: E402
from data_gen.sample import audit  # noqa: E402
from data_gen.tasks import TASKS  # noqa: E402

PILOT_BUDGET_S = 180.0


def time_task(name: str, difficulty: str, n: int, workers: int) -> dict:
    task = TASKS[name]
    audit(task.generate(n, difficulty), task.check)  # warm-up (a seed outside the timed ones): fonts, word list, tool kernels
    started = time.perf_counter()
    samples = [task.generate(seed, difficulty) for seed in range(n)]
    generated = time.perf_counter()
    for sample in samples:
        audit(sample, task.check)
    audited = time.perf_counter()
    jobs = [(name, seed, difficulty, {}) for seed in range(n)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        piped = time.perf_counter()
        pool.map(sft_rows, jobs, chunksize=max(1, n // (4 * workers)))
        pipeline = time.perf_counter() - piped
    return {"generate_ms": 1000 * (generated - started) / n, "audit_ms": 1000 * (audited - generated) / n,
            "pipeline_per_s": n / pipeline, "calls": sum(len(s.calls) for s in samples) / n,
            "pixels": sum(s.image.shape[0] * s.image.shape[1] for s in samples) / n}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100, help="seeds per task and difficulty")
    parser.add_argument("--workers", type=int, default=multiprocessing.cpu_count())
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--pilot", action="store_true", help="also build and time the whole pilot dataset")
    args = parser.parse_args(argv)
    print(f"data_gen throughput: {args.n} seeds per row, pipeline on {args.workers} processes\n")
    print("| task | difficulty | mean image | reference calls | generate ms | audit ms | pipeline samples/s |")
    print("|---|---|---|---|---|---|---|")
    for name in args.tasks:
        for difficulty in DIFFICULTIES:
            r = time_task(name, difficulty, args.n, args.workers)
            print(f"| {name} | {difficulty} | {r['pixels'] / 1e6:.2f} MP | {r['calls']:.1f} | {r['generate_ms']:.1f} "
                  f"| {r['audit_ms']:.1f} | {r['pipeline_per_s']:.0f} |", flush=True)
    if args.pilot:
        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            build("rotated_ocr", max(PILOT_SIZES), 500, Path(out), "medium", {"angles": "quarter"}, args.workers,
                  ("direct", "agentic"), "tirlab rotated-OCR pilot")
            took = time.perf_counter() - started
        verdict = "PASS" if took <= PILOT_BUDGET_S else "FAIL"
        print(f"\npilot (15k direct + 15k agentic + 2 x 500 test, generated, audited, exported): {took:.1f} s; "
              f"budget {PILOT_BUDGET_S:.0f} s; budget / measured = {PILOT_BUDGET_S / took:.2f}x ({verdict})")


if __name__ == "__main__":
    main()
