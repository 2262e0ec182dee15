"""TIR-Bench's loader on a fixture in the published layout (TIR-Bench.json + data.zip): every task loads, the
zip is unpacked once, every bad row is skipped with a reason naming the file, the row and the field, a row whose
fields disagree is flagged, and every load is compared with the paper's Table 1 counts."""

import json
import shutil

import numpy as np
import pytest

from eval.benchmarks.tir_bench import data
from eval.benchmarks.tir_bench.fixture import write_fixture


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("tir") / "TIR-Bench", per_task=1)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRLAB_CACHE", str(tmp_path / "cache"))


def test_every_task_loads_from_the_published_layout(fixture):
    tasks, skipped, source, counts, flagged = data.load(str(fixture))
    assert skipped == [] and flagged == [] and str(fixture) in source
    assert counts.startswith("TIR-Bench: a subset, 13 rows of the paper's 1215 items")
    assert sorted(t.category for t in tasks) == sorted(data.TASKS)
    for task in tasks:
        images = list(task.images)
        assert all(i.dtype == np.uint8 and i.ndim == 3 and i.shape[2] == 3 for i in images)
        assert len(images) == (2 if task.category == "spot_difference" else 1)
        assert task.question == task.meta["row"]["prompt"] and task.scorer == data.SCORER
    jigsaw = next(t for t in tasks if t.category == "jigsaw")
    assert jigsaw.meta["row"]["meta_data"]["difficulty"] >= 3
    assert any(isinstance(t.meta["row"]["answer"], int) for t in tasks)  # kept as published; the task's is str


def test_an_unzipped_copy_loads_the_same(fixture, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(fixture, copy)
    data.load(str(copy))  # unpacks data.zip into the cache
    unpacked = next((tmp_path / "cache" / "datasets").iterdir())
    shutil.move(str(unpacked / "data"), copy / "data")
    (copy / data.IMAGES).unlink()
    tasks, skipped, *_ = data.load(str(copy))
    assert len(tasks) == 13 and not skipped


def test_bad_rows_are_skipped_with_what_is_wrong(fixture, tmp_path):
    copy = tmp_path / "bad"
    shutil.copytree(fixture, copy)
    rows = json.loads((copy / data.ANNOTATIONS).read_text())
    rows[0]["task"] = "origami"
    del rows[1]["prompt"]
    rows[2]["image_1"] = "data/nowhere.png"
    rows[3]["answer"] = None
    rows[4]["id"] = rows[5]["id"]
    rows.append("not a row")
    (copy / data.ANNOTATIONS).write_text(json.dumps(rows))
    tasks, skipped, *_ = data.load(str(copy))
    reasons = [s.reason for s in skipped]
    assert len(tasks) + len(skipped) == len(rows)
    assert "row 0: field 'task': unknown task 'origami'" in reasons[0]
    assert "row 1: field 'prompt'" in reasons[1]
    assert "row 2: field 'image_1': image data/nowhere.png not found" in reasons[2]
    assert "row 3: field 'answer'" in reasons[3]
    assert any("repeats id" in r for r in reasons) and "must be a JSON object" in reasons[-1]
    assert all(r.startswith("TIR-Bench.json: row ") for r in reasons)


def test_unusable_folders_say_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        data.load(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="has no TIR-Bench.json"):
        data.load(str(tmp_path / "empty"))
    (tmp_path / "empty" / data.ANNOTATIONS).write_text("{}")
    with pytest.raises(ValueError, match="must hold a JSON list"):
        data.load(str(tmp_path / "empty"))


def test_the_hub_is_asked_through_huggingface_hub_and_its_failure_is_explained(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="pass --data_dir"):
        data.load(None, revision="main")


def hub_cache(tmp_path, monkeypatch, repo_id: str, files_from,
              commit: str = "0123456789abcdef0123456789abcdef01234567") -> str:
    """A Hugging Face cache holding a snapshot of `repo_id` at `commit` (what `hf download` leaves behind), offline."""
    repo = tmp_path / "hub" / f"datasets--{repo_id.replace('/', '--')}"
    shutil.copytree(files_from, repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    return commit


def test_the_hub_dataset_loads_through_huggingface_hub_at_the_pinned_revision(fixture, tmp_path, monkeypatch):
    hub_cache(tmp_path, monkeypatch, data.HUB_REPO, fixture, commit=data.REVISION)
    tasks, skipped, source, *_ = data.load(None)
    assert len(tasks) == 13 and not skipped and source == f"{data.HUB_REPO}@{data.REVISION}"
    with pytest.raises(FileNotFoundError, match="could not get the dataset"):  # main is not the pinned commit
        data.load(None, revision="0123456789abcdef0123456789abcdef01234567")


def test_a_row_of_an_unknown_task_stays_in_a_run_of_every_task_and_ids_stay_unique(fixture, tmp_path):
    from eval.benchmarks.data import keep, wanted

    copy = tmp_path / "odd"
    shutil.copytree(fixture, copy)
    rows = json.loads((copy / data.ANNOTATIONS).read_text())
    rows.append({**rows[0], "task": "origami"})  # same id as row 0, unknown task
    (copy / data.ANNOTATIONS).write_text(json.dumps(rows))
    tasks, skipped, *_ = data.load(str(copy))
    assert [s.id for s in skipped] == [f"{rows[0]['id']}#13"]  # row 0's id is taken by its task
    kept, kept_skipped = keep(tasks, skipped, wanted([], data.TASKS, "task"), data.TASKS)
    assert len(kept) == 13 and kept_skipped == skipped
    assert keep(tasks, skipped, wanted(["maze"], data.TASKS, "task"), data.TASKS)[1] == []


def test_rows_the_official_scorer_cannot_credit_are_skipped_and_disagreeing_choices_flagged(fixture, tmp_path):
    copy = tmp_path / "disagree"
    shutil.copytree(fixture, copy)
    rows = json.loads((copy / data.ANNOTATIONS).read_text())
    jigsaw = next(k for k, row in enumerate(rows) if row["task"] == "jigsaw")
    rows.append({**rows[jigsaw], "id": "no-grid", "meta_data": {}})
    rows.append({**rows[jigsaw], "id": "short-order", "answer": "1, 2, 3"})
    side = rows[jigsaw]["meta_data"]["difficulty"]
    rows.append({**rows[jigsaw], "id": "float-grid", "meta_data": {"difficulty": float(side)}})  # the scorer reads 3.0
    rows.append({**rows[jigsaw], "id": "half-grid", "meta_data": {"difficulty": side + 0.5}})
    rotation = next(row for row in rows if row["task"] == "rotation_game")
    rows.append({**rotation, "id": "answer-f", "answer": "F"})  # the prompt lists A-D
    (copy / data.ANNOTATIONS).write_text(json.dumps(rows))
    tasks, skipped, _, counts, flagged = data.load(str(copy))
    reasons = {s.id: s.reason for s in skipped}
    assert "field 'meta_data': a jigsaw row needs meta_data.difficulty" in reasons["no-grid"]
    assert "must list" in reasons["short-order"] and "piece numbers" in reasons["short-order"]
    assert flagged == ["answer-f (rotation_game): answer 'F' is not among the options its prompt lists (A, B, C, D)"]
    assert "answer-f" in {t.id for t in tasks} and "float-grid" in {t.id for t in tasks}  # the scorer scores them
    assert "a whole number >= 1" in reasons["half-grid"]
    assert "3 row(s) could not be loaded (no-grid, short-order, half-grid)" in counts


def test_a_full_copy_is_checked_against_table_1_and_differences_name_the_rows(fixture, tmp_path):
    """1,215 rows in Table 1's task counts (the fixture's rows repeated under new ids) match; one row moved to a
    task the paper does not have is named."""
    copy = tmp_path / "full"
    shutil.copytree(fixture, copy)
    template = {row["task"]: row for row in json.loads((copy / data.ANNOTATIONS).read_text())}
    rows = [{**template[task], "id": f"{task}-{k}"} for task, count in data.paper_counts()["task"].items()
            for k in range(count)]
    (copy / data.ANNOTATIONS).write_text(json.dumps(rows))
    assert len(rows) == 1215 and data.load(str(copy)).counts == (
        "TIR-Bench: 1215 rows, as the paper's 1215 items per total, task")
    rows[0] = {**rows[0], "task": "origami"}
    (copy / data.ANNOTATIONS).write_text(json.dumps(rows))
    counts = data.load(str(copy)).counts
    assert counts.startswith("TIR-Bench: differs from the paper's 1215 items")
    assert f"task 'origami', which the paper does not have: 1 row(s) ({rows[0]['id']})" in counts
    assert f"task {rows[0]['id'].split('-')[0]}: " in counts and "1 row(s) could not be loaded" in counts
