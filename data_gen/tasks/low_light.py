"""Low-light VQA (TIR-Bench's "contrast" task): answer a question about a photo too dark to see.

A seeded well-lit scene is rendered first: a background (a two-color gradient, channels 95-165, with
smooth texture), bright anti-aliased shapes (triangles, squares, circles; luminance 205-250) that do
not touch, and one light sign (at least PLATE_ASPECT times as wide as high) with dark text in a seeded
font: a word from `data_gen.text` (easy), word + number (medium), two words + number (hard). It is then
made a dark photo: a gamma curve (in ^ g, g in 1.1-1.4), exposure scaled to a target mean (easy 18-26,
medium 13-20, hard 8-13 of 255), sensor noise (Gaussian read noise plus shot noise whose variance grows
with the signal, the Poisson-Gaussian model; read from a seeded window of a fixed noise field, which is
much faster than drawing it) and rounding to uint8. Harder levels are darker and noisier, with more,
smaller shapes and smaller text.

Two kinds of question (`question="any"` picks one at random; "count" or "sign" forces it):
- count: "How many triangles|squares|circles are in the image? Answer with an integer." (scorer
  numeric; the asked kind is present). The reference enhances (`autocontrast`, cutoff 1%), smooths the
  noise (`blur`, gaussian 5x5) and measures with `contours` (Otsu, external outlines, min_area 60,
  epsilon_ratio 0.04). A shape's kind is read off its contour's data (`kind_of`): 3 vertices =
  triangle, 4 with a near-square box = square (4 with a wide box = the sign plate), 5+ = circle. The
  generator redraws a scene (rarely, ~1 hard scene in 100) until this reading gets every shape right.
- sign: "What is written on the sign in the image?" with options A-E (scorer option_letter); the
  distractors change one or more tokens to look-alikes (a word of the same length and first letter, a
  number with as many digits). The reference enhances (`autocontrast`), then zooms on the sign (`crop`,
  scale 2).

The audit proves from the tools' outputs that the enhancement exposes the scene: in the enhanced image
(the first call's output) the objects' median gray stands out from the background's by at least
MIN_CONTRAST levels while in the dark input it does not. For counts, every rendered object (and the
plate) is exactly one reported contour (centroid inside it, area within AREA_TOLERANCE), no other
contour is reported, each reads as its rendered kind, and the report's count of the asked kind is the
answer. For signs, in the zoomed crop the text stands out from the plate by MIN_CONTRAST levels (in the
dark input it does not), its ink (Otsu after a 3x3 median) lies on the well-lit render's ink within a
pixel on at least MIN_INK_AGREEMENT of either's ink, and the answer is the option equal to the sign.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random

import cv2
import numpy as np

from data_gen.sample import AuditError, Sample, require_choice, require_seed
from data_gen.text import fonts, render_lines, words
from tools.executor import Executor, ToolCall

NAME = "low_light"
KINDS = ("triangle", "square", "circle")
LETTERS = "ABCDE"
SETTINGS = {  # image side, shapes, shape circumradius, dark mean, read noise sigma, photons per level, text size
    "easy": {"side": (384, 448), "shapes": (3, 6), "radius": (22, 32), "mean": (18, 26), "read": 1.0,
             "photons": 4.0, "text": (30, 38), "tokens": ("word",)},
    "medium": {"side": (448, 512), "shapes": (6, 10), "radius": (16, 24), "mean": (13, 20), "read": 1.5,
               "photons": 3.0, "text": (26, 32), "tokens": ("word", "number")},
    "hard": {"side": (512, 576), "shapes": (10, 15), "radius": (14, 20), "mean": (8, 13), "read": 1.8,
             "photons": 2.5, "text": (22, 28), "tokens": ("word", "word", "number")},
}
OBJECT_COLORS = ((255, 230, 40), (150, 240, 250), (250, 250, 250), (170, 250, 150), (255, 200, 110),
                 (255, 185, 225), (190, 220, 255), (230, 200, 255))  # luminance 205-250
BACKGROUND = (95, 165)  # background channels
BANK = 1024  # side of the noise field
GAP = 10  # pixels between objects
MARGIN = 12  # pixels between objects and the image border
AUTOCONTRAST = {"cutoff": 1.0}  # percent of darkest / lightest pixels ignored per channel
BLUR = {"method": "gaussian", "ksize": 5}
CONTOURS = {"binarize": "otsu", "mode": "external", "min_area": 60, "max_contours": 50, "epsilon_ratio": 0.04,
            "draw": "polygons", "label": "vertices"}  # min_area: noise specks are smaller, every shape larger
PLATE_ASPECT = 1.8  # the sign is at least this many times as wide as high
MAX_DRAWS = 20
_EXECUTOR = Executor(device="opencv")
AREA_TOLERANCE = 0.3  # a contour's area vs its object's rendered area
MIN_CONTRAST = 60  # gray levels between objects and background that a person sees at a glance
MIN_INK_AGREEMENT = 0.85
QUESTIONS = {
    "count": "How many {kind}s are in the image? Answer with an integer.",
    "sign": "What is written on the sign in the image? Choose the correct option.\n{options}\n"
            "Answer with the option's letter.",
}
SCORERS = {"count": "numeric", "sign": "option_letter"}  # eval.scorers


def generate(seed: int, difficulty: str = "medium", question: str = "any") -> Sample:
    require_choice("difficulty", difficulty, SETTINGS)
    if question not in ("any", *QUESTIONS):
        raise ValueError(f"question must be one of {['any', *QUESTIONS]}, got {question!r}")
    require_seed(seed)
    cfg = SETTINGS[difficulty]
    key = f"{NAME}:{seed}:{difficulty}:{question}"
    rng = random.Random(key)
    nrng = np.random.default_rng(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little"))
    kind_q = question if question != "any" else rng.choice(tuple(QUESTIONS))
    width, height = rng.randint(*cfg["side"]), rng.randint(*cfg["side"])

    tokens = _sign_tokens(rng, cfg["tokens"])
    text = " ".join(tokens)
    font = rng.choice(fonts())
    plate_color = tuple(rng.randint(215, 245) for _ in range(3))
    ink = tuple(rng.randint(10, 60) for _ in range(3))
    sign = render_lines([text], font, rng.randint(*cfg["text"]), ink, plate_color, padding=10)
    sh, sw = sign.shape[:2]
    if sw < PLATE_ASPECT * sh:  # a short word: widen the plate so it never reads as a square
        extra = math.ceil(PLATE_ASPECT * sh) - sw
        sign = cv2.copyMakeBorder(sign, 0, 0, extra // 2, extra - extra // 2, cv2.BORDER_CONSTANT, value=plate_color)
        sh, sw = sign.shape[:2]
    if sw > width - 2 * MARGIN:  # a long sign on a small image: widen the image
        width = sw + 2 * MARGIN + 8
    for _ in range(MAX_DRAWS):  # redraw the scene until the standard reading of every shape is right
        sx, sy = rng.randint(MARGIN, width - MARGIN - sw), rng.randint(MARGIN, height - MARGIN - sh)
        well, objects, labels = _scene(rng, nrng, cfg, width, height, (sx, sy, sw, sh))
        well[sy:sy + sh, sx:sx + sw] = sign
        labels[sy:sy + sh, sx:sx + sw] = 255  # the sign plate
        dark, dark_meta = _darken(rng, cfg, well)
        if kind_q != "count" or _reading_error(objects, labels, _measure(dark)) is None:
            break
    else:  # pragma: no cover - a redraw is needed for about 1 hard scene in 100
        raise RuntimeError(f"{NAME}: no readable scene in {MAX_DRAWS} draws for seed {seed}")

    counts = {k: sum(o["kind"] == k for o in objects) for k in KINDS}
    enhance = {"name": "autocontrast", "arguments": {"image_index": 0, **AUTOCONTRAST}}
    meta = {"seed": seed, "difficulty": difficulty, "question": kind_q, "size": [width, height],
            "objects": objects, "counts": counts, "sign": {"text": text, "box": [sx, sy, sx + sw, sy + sh],
                                                           "font": font.name}, **dark_meta}
    if kind_q == "count":
        kind = rng.choice([k for k in KINDS if counts[k]])
        meta["kind"] = kind
        calls = (enhance, {"name": "blur", "arguments": dict(BLUR)}, {"name": "contours", "arguments": dict(CONTOURS)})
        q, answer = QUESTIONS["count"].format(kind=kind), str(counts[kind])
    else:
        options = _options(rng, tokens)
        meta["options"] = dict(zip(LETTERS, options))
        pad = 6
        box = [max(0, sx - pad), max(0, sy - pad), min(width, sx + sw + pad), min(height, sy + sh + pad)]
        meta["crop"] = box
        calls = (enhance, {"name": "crop", "arguments": {"box": box, "scale": 2.0}})
        q = QUESTIONS["sign"].format(options="\n".join(f"{k}. {v}" for k, v in zip(LETTERS, options)))
        answer = LETTERS[options.index(text)]
    return Sample(
        task=NAME, id=f"{NAME}-{difficulty}-{question}-{seed}", image=dark, question=q, answer=answer,
        scorer=SCORERS[kind_q], toolset="default", calls=calls,
        evidence={"well_lit": well, "labels": labels, "sign": sign}, meta=meta,
    )


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    labels = sample.evidence["labels"]
    if len(workspace) < 3:
        raise AuditError(f"{sample.id}: the reference made {len(workspace) - 1} images, expected 2 or more")
    dark, enhanced = workspace[0], workspace[1]
    if enhanced.shape != dark.shape:
        raise AuditError(f"{sample.id}: the enhanced image {enhanced.shape} is not the input's {dark.shape}")
    fg, bg = labels > 0, labels == 0
    seen, before = _contrast(enhanced, fg, bg), _contrast(dark, fg, bg)
    if seen < MIN_CONTRAST:
        raise AuditError(f"{sample.id}: after enhancement the objects stand out by only {seen:.0f} gray levels")
    if before >= MIN_CONTRAST:
        raise AuditError(f"{sample.id}: the input is not dark: its objects stand out by {before:.0f} gray levels")
    if sample.meta["question"] == "count":
        _check_count(sample, reports[-1], labels)
    else:
        _check_sign(sample, workspace[-1], workspace[0])


def _check_count(sample: Sample, report: dict, labels: np.ndarray) -> None:
    error = _reading_error(sample.meta["objects"], labels, report)
    if error:
        raise AuditError(f"{sample.id}: {error}")
    measured = sum(kind_of(c) == sample.meta["kind"] for c in report["contours"])
    if str(measured) != sample.answer:
        raise AuditError(f"{sample.id}: the tool's contours show {measured} {sample.meta['kind']}s, "
                         f"the answer is {sample.answer}")


def _measure(dark: np.ndarray) -> dict:
    """The reference's enhancement, smoothing and contours, run directly (the generator keeps only
    scenes whose shapes this reading gets right)."""
    (enhanced,) = _EXECUTOR.run([ToolCall("autocontrast", dark, dict(AUTOCONTRAST))])
    (smooth,) = _EXECUTOR.run([ToolCall("blur", enhanced.image, dict(BLUR))])
    (found,) = _EXECUTOR.run([ToolCall("contours", smooth.image, {**CONTOURS, "draw": "none", "label": "none"})])
    return found.data


def _reading_error(objects: list[dict], labels: np.ndarray, report: dict) -> str | None:
    """Why the contours' report does not read the scene right: every rendered object (and the sign
    plate) is one contour, with its area and its kind; no other contour. None when it does."""
    contours = report.get("contours", [])
    if report.get("matching_contours") != len(contours):
        return f"contours returned {len(contours)} of {report.get('matching_contours')} outlines"
    found = {}
    for c in contours:
        x, y = (min(max(int(round(v)), 0), s - 1) for v, s in zip(c["centroid"], labels.shape[::-1]))
        label = int(labels[y, x])
        if label == 0 or label in found:
            return f"a contour at {c['centroid']} is not one rendered object"
        found[label] = c
    for k, o in enumerate(objects, 1):
        c = found.get(k)
        if c is None:
            return f"the {o['kind']} at {o['center']} has no contour"
        if abs(c["area"] - o["area"]) > AREA_TOLERANCE * o["area"]:
            return f"the {o['kind']} at {o['center']} has area {o['area']}, its contour {c['area']}"
        if kind_of(c) != o["kind"]:
            return f"the {o['kind']} at {o['center']} reads as a {kind_of(c)} ({c['vertices']} vertices)"
    if 255 not in found or kind_of(found[255]) != "plate":
        return "the sign plate is not found as a plate"
    return None


def kind_of(contour: dict) -> str:
    """The shape kind read from one contour's data (as a model reading the report would)."""
    v = contour["vertices"]
    x1, y1, x2, y2 = contour["bbox"]
    if v == 3:
        return "triangle"
    if v == 4:
        return "square" if max(x2 - x1, y2 - y1) <= 1.3 * min(x2 - x1, y2 - y1) else "plate"
    return "circle" if v >= 5 else "other"


def _check_sign(sample: Sample, crop: np.ndarray, dark: np.ndarray) -> None:
    sign = sample.evidence["sign"]
    x1, y1, x2, y2 = sample.meta["crop"]
    sx, sy, _, _ = sample.meta["sign"]["box"]
    expected_h, expected_w = round(2 * (y2 - y1)), round(2 * (x2 - x1))
    if crop.shape[:2] != (expected_h, expected_w):
        raise AuditError(f"{sample.id}: the crop is {crop.shape[:2]}, expected {(expected_h, expected_w)}")
    crop = cv2.resize(crop, (x2 - x1, y2 - y1), interpolation=cv2.INTER_AREA)
    part = crop[sy - y1:sy - y1 + sign.shape[0], sx - x1:sx - x1 + sign.shape[1]]
    ink = _gray(sign) < 128
    seen = _contrast(part, ~ink, ink)
    before = _contrast(dark[sy:sy + sign.shape[0], sx:sx + sign.shape[1]], ~ink, ink)
    if seen < MIN_CONTRAST or before >= MIN_CONTRAST:
        raise AuditError(f"{sample.id}: the sign's text stands out by {seen:.0f} gray levels after enhancement, "
                         f"{before:.0f} before")
    score = _ink_agreement(ink, part)
    if score < MIN_INK_AGREEMENT:
        raise AuditError(f"{sample.id}: the enhanced sign's text agrees with the render on {score:.0%} of its ink")
    options = sample.meta["options"]
    if options.get(sample.answer) != sample.meta["sign"]["text"]:
        raise AuditError(f"{sample.id}: the answer {sample.answer} is not the sign's text "
                         f"{sample.meta['sign']['text']!r}")


def _gray(image: np.ndarray) -> np.ndarray:
    return image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)


def _contrast(image: np.ndarray, fg: np.ndarray, bg: np.ndarray) -> float:
    """Gray levels between the median of the foreground and of the background."""
    gray = _gray(image)
    return abs(_median(gray, fg) - _median(gray, bg))


def _median(gray: np.ndarray, mask: np.ndarray) -> float:
    """The (lower) median gray level under a mask, from its histogram."""
    hist = cv2.calcHist([gray], [0], mask.astype(np.uint8), [256], [0, 256]).ravel()
    if not hist.any():
        return 0.0
    return float(np.searchsorted(np.cumsum(hist), hist.sum() / 2))


def _ink_agreement(ink: np.ndarray, part: np.ndarray) -> float:
    gray = cv2.medianBlur(_gray(part), 3)
    _, found = cv2.threshold(gray, 0, 1, cv2.THRESH_BINARY_INV | cv2.THRESH_OTSU)
    kernel = np.ones((3, 3), np.uint8)
    near_ink = cv2.dilate(ink.astype(np.uint8), kernel) > 0
    near_found = cv2.dilate(found, kernel) > 0
    if not ink.any() or not found.any():
        return 0.0
    return min(float(near_found[ink].mean()), float(near_ink[found > 0].mean()))


def _sign_tokens(rng: random.Random, shape: tuple[str, ...]) -> list[str]:
    vocabulary = words(4, 8)
    return [rng.choice(vocabulary) if t == "word" else str(rng.randint(1, 999)) for t in shape]


def _lookalike(rng: random.Random, token: str) -> str:
    if token.isdigit():
        low = 10 ** (len(token) - 1) if len(token) > 1 else 1
        return str(rng.randint(low, 10 ** len(token) - 1))
    same = _by_shape().get((token[0], len(token)), ())
    return rng.choice(same) if len(same) > 1 else rng.choice(words(4, 8))


_SHAPES: dict = {}


def _by_shape() -> dict:
    if not _SHAPES:
        for w in words(4, 8):
            _SHAPES.setdefault((w[0], len(w)), []).append(w)
    return _SHAPES


def _options(rng: random.Random, tokens: list[str]) -> list[str]:
    """The truth and four distinct look-alikes, in a seeded order."""
    truth = " ".join(tokens)
    options = [truth]
    while len(options) < len(LETTERS):
        changed = list(tokens)
        for i in rng.sample(range(len(tokens)), rng.randint(1, len(tokens))):
            changed[i] = _lookalike(rng, tokens[i])
        candidate = " ".join(changed)
        if candidate not in options:
            options.append(candidate)
    rng.shuffle(options)
    return options


def _scene(rng: random.Random, nrng: np.random.Generator, cfg: dict, width: int, height: int, sign_box):
    """The well-lit scene without the sign, the objects, and the label map (object k -> k)."""
    c0 = np.array([rng.randint(*BACKGROUND) for _ in range(3)], np.float32)
    c1 = np.array([rng.randint(*BACKGROUND) for _ in range(3)], np.float32)
    angle = rng.uniform(0, 2 * math.pi)
    ux, uy = math.cos(angle), math.sin(angle)
    t = (np.arange(width, dtype=np.float32)[None, :] * ux + np.arange(height, dtype=np.float32)[:, None] * uy)
    t -= t.min()
    t /= max(float(t.max()), 1.0)
    texture = cv2.resize(nrng.normal(0, 6, (height // 32 + 2, width // 32 + 2)).astype(np.float32),
                         (width, height), interpolation=cv2.INTER_CUBIC)
    t += texture / 60.0
    well = cv2.merge([np.clip(c0[i] + (c1[i] - c0[i]) * t, 0, 255).astype(np.uint8) for i in range(3)])
    labels = np.zeros((height, width), np.uint8)
    sx, sy, sw, sh = sign_box
    placed: list[tuple[float, float, float]] = []
    objects = []
    n = rng.randint(*cfg["shapes"])
    kinds = list(KINDS) + [rng.choice(KINDS) for _ in range(max(0, n - len(KINDS)))]
    rng.shuffle(kinds)
    for kind in kinds:
        for _ in range(200):
            r = rng.uniform(*cfg["radius"])
            cx, cy = rng.uniform(MARGIN + r, width - MARGIN - r), rng.uniform(MARGIN + r, height - MARGIN - r)
            near_sign = (sx - GAP - r < cx < sx + sw + GAP + r) and (sy - GAP - r < cy < sy + sh + GAP + r)
            if not near_sign and all(math.hypot(cx - x, cy - y) >= r + q + GAP for x, y, q in placed):
                break
        else:
            continue  # no room: fewer objects
        placed.append((cx, cy, r))
        start = rng.uniform(0, 2 * math.pi)
        color = rng.choice(OBJECT_COLORS)
        label = len(objects) + 1
        if kind == "circle":
            rr = r * 0.85
            center = (round(cx * 16), round(cy * 16))  # sub-pixel drawing: coordinates * 16 (shift 4)
            cv2.circle(well, center, round(rr * 16), color, -1, cv2.LINE_AA, 4)
            cv2.circle(labels, center, round(rr * 16), label, -1, cv2.LINE_8, 4)
            area = math.pi * rr * rr
        else:
            corners = 3 if kind == "triangle" else 4
            jitter = 0.12 if kind == "triangle" else 0.0
            angles = [start + 2 * math.pi * k / corners + rng.uniform(-jitter, jitter) for k in range(corners)]
            points = np.array([(cx + r * math.cos(a), cy + r * math.sin(a)) for a in angles], np.float32)
            pts = np.round(points * 16).astype(np.int32).reshape(-1, 1, 2)
            cv2.fillPoly(well, [pts], color, cv2.LINE_AA, 4)
            cv2.fillPoly(labels, [pts], label, cv2.LINE_8, 4)
            area = float(cv2.contourArea(points))
        objects.append({"kind": kind, "center": [round(cx, 1), round(cy, 1)], "radius": round(r, 1),
                        "color": list(color), "area": round(area, 1)})
    return well, objects, labels


@functools.cache
def _noise_bank() -> np.ndarray:
    """A fixed field of standard normal noise; each sample reads a seeded window of it (drawing ~1M
    normals per sample would cost more than everything else)."""
    rng = np.random.default_rng(20240917)
    return rng.standard_normal((BANK, BANK, 3), dtype=np.float32)


def _darken(rng: random.Random, cfg: dict, well: np.ndarray):
    """A dark, noisy photo of the scene: a gamma curve (in ^ gamma), exposure scaled to the target mean,
    sensor noise (Gaussian: read noise plus shot noise whose variance grows with the signal, the usual
    Poisson-Gaussian model), rounded to uint8."""
    gamma = round(rng.uniform(1.1, 1.4), 3)
    target = rng.uniform(*cfg["mean"])
    curve = (np.arange(256, dtype=np.float64) / 255.0) ** gamma
    hist = np.bincount(well.ravel(), minlength=256)
    signal = curve * (target * well.size / float(hist @ curve))  # per input level: the mean becomes target
    sigma = np.sqrt(signal / cfg["photons"] + cfg["read"] ** 2)
    h, w = well.shape[:2]
    y0, x0 = rng.randint(0, BANK - h), rng.randint(0, BANK - w)
    z = _noise_bank()[y0:y0 + h, x0:x0 + w].reshape(h, w * 3)  # a view: rows of w * 3 values
    flat = well.reshape(h, w * 3)
    noisy = cv2.add(cv2.LUT(flat, signal.astype(np.float32).reshape(1, 256)),
                    cv2.multiply(cv2.LUT(flat, sigma.astype(np.float32).reshape(1, 256)), z))
    _, noisy = cv2.threshold(noisy, 0, 0, cv2.THRESH_TOZERO)  # negatives -> 0
    dark = cv2.convertScaleAbs(noisy).reshape(h, w, 3)  # rounded, saturated at 255
    return dark, {"dark_gamma": gamma, "dark_mean": round(target, 2), "read_noise": cfg["read"],
                  "photons_per_level": cfg["photons"]}
