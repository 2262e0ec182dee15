"""VTC-Bench's tables in the paper's layout, with the paper's published numbers for the same model beside ours
(`paper_results.json`): Table 4 (APR per category, overall and per tier; Base = without tools, Inter. or Code
= the run's track), Table 5 (tool-call rate, calls, unique tools and chain-length MAE of all calls and of
the effective chain, Eff_tool) and, where the runs hold the prompt ablation, Figure 9 (APR under Direct, Weak
Prompt, Strong Prompt and Strong Prompt + GT Tools). Every prompt variant is its own row: the default strong
prompt is the plain setting name, the others say theirs, e.g. "Inter. (weak prompt)"."""

from __future__ import annotations

from eval.benchmarks.papers import once_per_task, paper_label, paper_rows, table_lines
from eval.benchmarks.vtc_bench.data import TIERS

PAPER = "eval/benchmarks/vtc_bench/paper_results.json"
COLUMNS = (("ocr", "OCR"), ("attention", "Attn."), ("perceptual", "Rest."), ("chart", "Chart"), ("measure", "Meas."),
           ("counting", "Count."), ("math", "Math"), ("spatial", "Spat."), ("color", "Color"))
SETTINGS = {"interface": "Inter.", "code": "Code"}
PROMPTS = {"strong": "", "weak": " (weak prompt)", "strong_chain": " (strong + GT chain)",
           "weak_chain": " (weak + GT chain)"}
# Figure 9's four settings, in its order, and the prompt variant each is (Direct: Base, no tools)
FIGURE9 = (("Direct", None), ("Weak Prompt", "weak"), ("Strong Prompt", "strong"),
           ("Strong Prompt + GT Tools", "strong_chain"))


def sections(records: list[dict], config: dict) -> list[str]:
    records = one_baseline(records)
    ablation = any(prompt_of(r) != "strong" for r in records)
    return [_table4(records, config), _table5(records, config), *([figure9_table(records, config)] if ablation else [])]


def track_of(record: dict) -> str:
    return (record.get("variant") or "interface/").split("/")[0]


def prompt_of(record: dict) -> str:
    return (record.get("variant") or "interface/strong").partition("/")[2] or "strong"


def one_baseline(records: list[dict]) -> list[dict]:
    """One no-tools record per task and prompt: the Base runs of both tracks with one prompt are the same protocol."""
    return once_per_task(records, key=lambda record: (record["id"], prompt_of(record)))


def setting_of(record: dict) -> str:
    name = "Base" if record["mode"] == "no_tools" else SETTINGS.get(track_of(record), "Inter.")
    return name + PROMPTS.get(prompt_of(record), f" ({prompt_of(record)})")


def by_setting(records: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for record in records:
        groups.setdefault(setting_of(record), []).append(record)
    return groups


def _base_of(setting: str, groups: dict) -> list[dict]:
    """The Base records a setting's Delta is taken against: Base with the same prompt, else the default's."""
    suffix = setting[setting.index(" ("):] if " (" in setting else ""
    return groups.get(f"Base{suffix}") or groups.get("Base", [])


def _table4(records: list[dict], config: dict) -> str:
    groups = by_setting(records)
    rows = []
    for setting, group in sorted(groups.items(), key=lambda item: (not item[0].startswith("Base"), item[0])):
        overall, base = apr(group), apr(_base_of(setting, groups))
        delta = None if setting.startswith("Base") or base is None or overall is None else round(overall - base, 2)
        rows.append([f"this run: {setting}", overall, delta,
                     *(apr([r for r in group if r["category"] == c]) for c, _ in COLUMNS)])
    for row in paper_rows(PAPER, "Table 4", config.get("model")):
        values = row["values"]
        name = f"{row['model']} {row.get('size') or ''} {row.get('setting', '')}".replace("  ", " ")
        rows.append([paper_label(PAPER, "Table 4", row, config, name, compared=row.get("setting") in groups),
                     values.get("overall"),
                     values.get("delta"), *(values.get(c) for c, _ in COLUMNS)])
    tier_rows = [[f"this run: {setting}", *(apr([r for r in group if r["category"] in categories])
                                            for categories in TIERS.values())]
                 for setting, group in sorted(groups.items(),
                                              key=lambda item: (not item[0].startswith("Base"), item[0]))]
    return "\n".join(["## VTC-Bench Table 4: APR (%) per category", "",
                      *table_lines(["", "Overall", "Delta", *(name for _, name in COLUMNS)], rows),
                      "", "### APR (%) per tier", "",
                      *table_lines(["", *(f"Tier {k}: {name}" for k, name in enumerate(TIERS, 1))], tier_rows),
                      "", "APR counts every item, unscored ones as failed (the benchmark's judge failures count "
                      "as wrong too)."])


def _table5(records: list[dict], config: dict) -> str:
    rows = []
    for setting in sorted({setting_of(r) for r in records if r["mode"] == "tools"}):
        group = [r for r in records if r["mode"] == "tools" and setting_of(r) == setting]
        chains = [(r.get("chain") or {"calls": [], "effective": []}, r.get("reference_calls")) for r in group]
        total = sum(len(chain["calls"]) for chain, _ in chains)
        rows.append([f"this run: {setting}", _pct(sum(bool(chain["calls"]) for chain, _ in chains), len(chains)),
                     apr(group), *_call_stats(chains, "calls"), *_call_stats(chains, "effective"),
                     _pct(sum(len(chain["effective"]) for chain, _ in chains), total)])
    for row in paper_rows(PAPER, "Table 5", config.get("model")):
        values = row["values"]
        inter = any(setting_of(r) == "Inter." for r in records if r["mode"] == "tools")  # Table 5's setting
        rows.append([paper_label(PAPER, "Table 5", row, config, compared=inter), *(values.get(k) for k in (
            "tcr", "apr", "all_avg_tools", "all_unique_tools", "all_mae", "effective_avg_tools",
            "effective_unique_tools", "effective_mae", "efficiency"))])
    chainless = sorted({r["id"] for r in records if r["mode"] == "tools" and r.get("no_chain")})
    header = ["", "TCR (%)", "APR (%)", "all: Avg. T.", "all: Uniq. T.", "all: MAE", "effective: Avg. T.",
              "effective: Uniq. T.", "effective: MAE", "Eff. (%)"]
    return "\n".join(["## VTC-Bench Table 5: tool use", "", *table_lines(header, rows),
                      "", "Per item: calls made (L_T), distinct tools among them, |L_G - L_T| against the ground-truth "
                      "chain (items with one); the effective chain is traced back from the last successful call "
                      "through the images each call read. Eff. = sum of effective calls / sum of calls. In the code "
                      "track a call is an executed code cell.",
                      *([f"{len(chainless)} item(s) have no ground-truth chain of their own and no MAE (the reasons "
                         f"are in the records' `no_chain`): {', '.join(chainless[:10])}"
                         f"{' ...' if len(chainless) > 10 else ''}"] if chainless else [])])


def figure9_table(records: list[dict], config: dict) -> str:
    """APR per Figure 9 setting, one row per tool track of the runs, and the paper's Direct and Strong Prompt
    for the run's model: the figure gives no numbers, but its Direct is Table 4's Base and its Strong Prompt
    (the main evaluation's default) Table 4's row of the track."""
    header = ["", *(name for name, _ in FIGURE9)]
    tracks = sorted({track_of(r) for r in records if r["mode"] == "tools"})
    rows = [[f"this run: {SETTINGS.get(track, track)}", *figure9_values(records, track)] for track in tracks]
    rows += [[paper_label(PAPER, "Table 4", row, config, label), *values]
             for label, row, values in paper_figure9(config.get("model"), tracks)]
    return "\n".join(["## VTC-Bench Figure 9: APR (%) per prompt setting", "", *table_lines(header, rows), "",
                      "Direct = Base (no tools, one reply, the strong prompt); Weak / Strong Prompt = "
                      "`--prompt_variant weak` / `strong`; + GT Tools = `strong_chain` (the task's ground-truth "
                      "chain in the prompt; a task without one is skipped and counts as failed). The paper's Weak "
                      "and + GT Tools bars are not given as numbers."])


def figure9_values(records: list[dict], track: str) -> list[float | None]:
    """This run's APR in Figure 9's four settings for one tool track (None: not run)."""
    values = []
    for _, prompt in FIGURE9:
        if prompt is None:  # Direct: the Base records of the default prompt, whichever track's run made them
            group = [r for r in records if r["mode"] == "no_tools" and prompt_of(r) == "strong"]
        else:
            group = [r for r in records if r["mode"] == "tools" and track_of(r) == track and prompt_of(r) == prompt]
        values.append(apr(group))
    return values


def paper_figure9(model: str | None, tracks: list[str]) -> list[tuple[str, dict, list[float | None]]]:
    """The paper's Figure 9 values for the run's model, per tool track: (label, its Table 4 row of the track,
    [Direct = Table 4's Base, Weak: None, Strong = the track's row, + GT Tools: None])."""
    found = paper_rows(PAPER, "Table 4", model)
    points = []
    for track in tracks:
        for row in (r for r in found if r.get("setting") == SETTINGS.get(track)):
            base = [r["values"]["overall"] for r in found
                    if r.get("setting") == "Base" and (r["model"], r.get("size")) == (row["model"], row.get("size"))]
            name = f"{row['model']} {row.get('size') or ''}".strip()
            points.append((f"{name} {SETTINGS[track]} (Table 4)", row,
                           [base[0] if base else None, None, row["values"]["overall"], None]))
    return points


def _call_stats(chains: list[tuple[dict, int | None]], key: str) -> list:
    if not chains:
        return [None, None, None]
    lengths = [len(chain[key]) for chain, _ in chains]
    unique = [len(set(chain[key])) for chain, _ in chains]
    errors = [abs(reference - len(chain[key])) for chain, reference in chains if reference is not None]
    return [round(sum(lengths) / len(lengths), 2), round(sum(unique) / len(unique), 2),
            round(sum(errors) / len(errors), 2) if errors else None]


def apr(records: list[dict]) -> float | None:
    return round(100 * sum((r.get("score") or 0.0) >= 0.5 for r in records) / len(records), 2) if records else None


def _pct(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 2) if whole else None
