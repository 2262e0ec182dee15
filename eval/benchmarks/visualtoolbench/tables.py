"""VisualToolBench's tables in the paper's layout, with the paper's published numbers for the same model beside
ours (`paper_results.json`): Table 3 (APR per domain, single- and multi-turn), Table 5 (single-turn APR per domain,
where the appendix puts its additional models: Thyme-7B, Deepeyes-7B, ...), Table 7 (ARS, Table 3's layout),
Table 8 (tool-call proactivity, success rate and volume) and APR / ARS per task category (eval_focus, the paper's
Figure 3), each naming the judge.

The tables read `record["visualtoolbench"]` (its shape is in scoring.py's docstring) and `record["mode"]`. Every
task is in every denominator: an unscored task counts as failed with score 0, and the notes say how many there
were (the reference drops such tasks, so its own analysis, `scoring.analyze_results`, covers the scored ones).
"""

from __future__ import annotations

from eval.benchmarks.papers import paper_label, paper_rows, table_lines
from eval.benchmarks.visualtoolbench.data import DOMAINS, domain_column
from eval.benchmarks.visualtoolbench.scoring import tool_metrics

PAPER = "eval/benchmarks/visualtoolbench/paper_results.json"
TURNCASES = (("single", "Single-Turn"), ("multi", "Multi-Turn"))
MODE_NAMES = {"tools": "this run", "no_tools": "this run, without tools"}


def tables(records: list[dict], config: dict) -> list[str]:
    tasks = [r for r in records if isinstance(r.get("visualtoolbench"), dict)]
    judge = _judge(tasks, config)
    return [_by_domain(tasks, config, judge, "Table 3", "APR (%)", _apr), _single_turn(tasks, config, judge),
            _by_domain(tasks, config, judge, "Table 7", "ARS", _ars),
            _tools(tasks, config, judge), _by_focus(tasks, judge)]


def _judge(tasks: list[dict], config: dict) -> str:
    names = sorted({str(r["visualtoolbench"].get("judge")) for r in tasks if r["visualtoolbench"].get("judge")})
    return ", ".join(names) or config.get("judge_model") or "none"


def _turn(record: dict) -> str:
    return "multi" if record["visualtoolbench"].get("turncase") == "multi-turn" else "single"


def _domain_column(record: dict) -> str | None:
    return domain_column(record["visualtoolbench"].get("domain"))


def _modes(tasks: list[dict]) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for record in tasks:
        groups.setdefault(record.get("mode") or "tools", []).append(record)
    return sorted(groups.items(), key=lambda item: tuple(MODE_NAMES).index(item[0]) if item[0] in MODE_NAMES else 9)


def _apr(records: list[dict]) -> str | None:
    return f"{100 * sum(r['visualtoolbench'].get('accuracy') or 0 for r in records) / len(records):.2f}" \
        if records else None


def _ars(records: list[dict]) -> str | None:
    return f"{sum(r['visualtoolbench'].get('score') or 0.0 for r in records) / len(records):.4f}" if records else None


def _by_domain(tasks: list[dict], config: dict, judge: str, table: str, metric: str, value) -> str:
    columns = [(turn, column) for turn, _ in TURNCASES for column in DOMAINS]
    rows = []
    for mode, group in _modes(tasks):
        cells = [[r for r in group if _turn(r) == turn and _domain_column(r) == column] for turn, column in columns]
        rows.append([MODE_NAMES.get(mode, mode), value(group), *(value(c) for c in cells)])
    for paper in paper_rows(PAPER, table, config.get("model")):
        rows.append([paper_label(PAPER, table, paper, config), *(_paper_value(paper["values"].get(key), table)
                                                   for key in ("overall", *(f"{t}_{c.lower()}" for t, c in columns)))])
    rows.append(["tasks", len(_ids(tasks)), *(len(_ids([r for r in tasks if _turn(r) == t and _domain_column(r) == c]))
                                              for t, c in columns)])
    header = ["", "Overall", *(f"{name} {column}" for turn, name in TURNCASES for column in DOMAINS)]
    return "\n".join([f"## VisualToolBench {table}: {metric} per domain (judge: {judge})", "",
                      *table_lines(header, rows), "", _notes(tasks, judge)])


def _single_turn(tasks: list[dict], config: dict, judge: str) -> str:
    """Table 5: single-turn APR, overall and per domain, the layout the appendix gives its additional models."""
    single = [r for r in tasks if _turn(r) == "single"]
    rows = []
    for mode, group in _modes(single):
        rows.append([MODE_NAMES.get(mode, mode), _apr(group),
                     *(_apr([r for r in group if _domain_column(r) == column]) for column in DOMAINS)])
    for paper in paper_rows(PAPER, "Table 5", config.get("model")):
        rows.append([paper_label(PAPER, "Table 5", paper, config),
                     *(_paper_value(paper["values"].get(f"single_{key}"), "Table 5")
                       for key in ("overall", *(c.lower() for c in DOMAINS)))])
    rows.append(["tasks", len(_ids(single)), *(len(_ids([r for r in single if _domain_column(r) == column]))
                                               for column in DOMAINS)])
    header = ["", "Single-Turn Overall", *(f"Single-Turn {column}" for column in DOMAINS)]
    return "\n".join([f"## VisualToolBench Table 5: single-turn APR (%) per domain (judge: {judge})", "",
                      *table_lines(header, rows), "", _notes(single, judge)])


def _ids(records: list[dict]) -> set:
    return {r.get("id") for r in records}  # a task run with and without tools is one task


def _paper_value(value, table: str) -> str | None:
    if value is None:
        return None
    return f"{value:.4f}" if table == "Table 7" else f"{value:.2f}"


def _notes(tasks: list[dict], judge: str) -> str:
    unscored = sum(r["visualtoolbench"].get("unscored") is not None for r in tasks)
    unjudged = sum(r["visualtoolbench"].get("unjudged") or 0 for r in tasks)
    scorings = sorted({str(r["visualtoolbench"].get("scoring")) for r in tasks})
    rules = sorted({str(r["visualtoolbench"].get("critical")) for r in tasks})
    others = sorted({str(r["visualtoolbench"].get("domain")) for r in tasks if _domain_column(r) is None})
    critical = {"weight": "weight >= 4", "flag": "the data's critical flag"}
    return (f"Judge: {judge}. Scoring: {', '.join(scorings) or '-'}; critical rubrics: "
            f"{', '.join(critical.get(r, r) for r in rules) or '-'}. APR = share of tasks whose critical rubrics are "
            "all met; ARS = mean of met weight / total weight. "
            f"{unscored} of {len(tasks)} episode(s) unscored (counted as failed, score 0), {unjudged} rubric "
            "verdict(s) unjudged."
            + (f" Tasks outside the paper's domains (in Overall only): {', '.join(others)}." if others else ""))


def _tools(tasks: list[dict], config: dict, judge: str) -> str:
    rows = []
    for mode, group in _modes(tasks):
        if mode == "no_tools":
            continue
        cells = [tool_metrics([_calls(r) for r in group if _turn(r) == turn]) for turn, _ in TURNCASES]
        rows.append([MODE_NAMES.get(mode, mode), sum(c["calls"] for c in cells),
                     *(v for c in cells for v in (_fraction(c["proactivity"]), _fraction(c["success_rate"]),
                                                  None if c["volume"] is None else f"{c['volume']:.2f}"))])
    for paper in paper_rows(PAPER, "Table 8", config.get("model")):
        values = paper["values"]
        rows.append([paper_label(PAPER, "Table 8", paper, config), values["total_calls"],
                     *(_fraction(values[f"{t}_{k}"]) if k != "volume" else f"{values[f'{t}_volume']:.2f}"
                       for t, _ in TURNCASES for k in ("proactivity", "success_rate", "volume"))])
    header = ["", "Total #", *(f"{name} {k}" for _, name in TURNCASES for k in ("Proactivity", "Success Rate",
                                                                                   "Volume"))]
    return "\n".join([f"## VisualToolBench Table 8: tool calls (judge: {judge})", "", *table_lines(header, rows), "",
                      "Proactivity: share of tasks with at least one tool call; success rate: calls whose output is "
                      "not an error / calls; volume: calls per task (paper App. B.2.2). A multi-turn task's calls "
                      "are summed over its turns."])


def _calls(record: dict) -> list[bool]:
    """The task's calls as validity flags: the failed ones first (only the counts matter)."""
    entry = record["visualtoolbench"]
    calls, failed = entry.get("tool_calls") or 0, entry.get("failed_calls") or 0
    return [False] * failed + [True] * (calls - failed)


def _fraction(value) -> str | None:
    return None if value is None else f"{value:.4f}"


def _by_focus(tasks: list[dict], judge: str) -> str:
    rows = []
    for mode, group in _modes(tasks):
        for focus in sorted({str(r["visualtoolbench"].get("eval_focus")) for r in group}):
            part = [r for r in group if str(r["visualtoolbench"].get("eval_focus")) == focus]
            rows.append([MODE_NAMES.get(mode, mode), focus, _apr(part), _ars(part), len(part),
                         sum(r["visualtoolbench"].get("unscored") is not None for r in part)])
    return "\n".join([f"## VisualToolBench: APR (%) and ARS per task category (judge: {judge})", "",
                      *table_lines(["", "eval_focus", "APR (%)", "ARS", "tasks", "unscored"], rows), "",
                      "The paper's Figure 3 shows APR per task category for its top five models."])
