"""Color proportion (TIR-Bench's Color VQA / Proportion VQA): what share of the image is a named color.

A seeded picture of flat-colored shapes (rectangles, circles, ellipses, triangles, convex polygons,
rotated rectangles) drawn without anti-aliasing on a background, every pixel exactly one color of a
palette of clearly distinct named colors (`PALETTE`; no two within 21 levels on every RGB channel). The
question names one color present in the picture and offers four percentages 8 points apart, like
TIR-Bench's items (wrong options = truth +- 8, 16, 24 points): a window of 4 consecutive steps
containing the truth is chosen at random among those that stay inside 0-100, and the four values are
listed as A-D in a seeded random order (sorted, a low truth would always be A). The answer is the letter.

Difficulty: easy = 2-3 colors (background included), 2-4 big shapes; medium = 4-5 colors, 6-10
mid-sized shapes; hard = 6-8 colors, 24-40 small, overlapping shapes of every kind. Colors stay exact
(no noise, no JPEG, no anti-aliasing), so a tight color range measures the share exactly.

The reference calls the default tool set's `in_range` on image 0 in RGB with +-TOLERANCE around the
target color (output 'mask'); its data reports pixel_count / fraction. The audit recomputes the truth
from the render's label map (which palette entry each pixel was painted), checks that the share the
tool's mask selects is within 0.5 points of it and that the mask is the target color's region, and that
the answer is the option equal to the truth and nearest to the measured share.
"""

from __future__ import annotations

import math
import random

import cv2
import numpy as np

from data_gen.sample import AuditError, Sample, require_choice, require_seed

NAME = "color_proportion"
SCORER = "option_letter"  # eval.scorers
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (230, 30, 30), "orange": (255, 140, 0), "yellow": (255, 225, 25), "green": (40, 170, 60),
    "cyan": (0, 210, 230), "blue": (30, 80, 220), "purple": (140, 60, 180), "pink": (255, 130, 190),
    "brown": (140, 85, 35), "white": (255, 255, 255), "black": (0, 0, 0), "gray": (128, 128, 128),
}
NAMES = tuple(PALETTE)
COLORS = np.array([PALETTE[n] for n in NAMES], np.uint8)
_LUT = np.zeros((256, 1, 3), np.uint8)  # label -> RGB, as a cv2.LUT table (much faster than COLORS[labels])
_LUT[:len(NAMES), 0] = COLORS
TOLERANCE = 10  # +- per RGB channel in the reference in_range call
STEP = 8.0  # percentage points between options (TIR-Bench)
LETTERS = "ABCD"
MAX_ERROR = 0.5  # percentage points between the tool-measured share and the truth
MIN_AGREEMENT = 0.99  # IoU of the tool's mask and the target color's region
MIN_COLOR_SHARE = 0.005  # every color drawn must stay visible on at least this share of the image
MIN_TARGET_SHARE = 0.02  # the asked color covers at least 2% of the image
SETTINGS = {  # colors (background included), shapes, image side, shape size as a share of the short side
    "easy": {"colors": (2, 3), "shapes": (2, 4), "side": (320, 480), "size": (0.30, 0.60),
             "kinds": ("rectangle", "circle", "ellipse")},
    "medium": {"colors": (4, 5), "shapes": (6, 10), "side": (384, 560), "size": (0.18, 0.42),
               "kinds": ("rectangle", "circle", "ellipse", "triangle", "polygon")},
    "hard": {"colors": (6, 8), "shapes": (24, 40), "side": (448, 640), "size": (0.08, 0.24),
             "kinds": ("rectangle", "circle", "ellipse", "triangle", "polygon", "rotated_rectangle")},
}
QUESTION = ("What percentage of the image area is {name}? Choose the closest option.\n"
            "{options}\nAnswer with the option's letter.")


def generate(seed: int, difficulty: str = "medium") -> Sample:
    require_choice("difficulty", difficulty, SETTINGS)
    require_seed(seed)
    cfg = SETTINGS[difficulty]
    rng = random.Random(f"{NAME}:{seed}:{difficulty}")
    width, height = rng.randint(*cfg["side"]), rng.randint(*cfg["side"])
    n_colors = rng.randint(*cfg["colors"])
    for _ in range(100):  # redraw until every chosen color is visible; deterministic under the seed
        chosen = rng.sample(range(len(NAMES)), n_colors)
        labels, shapes = _render(rng, cfg, width, height, chosen[0], chosen[1:])
        shares = cv2.calcHist([labels], [0], None, [len(NAMES)], [0, len(NAMES)]).ravel() / labels.size
        candidates = [c for c in chosen if MIN_TARGET_SHARE <= shares[c] <= 1 - MIN_TARGET_SHARE]
        if candidates and all(shares[c] >= MIN_COLOR_SHARE for c in chosen):
            break
    else:  # pragma: no cover - never hit for the shipped settings
        raise RuntimeError(f"{NAME}: could not draw {n_colors} visible colors for seed {seed}")
    target = rng.choice(candidates)
    truth = 100.0 * float(shares[target])
    windows = [k for k in range(4) if truth - STEP * k >= 0 and truth + STEP * (3 - k) <= 100]
    below = rng.choice(windows)  # how many options lie below the truth
    values = [round(truth + STEP * (i - below), 1) for i in range(4)]
    rng.shuffle(values)  # listed in a seeded order, so the letter does not give away low or high truths
    options = dict(zip(LETTERS, values))
    name = NAMES[target]
    lower = [max(0, int(v) - TOLERANCE) for v in COLORS[target]]
    upper = [min(255, int(v) + TOLERANCE) for v in COLORS[target]]
    question = QUESTION.format(name=name, options="\n".join(f"{k}. {v:.1f}%" for k, v in options.items()))
    image = cv2.LUT(cv2.merge([labels, labels, labels]), _LUT)
    return Sample(
        task=NAME, id=f"{NAME}-{difficulty}-{seed}", image=image, question=question,
        answer=LETTERS[values.index(round(truth, 1))], scorer=SCORER, toolset="default",
        calls=({"name": "in_range", "arguments": {"image_index": 0, "space": "rgb", "lower": lower,
                                                   "upper": upper, "output": "mask"}},),
        evidence={"labels": labels, "target": target},
        meta={"seed": seed, "difficulty": difficulty, "color": name, "rgb": list(PALETTE[name]),
              "truth_pct": round(truth, 4), "options": options, "colors": [NAMES[c] for c in chosen],
              "background": NAMES[chosen[0]], "shapes": shapes, "size": [width, height]},
    )


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    labels, target = sample.evidence["labels"], sample.evidence["target"]
    region = labels == target
    truth = 100.0 * float(region.mean())
    if len(workspace) < 2:
        raise AuditError(f"{sample.id}: the reference made no mask")
    mask = workspace[-1]
    if mask.ndim == 3:
        mask = mask.max(axis=2)
    if mask.shape != region.shape:
        raise AuditError(f"{sample.id}: the mask {mask.shape} does not match the image {region.shape}")
    selected = mask > 0
    measured = 100.0 * float(selected.mean())
    if abs(measured - truth) > MAX_ERROR:
        raise AuditError(f"{sample.id}: the tool measured {measured:.2f}% {sample.meta['color']}, "
                         f"the render has {truth:.2f}%")
    union = np.count_nonzero(selected | region)
    agreement = np.count_nonzero(selected & region) / union if union else 1.0
    if agreement < MIN_AGREEMENT:
        raise AuditError(f"{sample.id}: the tool's mask overlaps the {sample.meta['color']} region "
                         f"on {agreement:.1%} (IoU)")
    options = sample.meta["options"]
    if sample.answer not in options:
        raise AuditError(f"{sample.id}: the answer {sample.answer!r} is not an option letter")
    nearest = min(options, key=lambda k: abs(options[k] - measured))
    if sample.answer != nearest or abs(options[sample.answer] - truth) > 0.05 + 1e-9:
        raise AuditError(f"{sample.id}: the answer {sample.answer} ({options[sample.answer]}%) is not the "
                         f"option nearest the measured {measured:.2f}% (truth {truth:.2f}%, nearest {nearest})")


def _render(rng: random.Random, cfg: dict, width: int, height: int, background: int,
            shape_colors: list[int]) -> tuple[np.ndarray, list[dict]]:
    """The label map (palette index per pixel) and the shapes drawn on it, in drawing order."""
    labels = np.full((height, width), background, np.uint8)
    n = rng.randint(*cfg["shapes"])
    colors = list(shape_colors) + [rng.choice(shape_colors) for _ in range(n - len(shape_colors))]
    rng.shuffle(colors)
    short = min(width, height)
    shapes = []
    for color in colors:
        kind = rng.choice(cfg["kinds"])
        size = rng.uniform(*cfg["size"]) * short
        cx, cy = rng.uniform(0.1, 0.9) * width, rng.uniform(0.1, 0.9) * height
        shapes.append({"kind": kind, "color": NAMES[color], "center": [round(cx), round(cy)], "size": round(size)})
        if kind == "rectangle":
            w, h = size * rng.uniform(0.6, 1.4), size * rng.uniform(0.6, 1.4)
            x0, y0 = max(0, round(cx - w / 2)), max(0, round(cy - h / 2))
            labels[y0:max(y0, round(cy + h / 2)), x0:max(x0, round(cx + w / 2))] = color
        elif kind == "circle":
            cv2.circle(labels, (round(cx), round(cy)), max(2, round(size / 2)), int(color), -1, cv2.LINE_8)
        elif kind == "ellipse":
            axes = (max(2, round(size / 2 * rng.uniform(0.6, 1.2))), max(2, round(size / 2 * rng.uniform(0.4, 0.9))))
            cv2.ellipse(labels, (round(cx), round(cy)), axes, rng.uniform(0, 180), 0, 360, int(color), -1, cv2.LINE_8)
        else:
            if kind == "rotated_rectangle":
                box = ((cx, cy), (size * rng.uniform(0.6, 1.3), size * rng.uniform(0.4, 1.0)), rng.uniform(0, 90))
                points = cv2.boxPoints(box)
            else:
                corners = 3 if kind == "triangle" else rng.randint(5, 7)
                start = rng.uniform(0, 2 * math.pi)
                angles = sorted(start + rng.uniform(0, 2 * math.pi) for _ in range(corners))
                if kind == "triangle":  # spread the corners so the triangle is not a sliver
                    angles = [start + k * 2 * math.pi / 3 + rng.uniform(-0.4, 0.4) for k in range(3)]
                radius = size / 2
                points = [(cx + radius * rng.uniform(0.75, 1.0) * math.cos(a),
                           cy + radius * rng.uniform(0.75, 1.0) * math.sin(a)) for a in angles]
            cv2.fillPoly(labels, [np.round(np.asarray(points)).astype(np.int32)], int(color), cv2.LINE_8)
    return labels, shapes
