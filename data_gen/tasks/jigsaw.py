"""Jigsaw (TIR-Bench's jigsaw game): an image cut into an N x N grid of equal tiles that were shuffled;
the model gives the permutation that restores it.

The source image is procedural and seeded: a smooth four-corner colour gradient, translucent outlined
shapes over it (ellipses, rectangles, polygons, thick lines) and words from `data_gen.text` in its fonts,
so that every tile is distinguishable (generation retries until all N*N tiles differ, which makes the
answer unique). Width and height are multiples of N, so every tile is exactly (W/N) x (H/N) pixels.
N = 3 (easy), 4 (medium), 5 or 6 (hard; TIR-Bench uses 3x3 to 6x6 grids).

Answer convention (also in the question text): tiles are numbered row-major (left to right, top to
bottom) from `base` (0 by default; TIR-Bench numbers pieces from 1), both in the shuffled image and in
the original; the answer is a JSON list with answer[i] = the number of the shuffled tile that belongs
at position i of the original image. So original tile i == shuffled tile answer[i] - base.

The reference calls `crop` (tool set "default", image_index 0, pixel box) on each shuffled tile in the
order that restores the image: N*N calls, the k-th cropping shuffled tile answer[k]. The audit checks
that the crops are exactly the tiles, that they assembled row-major in call order equal the original
(kept in `evidence["original"]`) pixel for pixel, that the answer is a permutation which, applied to the
shuffled image, also restores the original, and that the original's tiles are pairwise distinct.
N*N calls (up to 36, with 37 images) exceed the stock reference profile's budgets (10 turns, 20 calls,
32 images) for N >= 4: replaying them needs budgets that scale with the number of calls.
"""

from __future__ import annotations

import functools
import json
import random

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from data_gen.sample import AuditError, Sample, require_choice
from data_gen.text import fonts, words

NAME = "jigsaw"
SCORER = "json_list"  # eval.scorers (exact list; TIR-Bench itself scores per-position accuracy)
GRID = {"easy": (3,), "medium": (4,), "hard": (5, 6)}
SIDE = (264, 432)  # width and height are drawn in this range, then rounded down to a multiple of N
MAX_ATTEMPTS = 8  # redraws of the source image until all tiles differ (practically always the first)
QUESTION = (
    "The image has been cut into a {n}x{n} grid of equal tiles ({tw}x{th} pixels each) and the tiles "
    "have been shuffled. Number the tiles row-major (left to right, top to bottom) from {first} to {last}, "
    "both in this shuffled image and in the original image. Restore the original image: answer with a "
    "JSON list of {count} numbers whose i-th element is the number of the shuffled tile that belongs at "
    "position i of the original image, e.g. {example}."
)


def generate(seed: int, difficulty: str = "medium", base: int = 0) -> Sample:
    require_choice("difficulty", difficulty, GRID)
    if base not in (0, 1) or isinstance(base, bool):
        raise ValueError(f"base must be 0 or 1 (the number of the first tile), got {base!r}")
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    n = rng.choice(GRID[difficulty])
    tw, th = rng.randint(*SIDE) // n, rng.randint(*SIDE) // n
    for attempt in range(MAX_ATTEMPTS):
        original, drawn = _source(rng, n * tw, n * th, n)
        tiles = _tiles(original, n)
        if _distinct(tiles):
            break
    else:  # pragma: no cover - a flat image every time; the gradient and shapes make this vanishingly rare
        raise RuntimeError(f"{NAME}: seed {seed} drew {MAX_ATTEMPTS} images with identical tiles")
    order = list(range(n * n))
    while order == sorted(order):  # never hand out the solved puzzle
        rng.shuffle(order)
    # order[i] = the shuffled slot that original tile i goes to; the answer inverts it.
    shuffled_tiles = [None] * (n * n)
    for i, slot in enumerate(order):
        shuffled_tiles[slot] = tiles[i]
    shuffled = _assemble(shuffled_tiles, n)
    answer = [order[i] + base for i in range(n * n)]  # answer[i] = slot of original tile i
    calls = tuple({"name": "crop", "arguments": {"image_index": 0, "box": _box(slot, n, tw, th)}} for slot in order)
    first, last = base, base + n * n - 1
    example = f"[{first + 2}, {first}, {last}, ...]"
    question = QUESTION.format(n=n, tw=tw, th=th, first=first, last=last, count=n * n, example=example)
    return Sample(
        task=NAME, id=f"{NAME}-{difficulty}-{seed}" + (f"-base{base}" if base else ""), image=shuffled,
        question=question, answer=json.dumps(answer), scorer=SCORER, toolset="default", calls=calls,
        evidence={"original": original},
        meta={"seed": seed, "difficulty": difficulty, "grid": n, "tile": [tw, th], "base": base,
              "attempts": attempt + 1, **drawn},
    )


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    original, n, base = sample.evidence["original"], sample.meta["grid"], sample.meta["base"]
    tw, th = sample.meta["tile"]
    if original.shape != (n * th, n * tw, 3) or sample.image.shape != original.shape:
        raise AuditError(f"{sample.id}: the images are not {n * tw}x{n * th} (an {n}x{n} grid of {tw}x{th} tiles)")
    if not np.array_equal(workspace[0], sample.image):
        raise AuditError(f"{sample.id}: workspace image 0 is not the shuffled image")
    tiles = _tiles(original, n)
    if not _distinct(tiles):
        raise AuditError(f"{sample.id}: two tiles of the original are identical, so the answer is not unique")
    crops = workspace[1:]
    if len(crops) != n * n:
        raise AuditError(f"{sample.id}: the reference made {len(crops)} images, not the {n * n} tiles")
    for i, crop in enumerate(crops):
        if crop.shape != tiles[i].shape or not np.array_equal(crop, tiles[i]):
            raise AuditError(f"{sample.id}: crop {i} is not tile {i} of the original (the restored image differs)")
    if not np.array_equal(_assemble(list(crops), n), original):  # pragma: no cover - implied by the tile loop
        raise AuditError(f"{sample.id}: the crops assembled row-major do not restore the original")
    try:
        answer = json.loads(sample.answer)
    except json.JSONDecodeError as error:
        raise AuditError(f"{sample.id}: the answer is not JSON: {error}") from None
    if not isinstance(answer, list) or sorted(a for a in answer if type(a) is int) != list(range(base, base + n * n)):
        raise AuditError(f"{sample.id}: the answer {sample.answer} is not a permutation of {base}..{base + n * n - 1}")
    shuffled = _tiles(sample.image, n)
    if not np.array_equal(_assemble([shuffled[a - base] for a in answer], n), original):
        raise AuditError(f"{sample.id}: the answer applied to the shuffled image does not restore the original")


def _box(slot: int, n: int, tw: int, th: int) -> list[int]:
    row, col = divmod(slot, n)
    return [col * tw, row * th, (col + 1) * tw, (row + 1) * th]


def _tiles(image: np.ndarray, n: int) -> list[np.ndarray]:
    h, w = image.shape[0] // n, image.shape[1] // n
    return [image[r * h:(r + 1) * h, c * w:(c + 1) * w] for r in range(n) for c in range(n)]


def _distinct(tiles: list[np.ndarray]) -> bool:
    return len({np.ascontiguousarray(t).tobytes() for t in tiles}) == len(tiles)


def _assemble(tiles: list[np.ndarray], n: int) -> np.ndarray:
    return np.concatenate([np.concatenate(tiles[r * n:(r + 1) * n], axis=1) for r in range(n)], axis=0)


def _color(rng: random.Random, low: int = 0, high: int = 255) -> tuple[int, int, int]:
    return tuple(rng.randint(low, high) for _ in range(3))


@functools.lru_cache(maxsize=1024)
def _font(path, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(path), size)


def _source(rng: random.Random, width: int, height: int, n: int) -> tuple[np.ndarray, dict]:
    """The unshuffled picture: gradient, shapes, words. Returns the image and what was drawn."""
    corners = np.array([_color(rng, 30, 225) for _ in range(4)], np.float32).reshape(2, 2, 3)
    y = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    x = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    top = corners[0, 0] * (1 - x) + corners[0, 1] * x
    bottom = corners[1, 0] * (1 - x) + corners[1, 1] * x
    gradient = np.rint(top * (1 - y) + bottom * y).astype(np.uint8)
    canvas = Image.fromarray(gradient).convert("RGBA")
    layer = Image.new("RGBA", (width, height), (0, 0, 0, 0))  # shapes are translucent: the gradient shows
    draw = ImageDraw.Draw(layer)                                # through, so no two tiles are flat and equal
    shapes = rng.randint(2 * n, 3 * n + 3)  # more tiles, more shapes, so few tiles are bare gradient
    for _ in range(shapes):
        kind = rng.choice(("ellipse", "rectangle", "polygon", "line"))
        alpha = rng.randint(120, 220)
        fill, outline = (*_color(rng), alpha), (*_color(rng, 0, 90), 255)
        cx, cy = rng.randint(0, width), rng.randint(0, height)
        rx, ry = rng.randint(12, width // 4), rng.randint(12, height // 4)
        box = [cx - rx, cy - ry, cx + rx, cy + ry]
        if kind == "ellipse":
            draw.ellipse(box, fill=fill, outline=outline, width=rng.randint(1, 4))
        elif kind == "rectangle":
            draw.rectangle(box, fill=fill, outline=outline, width=rng.randint(1, 4))
        elif kind == "polygon":
            points = [(cx + rng.randint(-rx, rx), cy + rng.randint(-ry, ry)) for _ in range(rng.randint(3, 6))]
            draw.polygon(points, fill=fill, outline=outline)
        else:
            draw.line(box, fill=fill, width=rng.randint(3, 10))
    canvas = Image.alpha_composite(canvas, layer).convert("RGB")
    draw = ImageDraw.Draw(canvas)
    placed = []
    for _ in range(rng.randint(3, 3 + n)):
        word, font, size = rng.choice(words()), rng.choice(fonts()), rng.randint(18, 44)
        x0, y0 = rng.randint(0, max(0, width - size * 3)), rng.randint(0, max(0, height - size))
        draw.text((x0, y0), word, font=_font(font, size), fill=_color(rng, 0, 255))
        placed.append(word)
    return np.asarray(canvas).copy(), {"shapes": shapes, "words": placed}
