"""`python -m tools list`: plain, --json, --markdown, --toolset, --update, and errors.

The subprocesses start together in one module fixture (each pays the torch import once, in parallel)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from tools import REGISTRY
from tools.__main__ import BEGIN, END, main
from tools.toolsets import TOOLSETS

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {
    "plain": ["list"],
    "json": ["list", "--json"],
    "deepeyes_json": ["list", "--toolset", "deepeyes", "--json"],
    "markdown": ["list", "--markdown"],
    "unknown_toolset": ["list", "--toolset", "no_such_toolset"],
}
OPS = sorted(n for n in REGISTRY if not n.startswith("_test"))


@pytest.fixture(scope="module")
def cli():
    procs = {
        key: subprocess.Popen([sys.executable, "-m", "tools", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        for key, argv in COMMANDS.items()
    }
    out = {}
    for key, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=240)
        out[key] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return out


def _ok(result):
    assert result.returncode == 0, f"{result.args} exited {result.returncode}: {result.stderr[-2000:]}"
    return result.stdout


def test_plain_lists_every_op(cli):
    lines = _ok(cli["plain"]).splitlines()
    assert len(lines) == len(OPS)
    assert sorted(line.split()[0] for line in lines) == OPS


def test_json_is_openai_function_format(cli):
    schemas = json.loads(_ok(cli["json"]))
    assert isinstance(schemas, list) and len(schemas) == len(OPS)
    for schema in schemas:
        assert set(schema) == {"type", "function"} and schema["type"] == "function"
        fn = schema["function"]
        assert set(fn) == {"name", "description", "parameters"}
        assert fn["description"].strip()
        Draft202012Validator.check_schema(fn["parameters"])
        assert fn["parameters"]["type"] == "object"
        assert "image_index" in fn["parameters"]["properties"]
    assert sorted(s["function"]["name"] for s in schemas) == OPS
    assert schemas == json.loads(json.dumps(TOOLSETS["default"].schemas()))


def test_json_for_deepeyes(cli):
    schemas = json.loads(_ok(cli["deepeyes_json"]))
    assert len(schemas) == 1
    assert schemas[0]["type"] == "function"
    assert schemas[0]["function"]["name"] == "image_zoom_in_tool"
    assert set(schemas[0]["function"]["parameters"]["properties"]) == {"bbox_2d", "label"}
    assert schemas == json.loads(json.dumps(TOOLSETS["deepeyes"].schemas()))


def _cells(line: str) -> list[str]:
    assert line.startswith("|") and line.endswith("|"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def _check_table(text: str, toolset: str) -> list[list[str]]:
    lines = text.strip().splitlines()
    tools = TOOLSETS[toolset].names()
    assert len(lines) == len(tools) + 2, f"{toolset}: {len(lines)} lines for {len(tools)} tools (a cell with a newline?)"
    header = _cells(lines[0])
    assert header[0] == "tool" and header[-1] == "what it does"
    assert set(lines[1].replace("|", "")) == {"-"}
    rows = [_cells(line) for line in lines[2:]]
    for row in rows:
        assert len(row) == len(header), row
        assert all(cell for cell in row[:1] + row[-1:]), row
    assert [r[0] for r in rows] == tools
    return rows


def test_markdown_table(cli):
    rows = _check_table(_ok(cli["markdown"]), "default")
    by_name = {r[0]: r for r in rows}
    for name in OPS:
        op = REGISTRY[name]
        assert by_name[name][3] == ("OpenCV only" if op.cpu_only else "torch + OpenCV")
        assert by_name[name][2] == op.category
        params = by_name[name][1].split(", ")
        assert "image_index?" in params
        for p in op.params:
            shown = f"{p.name}_index" if p.kind == "image" else p.name
            assert (shown if p.required else shown + "?") in params, (name, p.name, params)


@pytest.mark.parametrize("toolset", sorted(TOOLSETS))
def test_markdown_table_every_toolset(toolset, capsys):
    main(["list", "--markdown", "--toolset", toolset])
    _check_table(capsys.readouterr().out, toolset)


@pytest.mark.parametrize("toolset", sorted(TOOLSETS))
def test_json_every_toolset_in_process(toolset, capsys):
    main(["list", "--json", "--toolset", toolset])
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(TOOLSETS[toolset].schemas()))


def test_unknown_toolset_exits_nonzero(cli):
    result = cli["unknown_toolset"]
    assert result.returncode != 0
    assert "no_such_toolset" in result.stderr and "invalid choice" in result.stderr
    assert result.stdout == ""


def test_update_needs_markdown(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text(f"{BEGIN}\n{END}\n", encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["list", "--update", str(doc)])
    assert info.value.code != 0 and "--update needs --markdown" in capsys.readouterr().err
    assert doc.read_text(encoding="utf-8") == f"{BEGIN}\n{END}\n"


def test_update_replaces_the_table_between_markers(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Tools\n\nintro\n{BEGIN}\nold table\n{END}\n\noutro\n", encoding="utf-8")
    main(["list", "--markdown", "--toolset", "tir_rotate", "--update", str(doc)])
    text = doc.read_text(encoding="utf-8")
    assert "old table" not in text
    assert text.startswith("# Tools\n\nintro\n") and text.endswith("\n\noutro\n")
    table = text.split(BEGIN)[1].split(END)[0]
    _check_table(table, "tir_rotate")
    main(["list", "--markdown", "--toolset", "tir_rotate", "--update", str(doc)])
    assert doc.read_text(encoding="utf-8") == text  # idempotent


def test_update_without_markers_fails(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("no markers here\n", encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["list", "--markdown", "--update", str(doc)])
    assert info.value.code not in (0, None)
    assert doc.read_text(encoding="utf-8") == "no markers here\n"


def test_summary_is_not_cut_at_an_abbreviation(monkeypatch):
    import tools.__main__ as cli_main
    from tools.registry import Param
    from tools.toolset import ToolSet, flat_tool, op_step

    tool = flat_tool("mark", "Draw a mark, e.g. a cross, at a point. Then return the image.",
                     (Param("x", "int", "x"),), lambda a: [op_step("flip")])
    monkeypatch.setitem(cli_main.TOOLSETS, "synthetic", ToolSet("synthetic", "test only", (tool,)))
    assert cli_main.rows("synthetic") == [("mark", "x", "Draw a mark, e.g. a cross, at a point.")]
