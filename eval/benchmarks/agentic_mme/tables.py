"""Agentic-MME's tables: the paper's Table 3 and Table 6 with the paper's numbers for the same model beside ours
(`paper_results.json`), then, per mode, the report of the benchmark's evaluator (eval_runs_search.py's OVERALL
MODEL SCORES, LEVEL-WISE BREAKDOWN and OVERTHINK ANALYSIS, with analyze_v.py's V_tool and V_true), all computed by
scoring.py's `summarize`, `v_checkpoint_stats` and `overthink_analysis` on the records, and the judge named.

Modes are the paper's: Gen (code, `--track gen`), Atm (atomic tools, `--track atm`) and Base (no tools). A record
the evaluator could not score (a skipped row, a failed episode, a task its evaluator crashes on) counts as the
evaluator counts a run that never finished: a wrong answer, S = V = 0. S, V and V_true are left unscored in a
mode where any judge request had no judge.
"""

from __future__ import annotations

from eval.benchmarks.agentic_mme import scoring
from eval.benchmarks.agentic_mme.data import LEVELS
from eval.benchmarks.papers import paper_label, paper_rows, table_lines

PAPER = "eval/benchmarks/agentic_mme/paper_results.json"
MODES = {"gen": "Gen", "atm": "Atm"}
ORDER = ("Base", "Gen", "Atm")


def sections(records: list[dict], config: dict) -> list[str]:
    groups = _groups(records)
    return [_table3(groups, config), _table6(groups, config),
            *(_evaluator_report(mode, group, config) for mode, group in groups if mode != "Base")]


def _mode(record: dict) -> str:
    return "Base" if record["mode"] == "no_tools" else MODES.get(record.get("variant") or "atm", "Atm")


def _groups(records: list[dict]) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for record in records:
        groups.setdefault(_mode(record), []).append(record)
    return sorted(groups.items(), key=lambda item: ORDER.index(item[0]))


def _results(records: list[dict]) -> list[dict]:
    """The records as the evaluator's per-run results: eval_process's evaluation with the final answer's verdict
    (the run's headline score, official or strict), its level and its tool_use_list."""
    results = []
    for record in records:
        evaluation = record.get("eval") or scoring.incomplete_run_eval()
        correct = (record.get("score") or 0.0) >= 0.5
        results.append({"eval": {**evaluation, "final_answer_accuracy": {"correct": correct}},
                        "level": LEVELS.index(record["category"]) + 1 if record.get("category") in LEVELS else None,
                        "tool_use_list": record.get("tool_use_list") or [], "task_cfg": None})
    return results


class Scores:
    """A mode's scores, overall and per level, as the evaluator reports them (percent where the paper gives
    percent)."""

    def __init__(self, records: list[dict]):
        results = _results(records)
        self.records, self.summary = records, scoring.summarize(results)
        self.v_stats = scoring.v_checkpoint_stats(results)
        self.no_judge = sum((r.get("process") or {}).get("missing") or 0 for r in records)
        self.unjudged = sum((r.get("process") or {}).get("unjudged") or 0 for r in records)
        self.unscored = sum(r.get("eval") is None for r in records if r["mode"] != "no_tools")
        self.by_level = {"Overall": records, **{level: [r for r in records if r.get("category") == level]
                                                for level in LEVELS}}

    def get(self, level: str, name: str):
        part = self.summary.get("overall" if level == "Overall" else level)
        if not part:
            return None
        judged = name not in ("S", "V", "V_true") or not self.no_judge
        if name == "Acc":
            return round(100 * part["final_answer_accuracy"], 1)
        if name in ("S", "V"):
            cases = part[f"total_{name.lower()}_cases"]
            return round(100 * part[f"avg_{name}"], 1) if cases and judged else None
        if name in ("V_tool", "V_true"):
            counts = self.v_stats[level]["tool_use" if name == "V_tool" else "visual_check"]
            return round(100 * counts["passed"] / counts["total"], 1) if counts["total"] and judged else None
        if name == "Calls":
            return part["avg_tool_calls_per_case"]
        if name == "Overthink":
            return scoring.overthink_analysis(_results(self.by_level[level]))["avg_overthink_ratio"]
        if name == "OT":
            values = [r["overthink"] for r in self.by_level[level] if r.get("overthink") is not None]
            return round(sum(values) / len(values), 2) if values else None
        return part[name]


def _judge_line(config: dict, scores: list[Scores]) -> str:
    protocol = config.get("protocol") or {}
    judge = config.get("judge_model") if config.get("judge_model") not in (None, "none") else None
    return (f"Judge: {judge or 'none'} ({protocol.get('judge') or 'S and V_true need a judge'}). Judge requests "
            f"that failed or gave no readable verdict after their attempts (counted as not passed, as the "
            f"evaluator counts its judge errors): {sum(s.unjudged for s in scores)}; without a judge: "
            f"{sum(s.no_judge for s in scores)}; records the evaluator could not score (counted as runs that never "
            f"finished): {sum(s.unscored for s in scores)}.")


def _table3(groups, config: dict) -> str:
    rows, computed = [], []
    for mode, group in groups:
        scores = Scores(group)
        computed.append(scores)
        process = mode != "Base"  # the no-tool baseline has accuracy only, as in the paper
        row = [f"this run: {mode}", *(scores.get("Overall", n) if process or n == "Acc" else None
                                      for n in ("Acc", "S", "V"))]
        for level in LEVELS:
            row += [scores.get(level, n) if process or n == "Acc" else None for n in ("Acc", "S", "V_tool", "V_true")]
        rows.append(row)
    for paper in paper_rows(PAPER, "Table 3", config.get("model")):
        values = paper["values"]
        rows.append([paper_label(PAPER, "Table 3", paper, config, f"{paper['model']} {paper['setting']}",
                                 compared=paper["setting"] in dict(groups)),
                     values.get("acc"), values.get("s"), values.get("v"),
                     *(values.get(f"l{k}_{c}") for k in (1, 2, 3) for c in ("acc", "s", "vtool", "vtrue"))])
    header = ["Mode", "Acc", "S", "V", *(f"L{k} {n}" for k in (1, 2, 3) for n in ("Acc", "S", "Vto", "Vtr"))]
    return "\n".join([
        "## Agentic-MME Table 3: Comprehensive evaluation results (%)", "", *table_lines(header, rows), "",
        "Acc: final-answer accuracy over every task (eval_runs_search.py's final_answer_accuracy); S and V: the share "
        "of a task's search and visual checkpoints passed, averaged over the tasks that have them (avg_S, avg_V); "
        "Vto and Vtr: the visual checkpoints without and with a visual check passed, pooled (analyze_v.py's "
        "tool_use and visual_check).", "", _judge_line(config, computed)])


def _table6(groups, config: dict) -> str:
    rows = []
    for mode, group in groups:
        if mode == "Base":
            continue
        scores = Scores(group)
        human = [r["reference_calls"] for r in group if r.get("reference_calls") is not None]
        rows.append([f"this run: {mode}", scores.get("Overall", "Calls"), scores.get("Overall", "OT"),
                     scores.get("Overall", "Overthink"), round(sum(human) / len(human), 2) if human else None])
    for paper in paper_rows(PAPER, "Table 6", config.get("model")):
        rows.append([paper_label(PAPER, "Table 6", paper, config, f"{paper['model']} {paper['setting']}",
                                 compared=paper["setting"] in dict(groups)),
                     paper["values"]["calls"],
                     paper["values"]["overthink"], None, 2.15])
    return "\n".join([
        "## Agentic-MME Table 6: Efficiency analysis", "",
        *table_lines(["Mode", "Calls", "OT", "Overthink ratio (evaluator)", "Human calls"], rows), "",
        "Calls: effective tool calls per task (Atm: every call run; Gen: search calls and the image operations "
        "read from the code). OT: the paper's max(0, C_agent - C_human) / (C_human + 1) per task, averaged (the "
        "paper's own OT column matches this formula applied to the averages, with 2.15 human calls, for four of its "
        "seven models). Overthink ratio: what the evaluator reports as Avg Overthink Ratio, the mean of C_agent / "
        "C_human over tasks with a human count above 0."])


def _evaluator_report(mode: str, group: list[dict], config: dict) -> str:
    scores = Scores(group)
    columns = (("Cases", "total_cases"), ("Acc", "Acc"), ("S", "S"), ("V", "V"), ("V_tool", "V_tool"),
               ("V_true", "V_true"), ("Calls", "Calls"), ("Overthink ratio", "Overthink"), ("OT", "OT"),
               ("Pass >= 50%", "cases_pass_50_checkpoints"), ("Pass >= 80%", "cases_pass_80_checkpoints"),
               ("Perfect", "perfect_cases"))
    rows = [[level, *(scores.get(level, key) for _, key in columns)] for level in ("Overall", *LEVELS)
            if scores.summary.get("overall" if level == "Overall" else level)]
    return "\n".join([
        f"## Agentic-MME evaluator report, {mode} mode (eval_runs_search.py and analyze_v.py)", "",
        *table_lines(["Level", *(name for name, _ in columns)], rows), "",
        "OVERALL MODEL SCORES and LEVEL-WISE BREAKDOWN as the evaluator prints them (Acc, S, V in %; Pass >= 50% / "
        "80%: tasks that pass that share of their checkpoints; Perfect: tasks with PQS 1), with analyze_v.py's "
        "V_tool and V_true and the OVERTHINK ANALYSIS's ratio.", "", _judge_line(config, [scores])])
