"""The trajectory viewer: a static HTML page per evaluation run (`report.html`), GRPO rollout folder and data_gen
export that shows every episode (question, images, each turn, each call and the region it named, the tools' text
and images, answer, truth, score), finds episodes by filters and search, and sets two runs (or modes, steps,
forms) side by side per task. It opens from the file system: no server, no network.

    python -m viewer runs/qwen25vl-tir                         # -> runs/qwen25vl-tir/report.html
    python -m viewer runs/with-tools runs/no-tools --out runs/compare.html
    python -m viewer out/grpo/rollouts                         # -> out/grpo/rollouts/viewer.html
    python -m viewer data/pilot                                # both forms of a pilot export, side by side

`viewer.episodes` reads each kind of folder into one episode shape; `viewer.page` writes the page.
"""

from __future__ import annotations

from pathlib import Path

from viewer.episodes import ViewerError, kind, load
from viewer.page import assets_dir, write_viewer

PAGE_NAMES = {"run": "report.html", "rollouts": "viewer.html", "dataset": "viewer.html", "datasets": "viewer.html"}


def default_page(path: str | Path) -> Path:
    """Where the viewer of one folder goes: a run's report.html, a rollout folder's or export's viewer.html."""
    return Path(path) / PAGE_NAMES[kind(Path(path))]


def view(paths: list[str | Path], out: str | Path | None = None, title: str | None = None,
         limit: int | None = None) -> Path:
    """Write the viewer of one folder or, aligned per task, several; returns the page. `limit`: the rows of each
    dataset split to show (None: all; a dataset's images are copied out of its parquet files for the page)."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise ViewerError("name a run directory, a rollouts folder or a data_gen export to view")
    if out is None and len(paths) > 1:
        raise ViewerError("several folders make one page: say where it goes with --out, e.g. --out runs/compare.html")
    out = Path(out) if out is not None else default_page(paths[0])
    names = _source_names(paths) if len(paths) > 1 else [None]
    episodes = [e for path, name in zip(paths, names) for e in load(path, assets_dir(out) / "images", name, limit)]
    if not episodes:
        raise ViewerError(f"no episodes in {', '.join(map(str, paths))}")
    note = f"{kind(paths[0])}: {paths[0]}" if len(paths) == 1 else "side by side: " + ", ".join(names)
    if limit is not None and any(kind(p).startswith("dataset") for p in paths):
        note += f" (the first {limit} rows of each split)"
    return write_viewer(out, episodes, title or " vs ".join(p.resolve().name for p in paths), note)


def _source_names(paths: list[Path]) -> list[str]:
    """Short distinct names: the folder names, with their parents where two are alike."""
    names = [p.resolve().name for p in paths]
    if len(set(names)) < len(names):
        names = ["/".join(p.resolve().parts[-2:]) for p in paths]
    if len(set(names)) < len(names):
        names = [f"{k + 1}: {name}" for k, name in enumerate(names)]
    return names


__all__ = ["ViewerError", "default_page", "view", "write_viewer"]
