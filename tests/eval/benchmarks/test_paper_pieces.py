"""The pieces every benchmark's paper comparison uses: the item-count check a loader prints, and the charts its
figures are redrawn with."""

from pathlib import Path

import pytest
from PIL import Image

from eval.benchmarks import figures
from eval.benchmarks.data import count_check
from eval.suites import Skipped

EXPECTED = {"total": {"all": 5}, "category": {"ocr": 3, "maze": 2}}


def _rows(*groups: str) -> list[tuple[str, dict]]:
    return [(f"{group}_{k}", {"category": group}) for k, group in enumerate(groups)]


def test_counts_that_match_the_paper_say_so():
    line = count_check("Bench", EXPECTED, _rows("ocr", "ocr", "ocr", "maze", "maze"))
    assert line == "Bench: 5 rows, as the paper's 5 items per total, category"


def test_fewer_rows_than_the_paper_are_a_subset():
    line = count_check("Bench", EXPECTED, _rows("ocr", "maze"))
    assert line.startswith("Bench: a subset, 2 rows of the paper's 5 items")
    assert "category ocr: 1 here, 3 in the paper" in line and "category maze: 1 here, 2 in the paper" in line


def test_differences_name_the_rows_the_paper_does_not_have_and_the_skipped_ones():
    rows = _rows("ocr", "ocr", "ocr", "maze", "maze", "maze", "jigsaw")
    line = count_check("Bench", EXPECTED, rows, [Skipped("maze_5", "maze", "image missing")])
    assert line.startswith("Bench: differs from the paper's 5 items: ")
    assert "total all: 7 here, 5 in the paper" in line and "category maze: 3 here, 2 in the paper" in line
    assert "category 'jigsaw', which the paper does not have: 1 row(s) (jigsaw_6)" in line
    assert line.endswith("1 row(s) could not be loaded (maze_5)")


def test_a_surplus_in_one_group_and_a_gap_in_another_is_a_difference_not_a_subset():
    line = count_check("Bench", EXPECTED, _rows("ocr", "ocr", "ocr", "ocr", "maze"))
    assert "differs" in line and "category ocr: 4 here, 3 in the paper" in line
    assert "category maze: 1 here, 2 in the paper" in line


def test_long_lists_of_rows_are_cut_with_a_count():
    line = count_check("Bench", {"category": {"ocr": 1}}, _rows(*["x"] * 12))
    assert "12 row(s) (x_0, x_1, x_2, x_3, x_4, x_5, x_6, x_7 and 4 more)" in line


@pytest.mark.parametrize("draw", [
    lambda path: figures.bars(path, "APR per category", ["OCR", "Color"], {"this run": [40.0, None]},
                              {"Qwen2.5-VL-7B": [35.5, 20.0]}),
    lambda path: figures.lines(path, "APR per level", ["L1", "L2", "L3"], {"this run": [50.0, None, 10.0]},
                               {"Gemini 3 Pro": [70.1, 52.0, 33.3]}, xlabel="level"),
    lambda path: figures.scatter(path, "APR against tool use", [
        ("proactivity", "proactivity", "APR (%)", {"this run": (0.5, 20.0), "no tools": (None, 10.0)},
         {"GPT-5": (0.9, 23.9)}),
        ("volume", "calls per task", "APR (%)", {"this run": (2.0, 20.0)}, {"GPT-5": (8.5, 23.9)})]),
], ids=["bars", "lines", "scatter"])
def test_charts_write_a_png_with_labelled_axes_and_the_papers_series(tmp_path: Path, draw):
    figure = draw(tmp_path / "chart.png")
    with Image.open(tmp_path / "chart.png") as image:
        assert image.format == "PNG" and image.width > 300 and image.height > 200
    axes = figure.axes[0]
    assert axes.get_title() and axes.get_ylabel()
    legend = axes.get_legend()
    labels = [t.get_text() for t in legend.get_texts()] if legend else \
        [t.get_text() for t in axes.texts]  # the scatter names its points instead of a legend
    assert any(label.startswith("paper: ") for label in labels) and any(label == "this run" for label in labels)
    assert "no tools" not in labels  # a point without both coordinates is left out, not drawn at 0
