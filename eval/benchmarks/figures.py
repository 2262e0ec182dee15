"""The charts the benchmarks' paper figures are redrawn with: ours as solid bars or lines, the paper's published
points beside them (hatched bars, hollow markers) where the paper gives numbers. Each writes one PNG and returns
its figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

PAPER_STYLE = {"hatch": "//", "fill": False}


def bars(path: Path, title: str, labels: list[str], ours: dict[str, list[float | None]],
         paper: dict[str, list[float | None]] | None = None, ylabel: str = "accuracy (%)",
         ylim: tuple[float, float] | None = (0, 105)) -> Figure:
    """Grouped bars: one group per label, one bar per series (the paper's series hatched). None is no bar."""
    series = [(name, values, False) for name, values in ours.items()] + \
             [(f"paper: {name}", values, True) for name, values in (paper or {}).items()]
    positions = np.arange(len(labels))
    width = 0.8 / max(len(series), 1)
    figure = Figure(figsize=(min(40.0, max(6.0, 0.5 * len(labels) * max(len(series), 1) + 2)), 4.2),
                    layout="constrained")
    ax = figure.add_subplot()
    for k, (name, values, published) in enumerate(series):
        heights = [np.nan if v is None else v for v in values]
        drawn = ax.bar(positions - 0.4 + width * (k + 0.5), heights, width, label=name,
                       **({**PAPER_STYLE, "edgecolor": f"C{k}"} if published else {"color": f"C{k}"}))
        ax.bar_label(drawn, ["" if np.isnan(v) else f"{v:.1f}" for v in heights], fontsize=7)
    ax.set_xticks(positions, labels, rotation=30 if max(map(len, labels), default=0) > 6 else 0,
                  ha="right" if max(map(len, labels), default=0) > 6 else "center")
    ax.set(ylabel=ylabel, title=title)
    if ylim:
        ax.set_ylim(*ylim)
    if series:
        ax.legend(fontsize=8)
    figure.savefig(path, dpi=100)
    return figure


def lines(path: Path, title: str, x: list, ours: dict[str, list[float | None]],
          paper: dict[str, list[float | None]] | None = None, xlabel: str = "", ylabel: str = "accuracy (%)",
          ylim: tuple[float, float] | None = None) -> Figure:
    """One line per series over the same x values (categorical or numeric); the paper's dashed with hollow
    markers. None leaves a gap."""
    figure = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = figure.add_subplot()
    positions = np.arange(len(x)) if any(isinstance(v, str) for v in x) else np.asarray(x, dtype=float)
    for k, (name, values) in enumerate(ours.items()):
        ax.plot(positions, [np.nan if v is None else v for v in values], "o-", color=f"C{k}", label=name)
    for k, (name, values) in enumerate((paper or {}).items(), len(ours)):
        ax.plot(positions, [np.nan if v is None else v for v in values], "o--", color=f"C{k}", mfc="none",
                label=f"paper: {name}")
    if any(isinstance(v, str) for v in x):
        ax.set_xticks(positions, [str(v) for v in x])
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if ylim:
        ax.set_ylim(*ylim)
    ax.legend(fontsize=8)
    figure.savefig(path, dpi=100)
    return figure


def scatter(path: Path, title: str, panels: list[tuple[str, str, str, dict, dict]]) -> Figure:
    """Panels of labelled points side by side, each (title, x label, y label, ours, the paper's), a series being
    {name: (x, y)}: ours filled, the paper's hollow. A point with a None coordinate is left out."""
    figure = Figure(figsize=(5 * len(panels), 4.5), layout="constrained")
    for ax, (subtitle, xlabel, ylabel, ours, paper) in zip(figure.subplots(1, len(panels), squeeze=False)[0], panels):
        for points, published in ((ours, False), (paper or {}, True)):
            for name, (px, py) in points.items():
                if px is None or py is None:
                    continue
                ax.plot([px], [py], "o", color="C1" if published else "C0", mfc="none" if published else None)
                ax.annotate(f"paper: {name}" if published else name, (px, py), fontsize=7, xytext=(3, 3),
                            textcoords="offset points", color="C1" if published else "black")
        ax.set(xlabel=xlabel, ylabel=ylabel, title=subtitle)
    figure.suptitle(title)
    figure.savefig(path, dpi=100)
    return figure
