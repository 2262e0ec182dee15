"""Agentic-MME's tables in the paper's layout, with the paper's numbers for the same model beside ours
(`paper_results.json`): Table 3 (Acc, S and V overall; Acc, S, V_tool and V_true per level; Gen = code, Track A;
Atm = atomic tools, Track B; Base = without tools) and Table 6 (calls per task and Overthink), with the judge named.

Acc counts every task, an unscored one as wrong (the reference scores a run without an answer as incorrect). S, V,
V_tool and V_true average the tasks that have such checkpoints, as the reference's evaluator does; a task whose
judge did not answer is left out of them and counted in the notes.
"""

from __future__ import annotations

from eval.benchmarks.agentic_mme.data import LEVELS
from eval.benchmarks.papers import paper_rows, table_lines

PAPER = "eval/benchmarks/agentic_mme/paper_results.json"
SETTINGS = {"gen": "Gen", "atm": "Atm"}
TRACK_NAMES = {"Gen": "Gen (code, Track A)", "Atm": "Atm (atomic tools, Track B)", "Base": "Base (no tools)"}
LEVEL_COLUMNS = (("acc", "Acc"), ("s", "S"), ("vtool", "Vto"), ("vtrue", "Vtr"))


def sections(records: list[dict], config: dict) -> list[str]:
    return [_table3(records, config), _table6(records, config)]


def _setting(record: dict) -> str:
    return "Base" if record["mode"] == "no_tools" else SETTINGS.get(record.get("variant") or "atm", "Atm")


def _groups(records: list[dict]) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for record in records:
        groups.setdefault(_setting(record), []).append(record)
    return sorted(groups.items(), key=lambda item: ("Base", "Gen", "Atm").index(item[0]))


def _table3(records: list[dict], config: dict) -> str:
    rows = []
    for setting, group in _groups(records):
        row = [f"this run: {TRACK_NAMES[setting]}", _acc(group), _mean(group, "S"), _mean(group, "V")]
        for level in LEVELS:
            part = [r for r in group if r.get("category") == level]
            row += [_acc(part), _mean(part, "S"), _pooled(part, "V_tool"), _pooled(part, "V_true")]
        rows.append(row)
    for paper in paper_rows(PAPER, "Table 3", config.get("model")):
        values = paper["values"]
        rows.append([f"paper: {paper['model']} {paper['setting']}", values.get("acc"), values.get("s"), values.get("v"),
                     *(values.get(f"l{k}_{c}") for k in (1, 2, 3) for c, _ in LEVEL_COLUMNS)])
    header = ["", "Acc", "S", "V", *(f"L{k} {name}" for k in (1, 2, 3) for _, name in LEVEL_COLUMNS)]
    protocol = config.get("protocol") or {}
    unjudged = sum((r.get("process") or {}).get("unjudged") or 0 for r in records)
    return "\n".join([
        "## Agentic-MME Table 3: accuracy and process scores (%)", "", *table_lines(header, rows), "",
        (f"Judge: {protocol.get('judge') or config.get('judge_model') or 'none'}. Acc counts every task (unscored as "
         "wrong); S (search checkpoints passed) and V (visual checkpoints passed: tool check and visual check) "
         "average the tasks with such checkpoints; V_tool (the required tool used) and V_true (the VLM judge finds "
         "the checkpoint's answer on an image the model made) pool the checkpoints of their kind. Judge requests "
         f"that failed (counted as not passed, as the reference does): {unjudged}.")])


def _table6(records: list[dict], config: dict) -> str:
    rows = []
    for setting, group in _groups(records):
        if setting == "Base":
            continue
        calls = [r["effective_calls"] for r in group if r.get("effective_calls") is not None]
        rows.append([f"this run: {TRACK_NAMES[setting]}", _average(calls), _average(
            [r["overthink"] for r in group if r.get("overthink") is not None]),
            _average([r["reference_calls"] for r in group if r.get("reference_calls") is not None])])
    for paper in paper_rows(PAPER, "Table 6", config.get("model")):
        rows.append([f"paper: {paper['model']} {paper['setting']}", paper["values"]["calls"],
                     paper["values"]["overthink"], None])
    return "\n".join(["## Agentic-MME Table 6: efficiency", "",
                      *table_lines(["", "Calls / task", "Overthink", "Human calls / task"], rows), "",
                      ("Calls: the reference's effective tool calls (Atm: every call run; Gen: search calls and the "
                       "image operations found in the code). Overthink = max(0, C_agent - C_human) / (C_human + 1), "
                       "averaged; the paper's human reference is 2.15 calls per task.")])


def _acc(records: list[dict]) -> float | None:
    return round(100 * sum((r.get("score") or 0.0) >= 0.5 for r in records) / len(records), 1) if records else None


def _mean(records: list[dict], axis: str) -> float | None:
    values = [(r.get("process") or {}).get(axis) for r in records]
    values = [v for v in values if v is not None]
    return round(100 * sum(values) / len(values), 1) if values else None


def _pooled(records: list[dict], kind: str) -> float | None:
    counts = [(r.get("process") or {}).get(kind) or {} for r in records]
    total = sum(c.get("total", 0) for c in counts)
    return round(100 * sum(c.get("passed", 0) for c in counts) / total, 1) if total else None


def _average(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 2) if values else None
