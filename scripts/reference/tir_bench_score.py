"""TIR-Bench scoring reference vectors: tests/eval/benchmarks/data/tir_bench_score_vectors.json.

Each vector is one item in the benchmark's result format with the `true_false` that the repository's own
`calculate_score.py` writes into it, or (`raises`) the type of the exception the script stops with.

How the reference runs. `calculate_score.py`, `tools.py` and `demo_prompts.py` come unchanged from the pinned
commit; nothing is stubbed: the scratch venv holds the scoring libraries (Levenshtein, math-verify and theirs)
and what the modules import at the top without using it for scoring (openai, matplotlib, pillow, numpy, tqdm).
`calculate_score.main()` is called in this process with the argv of
`python calculate_score.py --lists <file> --data-dir <dir>`, its printing swallowed:

- each item alone in a file of its own (`{"0": item}`): a run that raises records the exception's type, one
  that finishes records the `true_false` read back from the file it rewrote (JSON keeps 1 and 1.0 apart);
- then every item that did not raise, all in one run over one file per type of task name (the script sorts a
  file's task names at the end, which fails on mixed types). Both runs must agree, or the driver stops.

The items (and their ids) are read from the committed file; everything the script decides is recomputed.

    .venv/bin/python scripts/reference/tir_bench_score.py --source PATH/TO/TIR-Bench
    .venv/bin/python scripts/reference/tir_bench_score.py --source ... --check
"""

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

import common

REPO_URL = "https://github.com/agents-x-project/TIR-Bench"
COMMIT = "f79c7562b59e4f8142b0437fc725eb3ee1aec76c"
# the libraries the scores depend on, recorded in the file's "reference"."packages"
SCORING_LIBRARIES = {"Levenshtein": "0.27.5", "RapidFuzz": "3.14.6", "math-verify": "0.9.0",
                     "latex2sympy2_extended": "1.11.0", "sympy": "1.14.0", "antlr4-python3-runtime": "4.13.2"}
# imported at the top of calculate_score.py and tools.py, unused by scoring
IMPORTED_ONLY = {"openai": "3.54.0", "matplotlib": "3.11.2", "pillow": "13.0.0", "numpy": "2.3.5", "tqdm": "4.70.1"}
REQUIREMENTS = [f"{name}=={pinned}" for name, pinned in {**SCORING_LIBRARIES, **IMPORTED_ONLY}.items()]
VECTORS = "tests/eval/benchmarks/data/tir_bench_score_vectors.json"
OUTPUTS = [VECTORS]


def run_calculate_score(calculate_score, data_dir: Path, files: list[str]) -> None:
    """`python calculate_score.py --lists <files> --data-dir <data_dir>`, in this process."""
    sys.argv = ["calculate_score.py", "--lists", ",".join(files), "--data-dir", str(data_dir)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        calculate_score.main()


def score_alone(calculate_score, data_dir: Path, item: dict) -> dict:
    """The item's outcome when it is the only one in its file: {"true_false": ...} or {"raises": ...}."""
    path = data_dir / "item.json"
    path.write_text(json.dumps({"0": item}, ensure_ascii=False), encoding="utf-8")
    try:
        run_calculate_score(calculate_score, data_dir, [path.name])
    except Exception as error:
        return {"raises": type(error).__name__}
    return {"true_false": json.loads(path.read_text(encoding="utf-8"))["0"]["true_false"]}


def score_together(calculate_score, data_dir: Path, items: dict[str, dict]) -> dict[str, object]:
    """Every item's `true_false` from one run over all of them, in one file per type of task name."""
    files: dict[str, dict] = {}
    for key, item in items.items():
        task = item["task"] if "task" in item else item["category"]
        files.setdefault(f"{type(task).__name__}.json", {})[key] = item
    for name, data in files.items():
        (data_dir / name).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    run_calculate_score(calculate_score, data_dir, list(files))
    scored = {}
    for name in files:
        for key, item in json.loads((data_dir / name).read_text(encoding="utf-8")).items():
            scored[key] = item["true_false"]
    return scored


def drive(tree: str, out_dir: str) -> None:
    committed = json.loads((common.ROOT / VECTORS).read_text(encoding="utf-8"))
    sys.path.insert(0, tree)
    import calculate_score

    vectors = []
    with tempfile.TemporaryDirectory() as data_dir:
        data_dir = Path(data_dir)
        for vector in committed["vectors"]:
            vectors.append({"id": vector["id"], "item": vector["item"],
                            **score_alone(calculate_score, data_dir, vector["item"])})
        scorable = {str(index): vector["item"] for index, vector in enumerate(vectors) if "true_false" in vector}
        together = score_together(calculate_score, data_dir, scorable)
    for key, true_false in together.items():
        alone = vectors[int(key)]["true_false"]
        if (true_false, type(true_false)) != (alone, type(alone)):
            sys.exit(f"{vectors[int(key)]['id']}: {alone!r} alone but {true_false!r} together")

    environment = common.versions(list(SCORING_LIBRARIES))
    reference = {**committed["reference"], "python": environment.pop("python"), "packages": environment}
    header = common.header(__file__, REPO_URL, COMMIT, [*SCORING_LIBRARIES, *IMPORTED_ONLY])
    common.write_json(out_dir, VECTORS, {"generator": header, "reference": reference, "vectors": vectors})


if __name__ == "__main__":
    if sys.argv[1:2] == ["--driver"]:
        drive(*sys.argv[2:4])
    else:
        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)
