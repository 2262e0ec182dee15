"""Write the viewer: one HTML file that opens from the file system, with no server and no network.

    report.html            the page: its script and style inline, and the index (one short row per episode)
    report_files/
      chunks/NNNNN.js      the episodes in full, CHUNK a file, loaded by the page when one is opened
      thumbs/<key>.jpg     a small picture of each episode's first image, for the list
      images/<key>.png     only for a dataset, whose images live inside its parquet files

The page links the run's own images (`images/<hash>.png`) and loads them when an episode is shown, so a
10,000-episode run opens as fast as its index parses. Chunks are JavaScript files (`<script src>`), which a
browser loads from file:// where it refuses fetch().
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

from PIL import Image

from viewer.episodes import clip

CHUNK = 25  # episodes a chunk file holds
THUMB = 96  # pixels, the longer side of a list thumbnail
SNIPPET = 300  # characters of the question, answer and truth the index keeps for search
STATIC = Path(__file__).parent / "static"
PLACEHOLDER = re.compile(r"\{\{(title|index)\}\}|/\*\{\{(style|script)\}\}\*/")


def assets_dir(html_path: Path) -> Path:
    return html_path.with_name(html_path.stem + "_files")


def write_viewer(html_path: str | Path, episodes: list[dict], title: str, note: str = "") -> Path:
    """Write the page and its chunk and thumbnail files for `episodes` (viewer.episodes' shape); returns the page."""
    html_path = Path(html_path)
    assets = assets_dir(html_path)
    assets.mkdir(parents=True, exist_ok=True)
    base = html_path.parent.resolve()
    links: dict[Path, str] = {}

    def link(path: Path) -> str:
        if path not in links:
            links[path] = quote(os.path.relpath(Path(path).resolve(), base).replace(os.sep, "/"))
        return links[path]

    thumbs = _thumbnails(episodes, assets / "thumbs")
    chunks = Path(tempfile.mkdtemp(prefix="chunks.", dir=assets))
    index = []
    for start in range(0, len(episodes), CHUNK):
        batch = [_detail(e, link) for e in episodes[start:start + CHUNK]]
        text = f"tirlabViewer.chunk({start // CHUNK}, {json.dumps(batch, allow_nan=False)});\n"
        (chunks / f"{start // CHUNK:05d}.js").write_text(text, encoding="utf-8")
    for k, episode in enumerate(episodes):
        thumb = thumbs.get(k)
        index.append(_row(episode, link(thumb) if thumb else None))
    old = assets / "chunks"
    if old.exists():  # the page and its chunks change together: a rebuilt page never reads an older chunk
        retired = Path(tempfile.mkdtemp(prefix="old.", dir=assets))
        os.replace(old, retired / "chunks")
        shutil.rmtree(retired)
    os.replace(chunks, old)
    title = clip(title, 500)
    data = {"title": title, "note": clip(note, 2_000), "chunk": CHUNK, "prefix": link(old) + "/", "rows": index}
    parts = {"title": html.escape(title), "index": _script_json(data),
             "style": (STATIC / "viewer.css").read_text(encoding="utf-8"),
             "script": (STATIC / "viewer.js").read_text(encoding="utf-8")}
    template = (STATIC / "viewer.html").read_text(encoding="utf-8")
    page = PLACEHOLDER.sub(lambda m: parts[m.group(1) or m.group(2)], template)  # one pass: no part fills another
    handle, tmp = tempfile.mkstemp(dir=html_path.parent, prefix=html_path.name + ".", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, html_path)
    return html_path


def _script_json(value) -> str:
    """JSON safe inside <script>: no "</script>" or "<!--" can end or bend the block, whatever a model wrote; ASCII,
    so no character of it can fail to encode."""
    return json.dumps(value, allow_nan=False).replace("<", "\\u003c")


def _row(episode: dict, thumb: str | None) -> dict:
    """An episode's line of the index: what the list shows, filters, sorts and searches."""
    row = {"id": episode["id"], "g": episode["group"], "cat": episode["category"], "st": episode["status"],
           "score": episode["score"], "stop": episode["stop"], "tools": episode["tools"], "calls": episode["calls"],
           "turns": episode["turns"], "q": episode["question"][:SNIPPET], "pred": episode["prediction"][:SNIPPET],
           "truth": episode["truth"][:SNIPPET], "thumb": thumb}
    tokens = [t for t in (episode["prompt_tokens"], episode["completion_tokens"]) if t is not None]
    optional = {"tok": sum(tokens) if tokens else None, "lat": episode["latency"], "step": episode["step"],
                "rew": episode["reward"]}
    row.update({k: v for k, v in optional.items() if v is not None})
    return row


def _detail(episode: dict, link) -> dict:
    def part(p: dict) -> dict:
        return {"image": link(p["image"])} if "image" in p else p

    messages = [{**m, "parts": [part(p) for p in m["parts"]],
                 "calls": [{**c, "region": c["region"] and {**c["region"], "image": link(c["region"]["image"])}}
                           for c in m["calls"]]} for m in episode["messages"]]
    return {**{k: v for k, v in episode.items() if k not in ("messages", "record")}, "messages": messages,
            "record": json.dumps(episode["record"], ensure_ascii=False, indent=1, default=str)[:50_000]}


def _thumbnails(episodes: list[dict], folder: Path) -> dict[int, Path]:
    """Episode number -> thumbnail of its first image; made once per image (a rebuilt page reuses them)."""
    firsts = {}
    for k, episode in enumerate(episodes):
        first = next((p["image"] for m in episode["messages"] for p in m["parts"] if "image" in p), None)
        if first is not None:
            firsts[k] = first
    folder.mkdir(parents=True, exist_ok=True)
    targets = {source: folder / f"{Path(source).stem}.jpg" for source in set(firsts.values())}
    missing = [(source, target) for source, target in targets.items() if not target.exists()]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        made = dict(zip(missing, pool.map(_thumbnail, missing)))
    return {k: targets[source] for k, source in firsts.items() if made.get((source, targets[source]), True)}


def _thumbnail(job: tuple[Path, Path]) -> bool:
    source, target = job
    try:
        with Image.open(source) as image:
            image.draft("RGB", (THUMB, THUMB))
            image.thumbnail((THUMB, THUMB))
            picture = image.convert("RGB")
        tmp = target.with_suffix(f".tmp{os.getpid()}.jpg")
        picture.save(tmp, format="JPEG", quality=80)
        os.replace(tmp, target)
        return True
    except (OSError, ValueError, Image.DecompressionBombError):  # an unreadable image gets no thumbnail
        return False
