"""TIR-Bench's tables in the paper's layout, with the paper's published numbers for the same model beside
ours (`paper_results.json`): Table 2 (accuracy per task and overall) and, for the function-calling study,
Table 3 (mean calls per problem per track and prompt) with the accuracy of each cell (the paper's Figure 3)."""

from __future__ import annotations


from eval.benchmarks.papers import paper_label, paper_rows, paper_table, table_lines
from eval.benchmarks.tir_bench.data import TASKS
from eval.benchmarks.tir_bench.function_calling import TRACKS, VARIANTS, cell_name, record_cell

PAPER = "eval/benchmarks/tir_bench/paper_results.json"
HEADERS = ("All", "Color", "Pro.", "OCR", "SR", "Maze", "Math", "WS", "LL-VQA", "IR", "SD", "JG", "VS", "RG")
MODE_NAMES = {"tools": "with tools", "no_tools": "without tools"}


def sections(records: list[dict], config: dict) -> list[str]:
    studied = [r for r in records if r.get("variant")]
    main = [r for r in records if not r.get("variant")]  # a merged report may hold both
    return ([_table3(studied, config)] if studied else []) + ([_table2(main, config)] if main else [])


def _table2(records: list[dict], config: dict) -> str:
    rows = []
    for mode in ("tools", "no_tools"):
        group = [r for r in records if r["mode"] == mode]
        if group:
            by_task = [accuracy([r for r in group if r["category"] == task]) for task in TASKS]
            rows.append([f"this run, {MODE_NAMES[mode]}", accuracy(group), *by_task])
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
    calls, accuracies, items = ["this run: calls per problem"], ["this run: accuracy (%)"], ["items"]
    for track, variant in cells:
        group = cell_records(records, track, variant)
        calls.append(mean_calls(group))
        accuracies.append(accuracy(group))
        items.append(len(group))
    rows = [calls, accuracies]
    # the paper's rows are proprietary API models: the evaluated model's row where it has one, else all, as context
    own = paper_rows(PAPER, "Table 3", config.get("model"))
    for row in own or paper_table(PAPER, "Table 3")["rows"]:
        label = (paper_label(PAPER, "Table 3", row, config) if own else
                 paper_label(PAPER, "Table 3", row, config, name=f"{row['model']} (another model)", compared=False))
        rows.append([f"{label}: calls per problem",
                     *(row["values"].get(f"{track}_prompt_{VARIANTS.index(variant) + 1}") for track, variant in cells)])
    header = ["", *(f"{'Function' if t == 'function' else 'Write Code'} prompt {VARIANTS.index(v) + 1} ({v})"
                    for t, v in cells)]
    return "\n".join(["## TIR-Bench Table 3: function calling on the rotation game", "",
                      *table_lines(header, [*rows, items]),
                      "", "The paper's rows are calls per problem (its Table 3); their accuracy is its Figure 3, "
                      "drawn without numbers, so no paper accuracy is shown. One run gives every cell (`--study "
                      "function_calling`; `--track` / `--prompt_variant` keep some); `run_vllm.py report RUN ...` "
                      "merges runs of other cells or models. Calls are counted in runs with tools; a skipped row "
                      "counts as wrong with no calls."])


def cell_records(records: list[dict], track: str, variant: str) -> list[dict]:
    """A study cell's records with tools."""
    return [r for r in records if record_cell(r) == cell_name(track, variant) and r["mode"] == "tools"]


def mean_calls(records: list[dict]) -> float | None:
    return round(sum(r.get("tool_calls") or 0 for r in records) / len(records), 2) if records else None


def accuracy(records: list[dict]) -> float | None:
    """Every item in the denominator (an unscored one counts as wrong), as calculate_score.py counts."""
    if not records:
        return None
    return round(100 * sum(r.get("score") or 0.0 for r in records) / len(records), 1)
