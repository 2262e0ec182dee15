"""Instrument reading (TIR-Bench's Instrument Reading): read the value a dial gauge's needle points at.

A seeded dial gauge is drawn with OpenCV (anti-aliased, sub-pixel) and PIL text: a bezel and a circular
face, a scale arc of 240-270 degrees (minimum at the lower left, values growing clockwise), major ticks
labelled with their values and minor ticks between them, a unit label (bar, psi, kg/cm², MPa, °C, km/h,
V, A) in one of `data_gen.text`'s fonts, optionally a red zone at the top of the scale, and a straight
bar needle from the hub (with a short counterweight tail and a pointed tip that reaches into the tick
band). The true value lies on the scale's resolution grid (`res`: a minor tick, or half a minor tick),
so the answer is exact at the stated precision. The scale function is `value_to_angle` /
`angle_to_value` (degrees counter-clockwise from +x as seen on screen, as `hough_lines` reports them).

Difficulty: easy = one big gauge (radius 150-185 px) on a plain background, 5-6 labelled major ticks,
2-5 minor divisions, values on minor ticks; medium = one smaller gauge (radius 85-115 px) on a larger
panel with clutter (pipes, plates with words, hand wheels, boxes, grain), 6-9 labels, 4-10 minor
divisions, values on minor or half-minor ticks; hard = 2-4 gauges (radius 70-90 px) in a row, each with
its own unit and scale, 7-11 labels, fine minor ticks (5 or 10 per major), and the question asks for
"the second gauge from the left" etc. Labels never touch; minor ticks are >= MIN_MINOR_PITCH px apart;
one resolution step is a whole number (>= 3) of degrees of arc, so every possible needle angle is a
whole degree (OpenCV's HoughLinesP walks a segment pixel-exactly along its 1-degree bin, so a needle a
fraction of a degree off its bin breaks into short pieces) and a measurement within 1.25 degrees rounds
to the value. Values whose needle would lie within 3 degrees of horizontal are not drawn: Hough on a
near-horizontal bar in a zoomed crop mostly returns the pieces around the hub and the tail, which can
neither fix the angle to a degree nor tell the tip from the tail.

Questions follow TIR-Bench: numeric ("What is the reading of the second gauge from the left in
kg/cm²? Provide one decimal place (e.g., 1.1)." - or "Provide an integer (e.g., 12)." for integer
grids; scorer `numeric`, answer formatted at that precision) or multiple choice with six consecutive
grid values A-F ("The reading of the gauge in the image is (bar): A. 6.6 B. 6.7 ..."; scorer
`option_letter`, answer the letter). `answer_format` = "mixed" (seeded 50/50), "numeric" or "choice".

Reference (tool set "default", every difficulty): `crop` the asked gauge's dial from image 0 with cubic
zoom to about 480 px; `hough_lines` on that crop (segments >= 0.2 dial radii); `crop` from image 0 a
tight box around the needle tip and the two labelled major ticks that bracket the value (tick marks and
labels), cubic zoom to about 400 px. The audit checks that each crop has the size its box and scale
give; that a crop holds the asked gauge's whole face and no other gauge's hub; that the last crop holds
the needle tip (needle-coloured pixels there, in the crop itself), both bracketing major ticks and their
labels; that the needle angle measured from the reported segments (those on a line through the asked
hub that start near it, length-weighted around the longest) is within MAX_ANGLE_ERROR of the rendered
one and, mapped through the scale and snapped to the resolution grid, gives the value; and that the
answer (or the chosen option) equals it.
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
from tools.ops.geometry import crop_box

NAME = "instrument"
DIFFICULTIES = ("easy", "medium", "hard")
FORMATS = ("mixed", "numeric", "choice")
LETTERS = "ABCDEF"
ORDINALS = ("first", "second", "third", "fourth")
MAX_ANGLE_ERROR = 1.25  # degrees between the needle angle measured from hough_lines and the true one (a step is >= 3)
MIN_RES_ANGLE = 3  # whole degrees of arc per resolution step (so a 1.25-degree measurement rounds to the value)
SWEEP = (240, 270)  # degrees of arc of the scale
MIN_MINOR_PITCH = 4.5  # pixels between minor ticks at the tick ring
NEEDLE_MIN_LENGTH = 0.2  # a needle segment is at least this many dial radii long...
NEEDLE_START = 0.3  # ...and starts within this many dial radii of the hub
NO_HORIZONTAL = 3  # degrees: needles this close to horizontal are not drawn (see the module docstring)
NEEDLE_SPREAD = 3.0  # degrees around the segments' length-weighted median angle that are averaged
DIAL_ZOOM = 480  # the dial crop's target side (pixels)
TIP_ZOOM = 400  # the tight crop's target long side (pixels)
# Units and their major steps in tenths of the unit (0.5 bar = 5); °C may start below zero.
UNITS = {
    "bar": (5, 10, 20), "psi": (50, 100, 200), "kg/cm²": (5, 10, 20, 50), "MPa": (1, 2, 5),
    "°C": (50, 100, 200), "km/h": (100, 200), "V": (50, 100), "A": (5, 10, 20),
}
SETTINGS = {
    "easy": {"gauges": (1, 1), "radius": (150, 185), "labels": (5, 6), "minor": (2, 4, 5), "half": 0.0},
    "medium": {"gauges": (1, 1), "radius": (85, 115), "labels": (6, 9), "minor": (4, 5, 10), "half": 0.5},
    "hard": {"gauges": (2, 4), "radius": (70, 90), "labels": (7, 11), "minor": (5, 10), "half": 0.7},
}
FACES = (  # face, ink (ticks and labels), bezel
    ((250, 250, 246), (20, 20, 20), (60, 60, 66)), ((245, 240, 222), (30, 26, 22), (150, 120, 60)),
    ((236, 240, 245), (10, 20, 50), (170, 175, 182)), ((255, 255, 255), (0, 0, 0), (25, 25, 25)),
    ((28, 30, 34), (240, 240, 240), (110, 112, 118)), ((18, 22, 40), (235, 235, 220), (180, 182, 190)),
)
NEEDLES = {"light": ((205, 20, 20), (220, 40, 10), (170, 0, 30), (190, 30, 60)),  # on light faces (gray <= 90)
           "dark": ((255, 140, 0), (255, 200, 40), (255, 170, 0), (255, 90, 60))}  # on dark faces (gray >= 120)
NEEDLE_SS = 4  # supersampling of the needle's coverage
SS = 16  # cv2 fixed-point shift 4: coordinates in 1/16 pixel
SHIFT = 4


# -- scale -------------------------------------------------------------------------------------------------
def value_to_angle(scale: dict, value: float) -> float:
    """Needle angle (degrees counter-clockwise from +x as seen on screen) for a value: the minimum sits at
    90 + sweep/2 (lower left) and values grow clockwise through the top to the lower right."""
    start = 90.0 + scale["sweep"] / 2.0
    return start - scale["sweep"] * (value - scale["lo"]) / (scale["hi"] - scale["lo"])


def angle_to_value(scale: dict, angle: float) -> float:
    """The inverse of `value_to_angle` for any angle (mod 360); angles in the gap below the hub map to
    the nearer end, extended linearly."""
    sweep = scale["sweep"]
    delta = (90.0 + sweep / 2.0 - angle) % 360.0
    if delta > sweep + (360.0 - sweep) / 2.0:
        delta -= 360.0
    return scale["lo"] + delta / sweep * (scale["hi"] - scale["lo"])


def snap(scale: dict, value: float) -> float:
    """The nearest value on the scale's resolution grid, rounded to the scale's decimals."""
    k = round((value - scale["lo"]) / scale["res"])
    k = min(max(k, 0), round((scale["hi"] - scale["lo"]) / scale["res"]))
    return round(scale["lo"] + k * scale["res"], scale["decimals"])


def fmt(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


def _label(tenths: int) -> str:
    return str(tenths // 10) if tenths % 10 == 0 else f"{tenths / 10:.1f}"


def _scale(rng: random.Random, cfg: dict, radius: float, font_path: str, label_size: int) -> dict:
    """A seeded scale whose resolution step spans a whole number (>= MIN_RES_ANGLE) of degrees, whose
    minor ticks are >= MIN_MINOR_PITCH px apart and whose labels do not touch (values in tenths of the
    unit internally, so every value is exact). The sweep is chosen so that a resolution step is a whole
    number of degrees: every possible needle angle is then an integer, which Hough's 1-degree bins
    follow exactly (OpenCV's HoughLinesP walks a segment along its bin's direction, pixel-exact, so a
    needle a fraction of a degree off its bin breaks into short pieces)."""
    for _ in range(500):
        unit = rng.choice(sorted(UNITS))
        major = rng.choice(UNITS[unit])
        intervals = rng.randint(*cfg["labels"]) - 1
        minor_div = rng.choice(cfg["minor"])
        if major % minor_div:
            continue
        minor = major // minor_div
        res = minor // 2 if (minor % 2 == 0 and rng.random() < cfg["half"]) else minor
        lo = -major * rng.choice((1, 2)) if unit == "°C" and rng.random() < 0.4 else 0
        hi = lo + major * intervals
        steps = (hi - lo) // res
        sweeps = [steps * a for a in range(math.ceil(MIN_RES_ANGLE), 91) if SWEEP[0] <= steps * a <= SWEEP[1] and steps * a % 2 == 0]
        if not sweeps:
            continue
        sweep = rng.choice(sweeps)
        if math.radians(sweep * minor / (hi - lo)) * 0.86 * radius < MIN_MINOR_PITCH:
            continue
        decimals = 0 if all(v % 10 == 0 for v in (lo, major, minor, res)) else 1
        scale = {"unit": unit, "lo": lo / 10, "hi": hi / 10, "major": major / 10, "minor": minor / 10,
                 "res": res / 10, "sweep": sweep, "decimals": decimals, "_tenths": [lo, hi, major, minor, res]}
        labels = _layout_labels(scale, radius, font_path, label_size)
        boxes = [lab["box"] for lab in labels] + [_unit_box(scale, radius, font_path)]
        if any(_overlaps(_grow_box(a, 2), [b]) for i, a in enumerate(boxes) for b in boxes[i + 1:]):
            continue
        scale["_labels"] = labels
        return scale
    raise RuntimeError(f"{NAME}: no scale fits radius {radius}")  # pragma: no cover


def _grow_box(box, m):
    return (box[0] - m, box[1] - m, box[2] + m, box[3] + m)


def _layout_labels(scale: dict, R: float, font_path: str, size: int) -> list[dict]:
    """Major tick labels relative to the hub: text, centre, tick ends and text box (pixels)."""
    face_font = _font(font_path, size)
    lo_t, hi_t, major_t = scale["_tenths"][:3]
    r_out = 0.86 * R
    labels = []
    for v_t in range(lo_t, hi_t + 1, major_t):
        a = value_to_angle(scale, v_t / 10)
        text = _label(v_t)
        x0, y0, x1, y1 = face_font.getbbox(text, anchor="mm")
        half = abs(math.cos(math.radians(a))) * (x1 - x0) / 2 + abs(math.sin(math.radians(a))) * (y1 - y0) / 2
        lx, ly = _polar(0, 0, r_out - 0.17 * R - half, a)
        labels.append({"value": v_t / 10, "text": text, "center": [lx, ly], "size": size,
                       "tick": [list(_polar(0, 0, r_out - 0.12 * R, a)), list(_polar(0, 0, r_out, a))],
                       "box": [lx + x0 - 1, ly + y0 - 1, lx + x1 + 1, ly + y1 + 1]})
    return labels


def _unit_box(scale: dict, R: float, font_path: str) -> list[float]:
    x0, y0, x1, y1 = _font(font_path, _unit_size(R)).getbbox(scale["unit"], anchor="mm")
    return [x0, 0.42 * R + y0, x1, 0.42 * R + y1]


def _unit_size(R: float) -> int:
    return max(11, round(0.12 * R))


# -- rendering ----------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _font(path: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(path, size)


def _fx(*values: float) -> tuple[int, ...]:
    return tuple(int(round(v * SS)) for v in values)


def _polar(cx: float, cy: float, r: float, angle: float) -> tuple[float, float]:
    a = math.radians(angle)
    return cx + r * math.cos(a), cy - r * math.sin(a)


def _draw_gauge(canvas: np.ndarray, texts: list, gauge: dict, style: dict) -> None:
    """The gauge's face, ticks and red zone (cv2, now); its labels go to `texts` (drawn later with PIL)."""
    cx, cy, R = gauge["center"][0], gauge["center"][1], gauge["radius"]
    scale, face, ink, bezel = gauge["scale"], style["face"], style["ink"], style["bezel"]
    lo_t, hi_t, major_t, minor_t, _ = scale["_tenths"]
    cv2.circle(canvas, _fx(cx, cy), int(R * SS), tuple(max(0, c - 35) for c in bezel), -1, cv2.LINE_AA, SHIFT)
    cv2.circle(canvas, _fx(cx, cy), int(0.97 * R * SS), bezel, -1, cv2.LINE_AA, SHIFT)
    cv2.circle(canvas, _fx(cx, cy), int(0.91 * R * SS), face, -1, cv2.LINE_AA, SHIFT)
    r_out = 0.86 * R
    if style["red_zone"]:
        a1, a2 = value_to_angle(scale, scale["hi"] - scale["major"]), value_to_angle(scale, scale["hi"])
        cv2.ellipse(canvas, _fx(cx, cy), _fx(r_out - 0.03 * R, r_out - 0.03 * R), 0, -a1, -a2, (210, 40, 40),
                    max(2, int(0.05 * R)), cv2.LINE_AA, SHIFT)
    thick_major, thick_minor = max(2, round(0.022 * R)), max(1, round(0.011 * R))
    for v_t in range(lo_t, hi_t + 1, minor_t):
        a = value_to_angle(scale, v_t / 10)
        is_major = (v_t - lo_t) % major_t == 0
        r_in = r_out - (0.12 if is_major else 0.06) * R
        p, q = _polar(cx, cy, r_in, a), _polar(cx, cy, r_out, a)
        cv2.line(canvas, _fx(*p), _fx(*q), ink, thick_major if is_major else thick_minor, cv2.LINE_AA, SHIFT)
    labels = []
    for lab in scale["_labels"]:
        lx, ly = cx + lab["center"][0], cy + lab["center"][1]
        # PIL's anchor "mm" centres the text box; drawn at whole pixels, so the box is shifted with it
        dx, dy = round(lx) - lx, round(ly) - ly
        texts.append((round(lx), round(ly), lab["text"], _font(str(style["font"]), lab["size"]), ink, "mm"))
        labels.append({"value": lab["value"], "text": lab["text"],
                       "tick": [[round(cx + x, 2), round(cy + y, 2)] for x, y in lab["tick"]],
                       "box": [round(cx + lab["box"][0] + dx, 2), round(cy + lab["box"][1] + dy, 2),
                               round(cx + lab["box"][2] + dx, 2), round(cy + lab["box"][3] + dy, 2)]})
    gauge["labels"] = labels
    unit_font = _font(str(style["font"]), _unit_size(R))
    texts.append((round(cx), round(cy + 0.42 * R), scale["unit"], unit_font, ink, "mm"))


def _draw_needle(canvas: np.ndarray, gauge: dict, color: tuple) -> None:
    cx, cy, R = gauge["center"][0], gauge["center"][1], gauge["radius"]
    a = gauge["angle"]
    half = gauge["needle_half_width"]
    ux, uy = math.cos(math.radians(a)), -math.sin(math.radians(a))
    nx, ny = -uy, ux
    tail, body, tip = -0.18 * R, gauge["tip_radius"] - 0.08 * R, gauge["tip_radius"]
    poly = [(cx + ux * tail + nx * half, cy + uy * tail + ny * half),
            (cx + ux * body + nx * half, cy + uy * body + ny * half),
            (cx + ux * tip, cy + uy * tip),
            (cx + ux * body - nx * half, cy + uy * body - ny * half),
            (cx + ux * tail - nx * half, cy + uy * tail - ny * half)]
    # Area-exact anti-aliasing: the needle's coverage is rasterised at NEEDLE_SS x and averaged down, so its
    # straight edges stay straight (to a fraction of a pixel) when a crop zooms them.
    x0, y0 = max(0, int(cx - R)), max(0, int(cy - R))
    x1, y1 = min(canvas.shape[1], int(cx + R) + 2), min(canvas.shape[0], int(cy + R) + 2)
    k = NEEDLE_SS
    mask = np.zeros(((y1 - y0) * k, (x1 - x0) * k), np.uint8)
    points = np.array([[((x - x0) * k + 0.5 * (k - 1)) * SS, ((y - y0) * k + 0.5 * (k - 1)) * SS] for x, y in poly])
    cv2.fillConvexPoly(mask, np.round(points).astype(np.int32), 255, cv2.LINE_8, SHIFT)
    alpha = cv2.resize(mask, (x1 - x0, y1 - y0), interpolation=cv2.INTER_AREA).astype(np.float32)[..., None] / 255.0
    region = canvas[y0:y1, x0:x1].astype(np.float32)
    canvas[y0:y1, x0:x1] = np.round(region + alpha * (np.array(color, np.float32) - region)).astype(np.uint8)
    cv2.circle(canvas, _fx(cx, cy), int(gauge["hub_radius"] * SS), (40, 40, 44), -1, cv2.LINE_AA, SHIFT)
    cv2.circle(canvas, _fx(cx, cy), int(0.45 * gauge["hub_radius"] * SS), color, -1, cv2.LINE_AA, SHIFT)


def _background(rng: random.Random, width: int, height: int, plain: bool) -> np.ndarray:
    if plain:
        top = np.array([rng.randint(200, 250) for _ in range(3)], np.float32)
        bottom = top
    else:
        top = np.array([rng.randint(70, 200) for _ in range(3)], np.float32)
        bottom = np.clip(top + rng.uniform(-50, 50), 0, 255)
    t = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    column = (top * (1 - t) + bottom * t).astype(np.uint8)
    return cv2.resize(column, (width, height), interpolation=cv2.INTER_NEAREST)


def _overlaps(box, boxes) -> bool:
    return any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in boxes)


def _clutter(rng: random.Random, canvas: np.ndarray, texts: list, keep_out: list, count: int, font) -> list:
    """Pipes, plates with words, valves and boxes, none inside the keep-out boxes (the gauges' dials)."""
    h, w = canvas.shape[:2]
    drawn = []
    for _ in range(count * 6):
        if len(drawn) >= count:
            break
        kind = rng.choice(("pipe", "plate", "valve", "box"))
        color = tuple(rng.randint(40, 230) for _ in range(3))
        if kind == "pipe":
            t = rng.randint(12, 28)
            if rng.random() < 0.5:
                y = rng.randint(0, h - t)
                box = (0, y, w, y + t)
            else:
                x = rng.randint(0, w - t)
                box = (x, 0, x + t, h)
        elif kind == "plate":
            text = rng.choice(words()).upper()
            size = rng.randint(12, 20)
            face = _font(str(font), size)
            x0, y0, x1, y1 = face.getbbox(text)
            bw, bh = x1 - x0 + 16, y1 - y0 + 12
            x, y = rng.randint(0, max(0, w - bw)), rng.randint(0, max(0, h - bh))
            box = (x, y, x + bw, y + bh)
        elif kind == "valve":
            r = rng.randint(14, 32)
            x, y = rng.randint(r, w - r), rng.randint(r, h - r)
            box = (x - r, y - r, x + r, y + r)
        else:
            bw, bh = rng.randint(30, 120), rng.randint(30, 100)
            x, y = rng.randint(0, max(0, w - bw)), rng.randint(0, max(0, h - bh))
            box = (x, y, x + bw, y + bh)
        if _overlaps(box, keep_out):
            continue
        drawn.append(kind)
        x1, y1, x2, y2 = box
        if kind == "pipe":
            cv2.rectangle(canvas, (x1, y1), (x2 - 1, y2 - 1), color, -1)
            lighter = tuple(min(255, c + 50) for c in color)
            if x2 - x1 > y2 - y1:
                cv2.rectangle(canvas, (x1, y1 + 2), (x2 - 1, y1 + max(3, (y2 - y1) // 4)), lighter, -1)
            else:
                cv2.rectangle(canvas, (x1 + 2, y1), (x1 + max(3, (x2 - x1) // 4), y2 - 1), lighter, -1)
        elif kind == "plate":
            cv2.rectangle(canvas, (x1, y1), (x2 - 1, y2 - 1), color, -1)
            ink = (0, 0, 0) if sum(color) > 380 else (255, 255, 255)
            texts.append(((x1 + x2) // 2, (y1 + y2) // 2, text, face, ink, "mm"))
        elif kind == "valve":
            r = (x2 - x1) // 2
            cv2.circle(canvas, (x1 + r, y1 + r), r, color, 3, cv2.LINE_AA)
            for k in range(rng.choice((3, 4, 5))):
                a = 2 * math.pi * k / 5 + rng.random()
                cv2.line(canvas, (x1 + r, y1 + r), (int(x1 + r + r * math.cos(a)), int(y1 + r + r * math.sin(a))),
                         color, 3, cv2.LINE_AA)
        else:
            cv2.rectangle(canvas, (x1, y1), (x2 - 1, y2 - 1), color, -1)
            cv2.rectangle(canvas, (x1, y1), (x2 - 1, y2 - 1), tuple(c // 2 for c in color), 2)
            for sx, sy in ((x1 + 6, y1 + 6), (x2 - 7, y1 + 6), (x1 + 6, y2 - 7), (x2 - 7, y2 - 7)):
                cv2.circle(canvas, (sx, sy), 2, (90, 90, 90), -1, cv2.LINE_AA)
    return drawn


# -- generation ---------------------------------------------------------------------------------------------
def generate(seed: int, difficulty: str = "medium", answer_format: str = "mixed") -> Sample:
    require_choice("difficulty", difficulty, SETTINGS)
    require_choice("answer_format", answer_format, FORMATS)
    require_seed(seed)
    cfg = SETTINGS[difficulty]
    rng = random.Random(f"{NAME}:{seed}:{difficulty}:{answer_format}")
    n = rng.randint(*cfg["gauges"])
    radius = rng.randint(*cfg["radius"])
    font = rng.choice(fonts())
    face, ink, bezel = rng.choice(FACES)
    style = {"face": face, "ink": ink, "bezel": bezel, "font": font, "red_zone": rng.random() < 0.4}
    label_size = max(11, round((rng.uniform(0.12, 0.14) if difficulty != "hard" else 0.15) * radius))
    needle_color = rng.choice(NEEDLES["dark" if sum(face) < 384 else "light"])
    pad = round(0.06 * radius)
    # Layout: the dial squares (center +- radius + pad) in a row, with room around them.
    if difficulty == "easy":
        side = 2 * radius + 2 * rng.randint(12, 40)
        width, height = side + rng.randint(0, 40), side + rng.randint(0, 40)
        centers = [(width / 2 + rng.uniform(-8, 8), height / 2 + rng.uniform(-8, 8))]
    elif difficulty == "medium":
        width, height = rng.randint(560, 720), rng.randint(420, 540)
        cx = rng.uniform(radius + pad + 4, width - radius - pad - 4)
        cy = rng.uniform(radius + pad + 4, height - radius - pad - 4)
        centers = [(cx, cy)]
    else:
        gap = rng.randint(2 * pad + 10, 2 * pad + 50)
        margin = rng.randint(30, 90)
        width = n * 2 * radius + (n - 1) * gap + 2 * margin
        height = 2 * radius + 2 * rng.randint(50, 110)
        cy = rng.uniform(radius + pad + 20, height - radius - pad - 20)
        centers = [(margin + radius + k * (2 * radius + gap), cy + rng.uniform(-6, 6)) for k in range(n)]
    canvas = _background(rng, width, height, plain=difficulty == "easy")
    texts: list = []
    keep_out = [(cx - radius - pad - 2, cy - radius - pad - 2, cx + radius + pad + 2, cy + radius + pad + 2)
                for cx, cy in centers]
    clutter = []
    if difficulty != "easy":
        clutter = _clutter(rng, canvas, texts, keep_out, rng.randint(4, 8) if difficulty == "medium" else rng.randint(2, 5), font)
        amplitude = rng.randint(3, 7)  # grain on the panel (the gauges' glass stays clean)
        noise = np.random.default_rng(rng.getrandbits(64)).integers(-amplitude, amplitude + 1, canvas.shape, np.int16)
        canvas = np.clip(canvas.astype(np.int16) + noise, 0, 255).astype(np.uint8)
    gauges = []
    for cx, cy in centers:
        scale = _scale(rng, cfg, radius, str(font), label_size)
        steps = round((scale["hi"] - scale["lo"]) / scale["res"])
        allowed = [k for k in range(1, steps)  # not a needle within NO_HORIZONTAL degrees of horizontal
                   if abs((value_to_angle(scale, scale["lo"] + k * scale["res"]) + 90) % 180 - 90) > NO_HORIZONTAL]
        value = round(scale["lo"] + rng.choice(allowed) * scale["res"], scale["decimals"])
        gauge = {"center": [round(cx, 3), round(cy, 3)], "radius": radius, "scale": scale, "value": value,
                 "angle": value_to_angle(scale, value), "tip_radius": 0.83 * radius,
                 "hub_radius": 0.075 * radius, "needle_half_width": max(1.5, 0.02 * radius)}
        gauge["tip"] = [round(t, 3) for t in _polar(cx, cy, gauge["tip_radius"], gauge["angle"])]
        _draw_gauge(canvas, texts, gauge, style)
        gauges.append(gauge)
    image = Image.fromarray(canvas)
    draw = ImageDraw.Draw(image)
    for x, y, text, face_font, color, anchor in texts:
        draw.text((x, y), text, font=face_font, fill=tuple(color), anchor=anchor)
    canvas = np.array(image)
    for gauge in gauges:
        _draw_needle(canvas, gauge, needle_color)

    asked = rng.randrange(n)
    gauge = gauges[asked]
    scale, value = gauge["scale"], gauge["value"]
    d = scale["decimals"]
    fmt_choice = answer_format if answer_format != "mixed" else rng.choice(("numeric", "choice"))
    subject = "the gauge" if n == 1 else f"the {ORDINALS[asked]} gauge from the left"
    if fmt_choice == "numeric":
        precision = "Provide one decimal place (e.g., 1.1)." if d == 1 else "Provide an integer (e.g., 12)."
        question = f"What is the reading of {subject} in {scale['unit']}? {precision}"
        answer, scorer, options = fmt(value, d), "numeric", None
    else:
        steps = round((scale["hi"] - scale["lo"]) / scale["res"])
        k = round((value - scale["lo"]) / scale["res"])
        first = rng.randint(max(0, k - 5), min(k, steps - 5))
        values = [fmt(scale["lo"] + (first + i) * scale["res"], d) for i in range(6)]
        options = dict(zip(LETTERS, values))
        listed = "\n".join(f"{letter}. {v}" for letter, v in options.items())
        question = (f"The reading of {subject} in the image is ({scale['unit']}):\n{listed}\n"
                    "Answer with the option's letter.")
        answer, scorer = LETTERS[values.index(fmt(value, d))], "option_letter"

    calls = _reference(gauge, width, height)
    public = [{k: v for k, v in g.items() if k != "scale"} | {"scale": {k: v for k, v in g["scale"].items() if not k.startswith("_")}}
              for g in gauges]
    return Sample(
        task=NAME, id=f"{NAME}-{difficulty}-{answer_format}-{seed}", image=canvas, question=question,
        answer=answer, scorer=scorer, toolset="default", calls=calls,
        evidence={"needle_color": list(needle_color)},
        meta={"seed": seed, "difficulty": difficulty, "answer_format": fmt_choice, "value": value,
              "unit": scale["unit"], "asked": asked, "gauges": public, "options": options,
              "font": font.name, "clutter": clutter, "size": [width, height]},
    )


def _bracket(gauge: dict) -> tuple[dict, dict]:
    """The two labelled major ticks around the value (the value's own major and the next one when it sits
    exactly on a major tick; the last two when it is the maximum)."""
    labels, value = gauge["labels"], gauge["value"]
    below = max(i for i, label in enumerate(labels) if label["value"] <= value + 1e-9)
    below = min(below, len(labels) - 2)
    return labels[below], labels[below + 1]


def _tip_box(gauge: dict, width: int, height: int) -> list[int]:
    lower, upper = _bracket(gauge)
    xs = [gauge["tip"][0]] + [p[0] for lab in (lower, upper) for p in lab["tick"]] + [lab["box"][i] for lab in (lower, upper) for i in (0, 2)]
    ys = [gauge["tip"][1]] + [p[1] for lab in (lower, upper) for p in lab["tick"]] + [lab["box"][i] for lab in (lower, upper) for i in (1, 3)]
    pad = 0.07 * gauge["radius"] + 4
    return [max(0, math.floor(min(xs) - pad)), max(0, math.floor(min(ys) - pad)),
            min(width, math.ceil(max(xs) + pad)), min(height, math.ceil(max(ys) + pad))]


def _reference(gauge: dict, width: int, height: int) -> tuple[dict, ...]:
    """Zoom the asked dial (cubic, about DIAL_ZOOM px), find the needle's edges with Hough on that crop,
    then zoom the needle tip with the two labelled major ticks around it (about TIP_ZOOM px)."""
    cx, cy, R = gauge["center"][0], gauge["center"][1], gauge["radius"]
    pad = round(0.06 * R)
    box = [max(0, math.floor(cx - R - pad)), max(0, math.floor(cy - R - pad)),
           min(width, math.ceil(cx + R + pad)), min(height, math.ceil(cy + R + pad))]
    zoom = round(DIAL_ZOOM / max(box[2] - box[0], box[3] - box[1]), 2)
    r = R * zoom  # the dial's radius in the crop
    calls = [{"name": "crop", "arguments": {"image_index": 0, "box": box, "scale": zoom, "interpolation": "cubic"}},
             {"name": "hough_lines", "arguments": {
                 "image_index": 1, "canny_low": 50, "canny_high": 150, "threshold": int(0.15 * r),
                 "min_line_length": int(0.2 * r), "max_line_gap": max(3, int(0.06 * r)), "max_lines": 50}}]
    box = _tip_box(gauge, width, height)
    tip_zoom = round(min(8.0, max(1.0, TIP_ZOOM / max(box[2] - box[0], box[3] - box[1]))), 1)
    calls.append({"name": "crop", "arguments": {"image_index": 0, "box": box, "scale": tip_zoom, "interpolation": "cubic"}})
    return tuple(calls)


# -- audit --------------------------------------------------------------------------------------------------
def _crop_geometry(call: dict, source: np.ndarray, output: np.ndarray, sample_id: str):
    """The pixel box a crop call cut and its x/y zoom, after checking the output has that box's size."""
    args = call["arguments"]
    h, w = source.shape[:2]
    box = crop_box(args["box"], args.get("units", "pixels"), args.get("bounds", "error"), args.get("min_side", 1), h, w)
    scale = args.get("scale", 1.0)
    expected = (max(1, round((box[3] - box[1]) * scale)), max(1, round((box[2] - box[0]) * scale)))
    if output.shape[:2] != expected:
        raise AuditError(f"{sample_id}: the crop of {list(box)} x{scale} is {output.shape[:2]}, expected {expected}")
    return box, expected[1] / (box[2] - box[0]), expected[0] / (box[3] - box[1])


def _inside(box, x, y) -> bool:
    return box[0] <= x < box[2] and box[1] <= y < box[3]


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    sid, meta = sample.id, sample.meta
    gauges, asked = meta["gauges"], meta["asked"]
    gauge = gauges[asked]
    cx, cy, R = gauge["center"][0], gauge["center"][1], gauge["radius"]
    scale, value = gauge["scale"], gauge["value"]
    if len(workspace) != len(sample.calls) + 1 or len(reports) != len(sample.calls):
        raise AuditError(f"{sid}: {len(sample.calls)} reference calls made {len(workspace) - 1} images")
    frames = {0: ((0, 0, workspace[0].shape[1], workspace[0].shape[0]), 1.0, 1.0)}  # image -> (box, zx, zy) in image 0
    dial_seen = tip_seen = measured = None
    for k, call in enumerate(sample.calls):
        args, out = call["arguments"], workspace[k + 1]
        source = args.get("image_index", -1) % (k + 1)
        if call["name"] == "crop":
            if source != 0:
                raise AuditError(f"{sid}: crops are expected from the task image, not image {source}")
            box, zx, zy = _crop_geometry(call, workspace[0], out, sid)
            frames[k + 1] = (box, zx, zy)
            face = 0.91 * R
            if all(_inside(box, x, y) for x, y in ((cx - face, cy - face), (cx + face - 1, cy + face - 1))):
                others = [g for i, g in enumerate(gauges) if i != asked and _inside(box, *g["center"])]
                if others:
                    raise AuditError(f"{sid}: the dial crop {list(box)} also holds another gauge's hub")
                dial_seen = k + 1
            tip_seen = _tip_crop_holds(sample, gauge, box, zx, zy, out)  # the last crop decides
        elif call["name"] == "hough_lines":
            if source not in frames:
                raise AuditError(f"{sid}: hough_lines ran on image {source}, which is not a crop of the task image")
            measured = _needle_angle(sid, gauge, frames[source], reports[k])
    if dial_seen is None:
        raise AuditError(f"{sid}: no crop holds the asked gauge's whole dial")
    if not tip_seen:
        raise AuditError(f"{sid}: the last crop does not hold the needle tip and the labelled major ticks around the value")
    if measured is None:
        raise AuditError(f"{sid}: the reference measured no needle angle")
    error = (measured - gauge["angle"] + 180.0) % 360.0 - 180.0
    if abs(error) > MAX_ANGLE_ERROR:
        raise AuditError(f"{sid}: hough_lines puts the needle at {measured:.2f} degrees, the render at "
                         f"{gauge['angle'] % 360:.2f} (off by {error:.2f})")
    reading = snap(scale, angle_to_value(scale, measured))
    if abs(reading - value) > 1e-9:
        raise AuditError(f"{sid}: the measured needle angle reads {reading}, the gauge shows {value}")
    expected = fmt(value, scale["decimals"])
    if sample.scorer == "numeric":
        if sample.answer != expected:
            raise AuditError(f"{sid}: the answer {sample.answer!r} is not the reading {expected}")
    else:
        options = meta["options"] or {}
        if options.get(sample.answer) != expected or list(options.values()).count(expected) != 1:
            raise AuditError(f"{sid}: the answer {sample.answer!r} is not the option reading {expected}")


def _tip_crop_holds(sample: Sample, gauge: dict, box, zx: float, zy: float, out: np.ndarray) -> bool:
    """Whether the crop holds the needle tip (needle-coloured pixels at the tip, in the crop itself), the
    two bracketing major ticks and their labels."""
    lower, upper = _bracket(gauge)
    points = [tuple(gauge["tip"])] + [tuple(p) for lab in (lower, upper) for p in lab["tick"]]
    points += [(lab["box"][i], lab["box"][j]) for lab in (lower, upper) for i in (0, 2) for j in (1, 3)]
    if not all(_inside((box[0], box[1], box[2] + 1, box[3] + 1), x, y) for x, y in points):
        return False
    # the tip, a little back along the needle (the pointed end is sub-pixel), must show the needle's colour
    back = _polar(gauge["center"][0], gauge["center"][1], gauge["tip_radius"] - 0.06 * gauge["radius"], gauge["angle"])
    x, y = (back[0] - box[0]) * zx, (back[1] - box[1]) * zy
    r = max(2, round(1.5 * zx))
    patch = out[max(0, int(y) - r):int(y) + r + 1, max(0, int(x) - r):int(x) + r + 1].astype(int)
    color = np.array(sample.evidence["needle_color"])
    return patch.size > 0 and bool((np.abs(patch - color).max(axis=-1) <= 60).any())


def _needle_angle(sid: str, gauge: dict, frame, report: dict) -> float:
    """The needle's direction measured from the reported segments: those on a line through the asked
    gauge's hub that start near it (the needle's edges; ticks and labels lie farther out) and are at
    least NEEDLE_MIN_LENGTH dial radii long. Their angle is the length-weighted mean of those within
    NEEDLE_SPREAD degrees of the length-weighted median; the needle points to the side of the hub where
    those segments' length lies (the counterweight tail is short). In the analysed image's pixels."""
    (bx, by, _, _), zx, zy = frame
    hx, hy = (gauge["center"][0] - bx) * zx, (gauge["center"][1] - by) * zy
    r = gauge["radius"] * zx
    tolerance = gauge["needle_half_width"] * zx + 0.03 * r + 2
    found = []
    for line in report.get("lines", []):  # longest first
        x1, y1, x2, y2 = line["segment"]
        length = math.hypot(x2 - x1, y2 - y1)
        if length < NEEDLE_MIN_LENGTH * r:
            continue
        distance = abs((x2 - x1) * (hy - y1) - (y2 - y1) * (hx - x1)) / length
        if distance > tolerance or min(math.hypot(x1 - hx, y1 - hy), math.hypot(x2 - hx, y2 - hy)) > NEEDLE_START * r:
            continue  # not on a line through the hub, or not starting at it (a tick, a label)
        found.append((length, line["angle"], ((x1 + x2) / 2 - hx, (y1 + y2) / 2 - hy)))
    if not found:
        raise AuditError(f"{sid}: hough_lines reported no segment through the asked gauge's hub")
    first = found[0][1]
    offsets = sorted(((length, (angle - first + 90) % 180 - 90, mid) for length, angle, mid in found), key=lambda t: t[1])
    total, running = sum(t[0] for t in offsets), 0.0
    for length, offset, _ in offsets:
        running += length
        if running >= total / 2:
            median = offset
            break
    chosen = [t for t in offsets if abs(t[1] - median) <= NEEDLE_SPREAD]
    angle = first + sum(length * d for length, d, _ in chosen) / sum(length for length, _, _ in chosen)
    ux, uy = math.cos(math.radians(angle)), -math.sin(math.radians(angle))
    side = sum(length * (mid[0] * ux + mid[1] * uy) for length, _, mid in chosen)
    return angle if side >= 0 else angle + 180.0
