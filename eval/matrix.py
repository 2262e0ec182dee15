"""The evaluation matrix as one table: a row per cell's run directory (model, benchmark, variant, mode), its
accuracy, how many items went unscored, where the run deviated from its paper's protocol, and whether the paper's
rows in its report are like for like. Each cell's own report has the paper-layout tables.

    python -m eval.matrix runs/qwen2.5-vl-7b-* runs/deepeyes-7b-* > runs/matrix.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from eval.benchmarks.papers import table_lines
from eval.report import setting_text


def matrix(run_dirs: list[str | Path]) -> str:
    rows = []
    for run_dir in map(Path, run_dirs):
        config = _read(run_dir / "config.json") or {}
        summary = _read(run_dir / "summary.json")
        cell = [config.get("model", "-"), config.get("suite", "-"), _variant(config)]
        if summary is None:
            rows.append([*cell, "-", "not finished (no summary.json: run it, or merge its shards)", "-", "-", "-", "-",
                         str(run_dir)])
            continue
        report = (run_dir / "report.md").read_text(encoding="utf-8") if (run_dir / "report.md").exists() else ""
        paper_rows = report.count("| paper: ")
        unlike = report.count("(not like for like: ")
        deviations = "; ".join(f"{k} {setting_text(k, v['run'])}" for k, v in (config.get("deviations") or {}).items())
        for mode, stats in summary["modes"].items():
            overall = stats["overall"]
            rows.append([*cell, mode, round(100 * overall["accuracy"], 2), overall["n"], overall["unscored"],
                         deviations or "none",
                         "no paper row" if not paper_rows else f"{unlike} of {paper_rows} not like for like"
                         if unlike else "like for like", str(run_dir)])
    return "\n".join(["# Evaluation matrix", "", *table_lines(
        ["model", "benchmark", "variant", "mode", "accuracy (%)", "n", "unscored", "deviations from the paper",
         "paper rows", "run"], rows), ""])


def _variant(config: dict) -> str:
    parts = [f"{k} {config[k]}" for k in ("study", "track", "prompt_variant") if config.get(k)]
    if config.get("tasks") and config.get("suite") != "synthetic":
        parts.append(f"tasks {' '.join(config['tasks'])}")
    return ", ".join(parts) or "-"


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: python -m eval.matrix RUN_DIR [RUN_DIR ...]", file=sys.stderr)
        sys.exit(2)
    print(matrix(sys.argv[1:]))
