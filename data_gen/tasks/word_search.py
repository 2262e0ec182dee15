"""Word search (TIR-Bench): a grid of one character repeated many times, with a few look-alike characters
hidden in it; the model finds where the odd one is, or counts how often it appears.

The grid is ROWS x COLS equal cells (easy 8-12, medium 15-30, hard 31-70 rows and columns, drawn
separately; TIR-Bench's grids run up to 69) in one of `data_gen.text.fonts()` at a seeded size, ink and
paper colour. Every cell holds the same render of the base character, except the odd cells, which hold
the render of its look-alike: a confusable pair (O/Q, E/F, P/R, C/G, 6/8, 5/S, 0/O, 1/l, I/l, m/n, u/v,
M/N, b/h, 7/1, Z/2, B/8, either way round) that is kept only where, in the chosen font, the two glyphs'
shapes differ by at most MAX_SHAPE_DIFF of their ink (near-identical) but by at least MIN_SHAPE_DIFF,
and, as rendered and zoomed for the crops, on at least MIN_CELL_DIFF source pixels' worth away from the
cell rim (distinguishable; DejaVu Sans's identical I and l, for one, never pair).

Two question forms, with TIR-Bench's wording (`kind`; "mixed" draws one per seed):
- "position": exactly one odd cell; answer "[row, col]" (1-based, rows from the top, columns from the
  left), scorer json_list.
- "count": 0..MAX_ODD[difficulty] odd cells; answer the integer, scorer numeric.

Reference (tool set "default"): for "position", one `crop` of a window of a few cells around the odd
character (the odd cell anywhere in the window) zoomed by an integer `scale`; for "count", a zoomed scan:
`crop`s of cell-aligned blocks that tile the whole grid (absence can only be shown by looking
everywhere). Every box is cell-aligned, so each zoomed cell occupies an exact block of the crop.

Audit: the task image is the grid the meta describes (re-rendered from font, size, characters, colours,
geometry and odd positions); the two glyphs are distinguishable at the crops' zoom; every crop is a
cell-aligned block of image 0 at the stated zoom and is classified cell by cell against the zoomed renders
of the base and the odd glyph (away from the cell rim, where zooming mixes in neighbours: a cell must match
one glyph on the pixels that tell them apart and on the ink, and clearly not the other); no crop shows the
odd glyph in a base cell or the base glyph in an odd cell; a position crop contains the odd glyph; every
odd cell lies in a crop (and the count scan covers every cell); the answer equals what the crops show.
"""

from __future__ import annotations

import functools
import json
import math
import random

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from data_gen.sample import AuditError, Sample, require_choice, require_seed
from data_gen.text import fonts

NAME = "word_search"
KINDS = ("position", "count", "mixed")
SCORERS = {"position": "json_list", "count": "numeric"}  # eval.scorers
GRID = {"easy": (8, 12), "medium": (15, 30), "hard": (31, 70)}  # rows and columns, each drawn in this range
FONT_SIZE = {"easy": (28, 40), "medium": (20, 30), "hard": (15, 22)}
MAX_ODD = {"easy": 4, "medium": 8, "hard": 12}  # count questions: 0..MAX_ODD odd characters
PAIRS = ("OQ", "EF", "PR", "CG", "68", "5S", "0O", "1l", "Il", "mn", "uv", "MN", "bh", "71", "Z2", "B8")
SHAPE_SIZE = 48  # font size at which a pair's shapes are compared
MAX_SHAPE_DIFF = 0.6  # near-identical: differing ink / union of ink at SHAPE_SIZE
MIN_SHAPE_DIFF = 0.05  # ... but not the same glyph (DejaVu Sans draws I and l alike)
MIN_CELL_DIFF = 6  # clearly different pixels (gray difference > INK_STEP) between the two cells as rendered
INK_STEP = 48  # a pixel differs when a channel differs by more than this (of 0-255)
SCAN_BLOCK = 480  # the count scan crops blocks of at most this many pixels a side ...
SCAN_SCALE = 2  # ... zoomed by this factor
ZOOM_CELL = 96  # the position crop zooms a cell to about this many pixels high
WINDOW = (3, 5)  # the position crop spans this many cells a side (fewer where the grid is smaller)
# A crop cell is a glyph when it differs from its zoomed render on at most MATCH_TOLERANCE of the telling
# pixels and of the ink, and from the other glyph on at least MIN_MISMATCH of the telling pixels.
MATCH_TOLERANCE = 0.2
MIN_MISMATCH = 0.8
QUESTIONS = {
    "position": ("In the figure, in which row and column does the {what} {char} appear? The final answer should "
                 "output two number list. The first number represents the row count from top to bottom, and the "
                 "second number represents the column count from left to right. For example, [1, 2] means the "
                 "first row and the second column."),
    "count": "How many times does the {what} {char} appear in this image? Answer with an integer, such as 1,2,3.",
}


def generate(seed: int, difficulty: str = "medium", kind: str = "mixed") -> Sample:
    require_choice("difficulty", difficulty, GRID)
    require_choice("kind", kind, KINDS)
    require_seed(seed)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}:{kind}")
    if kind == "mixed":
        kind = rng.choice(("position", "count"))
    size = rng.randint(*FONT_SIZE[difficulty])
    font = rng.choice(fonts())
    rows, cols = rng.randint(*GRID[difficulty]), rng.randint(*GRID[difficulty])
    ink = [rng.randint(0, 70) for _ in range(3)]
    paper = [rng.randint(220, 255) for _ in range(3)]
    meta = {"seed": seed, "difficulty": difficulty, "kind": kind, "rows": rows, "cols": cols, "font": font.name,
            "size": size, "ink": ink, "paper": paper}
    candidates = [p for p in PAIRS if _shapes_close(font, p)]
    rng.shuffle(candidates)
    for pair in candidates:  # the first near-identical pair that is also distinguishable as rendered
        base, odd = pair if rng.random() < 0.5 else pair[::-1]
        cell, anchor = _cell(font, size, pair)
        scale = max(2, min(8, round(ZOOM_CELL / cell[1]))) if kind == "position" else SCAN_SCALE
        meta.update(base=base, odd=odd, cell=list(cell), anchor=list(anchor), scale=scale)
        if _separable(meta):
            break
    else:  # pragma: no cover - every font keeps several pairs at every size (tested)
        raise RuntimeError(f"{NAME}: no distinguishable pair in {font.name} at {size} px")
    cw, ch = cell
    meta["origin"] = [rng.randint(cw // 2, cw), rng.randint(ch // 2, ch)]
    n_odd = 1 if kind == "position" else rng.randint(0, MAX_ODD[difficulty])
    cells = sorted(rng.sample(range(rows * cols), n_odd))
    meta["odd_positions"] = positions = [[c // cols + 1, c % cols + 1] for c in cells]
    image = _compose(meta)
    if kind == "position":
        (r, c), = positions
        calls = (_crop(meta, *_window(rng, r - 1, rows, WINDOW), *_window(rng, c - 1, cols, WINDOW), scale),)
        answer = json.dumps([r, c])
    else:
        calls = tuple(_crop(meta, r1, r2, c1, c2, SCAN_SCALE) for r1, r2 in _split(rows, SCAN_BLOCK // ch)
                      for c1, c2 in _split(cols, SCAN_BLOCK // cw))
        answer = str(n_odd)
    what = "number" if odd.isdigit() else "letter"
    return Sample(
        task=NAME, id=f"{NAME}-{difficulty}-{kind}-{seed}", image=image,
        question=QUESTIONS[kind].format(what=what, char=odd), answer=answer, scorer=SCORERS[kind],
        toolset="default", calls=calls, meta=meta,
    )


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    m = sample.meta
    rows, cols, (cw, ch), scale = m["rows"], m["cols"], m["cell"], m["scale"]
    if not np.array_equal(workspace[0], sample.image):
        raise AuditError(f"{sample.id}: workspace image 0 is not the task image")
    expected = _compose(m)
    if sample.image.shape != expected.shape or not np.array_equal(sample.image, expected):
        raise AuditError(f"{sample.id}: the image is not the grid its meta describes (base {m['base']!r}, "
                         f"odd {m['odd']!r} at {m['odd_positions']})")
    truth = np.zeros((rows, cols), bool)  # where the grid has the odd glyph
    for r, c in m["odd_positions"]:
        truth[r - 1, c - 1] = True
    base_zoom, odd_zoom = _zoomed(_tile(m, m["base"]), scale), _zoomed(_tile(m, m["odd"]), scale)
    telling = _differ(base_zoom, odd_zoom)  # the pixels that tell the two glyphs apart
    if not _separable(m):
        raise AuditError(f"{sample.id}: {m['base']!r} and {m['odd']!r} are not distinguishable in this font")
    crops = workspace[1:]
    if len(crops) != len(sample.calls):
        raise AuditError(f"{sample.id}: {len(sample.calls)} reference calls made {len(crops)} images")
    seen = np.zeros((rows, cols), bool)  # odd glyphs the crops show
    covered = np.zeros((rows, cols), bool)
    for k, (call, crop) in enumerate(zip(sample.calls, crops)):
        args = call["arguments"]
        if call["name"] != "crop" or args.get("image_index", -1) != 0 or args.get("scale") != scale:
            raise AuditError(f"{sample.id}: call {k} is not a crop of image 0 zoomed by {scale}: {call}")
        r1, r2, c1, c2 = _cells_of(m, args["box"], sample.id, k)
        if crop.shape != ((r2 - r1) * ch * scale, (c2 - c1) * cw * scale, 3):
            raise AuditError(f"{sample.id}: crop {k} has shape {crop.shape}, not the zoomed box {args['box']}")
        kinds = _classify(crop, r2 - r1, c2 - c1, base_zoom, odd_zoom, telling, scale)
        if (kinds < 0).any():
            r, c = (int(v) for v in np.argwhere(kinds < 0)[0])
            raise AuditError(f"{sample.id}: crop {k} cell [{r1 + r + 1}, {c1 + c + 1}] shows neither "
                             f"{m['base']!r} nor {m['odd']!r}")
        wrong = (kinds == 1) != truth[r1:r2, c1:c2]
        if wrong.any():
            r, c = (int(v) for v in np.argwhere(wrong)[0])
            shown = m["odd"] if kinds[r, c] == 1 else m["base"]
            raise AuditError(f"{sample.id}: crop {k} shows {shown!r} at [{r1 + r + 1}, {c1 + c + 1}], where the "
                             f"grid has the other glyph")
        if m["kind"] == "position" and not (kinds == 1).any():
            raise AuditError(f"{sample.id}: crop {k} {args['box']} does not contain the odd glyph {m['odd']!r}")
        covered[r1:r2, c1:c2] = True
        seen[r1:r2, c1:c2] |= kinds == 1
    if (truth & ~covered).any():
        missed = [[int(r) + 1, int(c) + 1] for r, c in np.argwhere(truth & ~covered)]
        raise AuditError(f"{sample.id}: the odd glyph at {missed} is not covered by any crop")
    shown = [[int(r) + 1, int(c) + 1] for r, c in np.argwhere(seen)]
    if m["kind"] == "count":
        if not covered.all():
            raise AuditError(f"{sample.id}: the scan covers {int(covered.sum())} of the {rows * cols} cells")
        if sample.answer.strip() != str(len(shown)):
            raise AuditError(f"{sample.id}: the answer {sample.answer!r} is not the {len(shown)} odd glyphs "
                             f"the crops show")
    elif len(shown) != 1 or sample.answer != json.dumps(shown[0]):
        raise AuditError(f"{sample.id}: the answer {sample.answer!r} is not the odd glyph's cell the crops "
                         f"show {shown}")


# -- rendering ------------------------------------------------------------------------------------------
@functools.cache
def _font_path(name: str):
    for path in fonts():
        if path.name == name:
            return path
    raise AuditError(f"font {name!r} is not installed")


@functools.lru_cache(maxsize=64)
def _face(path, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(path), size)


@functools.lru_cache(maxsize=4096)
def _coverage(path, size: int, char: str, cw: int, ch: int, ax: int, ay: int) -> np.ndarray:
    """The glyph's ink coverage (0 = paper, 1 = ink) in a cw x ch cell, anchored at its middle-baseline (ax, ay)."""
    canvas = Image.new("L", (cw, ch), 0)
    ImageDraw.Draw(canvas).text((ax, ay), char, font=_face(path, size), fill=255, anchor="ms")
    coverage = np.asarray(canvas, np.float32) / 255.0
    coverage.flags.writeable = False
    return coverage


@functools.cache
def _cell(font, size: int, pair: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """Cell size [cw, ch] and glyph anchor [ax, ay] that fit both glyphs of the pair with room around them."""
    face = _face(font, size)
    boxes = [face.getbbox(char, anchor="ms") for char in pair]
    left, top = min(b[0] for b in boxes), min(b[1] for b in boxes)
    right, bottom = max(b[2] for b in boxes), max(b[3] for b in boxes)
    gap_x, gap_y = max(6, size // 3), max(6, size // 4)
    half = max(-left, right) + gap_x // 2  # the anchor is the horizontal middle of the cell
    cw, ch = 2 * half, bottom - top + gap_y
    return (cw, ch), (half, gap_y // 2 - top)


def _tile(meta: dict, char: str) -> np.ndarray:
    (cw, ch), (ax, ay) = meta["cell"], meta["anchor"]
    coverage = _coverage(_font_path(meta["font"]), meta["size"], char, cw, ch, ax, ay)[..., None]
    paper, ink = np.array(meta["paper"], np.float32), np.array(meta["ink"], np.float32)
    return np.rint(paper + (ink - paper) * coverage).astype(np.uint8)


def _compose(meta: dict) -> np.ndarray:
    rows, cols, (cw, ch), (x0, y0) = meta["rows"], meta["cols"], meta["cell"], meta["origin"]
    base, odd = _tile(meta, meta["base"]), _tile(meta, meta["odd"])
    grid = np.tile(base, (rows, cols, 1))
    for r, c in meta["odd_positions"]:
        grid[(r - 1) * ch:r * ch, (c - 1) * cw:c * cw] = odd
    return cv2.copyMakeBorder(grid, y0, y0, x0, x0, cv2.BORDER_CONSTANT, value=tuple(meta["paper"]))


@functools.cache
def _shapes_close(font, pair: str) -> bool:
    """Near-identical shapes (but not the same glyph), compared at SHAPE_SIZE."""
    face = _face(font, SHAPE_SIZE)
    masks = []
    for char in pair:
        canvas = Image.new("L", (3 * SHAPE_SIZE, 3 * SHAPE_SIZE), 0)
        ImageDraw.Draw(canvas).text((1.5 * SHAPE_SIZE, 2 * SHAPE_SIZE), char, font=face, fill=255, anchor="ms")
        masks.append(np.asarray(canvas) >= 128)
    a, b = masks
    return MIN_SHAPE_DIFF <= (a ^ b).sum() / max(1, (a | b).sum()) <= MAX_SHAPE_DIFF


def _separable(meta: dict) -> bool:
    """Whether the zoomed base and odd cells differ clearly on at least MIN_CELL_DIFF source pixels' worth
    away from the cell's rim (what the audit compares)."""
    scale = meta["scale"]
    telling = _differ(_zoomed(_tile(meta, meta["base"]), scale), _zoomed(_tile(meta, meta["odd"]), scale))
    return int(_inner(telling, scale).sum()) >= MIN_CELL_DIFF * scale * scale


# -- reference and audit helpers ------------------------------------------------------------------------
def _window(rng: random.Random, index: int, count: int, span: tuple[int, int]) -> tuple[int, int]:
    """A run of a few cells [first, last) containing `index`, inside [0, count)."""
    length = min(count, rng.randint(*span))
    first = rng.randint(max(0, index - length + 1), min(index, count - length))
    return first, first + length


def _split(count: int, block: int) -> list[tuple[int, int]]:
    """[0, count) cut into ceil(count / block) near-equal runs."""
    parts = math.ceil(count / max(1, block))
    edges = [round(i * count / parts) for i in range(parts + 1)]
    return list(zip(edges[:-1], edges[1:]))


def _crop(meta: dict, r1: int, r2: int, c1: int, c2: int, scale: int) -> dict:
    (cw, ch), (x0, y0) = meta["cell"], meta["origin"]
    box = [x0 + c1 * cw, y0 + r1 * ch, x0 + c2 * cw, y0 + r2 * ch]
    return {"name": "crop", "arguments": {"image_index": 0, "box": box, "scale": scale}}


def _cells_of(meta: dict, box, sample_id: str, k: int) -> tuple[int, int, int, int]:
    (cw, ch), (x0, y0) = meta["cell"], meta["origin"]
    x1, y1, x2, y2 = box
    c1, c2, r1, r2 = (x1 - x0) / cw, (x2 - x0) / cw, (y1 - y0) / ch, (y2 - y0) / ch
    inside = 0 <= c1 < c2 <= meta["cols"] and 0 <= r1 < r2 <= meta["rows"]
    if not inside or not all(float(v).is_integer() for v in (c1, c2, r1, r2)):
        raise AuditError(f"{sample_id}: crop {k} box {box} is not a block of whole cells inside the grid")
    return int(r1), int(r2), int(c1), int(c2)


def _zoomed(tile: np.ndarray, scale: int) -> np.ndarray:
    return cv2.resize(tile, (tile.shape[1] * scale, tile.shape[0] * scale), interpolation=cv2.INTER_LINEAR)


def _inner(image: np.ndarray, scale: int) -> np.ndarray:
    """A zoomed cell without its rim, where linear zooming mixes in the neighbouring cells."""
    return image[scale + 1:-(scale + 1), scale + 1:-(scale + 1)]


def _differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=2) > INK_STEP


def _classify(crop: np.ndarray, rows: int, cols: int, base: np.ndarray, odd: np.ndarray, telling: np.ndarray,
              scale: int) -> np.ndarray:
    """Each zoomed cell of a cell-aligned crop: 1 = the odd glyph, 0 = the base glyph, -1 = neither (or too
    close to call). Away from the cell's rim, a cell is a glyph when it matches that glyph's zoomed render
    both on the pixels that tell the two glyphs apart (and there clearly not the other glyph) and on the
    glyphs' ink (sampled once per source pixel), all on the colour channel with the most contrast."""
    height, width = base.shape[:2]
    wide_base, wide_odd = base.astype(np.int16), odd.astype(np.int16)
    channel = int(np.argmax(np.abs(wide_base - wide_odd)[telling].sum(axis=0)))
    cells = crop[..., channel].reshape(rows, height, cols, width)
    rim = np.zeros(telling.shape, bool)
    rim[scale + 1:-(scale + 1), scale + 1:-(scale + 1)] = True
    paper = wide_base[0, 0]
    ink = (np.abs(wide_base - paper).max(axis=2) > INK_STEP) | (np.abs(wide_odd - paper).max(axis=2) > INK_STEP)
    sampled = np.zeros(telling.shape, bool)
    sampled[scale // 2::scale, scale // 2::scale] = True
    kinds = np.full((rows, cols), -1, np.int8)
    tests = []
    for mask in (telling & rim, ink & sampled & rim):
        ys, xs = np.nonzero(mask)
        if not len(ys):
            return kinds
        pixels = cells[:, ys, :, xs].astype(np.int16)  # (len(ys), rows, cols)
        tests.append([(np.abs(pixels - glyph[ys, xs, channel][:, None, None]) > INK_STEP).sum(axis=0) / len(ys)
                      for glyph in (wide_base, wide_odd)])
    (tell_base, tell_odd), (ink_base, ink_odd) = tests
    kinds[(tell_base <= MATCH_TOLERANCE) & (ink_base <= MATCH_TOLERANCE) & (tell_odd >= MIN_MISMATCH)] = 0
    kinds[(tell_odd <= MATCH_TOLERANCE) & (ink_odd <= MATCH_TOLERANCE) & (tell_base >= MIN_MISMATCH)] = 1
    return kinds
