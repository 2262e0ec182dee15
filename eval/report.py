"""The report of an evaluation run: `summary.json`, `report.md` and plots (a benchmark's paper figures among
them), from the run's records.

    summary = write_report(run_dir, records, config)          # records: the lines of records.jsonl

Records carry their `mode` ("tools" or "no_tools"), so the report of a tool run and of its no-tool
baseline is one call on the two runs' records together: accuracy is then shown side by side per
category, with the difference. Process metrics (`eval.metrics`) are computed per mode and category;
the reference-based ones (chain-length MAE, overthink) only where a reference chain exists and tools
were offered: a run without tools is not compared with a tool chain.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from eval.metrics import process_metrics
from eval.suites import suite_figures, suite_tables
from runtime.web import read_usage, unavailable_calls
from viewer.episodes import from_records, group_of
from viewer.page import write_viewer

MODES = ("tools", "no_tools")
VIEWER = "report.html"
PLOTS = {"accuracy": "accuracy_per_category.png", "tools": "tool_distribution.png", "turns": "turns_per_episode.png"}
TOP_TOOLS = 20  # tool names beyond these (a model can invent any number) are left to summary.json
HOW_TO_READ = (
    "**How to read this.** Accuracy is the mean score (partial-credit scorers count fractions; unscored "
    "episodes count 0). Tool-call rate (VTC-Bench's TCR) is the share of episodes with at least one call; "
    "success rate is the share of calls that did not fail. Chain MAE (VTC-Bench) is the mean |reference chain "
    "length - calls made|. Efficiency (VTC-Bench's Eff_tool) is the share of calls on the chain that leads to the "
    "answer, traced back through the images each call read. Overthink (Agentic-MME) is the mean of "
    "max(0, calls - reference) / (reference + 1) (the paper's formula; the Agentic-MME tables also show its "
    "evaluator's own ratio, calls / reference): 0 means never more calls than the reference. "
    "\"-\" means the metric does not apply: no reference chain, no tool calls, or a run without tools."
)


def summarize(records: list[dict]) -> dict:
    """Per mode: the overall numbers and one entry per category; with both modes, the accuracy deltas
    (tools minus no_tools) too. Refuses a task that appears twice in one mode."""
    _check(records)
    by_mode: dict[str, list[dict]] = {}
    for record in records:
        by_mode.setdefault(record["mode"], []).append(record)
    modes = {}
    for mode in sorted(by_mode, key=_mode_order):
        group = by_mode[mode]
        categories = sorted({r["category"] for r in group})
        modes[mode] = {"overall": _stats(group, mode),
                       "categories": {c: _stats([r for r in group if r["category"] == c], mode) for c in categories}}
    summary = {"modes": modes}
    if all(m in modes for m in MODES):
        tools, plain = modes["tools"], modes["no_tools"]
        summary["delta"] = {
            "overall": tools["overall"]["accuracy"] - plain["overall"]["accuracy"],
            "categories": {c: (tools["categories"][c]["accuracy"] - plain["categories"][c]["accuracy"]
                               if c in tools["categories"] and c in plain["categories"] else None)
                           for c in _categories(modes)},
        }
    return summary


def _check(records: list[dict]) -> None:
    seen = set()
    for index, record in enumerate(records):
        missing = [key for key in ("id", "mode", "category") if key not in record]
        if missing:
            raise ValueError(f"record {index} lacks {missing}: records must follow the run record schema "
                             "(eval records.jsonl)")
        key = (record["id"], record["mode"], record.get("variant"))
        if key in seen:
            raise ValueError(f"duplicate record: task {key[0]!r} appears twice in mode {key[1]!r}; merge only runs "
                             "with different tool settings (one with tools, one with --tools none) or different "
                             "benchmark variants (tracks, prompts)")
        seen.add(key)


def _stats(records: list[dict], mode: str) -> dict:
    n = len(records)
    with_tools = mode != "no_tools"
    process = process_metrics([(((r.get("trajectory") or {}).get("messages") or []),
                                r.get("reference_calls") if with_tools else None) for r in records])
    process.pop("episodes")
    latencies = [r["latency_s"] for r in records if r.get("latency_s") is not None]
    turns = Counter(int(r.get("turns") or 0) for r in records)
    return {
        "n": n,
        "accuracy": sum(r.get("score") or 0.0 for r in records) / n,
        "unscored": sum(r.get("score") is None for r in records),
        "errors": sum(r.get("stop_reason") == "error" for r in records),
        # a reply with neither a call nor the answer tag its protocol requires
        "format_failures": sum(r.get("stop_reason") == "no_answer" for r in records),
        # web tool calls the run's web backend could not answer (offline, or not in the replay)
        "web_unavailable": sum(unavailable_calls((r.get("trajectory") or {}).get("messages") or []) for r in records),
        # tool images not shown to the model: over a budget, malformed, or too slow to decode in the sandbox
        "images_refused": sum(len(((r.get("trajectory") or {}).get("meta") or {}).get("refused_images") or [])
                              for r in records),
        **process,
        "turns_mean": sum(k * v for k, v in turns.items()) / n,
        "turns_distribution": {str(k): turns[k] for k in sorted(turns)},  # string keys: as JSON reads them back
        "stop_reasons": dict(Counter(str(r.get("stop_reason")) for r in records).most_common()),
        "latency_s_mean": sum(latencies) / len(latencies) if latencies else None,
        "prompt_tokens": sum(r.get("prompt_tokens") or 0 for r in records),
        "completion_tokens": sum(r.get("completion_tokens") or 0 for r in records),
    }


def _mode_order(mode: str) -> tuple:
    return (MODES.index(mode) if mode in MODES else len(MODES), mode)


def _categories(modes: dict) -> list[str]:
    return sorted({c for entry in modes.values() for c in entry["categories"]})


def write_report(run_dir: Path, records: list[dict], config: dict | None = None,
                 image_dirs: list[Path] | None = None) -> dict:
    """Write summary.json, report.md, plots/*.png and the episode viewer report.html under `run_dir`; returns the
    summary. `image_dirs`: where the records' images are (default: the run's own images/)."""
    if not records:
        raise ValueError(f"no records to report for {run_dir}: did the run finish any episode?")
    run_dir = Path(run_dir)
    summary = summarize(records)
    web = read_usage(run_dir)
    if web is not None:  # the live web calls of the run (runtime/web_http.py)
        summary["web"] = web.to_json()
    (run_dir / "plots").mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    with matplotlib.rc_context({"text.parse_math": False}):  # names come from models and users: "$" is literal
        _plot_accuracy(summary, run_dir / "plots" / PLOTS["accuracy"])
        _plot_tools(summary, run_dir / "plots" / PLOTS["tools"])
        _plot_turns(records, run_dir / "plots" / PLOTS["turns"])
        try:
            figures = suite_figures((config or {}).get("suite"), records, config or {}, run_dir / "plots")
        except Exception as err:  # noqa: BLE001 - a figure the records cannot support must not cost the report
            figures = f"{type(err).__name__}: {err}"
    try:
        episodes = from_records(records, image_dirs or [run_dir / "images"])
        viewer = write_viewer(run_dir / VIEWER, episodes, _title(config or {}, records), f"{len(records)} episodes")
    except Exception as err:  # noqa: BLE001 - the numbers stand without the viewer, whatever the records hold
        viewer = f"{type(err).__name__}: {err}"
    (run_dir / "report.md").write_text(_markdown(summary, records, config or {}, figures, viewer), encoding="utf-8")
    return summary


def side_by_side(records: list[dict]) -> str:
    """The viewer's address fragment that sets a run's tools and no-tools groups side by side ("" without both)."""
    groups = {r["mode"]: group_of(r) for r in reversed(records) if r.get("mode") in MODES}
    if not all(mode in groups for mode in MODES):
        return ""
    return "#" + urlencode({"a": groups["tools"], "b": groups["no_tools"]})


def _title(config: dict, records: list[dict]) -> str:
    model = config.get("model") or next((r["model"] for r in records if r.get("model")), "")
    suite = _describe(config.get("suite") or "")
    name = Path(str(model)).name if model and "," not in str(model) else ""  # "agentic: ..., direct: ...": several
    return " · ".join(part for part in (suite, name) if part) or "evaluation run"


def _markdown(summary: dict, records: list[dict], config: dict, figures: list[tuple[str, str]] | str,
              viewer: Path | str) -> str:
    """The report; `figures` are the paper's figures drawn (title, file name), or why they could not be; `viewer`
    the episode viewer's page, or why it was not written."""
    modes = summary["modes"]
    lines = ["# Evaluation report", ""]
    if isinstance(viewer, Path):
        pair = side_by_side(records)
        both = f"; side by side: [{viewer.name}{pair}]({viewer.name}{pair})" if pair else ""
        lines += [f"Every episode, with its images, calls and the regions they named: [{viewer.name}]({viewer.name})"
                  f"{both} (open it in a browser; it works from the file system).", ""]
    else:
        lines += [f"The episode viewer was not written: {_cell(viewer)}", ""]
    for key in ("model", "profile", "backend", "suite"):
        value = config.get(key) or ", ".join(sorted({str(r[key]) for r in records if r.get(key)})) or "-"
        lines.append(f"- **{key}**: {_cell(_describe(value))}")
    counts = ", ".join(f"{mode}: {entry['overall']['n']}" for mode, entry in modes.items())
    lines.append(f"- **records**: {len(records)} ({counts})")
    for key, value in (config.get("protocol") or {}).items():  # a benchmark's protocol, scoring, judge, data
        lines.append(f"- **{key}**: {_cell(value)}")
    if config.get("paper_protocol"):
        lines.append(f"- **paper's settings**: {_settings(config['paper_protocol'])}")
        deviations = config.get("deviations") or {}
        lines.append("- **deviations from the paper's protocol**: " + ("; ".join(
            f"{k} {setting_text(k, v['run'])} (paper: {setting_text(k, v['paper'])})" for k, v in deviations.items())
            or "none"))
    overall = {mode: entry["overall"] for mode, entry in modes.items()}
    lines += ["", "## Headline", ""]
    lines += _table(["mode", "accuracy", "n", "tool-call rate", "success rate", "calls/episode", "chain MAE",
                     "efficiency", "overthink"],
                    [[m, _pct(o["accuracy"]), o["n"], _pct(o["tool_call_rate"]), _pct(o["tool_success_rate"]),
                      _num(o["calls_per_episode"]), _num(o["chain_length_mae"]), _pct(o["tool_efficiency"]),
                      _num(o["overthink"])] for m, o in overall.items()])
    lines += ["", "## Cost and failures", ""]
    lines += _table(["mode", "turns/episode", "errors", "format failures", "web calls unavailable", "images refused",
                     "unscored", "mean latency (s)", "prompt tokens", "completion tokens"],
                    [[m, _num(o["turns_mean"]), o["errors"], o["format_failures"], o["web_unavailable"],
                      o["images_refused"], o["unscored"], _num(o["latency_s_mean"]), o["prompt_tokens"],
                      o["completion_tokens"]]
                     for m, o in overall.items()])
    lines += _web_usage(summary.get("web"))
    lines += ["", "## Accuracy per category", ""]
    header = ["category", *(f"{column} ({mode})" for mode in modes for column in ("accuracy", "n"))]
    rows = []
    for category in _categories(modes):
        row = [category]
        for entry in modes.values():
            stats = entry["categories"].get(category)
            row += [_pct(stats["accuracy"]), stats["n"]] if stats else ["-", "-"]
        rows.append(row)
    rows.append(["**overall**", *(x for o in overall.values() for x in (_pct(o["accuracy"]), o["n"]))])
    if "delta" in summary:
        header.append("delta (tools - no_tools)")
        deltas = [*(summary["delta"]["categories"][row[0]] for row in rows[:-1]), summary["delta"]["overall"]]
        rows = [[*row, _points(delta)] for row, delta in zip(rows, deltas)]
    lines += _table(header, rows)
    reasons = sorted({reason for o in overall.values() for reason in o["stop_reasons"]})
    lines += ["", "## Stop reasons", ""]
    lines += _table(["stop reason", *modes], [[r, *(o["stop_reasons"].get(r, 0) for o in overall.values())]
                                             for r in reasons])
    tools = _tool_totals(summary)
    lines += ["", "## Tool calls per tool", ""]
    if tools:
        lines += _table(["tool", *modes], [[t, *(o["tool_distribution"].get(t, 0) for o in overall.values())]
                                          for t in tools[:TOP_TOOLS]])
        if len(tools) > TOP_TOOLS:
            lines.append(f"\n... and {len(tools) - TOP_TOOLS} more tool names (see summary.json).")
    else:
        lines.append("No tool calls.")
    lines += _scoring_modes(records)
    lines += [line for section in suite_tables(config.get("suite"), records, config) for line in ["", *section.split("\n")]]
    lines += ["", "## Plots", ""]
    lines += [f"![{title}](plots/{PLOTS[key]})" for key, title in
              (("accuracy", "accuracy per category"), ("tools", "tool calls per tool"), ("turns", "turns per episode"))]
    if isinstance(figures, str):
        lines += ["", "## The paper's figures", "", f"Not drawn: {_cell(figures)}"]
    elif figures:
        lines += ["", "## The paper's figures", "", *(f"![{title}](plots/{name})" for title, name in figures)]
    return "\n".join([*lines, "", HOW_TO_READ, ""])


def setting_text(key: str, value) -> str:
    """A run setting as a report states it (0 tokens: no cap; 0 pixels: the checkpoint processor's own)."""
    if value == 0 and key == "max_tokens":
        return "no cap"
    if value == 0 and key == "max_pixels":
        return "the checkpoint's own"
    return "unset" if value is None else _cell(value)


def _settings(settings: dict) -> str:
    return ", ".join(f"{k} {setting_text(k, v)}" for k, v in settings.items())


def _scoring_modes(records: list[dict]) -> list[str]:
    """Benchmark records carry every scoring mode's score: their accuracies side by side, and how many items
    the modes score differently."""
    if not any(r.get("scores") for r in records):
        return []
    names = sorted({name for r in records for name in r.get("scores") or {}})
    rows = []
    for mode in sorted({r["mode"] for r in records}, key=_mode_order):
        group = [r for r in records if r["mode"] == mode]  # unscored and skipped items count 0, as in the headline
        scores = [r.get("scores") or {} for r in group]
        differ = sum(len({s.get(n) for n in names}) > 1 for s in scores)
        rows.append([mode, *(_pct(sum(s.get(n) or 0.0 for s in scores) / len(group)) for n in names), differ,
                     len(group)])
    return ["", "## Scoring modes", "", *_table(["mode", *names, "items scored differently", "n"], rows),
            "", "The headline uses the run's `--scoring`; the benchmark's folder README shows where the modes differ."]


def _web_usage(web: dict | None) -> list[str]:
    """The live web calls: requests sent per provider endpoint (every try), retries, answers from the shared cache,
    final failures by kind and the estimated cost."""
    if not web:
        return []
    endpoints = sorted({name for counts in web.values() for name in counts if ": " not in name}
                       | {name.split(": ")[0] for name in web["faults"]})
    faults = {e: ", ".join(f"{k.split(': ', 1)[1]} x{n}" for k, n in sorted(web["faults"].items())
                           if k.startswith(e + ": ")) or "0" for e in endpoints}
    rows = [[e, web["requests"].get(e, 0), web["retries"].get(e, 0), web["cache_hits"].get(e, 0), faults[e],
             f"{web['cost'].get(e, 0.0):.3f}"] for e in endpoints]
    rows.append(["total", sum(web["requests"].values()), sum(web["retries"].values()),
                 sum(web["cache_hits"].values()), sum(web["faults"].values()), f"{sum(web['cost'].values()):.3f}"])
    return ["", "## Web calls", "", "Live provider requests of the run (`--web live`; every try counts), answers from "
            "the shared cache, failures after the retries, and the estimated cost in US dollars (docs/web.md).", "",
            *_table(["endpoint", "requests", "retries", "cache hits", "faults", "est. cost ($)"], rows)]


def _table(header: list, rows: list[list]) -> list[str]:
    return ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(_cell(x) for x in row) + " |" for row in rows)]


def _cell(value) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def _describe(value) -> str:
    """A config entry in a few words: a section's name or kind, else its compact JSON."""
    if isinstance(value, dict):
        return str(value.get("name") or value.get("kind") or json.dumps(value, sort_keys=True, default=str))
    return str(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _points(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f} pts"


def _tool_totals(summary: dict) -> list[str]:
    totals = Counter()
    for entry in summary["modes"].values():
        totals.update(entry["overall"]["tool_distribution"])
    return [name for name, _ in totals.most_common()]


def _grouped_bars(ax, labels: list[str], series: dict[str, list[float]], horizontal: bool = False) -> None:
    """One group per label, one bar per series in it."""
    positions = np.arange(len(labels))
    width = 0.8 / max(len(series), 1)
    for k, (name, values) in enumerate(series.items()):
        offset = positions - 0.4 + width * (k + 0.5)
        bars = (ax.barh if horizontal else ax.bar)(offset, values, width, label=name)
        ax.bar_label(bars, ["" if np.isnan(v) else f"{v:.0f}" for v in values], fontsize=8)
    if horizontal:
        ax.set_yticks(positions, labels)
        ax.invert_yaxis()  # the largest first, from the top
    else:
        ax.set_xticks(positions, labels, rotation=30, ha="right")
    if len(series) > 1:
        ax.legend()


def _plot_accuracy(summary: dict, path: Path) -> None:
    modes = summary["modes"]
    labels = [*_categories(modes), "overall"]
    series = {m: [100 * e["categories"][c]["accuracy"] if c in e["categories"] else np.nan for c in labels[:-1]]
              + [100 * e["overall"]["accuracy"]] for m, e in modes.items()}
    width = min(60.0, max(5.0, 0.9 * len(labels) * len(series) + 2))  # capped: a huge suite must still render
    figure = Figure(figsize=(width, 4), layout="constrained")
    ax = figure.add_subplot()
    _grouped_bars(ax, labels, series)
    ax.set(ylabel="accuracy (%)", ylim=(0, 105), title="Accuracy per category")
    figure.savefig(path, dpi=100)


def _plot_tools(summary: dict, path: Path) -> None:
    names = _tool_totals(summary)
    tools = names[:TOP_TOOLS]
    modes = {m: e for m, e in summary["modes"].items() if e["overall"]["tool_distribution"]}
    figure = Figure(figsize=(6, max(2.5, 0.35 * len(tools) * max(len(modes), 1) + 1.2)), layout="constrained")
    ax = figure.add_subplot()
    if tools:
        _grouped_bars(ax, tools, {m: [e["overall"]["tool_distribution"].get(t, 0) for t in tools]
                                  for m, e in modes.items()}, horizontal=True)
        shown = f" (top {TOP_TOOLS} of {len(names)})" if len(names) > TOP_TOOLS else ""
        ax.set(xlabel="calls", title=f"Tool calls per tool{shown}")
    else:
        ax.text(0.5, 0.5, "no tool calls", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    figure.savefig(path, dpi=100)


def _plot_turns(records: list[dict], path: Path) -> None:
    turns = {}
    for record in records:
        turns.setdefault(record["mode"], []).append(int(record.get("turns") or 0))
    ordered = {m: turns[m] for m in sorted(turns, key=_mode_order)}
    low, high = min(min(t) for t in ordered.values()), max(max(t) for t in ordered.values())
    figure = Figure(figsize=(6, 3.5), layout="constrained")
    ax = figure.add_subplot()
    ax.hist(list(ordered.values()), bins=np.arange(low, high + 2) - 0.5, label=list(ordered))
    ax.set(xlabel="turns", ylabel="episodes", title="Turns per episode")
    for axis in (ax.xaxis, ax.yaxis):
        axis.get_major_locator().set_params(integer=True)
    if len(ordered) > 1:
        ax.legend()
    figure.savefig(path, dpi=100)
