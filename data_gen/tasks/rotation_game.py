"""Rotation Game (TIR-Bench): how many degrees must a slightly rotated image turn CLOCKWISE to stand upright?

The upright image is a seeded procedural landscape whose orientation is plain to see: a sky gradient over
a ground band with a horizon, mountains, a sun, clouds, trees and houses standing on the ground, a road
and a signpost with a rendered word (font and word from `data_gen.text`). It is rotated
COUNTER-clockwise by `angle` (expanded canvas, black corners, like the tool), so rotating it clockwise by
`angle` restores it. Four options A-D list distinct clockwise degrees, all multiples of the tier's step
(easy 15, medium 10, hard 5, TIR-Bench's three tiers), sorted ascending, near each other; the answer is
the option letter.

The reference calls TIR-Bench's `rotate(degree)` (tool set `tir_rotate`: clockwise, applied to the
original, expanded canvas) once per option in option order. The audit compares the central region of each
call's result with the upright render by edge agreement (Canny edges within a pixel, both ways): the call
for the answer's degree must restore the upright image (score >= MIN_EDGE_AGREEMENT) and beat every other
option's call by at least MIN_MARGIN.
"""

from __future__ import annotations

import random

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from data_gen.sample import AuditError, Sample, require_choice
from data_gen.text import fonts, words
from tools.executor import Executor, ToolCall

NAME = "rotation_game"
SCORER = "option_letter"  # eval.scorers
STEPS = {"easy": 15, "medium": 10, "hard": 5}  # options are multiples of this many degrees
LETTERS = "ABCD"
MAX_OFFSET = 4  # distractors lie within this many steps of the answer
CENTRAL = 0.8  # share of each side of the upright image the audit compares
MIN_EDGE_AGREEMENT = 0.75  # the answer's call: edges back in place (within a pixel) after two resamplings
MIN_MARGIN = 0.25  # ... and this much better than every other option's call
QUESTION = ("The image has been rotated. By how many degrees should it be rotated clockwise to restore its "
            "upright orientation?\n{options}\nAnswer with the option letter only.")
_EXECUTOR = Executor(device="opencv")


def generate(seed: int, difficulty: str = "medium", size: int = 320) -> Sample:
    require_choice("difficulty", difficulty, STEPS)
    if not isinstance(size, int) or not 128 <= size <= 1024:
        raise ValueError(f"size must be an int in [128, 1024], got {size!r}")
    rng = random.Random(f"{NAME}:{seed}:{difficulty}:{size}")
    step = STEPS[difficulty]
    options, index = _options(rng, step)
    angle = options[index]
    upright, scene = _scene(rng, size)
    (rotated,) = _EXECUTOR.run([ToolCall("rotate", upright, {"angle": angle, "direction": "counterclockwise",
                                                              "expand": True})])
    listing = "\n".join(f"{letter}. {degree}" for letter, degree in zip(LETTERS, options))
    return Sample(
        task=NAME, id=f"{NAME}-{difficulty}-{seed}", image=rotated.image, question=QUESTION.format(options=listing),
        answer=LETTERS[index], scorer=SCORER, toolset="tir_rotate",
        calls=tuple({"name": "rotate", "arguments": {"degree": degree}} for degree in options),
        evidence={"upright": upright},
        meta={"seed": seed, "difficulty": difficulty, "angle": angle, "options": list(options), "step": step,
              "size": list(upright.shape[:2]), **scene},
    )


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    options = sample.meta["options"]
    if sample.answer not in LETTERS[:len(options)]:
        raise AuditError(f"{sample.id}: the answer {sample.answer!r} is not an option letter")
    degrees = [float(call["arguments"]["degree"]) for call in sample.calls]
    if sorted(degrees) != sorted(float(d) for d in options) or len(workspace) != len(degrees) + 1:
        raise AuditError(f"{sample.id}: the reference must try each option once: options {options}, calls {degrees}")
    score = _scorer(sample.evidence["upright"])
    scores = {d: score(image) for d, image in zip(degrees, workspace[1:])}
    chosen = float(options[LETTERS.index(sample.answer)])
    best_other = max(s for d, s in scores.items() if d != chosen)
    if scores[chosen] < MIN_EDGE_AGREEMENT:
        raise AuditError(f"{sample.id}: rotating {chosen:g} degrees clockwise does not restore the upright image "
                         f"(edge agreement {scores[chosen]:.0%})")
    if scores[chosen] - best_other < MIN_MARGIN:
        raise AuditError(f"{sample.id}: rotating {chosen:g} degrees ({scores[chosen]:.0%}) is not clearly better "
                         f"than another option ({best_other:.0%})")


def _options(rng: random.Random, step: int) -> tuple[list[int], int]:
    """Four distinct ascending multiples of `step` (all within MAX_OFFSET steps of the answer) and the
    answer's index, uniform over A-D."""
    index = rng.randrange(len(LETTERS))
    below = sorted(rng.sample(range(1, MAX_OFFSET + 1), index))
    above = sorted(rng.sample(range(1, MAX_OFFSET + 1), len(LETTERS) - 1 - index))
    lowest = max(below, default=0) + 1  # keep every option >= one step
    angle = step * rng.randint(lowest, lowest + MAX_OFFSET)
    options = [angle - step * k for k in reversed(below)] + [angle] + [angle + step * k for k in above]
    return options, index


def _scene(rng: random.Random, size: int) -> tuple[np.ndarray, dict]:
    """A seeded landscape, uint8 RGB, about size x 0.8 size, and what it shows."""
    w, h = size, int(size * rng.uniform(0.72, 0.9))
    horizon = int(h * rng.uniform(0.5, 0.66))
    sky_top = np.array([rng.randint(20, 90), rng.randint(60, 140), rng.randint(150, 230)], float)
    sky_low = np.array([rng.randint(170, 235), rng.randint(190, 240), rng.randint(215, 255)], float)
    ground_far = np.array([rng.randint(60, 140), rng.randint(120, 180), rng.randint(40, 90)], float)
    ground_near = ground_far * rng.uniform(0.45, 0.7)
    image = np.empty((h, w, 3), np.float32)
    t = np.linspace(0, 1, horizon)[:, None]
    image[:horizon] = (sky_top * (1 - t) + sky_low * t)[:, None, :]
    t = np.linspace(0, 1, h - horizon)[:, None]
    image[horizon:] = (ground_far * (1 - t) + ground_near * t)[:, None, :]
    canvas = Image.fromarray(image.round().astype(np.uint8))
    draw = ImageDraw.Draw(canvas)

    sun_r = rng.randint(size // 20, size // 12)
    sun = (rng.randint(sun_r + 4, w - sun_r - 4), rng.randint(sun_r + 4, max(sun_r + 5, horizon // 2)))
    draw.ellipse([sun[0] - sun_r, sun[1] - sun_r, sun[0] + sun_r, sun[1] + sun_r], fill=(255, rng.randint(200, 240), 80))
    for _ in range(rng.randint(1, 3)):  # clouds: overlapping white ellipses
        cx, cy = rng.randint(0, w), rng.randint(h // 12, max(h // 12 + 1, horizon // 2))
        for _ in range(rng.randint(3, 5)):
            dx, rx, ry = rng.randint(-size // 12, size // 12), rng.randint(size // 30, size // 15), rng.randint(size // 40, size // 25)
            draw.ellipse([cx + dx - rx, cy - ry, cx + dx + rx, cy + ry], fill=(250, 250, 252))
    mountain = tuple(int(c * 0.6) for c in sky_top)
    for _ in range(rng.randint(1, 3)):
        peak, half = rng.randint(0, w), rng.randint(size // 8, size // 4)
        draw.polygon([(peak - half, horizon), (peak, horizon - rng.randint(h // 10, h // 4)), (peak + half, horizon)],
                     fill=mountain, outline=tuple(int(c * 0.8) for c in mountain))
    draw.line([(0, horizon), (w, horizon)], fill=tuple(int(c * 0.7) for c in ground_far), width=2)
    # a road narrowing to a vanishing point on the horizon
    vanish = rng.randint(w // 3, 2 * w // 3)
    road_half = rng.randint(size // 8, size // 5)
    road_center = rng.randint(w // 4, 3 * w // 4)
    draw.polygon([(vanish - 2, horizon), (vanish + 2, horizon), (road_center + road_half, h), (road_center - road_half, h)],
                 fill=(rng.randint(90, 130),) * 3)

    # things standing on the ground: trees and houses, base on a ground line below the horizon
    objects = []
    for _ in range(rng.randint(2, 4)):
        x = rng.randint(size // 12, w - size // 12)
        base = horizon + rng.randint(h // 20, max(h // 20 + 1, (h - horizon) * 2 // 3))
        scale = 0.5 + (base - horizon) / max(1, h - horizon)  # nearer things are bigger
        if rng.random() < 0.55:
            trunk_w, trunk_h, crown = int(6 * scale) + 2, int(size / 14 * scale), int(size / 16 * scale) + 3
            draw.rectangle([x - trunk_w // 2, base - trunk_h, x + trunk_w // 2, base], fill=(100, 66, 35))
            green = (rng.randint(20, 70), rng.randint(100, 160), rng.randint(20, 60))
            if rng.random() < 0.5:
                draw.ellipse([x - crown, base - trunk_h - 2 * crown, x + crown, base - trunk_h + crown // 3], fill=green)
            else:  # a conifer: a triangle pointing up
                draw.polygon([(x - crown, base - trunk_h), (x, base - trunk_h - 3 * crown), (x + crown, base - trunk_h)], fill=green)
            objects.append("tree")
        else:
            bw, bh = int(size / 8 * scale), int(size / 12 * scale)
            wall = (rng.randint(180, 240), rng.randint(150, 220), rng.randint(110, 190))
            draw.rectangle([x - bw // 2, base - bh, x + bw // 2, base], fill=wall, outline=(60, 40, 30))
            draw.polygon([(x - bw // 2 - 4, base - bh), (x, base - bh - int(bh * 0.8)), (x + bw // 2 + 4, base - bh)],
                         fill=(rng.randint(140, 190), rng.randint(40, 80), rng.randint(30, 60)))
            door = max(3, bw // 6)
            draw.rectangle([x - door // 2, base - bh // 2, x + door // 2, base], fill=(70, 45, 30))
            objects.append("house")

    # a signpost with a word, upright on the ground
    word = rng.choice(words(4, 8))
    font = rng.choice(fonts())
    face = ImageFont.truetype(str(font), rng.randint(size // 18, size // 12))
    x0, y0, x1, y1 = face.getbbox(word)
    pad = 5
    sign_w, sign_h = x1 - x0 + 2 * pad, y1 - y0 + 2 * pad
    sx = rng.randint(4, max(5, w - sign_w - 4))
    base = rng.randint(horizon + (h - horizon) // 3, h - 4)
    top = max(4, base - sign_h - rng.randint(size // 14, size // 8))
    post = sx + sign_w // 2
    draw.rectangle([post - 2, top + sign_h, post + 2, base], fill=(90, 60, 30))
    draw.rectangle([sx, top, sx + sign_w, top + sign_h], fill=(rng.randint(225, 255), rng.randint(215, 245), rng.randint(160, 210)),
                   outline=(60, 40, 20), width=2)
    draw.text((sx + pad - x0, top + pad - y0), word, font=face, fill=(rng.randint(0, 60),) * 3)
    return np.asarray(canvas).copy(), {"word": word, "font": font.name, "objects": objects}


def _edges(image: np.ndarray) -> np.ndarray:
    return cv2.Canny(cv2.cvtColor(image, cv2.COLOR_RGB2GRAY), 40, 120)


def _near(edges: np.ndarray) -> np.ndarray:
    """Pixels within a pixel (3x3) of an edge."""
    return cv2.dilate(edges, np.ones((3, 3), np.uint8)) > 0


def _scorer(upright: np.ndarray):
    """score(restored): edge agreement of the upright image's central region with the same region of a
    result whose canvas is centred on it, both ways (share of each image's edges within a pixel of the
    other's), best over one-pixel shifts since the canvases may centre half a pixel apart."""
    h, w = upright.shape[:2]
    ch, cw = int(h * CENTRAL), int(w * CENTRAL)
    y0, x0 = (h - ch) // 2, (w - cw) // 2
    full = _edges(upright)
    ref, near_ref = full[y0:y0 + ch, x0:x0 + cw] > 0, _near(full)[y0:y0 + ch, x0:x0 + cw]
    n_ref = np.count_nonzero(ref)

    def score(restored: np.ndarray) -> float:
        top, left = (restored.shape[0] - ch) // 2, (restored.shape[1] - cw) // 2
        if top < 1 or left < 1 or top + ch + 1 > restored.shape[0] or left + cw + 1 > restored.shape[1]:
            return 0.0  # too small a canvas to hold the upright image's centre
        edges = _edges(restored[top - 1:top + ch + 1, left - 1:left + cw + 1])
        got_all, near_all = edges > 0, _near(edges)
        best = 0.0
        for dy in (0, 1, 2):
            for dx in (0, 1, 2):
                got, near_got = got_all[dy:dy + ch, dx:dx + cw], near_all[dy:dy + ch, dx:dx + cw]
                n_got = np.count_nonzero(got)
                if n_ref and n_got:
                    best = max(best, min(np.count_nonzero(near_got & ref) / n_ref, np.count_nonzero(near_ref & got) / n_got))
        return best

    return score
