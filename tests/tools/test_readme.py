"""The README stays true: its op table is the registry's (`make tool-table`) and its example runs."""

import re
from pathlib import Path

import cv2
import numpy as np

from tools.__main__ import BEGIN, END, markdown

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_tool_table_matches_registry():
    text = README.read_text(encoding="utf-8")
    table = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert table == markdown("default"), "README tool table is stale: run `make tool-table`"


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    code = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    cv2.imwrite("page.png", np.full((40, 30, 3), 255, np.uint8))  # the file the example reads
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert [r.ok for r in namespace["results"]] == [True, True, True]
    assert namespace["results"][0].image.shape == (30, 40, 3)
    assert namespace["invocation"].steps[0].op == "rotate"
    assert "True" in capsys.readouterr().out
