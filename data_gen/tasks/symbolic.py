"""Symbolic reasoning (TIR-Bench's "count the edges of a complex polygon"): how many edges has the polygon?

One simple (non-self-intersecting) polygon with N edges is drawn on a light background, either as a dark
outline (2-3 px) or filled with a dark color: easy N = 3-8, medium 9-16, hard 17-30. The polygon is
star-shaped around a point near the image center (vertices at increasing angles with random radii), so it
is simple by construction: a seeded half of the shapes with 4-10 edges keep every vertex near a circle
(convex), the others push some vertices in (concave; so is every shape with more than 10 edges). Every
vertex is visible: edges are at least `min_edge` pixels long, consecutive edges turn by at least MIN_TURN
degrees (no near-collinear pairs), no corner is sharper than 180 - MAX_TURN degrees, each vertex stands at
least `min_height` pixels off the line through its two neighbours, and no vertex comes within
MIN_CLEARANCE pixels of a non-adjacent edge.
Hard samples add 1-4 distractor circles and ellipses (curved shapes, not polygons) that stay at least
DISTRACTOR_GAP pixels away from the polygon, from each other and from the border, each at most half the
polygon's area.

Question (TIR-Bench's wording): "How many edges does the polygon have? Provide your final answer as an
integer, such as 1, 2, 3." scored `numeric`, or, by a seeded choice (`form="mixed"`), a multiple choice
with five consecutive counts around N listed A-E in a seeded order, scored `option_letter` (the answer is
the letter). `form="integer"` / `form="choice"` force one of the two.

Generation runs the reference's contours call itself and redraws the picture (deterministically under the
seed) in the rare case (about 1-3% of shapes) where the
corners it finds do not match the true vertices, so every sample's reference provably works.

The reference calls the default tool set's `contours` on image 0 (binarize 'otsu_inv', outer outlines,
the largest by area, approxPolyDP epsilon_ratio EPSILON_RATIO[difficulty] of the perimeter, drawn as
polygons labelled with their vertex count), then `draw_points` numbering the corners it reported on
image 0. The audit checks that the contours report holds one polygon with exactly N vertices that match
the true vertices one-to-one, each within VERTEX_TOLERANCE pixels, that the draw_points call marks those
reported corners, and that the answer is N (or the letter of the option N).
"""

from __future__ import annotations

import math
import random

import cv2
import numpy as np

from data_gen.sample import AuditError, Sample, require_choice, require_seed
from tools.executor import Executor, ToolCall

NAME = "symbolic"
QUESTION = "How many edges does the polygon have? Provide your final answer as an integer, such as 1, 2, 3."
QUESTION_CHOICE = "How many edges does the polygon have? {options}\nAnswer with the option's letter."
LETTERS = "ABCDE"
FORMS = ("mixed", "integer", "choice")
SETTINGS = {  # edge counts, image side, polygon radius (share of the short side), and the geometry limits
    "easy": {"edges": (3, 8), "side": (320, 420), "radius": (0.36, 0.44), "min_radius": 0.3,
             "min_edge": 36, "min_height": 14, "distractors": (0, 0)},
    "medium": {"edges": (9, 16), "side": (400, 520), "radius": (0.36, 0.44), "min_radius": 0.4,
               "min_edge": 28, "min_height": 11, "distractors": (0, 0)},
    "hard": {"edges": (17, 30), "side": (520, 640), "radius": (0.34, 0.40), "min_radius": 0.35,
             "min_edge": 24, "min_height": 10, "distractors": (1, 4)},
}
EPSILON_RATIO = {"easy": 0.01, "medium": 0.006, "hard": 0.004}  # the reference's approxPolyDP epsilon / perimeter
MIN_TURN = 25.0  # degrees between consecutive edges' directions: no nearly collinear neighbours
MAX_TURN = 130.0  # so no corner is sharper than 50 degrees
MIN_CLEARANCE = 10.0  # pixels between a vertex and any edge it does not belong to
DISTRACTOR_GAP = 14.0  # pixels between a distractor and the polygon, another distractor or the border
VERTEX_TOLERANCE = 8.0  # pixels between a reported corner and its true vertex
MAX_ATTEMPTS = 20  # redraws (deterministic under the seed) until the reference's contours call finds N corners
_EXECUTOR = Executor(device="opencv")


def generate(seed: int, difficulty: str = "medium", form: str = "mixed") -> Sample:
    require_choice("difficulty", difficulty, SETTINGS)
    require_choice("form", form, FORMS)
    require_seed(seed)
    cfg = SETTINGS[difficulty]
    rng = random.Random(f"{NAME}:{seed}:{difficulty}:{form}")
    n = rng.randint(*cfg["edges"])
    arguments = {"image_index": 0, "binarize": "otsu_inv", "mode": "external", "sort_by": "area", "rank": 1,
                 "epsilon_ratio": EPSILON_RATIO[difficulty], "draw": "polygons", "label": "vertices",
                 "color": [255, 0, 0], "thickness": 2}
    for _ in range(MAX_ATTEMPTS):
        width, height = rng.randint(*cfg["side"]), rng.randint(*cfg["side"])
        vertices = _polygon(rng, n, cfg, width, height)
        if vertices is None:
            continue
        image, style, distractors = _render(rng, cfg, vertices, width, height)
        options = {k: v for k, v in arguments.items() if k != "image_index"}
        (result,) = _EXECUTOR.run([ToolCall("contours", image, options)])
        found = result.data["contours"][0]["polygon"] if result.ok and result.data["contours"] else []
        if len(found) == n and _match_error(found, vertices) is None:
            break
    else:  # pragma: no cover - not hit for the shipped settings
        raise RuntimeError(f"{NAME}: no polygon with {n} detectable edges for seed {seed}")
    if form == "mixed":
        form = rng.choice(("integer", "choice"))
    meta = {"seed": seed, "difficulty": difficulty, "form": form, "edges": n,
            "vertices": [[round(float(x), 2), round(float(y), 2)] for x, y in vertices],
            "convex": _is_convex(vertices), "size": [width, height], **style, "distractors": distractors}
    if form == "integer":
        question, answer, scorer = QUESTION, str(n), "numeric"
    else:
        low = rng.randint(max(3, n - 4), n)  # five consecutive counts containing n
        values = list(range(low, low + 5))
        rng.shuffle(values)
        options = dict(zip(LETTERS, values))
        question = QUESTION_CHOICE.format(options=" ".join(f"{k}.{v}" for k, v in options.items()))
        answer, scorer = LETTERS[values.index(n)], "option_letter"
        meta["options"] = options
    points = [float(c) for p in found for c in p]
    calls = ({"name": "contours", "arguments": arguments},
             {"name": "draw_points", "arguments": {"image_index": 0, "points": points, "numbered": True,
                                                   "color": [255, 0, 0]}})
    return Sample(task=NAME, id=f"{NAME}-{difficulty}-{form}-{seed}", image=image, question=question,
                  answer=answer, scorer=scorer, toolset="default", calls=calls,
                  evidence={"vertices": vertices}, meta=meta)


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    n = sample.meta["edges"]
    vertices = np.asarray(sample.meta["vertices"], float)
    if len(vertices) != n:
        raise AuditError(f"{sample.id}: the sample has {len(vertices)} vertices for {n} edges")
    if not reports or not reports[0].get("contours"):
        raise AuditError(f"{sample.id}: the reference's contours call reported no outline")
    outline = reports[0]["contours"][0]
    if outline["vertices"] != n or len(outline["polygon"]) != n:
        raise AuditError(f"{sample.id}: the contours call found {outline['vertices']} corners, the polygon has {n}")
    error = _match_error(outline["polygon"], vertices)
    if error:
        raise AuditError(f"{sample.id}: {error}")
    marked = [c for c in sample.calls[1:] if c["name"] == "draw_points"]
    reported = [float(c) for p in outline["polygon"] for c in p]
    if not marked or marked[0]["arguments"]["points"] != reported:
        raise AuditError(f"{sample.id}: the draw_points call does not mark the corners the contours call reported")
    if len(workspace) < 3 or np.array_equal(workspace[-1], workspace[0]):
        raise AuditError(f"{sample.id}: the corners were not drawn")
    truth = str(n) if sample.meta["form"] == "integer" else \
        next(k for k, v in sample.meta["options"].items() if v == n)
    if sample.answer != truth:
        raise AuditError(f"{sample.id}: the answer {sample.answer!r} is not {truth!r} ({n} edges)")


def _match_error(found, vertices) -> str | None:
    """None when the found corners and the true vertices pair up one-to-one within VERTEX_TOLERANCE."""
    found, vertices = np.asarray(found, float).reshape(-1, 2), np.asarray(vertices, float)
    if len(found) != len(vertices):
        return f"{len(found)} corners were found for {len(vertices)} vertices"
    distance = np.hypot(*(found[:, None, :] - vertices[None]).transpose(2, 0, 1))
    nearest = distance.argmin(axis=1)
    if len(set(nearest.tolist())) != len(vertices):
        return "the found corners do not pair up one-to-one with the polygon's vertices"
    worst = float(distance.min(axis=1).max())
    if worst > VERTEX_TOLERANCE:
        return f"a found corner lies {worst:.1f} px from the nearest vertex (tolerance {VERTEX_TOLERANCE})"
    return None


def _measures(points: np.ndarray):
    """Per vertex i: the length of edge i -> i+1, the signed turn at i (degrees), its distance from the line
    through its neighbours, and the distance matrix vertex k -> edge j (inf where k is an end of j)."""
    n = len(points)
    index = np.arange(n)
    prev, nxt = points[index - 1], points[(index + 1) % n]
    e_in, e_out = points - prev, nxt - points
    length = np.sqrt(np.einsum("ij,ij->i", e_out, e_out))
    cross = e_in[:, 0] * e_out[:, 1] - e_in[:, 1] * e_out[:, 0]
    turn = np.degrees(np.arctan2(cross, np.einsum("ij,ij->i", e_in, e_out)))
    chord = nxt - prev
    chord_length = np.maximum(np.sqrt(np.einsum("ij,ij->i", chord, chord)), 1e-9)
    height = np.abs(chord[:, 0] * e_in[:, 1] - chord[:, 1] * e_in[:, 0]) / chord_length
    rel = points[:, None, :] - points[None]  # rel[k, j] = vertex k - start of edge j
    t = np.clip(np.einsum("kjd,jd->kj", rel, e_out) / np.maximum(length * length, 1e-9), 0, 1)
    diff = rel - t[..., None] * e_out[None]
    distance = np.sqrt(np.einsum("kjd,kjd->kj", diff, diff))
    distance[index, index] = np.inf
    distance[(index + 1) % n, index] = np.inf
    return length, turn, height, distance


def _polygon(rng: random.Random, n: int, cfg: dict, width: int, height: int) -> np.ndarray | None:
    """N vertices at increasing angles around a center (so the polygon is simple), with radii redrawn one
    vertex at a time until every geometric limit holds; None if that does not converge."""
    short = min(width, height)
    radius = rng.uniform(*cfg["radius"]) * short
    cx = width / 2 + rng.uniform(-0.04, 0.04) * width
    cy = height / 2 + rng.uniform(-0.04, 0.04) * height
    gap, start = 2 * math.pi / n, rng.uniform(0, 2 * math.pi)
    # radius ranges per vertex (shares of `radius`): a convex-looking shape keeps every vertex near the
    # circle; a small concave one pushes 1 to n // 3 non-adjacent vertices in as dents; a bigger one
    # draws every radius at random, which makes it concave
    shape = "convex" if n == 3 else rng.choice(("convex", "concave")) if n <= 10 else "concave"
    ranges = [(0.8, 1.0)] * n
    if shape == "concave" and n <= 8:
        spaced = range(0, n - n % 2, 2)  # every other vertex, so no two dents are neighbours
        dents = rng.sample(spaced, rng.randint(1, n // 3 if n >= 6 else 1))
        ranges = [(0.3, 0.55) if k in dents else (0.8, 1.0) for k in range(n)]
    elif shape == "concave":
        ranges = [(cfg["min_radius"], 1.0)] * n

    def draw(k):
        return start + (k + rng.uniform(-0.3, 0.3)) * gap, radius * rng.uniform(*ranges[k])

    angles, radii = map(np.array, zip(*(draw(k) for k in range(n))))
    for _ in range(max(10 * n, 60)):
        points = np.stack([cx + radii * np.cos(angles), cy + radii * np.sin(angles)], 1)
        length, turn, offset, distance = _measures(points)
        short_edge = length < cfg["min_edge"]
        close = distance < MIN_CLEARANCE
        bad = (short_edge | np.roll(short_edge, 1) | (np.abs(turn) < MIN_TURN) | (np.abs(turn) > MAX_TURN)
               | (offset < cfg["min_height"]) | close.any(1) | close.any(0) | np.roll(close.any(0), 1))
        if not bad.any():
            return points
        bad_ones = np.flatnonzero(bad).tolist()
        for k in rng.sample(bad_ones, (len(bad_ones) + 1) // 2):  # redraw about half of them
            angles[k], radii[k] = draw(k)
    return None


def _is_convex(points: np.ndarray) -> bool:
    turn = _measures(points)[1]
    return bool((turn > 0).all() or (turn < 0).all())


def _render(rng: random.Random, cfg: dict, vertices: np.ndarray, width: int, height: int):
    paper = tuple(rng.randint(225, 255) for _ in range(3))
    image = np.empty((height, width, 3), np.uint8)
    image[:] = paper
    shift = 4  # sub-pixel vertex positions (cv2 fixed point)
    fixed = np.round(vertices * (1 << shift)).astype(np.int32).reshape(-1, 1, 2)
    ink = _dark(rng)
    if rng.random() < 0.5:
        thickness = rng.randint(2, 3)
        cv2.polylines(image, [fixed], True, ink, thickness, cv2.LINE_AA, shift)
        style = {"style": "outline", "thickness": thickness}
    else:
        cv2.fillPoly(image, [fixed], ink, cv2.LINE_AA, shift)
        style = {"style": "filled"}
    style["ink"], style["paper"] = list(ink), list(paper)
    distractors = []
    mask = np.full((height, width), 255, np.uint8)
    cv2.fillPoly(mask, [fixed], 0, cv2.LINE_8, shift)
    clearance = cv2.distanceTransform(mask, cv2.DIST_L2, 5)  # pixels from the polygon (0 inside)
    area = abs(cv2.contourArea(vertices.astype(np.float32)))
    for _ in range(rng.randint(*cfg["distractors"])):
        for _ in range(30):
            a = rng.uniform(10, 0.09 * min(width, height))
            b = a * rng.uniform(0.5, 1.0) if rng.random() < 0.5 else a
            margin = a + DISTRACTOR_GAP
            x, y = rng.uniform(margin, width - margin), rng.uniform(margin, height - margin)
            if math.pi * a * b > area / 2 or clearance[int(y), int(x)] < a + DISTRACTOR_GAP + 2:
                continue
            if any(math.hypot(x - d["center"][0], y - d["center"][1]) < margin + d["axes"][0] for d in distractors):
                continue
            angle = rng.uniform(0, 180)
            filled = rng.random() < 0.5
            color = _dark(rng)
            cv2.ellipse(image, ((x, y), (2 * a, 2 * b), angle), color, -1 if filled else rng.randint(2, 3), cv2.LINE_AA)
            distractors.append({"kind": "circle" if a == b else "ellipse", "center": [round(x, 1), round(y, 1)],
                                "axes": [round(a, 1), round(b, 1)], "angle": round(angle, 1), "filled": filled,
                                "color": list(color)})
            break
    return image, style, distractors


def _dark(rng: random.Random) -> tuple[int, int, int]:
    """A dark or saturated ink (luminance below 110) that Otsu separates from the light paper."""
    while True:
        color = tuple(rng.randint(0, 200) for _ in range(3))
        if 0.299 * color[0] + 0.587 * color[1] + 0.114 * color[2] < 110:
            return color
