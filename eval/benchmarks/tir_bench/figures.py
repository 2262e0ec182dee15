"""TIR-Bench's figures redrawn from a run's records (PNG files in the run's plots/ folder):

- Figure 1 (the main result): accuracy overall and per task, for each mode and model of the run, beside the paper's
  Table 2 row(s) for the evaluated model (the paper draws these numbers as radar charts, one panel per model group;
  here they are grouped bars on the same axes: task, accuracy).
- Figure 3 (the function-calling study): accuracy of each cell (function or written code, prompts 1-3), one bar per
  model of the run. The paper draws it without numbers in its text, so only ours are drawn; its Table 3 (calls per
  problem) is in the report's tables with the paper's numbers.
"""

from __future__ import annotations

from pathlib import Path

from eval.benchmarks import figures as charts
from eval.benchmarks.papers import paper_rows
from eval.benchmarks.tir_bench.data import TASKS
from eval.benchmarks.tir_bench.function_calling import TRACKS, VARIANTS
from eval.benchmarks.tir_bench.tables import HEADERS, MODE_NAMES, PAPER, accuracy, cell_records

FIGURE1 = ("tir_figure1.png", "Figure 1: accuracy per task")
FIGURE3 = ("tir_figure3.png", "Figure 3: function calling vs. writing code (rotation game; the paper gives no numbers)")
CELL_LABELS = [f"{'Function' if track == 'function' else 'Write code'} P{VARIANTS.index(variant) + 1}"
               for track in TRACKS for variant in VARIANTS]


def draw(records: list[dict], config: dict, folder: Path) -> list[tuple[str, str]]:
    """The figures the records can show, written into `folder`: (title, file name) of each."""
    folder = Path(folder)
    studied = [r for r in records if r.get("variant")]
    main = [r for r in records if not r.get("variant")]
    drawn = []
    if main:
        figure1(main, config, folder / FIGURE1[0])
        drawn.append((FIGURE1[1], FIGURE1[0]))
    if studied:
        figure3(studied, folder / FIGURE3[0])
        drawn.append((FIGURE3[1], FIGURE3[0]))
    return drawn


def figure1(records: list[dict], config: dict, path: Path):
    ours = {}
    for model in _models(records):
        for mode in ("tools", "no_tools"):
            group = [r for r in records if r["mode"] == mode and _model(r) == model]
            if group:
                name = f"{Path(model).name}, {MODE_NAMES[mode]}" if model else MODE_NAMES[mode]
                ours[name] = [accuracy(group), *(accuracy([r for r in group if r["category"] == t]) for t in TASKS)]
    paper = {_paper_name(row): [row["values"].get(k) for k in ("all", *TASKS)]
             for model in _models(records) for row in paper_rows(PAPER, "Table 2", model or config.get("model"))}
    return charts.bars(path, FIGURE1[1], list(HEADERS), ours, paper, ylabel="accuracy (%)")


def figure3(records: list[dict], path: Path):
    ours = {}
    for model in _models(records):
        mine = [r for r in records if _model(r) == model]
        ours[Path(model).name if model else "this run"] = [
            accuracy(cell_records(mine, track, variant)) for track in TRACKS for variant in VARIANTS]
    return charts.bars(path, "Figure 3: rotation game, function vs. code", CELL_LABELS, ours, None,
                       ylabel="accuracy (%)")


def _paper_name(row: dict) -> str:
    """A Table 2 row's model, with the setting it ran in where the paper states it (its open models: no tools)."""
    harness = (row.get("protocol") or {}).get("harness")
    return row["model"] + (" (without tools)" if harness == "no-tools" else f" ({harness})" if harness else "")


def _model(record: dict) -> str:
    return record.get("model") or ""


def _models(records: list[dict]) -> list[str]:
    return sorted({_model(r) for r in records})

