"""The paper-layout report sections: this run's numbers per task or category beside the paper's published
numbers for the same model (matched by hub name), computed from records alone."""

from eval.benchmarks.tir_bench import tables as tir_tables
from eval.benchmarks.tir_bench.data import TASKS
from eval.benchmarks.vtc_bench import tables as vtc_tables
from eval.benchmarks.vtc_bench.data import CATEGORIES


def records(categories, mode, score, **extra):
    return [{"id": f"{c}-{k}", "category": c, "mode": mode, "score": score, **extra}
            for c in categories for k in range(2)]


def test_tir_table2_puts_the_papers_row_for_the_model_beside_ours():
    ours = records(TASKS, "no_tools", 1.0) + records(TASKS, "tools", None)
    (table,) = tir_tables.sections(ours, {"model": "Qwen/Qwen2.5-VL-7B-Instruct"})
    assert "| this run, without tools | 100.0 | 100.0 |" in table
    assert "| this run, with tools | 0.0 |" in table  # unscored counts as wrong
    assert "| paper: Qwen2.5-VL-7B | 16.0 | 21.0 | 10.8 | 48.3 |" in table
    (table,) = tir_tables.sections(ours, {"model": "my-org/my-model"})
    assert "paper:" not in table


def test_tir_table3_has_one_cell_per_track_and_prompt():
    ours = [{"id": "1", "category": "rotation_game", "mode": "tools", "score": 1.0, "tool_calls": 3,
             "variant": "function/options"},
            {"id": "2", "category": "rotation_game", "mode": "tools", "score": 0.0, "tool_calls": 1,
             "variant": "function/options"}]
    (table,) = tir_tables.sections(ours, {"model": "reference"})
    assert "| this run: calls per problem | - | - | 2.0 | - | - | - |" in table
    assert "| this run: accuracy (%) | - | - | 50.0 |" in table


def test_vtc_table4_and_table5_with_the_papers_rows():
    chain = {"calls": ["opencv_crop", "opencv_rotate", "opencv_crop"], "effective": ["opencv_crop"]}
    ours = (records(CATEGORIES, "no_tools", 0.0) +
            records(CATEGORIES, "tools", 1.0, variant="interface/strong", chain=chain, reference_calls=5))
    table4, table5 = vtc_tables.sections(ours, {"model": "Qwen/Qwen3-VL-8B-Instruct"})
    assert "| this run: Base | 0.0 | - |" in table4 and "| this run: Inter. | 100.0 | 100.0 |" in table4
    assert "| paper: Qwen3-VL-Instruct 8B Base | 30.74 |" in table4
    assert "Tier 1: perception enhancement" in table4
    assert "| this run: Inter. | 100.0 | 100.0 | 3.0 | 2.0 | 2.0 | 1.0 | 1.0 | 4.0 | 33.33 |" in table5
