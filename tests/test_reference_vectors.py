"""Every reference vector file can be regenerated: it names the committed script that made it, the upstream
repository and commit that script runs, and the library versions it ran with; and every script under
scripts/reference/ makes some committed vector file. The shared steps of the scripts (the reference tree at a commit,
the comparison of `--check`) are tested on a repository made here."""

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts" / "reference"
sys.path.insert(0, str(SCRIPTS))
import common  # noqa: E402

COMMIT = re.compile(r"\b[0-9a-f]{40}\b")
PACKAGES = ("eval", "tools", "train", "runtime", "data_gen", "compat", "gpu_check")


def upstream_commits(data) -> set[str]:
    """The 40-hex commits a file's headers name (top-level entries that are not lists of cases)."""
    found = set()
    for value in data.values():
        if isinstance(value, dict):
            found |= set(COMMIT.findall(json.dumps({k: v for k, v in value.items() if not isinstance(v, list)
                                                    or len(json.dumps(v)) < 2000})))
    return found


def vector_files() -> list[Path]:
    """Every JSON data file under tests/ whose headers name an upstream commit: what a benchmark's own code made."""
    found = []
    for path in sorted(ROOT.glob("tests/**/data/**/*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and upstream_commits(data):
            found.append(path)
    return found


VECTOR_FILES = vector_files()


def test_the_vector_files_are_found():
    names = {p.name for p in VECTOR_FILES}
    assert {"tir_bench_score_vectors.json", "vtc_bench_score_vectors.json", "visualtoolbench_score_vectors.json",
            "agentic_mme_score_vectors.json", "manifest.json"} <= names, names
    assert len(VECTOR_FILES) >= 11


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_vector_file_names_its_generator_commit_and_versions(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    generator = data.get("generator")
    assert isinstance(generator, dict), f"{path.name}: no top-level 'generator' header (see scripts/reference/)"
    script = ROOT / generator["script"]
    assert script.parent == SCRIPTS and script.is_file(), generator["script"]
    source = script.read_text(encoding="utf-8")
    assert str(path.relative_to(ROOT)) in source or str(path.parent.relative_to(ROOT)) in source, \
        "the script names the file it writes"
    assert generator["commit"] in source and generator["repo"] in source, "the header is the script's own"
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", generator["repo"]), generator["repo"]
    assert COMMIT.fullmatch(generator["commit"]), generator["commit"]
    assert upstream_commits(data) == {generator["commit"]}, "every header names the same upstream commit"
    versions = generator["versions"]
    assert re.fullmatch(r"3\.\d+\.\d+", versions["python"]) and len(versions) >= 2, versions
    assert all(isinstance(v, str) and v and v != "not installed" for v in versions.values()), versions


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_list_of_cases_is_empty(path):
    """The tests loop over these lists: an empty one would let them pass without comparing anything."""
    data = json.loads(path.read_text(encoding="utf-8"))
    assert not [key for key, value in data.items() if isinstance(value, list) and not value]


def test_every_generator_makes_a_committed_vector_file():
    named = {json.loads(p.read_text(encoding="utf-8"))["generator"]["script"] for p in VECTOR_FILES}
    scripts = {str(p.relative_to(ROOT)) for p in SCRIPTS.glob("*.py") if p.name != "common.py"}
    assert scripts == named


def test_no_package_imports_the_generators():
    for package in PACKAGES:
        sources = list((ROOT / package).rglob("*.py"))
        assert sources, package
        for source in sources:
            text = source.read_text(encoding="utf-8")
            assert "scripts.reference" not in text and "scripts/reference" not in text, source


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("bare", [False, True], ids=["clone", "bare mirror"])
def test_checkout_extracts_the_tree_at_the_commit(tmp_path, bare):
    origin = tmp_path / "origin"
    (origin / "bin").mkdir(parents=True)
    git("init", "-q", cwd=origin)
    (origin / "score.py").write_text("VERSION = 1\n")
    (origin / "bin" / "run").write_text("#!/bin/sh\n")
    (origin / "bin" / "run").chmod(0o755)
    (origin / "font.ttf").write_bytes(b"\0" * 100)
    git("add", ".", cwd=origin)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=origin)
    first = git("rev-parse", "HEAD", cwd=origin)
    (origin / "score.py").write_text("VERSION = 2\n")
    (origin / "later.py").write_text("")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two", cwd=origin)
    source = origin
    if bare:
        source = tmp_path / "mirror.git"
        git("clone", "-q", "--bare", str(origin), str(source), cwd=tmp_path)
    tree = common.checkout("https://github.com/unused/unused", first, str(source), tmp_path / "scratch")
    assert sorted(p.name for p in tree.iterdir()) == ["bin", "font.ttf", "score.py"]
    assert (tree / "score.py").read_text() == "VERSION = 1\n"
    assert (tree / "bin" / "run").stat().st_mode & 0o111


def test_checkout_leaves_out_what_the_source_lacks(tmp_path, capsys):
    origin = tmp_path / "origin"
    origin.mkdir()
    git("init", "-q", cwd=origin)
    (origin / "score.py").write_text("VERSION = 1\n")
    (origin / "font.ttf").write_bytes(b"\0" * 100)
    git("add", ".", cwd=origin)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=origin)
    blob = git("rev-parse", "HEAD:font.ttf", cwd=origin)
    (origin / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # a snapshot without its largest files
    tree = common.checkout("https://github.com/unused/unused", git("rev-parse", "HEAD", cwd=origin), str(origin),
                           tmp_path / "scratch")
    assert sorted(p.name for p in tree.iterdir()) == ["score.py"]
    assert "font.ttf" in capsys.readouterr().err


def test_check_compares_meaning_not_container_bytes(tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    np.savez(a, x=np.arange(4, dtype=np.uint8))
    np.savez(b, x=np.arange(4, dtype=np.uint8))
    assert common.same(a, b)
    np.savez(b, x=np.arange(4, dtype=np.int16))
    assert not common.same(a, b), "a dtype change is a change"
    np.savez(b, x=np.arange(4, dtype=np.uint8), y=np.zeros(1))
    assert not common.same(a, b), "an extra array is a change"
    g1, g2 = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    g1.write_bytes(gzip.compress(b"[1]", mtime=1))
    g2.write_bytes(gzip.compress(b"[1]", mtime=2))
    assert g1.read_bytes() != g2.read_bytes() and common.same(g1, g2)
    g2.write_bytes(gzip.compress(b"[2]", mtime=1))
    assert not common.same(g1, g2)
    j1, j2 = tmp_path / "a.json", tmp_path / "b.json"
    j1.write_text('{"a": 1}\n')
    j2.write_text('{"a":1}\n')
    assert not common.same(j1, j2), "a JSON file is compared byte for byte"
    assert not common.same(j1, tmp_path / "missing.json")
