"""The papers' published numbers (each benchmark's `paper_results.json`) and the markdown tables that put
them beside a run's."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from eval.report import setting_text

ROOT = Path(__file__).resolve().parents[2]


@cache
def _tables(path: str) -> dict[str, dict]:
    data = json.loads((ROOT / path).read_text(encoding="utf-8"))
    tables = data["tables"] if isinstance(data, dict) and "tables" in data else data
    if isinstance(tables, dict):
        tables = list(tables.values())
    return {table["table"]: table for table in tables}


def paper_table(path: str, table: str) -> dict:
    """A paper's table as `paper_results.json` holds it (its rows, notes and protocol)."""
    return _tables(path)[table]


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


# What a paper row's protocol may state (a table's `protocol`, overridden by a row's own), and the run's setting each
# is compared with: the suite's harness, the sampling, the reply cap (0: none), the image size (0: the checkpoint
# processor's own) and the judge.
PROTOCOL = {"harness": lambda config: (config.get("protocol") or {}).get("harness"),
            **{k: (lambda key: lambda config: config.get(key))(k)
               for k in ("temperature", "top_p", "top_k", "presence_penalty", "max_tokens", "max_pixels")},
            "judge": lambda config: config.get("judge_model")}


def row_protocol(path: str, table: str, row: dict) -> dict:
    """The protocol a paper row was produced with, as far as the paper and its code state it."""
    return {**_tables(path)[table].get("protocol", {}), **row.get("protocol", {})}


def unlike(protocol: dict, config: dict) -> list[str]:
    """Where a run (its saved configuration) differs from a paper row's protocol; [] when like for like."""
    differences = []
    for key, paper in protocol.items():
        if key not in PROTOCOL or paper is None:
            continue
        ours = PROTOCOL[key](config)
        same = str(ours).lower() == str(paper).lower() if isinstance(paper, str) else ours == paper
        if not same:
            differences.append(f"{key} {setting_text(key, ours)} here, {setting_text(key, paper)} in the paper")
    return differences


def paper_label(path: str, table: str, row: dict, config: dict, name: str | None = None,
                compared: bool = True) -> str:
    """A paper row's label beside a run's rows: its model (or `name`), marked where the run is not like for
    like, with what differs. A row of a setting the run has no numbers for (another track) is not `compared`."""
    differences = unlike(row_protocol(path, table, row), config) if compared else []
    return f"paper: {name or row['model']}" + (f" (not like for like: {'; '.join(differences)})" if differences
                                                else "")


def once_per_task(records: list[dict], key=lambda record: record["id"]) -> list[dict]:
    """The records with each task's no-tools record kept once, the first (`key` says which no-tools records are the
    same protocol): runs merged into one report that were each made with `--tools both` carry the same baseline,
    which counts once in its row."""
    seen, kept = set(), []
    for record in records:
        if record.get("mode") == "no_tools":
            if key(record) in seen:
                continue
            seen.add(key(record))
        kept.append(record)
    return kept


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
