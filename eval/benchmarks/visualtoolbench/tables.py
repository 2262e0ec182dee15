"""VisualToolBench's tables in the paper's layout, with the paper's published numbers for the same model beside
ours (`paper_results.json`): Table 3 (APR per domain, single- and multi-turn), Table 5 (single-turn APR per domain,
where the appendix puts its additional models: Thyme-7B, Deepeyes-7B, ...), Table 7 (ARS, Table 3's layout),
Table 8 (tool-call proactivity, success rate and volume), APR / ARS per task category (eval_focus, the paper's
Figure 3), and the ablations: Table 14 (single-turn APR with the general vs the atomic vision tools, App. F.2) and
Figure 7's settings (strong / weak system prompt, no vision tool, no tools), each naming the judge.

The tables read `record["visualtoolbench"]` (its shape is in scoring.py's docstring), `record["mode"]` and
`record["variant"]` (the ablation setting: one row per setting when runs are merged). Every
task is in every denominator: an unscored task counts as failed with score 0, and the notes say how many there
were (the reference drops such tasks, so its own analysis, `scoring.analyze_results`, covers the scored ones).
"""

from __future__ import annotations

from eval.benchmarks.papers import once_per_task, paper_label, paper_rows, table_lines
from eval.benchmarks.visualtoolbench.data import DOMAINS, domain_column
from eval.benchmarks.visualtoolbench.scoring import tool_metrics

PAPER = "eval/benchmarks/visualtoolbench/paper_results.json"
TURNCASES = (("single", "Single-Turn"), ("multi", "Multi-Turn"))
# The settings (the suite's setting_name; the no-tool baseline is a mode): the paper's main one first, then Figure 7's
# in its order, the atomic tools (Table 14), any other combination last.
MAIN = "strong prompt, general vision tool"
NO_TOOLS = "no tools"
ATOMIC = "strong prompt, atomic vision tools"
FIGURE_7 = {MAIN: "strong prompt", "weak prompt, general vision tool": "weak prompt",
            "strong prompt, no vision tool": "no vision tool", NO_TOOLS: "no tools"}
ORDER = (*FIGURE_7, ATOMIC)


def tables(records: list[dict], config: dict) -> list[str]:
    tasks = once_per_task([r for r in records if isinstance(r.get("visualtoolbench"), dict)])
    judge = _judge(tasks, config)
    sections = [_by_domain(tasks, config, judge, "Table 3", "APR (%)", _apr), _single_turn(tasks, config, judge),
                _by_domain(tasks, config, judge, "Table 7", "ARS", _ars),
                _tools(tasks, config, judge), _by_focus(tasks, judge)]
    present = {setting(r) for r in tasks}
    if ATOMIC in present:
        sections.append(_table_14(tasks, config, judge))
    if present - {MAIN}:
        sections.append(_figure_7(tasks, config, judge))
    return sections


def setting(record: dict) -> str:
    """The record's setting: the no-tool baseline, or its run's variant (None: the paper's main setting)."""
    return NO_TOOLS if record.get("mode") == "no_tools" else record.get("variant") or MAIN


def setting_label(name: str) -> str:
    return {MAIN: "this run", NO_TOOLS: "this run, without tools"}.get(name, f"this run: {name}")


def settings(tasks: list[dict]) -> list[tuple[str, list[dict]]]:
    """The records per setting, in ORDER (others after, by name)."""
    groups: dict[str, list[dict]] = {}
    for record in tasks:
        groups.setdefault(setting(record), []).append(record)
    return sorted(groups.items(), key=lambda item: (ORDER.index(item[0]) if item[0] in ORDER else len(ORDER), item[0]))


def _judge(tasks: list[dict], config: dict) -> str:
    names = sorted({str(r["visualtoolbench"].get("judge")) for r in tasks if r["visualtoolbench"].get("judge")})
    return ", ".join(names) or config.get("judge_model") or "none"


def _turn(record: dict) -> str:
    return "multi" if record["visualtoolbench"].get("turncase") == "multi-turn" else "single"


def _domain_column(record: dict) -> str | None:
    return domain_column(record["visualtoolbench"].get("domain"))


def apr(records: list[dict]) -> float | None:
    return 100 * sum(r['visualtoolbench'].get('accuracy') or 0 for r in records) / len(records) if records else None


def _apr(records: list[dict]) -> str | None:
    return f"{100 * sum(r['visualtoolbench'].get('accuracy') or 0 for r in records) / len(records):.2f}" \
        if records else None


def _ars(records: list[dict]) -> str | None:
    return f"{sum(r['visualtoolbench'].get('score') or 0.0 for r in records) / len(records):.4f}" if records else None


def _by_domain(tasks: list[dict], config: dict, judge: str, table: str, metric: str, value) -> str:
    columns = [(turn, column) for turn, _ in TURNCASES for column in DOMAINS]
    rows = []
    for name, group in settings(tasks):
        cells = [[r for r in group if _turn(r) == turn and _domain_column(r) == column] for turn, column in columns]
        rows.append([setting_label(name), value(group), *(value(c) for c in cells)])
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
    for name, group in settings(single):
        rows.append([setting_label(name), _apr(group),
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
    for name, group in settings(tasks):
        if name == NO_TOOLS:
            continue
        cells = [tool_metrics([call_flags(r) for r in group if _turn(r) == turn]) for turn, _ in TURNCASES]
        rows.append([setting_label(name), sum(c["calls"] for c in cells),
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


def call_flags(record: dict) -> list[bool]:
    """The task's calls as validity flags: the failed ones first (only the counts matter)."""
    entry = record["visualtoolbench"]
    calls, failed = entry.get("tool_calls") or 0, entry.get("failed_calls") or 0
    return [False] * failed + [True] * (calls - failed)


def _fraction(value) -> str | None:
    return None if value is None else f"{value:.4f}"


def _by_focus(tasks: list[dict], judge: str) -> str:
    rows = []
    for name, group in settings(tasks):
        for focus in sorted({str(r["visualtoolbench"].get("eval_focus")) for r in group}):
            part = [r for r in group if str(r["visualtoolbench"].get("eval_focus")) == focus]
            rows.append([setting_label(name), focus, _apr(part), _ars(part), len(part),
                         sum(r["visualtoolbench"].get("unscored") is not None for r in part)])
    return "\n".join([f"## VisualToolBench: APR (%) and ARS per task category (judge: {judge})", "",
                      *table_lines(["", "eval_focus", "APR (%)", "ARS", "tasks", "unscored"], rows), "",
                      "The paper's Figure 3 shows APR per task category for its top five models."])


def _table_14(tasks: list[dict], config: dict, judge: str) -> str:
    """Table 14: single-turn APR per domain with the general vision tool and with the atomic ones (the paper ran
    the ablation on single-turn tasks only), our two settings beside the paper's two rows of the model."""
    single = [r for r in tasks if _turn(r) == "single" and setting(r) in (MAIN, ATOMIC)]
    rows = []
    for name, group in settings(single):
        rows.append([setting_label(name), _apr(group), *(_apr([r for r in group if _domain_column(r) == column])
                                                        for column in DOMAINS)])
    for paper in paper_rows(PAPER, "Table 14", config.get("model")):
        rows.append([paper_label(PAPER, "Table 14", paper, config, f"{paper['model']}, {paper['setup']}"),
                     *(_paper_value(paper["values"].get(f"single_{key}"), "Table 14")
                       for key in ("overall", *(c.lower() for c in DOMAINS)))])
    rows.append(["tasks", len(_ids(single)), *(len(_ids([r for r in single if _domain_column(r) == column]))
                                               for column in DOMAINS)])
    header = ["", "Overall", *DOMAINS]
    return "\n".join([f"## VisualToolBench Table 14: single-turn APR (%), general vs atomic vision tools "
                      f"(judge: {judge})", "", *table_lines(header, rows), "",
                      "The paper ran this ablation (App. F.2) on the 603 single-turn tasks only: multi-turn tasks "
                      "are left out here too. General: python_image_processing (model-written code); atomic: the "
                      "ten atomic vision tools in its place (--toolset visualtoolbench). " + _notes(single, judge)])


def _figure_7(tasks: list[dict], config: dict, judge: str) -> str:
    """Figure 7's settings side by side: APR overall and per turn kind, one row per setting; the paper's
    strong-prompt number for the model is its Table 3 row (the main study's setting); the figure's other bars are
    not given as numbers in the text."""
    rows = []
    for name, group in settings(tasks):
        rows.append([setting_label(name), FIGURE_7.get(name, name), _apr(group),
                     *(_apr([r for r in group if _turn(r) == turn]) for turn, _ in TURNCASES), len(_ids(group))])
    for paper in paper_rows(PAPER, "Table 3", config.get("model")):
        rows.append([paper_label(PAPER, "Table 3", paper, config), "strong prompt (Table 3)",
                     _paper_value(paper["values"].get("overall"), "Table 3"), None, None, None])
    return "\n".join([f"## VisualToolBench Figure 7: APR (%) per ablation setting (judge: {judge})", "",
                      *table_lines(["", "setting", "Overall", "Single-Turn", "Multi-Turn", "tasks"], rows), "",
                      "Settings (paper Sec. 3.4): strong system prompt (the main study; default), weak system prompt "
                      "(--prompt_variant weak), no vision tool (--ablation no_vision_tools: python_image_processing "
                      "removed, the other five tools kept), no tools (--tools none). The paper states no number per "
                      "bar in its text: for GPT-5 the weak prompt and no tools cost about 11-14 points; Gemini-2.5-pro "
                      "gains 2.7 points without tools. " + _notes(tasks, judge)])
