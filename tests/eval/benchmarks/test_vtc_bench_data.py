"""VTC-Bench's loader on fixtures in both published layouts (GitHub's TSV with image paths, the hub's with
base64 images): rows become tasks with their options, image size, ground-truth chain and reference calls,
and every bad row is skipped with a reason naming the file, the line and the field."""

import csv
import shutil

import numpy as np
import pytest

from eval.benchmarks.vtc_bench import data
from eval.benchmarks.vtc_bench.fixture import write_fixture


@pytest.fixture(scope="module", params=["paths", "base64"])
def fixture(request, tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp(f"vtc-{request.param}") / "VTC-Bench", images=request.param)


def test_rows_become_tasks_in_both_layouts(fixture):
    tasks, skipped, source, counts = data.load(str(fixture))
    assert skipped == [] and str(fixture) in source and data.CHAINS in source
    assert counts.startswith("VTC-Bench: a subset, 9 rows of the paper's 680 items")
    assert sorted({t.category for t in tasks}) == sorted(data.CATEGORIES)
    for task in tasks:
        (image,) = list(task.images)
        assert image.dtype == np.uint8 and image.shape[2] == 3
        assert task.meta["image_size"] == [image.shape[1], image.shape[0]]
        assert task.toolset == "vtc_bench" and task.scorer == data.SCORER
        assert task.reference_calls and task.meta["row"]["model_tools_gt"]
    choice = [t for t in tasks if t.meta["options"]]
    assert choice and all(set(t.meta["options"]) <= set("ABCDE") for t in choice)
    assert any(t.reference for t in tasks) and any(not t.reference for t in tasks)
    assert all(call["arguments"]["image"].startswith("{workspace}/") for t in tasks for call in t.reference)


def test_bad_rows_are_skipped_with_what_is_wrong(fixture, tmp_path):
    copy = tmp_path / "bad"
    shutil.copytree(fixture, copy)
    path = copy / data.CHAINS  # the file the interface track reads
    limit = csv.field_size_limit(2**31 - 1)  # base64 cells outgrow csv's default
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, delimiter="\t")
            header, rows = reader.fieldnames, list(reader)
    finally:
        csv.field_size_limit(limit)
    rows[0]["category"] = "origami"
    rows[1]["question"] = ""
    rows[2]["image"] = "images/nowhere.jpg"
    rows[3]["id"] = rows[4]["id"]
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, header, delimiter="\t")
        writer.writeheader()
        writer.writerows(rows)
    tasks, skipped, *_ = data.load(str(copy))
    reasons = [s.reason for s in skipped]
    assert len(tasks) + len(skipped) == len(rows)
    assert "line 2: field 'category': unknown category 'origami'" in reasons[0]
    assert "line 3: field 'question': is empty" in reasons[1]
    assert "line 4: field 'image': is neither a file" in reasons[2]
    assert "repeats id" in reasons[3]


def test_a_tsv_without_the_published_columns_is_refused(tmp_path):
    (tmp_path / data.CHAINS).write_text("index\tid\tquestion\n1\ta\tq\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['category', 'image', 'answer'\]"):
        data.load(str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"no VTC-Bench.tsv, the file the code track reads \(TSV files "
                                                r"there: \['VTC-Bench_GTToolChain.tsv'\]\)"):
        data.load(str(tmp_path), track="code")


def test_the_hub_dataset_loads_through_huggingface_hub(tmp_path, monkeypatch):
    from tests.eval.benchmarks.test_tir_bench_data import hub_cache

    published = write_fixture(tmp_path / "published", images="base64")  # the hub's TSV carries base64 images
    commit = hub_cache(tmp_path, monkeypatch, data.HUB_REPO, published)
    tasks, skipped, source, _ = data.load(None, commit)
    assert len(tasks) == 9 and not skipped and source == f"{data.HUB_REPO}@{commit}, {data.CHAINS}"
    # without --revision: the corrected release
    shutil.copytree(published, tmp_path / "hub" / "datasets--zzzhu--VTC-Bench" / "snapshots" / data.HUB_REVISION)
    assert data.load(None).source == f"{data.HUB_REPO}@{data.HUB_REVISION}, {data.CHAINS}"


def test_the_code_track_takes_each_chain_from_the_same_problems_row(fixture, tmp_path):
    copy = tmp_path / "edited"
    shutil.copytree(fixture, copy)
    limit = csv.field_size_limit(2**31 - 1)  # base64 cells outgrow csv's default
    try:
        with open(copy / data.QUESTIONS, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, delimiter="\t")
            header, rows = reader.fieldnames, list(reader)
    finally:
        csv.field_size_limit(limit)
    edited = rows[0]
    edited["answer"] = "B" if edited["answer"] != "B" else "C"  # another answer under the same id
    with open(copy / data.QUESTIONS, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, header, delimiter="\t")
        writer.writeheader()
        writer.writerows(rows)
    tasks = {t.id: t for t in data.load(str(copy), track="code").tasks}
    assert tasks[edited["id"]].meta["no_chain"].startswith(f"{data.CHAINS} line ")
    assert tasks[edited["id"]].meta["no_chain"].endswith(
        "another answer: not the same problem for certain, so its chain is not taken")
    assert tasks[edited["id"]].reference_calls is None
    assert all(t.reference_calls and "no_chain" not in t.meta for i, t in tasks.items() if i != edited["id"])
