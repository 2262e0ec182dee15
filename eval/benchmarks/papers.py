"""The papers' published numbers (each benchmark's `paper_results.json`) and the markdown tables that put
them beside a run's."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@cache
def _tables(path: str) -> dict[str, dict]:
    data = json.loads((ROOT / path).read_text(encoding="utf-8"))
    tables = data["tables"] if isinstance(data, dict) and "tables" in data else data
    if isinstance(tables, dict):
        tables = list(tables.values())
    return {table["table"]: table for table in tables}


def paper_rows(path: str, table: str, model: str | None) -> list[dict]:
    """The rows of a paper's table for `model` (a hub name or a local checkpoint): those whose `hub` is the
    model, else whose model name the checkpoint's name starts with (e.g. Qwen2.5-VL-7B for
    Qwen2.5-VL-7B-Instruct)."""
    if not model:
        return []
    rows = _tables(path)[table]["rows"]
    exact = [row for row in rows if row.get("hub") and row["hub"].lower() == model.lower()]
    if exact:
        return exact
    name = _plain(Path(model).name)
    return [row for row in rows if _plain(row["model"]) and name.startswith(_plain(row["model"]))]


def _plain(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "", name.lower())


def table_lines(header: list, rows: list[list]) -> list[str]:
    """A markdown table; None is shown as "-"."""
    def cell(value) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.1f}"
        return " ".join(str(value).split()).replace("|", "\\|")

    return ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)]
