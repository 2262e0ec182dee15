"""What every reference-vector generator shares: the benchmark's repository at its pinned commit in a scratch
folder, a scratch virtual environment with the pinned libraries, the header each vector file carries, and
`--check` (regenerate into a temporary file and compare with the committed one).

A generator is one script per vector set. Run here, it orchestrates: it extracts the reference tree, builds (or
reuses) the scratch venv, then runs itself in that venv as the driver, which imports the reference code, reads the
committed inputs and writes the outputs. The reference code is never imported by tirlab's packages.

    python scripts/reference/<set>.py [--source GIT_DIR] [--check]

`--source` names a local clone or bare mirror holding the commit; without it the repository is fetched from GitHub
at the commit. The first run of a generator builds its scratch venv from PyPI.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def checkout(repo: str, commit: str, source: str | None, into: Path) -> Path:
    """The tree of `repo` at `commit`, extracted under `into`. A file whose content the source lacks (a snapshot
    without its largest files) is named on stderr and left out; a generator that needs it then fails loudly."""
    tree = into / "reference"
    tree.mkdir(parents=True)
    if source is None:
        subprocess.run(["git", "init", "-q", str(into / "git")], check=True)
        subprocess.run(["git", "-C", str(into / "git"), "fetch", "-q", "--depth", "1", repo, commit], check=True)
        source = str(into / "git" / ".git")
    git_dir = subprocess.run(["git", "-C", source, "rev-parse", "--absolute-git-dir"], check=True,
                             capture_output=True, text=True).stdout.strip()
    listing = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "-z", commit], check=True,
                             capture_output=True).stdout
    entries = []  # (mode, object id, path) of every file and symlink; submodules have no content here
    for line in listing.split(b"\0"):
        if line:
            meta, path = line.split(b"\t", 1)
            mode, kind, oid = meta.split()
            if kind == b"blob":
                entries.append((mode, oid, os.fsdecode(path)))
    batch = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "--batch"], check=True, capture_output=True,
                           input=b"".join(oid + b"\n" for _, oid, _ in entries)).stdout
    missing, at = [], 0
    for mode, oid, path in entries:
        end = batch.index(b"\n", at)
        fields = batch[at:end].split()
        at = end + 1
        if fields[-1] == b"missing":
            missing.append(path)
            continue
        content = batch[at:at + int(fields[2])]
        at += int(fields[2]) + 1
        target = tree / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == b"120000":
            target.symlink_to(os.fsdecode(content))
        else:
            target.write_bytes(content)
            if mode == b"100755":
                target.chmod(0o755)
    if missing:
        print(f"not in the source, left out: {', '.join(missing)}", file=sys.stderr)
    return tree


def scratch_venv(requirements: list[str], python: str = sys.executable) -> Path:
    """The python of a venv holding `requirements` (pinned `name==version` lines; what they pull in is resolved
    by pip), built once per interpreter version and requirement list, and reused. Built in a folder of its own and
    moved into place, so a failed or concurrent build never leaves a half-made venv to reuse."""
    identity = subprocess.run([python, "-c", "import sys; print(sys.executable, sys.version)"], check=True,
                              capture_output=True, text=True).stdout
    key = hashlib.sha256("\n".join([identity, *sorted(requirements)]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("TIRLAB_REFERENCE_CACHE", Path.home() / ".cache" / "tirlab-reference"))
    venv = cache / f"venv-{key}"
    if not venv.exists():
        cache.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f"venv-{key}-", dir=cache))
        try:
            subprocess.run([python, "-m", "venv", str(building)], check=True)
            subprocess.run([str(building / "bin" / "python"), "-m", "pip", "install", "--quiet",
                            "--disable-pip-version-check", *requirements], check=True)
            building.rename(venv)  # a venv finds its prefix from where its pyvenv.cfg lies, so it can move
        except OSError:
            if not venv.exists():  # not a concurrent build that finished first
                raise
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return venv / "bin" / "python"


def versions(packages: list[str]) -> dict[str, str]:
    """Python's version and each installed distribution's, as the driver sees them."""
    found = {"python": sys.version.split()[0]}
    for package in packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def header(script: str, repo: str, commit: str, packages: list[str]) -> dict:
    """The `generator` entry of a vector file: who made it, from which upstream commit, with which libraries."""
    return {"script": str(Path(script).resolve().relative_to(ROOT)), "repo": repo, "commit": commit,
            "versions": versions(packages)}


def main(script: str, repo: str, commit: str, requirements: list[str], outputs: list[str]) -> None:
    """Orchestrates a generator: `outputs` are the committed files (relative to the repository root) it rewrites.
    The driver is the same script run as `script --driver TREE OUT_DIR` in the scratch venv; it writes each output
    under OUT_DIR with the same relative path."""
    parser = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", help="a local clone or bare mirror of the reference repository")
    parser.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tirlab-reference-") as scratch:
        scratch = Path(scratch)
        tree = checkout(repo, commit, args.source, scratch)
        python = scratch_venv(requirements)
        out = scratch / "out"
        # a fixed hash seed: a reference output that follows a set's order is the same on every run
        subprocess.run([str(python), str(Path(script).resolve()), "--driver", str(tree), str(out)], check=True,
                       cwd=scratch, env={**os.environ, "PYTHONHASHSEED": "0"})
        unmade = [name for name in outputs if not (out / name).is_file()]
        if unmade:
            sys.exit("the driver did not write: " + ", ".join(unmade))
        differ = []
        for name in outputs:
            made, committed = out / name, ROOT / name
            if args.check:
                if not same(made, committed):
                    differ.append(name)
            else:
                committed.parent.mkdir(parents=True, exist_ok=True)
                committed.write_bytes(made.read_bytes())
        if differ:
            made_with = subprocess.run([str(python), "-c", "import sys; print(sys.version.split()[0])"],
                                       capture_output=True, text=True).stdout.strip()
            sys.exit(f"differs from the committed file: {', '.join(differ)} (made here with Python {made_with}; "
                     "the committed files name their versions in their 'generator' header)")
        print(("unchanged: " if args.check else "written: ") + ", ".join(outputs))


def same(made: Path, committed: Path) -> bool:
    """Byte equality, except what carries no meaning: the arrays of an .npz (its zip entries hold a time) and the
    content of a .gz (its header holds one)."""
    if not committed.exists():
        return False
    if made.suffix == ".npz":
        import numpy as np  # only drivers that write arrays have numpy

        with np.load(made) as a, np.load(committed) as b:
            return sorted(a.files) == sorted(b.files) and all(
                a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and np.array_equal(a[k], b[k]) for k in a.files)
    if made.suffix == ".gz":
        import gzip

        return gzip.decompress(made.read_bytes()) == gzip.decompress(committed.read_bytes())
    return made.read_bytes() == committed.read_bytes()


def write_json(out_dir: str, name: str, data: dict, indent: int | None = 1) -> None:
    """Writes one output of the driver, as the committed files are written (UTF-8, a final newline)."""
    path = Path(out_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
