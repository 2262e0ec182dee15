"""The README's op table is generated from the registry (`make tool-table`) and must not go stale."""

from pathlib import Path

from tools.__main__ import BEGIN, END, markdown

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_tool_table_matches_registry():
    text = README.read_text(encoding="utf-8")
    table = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert table == markdown("default"), "README tool table is stale: run `make tool-table`"
