"""TIR-Bench's tables in the paper's layout, with the paper's published numbers for the same model beside
ours (`paper_results.json`): Table 2 (accuracy per task and overall) and, for the function-calling study,
Table 3 (mean calls per problem per track and prompt) with the accuracy of each cell (the paper's Figure 3)."""

from __future__ import annotations

from eval.benchmarks.papers import paper_label, paper_rows, table_lines
from eval.benchmarks.tir_bench.data import TASKS
from eval.benchmarks.tir_bench.function_calling import TRACKS, VARIANTS

PAPER = "eval/benchmarks/tir_bench/paper_results.json"
HEADERS = ("All", "Color", "Pro.", "OCR", "SR", "Maze", "Math", "WS", "LL-VQA", "IR", "SD", "JG", "VS", "RG")
MODE_NAMES = {"tools": "with tools", "no_tools": "without tools"}


def sections(records: list[dict], config: dict) -> list[str]:
    studied = [r for r in records if r.get("variant")]
    return ([_table3(studied, config)] if studied else []) + ([_table2(records, config)]
                                                                if len(studied) < len(records) else [])


def _table2(records: list[dict], config: dict) -> str:
    rows = []
    for mode in ("tools", "no_tools"):
        group = [r for r in records if r["mode"] == mode and not r.get("variant")]
        if group:
            by_task = [_accuracy([r for r in group if r["category"] == task]) for task in TASKS]
            rows.append([f"this run, {MODE_NAMES[mode]}", _accuracy(group), *by_task])
    without_tools = any(r["mode"] == "no_tools" for r in records)
    for row in paper_rows(PAPER, "Table 2", config.get("model")):
        # the paper's open-source rows ran without tools: the run's no-tools mode is their like
        compared = config if not (without_tools and row.get("protocol", {}).get("harness") == "no-tools") else {
            **config, "protocol": {**config.get("protocol", {}), "harness": "no-tools"}}
        rows.append([paper_label(PAPER, "Table 2", row, compared), *(row["values"].get(k) for k in ("all", *TASKS))])
    counts = ["items", len({r["id"] for r in records}), *(len({r["id"] for r in records if r["category"] == t})
                                                          for t in TASKS)]
    return "\n".join(["## TIR-Bench Table 2: accuracy (%) per task", "",
                      *table_lines(["", *HEADERS], [*rows, counts]),
                      "", "Unscored items count as wrong, as in `calculate_score.py` (every item is in the "
                      "denominator). Paper rows are shown for the evaluated model where the paper reports it."])


def _table3(records: list[dict], config: dict) -> str:
    cells = [(track, variant) for track in TRACKS for variant in VARIANTS]
    calls, accuracy = ["this run: calls per problem"], ["this run: accuracy (%)"]
    for track, variant in cells:
        group = [r for r in records if r.get("variant") == f"{track}/{variant}" and r["mode"] == "tools"]
        calls.append(round(sum(r.get("tool_calls") or 0 for r in group) / len(group), 2) if group else None)
        accuracy.append(_accuracy(group))
    rows = [calls, accuracy]
    for row in paper_rows(PAPER, "Table 3", config.get("model")):
        rows.append([f"{paper_label(PAPER, 'Table 3', row, config)}: calls per problem",
                     *(row["values"].get(f"{track}_prompt_{VARIANTS.index(variant) + 1}") for track, variant in cells)])
    header = ["", *(f"{'Function' if t == 'function' else 'Write Code'} prompt {VARIANTS.index(v) + 1} ({v})"
                    for t, v in cells)]
    return "\n".join(["## TIR-Bench Table 3: function calling on the rotation game", "",
                      *table_lines(header, rows),
                      "", "Each cell is one run (`--study function_calling --track T --prompt_variant V`); "
                      "`run_vllm.py report RUN ...` puts several runs side by side."])


def _accuracy(records: list[dict]) -> float | None:
    if not records:
        return None
    return round(100 * sum(r.get("score") or 0.0 for r in records) / len(records), 1)
