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
    like = {"model": "Qwen/Qwen2.5-VL-7B-Instruct", "temperature": 0.0, "max_tokens": 2048, "judge_model": "gpt-4.1",
            "protocol": {"harness": "hermes-default-tools"}}
    (table,) = tir_tables.sections(ours, like)
    assert "| this run, without tools | 100.0 | 100.0 |" in table
    assert "| this run, with tools | 0.0 |" in table  # unscored counts as wrong
    assert "| paper: Qwen2.5-VL-7B | 16.0 | 21.0 | 10.8 | 48.3 |" in table  # its no-tools row: like for like
    (table,) = tir_tables.sections(records(TASKS, "tools", 1.0), {**like, "max_tokens": 0, "judge_model": "none"})
    assert ("| paper: Qwen2.5-VL-7B (not like for like: harness hermes-default-tools here, no-tools in the paper; "
            "max_tokens no cap here, 2048 in the paper; judge none here, gpt-4.1 in the paper) | 16.0 |") in table
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


def test_a_report_merging_the_main_run_and_the_study_counts_each_in_its_own_table():
    main = records(TASKS, "tools", 1.0)
    study = [{"id": f"rotation_game-0@{cell}", "category": "rotation_game", "mode": "tools", "score": 0.0,
              "tool_calls": 2, "variant": cell} for cell in ("function/plain", "code/hint")]
    table3, table2 = tir_tables.sections(main + study, {"model": "reference"})
    assert f"| items | {len(main)} | 2 | 2 |" in table2  # the study's episodes are not Table 2 items
    assert "| this run, with tools | 100.0 |" in table2
    assert "| this run: calls per problem | 2.0 | - | - | - | 2.0 | - |" in table3


def test_vtc_table4_and_table5_with_the_papers_rows():
    chain = {"calls": ["opencv_crop", "opencv_rotate", "opencv_crop"], "effective": ["opencv_crop"]}
    ours = (records(CATEGORIES, "no_tools", 0.0) +
            records(CATEGORIES, "tools", 1.0, variant="interface/strong", chain=chain, reference_calls=5))
    like = {"model": "Qwen/Qwen3-VL-8B-Instruct", "temperature": 0.7, "top_p": 0.8, "top_k": 20,
            "presence_penalty": 1.5, "max_tokens": 16384, "judge_model": "gpt-4o",
            "protocol": {"harness": "qwen-agent"}}
    table4, table5 = vtc_tables.sections(ours, like)
    assert "| this run: Base | 0.0 | - |" in table4 and "| this run: Inter. | 100.0 | 100.0 |" in table4
    assert "| paper: Qwen3-VL-Instruct 8B Base | 30.74 |" in table4
    table4, _ = vtc_tables.sections(ours, {**like, "temperature": 0.0, "judge_model": "none"})
    assert ("| paper: Qwen3-VL-Instruct 8B Base (not like for like: temperature 0.0 here, 0.7 in the paper; judge none "
            "here, gpt-4o in the paper) | 30.74 |") in table4
    assert "Tier 1: perception enhancement" in table4
    assert "| this run: Inter. | 100.0 | 100.0 | 3.0 | 2.0 | 2.0 | 1.0 | 1.0 | 4.0 | 33.33 |" in table5
