"""The README's episode example runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_episode_example_runs(tmp_path, monkeypatch):
    section = README.read_text(encoding="utf-8").split("## Running episodes", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert [(e.stop_reason.value, e.answer, len(e.workspace)) for e in namespace["episodes"]] == [
        ("answer", "a gradient", 2)] * 4
    assert len((tmp_path / "runs" / "demo.jsonl").read_text().splitlines()) == 4
