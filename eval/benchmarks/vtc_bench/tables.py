"""VTC-Bench's tables in the paper's layout, with the paper's published numbers for the same model beside ours
(`paper_results.json`): Table 4 (APR per category, overall and per tier; Base = without tools, Inter. or Code
= the run's track) and Table 5 (tool-call rate, calls, unique tools and chain-length MAE of all calls and of
the effective chain, Eff_tool)."""

from __future__ import annotations

from eval.benchmarks.papers import paper_label, paper_rows, table_lines
from eval.benchmarks.vtc_bench.data import TIERS

PAPER = "eval/benchmarks/vtc_bench/paper_results.json"
COLUMNS = (("ocr", "OCR"), ("attention", "Attn."), ("perceptual", "Rest."), ("chart", "Chart"), ("measure", "Meas."),
           ("counting", "Count."), ("math", "Math"), ("spatial", "Spat."), ("color", "Color"))
SETTINGS = {"interface": "Inter.", "code": "Code"}


def sections(records: list[dict], config: dict) -> list[str]:
    return [_table4(records, config), _table5(records, config)]


def _setting(record: dict) -> str:
    if record["mode"] == "no_tools":
        return "Base"
    return SETTINGS.get((record.get("variant") or "interface/").split("/")[0], "Inter.")


def _table4(records: list[dict], config: dict) -> str:
    groups: dict[str, list[dict]] = {}
    for record in records:
        groups.setdefault(_setting(record), []).append(record)
    base = _apr(groups.get("Base", []))
    rows = []
    for setting, group in sorted(groups.items(), key=lambda item: item[0] != "Base"):
        overall = _apr(group)
        delta = None if setting == "Base" or base is None or overall is None else round(overall - base, 2)
        rows.append([f"this run: {setting}", overall, delta,
                     *(_apr([r for r in group if r["category"] == c]) for c, _ in COLUMNS)])
    for row in paper_rows(PAPER, "Table 4", config.get("model")):
        values = row["values"]
        name = f"{row['model']} {row.get('size') or ''} {row.get('setting', '')}".replace("  ", " ")
        rows.append([paper_label(PAPER, "Table 4", row, config, name, compared=row.get("setting") in groups),
                     values.get("overall"),
                     values.get("delta"), *(values.get(c) for c, _ in COLUMNS)])
    tier_rows = [[f"this run: {setting}", *(_apr([r for r in group if r["category"] in categories])
                                            for categories in TIERS.values())]
                 for setting, group in sorted(groups.items(), key=lambda item: item[0] != "Base")]
    return "\n".join(["## VTC-Bench Table 4: APR (%) per category", "",
                      *table_lines(["", "Overall", "Delta", *(name for _, name in COLUMNS)], rows),
                      "", "### APR (%) per tier", "",
                      *table_lines(["", *(f"Tier {k}: {name}" for k, name in enumerate(TIERS, 1))], tier_rows),
                      "", "APR counts every item, unscored ones as failed (the benchmark's judge failures count "
                      "as wrong too)."])


def _table5(records: list[dict], config: dict) -> str:
    rows = []
    for setting in sorted({_setting(r) for r in records if r["mode"] == "tools"}):
        group = [r for r in records if r["mode"] == "tools" and _setting(r) == setting]
        chains = [(r.get("chain") or {"calls": [], "effective": []}, r.get("reference_calls")) for r in group]
        total = sum(len(chain["calls"]) for chain, _ in chains)
        rows.append([f"this run: {setting}", _pct(sum(bool(chain["calls"]) for chain, _ in chains), len(chains)),
                     _apr(group), *_call_stats(chains, "calls"), *_call_stats(chains, "effective"),
                     _pct(sum(len(chain["effective"]) for chain, _ in chains), total)])
    for row in paper_rows(PAPER, "Table 5", config.get("model")):
        values = row["values"]
        inter = any(_setting(r) == "Inter." for r in records if r["mode"] == "tools")  # Table 5's setting
        rows.append([paper_label(PAPER, "Table 5", row, config, compared=inter), *(values.get(k) for k in (
            "tcr", "apr", "all_avg_tools", "all_unique_tools", "all_mae", "effective_avg_tools",
            "effective_unique_tools", "effective_mae", "efficiency"))])
    header = ["", "TCR (%)", "APR (%)", "all: Avg. T.", "all: Uniq. T.", "all: MAE", "effective: Avg. T.",
              "effective: Uniq. T.", "effective: MAE", "Eff. (%)"]
    return "\n".join(["## VTC-Bench Table 5: tool use", "", *table_lines(header, rows),
                      "", "Per item: calls made (L_T), distinct tools among them, |L_G - L_T| against the ground-truth "
                      "chain (items with one); the effective chain is traced back from the last successful call "
                      "through the images each call read. Eff. = sum of effective calls / sum of calls. In the code "
                      "track a call is an executed code cell."])


def _call_stats(chains: list[tuple[dict, int | None]], key: str) -> list:
    if not chains:
        return [None, None, None]
    lengths = [len(chain[key]) for chain, _ in chains]
    unique = [len(set(chain[key])) for chain, _ in chains]
    errors = [abs(reference - len(chain[key])) for chain, reference in chains if reference is not None]
    return [round(sum(lengths) / len(lengths), 2), round(sum(unique) / len(unique), 2),
            round(sum(errors) / len(errors), 2) if errors else None]


def _apr(records: list[dict]) -> float | None:
    return round(100 * sum((r.get("score") or 0.0) >= 0.5 for r in records) / len(records), 2) if records else None


def _pct(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 2) if whole else None
