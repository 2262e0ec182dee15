"""Measurement with a scale bar (VTC-Bench's measurement category, TIR-Bench's instrument / map items):
read a real-world length off an image against its scale bar.

A seeded micrograph-like (gray or tinted texture with blurred cells; units µm, mm, cm) or map-like (pastel
land, parks, water and roads; units m, km) background carries a scale bar in a corner panel: a bar of
`bar_px` pixels with end ticks and a label such as "50 µm" in a real font (data_gen.text). A target is
drawn in a saturated color (red, blue or magenta, never used elsewhere): a segment between two dots, or
(hard) an object, a filled circle (its diameter) or a rotated rectangle (its longer side).

The true length is `length_px * bar_value / bar_px` for the rendered integer end points. The answer is
that length rounded to a step S of the unit (1, 2, 5, 10, 20, 25, ... x 10^n), chosen so that S is at
least `6 + 4 * ratio` pixels (ratio = target / bar length): the truth lies near a multiple of S and
reading every end point (target and bar) 1 pixel off still rounds to the same answer, so the answer is
unambiguous. Numeric answers say the step ("Answer with an integer." when S = 1, else "Round to the
nearest S unit ..."; scorer numeric, exact); answer_format="choice" lists five options A-E in increasing
order, adjacent ones >= 10% apart (scorer option_letter).

Difficulty: easy = horizontal segment, bar 100-180 px, target 0.7-1.5 bar lengths; medium = a segment in
any direction, bar 80-160 px, ratio 0.3-4; hard = a circle's diameter or a rectangle's longer side, small
bar (40-80 px, small label), cluttered background with distractor shapes in other colors, ratio 0.3-4.

The reference crops the scale-bar panel with a zoom (to read the label and the bar's ends), then calls
`measure` on image 0 with the target's end points and the bar's end points + the label's value and unit.
The audit checks: the crop holds the whole panel (bar and label) zoomed; the measure report's scale bar
stands for the label's value in its unit, its end points lie on the bar's ends (within 1.5 px); the
measured points lie on the target's ends in the image: pixels of the target color are at both points and
the target-colored mask's extent along the measured direction starts and ends there (within 1.5 px, plus
the dot radius for segments), and across it the points sit mid-object (segment, diameter) or on an edge
(rectangle side); the report's length equals the truth, rounds to the answer, and stays in the answer's
rounding bin under 1 px reading error per end point; choice answers name the option equal to it.
"""

from __future__ import annotations

import functools
import math
import random

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from data_gen.sample import AuditError, Sample, require_choice, require_seed
from data_gen.text import fonts, words

NAME = "measurement"
SCORERS = {"numeric": "numeric", "choice": "option_letter"}  # eval.scorers per answer format
UNITS = {  # unit -> scale-bar values, background style
    "µm": ((10, 20, 50, 100, 200, 500), "micrograph"), "mm": ((1, 2, 5, 10), "micrograph"),
    "cm": ((1, 2, 5, 10), "micrograph"), "m": ((10, 20, 50, 100, 200, 500), "map"),
    "km": ((1, 2, 5, 10, 20, 50), "map"),
}
TARGET_COLORS = {"red": (230, 20, 20), "blue": (25, 60, 235), "magenta": (225, 0, 225)}
DISTRACTOR_COLORS = ((250, 220, 0), (0, 170, 60), (0, 200, 220), (20, 20, 20), (250, 250, 250), (255, 140, 0))
SETTINGS = {
    "easy": {"bar": (100, 180), "ratio": (0.7, 1.5), "font": (16, 22), "thickness": 5, "kinds": ("segment",),
             "horizontal": True, "clutter": False, "zoom": 2.0},
    "medium": {"bar": (80, 160), "ratio": (0.3, 4.0), "font": (14, 20), "thickness": 5, "kinds": ("segment",),
               "horizontal": False, "clutter": False, "zoom": 2.0},
    "hard": {"bar": (40, 80), "ratio": (0.3, 4.0), "font": (10, 13), "thickness": 3, "kinds": ("circle", "rectangle"),
             "horizontal": False, "clutter": True, "zoom": 3.0},
}
FORMATS = tuple(SCORERS)
LETTERS = "ABCDE"
READ_ERROR_PX = 1.0  # how far off each end point may be read; the answer must survive it
POINT_TOL = 1.5  # how far the reference's points may lie from the rendered ends
COLOR_TOL = 40  # per channel, for the target-color mask
MIN_OPTION_GAP = 0.10  # adjacent options differ by at least this share of the larger
GRAIN, GRAIN_TILE = 6, 1024  # texture grain amplitude (x1 or x2 when cluttered) and tile side
QUESTIONS = {
    "segment": "Using the scale bar, what is the length of the {color} segment in {unit}?",
    "circle": "Using the scale bar, what is the diameter of the {color} circle in {unit}?",
    "rectangle": "Using the scale bar, what is the length of the longer side of the {color} rectangle in {unit}?",
}
_NICE = sorted({round(a * 10.0 ** n, 6) for a in (1, 2, 2.5, 5) for n in range(-2, 5) if a != 2.5 or n >= 1})


def generate(seed: int, difficulty: str = "medium", answer_format: str = "numeric") -> Sample:
    require_choice("difficulty", difficulty, SETTINGS)
    require_choice("answer_format", answer_format, FORMATS)
    require_seed(seed)
    cfg = SETTINGS[difficulty]
    rng = random.Random(f"{NAME}:{seed}:{difficulty}:{answer_format}")
    nrng = np.random.default_rng(rng.getrandbits(64))
    width, height = rng.randint(480, 720), rng.randint(360, 540)
    unit = rng.choice(sorted(UNITS))
    values, style = UNITS[unit]
    bar_value = rng.choice(values)
    bar_px = rng.randint(*cfg["bar"])
    ppu = bar_px / bar_value
    font = rng.choice(fonts())
    font_size = rng.randint(*cfg["font"])
    image = _micrograph(rng, nrng, height, width, cfg["clutter"]) if style == "micrograph" else \
        _map(rng, nrng, height, width, cfg["clutter"])
    panel, bar, label_box = _scale_bar(rng, image, bar_px, f"{bar_value:g} {unit}", font, font_size, cfg["thickness"])
    kind = rng.choice(cfg["kinds"])
    color_name = rng.choice(sorted(TARGET_COLORS))
    color = TARGET_COLORS[color_name]
    marker = rng.randint(3, 4) if kind == "segment" else 0
    for _ in range(200):  # draw target geometry until it fits beside the panel with an unambiguous answer
        ratio = rng.uniform(*cfg["ratio"])
        step = next(s for s in _NICE if s * ppu >= 6 + 4 * ratio)
        k = max(1, round(ratio * bar_px / (step * ppu)))
        target_px = k * step * ppu
        if not 24 <= target_px <= 0.8 * min(width, height) - 2 * marker:
            continue
        points, shape = _target(rng, kind, target_px, cfg["horizontal"])
        length_px = math.dist(points[:2], points[2:])
        truth = length_px / ppu
        margin = abs(truth - k * step) + _read_error(truth, length_px, bar_px)
        if margin >= 0.5 * step:
            continue
        lo, hi = shape.min(axis=0) - marker, shape.max(axis=0) + marker
        ox = rng.randint(8 - int(lo[0]), width - 9 - int(math.ceil(hi[0]))) if hi[0] - lo[0] < width - 18 else None
        oy = rng.randint(8 - int(lo[1]), height - 9 - int(math.ceil(hi[1]))) if hi[1] - lo[1] < height - 18 else None
        if ox is None or oy is None:
            continue
        box = (int(lo[0]) + ox - 6, int(lo[1]) + oy - 6, int(math.ceil(hi[0])) + ox + 6, int(math.ceil(hi[1])) + oy + 6)
        if not _overlap(box, panel):
            points = [points[0] + ox, points[1] + oy, points[2] + ox, points[3] + oy]
            shape = shape + np.array([ox, oy])
            break
    else:  # pragma: no cover - never hit for the shipped settings
        raise RuntimeError(f"{NAME}: could not place the target for seed {seed}")
    if cfg["clutter"]:
        _distractors(rng, image, [panel, box])
    _draw_target(image, kind, points, shape, color, marker)
    answer_value = round(k * step, 6)
    unit_text = f"{step:g} {unit}"
    question = QUESTIONS[kind].format(color=color_name, unit=unit)
    meta_options = None
    if answer_format == "numeric":
        question += " Answer with an integer." if step == 1 else \
            f" Round to the nearest {unit_text} and answer with the number only."
        answer = f"{answer_value:g}"
    else:
        options = _options(rng, answer_value, step)
        meta_options = dict(zip(LETTERS, options))
        listed = "\n".join(f"{L}. {v:g} {unit}" for L, v in meta_options.items())
        question += f" Choose the closest option.\n{listed}\nAnswer with the option's letter."
        answer = LETTERS[options.index(answer_value)]
    pad = 4
    crop_box = [max(0, panel[0] - pad), max(0, panel[1] - pad), min(width, panel[2] + pad), min(height, panel[3] + pad)]
    calls = (
        {"name": "crop", "arguments": {"image_index": 0, "box": crop_box, "scale": cfg["zoom"]}},
        {"name": "measure", "arguments": {"image_index": 0, "points": [int(v) for v in points],
                                          "scale_bar": [int(v) for v in bar], "scale_bar_length": bar_value,
                                          "unit": unit}},
    )
    return Sample(
        task=NAME, id=f"{NAME}-{difficulty}-{answer_format}-{seed}", image=image, question=question,
        answer=answer, scorer=SCORERS[answer_format], toolset="default", calls=calls,
        meta={"seed": seed, "difficulty": difficulty, "answer_format": answer_format, "size": [width, height],
              "style": style, "unit": unit, "bar_value": bar_value, "bar_px": bar_px, "bar": [int(v) for v in bar],
              "panel": [int(v) for v in panel], "label_box": [int(v) for v in label_box], "font": font.name,
              "font_size": font_size, "kind": kind, "color": color_name, "rgb": list(color), "marker": marker,
              "points": [int(v) for v in points], "length_px": round(length_px, 6), "truth": round(truth, 6),
              "step": step, "answer_value": answer_value, "options": meta_options},
    )


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    meta, sid = sample.meta, sample.id
    if len(reports) != 2 or len(workspace) != 3:
        raise AuditError(f"{sid}: expected a crop and a measure call, got {len(reports)} reports")
    # 1. the zoomed crop holds the whole scale-bar panel (bar and label)
    crop_args = sample.calls[0]["arguments"]
    x1, y1, x2, y2 = (int(v) for v in crop_args["box"])
    px1, py1, px2, py2 = meta["panel"]
    if not (x1 <= px1 and y1 <= py1 and x2 >= px2 and y2 >= py2):
        raise AuditError(f"{sid}: the crop {[x1, y1, x2, y2]} does not hold the scale-bar panel {meta['panel']}")
    zoom = float(crop_args.get("scale", 1.0))
    if zoom < 2 or workspace[1].shape[:2] != (round((y2 - y1) * zoom), round((x2 - x1) * zoom)):
        raise AuditError(f"{sid}: the crop is not zoomed at least 2x ({workspace[1].shape})")
    # 2. the scale bar the measure used is the drawn bar with its label's value and unit
    report = reports[1]
    args = sample.calls[1]["arguments"]
    if report.get("unit") != meta["unit"] or "length" not in report or "scale_bar" not in report:
        raise AuditError(f"{sid}: the measure report has no length in {meta['unit']}: {report}")
    if abs(report["scale_bar"]["length"] - meta["bar_value"]) > 1e-9:
        raise AuditError(f"{sid}: the scale bar was given {report['scale_bar']['length']} {meta['unit']}, "
                         f"its label says {meta['bar_value']}")
    if not _same_segment(args["scale_bar"], meta["bar"], POINT_TOL):
        raise AuditError(f"{sid}: the scale bar points {args['scale_bar']} are not the bar's ends {meta['bar']}")
    image = workspace[0]
    bar_gray = image[meta["bar"][1], meta["bar"][0]].astype(int)
    for t in np.linspace(0, 1, 25):
        x, y = (1 - t) * np.array(args["scale_bar"][:2], float) + t * np.array(args["scale_bar"][2:], float)
        if not _near_color(image, x, y, bar_gray):
            raise AuditError(f"{sid}: the scale bar segment passes ({x:g}, {y:g}), off the bar")
    # 3. the measured points are the target's ends in the image
    points = [float(v) for v in report["points"]]
    _check_ends(sid, image, points, meta)
    # 4. the length is the truth, rounds to the answer and survives a pixel of reading error per end
    length, step, answer_value = float(report["length"]), meta["step"], meta["answer_value"]
    if abs(length - meta["truth"]) > 1e-3 * step:
        raise AuditError(f"{sid}: the measured length {length} {meta['unit']} is not the truth {meta['truth']}")
    error = _read_error(length, float(report["length_px"]), float(report["scale_bar"]["length_px"]))
    if abs(length - answer_value) + error >= 0.5 * step:
        raise AuditError(f"{sid}: the measured {length:.4g} {meta['unit']} (+- {error:.3g} reading error) does not "
                         f"round to {answer_value:g} at step {step:g}")
    if meta["answer_format"] == "numeric":
        if float(sample.answer) != answer_value:
            raise AuditError(f"{sid}: the answer {sample.answer} is not the measured length rounded ({answer_value:g})")
        return
    options = meta["options"]
    values = [options[L] for L in LETTERS]
    if sample.answer not in options or options[sample.answer] != answer_value:
        raise AuditError(f"{sid}: the answer {sample.answer!r} is not the option {answer_value:g}")
    if any(b <= a or (b - a) / b < MIN_OPTION_GAP - 1e-9 for a, b in zip(values, values[1:])):
        raise AuditError(f"{sid}: the options {values} are not increasing {MIN_OPTION_GAP:.0%} apart")


def _check_ends(sid: str, image: np.ndarray, points: list[float], meta: dict) -> None:
    rgb = np.array(meta["rgb"])
    for x, y in (points[:2], points[2:]):
        if not _near_color(image, x, y, rgb):
            raise AuditError(f"{sid}: no {meta['color']} pixel at the measured point ({x:g}, {y:g})")
    lower, upper = np.clip(rgb - COLOR_TOL, 0, 255).astype(np.uint8), np.clip(rgb + COLOR_TOL, 0, 255).astype(np.uint8)
    mask = cv2.inRange(image, lower, upper)
    found = cv2.findNonZero(mask)
    if found is None:
        raise AuditError(f"{sid}: no {meta['color']} pixels in the image")
    found = found.reshape(-1, 2).astype(np.float64)
    xs, ys = found[:, 0], found[:, 1]
    p1, p2 = np.array(points[:2]), np.array(points[2:])
    if not math.dist(p1, p2):
        raise AuditError(f"{sid}: the measured points coincide")
    u = (p2 - p1) / np.linalg.norm(p2 - p1)
    n = np.array([-u[1], u[0]])
    along, across = xs * u[0] + ys * u[1], xs * n[0] + ys * n[1]
    reach = meta["marker"]
    for got, want in ((along.min(), p1 @ u - reach), (along.max(), p2 @ u + reach)):
        if abs(got - want) > POINT_TOL:
            raise AuditError(f"{sid}: the {meta['color']} {meta['kind']} reaches {got:.1f} along the measured "
                             f"direction, the measured end is at {want:.1f}")
    # across the direction: a segment or a diameter runs through the middle, a rectangle's side is an edge
    line = p1 @ n
    lo, hi = across.min(), across.max()
    off = min(abs(line - lo), abs(line - hi)) if meta["kind"] == "rectangle" else abs(line - (lo + hi) / 2)
    if off > POINT_TOL:
        raise AuditError(f"{sid}: the measured line lies {off:.1f} px off the {meta['color']} {meta['kind']}'s "
                         f"{'edge' if meta['kind'] == 'rectangle' else 'middle'}")


def _near_color(image: np.ndarray, x: float, y: float, rgb: np.ndarray) -> bool:
    """A pixel within a pixel of (x, y) has the color."""
    xi, yi = int(round(x)), int(round(y))
    h, w = image.shape[:2]
    patch = image[max(0, yi - 1):min(h, yi + 2), max(0, xi - 1):min(w, xi + 2)].astype(np.int16)
    return bool(patch.size) and bool(np.any(np.all(np.abs(patch - rgb) <= COLOR_TOL, axis=-1)))


def _same_segment(a, b, tol: float) -> bool:
    a, b = [float(v) for v in a], [float(v) for v in b]
    direct = math.dist(a[:2], b[:2]) <= tol and math.dist(a[2:], b[2:]) <= tol
    swapped = math.dist(a[:2], b[2:]) <= tol and math.dist(a[2:], b[:2]) <= tol
    return direct or swapped


def _read_error(length: float, length_px: float, bar_px: float) -> float:
    """The largest change of a length when each end of the target and of the bar is read READ_ERROR_PX off."""
    e = 2 * READ_ERROR_PX
    return length * ((length_px + e) / max(bar_px - e, 1) / (length_px / bar_px) - 1)


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _target(rng: random.Random, kind: str, length: float, horizontal: bool):
    """End points (about the origin) with integer coordinates and the outline points for placement."""
    if kind == "segment":
        theta = 0.0 if horizontal else rng.uniform(0, math.pi)
        dx, dy = round(length * math.cos(theta)), round(length * math.sin(theta))
        if rng.random() < 0.5:
            dx, dy = -dx, -dy
        return [0, 0, dx, dy], np.array([[0, 0], [dx, dy]], float)
    if kind == "circle":
        r = max(8, round(length / 2))
        return [-r, 0, r, 0], np.array([[-r, -r], [r, r]], float)
    short = length * rng.uniform(0.35, 0.7)
    theta = rng.uniform(0, math.pi)
    u, n = np.array([math.cos(theta), math.sin(theta)]), np.array([-math.sin(theta), math.cos(theta)])
    corners = np.round(np.array([[0, 0], length * u, length * u + short * n, short * n]) - (length * u + short * n) / 2)
    return [int(v) for v in (*corners[0], *corners[1])], corners


def _draw_target(image, kind, points, shape, color, marker):
    if kind == "segment":
        p1, p2 = (points[0], points[1]), (points[2], points[3])
        cv2.line(image, p1, p2, color, 2, cv2.LINE_8)
        for p in (p1, p2):
            cv2.circle(image, p, marker, color, -1, cv2.LINE_8)
    elif kind == "circle":
        r = (points[2] - points[0]) // 2
        cv2.circle(image, (points[0] + r, points[1]), r, color, -1, cv2.LINE_8)
    else:
        cv2.fillPoly(image, [shape.astype(np.int32)], color, cv2.LINE_8)


def _options(rng: random.Random, answer: float, step: float) -> list[float]:
    """Five increasing multiples of `step`, adjacent ones at least MIN_OPTION_GAP apart, with the answer
    in a seeded position (positions that would need a value <= 0 excluded)."""
    gap = step * max(1, math.ceil(0.15 * answer / step - 1e-9))
    while True:
        below = rng.choice([b for b in range(5) if answer - b * gap > 0])
        values = [round(answer + (i - below) * gap, 6) for i in range(5)]
        if all((b - a) / b >= MIN_OPTION_GAP for a, b in zip(values, values[1:])):
            return values
        gap += step


@functools.cache
def _grain(gain: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed tile of gray sensor grain (+-GRAIN * gain) as its positive and negative parts (uint8, 3
    channels alike), cropped at a seeded offset and added with saturation: much cheaper than drawing fresh
    noise for every sample, and as deterministic."""
    noise = np.random.default_rng(0).integers(-GRAIN, GRAIN + 1, (GRAIN_TILE, GRAIN_TILE), dtype=np.int16) * gain
    pos, neg = np.clip(noise, 0, 255).astype(np.uint8), np.clip(-noise, 0, 255).astype(np.uint8)
    return cv2.merge([pos, pos, pos]), cv2.merge([neg, neg, neg])


def _add_grain(rng: random.Random, image: np.ndarray, gain: int) -> np.ndarray:
    h, w = image.shape[:2]
    y, x = rng.randrange(GRAIN_TILE - h), rng.randrange(GRAIN_TILE - w)
    pos, neg = _grain(gain)
    return cv2.subtract(cv2.add(image, pos[y:y + h, x:x + w]), neg[y:y + h, x:x + w])


@functools.lru_cache(maxsize=128)
def _face(font, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(font), size)


def _lowfreq(nrng: np.random.Generator, h: int, w: int, cells: int) -> np.ndarray:
    small = nrng.random((cells, max(2, cells * w // h))).astype(np.float32)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


def _micrograph(rng: random.Random, nrng: np.random.Generator, h: int, w: int, clutter: bool) -> np.ndarray:
    """A gray (or faintly tinted) specimen texture: uneven illumination, soft cells, grain. Composed at half
    resolution (the upscale blurs the cells) and tinted with a per-channel lookup table."""
    hh, hw = h // 2, w // 2
    gray = rng.uniform(90, 160) + 50 * (_lowfreq(nrng, hh, hw, 4) - 0.5)
    for _ in range(rng.randint(25, 45) if clutter else rng.randint(8, 18)):
        center = (rng.randrange(hw), rng.randrange(hh))
        axes = (rng.randint(3, 20), rng.randint(3, 15))
        angle = rng.uniform(0, 180)
        cell = np.zeros_like(gray)
        cv2.ellipse(cell, center, axes, angle, 0, 360, rng.uniform(-60, 60), -1, cv2.LINE_AA)
        if rng.random() < 0.5:
            cv2.ellipse(cell, center, axes, angle, 0, 360, rng.uniform(-50, 50), 1, cv2.LINE_AA)
        gray += cell
    gray = cv2.resize(np.clip(gray, 0, 255).astype(np.uint8), (w, h), interpolation=cv2.INTER_LINEAR)
    lut = np.clip(np.arange(256, dtype=np.float32)[:, None] * [rng.uniform(0.85, 1.0) for _ in range(3)], 0, 255)
    image = cv2.LUT(cv2.merge([gray, gray, gray]), lut.astype(np.uint8)[:, None, :])
    return _add_grain(rng, image, 2 if clutter else 1)


def _map(rng: random.Random, nrng: np.random.Generator, h: int, w: int, clutter: bool) -> np.ndarray:
    """A pastel map: land, parks, water, roads and (cluttered) place names."""
    field = (_lowfreq(nrng, h // 4, w // 4, 5) * 255).clip(0, 255).astype(np.uint8)
    field = cv2.resize(field, (w, h), interpolation=cv2.INTER_LINEAR)
    labels = (field > 158).astype(np.uint8) + 2 * (field < 51).astype(np.uint8)
    lut = np.zeros((256, 1, 3), np.uint8)
    lut[:3, 0] = ((240, 234, 218), (200, 226, 188), (172, 205, 232))  # land, park, water
    image = cv2.LUT(cv2.merge([labels, labels, labels]), lut)
    for _ in range(rng.randint(6, 10) if clutter else rng.randint(2, 4)):
        corners = rng.randint(2, 4)
        pts = np.array([(rng.randrange(-50, w + 50), rng.randrange(-50, h + 50)) for _ in range(corners)], np.int32)
        width = rng.choice((3, 5, 7))
        cv2.polylines(image, [pts], False, (170, 165, 160), width + 2, cv2.LINE_AA)
        cv2.polylines(image, [pts], False, (255, 255, 252), width, cv2.LINE_AA)
    if clutter:
        canvas = Image.fromarray(image)
        draw = ImageDraw.Draw(canvas)
        face = _face(rng.choice(fonts()), rng.randint(10, 14))
        for _ in range(rng.randint(4, 8)):
            draw.text((rng.randrange(w - 60), rng.randrange(h - 16)), rng.choice(words()).capitalize(),
                      font=face, fill=(110, 105, 100))
        image = np.asarray(canvas)
    return _add_grain(rng, image, 1)


def _scale_bar(rng: random.Random, image: np.ndarray, bar_px: int, label: str, font, size: int, thickness: int):
    """Draw the scale-bar panel in a corner: label above a bar with end ticks. Returns the panel box,
    the bar's end points [x1, y, x2, y] (tick centers on the bar's middle row) and the label's box."""
    h, w = image.shape[:2]
    face = _face(font, size)
    l, t, r, b = face.getbbox(label)
    pad, gap, tick = max(4, size // 2), max(3, size // 4), thickness + 3
    panel_w = max(bar_px + 1, r - l) + 2 * pad
    panel_h = pad + (b - t) + gap + 2 * tick + 1 + pad
    margin = rng.randint(10, 24)
    left = margin if rng.random() < 0.5 else w - margin - panel_w
    top = margin if rng.random() < 0.3 else h - margin - panel_h
    dark = rng.random() < 0.5
    fill, ink = ((20, 20, 20), (255, 255, 255)) if dark else ((255, 255, 255), (0, 0, 0))
    image[top:top + panel_h, left:left + panel_w] = fill
    panel = Image.fromarray(image[top:top + panel_h, left:left + panel_w])
    text_x = left + (panel_w - (r - l)) // 2
    ImageDraw.Draw(panel).text((text_x - left - l, pad - t), label, font=face, fill=ink)
    image[top:top + panel_h, left:left + panel_w] = np.asarray(panel)
    x1 = left + (panel_w - bar_px - 1) // 2
    x2 = x1 + bar_px
    y = top + pad + (b - t) + gap + tick
    half = thickness // 2
    image[y - half:y + half + 1, x1:x2 + 1] = ink
    image[y - tick:y + tick + 1, x1:x1 + 2] = ink
    image[y - tick:y + tick + 1, x2 - 1:x2 + 1] = ink
    label_box = (text_x, top + pad, text_x + (r - l), top + pad + (b - t))
    return (left, top, left + panel_w, top + panel_h), (x1, y, x2, y), label_box


def _distractors(rng: random.Random, image: np.ndarray, keep_out: list) -> None:
    """Segments, circles and boxes in other colors, away from the panel and the target."""
    h, w = image.shape[:2]
    placed = 0
    for _ in range(60):
        if placed >= rng.randint(4, 7):
            break
        color = rng.choice(DISTRACTOR_COLORS)
        kind = rng.choice(("segment", "circle", "box"))
        size = rng.randint(16, max(20, min(w, h) // 3))
        x, y = rng.randint(8, w - 8 - size), rng.randint(8, h - 8 - size)
        box = (x - 4, y - 4, x + size + 4, y + size + 4)
        if any(_overlap(box, other) for other in keep_out):
            continue
        if kind == "segment":
            cv2.line(image, (x, y + rng.randint(0, size)), (x + size, y + rng.randint(0, size)), color, 2, cv2.LINE_8)
        elif kind == "circle":
            cv2.circle(image, (x + size // 2, y + size // 2), size // 2, color, rng.choice((-1, 2)), cv2.LINE_8)
        else:
            cv2.rectangle(image, (x, y), (x + size, y + size * 2 // 3), color, rng.choice((-1, 2)), cv2.LINE_8)
        keep_out.append(box)
        placed += 1
