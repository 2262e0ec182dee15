"""The paper's figures redrawn from a run's records (PNG files in the run's plots/ folder), the paper's points beside
ours where its text gives numbers:

- Figure 5: APR vs. tool call rate, APR vs. tool call efficiency, tool call rate vs. efficiency, one point per
  tool setting of ours and the paper's Table 5 models (hollow).
- Figure 6: each tool's share of all calls, per tool setting (interface track: the `opencv_*` tools).
- Figure 7: by ground-truth chain length and by ground-truth tool diversity (distinct tools), (a) the number of
  items and their APR, (b) the share of items at each length for the ground truth and for the model's calls.
- Figure 9: APR under Direct, Weak Prompt, Strong Prompt and Strong Prompt + GT Tools (tables.figure9_table).
- Figure 10: per category, the share of items at each chain length, ground truth vs. the model's calls.

The paper draws Figures 6, 7 and 10 without numbers in its text (7 and 10 for Gemini-3.0-Flash), so only ours
are drawn there. The model's chain is every call it made (Table 5's "all calls")."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from eval.benchmarks import figures as charts
from eval.benchmarks.papers import paper_table
from eval.benchmarks.vtc_bench.data import CATEGORIES
from eval.benchmarks.vtc_bench.tables import (FIGURE9, PAPER, SETTINGS, apr, by_setting, figure9_values, one_baseline,
                                                paper_figure9, prompt_of, track_of)

MAX_LENGTH = 10  # the longest ground-truth chain (Table 2); longer model chains share the last bin


# file name and title of each figure
FILES = {5: ("vtc_figure5.png", "Figure 5: tool call rate, efficiency and APR"),
         6: ("vtc_figure6.png", "Figure 6: tool utilization"),
         7: ("vtc_figure7.png", "Figure 7: chain length and tool diversity"),
         9: ("vtc_figure9.png", "Figure 9: APR per prompt setting"),
         10: ("vtc_figure10.png", "Figure 10: chain lengths per category")}


def draw(records: list[dict], config: dict, folder: Path) -> list[tuple[str, str]]:
    """Each figure the records can show, written into `folder`: (title, file name)."""
    return [(FILES[number][1], FILES[number][0]) for number in drawn(records, config, Path(folder))]


def drawn(records: list[dict], config: dict, folder: Path) -> dict[int, Figure]:
    """The figures drawn, by the paper's number."""
    tools = [r for r in records if r["mode"] == "tools"]
    if not tools:
        return {}
    figures = {5: figure5(tools, folder)}
    if any((r.get("chain") or {}).get("calls") for r in tools):
        figures[6] = figure6(tools, folder)
    if any(r.get("gt_chain") for r in tools):
        figures[7], figures[10] = figure7(tools, folder), figure10(tools, folder)
    if any(prompt_of(r) != "strong" for r in records):  # the prompt ablation
        figures[9] = figure9(one_baseline(records), config, folder)
    return figures


def _rates(group: list[dict]) -> tuple[float, float, float]:
    """TCR, Eff. and APR (%) of a setting's records, as Table 5 computes them."""
    chains = [r.get("chain") or {"calls": [], "effective": []} for r in group]
    calls = sum(len(c["calls"]) for c in chains)
    tcr = 100 * sum(bool(c["calls"]) for c in chains) / len(chains)
    efficiency = 100 * sum(len(c["effective"]) for c in chains) / calls if calls else 0.0
    return tcr, efficiency, apr(group)


def figure5(tools: list[dict], folder: Path) -> Figure:
    ours = {f"this run: {name}": _rates(group) for name, group in by_setting(tools).items()}
    paper = {row["model"]: (row["values"]["tcr"], row["values"]["efficiency"], row["values"]["apr"])
             for row in paper_table(PAPER, "Table 5")["rows"]}
    panels = (("Tool Call Rate (%)", 0, "APR (%)", 2), ("Tool Call Efficiency (%)", 1, "APR (%)", 2),
              ("Tool Call Rate (%)", 0, "Tool Call Efficiency (%)", 1))
    return charts.scatter(folder / FILES[5][0], "VTC-Bench Figure 5: tool call rate, efficiency and APR (paper: "
                          "Table 5, hollow)",
                          [(f"{ylabel} vs. {xlabel}", xlabel, ylabel,
                            {name: (v[x], v[y]) for name, v in ours.items()},
                            {name: (v[x], v[y]) for name, v in paper.items()}) for xlabel, x, ylabel, y in panels])


def figure6(tools: list[dict], folder: Path) -> Figure:
    """Horizontal bars, most used tool first: the share of each setting's calls."""
    counts = {name: Counter(call for r in group for call in (r.get("chain") or {}).get("calls", []))
              for name, group in by_setting(tools).items()}
    names = sorted({tool for c in counts.values() for tool in c}, key=lambda t: -sum(c[t] for c in counts.values()))
    figure = Figure(figsize=(8, 1.5 + 0.3 * len(names) * max(1, len(counts) / 2)), layout="constrained")
    ax = figure.add_subplot()
    height = 0.8 / len(counts)
    for k, (name, c) in enumerate(counts.items()):
        shares = [100 * c[tool] / max(sum(c.values()), 1) for tool in names]
        drawn = ax.barh(np.arange(len(names)) - 0.4 + height * (k + 0.5), shares, height, color=f"C{k}", label=name)
        ax.bar_label(drawn, [f"{v:.1f}" for v in shares], fontsize=7)
    ax.set_yticks(np.arange(len(names)), names)
    ax.invert_yaxis()
    ax.set(xlabel="share of calls (%)", ylabel="tool", title="VTC-Bench Figure 6: distribution of tool utilization")
    ax.legend(fontsize=8, loc="lower right")
    figure.savefig(folder / FILES[6][0], dpi=100)
    return figure


def _gt(record: dict) -> tuple[int, int] | None:
    chain = record.get("gt_chain")
    return (len(chain), len(set(chain))) if chain else None


def figure7(tools: list[dict], folder: Path) -> Figure:
    with_gt = [r for r in tools if _gt(r)]
    figure = Figure(figsize=(12, 8), layout="constrained")
    axes = figure.subplots(2, 2)
    bins = list(range(1, MAX_LENGTH + 1))
    for column, (what, index) in enumerate((("chain length", 0), ("tool diversity (distinct tools)", 1))):
        density, accuracy = axes[0][column], axes[0][column].twinx()
        items = {r["id"]: min(_gt(r)[index], MAX_LENGTH) for r in with_gt}  # the same items in every setting
        density.bar(bins, [sum(v == b for v in items.values()) for b in bins], 0.6, color="0.8", label="items")
        for k, (name, group) in enumerate(by_setting(with_gt).items()):
            at = {b: [r for r in group if min(_gt(r)[index], MAX_LENGTH) == b] for b in bins}
            accuracy.plot(bins, [apr(at[b]) if at[b] else np.nan for b in bins], "o-", color=f"C{k}",
                          label=f"{name}: APR")
        density.set(xlabel=f"ground-truth {what}", ylabel="items", title=f"(a) items and APR by {what}",
                    xticks=bins)
        accuracy.set(ylabel="APR (%)", ylim=(0, 105))
        handles = [h for ax in (density, accuracy) for h in ax.get_legend_handles_labels()[0]]
        accuracy.legend(handles, [h.get_label() for h in handles], fontsize=7, loc="lower right")
        share = axes[1][column]
        share.plot(bins, _shares([_gt(r)[index] for r in with_gt], bins), "s--", color="k", mfc="none",
                   label="ground truth")
        for k, (name, group) in enumerate(by_setting(with_gt).items()):
            model = [_model(r)[index] for r in group]
            share.plot([0, *bins], _shares(model, [0, *bins]), "o-", color=f"C{k}", label=f"{name}: model")
        share.set(xlabel=what, ylabel="share of items (%)", title=f"(b) ground truth vs. model by {what}",
                  xticks=[0, *bins])
        share.legend(fontsize=7)
    figure.suptitle("VTC-Bench Figure 7: chain length and tool diversity (the paper's: Gemini-3.0-Flash, "
                    "no numbers given)")
    figure.savefig(folder / FILES[7][0], dpi=100)
    return figure


def _model(record: dict) -> tuple[int, int]:
    calls = (record.get("chain") or {}).get("calls", [])
    return len(calls), len(set(calls))


def _shares(values: list[int], bins: list[int]) -> list[float]:
    capped = Counter(min(v, bins[-1]) for v in values)
    return [100 * capped[b] / len(values) if values else np.nan for b in bins]


def figure10(tools: list[dict], folder: Path) -> Figure:
    with_gt = [r for r in tools if _gt(r)]
    figure = Figure(figsize=(13, 10), layout="constrained")
    bins = list(range(0, MAX_LENGTH + 1))
    for ax, category in zip(figure.subplots(3, 3).flat, CATEGORIES):
        group = [r for r in with_gt if r["category"] == category]
        settings = by_setting(group)
        width = 0.8 / (1 + len(settings))
        ground_truth = {r["id"]: _gt(r)[0] for r in group}
        ax.bar(np.array(bins) - 0.4 + width / 2, _shares(list(ground_truth.values()), bins), width, fill=False,
               hatch="//", edgecolor="k", label="ground truth")
        for k, (name, records) in enumerate(settings.items(), 1):
            ax.bar(np.array(bins) - 0.4 + width * (k + 0.5), _shares([_model(r)[0] for r in records], bins), width,
                   color=f"C{k - 1}", label=f"{name}: model")
        ax.set(title=f"{category} ({len(ground_truth)} items)", xlabel="chain length",
               ylabel="share of items (%)", xticks=bins, ylim=(0, 105))
        ax.legend(fontsize=7)
    figure.suptitle("VTC-Bench Figure 10: chain lengths per category, ground truth vs. model (the paper's: "
                    "Gemini-3.0-Flash, no numbers given)")
    figure.savefig(folder / FILES[10][0], dpi=100)
    return figure


def figure9(records: list[dict], config: dict, folder: Path) -> Figure:
    tracks = sorted({track_of(r) for r in records if r["mode"] == "tools"})
    ours = {f"this run: {SETTINGS.get(track, track)}": figure9_values(records, track) for track in tracks}
    paper = {label: values for label, _, values in paper_figure9(config.get("model"), tracks)}
    return charts.bars(folder / FILES[9][0], "VTC-Bench Figure 9: APR per prompt setting",
                       [name for name, _ in FIGURE9], ours, paper, ylabel="APR (%)")
