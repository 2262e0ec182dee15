"""Counting touching and overlapping objects (VTC-Bench / TIR-Bench counting): how many coins or cells.

A seeded picture of N objects of one kind: shaded gold coins (discs with a rim groove and a highlight) on
a dark textured cloth, or red blood cells (slightly elliptic, with a pale centre and a darker rim) on a
pale smear. Difficulty: easy = 3-10 objects, all separated (gaps of 4+ pixels); medium = 8-20 objects,
about 40% of them placed touching a neighbour (overlap depth 0-10% of the radius); hard = 15-40
objects, most of them in clusters that overlap by up to 30% of the radius, plus 2-8 distractors of
another kind (silver coins among the gold ones, purple white blood cells among the red ones) that never
touch the targets. Medium and hard pictures always have objects whose silhouettes merge, so a plain
connected-components count of the objects' mask is wrong; radii vary by at most 12% within a picture,
and no three objects touch one another in a closed triangle (their union has no neck to cut there).

Question: "How many <objects> are in the image? Answer with an integer." (scorer `numeric`), <objects>
naming the colour only when distractors are present ("gold coins", "red blood cells").

Reference (tool set "default"): on hard samples first `in_range` in HSV on the target's colour (output
'mask'), then `watershed` (objects 'bright' on the mask or on the coins; 'dark' for the cells on their
pale smear) with a `fg_ratio` the generator picks from FG_RATIOS as the first that separates the
picture correctly (a human expert tunes it the same way; a picture no ratio separates is redrawn), and
max_regions large enough to list every region. The answer is the watershed's region_count.

Audit: the watershed's region_count equals N, it listed every region, and its regions' centroids match
the true object centres one-to-one, each within MATCH_TOLERANCE of the object's radius (so a right count
by luck fails: centres lie >= 1.7 radii apart, so the match is unambiguous); with an in_range step, its
mask covers >= 95% of the targets' pixels and <= 2% of the distractors' pixels.
"""

from __future__ import annotations

import functools
import math
import random

import cv2
import numpy as np

from data_gen.sample import AuditError, Sample, require_choice, require_seed
from tools.executor import Executor, ToolCall

NAME = "counting"
SCORER = "numeric"  # eval.scorers
KINDS = ("coins", "cells")
QUESTION = "How many {objects} are in the image? Answer with an integer."
NOUNS = {"coins": ("coins", "gold coins"), "cells": ("cells", "red blood cells")}
SETTINGS = {
    # count, share of the picture covered by targets, chance that an object is placed against a neighbour,
    # overlap depth range (fraction of the smaller radius), distractors, the picture's largest radius (pixels)
    "easy": {"count": (3, 10), "cover": (0.10, 0.18), "touch": 0.0, "depth": (0.0, 0.0), "distractors": (0, 0),
             "radius": (18, 32)},
    "medium": {"count": (8, 20), "cover": (0.18, 0.26), "touch": 0.4, "depth": (0.0, 0.10), "distractors": (0, 0),
               "radius": (16, 28)},
    "hard": {"count": (15, 40), "cover": (0.24, 0.32), "touch": 0.7, "depth": (0.02, 0.30), "distractors": (2, 8),
             "radius": (14, 24)},
}
EASY_GAP = 4  # pixels between objects on easy pictures
DISTRACTOR_GAP = 4  # pixels between a distractor and any target
RADIUS_SPREAD = 0.88  # radii lie in [RADIUS_SPREAD * R, R]
ASPECT = 0.86  # cells: minor / major axis >= this
FG_RATIOS = {"easy": (0.5, 0.6, 0.4, 0.7), "medium": (0.6, 0.5, 0.7), "hard": (0.7, 0.65, 0.75, 0.6, 0.8)}
MATCH_TOLERANCE = 0.3  # a region's centroid lies within this fraction of the object's radius of its centre
MIN_COVER, MAX_LEAK = 0.95, 0.02  # in_range mask: share of target pixels kept, of distractor pixels let through
HSV_RANGES = {"coins": ([12, 90, 90], [35, 255, 255]), "cells": ([165, 60, 60], [10, 255, 255])}
OBJECTS = {"coins": "bright", "cells": "dark"}
NOISE_SIDE, NOISE_SIGMA = 1024, 3.0
_EXECUTOR = Executor(device="opencv")


def generate(seed: int, difficulty: str = "medium", kind: str | None = None) -> Sample:
    require_choice("difficulty", difficulty, SETTINGS)
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)} or None (seeded), got {kind!r}")
    require_seed(seed)
    cfg = SETTINGS[difficulty]
    rng = random.Random(f"{NAME}:{seed}:{difficulty}:{kind}")
    kind = kind or rng.choice(KINDS)
    for attempt in range(50):  # redraw until the watershed separates the picture; deterministic under the seed
        n = rng.randint(*cfg["count"])
        big = rng.uniform(*cfg["radius"])
        aspect = rng.uniform(0.75, 1.33)
        area = n * math.pi * big ** 2 * (0.9 if kind == "coins" else 0.8) / rng.uniform(*cfg["cover"])
        width = int(round(math.sqrt(area * aspect)))
        height = int(round(area / width))
        targets = _place(rng, cfg, n, big, width, height, kind)
        if targets is None:
            continue
        distractors = _place_distractors(rng, rng.randint(*cfg["distractors"]), big, width, height, targets)
        if distractors is None:
            continue
        if difficulty != "easy" and _silhouettes(targets, width, height) == n:
            continue  # no merged silhouettes: a plain connected-components count would do
        image, labels = _render(np.random.default_rng(rng.getrandbits(64)), kind, targets, distractors, width, height)
        calls = _reference(kind, distractors, image, targets, labels, difficulty)
        if calls is not None:
            break
    else:  # pragma: no cover - never hit for the shipped settings
        raise RuntimeError(f"{NAME}: no picture the watershed separates for seed {seed} ({difficulty}, {kind})")
    noun = NOUNS[kind][1 if distractors else 0]
    return Sample(
        task=NAME, id=f"{NAME}-{difficulty}-{kind}-{seed}", image=image, question=QUESTION.format(objects=noun),
        answer=str(n), scorer=SCORER, toolset="default", calls=calls,
        evidence={"labels": labels},
        meta={"seed": seed, "difficulty": difficulty, "kind": kind, "objects": noun, "count": n,
              "distractors": len(distractors), "size": [width, height], "attempts": attempt + 1,
              "targets": [[round(v, 2) for v in t] for t in targets],
              "distractor_shapes": [[round(v, 2) for v in d] for d in distractors]},
    )


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    _check(sample.id, sample.meta, sample.evidence["labels"], sample.calls, workspace, reports)
    if sample.answer != str(sample.meta["count"]):
        raise AuditError(f"{sample.id}: the answer {sample.answer!r} is not the count {sample.meta['count']}")


def _check(sid, meta, labels, calls, workspace, reports) -> None:
    targets, n = meta["targets"], meta["count"]
    names = [c["name"] for c in calls]
    if not names or names[-1] != "watershed" or len(reports) != len(calls):
        raise AuditError(f"{sid}: the reference must end with a watershed call, got {names}")
    if "in_range" in names:
        mask = workspace[1 + names.index("in_range")]
        mask = (mask.max(axis=2) if mask.ndim == 3 else mask) > 0
        target, distractor = labels > 0, labels < 0
        cover = float(mask[target].mean())
        leak = float(mask[distractor].mean()) if distractor.any() else 0.0
        if cover < MIN_COVER or leak > MAX_LEAK:
            raise AuditError(f"{sid}: the in_range mask keeps {cover:.0%} of the targets "
                             f"and {leak:.0%} of the distractors")
    report = reports[-1]
    count, regions = report.get("region_count"), report.get("regions", [])
    if count != n:
        raise AuditError(f"{sid}: the watershed counted {count} regions, the picture has {n} objects")
    if len(regions) != count:
        raise AuditError(f"{sid}: the watershed listed {len(regions)} of its {count} regions")
    centers = np.array([t[:2] for t in targets], float)
    found = np.array([r["centroid"] for r in regions], float)
    dist = np.linalg.norm(centers[:, None, :] - found[None, :, :], axis=2)
    limit = MATCH_TOLERANCE * np.array([t[3] for t in targets])[:, None]  # the minor radius
    used_t, used_r = set(), set()
    for flat in np.argsort(dist, axis=None, kind="stable"):
        i, j = divmod(int(flat), len(regions))
        if i in used_t or j in used_r or dist[i, j] > limit[i, 0]:
            continue
        used_t.add(i)
        used_r.add(j)
    if len(used_t) != n:
        missing = sorted(set(range(n)) - used_t)
        raise AuditError(f"{sid}: {n - len(used_t)} objects have no watershed region at their centre "
                         f"(e.g. the one at {targets[missing[0]][:2]})")


# -- layout ------------------------------------------------------------------------------------------------------
def _place(rng, cfg, n, big, width, height, kind):
    """Targets as [x, y, a, b, angle]: centre, semi-axes (a >= b) and rotation in degrees."""
    lo_depth, hi_depth = cfg["depth"]
    margin = 6
    shapes: list[list[float]] = []
    for _ in range(n):
        a = big * rng.uniform(RADIUS_SPREAD, 1.0)
        b = a * (rng.uniform(ASPECT, 1.0) if kind == "cells" else 1.0)
        for _ in range(300):
            if shapes and rng.random() < cfg["touch"]:
                anchor = rng.choice(shapes)
                depth = rng.uniform(lo_depth, hi_depth) * min(b, anchor[3])
                theta = rng.uniform(0, 2 * math.pi)
                d = (a + b) / 2 + (anchor[2] + anchor[3]) / 2 - depth  # mean radii: cells are nearly round
                x, y = anchor[0] + d * math.cos(theta), anchor[1] + d * math.sin(theta)
            else:
                x, y = rng.uniform(a + margin, width - a - margin), rng.uniform(a + margin, height - a - margin)
            if not (a + margin <= x <= width - a - margin and a + margin <= y <= height - a - margin):
                continue
            if not all(_fits(x, y, a, b, s, cfg) for s in shapes):
                continue
            near = [s for s in shapes if _close(x, y, a, b, s)]
            if not any(_close(*p[:4], q) for i, p in enumerate(near) for q in near[i + 1:]):
                break  # no closed triangle: three mutually overlapping objects leave no neck to cut
        else:
            return None
        shapes.append([x, y, a, b, rng.uniform(0, 180) if kind == "cells" else 0.0])
    return shapes


def _fits(x, y, a, b, other, cfg):
    d = math.hypot(x - other[0], y - other[1])
    touch = (a + b) / 2 + (other[2] + other[3]) / 2
    if cfg["touch"] == 0:
        return d >= a + other[2] + EASY_GAP  # major semi-axes: separated even for elliptic cells
    return d >= touch - cfg["depth"][1] * min(b, other[3])  # overlaps no deeper than allowed


def _close(x, y, a, b, other, slack=3.0):
    """Whether two objects touch or nearly do."""
    return math.hypot(x - other[0], y - other[1]) < (a + b) / 2 + (other[2] + other[3]) / 2 + slack


def _place_distractors(rng, count, big, width, height, targets):
    """Distractors as [x, y, r]: discs of another kind that keep DISTRACTOR_GAP from every target."""
    placed: list[list[float]] = []
    for _ in range(count):
        r = big * rng.uniform(0.8, 1.2)
        for _ in range(300):
            x, y = rng.uniform(r + 6, width - r - 6), rng.uniform(r + 6, height - r - 6)
            if (all(math.hypot(x - t[0], y - t[1]) >= r + t[2] + DISTRACTOR_GAP for t in targets)
                    and all(math.hypot(x - p[0], y - p[1]) >= r + p[2] + 2 for p in placed)):
                placed.append([x, y, r])
                break
        else:
            return None
    return placed


def _silhouettes(targets, width, height) -> int:
    """How many connected silhouettes the targets form (geometry only, no rendering noise)."""
    mask = np.zeros((height, width), np.uint8)
    for x, y, a, b, angle in targets:
        cv2.ellipse(mask, (round(x * 16), round(y * 16)), (round(a * 16), round(b * 16)), angle, 0, 360, 255, -1,
                    cv2.LINE_8, 4)
    return cv2.connectedComponents(mask, connectivity=8)[0] - 1


# -- rendering ---------------------------------------------------------------------------------------------------
def _render(nrng, kind, targets, distractors, width, height):
    """The picture (uint8 RGB) and a label map: k + 1 where target k is on top, -(k + 1) for distractor k."""
    if kind == "coins":
        base = np.array([[40, 50, 70], [35, 60, 45], [55, 42, 35], [45, 45, 50]][nrng.integers(4)], np.float32)
    else:
        base = np.array([240, 226, 226], np.float32) + nrng.uniform(-8, 8, 3).astype(np.float32)
    grain = nrng.standard_normal((max(2, height // 24), max(2, width // 24), 1))
    small = 1 + (0.05 if kind == "cells" else 0.12) * grain
    canvas = cv2.resize((small * base).astype(np.float32), (width, height), interpolation=cv2.INTER_CUBIC)
    labels = np.zeros((height, width), np.int16)
    for k, (x, y, r) in enumerate(distractors):
        _paint(canvas, labels, -(k + 1), x, y, r, r, 0.0, kind, True, nrng)
    for k, (x, y, a, b, angle) in enumerate(targets):
        _paint(canvas, labels, k + 1, x, y, a, b, angle, kind, False, nrng)
    canvas = cv2.GaussianBlur(canvas, (3, 3), 0.7)
    top, left = nrng.integers(0, NOISE_SIDE - height + 1), nrng.integers(0, NOISE_SIDE - width + 1)
    canvas += _noise()[top:top + height, left:left + width]  # a seeded window of a fixed noise field (fast)
    np.maximum(canvas, 0, out=canvas)
    return cv2.convertScaleAbs(canvas), labels  # rounds and saturates to uint8


@functools.cache
def _noise() -> np.ndarray:
    """Sensor noise: a fixed field of Gaussian noise (sigma NOISE_SIGMA), the same on every machine."""
    return NOISE_SIGMA * np.random.default_rng(2024).standard_normal((NOISE_SIDE, NOISE_SIDE, 3), dtype=np.float32)


def _paint(canvas, labels, label, x, y, a, b, angle, kind, distractor, nrng):
    h, w = labels.shape
    x0, x1 = max(0, int(x - a - 2)), min(w, int(x + a + 3))
    y0, y1 = max(0, int(y - a - 2)), min(h, int(y + a + 3))
    dx, dy = np.arange(x0, x1, dtype=np.float32)[None, :] - x, np.arange(y0, y1, dtype=np.float32)[:, None] - y
    t = math.radians(angle)
    u, v = (dx * math.cos(t) + dy * math.sin(t)) / a, (-dx * math.sin(t) + dy * math.cos(t)) / b
    rho = np.sqrt(u * u + v * v)
    alpha = np.clip((1 - rho) * (a + b) / 2 + 0.5, 0, 1)[..., None]
    inside = np.clip(rho, 0, 1)
    if kind == "coins":
        color = np.array([200, 200, 206] if distractor else [216, 174, 58], np.float32) * nrng.uniform(0.93, 1.05)
        dome = 0.74 + 0.3 * np.sqrt(1 - inside ** 2)
        groove = np.where((inside > 0.82) & (inside < 0.89), 0.93, 1.0)
        light = 55 * np.exp(-((dx + 0.35 * a) ** 2 + (dy + 0.35 * a) ** 2) / (0.35 * a) ** 2)
        patch = color * (dome * groove)[..., None] + light[..., None]
    elif distractor:  # a white blood cell: pale violet cytoplasm and a dark lobed nucleus
        patch = np.broadcast_to(np.array([175, 145, 205], np.float32), rho.shape + (3,)).copy()
        lobes = np.zeros(rho.shape, bool)
        for _ in range(3):
            cx, cy = nrng.uniform(-0.3, 0.3, 2) * a
            lobes |= (dx - cx) ** 2 + (dy - cy) ** 2 < (0.3 * a) ** 2
        patch[lobes] = np.array([95, 45, 135], np.float32)
    else:  # a red blood cell: pale centre, darker rim
        color = np.array([196, 58, 72], np.float32) + nrng.uniform(-12, 12, 3).astype(np.float32)
        pallor = 0.5 * np.exp(-(inside / 0.45) ** 2)[..., None]
        rim = (1 - 0.12 * np.clip((inside - 0.7) / 0.3, 0, 1) ** 2)[..., None]
        patch = (color * (1 - pallor) + np.array([232, 150, 156], np.float32) * pallor) * rim
    region = canvas[y0:y1, x0:x1]
    region += alpha * (patch - region)
    labels[y0:y1, x0:x1][alpha[..., 0] >= 0.5] = label


# -- the reference -------------------------------------------------------------------------------------------------
def _reference(kind, distractors, image, targets, labels, difficulty):
    """The reference calls with the first fg_ratio that separates the picture, or None when none does."""
    meta = {"targets": targets, "count": len(targets)}
    steps, workspace, reports, current = [], [image], [], image
    if distractors:
        lower, upper = HSV_RANGES[kind]
        args = {"space": "hsv", "lower": list(lower), "upper": list(upper), "output": "mask"}
        (result,) = _EXECUTOR.run([ToolCall("in_range", image, args)])
        steps.append({"name": "in_range", "arguments": {"image_index": 0, **args}})
        workspace.append(result.image)
        reports.append(result.data or {})
        current = result.image
    objects = "bright" if distractors else OBJECTS[kind]
    for ratio in FG_RATIOS[difficulty]:
        args = {"objects": objects, "fg_ratio": ratio, "max_regions": min(500, 2 * len(targets) + 20)}
        (result,) = _EXECUTOR.run([ToolCall("watershed", current, args)])
        if result.error:
            continue
        calls = (*steps, {"name": "watershed", "arguments": {"image_index": len(workspace) - 1, **args}})
        try:
            _check("generate", meta, labels, calls, [*workspace, result.image], [*reports, result.data or {}])
        except AuditError:
            continue
        return calls
    return None
