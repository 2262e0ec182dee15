import json
import re
from dataclasses import replace

import numpy as np
import pytest

from data_gen.make import TEST_SEED_OFFSET
from data_gen.tasks import TASKS
from eval.scorers import get_scorer
from eval.suites import FollowUp
from eval.suites.jsonl import jsonl_suite, write_jsonl_suite
from eval.suites.synthetic import SEED_OFFSET, synthetic_suite


def test_synthetic_suite_covers_every_task_with_held_out_seeds():
    tasks = list(synthetic_suite(per_task=2, difficulty="easy"))
    assert len(tasks) == 2 * len(TASKS) and {t.category for t in tasks} == set(TASKS)
    assert len({t.id for t in tasks}) == len(tasks)
    assert all(t.meta["seed"] >= SEED_OFFSET > TEST_SEED_OFFSET + 1_000_000 for t in tasks)
    assert all(get_scorer(t.scorer)(f"<answer>{t.answer}</answer>", t.answer) == 1.0 for t in tasks)
    assert all(t.reference_calls >= 1 and t.images[0].dtype == np.uint8 for t in tasks)
    again = list(synthetic_suite(per_task=2, difficulty="easy"))
    assert [t.images[0].tobytes() for t in again] == [t.images[0].tobytes() for t in tasks]
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        list(synthetic_suite(tasks=["nope"]))


def test_jsonl_round_trip(tmp_path):
    tasks = list(synthetic_suite(tasks=["rotated_ocr", "maze"], per_task=2, difficulty="easy"))
    tasks[0] = replace(tasks[0], follow_ups=(FollowUp("And now this one?", (tasks[1].images[0],)),))
    loaded = list(jsonl_suite(write_jsonl_suite(tasks, tmp_path / "suite.jsonl")))
    assert [t.id for t in loaded] == [t.id for t in tasks]
    for a, b in zip(tasks, loaded):
        assert (a.question, a.answer, a.scorer, a.category, a.toolset, a.reference_calls, a.meta) == \
               (b.question, b.answer, b.scorer, b.category, b.toolset, b.reference_calls, b.meta)
        assert all(np.array_equal(x, y) for x, y in zip(a.images, b.images))
    assert loaded[0].follow_ups[0].text == "And now this one?"
    assert np.array_equal(loaded[0].follow_ups[0].images[0], tasks[1].images[0])
    assert len(list((tmp_path / "images").iterdir())) == 4  # the follow-up's image is stored once


@pytest.mark.parametrize("line, message", [
    ("{not json", "is not valid JSON"),
    ('{"id": "a", "question": "q", "images": []}', "missing ['answer']"),
    ('{"id": "a", "question": "q", "images": [], "answer": "x", "scorrer": "numeric"}', "unknown ['scorrer']"),
    ('{"id": "a", "question": "q", "images": [], "answer": "x", "scorer": "fuzzy"}', "unknown scorer 'fuzzy'"),
    ('{"id": "a", "question": "q", "images": ["gone.png"], "answer": "x"}', "image 'gone.png' not found"),
    ('{"id": "a", "question": "q", "images": "pic.png", "answer": "x"}', "must be a list of file paths"),
    ('{"id": "a", "question": "q", "images": [], "answer": 3}', "'answer' must be a string"),
    ('{"id": "a", "question": "q", "images": [], "answer": "x", "reference_calls": -1}', "non-negative"),
    ('[1, 2]', "must be a JSON object"),
])
def test_jsonl_errors_name_the_line_and_the_field(tmp_path, line, message):
    path = tmp_path / "suite.jsonl"
    path.write_text('{"id": "ok", "question": "q", "images": [], "answer": "x"}\n\n' + line + "\n")
    with pytest.raises(ValueError, match=f"suite.jsonl:3: .*{re.escape(message)}"):
        list(jsonl_suite(path))


def test_jsonl_refuses_repeated_ids(tmp_path):
    path = tmp_path / "suite.jsonl"
    row = json.dumps({"id": "a", "question": "q", "images": [], "answer": "x"})
    path.write_text(f"{row}\n{row}\n")
    with pytest.raises(ValueError, match="suite.jsonl:2: repeats the id 'a'"):
        list(jsonl_suite(path))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        list(jsonl_suite(tmp_path / "nope.jsonl"))
