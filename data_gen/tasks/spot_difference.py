"""Spot the difference (TIR-Bench): two nearly identical cartoon scenes side by side, each cut by thin
white lines into n rows x m columns of patches; the model lists the patches where they differ.

The scene is procedural and seeded: a sky gradient over a ground band, non-overlapping cartoon objects
(shapes, small icons built from polygons - trees, houses, suns, flowers, fish, cars, balloons,
mushrooms - and words from `data_gen.text` in its fonts), drawn with PIL. The right half is the left
half with k objects altered: a colour change, a missing object, an added object, a moved object, a
rotated object, a changed letter in a word, or a missing detail of an icon (easy: 1-2 big changes of
the first four kinds on a 2-3 x 2-3 grid; medium: 2-4 changes of any kind on 3-5 x 3-5; hard: 3-6
subtle ones - small moves, turns and similar colours - on 5-8 x 5-8). The grid lines are drawn last
and identically on both halves; a half is exactly m cells wide and n cells high, so patch boundaries
are the `difference` tool's equal grid split. Every alteration is kept only if each patch it touches
shows at least MIN_VISIBLE pixels that differ by VISIBLE or more in some channel (no patch counts
because of a sliver of anti-aliasing a person could not see); an object may span several patches, and
then all of them count.

Answer: a JSON list of the differing patch ids, ascending, numbered 1..n*m row-major as in TIR-Bench's
prompt (which asks for `{"different_patches": [...]}`; the `list_iou` scorer reads the last list).

Reference (tool set "default"): `crop` the left half (image 1), `crop` the right half (image 2), then
`difference` with image_index=1, other_index=2, grid=[n, m], threshold=THRESHOLD; its report's `cells`
are the answer. The audit checks that the crops are exactly the two renders, the difference image is
their absolute difference, the report's cells equal the answer, and the answer equals the truth
recomputed from the renders (patches with any differing pixel off the grid lines, which are white and
identical in both halves), each of those patches visibly changed.
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
from data_gen.text import fonts, words

NAME = "spot_difference"
SCORER = "list_iou"  # eval.scorers: IoU of the predicted and true patch lists, as TIR-Bench scores it
GRID = {"easy": (2, 3), "medium": (3, 5), "hard": (5, 8)}  # rows n and columns m, each drawn in this range
CHANGES = {"easy": (1, 2), "medium": (2, 4), "hard": (3, 6)}
KINDS_OF_CHANGE = {
    "easy": ("color", "missing", "added", "moved"),
    "medium": ("color", "missing", "added", "moved", "rotated", "letter", "detail"),
    "hard": ("color", "missing", "added", "moved", "rotated", "letter", "detail"),
}
OBJECTS = {"easy": (8, 12), "medium": (14, 20), "hard": (22, 32)}
SIZE = {"easy": (48, 84), "medium": (34, 64), "hard": (24, 46)}  # icon side in pixels
TEXT_SIZE = {"easy": (22, 32), "medium": (18, 26), "hard": (14, 20)}
MOVE = {"easy": (30, 50), "medium": (16, 30), "hard": (8, 14)}  # pixels
TURN = {"easy": (40, 60), "medium": (25, 40), "hard": (15, 25)}  # degrees
COLOR_STEP = {"easy": (120, 255), "medium": (90, 255), "hard": (50, 110)}  # largest channel change
HALF = (360, 480)  # each half's width and height are drawn here, then rounded down to a multiple of m / n
GAP = 24  # white columns between the halves
LINE = 2  # grid line width: pixels c*cell-1 and c*cell of each boundary
THRESHOLD = 32  # the reference's difference threshold (renders are lossless; this ignores nothing real)
VISIBLE, MIN_VISIBLE = 40, 20  # a changed patch has >= MIN_VISIBLE pixels differing by >= VISIBLE
MARGIN = 4  # free pixels between objects
TRIES = 40  # draws per alteration before giving up on it
WHITE = (255, 255, 255)
DARK, LIGHT, BROWN = (35, 35, 45), (250, 245, 230), (120, 75, 40)
PALETTE = (
    (220, 40, 40), (170, 30, 30), (250, 128, 114), (245, 140, 30), (245, 210, 40), (220, 170, 30),
    (130, 200, 50), (40, 150, 70), (20, 110, 50), (30, 160, 160), (60, 150, 230), (120, 190, 240),
    (40, 70, 200), (130, 60, 190), (170, 110, 220), (235, 100, 170), (140, 90, 50), (120, 120, 120),
    (40, 40, 40), (245, 245, 245),
)
INKS = ((20, 20, 20), (40, 40, 120), (120, 20, 20), (20, 90, 40), (90, 30, 110), (60, 60, 60), (150, 70, 10))
SKIES = ((150, 200, 245), (190, 225, 250), (250, 215, 180), (200, 190, 240), (170, 230, 230))
GROUNDS = ((150, 210, 120), (225, 205, 150), (120, 180, 100), (200, 225, 170), (215, 190, 160))
QUESTION = (
    "**Task Description:**\nGiven two images of identical dimensions, each divided by thin white lines into n rows "
    "and m columns, resulting in n×m small patches. The numbering rules are as follows:\n\n1. Patches are numbered "
    "from 1 to n×m.\n2. Numbering follows row-major order: the first row from left to right is 1, 2, …, m; the "
    "first patch of the second row is m+1, and so on.\n\nThe i-th patch in the left image corresponds to the i-th "
    "patch in the right image. Your tasks are:\n\n1. Identify all objects or regions that differ between the two "
    "images.\n2. Return a list of patch indices occupied by each differing object.\n\n   * If an object spans "
    "multiple adjacent patches, include all those patch indices.\n3. Finally, output a deduplicated, "
    "ascending-sorted list of indices representing every patch that contains a difference.\n\n---\n\n"
    "**Output Format:**\n\n```json\n{\n  \"different_patches\": [i1, i2, i3, …]\n}\n```\n\n---\n\n"
    "**Problem:**\nOutput the list of patch indices where the two images differ.\n"
    "Note that in this image, n is <n> and m is <m>"
)


# == shapes: parts (unit polygon, colour role) in object coordinates, side 1 centred on the origin ====================
def _ellipse(cx, cy, rx, ry=None, k=28):
    t = np.linspace(0, 2 * np.pi, k, endpoint=False)
    return np.stack([cx + rx * np.cos(t), cy + (rx if ry is None else ry) * np.sin(t)], 1)


def _rect(x1, y1, x2, y2):
    return np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], float)


def _regular(sides, r, start=-90.0):
    t = np.radians(start + 360.0 * np.arange(sides) / sides)
    return np.stack([r * np.cos(t), r * np.sin(t)], 1)


def _star(points=5, outer=0.5, inner=0.22):
    t = np.radians(-90.0 + 180.0 * np.arange(2 * points) / points)
    r = np.where(np.arange(2 * points) % 2 == 0, outer, inner)
    return np.stack([r * np.cos(t), r * np.sin(t)], 1)


def _heart(k=32):
    t = np.linspace(0, 2 * np.pi, k, endpoint=False)
    x, y = 16 * np.sin(t) ** 3, -(13 * np.cos(t) - 5 * np.cos(2 * t) - 2 * np.cos(3 * t) - np.cos(4 * t))
    return np.stack([x / 34, (y + 2) / 34], 1)


def _ray(angle):
    a, w = math.radians(angle), math.radians(11)
    return np.array([[0.33 * math.cos(a - w), 0.33 * math.sin(a - w)], [0.5 * math.cos(a), 0.5 * math.sin(a)],
                     [0.33 * math.cos(a + w), 0.33 * math.sin(a + w)]])


SHAPES: dict[str, tuple] = {
    "circle": ((_ellipse(0, 0, 0.5), "main"),),
    "square": ((_rect(-0.42, -0.42, 0.42, 0.42), "main"),),
    "triangle": ((_regular(3, 0.52, -90) + [0, 0.1], "main"),),
    "star": ((_star(), "main"),),
    "diamond": ((np.array([[0, -0.5], [0.32, 0], [0, 0.5], [-0.32, 0]], float), "main"),),
    "hexagon": ((_regular(6, 0.5, 0), "main"),),
    "heart": ((_heart(), "main"),),
    "tree": ((_rect(-0.07, 0.1, 0.07, 0.5), BROWN), (_ellipse(0, -0.14, 0.36), "main"),
             (_ellipse(0.12, -0.2, 0.08), "accent")),
    "house": ((_rect(-0.38, -0.02, 0.38, 0.45), "main"),
              (np.array([[-0.48, -0.02], [0, -0.45], [0.48, -0.02]]), "accent"),
              (_rect(-0.09, 0.17, 0.09, 0.45), DARK), (_rect(0.16, 0.06, 0.31, 0.21), LIGHT)),
    "sun": ((_ellipse(0, 0, 0.28), "main"), *((_ray(a), "main") for a in range(0, 360, 45))),
    "flower": (*((_ellipse(0.25 * math.cos(math.radians(a)), 0.25 * math.sin(math.radians(a)), 0.17), "main")
                 for a in range(-90, 270, 72)), (_ellipse(0, 0, 0.14), "accent")),
    "fish": ((np.array([[0.22, 0], [0.5, -0.22], [0.5, 0.22]]), "accent"), (_ellipse(-0.06, 0, 0.34, 0.21), "main"),
             (_ellipse(-0.22, -0.05, 0.07), DARK)),
    "car": ((np.array([[-0.26, -0.04], [-0.16, -0.3], [0.2, -0.3], [0.3, -0.04]]), "accent"),
            (_rect(-0.48, -0.06, 0.48, 0.2), "main"), (_ellipse(-0.27, 0.22, 0.12), DARK),
            (_ellipse(0.27, 0.22, 0.12), DARK)),
    "balloon": ((_rect(-0.02, 0.18, 0.02, 0.5), DARK), (_ellipse(0, -0.14, 0.27, 0.34), "main")),
    "mushroom": ((_rect(-0.11, -0.02, 0.11, 0.42), LIGHT),
                 (np.concatenate([_ellipse(0, 0, 0.44, 0.4, 32)[16:], [[0.44, 0.0]]]), "main"),
                 (_ellipse(-0.18, -0.16, 0.07), LIGHT), (_ellipse(0.12, -0.24, 0.07), LIGHT)),
}
ROTATABLE = tuple(k for k in SHAPES if k != "circle")
DETAILS = {"tree": (2,), "house": (2, 3), "sun": tuple(range(1, 9)), "flower": tuple(range(5)), "fish": (0, 2),
           "car": (0, 2, 3), "balloon": (0,), "mushroom": (2, 3)}  # parts whose absence is a change
REACH = {k: float(max(np.hypot(*p.T).max() for p, _ in parts)) for k, parts in SHAPES.items()}


@functools.cache
def _face(font: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(font, size)


@functools.lru_cache(maxsize=4096)
def _glyphs(font: str, size: int, word: str) -> tuple[Image.Image, int, int]:
    """The word's anti-aliased ink as an 'L' mask and the offset of its top-left from the text's centre."""
    face = _face(font, size)
    x1, y1, x2, y2 = face.getbbox(word, anchor="mm")
    mask = Image.new("L", (x2 - x1, y2 - y1), 0)
    ImageDraw.Draw(mask).text((-x1, -y1), word, fill=255, font=face, anchor="mm")
    return mask, x1, y1


def _radius(obj: dict) -> float:
    """The radius of a circle about (x, y) that holds the object at any angle."""
    if obj["kind"] == "text":
        mask, x1, y1 = _glyphs(obj["font"], obj["size"], obj["word"])
        return math.hypot(max(-x1, x1 + mask.width), max(-y1, y1 + mask.height)) + 1
    return REACH[obj["kind"]] * obj["size"] + 1


def _draw(canvas: Image.Image, draw: ImageDraw.ImageDraw, obj: dict) -> None:
    if obj["kind"] == "text":
        mask, x1, y1 = _glyphs(obj["font"], obj["size"], obj["word"])
        canvas.paste(tuple(obj["main"]), (int(obj["x"]) + x1, int(obj["y"]) + y1), mask)
        return
    a = math.radians(obj["angle"])
    turn = np.array([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]]) * obj["size"]
    for index, (points, role) in enumerate(SHAPES[obj["kind"]]):
        if index in obj.get("drop", ()):
            continue
        color = tuple(obj[role]) if isinstance(role, str) else role
        draw.polygon((points @ turn + [obj["x"], obj["y"]]).ravel().tolist(), fill=color)


def _render(background: np.ndarray, objects: list[dict], rows: int, cols: int) -> np.ndarray:
    canvas = Image.fromarray(background)
    draw = ImageDraw.Draw(canvas)
    for obj in objects:
        _draw(canvas, draw, obj)
    image = np.array(canvas)
    _grid_lines(image, rows, cols)
    return image


def _grid_lines(image: np.ndarray, rows: int, cols: int) -> None:
    h, w = image.shape[:2]
    for r in range(1, rows):
        image[r * h // rows - LINE // 2:r * h // rows + (LINE + 1) // 2] = WHITE
    for c in range(1, cols):
        image[:, c * w // cols - LINE // 2:c * w // cols + (LINE + 1) // 2] = WHITE


@functools.lru_cache(maxsize=64)
def _line_mask(h: int, w: int, rows: int, cols: int) -> np.ndarray:
    """The grid lines' pixels of an (h, w) half (read-only)."""
    mask = np.zeros((h, w, 3), np.uint8)
    _grid_lines(mask, rows, cols)
    mask = mask[..., 0] > 0
    mask.flags.writeable = False
    return mask


def _cell_counts(mask: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """(rows, cols) counts of True pixels per patch; the half is exactly rows x cols equal cells."""
    h, w = mask.shape
    per_row = mask.view(np.uint8).reshape(rows, h // rows, w).sum(1, dtype=np.int32)
    return per_row.reshape(rows, cols, w // cols).sum(2)


def _window(old: list[dict], new: dict, w: int, h: int) -> tuple[int, int, int, int]:
    """A box [x1, y1, x2, y2) holding every pixel the objects (before and after a change) can paint."""
    objs = old + [new]
    x1 = max(0, math.floor(min(o["x"] - o["r"] for o in objs)) - 2)
    y1 = max(0, math.floor(min(o["y"] - o["r"] for o in objs)) - 2)
    x2 = min(w, math.ceil(max(o["x"] + o["r"] for o in objs)) + 3)
    y2 = min(h, math.ceil(max(o["y"] + o["r"] for o in objs)) + 3)
    return x1, y1, x2, y2


def _background(rng: random.Random, w: int, h: int) -> np.ndarray:
    """A sky gradient down to the horizon, a flat ground band below it."""
    top, low, ground = np.array(rng.choice(SKIES), float), np.array(rng.choice(SKIES), float), rng.choice(GROUNDS)
    horizon = rng.randint(int(h * 0.45), int(h * 0.7))
    t = np.linspace(0, 1, horizon)[:, None]
    column = np.empty((h, 3), np.uint8)
    column[:horizon] = np.round(top * (1 - t) + low * t)
    column[horizon:] = ground
    return np.ascontiguousarray(np.broadcast_to(column[:, None], (h, w, 3)))


def _new_object(rng: random.Random, difficulty: str) -> dict:
    """A text or icon object with its look drawn and no position yet."""
    if rng.random() < 0.25:
        size = rng.randint(*TEXT_SIZE[difficulty])
        obj = {"kind": "text", "word": rng.choice(words(3, 7)), "font": str(rng.choice(fonts())), "size": size,
               "main": list(rng.choice(INKS))}
    else:
        main, accent = rng.sample(PALETTE, 2)
        obj = {"kind": rng.choice(tuple(SHAPES)), "size": rng.randint(*SIZE[difficulty]), "angle": 0.0,
               "main": list(main), "accent": list(accent)}
        if rng.random() < 0.3 and obj["kind"] in ROTATABLE:
            obj["angle"] = float(rng.randint(-30, 30))
    obj["r"] = _radius(obj)
    return obj


def _place(rng: random.Random, obj: dict, others: list[dict], w: int, h: int, tries: int) -> bool:
    """Put the object at a random free spot (inside the half, clear of `others`); False if none found."""
    low = math.ceil(obj["r"]) + 2
    if 2 * low + 2 > min(w, h):
        return False
    for _ in range(tries):
        obj["x"], obj["y"] = float(rng.randint(low, w - low - 1)), float(rng.randint(low, h - low - 1))
        if _fits(obj, others, w, h):
            return True
    return False


def _fits(obj: dict, others: list[dict], w: int, h: int) -> bool:
    x, y, r = obj["x"], obj["y"], obj["r"]
    if x - r < 2 or y - r < 2 or x + r > w - 3 or y + r > h - 3:
        return False
    return all((x - o["x"]) ** 2 + (y - o["y"]) ** 2 >= (r + o["r"] + MARGIN) ** 2 for o in others)


def _alter(rng: random.Random, kind: str, difficulty: str, scene: list[dict], taken: set[int], footprint: list[dict],
           w: int, h: int) -> tuple[list[dict], dict] | None:
    """One alteration of `scene` (the right half so far): the new scene and a description, or None when
    this draw cannot make that kind of change. `footprint` holds every object drawn in either half; a
    new or moved object must keep clear of all of them."""
    free = [i for i in range(len(scene)) if i not in taken and scene[i].get("origin") is None]
    if kind == "added":
        obj = _new_object(rng, difficulty)
        if not _place(rng, obj, footprint, w, h, 10):
            return None
        return scene + [{**obj, "origin": "added"}], {"type": kind, "object": obj["kind"], "index": len(scene)}
    if kind == "letter":
        free = [i for i in free if scene[i]["kind"] == "text"]
    elif kind == "rotated":
        free = [i for i in free if scene[i]["kind"] in ROTATABLE]
    elif kind == "detail":
        free = [i for i in free if scene[i]["kind"] in DETAILS]
    if not free:
        return None
    i = rng.choice(free)
    obj = dict(scene[i])
    if kind == "missing":
        obj["hidden"] = True
    elif kind == "color":
        step = COLOR_STEP[difficulty]
        options = INKS + PALETTE if obj["kind"] == "text" else PALETTE
        options = [c for c in options if step[0] <= max(abs(a - b) for a, b in zip(c, obj["main"])) <= step[1]]
        if not options:
            return None
        obj["main"] = list(rng.choice(options))
    elif kind == "moved":
        distance, a = rng.uniform(*MOVE[difficulty]), rng.uniform(0, 2 * math.pi)
        obj["x"] = float(round(obj["x"] + distance * math.cos(a)))
        obj["y"] = float(round(obj["y"] + distance * math.sin(a)))
        if not _fits(obj, [o for o in footprint if o is not scene[i]["source"]], w, h):
            return None
    elif kind == "rotated":
        obj["angle"] = obj["angle"] + rng.choice((-1, 1)) * rng.randint(*TURN[difficulty])
    elif kind == "letter":
        word = obj["word"]
        k = rng.randrange(len(word))
        letter = rng.choice([c for c in "abcdefghijklmnopqrstuvwxyz" if c != word[k]])
        obj["word"] = word[:k] + letter + word[k + 1:]
        obj["r"] = _radius(obj)
        if not _fits(obj, [o for o in footprint if o is not scene[i]["source"]], w, h):
            return None
    elif kind == "detail":
        obj["drop"] = [rng.choice(DETAILS[obj["kind"]])]
    altered = scene[:i] + [obj] + scene[i + 1:]
    return altered, {"type": kind, "object": obj["kind"], "index": i}


def generate(seed: int, difficulty: str = "medium") -> Sample:
    require_choice("difficulty", difficulty, GRID)
    require_seed(seed)
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    rows, cols = rng.randint(*GRID[difficulty]), rng.randint(*GRID[difficulty])
    ch, cw = rng.randint(*HALF) // rows, rng.randint(*HALF) // cols
    h, w = rows * ch, cols * cw
    background = _background(rng, w, h)
    objects: list[dict] = []
    wanted = rng.randint(*OBJECTS[difficulty])
    for _ in range(wanted * 3):
        if len(objects) == wanted:
            break
        obj = _new_object(rng, difficulty)
        if _place(rng, obj, objects, w, h, 20):
            objects.append(obj)
    left = _render(background, objects, rows, cols)

    scene = [{**o, "source": o} for o in objects]  # the right half, each object remembering its left original
    footprint = list(objects)
    right, taken, changes = left, set(), []
    kinds = KINDS_OF_CHANGE[difficulty]
    for _ in range(rng.randint(*CHANGES[difficulty])):
        for _ in range(TRIES):
            attempt = _alter(rng, rng.choice(kinds), difficulty, scene, taken, footprint, w, h)
            if attempt is None:
                continue
            candidate, change = attempt
            before = [] if change["type"] == "added" else [scene[change["index"]]]
            x1, y1, x2, y2 = _window(before, candidate[change["index"]], w, h)
            near = [o for o in candidate if not o.get("hidden") and o["x"] + o["r"] >= x1 and o["x"] - o["r"] < x2
                    and o["y"] + o["r"] >= y1 and o["y"] - o["r"] < y2]
            patch = _render(background, near, rows, cols)[y1:y2, x1:x2]  # nothing else reaches this window
            diff = np.zeros((h, w), np.uint8)
            diff[y1:y2, x1:x2] = _absmax(patch, right[y1:y2, x1:x2])
            touched = _cell_counts(diff > 0, rows, cols)
            seen = _cell_counts(diff >= VISIBLE, rows, cols)
            if not touched.any() or (seen[touched > 0] < MIN_VISIBLE).any():
                continue  # invisible, or a patch changed by a sliver only: draw another alteration
            scene, right = candidate, right.copy()
            right[y1:y2, x1:x2] = patch
            taken.add(change["index"])
            footprint.append(candidate[change["index"]])
            change["cells"] = [int(k) + 1 for k in np.flatnonzero(touched)]
            changes.append(change)
            break
    if not changes:  # pragma: no cover - an empty scene; every draw above fails only on degenerate sizes
        raise RuntimeError(f"{NAME}: seed {seed} made no visible change")

    gap = np.full((h, GAP, 3), 255, np.uint8)
    image = np.ascontiguousarray(np.concatenate([left, gap, right], axis=1))
    truth = _truth(left, right, rows, cols)
    calls = (
        {"name": "crop", "arguments": {"image_index": 0, "box": [0, 0, w, h]}},
        {"name": "crop", "arguments": {"image_index": 0, "box": [w + GAP, 0, 2 * w + GAP, h]}},
        {"name": "difference", "arguments": {"image_index": 1, "other_index": 2, "threshold": THRESHOLD,
                                             "grid": [rows, cols]}},
    )
    question = QUESTION.replace("<n>", str(rows)).replace("<m>", str(cols))
    return Sample(
        task=NAME, id=f"{NAME}-{difficulty}-{seed}", image=image, question=question, answer=json.dumps(truth),
        scorer=SCORER, toolset="default", calls=calls, evidence={"left": left, "right": right},
        meta={"seed": seed, "difficulty": difficulty, "rows": rows, "cols": cols, "cell": [cw, ch], "half": [w, h],
              "gap": GAP, "objects": len(objects), "changes": changes},
    )


def _absmax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per pixel, the largest channel difference |a - b| (H, W) uint8."""
    d = cv2.absdiff(a, b)
    return np.maximum(np.maximum(d[..., 0], d[..., 1]), d[..., 2])


def _truth(left: np.ndarray, right: np.ndarray, rows: int, cols: int) -> list[int]:
    """Patches (1-based, row-major) where the two halves' pixels differ, grid lines excluded."""
    changed = (_absmax(left, right) > 0) & ~_line_mask(*left.shape[:2], rows, cols)
    return [int(k) + 1 for k in np.flatnonzero(_cell_counts(changed, rows, cols))]


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    left, right = sample.evidence["left"], sample.evidence["right"]
    rows, cols, (w, h), gap = sample.meta["rows"], sample.meta["cols"], sample.meta["half"], sample.meta["gap"]
    if left.shape != (h, w, 3) or right.shape != (h, w, 3) or h % rows or w % cols:
        raise AuditError(f"{sample.id}: the renders are not {w}x{h} halves of a {rows}x{cols} grid")
    shown = workspace[0]
    if not (np.array_equal(shown[:, :w], left) and np.array_equal(shown[:, w + gap:w + gap + w], right)):
        raise AuditError(f"{sample.id}: the task image does not show the two renders side by side")
    if len(workspace) < 4:
        raise AuditError(f"{sample.id}: {len(workspace) - 1} reference images; expected crop, crop, difference")
    for name, crop, render in (("left", workspace[1], left), ("right", workspace[2], right)):
        if crop.shape != render.shape or not np.array_equal(crop, render):
            raise AuditError(f"{sample.id}: the {name} crop {crop.shape} is not exactly the {name} half {render.shape}")
    if not np.array_equal(workspace[3], cv2.absdiff(left, right)):
        raise AuditError(f"{sample.id}: the difference image is not |left - right|")
    lines = _line_mask(h, w, rows, cols)
    if not ((left[lines] == 255).all() and (right[lines] == 255).all()):
        raise AuditError(f"{sample.id}: the grid lines are not white in both halves")
    answer = json.loads(sample.answer)
    truth = _truth(left, right, rows, cols)
    if answer != truth:
        raise AuditError(f"{sample.id}: the answer {answer} is not the differing patches {truth}")
    cells = reports[-1].get("cells")
    if cells != answer:
        raise AuditError(f"{sample.id}: the difference report's cells {cells} are not the answer {answer}")
    seen = _cell_counts(_absmax(left, right) >= VISIBLE, rows, cols).ravel()
    faint = [k for k in answer if seen[k - 1] < MIN_VISIBLE]
    if not answer or faint:
        raise AuditError(f"{sample.id}: patches {faint or 'none'} show no visible change")
