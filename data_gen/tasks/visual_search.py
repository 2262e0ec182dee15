"""Visual search (TIR-Bench's Visual Search, after V* / HR-Bench): find one small sign in a large,
cluttered, high-resolution image and read it, zooming in with `crop`.

The canvas (long side ~1500 px easy, 2500-3000 medium, 4000-4800 hard) is a blotchy textured background
with hundreds of distractor shapes, loose small words (clutter) and many small framed signs. ONE sign is
the target; its text line is 9-13 px tall (font size), about 6-8 px once the image is shrunk to the ~1
megapixel a model sees on easy, under 6 px on medium and under 4 px on hard (`meta["text_px_at_view"]`),
so it cannot be read, or told from its one-letter variants, without zooming. Three kinds of question
(`kind`, drawn at random by default):

- "word": the target is the only sign with a frame of a named color; "What word is written on the sign
  with the red frame? Answer with the word only." (scorer text_match). Other signs carry one-letter
  variants of the word in frames of other colors.
- "price": price tags "ITEM $d.dd"; "What is the price of LATTE? Answer with a number to two decimal
  places." (scorer numeric, exact). Other tags carry one-letter variants of the item and digit-shuffled
  prices.
- "color": "What color is the frame of the sign that reads "word"? A) Red B) Blue ..." (scorer
  option_letter). Signs with one-letter variants of the word wear the other options' colors.

Signs are drawn last, never overlapping, so the target's pixels are exactly `render_sign` (PIL) of its
recorded parameters (distractor signs compose cached glyphs instead, for speed; they look the same). The
reference is what a person does: easy = one `crop` of a box around the target with `scale` to enlarge;
medium/hard = a coarse crop of the region (a half- or third-size window on a grid, the one nearest the
target) at scale 1, then a tight zoom inside it. The audit re-renders the target from `meta` and checks
that it equals the image's pixels at the target box (and is illegible at ~1 megapixel), that the final crop (the calls composed back to
image-0 coordinates) contains the whole target box, that the zoomed text is at least MIN_ZOOMED_TEXT px
tall, that the final crop's pixels at the target equal the canvas region resized the same way (cv2
INTER_LINEAR, within the crop tool's RESAMPLED tolerance), that the identifying attribute is unique
among the signs, and that the answer is the target's text / price / color letter.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from data_gen.sample import AuditError, Sample, require_choice, require_seed
from data_gen.text import fonts, words
from tools.images import DEFAULT_MAX_PIXELS

NAME = "visual_search"
KINDS = ("word", "price", "color")
SCORERS = {"word": "text_match", "price": "numeric", "color": "option_letter"}  # eval.scorers
PALETTE: dict[str, tuple[int, int, int]] = {  # frame colors, clearly distinct when zoomed in
    "red": (220, 25, 25), "blue": (25, 70, 225), "green": (20, 150, 45), "orange": (255, 135, 0),
    "purple": (135, 40, 185), "yellow": (245, 210, 0), "pink": (255, 100, 185), "cyan": (0, 195, 215),
    "brown": (125, 75, 25), "black": (15, 15, 15),
}
LETTERS = "ABCD"
SETTINGS = {  # long side, text size (px), distractor signs, window fraction of the coarse crop (None = none)
    "easy": {"long": (1500, 1700), "size": (9, 10), "signs": (10, 14), "window": None},
    "medium": {"long": (2500, 3000), "size": (10, 12), "signs": (24, 32), "window": 2},
    "hard": {"long": (4000, 4800), "size": (10, 13), "signs": (40, 56), "window": 3},
}
SHAPE_DENSITY = 1 / 9000  # distractor shapes per pixel
LABEL_DENSITY = 1 / 60000  # loose clutter words per pixel
LABEL_POOL = 300  # distinct pre-rendered clutter words
SIMILAR = (3, 5)  # signs with a one-letter variant of the target's text / item
MIN_ZOOMED_TEXT = 32  # the target's text line (font size) after the final zoom, in pixels
ZOOM_TEXT = 40  # the reference picks the smallest integer scale that makes the text line this tall
VIEW_PIXELS = 1_000_000  # what a model sees after resizing; the target must be unreadable there
MAX_TEXT_AT_VIEW = 10.0  # text line (px) at VIEW_PIXELS: x-height about 5 px, illegible
PIXEL_TOL, OUTLIERS, MEAN_TOL = 2, 0.02, 0.5  # tools.ops.geometry.RESAMPLED (torch vs OpenCV resize)
GAP = 6  # pixels kept free around every sign
QUESTIONS = {
    "word": "What word is written on the sign with the {color} frame? Answer with the word only.",
    "price": "What is the price of {item}? Answer with a number to two decimal places.",
    "color": 'What color is the frame of the sign that reads "{word}"?\n{options}\nAnswer with the option\'s letter.',
}


def generate(seed: int, difficulty: str = "medium", kind: str | None = None) -> Sample:
    require_choice("difficulty", difficulty, SETTINGS)
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)} or None (random), got {kind!r}")
    require_seed(seed)
    cfg = SETTINGS[difficulty]
    key = f"{NAME}:{seed}:{difficulty}:{kind}"
    rng = random.Random(key)
    nrng = np.random.default_rng(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little"))
    sample_id = f"{NAME}-{difficulty}-{kind}-{seed}" if kind else f"{NAME}-{difficulty}-{seed}"
    kind = kind or rng.choice(KINDS)
    long_side = rng.randint(*cfg["long"])
    short_side = int(long_side * rng.uniform(0.66, 0.8))
    width, height = (long_side, short_side) if rng.random() < 0.6 else (short_side, long_side)
    assert width * height <= DEFAULT_MAX_PIXELS

    canvas = _background(rng, nrng, height, width)
    _shapes(rng, nrng, canvas, int(width * height * SHAPE_DENSITY))
    target_text, others, question, answer, target_color, extra = _texts(rng, kind, words(4, 8), cfg)
    _labels(nrng, canvas, int(width * height * LABEL_DENSITY), exclude=target_text)

    font = rng.choice(fonts())
    size = rng.randint(*cfg["size"])
    ink = tuple(rng.randint(0, 60) for _ in range(3))
    paper = tuple(rng.randint(225, 255) for _ in range(3))
    frame_width = rng.choice((2, 3))
    pad = rng.randint(3, 5)
    target_spec = {"text": target_text, "font": font.name, "size": size, "ink": list(ink), "paper": list(paper),
                   "frame": target_color, "frame_width": frame_width, "pad": pad}
    target = render_sign(**target_spec)
    placed: list[list[int]] = []
    signs = []
    box = _place(rng, placed, target.shape, width, height)
    canvas[box[1]:box[3], box[0]:box[2]] = target
    signs.append({"text": target_text, "frame": target_color, "box": box, "target": True})
    for text, color in others:
        spec = {"text": text, "font": rng.choice(fonts()).name, "size": rng.randint(*cfg["size"]),
                "ink": [rng.randint(0, 60) for _ in range(3)], "paper": [rng.randint(225, 255) for _ in range(3)],
                "frame": color, "frame_width": rng.choice((2, 3)), "pad": rng.randint(3, 5)}
        patch = _quick_sign(**spec)
        where = _place(rng, placed, patch.shape, width, height)
        if where is None:  # pragma: no cover - the canvas has room for many more signs
            continue
        canvas[where[1]:where[3], where[0]:where[2]] = patch
        signs.append({"text": text, "frame": color, "box": where, "target": False})

    calls, scale = _reference(rng, cfg, box, width, height, size)
    view = size / math.sqrt(width * height / VIEW_PIXELS)
    return Sample(
        task=NAME, id=sample_id, image=canvas, question=question, answer=answer,
        scorer=SCORERS[kind], toolset="default", calls=calls, evidence={"target": target},
        meta={"seed": seed, "difficulty": difficulty, "kind": kind, "size": [width, height],
              "target": {**target_spec, "box": box}, "zoom": scale, "text_px_at_view": round(view, 2),
              "signs": signs, **extra},
    )


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    meta, image = sample.meta, sample.image
    spec = dict(meta["target"])
    x1, y1, x2, y2 = spec.pop("box")
    # (the final crop is compared with `image` below, so image 0 need not be compared in full: 40 ms on hard)
    if workspace[0].shape != image.shape or not np.array_equal(workspace[0][y1:y2, x1:x2], image[y1:y2, x1:x2]):
        raise AuditError(f"{sample.id}: workspace image 0 is not the task image")
    if not np.array_equal(image[y1:y2, x1:x2], render_sign(**spec)):
        raise AuditError(f"{sample.id}: the image at the target box {[x1, y1, x2, y2]} is not the target sign "
                         f"{spec['text']!r} in a {spec['frame']} frame")
    if spec["size"] / math.sqrt(image.shape[0] * image.shape[1] / VIEW_PIXELS) > MAX_TEXT_AT_VIEW:
        raise AuditError(f"{sample.id}: the target text is readable without zooming")
    # The calls, composed back to image 0: every one crops, and all but the last keep the scale at 1.
    crops = workspace[1:]
    if not sample.calls or len(crops) != len(sample.calls) or any(c["name"] != "crop" for c in sample.calls):
        raise AuditError(f"{sample.id}: the reference must be crops, one image each")
    origins = [(0, 0)]  # image-0 offset of each workspace image (crops at scale 1 only)
    for k, call in enumerate(sample.calls):
        args = call["arguments"]
        source = args.get("image_index", -1)
        source = source if source >= 0 else len(origins) + source
        if not 0 <= source < len(origins) or origins[source] is None:
            raise AuditError(f"{sample.id}: call {k} crops image {source}, which is not a plain crop of image 0")
        ox, oy = origins[source]
        bx1, by1, bx2, by2 = (int(v) for v in args["box"])
        zoom = float(args.get("scale", 1.0))
        if args.get("units", "pixels") != "pixels" or args.get("interpolation", "linear") != "linear":
            raise AuditError(f"{sample.id}: call {k} must crop in pixels with linear zoom")
        origins.append((ox + bx1, oy + by1) if zoom == 1.0 else None)
    X1, Y1, X2, Y2 = ox + bx1, oy + by1, ox + bx2, oy + by2
    if not (X1 <= x1 and Y1 <= y1 and x2 <= X2 and y2 <= Y2):
        raise AuditError(f"{sample.id}: the final crop {[X1, Y1, X2, Y2]} does not contain the target box "
                         f"{[x1, y1, x2, y2]}")
    if spec["size"] * zoom < MIN_ZOOMED_TEXT:
        raise AuditError(f"{sample.id}: the zoomed text is {spec['size'] * zoom:.0f} px tall, under {MIN_ZOOMED_TEXT}")
    out_h, out_w = max(1, round((Y2 - Y1) * zoom)), max(1, round((X2 - X1) * zoom))
    final = crops[-1]
    if final.shape != (out_h, out_w, 3):
        raise AuditError(f"{sample.id}: the final crop is {final.shape[:2]}, not the zoomed box {(out_h, out_w)}")
    expected = cv2.resize(image[Y1:Y2, X1:X2], (out_w, out_h), interpolation=cv2.INTER_LINEAR)
    r1, r2 = int((y1 - Y1) * zoom), min(out_h, math.ceil((y2 - Y1) * zoom))
    c1, c2 = int((x1 - X1) * zoom), min(out_w, math.ceil((x2 - X1) * zoom))
    diff = np.abs(final[r1:r2, c1:c2].astype(np.int16) - expected[r1:r2, c1:c2].astype(np.int16))
    if diff.size == 0 or float((diff > PIXEL_TOL).mean()) > OUTLIERS or float(diff.mean()) > MEAN_TOL:
        raise AuditError(f"{sample.id}: the final crop's pixels at the target are not the zoomed target "
                         f"(mean difference {float(diff.mean()) if diff.size else -1:.2f})")
    _check_answer(sample, spec)


def _check_answer(sample: Sample, spec: dict) -> None:
    meta, kind = sample.meta, sample.meta["kind"]
    others = [s for s in meta["signs"] if not s["target"]]
    if kind == "word":
        if any(s["frame"] == spec["frame"] for s in others):
            raise AuditError(f"{sample.id}: another sign also has a {spec['frame']} frame")
        truth = spec["text"]
    elif kind == "price":
        item, price = spec["text"].rsplit(" $", 1)
        if any(s["text"].rsplit(" $", 1)[0] == item for s in others):
            raise AuditError(f"{sample.id}: another tag also names {item}")
        truth = price
    else:
        if any(s["text"] == spec["text"] for s in others):
            raise AuditError(f"{sample.id}: another sign also reads {spec['text']!r}")
        options = meta["options"]
        if len(set(options)) != len(options) or spec["frame"] not in options:
            raise AuditError(f"{sample.id}: the options {options} do not hold the target color once")
        truth = LETTERS[options.index(spec["frame"])]
    if sample.answer != truth:
        raise AuditError(f"{sample.id}: the answer {sample.answer!r} is not the target's {truth!r}")


@functools.cache
def _face(font_name: str, size: int) -> ImageFont.FreeTypeFont:
    path = next(f for f in fonts() if f.name == font_name)
    return ImageFont.truetype(str(path), size, layout_engine=ImageFont.Layout.BASIC)


def render_sign(text: str, font: str, size: int, ink, paper, frame: str, frame_width: int, pad: int) -> np.ndarray:
    """A sign: `text` in `font` (a file name from data_gen.text.fonts()) on `paper` inside a `frame`-colored
    border (a PALETTE name); uint8 RGB."""
    face = _face(font, size)
    left, _, right, _ = face.getbbox(text)
    ascent, descent = face.getmetrics()
    border = frame_width + pad
    w, h = right - left + 2 * border, ascent + descent + 2 * border
    sign = Image.new("RGB", (w, h), PALETTE[frame])
    draw = ImageDraw.Draw(sign)
    draw.rectangle([frame_width, frame_width, w - frame_width - 1, h - frame_width - 1], fill=tuple(paper))
    draw.text((border - left, border), text, font=face, fill=tuple(ink))
    return np.asarray(sign).copy()


def _quick_sign(text: str, font: str, size: int, ink, paper, frame: str, frame_width: int, pad: int) -> np.ndarray:
    """A distractor sign like `render_sign`, its text composed from cached glyphs (no kerning): PIL's
    FreeType rendering costs ~1 ms a word here, and dozens of distractors per image add up."""
    face = _face(font, size)
    ascent, descent = face.getmetrics()
    glyphs = [_glyph(font, size, ch) for ch in text]
    starts, cursor = [], 0.0
    for _, dx, _, advance in glyphs:
        starts.append(int(round(cursor)) + dx)
        cursor += advance
    left = min(0, min(starts))
    right = max([int(round(cursor))] + [x + g[0].shape[1] for x, g in zip(starts, glyphs)])
    border = frame_width + pad
    w, h = right - left + 2 * border, ascent + descent + 2 * border
    alpha = np.zeros((h, w), np.float32)
    for x, (mask, _, dy, _) in zip(starts, glyphs):
        x0, y0 = x - left + border, dy + border
        view = alpha[y0:y0 + mask.shape[0], x0:x0 + mask.shape[1]]
        np.maximum(view, mask[:view.shape[0], :view.shape[1]], out=view)
    sign = np.empty((h, w, 3), np.uint8)
    sign[:] = PALETTE[frame]
    inner = alpha[frame_width:h - frame_width, frame_width:w - frame_width, None]
    sign[frame_width:h - frame_width, frame_width:w - frame_width] = (
        np.array(paper, np.float32) * (1 - inner) + np.array(ink, np.float32) * inner + 0.5).astype(np.uint8)
    return sign


@functools.cache
def _glyph(font: str, size: int, char: str) -> tuple[np.ndarray, int, int, float]:
    """One character's coverage mask (float32 0-1), its offset from the pen position (x, and y from the
    ascender line) and its advance."""
    face = _face(font, size)
    left, top, right, bottom = face.getbbox(char)
    image = Image.new("L", (max(1, right - left), max(1, bottom - top)), 0)
    ImageDraw.Draw(image).text((-left, -top), char, font=face, fill=255)
    return np.asarray(image, np.float32) / 255.0, left, top, face.getlength(char)


def _texts(rng: random.Random, kind: str, vocabulary, cfg):
    """The target's text and frame color, the distractor signs (text, color), question, answer, extra meta."""
    n_signs = rng.randint(*cfg["signs"])
    n_similar = rng.randint(*SIMILAR)
    colors = list(PALETTE)
    if kind == "price":
        item = rng.choice(words(4, 7)).upper()
        price = _price(rng)
        taken = {item}
        others = []
        for k in range(n_signs):
            name = _variant(rng, item, taken) if k < n_similar else _fresh(rng, words(4, 7), taken, upper=True)
            cost = _shuffle_price(rng, price) if k < n_similar + 3 else _price(rng)
            others.append((f"{name} ${cost}", rng.choice(colors)))
        color = rng.choice(colors)
        question = QUESTIONS["price"].format(item=item)
        return f"{item} ${price}", others, question, price, color, {"item": item}
    word = rng.choice(vocabulary)
    taken = {word}
    if kind == "word":
        color = rng.choice(colors)
        rest = [c for c in colors if c != color]
        others = [(_variant(rng, word, taken) if k < n_similar else _fresh(rng, vocabulary, taken), rng.choice(rest))
                  for k in range(n_signs)]
        return word, others, QUESTIONS["word"].format(color=color), word, color, {}
    options = rng.sample(colors, len(LETTERS))
    color = options[0]
    rng.shuffle(options)
    decoys = [c for c in options if c != color]
    others = [(_variant(rng, word, taken), decoys[k % len(decoys)]) for k in range(n_similar)]
    others += [(_fresh(rng, vocabulary, taken), rng.choice(colors)) for _ in range(n_signs - n_similar)]
    lines = "\n".join(f"{LETTERS[i]}) {c.capitalize()}" for i, c in enumerate(options))
    question = QUESTIONS["color"].format(word=word, options=lines)
    return word, others, question, LETTERS[options.index(color)], color, {"options": options}


def _variant(rng: random.Random, word: str, taken: set) -> str:
    """`word` with one letter changed (same case), not yet on the canvas."""
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    while True:
        i = rng.randrange(len(word))
        letter = rng.choice(alphabet)
        letter = letter.upper() if word[i].isupper() else letter
        out = word[:i] + letter + word[i + 1:]
        if out not in taken:
            taken.add(out)
            return out


def _fresh(rng: random.Random, vocabulary, taken: set, upper: bool = False) -> str:
    while True:
        word = rng.choice(vocabulary)
        word = word.upper() if upper else word
        if word not in taken:
            taken.add(word)
            return word


def _price(rng: random.Random) -> str:
    return f"{rng.randint(1, 49)}.{rng.randint(0, 99):02d}"


def _shuffle_price(rng: random.Random, price: str) -> str:
    """A price that looks like `price`: its digits shuffled or one digit changed."""
    digits = [c for c in price if c.isdigit()]
    while True:
        if rng.random() < 0.5:
            new = digits[:]
            rng.shuffle(new)
        else:
            new = digits[:]
            new[rng.randrange(len(new))] = str(rng.randint(0, 9))
        text = "".join(new)
        out = f"{int(text[:-2])}.{text[-2:]}"
        if out != price and int(text[:-2]) > 0:
            return out


def _background(rng: random.Random, nrng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A mottled texture: random colors around a muted base on a coarse grid, enlarged with cubic
    interpolation (one pass over the canvas, which dominates the generation time)."""
    base = np.array([rng.randint(90, 200) for _ in range(3)], np.int16)
    cell = rng.randint(6, 16)
    grid = (height // cell + 2, width // cell + 2)
    light = nrng.integers(-40, 41, (*grid, 1), dtype=np.int16)  # mostly lightness, a little hue
    small = np.clip(base + light + nrng.integers(-12, 13, (*grid, 3), dtype=np.int16), 0, 255).astype(np.uint8)
    return cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)


def _shapes(rng: random.Random, nrng: np.random.Generator, canvas: np.ndarray, count: int) -> None:
    height, width = canvas.shape[:2]
    xs, ys = nrng.integers(0, width, count), nrng.integers(0, height, count)
    sizes = nrng.integers(6, 60, count)
    colors = nrng.integers(0, 256, (count, 3))
    kinds = nrng.integers(0, 5, count)
    for x, y, s, c, k in zip(xs.tolist(), ys.tolist(), sizes.tolist(), colors.tolist(), kinds.tolist()):
        thickness = -1 if s % 3 else 2
        if k == 0:
            cv2.circle(canvas, (x, y), s // 2, c, thickness)
        elif k == 1:
            cv2.rectangle(canvas, (x, y), (x + s, y + s * 2 // 3), c, thickness)
        elif k == 2:
            cv2.ellipse(canvas, (x, y), (s // 2, s // 4), (x * 7) % 180, 0, 360, c, thickness)
        elif k == 3:
            pts = np.array([[x, y], [x + s, y + s // 3], [x + s // 4, y + s]], np.int32)
            cv2.fillPoly(canvas, [pts], c) if thickness < 0 else cv2.polylines(canvas, [pts], True, c, 2)
        else:
            cv2.line(canvas, (x, y), (x + s, y + (s * 5) % 31 - 15), c, 2)


@functools.cache
def _label_pool() -> tuple[tuple[str, np.ndarray], ...]:
    """LABEL_POOL loose words rendered once per process as alpha masks (float32 0-1), from a fixed seed,
    so drawing clutter costs no font rendering."""
    rng = random.Random(f"{NAME}:labels")
    vocabulary = words(3, 9)
    pool = []
    for _ in range(LABEL_POOL):
        word = rng.choice(vocabulary)
        face = _face(rng.choice(fonts()).name, rng.randint(9, 16))
        left, top, right, bottom = face.getbbox(word)
        mask = Image.new("L", (right - left, bottom - top), 0)
        ImageDraw.Draw(mask).text((-left, -top), word, font=face, fill=255)
        pool.append((word, np.asarray(mask, np.float32)[..., None] / 255.0))
    return tuple(pool)


def _labels(nrng: np.random.Generator, canvas: np.ndarray, count: int, exclude: str) -> None:
    """Loose small words (no frame) blended straight onto the clutter in random colors."""
    height, width = canvas.shape[:2]
    pool = _label_pool()
    picks, inks = nrng.integers(0, len(pool), count), nrng.integers(0, 256, (count, 3)).astype(np.float32)
    xs, ys = nrng.random(count), nrng.random(count)
    for k, x, y, ink in zip(picks.tolist(), xs.tolist(), ys.tolist(), inks):
        word, alpha = pool[k]
        if word == exclude:
            continue
        h, w = alpha.shape[:2]
        x, y = int(x * (width - w)), int(y * (height - h))
        region = canvas[y:y + h, x:x + w]
        region[:] = (region * (1 - alpha) + ink * alpha + 0.5).astype(np.uint8)


def _place(rng: random.Random, placed: list, shape, width: int, height: int, margin: int = 8):
    h, w = shape[:2]
    for _ in range(200):
        x, y = rng.randint(margin, width - w - margin), rng.randint(margin, height - h - margin)
        box = [x, y, x + w, y + h]
        if all(x >= b[2] + GAP or b[0] >= box[2] + GAP or y >= b[3] + GAP or b[1] >= box[3] + GAP for b in placed):
            placed.append(box)
            return box
    return None


def _reference(rng: random.Random, cfg: dict, box, width: int, height: int, size: int):
    """The crops a person makes: (medium/hard) the grid window holding the target, then a zoom around it."""
    x1, y1, x2, y2 = box
    scale = max(3, math.ceil(ZOOM_TEXT / size))
    # a box around the target with uneven margins (1-4 text lines), inside the image
    tight = [max(0, x1 - rng.randint(size, 4 * size)), max(0, y1 - rng.randint(size, 3 * size)),
             min(width, x2 + rng.randint(size, 4 * size)), min(height, y2 + rng.randint(size, 3 * size))]
    calls = []
    if cfg["window"]:
        n = cfg["window"]
        ww, wh = width // n, height // n
        # windows of 1/n of each side at steps of half a window; the one whose center is nearest the target's
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        left = min(_steps(width, ww), key=lambda v: abs(v + ww / 2 - cx))
        top = min(_steps(height, wh), key=lambda v: abs(v + wh / 2 - cy))
        window = [left, top, left + ww, top + wh]
        if not (left <= x1 and top <= y1 and x2 <= left + ww and y2 <= top + wh):  # pragma: no cover
            raise RuntimeError(f"{NAME}: the target {box} straddles every window of {ww}x{wh}")
        tight = [max(tight[0], window[0]), max(tight[1], window[1]), min(tight[2], window[2]), min(tight[3], window[3])]
        calls.append({"name": "crop", "arguments": {"image_index": 0, "box": window}})
        tight = [tight[0] - left, tight[1] - top, tight[2] - left, tight[3] - top]
        calls.append({"name": "crop", "arguments": {"image_index": 1, "box": tight, "scale": float(scale)}})
    else:
        calls.append({"name": "crop", "arguments": {"image_index": 0, "box": tight, "scale": float(scale)}})
    return tuple(calls), scale


def _steps(side: int, window: int) -> list[int]:
    """Window offsets along one side: every half window, and one flush with the far edge."""
    return sorted(set(range(0, side - window + 1, window // 2)) | {side - window})
