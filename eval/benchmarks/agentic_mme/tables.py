"""Agentic-MME's tables: the paper's Table 3 and Table 6 with the paper's numbers for the same model beside ours
(`paper_results.json`), then, per mode, the report of the benchmark's evaluator (eval_runs_search.py's OVERALL
MODEL SCORES, LEVEL-WISE BREAKDOWN and OVERTHINK ANALYSIS, with analyze_v.py's V_tool and V_true), all computed by
scoring.py's `summarize`, `v_checkpoint_stats` and `overthink_analysis` on the records, and the judge named.

Then, where the records hold the paper's ablations (section 3.3; `--ablation`), Table 4 (tool availability:
Perception-only is the no-tool run, Full the plain run) and Table 5 (oracle guidance), one row per setting and mode,
beside the paper's rows; and the paper's figures as PNGs (`figures`): accuracy per level, S / V_tool / V_true per
level and Figure 3(d)'s checkpoints and tool calls per task per level, the paper's points beside ours.

Modes are the paper's: Gen (code, `--track gen`), Atm (atomic tools, `--track atm`) and Base (no tools). A record
the evaluator could not score (a skipped row, a failed episode, a task its evaluator crashes on) counts as the
evaluator counts a run that never finished: a wrong answer, S = V = 0. S, V and V_true are left unscored in a
mode where any judge request had no judge.
"""

from __future__ import annotations

from pathlib import Path

from eval.benchmarks import figures as charts
from eval.benchmarks.agentic_mme import scoring
from eval.benchmarks.agentic_mme.data import LEVELS
from eval.benchmarks.papers import once_per_task, paper_label, paper_rows, paper_table, table_lines

PAPER = "eval/benchmarks/agentic_mme/paper_results.json"
MODES = {"gen": "Gen", "atm": "Atm"}
ORDER = ("Base", "Gen", "Atm")


# the ablations' rows (the suite's --ablation values), in the paper's order and with its names
TABLE4 = {"image_only": "Image-only", "search_only": "Search-only"}
TABLE5 = {"visual_cues": "+ Visual Cues", "stepwise_guidance": "+ Stepwise Guidance"}


def sections(records: list[dict], config: dict) -> list[str]:
    groups = _groups(records)
    plain = [(mode, group) for (mode, ablation), group in groups if ablation is None]
    ablations = {ablation for _, ablation in dict(groups)}
    return [_table3(plain, config), _table6(plain, config),
            *([_ablation_table("Table 4", groups, config)] if ablations & set(TABLE4) else []),
            *([_ablation_table("Table 5", groups, config)] if ablations & set(TABLE5) else []),
            *(_evaluator_report(_name(mode, ablation), group, config) for (mode, ablation), group in groups
              if mode != "Base")]


def _setting(record: dict) -> tuple[str, str | None]:
    """The record's mode (Base, Gen, Atm) and ablation, from its variant (`atm`, `gen-image_only`, ...)."""
    track, _, ablation = (record.get("variant") or "atm").partition("-")
    return ("Base" if record["mode"] == "no_tools" else MODES.get(track, "Atm")), ablation or None


def _name(mode: str, ablation: str | None) -> str:
    return f"{mode}, {TABLE4.get(ablation) or TABLE5.get(ablation) or ablation}" if ablation else mode


def _groups(records: list[dict]) -> list[tuple[tuple[str, str | None], list[dict]]]:
    groups: dict[tuple[str, str | None], list[dict]] = {}
    for record in once_per_task(records):  # Base: one no-tools record per task, whichever runs were merged
        groups.setdefault(_setting(record), []).append(record)
    order = [None, *TABLE4, *TABLE5]
    return sorted(groups.items(), key=lambda item: (ORDER.index(item[0][0]), order.index(item[0][1])
                                                    if item[0][1] in order else len(order)))


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


def _ablation_table(table: str, groups, config: dict) -> str:
    """Table 4 or 5: Acc overall and per level, one row per setting and mode, then the paper's rows (those of the
    run's model, else all of them, marked as another model)."""
    named = TABLE4 if table == "Table 4" else TABLE5
    by_setting = dict(groups)
    rows, settings = [], set()
    if table == "Table 4" and ("Base", None) in by_setting:
        rows.append(_acc_row("this run: Perception-only (no tools)", by_setting[("Base", None)]))
        settings.add("Perception-only")
    for mode in ("Gen", "Atm"):
        present = [(ablation, by_setting.get((mode, ablation))) for ablation in [None, *named]]
        if not any(group for ablation, group in present if ablation is not None):
            continue
        for ablation, group in present:
            name = named.get(ablation) or ("Full" if table == "Table 4" else "Full (baseline)")
            if group:
                rows.append(_acc_row(f"this run: {mode} {name}", group))
                settings.add(named.get(ablation) or "Full")
    same = paper_rows(PAPER, table, config.get("model"))
    for paper in same or paper_table(PAPER, table)["rows"]:
        label = f"{paper['model']} {paper['setting']}" + ("" if same else " (another model)")
        rows.append([paper_label(PAPER, table, paper, config, label, compared=bool(same) and paper["setting"] in
                                 settings), *(paper["values"].get(c) for c in ("acc", "l1_acc", "l2_acc", "l3_acc"))])
    if table == "Table 4":
        title, note = "Tool availability analysis (Acc, %)", (
            "Perception-only: the no-tool run (--tools none); Image-only: the runner without search "
            "(--ablation image_only, the runners' own switch); Search-only: the search tools alone (--ablation "
            "search_only, Atm; tirlab's construction: the code has no such switch, and the Atm system prompt, which "
            "names the image tools, is kept as it is); Full: the plain run.")
    else:
        title, note = "Oracle guidance study (Acc, %)", (
            "+ Visual Cues: the task's ground-truth intermediate images (image_cause/) beside its input "
            "(--ablation visual_cues); + Stepwise Guidance: also its checkpoints' descriptions, answer words masked "
            "(--ablation stepwise_guidance). The wording is tirlab's: the paper prints none.")
    return "\n".join([f"## Agentic-MME {table}: {title}", "",
                      *table_lines(["Setting", "Overall", "L1", "L2", "L3"], rows), "",
                      note + " The paper does not say which mode its rows ran in; it ran them with greedy decoding."])


def _acc_row(label: str, group: list[dict]) -> list:
    scores = Scores(group)
    return [label, *(scores.get(level, "Acc") for level in ("Overall", *LEVELS))]


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


def figures(records: list[dict], config: dict, folder: Path) -> list[tuple[str, str]]:
    """The paper's level plots from the records, one series per mode and setting of the run, the paper's points
    for the same model (and the human reference) beside them: accuracy per level (Table 3), S / V_tool / V_true
    per level (Table 3), checkpoints and tool calls per task per level (Figure 3(d), the human trajectories'; with
    the run's own calls), and Overthink per level (the paper gives only its overall OT, Table 6); the ablations
    (--ablation) appear in the accuracy plot, the process plots show the plain modes. Figure 4's
    failure modes are a manual classification of failed trajectories, which records cannot reproduce."""
    groups = [(_name(mode, ablation), Scores(group), ablation) for (mode, ablation), group in _groups(records)]
    # the process plots compare the plain modes with Table 3 and 6; the ablations' accuracy is in the first plot
    tool_groups = [(name, scores, ablation) for name, scores, ablation in groups
                   if ablation is None and not name.startswith("Base")]
    model = config.get("model")
    table3 = paper_rows(PAPER, "Table 3", model)
    human = [row for row in paper_table(PAPER, "Table 3")["rows"] if row["model"] == "Human"]
    drawn = []

    path = folder / "agentic_mme_level_accuracy.png"
    charts.lines(path, "Agentic-MME: accuracy per level (Table 3)", list(LEVELS),
                 {f"this run: {name}": [scores.get(level, "Acc") for level in LEVELS] for name, scores, _ in groups},
                 {("Human" if row in human else f"{row['model']} {row['setting']}"):
                  [row["values"].get(f"l{k}_acc") for k in (1, 2, 3)]
                  for row in [*human, *(r for r in table3 if r not in human)]},
                 xlabel="level", ylabel="accuracy (%)", ylim=(0, 105))
    drawn.append(("Accuracy per level (Table 3)", path.name))

    if tool_groups:
        labels = [f"{level} {metric}" for level in LEVELS for metric in ("S", "V_tool", "V_true")]
        keys = {"S": "s", "V_tool": "vtool", "V_true": "vtrue"}
        path = folder / "agentic_mme_level_process.png"
        charts.bars(path, "Agentic-MME: process scores per level (Table 3)", labels,
                    {f"this run: {name}": [scores.get(label.split()[0], label.split()[1]) for label in labels]
                     for name, scores, _ in tool_groups},
                    {f"{row['model']} {row['setting']}": [row["values"].get(f"l{label[1]}_{keys[label.split()[1]]}")
                                                          for label in labels]
                     for row in table3 if row["setting"] != "Base"},
                    ylabel="checkpoints passed (%)")
        drawn.append(("S, V_tool and V_true per level (Table 3)", path.name))

    path = folder / "agentic_mme_level_density.png"
    density = {"checkpoints per task (these tasks)": _per_level(records, "checkpoints"),
               "human tool calls per task (these tasks)": _per_level(records, "reference_calls"),
               **{f"tool calls per task (this run: {name})": [scores.get(level, "Calls") for level in LEVELS]
                  for name, scores, _ in tool_groups}}
    published = {row["setting"]: row["values"] for row in paper_table(PAPER, "Table 2")["rows"]}
    charts.bars(path, "Agentic-MME: checkpoints and tool calls per task (Figure 3(d))", list(LEVELS), density,
                {"checkpoints per task": [published[level]["checkpoints"] for level in LEVELS],
                 "human tool calls per task": [published[level]["tool_calls"] for level in LEVELS]},
                ylabel="per task", ylim=None)
    drawn.append(("Checkpoints and tool calls per task per level (Figure 3(d))", path.name))

    if tool_groups:
        path = folder / "agentic_mme_level_overthink.png"
        table6 = paper_rows(PAPER, "Table 6", model)
        charts.lines(path, "Agentic-MME: Overthink per level (the paper's is overall, Table 6)",
                     [*LEVELS, "Overall"],
                     {f"this run: {name}": [scores.get(level, "OT") for level in (*LEVELS, "Overall")]
                      for name, scores, _ in tool_groups},
                     {f"{row['model']} {row['setting']}": [None, None, None, row["values"]["overthink"]]
                      for row in table6},
                     xlabel="level", ylabel="OT = max(0, C_agent - C_human) / (C_human + 1)")
        drawn.append(("Overthink per level (Table 6's OT)", path.name))
    return drawn


def _per_level(records: list[dict], field: str) -> list[float | None]:
    """The mean of a task field per level, each task once (a merged report may hold it in several modes)."""
    tasks = {(r["id"], r.get("category")): r.get(field) for r in records if r.get(field) is not None}
    means = []
    for level in LEVELS:
        values = [value for (_, category), value in tasks.items() if category == level]
        means.append(round(sum(values) / len(values), 2) if values else None)
    return means
