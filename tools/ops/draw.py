"""Drawing aids: lines, arrows, circles, boxes, points, polygons, text and a coordinate grid.

A model draws these to reason about an image: auxiliary lines in a geometry problem, marking found
objects, a grid overlay to read positions off. Conventions:

- Coordinates are pixels with the origin at the top-left corner, x to the right, y down; with
  units='norm1000' they are 0-1000 relative to the image width (x) and height (y). Fractional
  coordinates truncate toward zero (as `crop` does). Shapes may lie partly or wholly outside the image
  (clipped as OpenCV clips); coordinates are bounded to |v| <= 65536.
- Boxes are [x1, y1, x2, y2] with x2, y2 exclusive (the pixels `crop(box)` returns), corners in any order.
- Colors are RGB [r, g, b], 0-255. On a gray image a color draws as its luma
  (cv2.COLOR_RGB2GRAY weights, fixed point), so drawing then converting to gray equals converting then drawing.
- Shapes use OpenCV's LINE_8 rasterizer (no anti-aliasing). Note OpenCV's thick lines: a thickness t > 1
  line is drawn as a polygon with round end caps of radius (t+1)//2, so odd t comes out t+2 pixels wide
  and thick box corners are rounded. These are OpenCV semantics, kept as the spec.
- Text (labels, draw_text) goes through one helper, `put_label`, which calls cv2.putText with
  FONT_HERSHEY_SIMPLEX. In OpenCV 5 this renders the built-in TrueType "sans" font through FreeType,
  alpha-blended (anti-aliased even with LINE_8), with Unicode support; thickness > 1 selects bold.

Torch versions. Every op draws the same thing on every image of a batch (except the parameters listed
in `vectorized`, which may differ per image). The torch path rasterizes the drawing once per distinct
argument set with the very same OpenCV calls, on the host, into a coverage plan: a uint8 map of palette
indices for the shapes (LINE_8 coverage is binary) and an alpha map for text. Only the bounding box of
that plan is uploaded; the device then paints all images at once (torch.where for shapes, OpenCV's
(img*(255-a) + color*a + 127) / 255 blend for text). The result is identical to OpenCV's; the only
possible difference is where two glyph bitmaps overlap (OpenCV blends them one after the other, the plan
holds one combined alpha): +-1 on a few pixels of some strings (e.g. 'fj'). The images never leave the device.
"""

from __future__ import annotations

import math
from functools import lru_cache

import cv2
import numpy as np
import torch

from tools.images import color_values, luma
from tools.registry import Op, Param, Tolerance, ToolArgumentError, register

COORD_LIMIT = 65536
FONT = cv2.FONT_HERSHEY_SIMPLEX
LINE = cv2.LINE_8
MAX_POINTS = 256
MAX_LABEL_CHARS = 100
MAX_TEXT_CHARS = 500
MAX_TEXT_LINES = 20
MAX_GRID_LINES = 200
UNITS = ("pixels", "norm1000")
RED = (255, 0, 0)
# Shapes are exact; text is exact too unless two glyph bitmaps overlap (see the module docstring).
TEXT_TOLERANCE = Tolerance(pixel=1, outliers=0.001, mean=0.01,
                           why="shapes exact; where two glyph bitmaps overlap OpenCV blends them in turn, "
                               "the plan once: +-1 on a few pixels")


# -- colors --------------------------------------------------------------------------------------------
def contrast(rgb) -> tuple:
    """Black or white, whichever reads better on `rgb`."""
    return (0, 0, 0) if luma(rgb) >= 128 else (255, 255, 255)


# -- sizes and coordinates -----------------------------------------------------------------------------
def auto_thickness(height: int, width: int) -> int:
    return max(2, round(min(height, width) / 300))


def auto_font_scale(height: int, width: int) -> float:
    return min(4.0, max(0.35, min(height, width) / 1000.0))


def auto_radius(height: int, width: int) -> int:
    return max(3, round(min(height, width) / 150))


def _px(value: float, size: int, units: str) -> int:
    return int(value * size / 1000.0) if units == "norm1000" else int(value)


def _point(x, y, units, height, width) -> tuple[int, int]:
    if units == "pixels":
        return int(x), int(y)
    return int(x * width / 1000.0), int(y * height / 1000.0)


def _points(flat, units, height, width) -> list[tuple[int, int]]:
    return [_point(flat[i], flat[i + 1], units, height, width) for i in range(0, len(flat), 2)]


def _thickness(value, height, width) -> int:
    return auto_thickness(height, width) if value is None else value


def _outward(thickness: int) -> int:
    """How far an OpenCV LINE_8 line of this thickness reaches past its center line."""
    return 0 if thickness <= 1 else (thickness + 1) // 2


# -- painters: the same drawing code paints an image (OpenCV path) or records a plan (torch path) ------
class ImagePainter:
    """Draws straight onto `image` (modified in place) with real colors."""

    __slots__ = ("canvas", "_colors", "_gray", "_texts")

    def __init__(self, image: np.ndarray, colors: dict):
        self.canvas = image
        self._colors = colors  # role -> (r, g, b) python ints, as validated
        self._gray = image.ndim == 2
        self._texts = []

    def pen(self, role):
        rgb = self._colors[role]
        return luma(rgb) if self._gray else rgb

    def text(self, text, org, scale, thickness, role):
        self._texts.append((text, org, scale, thickness, role))

    def finish(self):
        # Text always goes on top of every shape, in call order (the plan path keeps the same order).
        for text, org, scale, thickness, role in self._texts:
            cv2.putText(self.canvas, text, org, FONT, scale, self.pen(role), thickness, LINE)
        return self.canvas


class PlanPainter:
    """Records a drawing: shapes as palette indices (1, 2, ...) in `canvas`, text as alpha maps per role."""

    def __init__(self, height: int, width: int, roles):
        self.canvas = np.zeros((height, width), np.uint8)
        self._pens = {role: i + 1 for i, role in enumerate(roles)}
        self._texts = []
        self.alphas: dict = {}

    def pen(self, role):
        return self._pens[role]

    def text(self, text, org, scale, thickness, role):
        self._texts.append((text, org, scale, thickness, role))

    def finish(self):
        for text, org, scale, thickness, role in self._texts:
            if role not in self.alphas:
                self.alphas[role] = np.zeros_like(self.canvas)
            # On a zero canvas with color 255, OpenCV's blend (0*(255-a) + 255*a + 127) / 255 stores a itself.
            cv2.putText(self.alphas[role], text, org, FONT, scale, 255, thickness, LINE)
        return self


# -- the one text helper -------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _reference_metrics(scale: float, thickness: int):
    (_, ascent), descent = cv2.getTextSize("Hg", FONT, scale, thickness)
    return ascent, descent


def _clean(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ").split("\n")


@lru_cache(maxsize=1024)
def label_layout(text: str, scale: float, bold: bool = False) -> dict:
    """Size and line metrics of a text block: one line per '\\n', `pad` pixels of margin all round.
    Cached (grid and point labels repeat): treat the returned dict as read-only."""
    thickness = 2 if bold else 1
    lines = _clean(text)
    ascent, descent = _reference_metrics(scale, thickness)
    sizes = [cv2.getTextSize(line, FONT, scale, thickness) for line in lines]
    ascent = max([ascent] + [s[0][1] for s in sizes])
    descent = max([descent] + [s[1] for s in sizes])
    pad = max(1, round(3 * scale))
    pitch = ascent + descent + pad
    return {
        "lines": tuple(lines), "thickness": thickness, "ascent": ascent, "pitch": pitch, "pad": pad,
        "width": max(s[0][0] for s in sizes) + 2 * pad, "height": len(lines) * pitch + pad,
    }


def put_label(painter, text: str, left: int, top: int, scale: float, text_role: str = "text",
              background_role: str | None = None, bold: bool = False, layout: dict | None = None):
    """Put `text` in a box whose top-left corner is (left, top): the box (filled with `background_role`'s
    color, if given), then the text lines in `text_role`'s color. Returns the box (left, top, width, height).
    Every op that writes text goes through here."""
    layout = layout or label_layout(text, scale, bold)
    width, height = layout["width"], layout["height"]
    if background_role is not None:
        cv2.rectangle(painter.canvas, (left, top), (left + width - 1, top + height - 1),
                      painter.pen(background_role), -1, LINE)
    x = left + layout["pad"]
    y = top + layout["pad"] + layout["ascent"]
    for line in layout["lines"]:
        if line:
            painter.text(line, (x, y), scale, layout["thickness"], text_role)
        y += layout["pitch"]
    return left, top, width, height


def _inside(start: int, size: int, limit: int) -> int:
    """Shift a span [start, start + size) to lie inside [0, limit) where it fits (else align to 0)."""
    return max(0, min(start, limit - size))


# -- generic OpenCV / torch wrappers ---------------------------------------------------------------------
def _opencv_op(paint, colors):
    def run(image, **args):
        height, width = image.shape[:2]
        painter = ImagePainter(image.copy(), colors(args))  # the copy is the output: drawing is in place
        paint(painter, height, width, **args)
        return painter.finish()

    return run


def _torch_op(paint, colors, vectorized=()):
    def run(batch, **args):
        n, c, height, width = batch.shape
        calls = [{k: (v[i] if k in vectorized else v) for k, v in args.items()} for i in range(n)]
        palette = colors(calls[0])  # colors never depend on vectorized arguments
        plans, index, seen = [], [], {}
        for call in calls:
            key = tuple(call[k] for k in vectorized)  # validated lists are already tuples
            if key not in seen:
                seen[key] = len(plans)
                painter = PlanPainter(height, width, palette)
                paint(painter, height, width, **call)
                plans.append(painter.finish())
            index.append(seen[key])
        return apply_plans(batch, plans, index, palette)

    return run


def apply_plans(batch: torch.Tensor, plans: list, index: list, palette: dict) -> torch.Tensor:
    """Paint recorded plans onto a (N, C, H, W) uint8 batch on its device; image k gets plans[index[k]].

    Shapes are written from the palette, then text is alpha-blended with OpenCV's rounding. Each layer
    touches only its bounding box, densely when the drawing covers a good share of it (a filled box), or
    just the covered pixels by flat index when it is sparse (a grid, an outline): the device work is
    about O(drawn pixels x batch)."""
    n, c = batch.shape[:2]
    dev = batch.device
    out = batch.clone(memory_format=torch.contiguous_format)
    shared = len(plans) == 1
    pick = None if shared or index == list(range(n)) else torch.tensor(index, device=dev)
    colors = torch.tensor([[0] * c] + [color_values(rgb, c) for rgb in palette.values()], dtype=torch.uint8)
    _paint_layer(out, [p.canvas for p in plans], index, pick, colors=colors)
    for role, rgb in palette.items():
        maps = [p.alphas.get(role) for p in plans]
        if any(m is not None for m in maps):
            maps = [m if m is not None else np.zeros_like(plans[0].canvas) for m in maps]
            _paint_layer(out, maps, index, pick, color=torch.tensor(color_values(rgb, c), dtype=torch.int32, device=dev))
    return out


def _blend(region, alpha, color):
    """cv2.putText's blend (img * (255 - a) + color * a + 127) / 255; a = 0 leaves a pixel unchanged."""
    alpha = alpha.to(torch.int32)
    return torch.div(region.to(torch.int32) * (255 - alpha) + color * alpha + 127, 255, rounding_mode="floor").to(torch.uint8)


def _paint_layer(out, maps, index, pick, colors=None, color=None):
    """Write one layer: palette indices (`colors`, 0 = untouched) or text alpha (`color`) from the host
    maps (one per distinct plan; image k uses maps[index[k]]) into `out` in place."""
    n, c, height, width = out.shape
    dev = out.device
    union = maps[0] if len(maps) == 1 else np.maximum.reduce(maps)
    x, y, w, h = cv2.boundingRect(union)
    if not (w and h):
        return
    if cv2.countNonZero(union) * 4 >= w * h:  # dense: work on the bounding box
        host = np.stack([m[y:y + h, x:x + w] for m in maps])
        values = torch.from_numpy(host).to(dev)
        values = values if pick is None else values[pick]  # (1 or N, h, w)
        region = out[:, :, y:y + h, x:x + w]
        if colors is not None:  # one masked fill per palette color and channel: no index tensors
            for k in np.unique(host[host > 0]).tolist():
                mask = values == k
                for ch in range(c):
                    region[:, ch].masked_fill_(mask, int(colors[k, ch]))
        else:
            region.copy_(_blend(region, values.unsqueeze(1), color.view(1, c, 1, 1)))
        return
    flat = out.view(n, c, height * width)
    if len(maps) == 1:  # sparse, one plan for all images: the same pixels everywhere
        pixels = np.flatnonzero(maps[0])
        values = torch.from_numpy(maps[0].ravel()[pixels]).to(dev)
        pixels = torch.from_numpy(pixels).to(dev)
        if colors is not None:
            flat[:, :, pixels] = colors.to(dev)[values.long()].t().unsqueeze(0).expand(n, c, -1)
        else:
            flat[:, :, pixels] = _blend(flat[:, :, pixels], values.view(1, 1, -1), color.view(1, c, 1))
        return
    found = [np.flatnonzero(m) for m in maps]  # sparse, per-image plans: (image, pixel) pairs
    images = torch.from_numpy(np.repeat(np.arange(n), [found[j].size for j in index])).to(dev)
    pixels = torch.from_numpy(np.concatenate([found[j] for j in index])).to(dev)
    values = torch.from_numpy(np.concatenate([maps[j].ravel()[found[j]] for j in index])).to(dev)
    if colors is not None:
        flat[images, :, pixels] = colors.to(dev)[values.long()]
    else:
        flat[images, :, pixels] = _blend(flat[images, :, pixels], values.view(-1, 1), color.view(1, c))


def _register(name, doc, params, paint, colors, *, vectorized=(), check=None, tolerance=None, examples=({},)):
    register(Op(
        name, doc, params, _opencv_op(paint, colors), _torch_op(paint, colors, vectorized),
        vectorized=vectorized, check=check, tolerance=tolerance or Tolerance(), examples=examples, category="draw",
    ))


# -- shared parameters and checks ------------------------------------------------------------------------
_COORD_DOC = "in `units` (pixels by default; origin top-left, x right, y down)"


def _coord(name: str, what: str) -> Param:
    return Param(name, "float", f"{what} {_COORD_DOC}.", low=-COORD_LIMIT, high=COORD_LIMIT)


def _color(default=RED, what="Color", note="") -> Param:
    return Param("color", "ints", f"{what} [R, G, B], each 0-255.{note}", default, 0, 255, length=3)


UNITS_PARAM = Param("units", "str", "Coordinate units: 'pixels', or 'norm1000' (0-1000 relative to the image "
                    "width for x and height for y).", "pixels", choices=UNITS)
FONT_SCALE = Param("font_scale", "float", "Text size (OpenCV font scale; 1.0 is about 27 px tall). "
                   "Default: auto, from 0.35 up, growing with the image size.", None, 0.2, 10)


def _line_thickness(filled: bool) -> Param:
    doc = "Line width in pixels (1-50). Default: auto (2 px; about 1/300 of the shorter image side on large images)."
    if filled:
        return Param("thickness", "int", doc + " -1 fills the shape.", None, -1, 50)
    return Param("thickness", "int", doc, None, 1, 50)


def _check_thickness(op: str, args: dict) -> None:
    if args.get("thickness") == 0:
        raise ToolArgumentError(op, "thickness", "must be -1 (filled) or 1-50, got 0")


def _check_text(op: str, name: str, text, limit: int, required: bool) -> None:
    if text is None:
        return
    if required and not text.strip():
        raise ToolArgumentError(op, name, "must contain some text")
    if len(text) > limit:
        raise ToolArgumentError(op, name, f"must be at most {limit} characters, got {len(text)}")
    if len(_clean(text)) > MAX_TEXT_LINES:
        raise ToolArgumentError(op, name, f"must have at most {MAX_TEXT_LINES} lines")


def _check_points(op: str, flat, minimum: int) -> None:
    if len(flat) % 2:
        raise ToolArgumentError(op, "points", f"must be a flat list x1, y1, x2, y2, ... of even length, got {len(flat)} numbers")
    count = len(flat) // 2
    if not minimum <= count <= MAX_POINTS:
        raise ToolArgumentError(op, "points", f"must hold {minimum}-{MAX_POINTS} points, got {count}")


# -- draw_line / draw_arrow ------------------------------------------------------------------------------
def _line_colors(args):
    return {"color": args["color"]}


def _line_paint(p, height, width, x1, y1, x2, y2, color, thickness, units):
    cv2.line(p.canvas, _point(x1, y1, units, height, width), _point(x2, y2, units, height, width),
             p.pen("color"), _thickness(thickness, height, width), LINE)


_ENDPOINTS = (_coord("x1", "Start x"), _coord("y1", "Start y"), _coord("x2", "End x"), _coord("y2", "End y"))

_register(
    "draw_line",
    "Draw a straight line segment from (x1, y1) to (x2, y2), e.g. an auxiliary line in a geometry figure. "
    "Coordinates are pixels (origin top-left, x right, y down) or 0-1000 with units='norm1000'; the line may "
    "extend past the image edge (it is clipped). Returns the image with the line drawn (no anti-aliasing).",
    _ENDPOINTS + (_color(what="Line color"), _line_thickness(False), UNITS_PARAM),
    _line_paint, _line_colors, vectorized=("x1", "y1", "x2", "y2"),
    examples=(
        {"x1": 3, "y1": 4, "x2": 60, "y2": 40},
        {"x1": 50, "y1": 2, "x2": 5, "y2": 45, "thickness": 1, "color": [0, 255, 0]},
        {"x1": -20, "y1": 10, "x2": 90, "y2": 30, "thickness": 3},
        {"x1": 100, "y1": 100, "x2": 900, "y2": 800, "units": "norm1000", "thickness": 4, "color": [255, 255, 0]},
        {"x1": 32, "y1": 0, "x2": 32, "y2": 47, "thickness": 5},
        {"x1": 10.7, "y1": 20.2, "x2": 10.7, "y2": 20.2, "thickness": 6},
    ),
)


def _arrow_paint(p, height, width, x1, y1, x2, y2, color, thickness, tip_length, units):
    cv2.arrowedLine(p.canvas, _point(x1, y1, units, height, width), _point(x2, y2, units, height, width),
                    p.pen("color"), _thickness(thickness, height, width), LINE, 0, tip_length)


_register(
    "draw_arrow",
    "Draw an arrow from (x1, y1) to (x2, y2); the arrow head is at (x2, y2). Coordinates are pixels "
    "(origin top-left, x right, y down) or 0-1000 with units='norm1000'. `tip_length` is the head length "
    "as a fraction of the arrow length. Returns the image with the arrow drawn.",
    _ENDPOINTS + (
        _color(what="Arrow color"), _line_thickness(False),
        Param("tip_length", "float", "Arrow head length as a fraction of the arrow length.", 0.1, 0.01, 1.0),
        UNITS_PARAM,
    ),
    _arrow_paint, _line_colors, vectorized=("x1", "y1", "x2", "y2"),
    examples=(
        {"x1": 5, "y1": 40, "x2": 55, "y2": 8},
        {"x1": 60, "y1": 24, "x2": 4, "y2": 24, "thickness": 1, "tip_length": 0.3},
        {"x1": 500, "y1": 500, "x2": 1200, "y2": 0, "units": "norm1000", "thickness": 3, "color": [0, 0, 255]},
    ),
)


# -- draw_circle -------------------------------------------------------------------------------------------
def _circle_paint(p, height, width, x, y, radius, color, thickness, units):
    cv2.circle(p.canvas, _point(x, y, units, height, width), radius, p.pen("color"),
               _thickness(thickness, height, width), LINE)


_register(
    "draw_circle",
    "Draw a circle centered at (x, y) with `radius` pixels; thickness -1 fills it. The center is in pixels "
    "(origin top-left, x right, y down) or 0-1000 with units='norm1000'; the radius is always in pixels. "
    "Returns the image with the circle drawn.",
    (
        _coord("x", "Center x"), _coord("y", "Center y"),
        Param("radius", "int", "Radius in pixels.", low=1, high=COORD_LIMIT),
        _color(what="Circle color"), _line_thickness(True), UNITS_PARAM,
    ),
    _circle_paint, _line_colors, vectorized=("x", "y", "radius"),
    check=lambda args, h, w: _check_thickness("draw_circle", args),
    examples=(
        {"x": 30, "y": 20, "radius": 12},
        {"x": 30, "y": 20, "radius": 15, "thickness": -1, "color": [0, 128, 255]},
        {"x": 0, "y": 47, "radius": 20, "thickness": 1},
        {"x": 500, "y": 500, "radius": 18, "thickness": 5, "units": "norm1000"},
        {"x": 60, "y": 10, "radius": 3, "thickness": 3, "color": [255, 255, 255]},
    ),
)


# -- draw_box --------------------------------------------------------------------------------------------
def _box_pixels(box, units, height, width):
    x1, y1 = _point(box[0], box[1], units, height, width)
    x2, y2 = _point(box[2], box[3], units, height, width)
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def _box_check(args, height, width):
    _check_thickness("draw_box", args)
    _check_text("draw_box", "label", args["label"], MAX_LABEL_CHARS, required=False)
    x1, y1, x2, y2 = _box_pixels(args["box"], args["units"], height, width)
    if x2 <= x1 or y2 <= y1:
        shown = ", ".join(f"{v:g}" for v in args["box"])
        raise ToolArgumentError("draw_box", "box", f"[{shown}] has zero width or height in pixels "
                                f"({x1}, {y1}, {x2}, {y2}); give x2 > x1 and y2 > y1 (x2, y2 exclusive)")


def _label_colors(args):
    """The shape's color and a readable text color for its labels."""
    return {"color": args["color"], "text": contrast(args["color"])}


def _box_paint(p, height, width, box, color, thickness, label, font_scale, units):
    x1, y1, x2, y2 = _box_pixels(box, units, height, width)
    t = _thickness(thickness, height, width)
    cv2.rectangle(p.canvas, (x1, y1), (x2 - 1, y2 - 1), p.pen("color"), t, LINE)
    if label:
        scale = font_scale or auto_font_scale(height, width)
        layout = label_layout(label, scale)
        reach = _outward(t)
        # A tag on the box's top-left corner, outside (above) the box, or just inside when there is no room.
        top = y1 - reach - layout["height"]
        if top < 0:
            top = y1 + reach
        left = _inside(x1 - reach, layout["width"], width)
        top = _inside(top, layout["height"], height)
        put_label(p, label, left, top, scale, "text", "color", layout=layout)


_register(
    "draw_box",
    "Draw a rectangle around the box [x1, y1, x2, y2] (x2, y2 exclusive: the outline runs along the box's "
    "outermost pixels, the same pixels crop(box) returns; corners in any order), optionally with a text "
    "`label` in a tag at its top-left corner (above the box, or inside when there is no room). Coordinates "
    "are pixels (origin top-left, x right, y down) or 0-1000 with units='norm1000'. Thickness -1 fills the "
    "box. Returns the image with the box drawn.",
    (
        Param("box", "floats", f"Box [x1, y1, x2, y2] {_COORD_DOC}.", low=-COORD_LIMIT, high=COORD_LIMIT, length=4),
        _color(what="Box color", note=" The label tag uses it too, with black or white text."), _line_thickness(True),
        Param("label", "str", f"Optional text for the tag (at most {MAX_LABEL_CHARS} characters; Unicode works).", None),
        FONT_SCALE, UNITS_PARAM,
    ),
    _box_paint, _label_colors, vectorized=("box", "label"), check=_box_check, tolerance=TEXT_TOLERANCE,
    examples=(
        {"box": [10, 8, 50, 40]},
        {"box": [10, 20, 50, 40], "label": "cat", "color": [0, 255, 0], "thickness": 1},
        {"box": [40, 30, 2, 3], "label": "A1", "thickness": 3, "font_scale": 0.4},
        {"box": [100, 200, 700, 900], "units": "norm1000", "thickness": -1, "color": [255, 0, 255]},
        {"box": [-10, -10, 30, 25], "label": "edge", "thickness": 4},
    ),
)


# -- draw_points -----------------------------------------------------------------------------------------
def _points_check(args, height, width):
    _check_points("draw_points", args["points"], 1)


def _points_paint(p, height, width, points, radius, color, numbered, font_scale, units):
    centers = _points(points, units, height, width)
    r = auto_radius(height, width) if radius is None else radius
    pen = p.pen("color")
    for center in centers:
        cv2.circle(p.canvas, center, r, pen, -1, LINE)
    if numbered:
        scale = font_scale or auto_font_scale(height, width)
        for k, (x, y) in enumerate(centers, start=1):
            text = str(k)
            layout = label_layout(text, scale)
            # Tag to the right of the dot, vertically centered; to the left when it would leave the image.
            left = x + r + 2
            if left + layout["width"] > width:
                left = x - r - 2 - layout["width"]
            left = _inside(left, layout["width"], width)
            top = _inside(y - layout["height"] // 2, layout["height"], height)
            put_label(p, text, left, top, scale, "text", "color", layout=layout)


_register(
    "draw_points",
    "Mark points with filled dots, numbered 1, 2, ... in the order given (a tag to the right of each dot). "
    "`points` is a flat list [x1, y1, x2, y2, ...] (even length, 1-256 points) in pixels (origin top-left, "
    "x right, y down) or 0-1000 with units='norm1000'. Returns the image with the points drawn.",
    (
        Param("points", "floats", f"Flat list x1, y1, x2, y2, ... {_COORD_DOC}.", low=-COORD_LIMIT, high=COORD_LIMIT),
        Param("radius", "int", "Dot radius in pixels. Default: auto (3 px; more on large images).", None, 1, 200),
        _color(what="Dot color"),
        Param("numbered", "bool", "Write each point's number (1-based) next to it.", True),
        FONT_SCALE, UNITS_PARAM,
    ),
    _points_paint, _label_colors, vectorized=("points",), check=_points_check, tolerance=TEXT_TOLERANCE,
    examples=(
        {"points": [10, 10, 30, 25, 55, 40]},
        {"points": [32, 24], "radius": 6, "numbered": False, "color": [0, 0, 255]},
        {"points": [100, 100, 500, 500, 990, 900], "units": "norm1000", "font_scale": 0.3},
        {"points": [-5, 20, 62, 46], "radius": 4},
    ),
)


# -- draw_polygon ----------------------------------------------------------------------------------------
def _polygon_check(args, height, width):
    _check_points("draw_polygon", args["points"], 3 if args["filled"] else 2)


def _polygon_paint(p, height, width, points, closed, filled, color, thickness, units):
    vertices = np.array(_points(points, units, height, width), np.int32).reshape(-1, 1, 2)
    if filled:
        cv2.fillPoly(p.canvas, [vertices], p.pen("color"), LINE)
    else:
        cv2.polylines(p.canvas, [vertices], closed, p.pen("color"), _thickness(thickness, height, width), LINE)


_register(
    "draw_polygon",
    "Draw a polygon or polyline through `points`, a flat list [x1, y1, x2, y2, ...] (even length, 2-256 "
    "points; 3+ when filled) in pixels (origin top-left, x right, y down) or 0-1000 with units='norm1000'. "
    "`closed` joins the last point back to the first; `filled` fills the inside (any polygon, also "
    "non-convex). Returns the image with the polygon drawn.",
    (
        Param("points", "floats", f"Flat list x1, y1, x2, y2, ... {_COORD_DOC}.", low=-COORD_LIMIT, high=COORD_LIMIT),
        Param("closed", "bool", "Join the last point to the first.", True),
        Param("filled", "bool", "Fill the polygon instead of outlining it.", False),
        _color(what="Polygon color"), _line_thickness(False), UNITS_PARAM,
    ),
    _polygon_paint, _line_colors, vectorized=("points",), check=_polygon_check,
    examples=(
        {"points": [5, 5, 58, 10, 30, 44]},
        {"points": [5, 5, 58, 10, 30, 44, 20, 20], "filled": True, "color": [0, 200, 100]},
        {"points": [2, 40, 20, 5, 40, 40, 62, 5], "closed": False, "thickness": 3},
        {"points": [100, 100, 900, 150, 1100, 800, 300, 950], "units": "norm1000", "thickness": 1},
    ),
)


# -- draw_text -------------------------------------------------------------------------------------------
def _text_check(args, height, width):
    _check_text("draw_text", "text", args["text"], MAX_TEXT_CHARS, required=True)


def _text_colors(args):
    colors = {"text": args["color"]}
    if args["background"] is not None:
        colors["background"] = args["background"]
    return colors


def _text_paint(p, height, width, text, x, y, color, background, font_scale, bold, units):
    scale = font_scale or auto_font_scale(height, width)
    left, top = _point(x, y, units, height, width)
    put_label(p, text, left, top, scale, "text", "background" if background is not None else None, bold)


_register(
    "draw_text",
    "Write `text` with the top-left corner of its box at (x, y), in pixels (origin top-left, x right, "
    "y down) or 0-1000 with units='norm1000'. '\\n' starts a new line; Unicode works. `background` fills "
    "the text box (with a small margin) in that color; omit it for no box. Text past the image edge is cut "
    "off. Returns the image with the text drawn.",
    (
        Param("text", "str", f"The text (at most {MAX_TEXT_CHARS} characters, {MAX_TEXT_LINES} lines)."),
        _coord("x", "Left edge of the text box"), _coord("y", "Top edge of the text box"),
        _color(what="Text color"),
        Param("background", "ints", "Box color [R, G, B] behind the text; omit for none.", None, 0, 255, length=3),
        FONT_SCALE,
        Param("bold", "bool", "Bold font.", False),
        UNITS_PARAM,
    ),
    _text_paint, _text_colors, vectorized=("text", "x", "y"), check=_text_check, tolerance=TEXT_TOLERANCE,
    examples=(
        {"text": "A", "x": 5, "y": 5},
        {"text": "x=12\ny=30", "x": 2, "y": 2, "background": [255, 255, 255], "color": [0, 0, 0], "font_scale": 0.35},
        {"text": "Label", "x": 500, "y": 400, "units": "norm1000", "bold": True, "background": [0, 0, 0]},
        {"text": "角 B", "x": -4, "y": 30, "color": [0, 255, 255], "font_scale": 0.5},
    ),
)


# -- draw_grid -------------------------------------------------------------------------------------------
def _grid_positions(size: int, units: str, spacing, cells: int) -> list[tuple[int, str]]:
    """(pixel position, label) of the interior grid lines along an axis of `size` pixels."""
    out, last = [], 0
    if spacing is None:
        values = [(i * size // cells, i * 1000.0 / cells) for i in range(1, cells)]
    else:
        limit = 1000.0 if units == "norm1000" else float(size)
        values = [(_px(i * spacing, size, units), i * spacing) for i in range(1, _grid_count(limit, spacing) + 1)]
    for position, value in values:
        if last < position < size:
            label = str(position) if units == "pixels" else f"{round(value, 1):g}"
            out.append((position, label))
            last = position
    return out


def _grid_count(limit: float, spacing: float) -> int:
    """How many multiples of `spacing` lie strictly inside (0, limit)."""
    return max(0, math.ceil(limit / spacing) - 1)


def _grid_check(args, height, width):
    spacing = args["spacing"]
    if spacing is None:
        return
    limit = 1000.0 if args["units"] == "norm1000" else float(max(height, width))
    if _grid_count(limit, spacing) > MAX_GRID_LINES:
        least = limit / (MAX_GRID_LINES + 1)
        raise ToolArgumentError("draw_grid", "spacing", f"{spacing:g} gives more than {MAX_GRID_LINES} lines per "
                                f"side on this {width}x{height} image; use at least {least:.3g} ({args['units']})")


def _overlaps(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def _hits_any(box, row_of_boxes) -> bool:
    """Whether `box` overlaps any of `row_of_boxes`, which are sorted left to right."""
    for other in row_of_boxes:
        if other[0] >= box[0] + box[2]:
            return False
        if _overlaps(box, other):
            return True
    return False


def _grid_paint(p, height, width, spacing, cells, units, labels, color, thickness, font_scale):
    columns = _grid_positions(width, units, spacing, cells)
    rows = _grid_positions(height, units, spacing, cells)
    pen = p.pen("color")
    for x, _ in columns:
        cv2.line(p.canvas, (x, 0), (x, height - 1), pen, thickness, LINE)
    for y, _ in rows:
        cv2.line(p.canvas, (0, y), (width - 1, y), pen, thickness, LINE)
    if not labels:
        return
    scale = font_scale or auto_font_scale(height, width)
    placed_top = []  # x labels along the top edge, centered on their line; skip any that would overlap
    for x, text in columns:
        layout = label_layout(text, scale)
        box = (_inside(x - layout["width"] // 2, layout["width"], width), 0, layout["width"], layout["height"])
        if placed_top and _overlaps(box, placed_top[-1]):
            continue
        placed_top.append(box)
        put_label(p, text, box[0], box[1], scale, "text", "color", layout=layout)
    last = None  # y labels along the left edge, centered on their line
    for y, text in rows:
        layout = label_layout(text, scale)
        box = (0, _inside(y - layout["height"] // 2, layout["height"], height), layout["width"], layout["height"])
        if (last and _overlaps(box, last)) or _hits_any(box, placed_top):
            continue
        last = box
        put_label(p, text, box[0], box[1], scale, "text", "color", layout=layout)


register(Op(
    "draw_grid",
    "Overlay a coordinate grid to read positions off the image: lines every `spacing` units from the "
    "top-left origin (or `cells` equal cells per side when spacing is omitted), labeled with their "
    "coordinate along the top edge (x) and left edge (y). `units` 'pixels' labels pixel positions; "
    "'norm1000' labels 0-1000 coordinates relative to the image width and height (the convention of "
    "models that output 0-1000 boxes). Labels that would overlap are skipped. Returns the image with the grid.",
    (
        Param("spacing", "float", "Distance between grid lines in `units`. Default: use `cells`.", None, 1, COORD_LIMIT),
        Param("cells", "int", "Number of equal cells per side when `spacing` is omitted.", 10, 2, 100),
        Param("units", "str", "Units of `spacing` and of the labels: 'pixels' or 'norm1000'.", "pixels", choices=UNITS),
        Param("labels", "bool", "Write each line's coordinate along the top and left edges.", True),
        _color((255, 255, 0), "Grid color", " Labels are tags in this color with black or white text."),
        Param("thickness", "int", "Grid line width in pixels.", 1, 1, 50),
        FONT_SCALE,
    ),
    _opencv_op(_grid_paint, _label_colors), _torch_op(_grid_paint, _label_colors),
    check=_grid_check, tolerance=TEXT_TOLERANCE, category="draw",
    examples=(
        {},
        {"cells": 4, "units": "norm1000", "color": [0, 255, 255], "font_scale": 0.3},
        {"spacing": 16, "thickness": 2, "font_scale": 0.3},
        {"spacing": 250, "units": "norm1000", "labels": False, "color": [255, 0, 0]},
    ),
))
