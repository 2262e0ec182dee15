"""TIR-Bench's figures drawn from records alone: Figure 1 (accuracy per task, the paper's Table 2 row for the model
hatched beside ours) and Figure 3 (accuracy per study cell, one series per model of a merged report)."""


import numpy as np

from eval.benchmarks.papers import paper_table
from eval.benchmarks.tir_bench import figures
from eval.benchmarks.tir_bench.data import PAPER, TASKS
from eval.benchmarks.tir_bench.function_calling import TRACKS, VARIANTS

QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"


def heights(ax, label: str) -> list[float]:
    (container,) = [c for c in ax.containers if c.get_label() == label]
    return [bar.get_height() for bar in container]


def test_figure1_puts_the_papers_row_for_the_model_beside_ours(tmp_path):
    records = [{"id": f"{task}-{k}", "category": task, "mode": mode, "score": float(k == 0), "model": QWEN}
               for task in TASKS for k in range(2) for mode in ("tools", "no_tools")]
    assert figures.draw(records, {"model": QWEN}, tmp_path) == [(figures.FIGURE1[1], figures.FIGURE1[0])]
    assert (tmp_path / figures.FIGURE1[0]).stat().st_size > 10_000
    ax = figures.figure1(records, {"model": QWEN}, tmp_path / "again.png").axes[0]
    assert ax.get_ylabel() == "accuracy (%)" and [t.get_text() for t in ax.get_xticklabels()][:4] == [
        "All", "Color", "Pro.", "OCR"]
    assert heights(ax, "Qwen2.5-VL-7B-Instruct, with tools") == [50.0] * 14
    paper = paper_table(PAPER, "Table 2")["rows"]
    qwen = next(row["values"] for row in paper if row["model"] == "Qwen2.5-VL-7B")
    assert heights(ax, "paper: Qwen2.5-VL-7B (without tools)") == [qwen[k] for k in ("all", *TASKS)]
    other = [{**r, "model": "my/model"} for r in records]  # a model the paper does not have: ours only
    ax = figures.figure1(other, {"model": "my/model"}, tmp_path / "other.png").axes[0]
    assert [c.get_label() for c in ax.containers] == ["model, with tools", "model, without tools"]


def test_figure3_draws_each_cell_per_model_of_a_merged_report(tmp_path):
    records = [{"id": f"1@{t}/{v}", "category": "rotation_game", "mode": "tools", "variant": f"{t}/{v}",
                "score": float(t == "function"), "model": model, "tool_calls": 1}
               for t in TRACKS for v in VARIANTS for model in ("org/a", "org/b")]
    records.append({"id": "2@code/hint", "category": "rotation_game", "mode": "tools", "variant": "function_calling",
                    "score": None, "model": "org/a", "stop_reason": "skipped"})  # a skipped row: its id names its cell
    assert figures.draw(records, {}, tmp_path) == [(figures.FIGURE3[1], figures.FIGURE3[0])]
    ax = figures.figure3(records, tmp_path / "again.png").axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == figures.CELL_LABELS and ax.get_ylabel() == "accuracy (%)"
    assert heights(ax, "b") == [100.0] * 3 + [0.0] * 3
    assert np.allclose(heights(ax, "a"), [100.0] * 3 + [0.0] * 3)
    assert [c.get_label() for c in ax.containers] == ["a", "b"]  # the paper gives no numbers: ours only
