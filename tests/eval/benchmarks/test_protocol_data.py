"""Protocol data (prompts, tool descriptions, few-shot examples a faithful run shows word for word) is checked
against the hashes recorded when it was taken from its source: every file in a benchmark's prompts/ folder is
listed in its SHA256SUMS (`sha256sum -c SHA256SUMS` in that folder checks the same) and names its source."""

import hashlib
import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "eval" / "benchmarks"
FOLDERS = sorted(p.parent for p in BENCHMARKS.glob("*/prompts/SHA256SUMS"))


def test_every_benchmark_with_prompts_records_their_hashes():
    assert {f.parent.name for f in FOLDERS} >= {"tir_bench", "vtc_bench"}
    assert {p.parent.parent.name for p in BENCHMARKS.glob("*/prompts/*.json")} <= {f.parent.name for f in FOLDERS}


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.parent.name)
def test_protocol_files_match_their_recorded_sha256(folder):
    recorded = dict(reversed(line.split(None, 1)) for line in (folder / "SHA256SUMS").read_text().splitlines())
    assert sorted(recorded) == sorted(p.name for p in folder.iterdir() if p.name != "SHA256SUMS"), \
        "every protocol file is listed in SHA256SUMS, and every listed file exists"
    for name, digest in recorded.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, f"{name} changed"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.parent.name)
def test_protocol_files_name_their_source(folder):
    paths = list(folder.glob("*.json"))
    assert paths, f"{folder} holds no protocol data"
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert '"source"' in text, f"{path.name} must say where its texts come from"
        json.loads(text)
