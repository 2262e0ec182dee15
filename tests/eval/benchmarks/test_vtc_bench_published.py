"""VTC-Bench's loader on the TSVs published in its GitHub repository (first release, see
data/vtc_bench_published/SOURCE.md), with stand-in images drawn at the paths they name: each track reads the
file its configuration names, no task carries another problem's chain, and the rows are counted against the
paper's item counts."""

import csv
import hashlib
import shutil
from pathlib import Path

import pytest
from PIL import Image

from eval.benchmarks.vtc_bench import data

PUBLISHED = Path(__file__).parent / "data" / "vtc_bench_published"


def _rows(path: Path) -> dict[str, dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return {row["id"]: row for row in csv.DictReader(f, delimiter="\t")}


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("vtc-published")
    for name in (data.QUESTIONS, data.CHAINS):
        shutil.copy(PUBLISHED / name, folder / name)
    image = Image.new("RGB", (4, 3), (90, 20, 200))
    for name in (data.QUESTIONS, data.CHAINS):
        for row in _rows(folder / name).values():
            path = folder / row["image"]
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                image.save(path, format="JPEG")
    return folder


def test_the_committed_files_are_the_published_ones():
    assert {name: hashlib.sha256((PUBLISHED / name).read_bytes()).hexdigest()
            for name in (data.QUESTIONS, data.CHAINS)} == {
        data.QUESTIONS: "0d285c01aea74d1cae646c762ec8369041bfba8c15431d3fdcf474a347fd81ca",
        data.CHAINS: "8138cf8bc32b311cc790a78e5134ed64b06c428c551e8160932d658c8715ff8e"}


def test_the_interface_track_reads_questions_answers_and_chains_from_one_file(published):
    loaded = data.load(str(published), track="interface")
    own = _rows(published / data.CHAINS)
    assert len(loaded.tasks) == 680 and not loaded.skipped and "first release" in loaded.source
    for task in loaded.tasks:
        row = own[task.id]
        assert (task.question, task.answer, task.meta["row"]["model_tools_gt"]) == (
            row["question"], row["answer"], row["model_tools_gt"])
    # the wall question is color_18 in this file, and its chain is its own
    color_18 = next(t for t in loaded.tasks if t.id == "color_18")
    assert "red on the wall" in color_18.question and "Measure Area" in color_18.meta["row"]["model_tools_gt"]
    # 539 rows with options here, 538 in the paper: the count check says so
    assert loaded.counts == ("VTC-Bench: differs from the paper's 680 items: answer type multiple choice: 539 here, "
                             "538 in the paper; answer type open: 141 here, 142 in the paper")


def test_the_code_track_takes_a_chain_only_from_a_row_of_the_same_problem(published):
    loaded = data.load(str(published), track="code")
    chains = _rows(published / data.CHAINS)
    assert len(loaded.tasks) == 680 and not loaded.skipped
    chained = [t for t in loaded.tasks if "no_chain" not in t.meta]
    for task in chained:  # every chain taken is the one of the same question, answer and image
        other = chains[task.id]
        image = task.images.sources[0].relative_to(published).as_posix()
        assert (task.question.split(), task.answer.strip(), image) == (
            other["question"].split(), other["answer"].strip(), other["image"])
        assert task.meta["row"]["model_tools_gt"] == other["model_tools_gt"]
    chainless = {t.id: t.meta["no_chain"] for t in loaded.tasks if "no_chain" in t.meta}
    assert len(chained) == 469 and len(chainless) == 211
    assert "color_18" in chainless and "another question, answer, A, B, C, D" in chainless["color_18"]
    assert chainless["counting_85"] == "VTC-Bench_GTToolChain.tsv has no row 'counting_85'"
    assert sum("has no row" in reason for reason in chainless.values()) == 21
    assert all(t.reference_calls is None and t.meta["row"]["model_tools_gt"] is None
               for t in loaded.tasks if t.id in chainless)
    assert loaded.counts == ("VTC-Bench: differs from the paper's 680 items: answer type open: 144 here, 142 in the "
                             "paper; answer type multiple choice: 536 here, 538 in the paper")


def test_a_local_subset_says_it_is_one(published, tmp_path):
    lines = (published / data.CHAINS).read_bytes().split(b"\r\n")
    shutil.copytree(published / "images", tmp_path / "images")
    (tmp_path / data.CHAINS).write_bytes(b"\r\n".join(lines[:41]))  # the header and 40 attention rows
    loaded = data.load(str(tmp_path))
    assert len(loaded.tasks) == 40 and loaded.counts.startswith("VTC-Bench: a subset, 40 rows of the paper's 680")
    with pytest.raises(FileNotFoundError, match="no VTC-Bench.tsv, the file the code track reads"):
        data.load(str(tmp_path), track="code")


def test_a_chain_prompt_skips_the_tasks_without_their_own_chain(published, capsys):
    from eval.benchmarks.vtc_bench import VtcBench
    from eval.config import EvalConfig

    suite = VtcBench.from_config(EvalConfig(suite="vtc_bench", data_dir=str(published), track="code",
                                            prompt_variant="strong_chain", judge_model="none"))
    assert len(suite.tasks) == 469 and len(suite.skipped) == 211
    reasons = {s.id: s.reason for s in suite.skipped}
    assert reasons["color_18"].startswith("no ground-truth chain for the strong_chain prompt: "
                                          "VTC-Bench_GTToolChain.tsv line ")
    assert capsys.readouterr().out.startswith("VTC-Bench: differs from the paper's 680 items")
    assert suite.describe()["counts"].startswith("VTC-Bench: differs")
