"""Geometry: flip, rotate, crop (with zoom), resize, translate, pyramid.

Conventions: angles in degrees; pixel coordinates have the origin at the top-left corner, x to the
right, y down; boxes are [x1, y1, x2, y2] with x2, y2 exclusive.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from kornia.geometry.transform import warp_affine

from tools.images import color_values
from tools.ops.kernels import reflect101
from tools.registry import Op, Param, Tolerance, ToolArgumentError, register

INTERPOLATIONS = ("nearest", "linear", "cubic")
_CV_INTERP = {"nearest": cv2.INTER_NEAREST, "linear": cv2.INTER_LINEAR, "cubic": cv2.INTER_CUBIC, "area": cv2.INTER_AREA}
_TORCH_INTERP = {"nearest": "nearest", "linear": "bilinear", "cubic": "bicubic"}
FILL = Param("fill", "ints", "Fill color [R, G, B] (0-255) for uncovered area; gray images use its luma.", (0, 0, 0), 0, 255, length=3)
# Interpolated resampling: OpenCV uses 5-bit fixed-point coordinates and weights, torch floats.
RESAMPLED = Tolerance(pixel=2, outliers=0.02, mean=0.5, why="fixed-point vs float interpolation")


# -- flip ----------------------------------------------------------------------------------------------
_FLIP_CODE = {"horizontal": 1, "vertical": 0, "both": -1}
_FLIP_DIMS = {"horizontal": (-1,), "vertical": (-2,), "both": (-2, -1)}


def flip_cv(image, direction):
    return cv2.flip(image, _FLIP_CODE[direction])


def flip_torch(batch, direction):
    return batch.flip(_FLIP_DIMS[direction])


register(Op(
    "flip", "Mirror the image: 'horizontal' swaps left and right, 'vertical' swaps top and bottom, 'both' does both.",
    (Param("direction", "str", "Which axis to mirror.", "horizontal", choices=tuple(_FLIP_CODE)),),
    flip_cv, flip_torch, category="geometry",
    examples=({"direction": "horizontal"}, {"direction": "vertical"}, {"direction": "both"}),
))


# -- rotate --------------------------------------------------------------------------------------------
def _ccw_degrees(angle: float, direction: str) -> float:
    return angle if direction == "counterclockwise" else -angle


def _rotation_plan(angle, direction, expand, height, width):
    """(quarter turns or None, affine matrix, output size) for a counter-clockwise rotation."""
    theta = _ccw_degrees(angle, direction) % 360.0
    if theta % 90.0 == 0.0:
        quarters = int(theta // 90)
        size = (width, height) if quarters % 2 and expand else (height, width)
        return quarters, None, size
    center = ((width - 1) / 2.0, (height - 1) / 2.0)
    matrix = cv2.getRotationMatrix2D(center, theta, 1.0)
    out_h, out_w = height, width
    if expand:
        cos, sin = abs(matrix[0, 0]), abs(matrix[0, 1])
        out_w = int(math.ceil(width * cos + height * sin - 1e-6))
        out_h = int(math.ceil(width * sin + height * cos - 1e-6))
        matrix[0, 2] += (out_w - 1) / 2.0 - center[0]
        matrix[1, 2] += (out_h - 1) / 2.0 - center[1]
    return None, matrix, (out_h, out_w)


def _fit(image: np.ndarray, height: int, width: int, fill) -> np.ndarray:
    """Center `image` on a height x width canvas (cropping or padding with `fill`); exact, no resampling."""
    h, w = image.shape[:2]
    canvas = np.empty((height, width) + image.shape[2:], np.uint8)
    canvas[...] = np.array(color_values(fill, 1 if image.ndim == 2 else image.shape[2]), np.uint8)
    sy, sx = max((h - height) // 2, 0), max((w - width) // 2, 0)
    dy, dx = max((height - h) // 2, 0), max((width - w) // 2, 0)
    ch, cw = min(h, height), min(w, width)
    canvas[dy:dy + ch, dx:dx + cw] = image[sy:sy + ch, sx:sx + cw]
    return canvas


def rotate_cv(image, angle, direction, expand, interpolation, fill):
    h, w = image.shape[:2]
    quarters, matrix, (out_h, out_w) = _rotation_plan(angle, direction, expand, h, w)
    if quarters is not None:
        turned = np.ascontiguousarray(np.rot90(image, quarters))
        return turned if turned.shape[:2] == (out_h, out_w) else _fit(turned, out_h, out_w, fill)
    channels = 1 if image.ndim == 2 else image.shape[2]
    return cv2.warpAffine(image, matrix, (out_w, out_h), flags=_CV_INTERP[interpolation],
                          borderMode=cv2.BORDER_CONSTANT, borderValue=tuple(color_values(fill, channels)))


def rotate_torch(batch, angle, direction, expand, interpolation, fill):
    n, c, h, w = batch.shape
    plans = [_rotation_plan(a, direction, expand, h, w) for a in angle]
    out_h, out_w = plans[0][2]
    if plans[0][0] is not None:  # the batch key keeps exact quarter turns apart from resampled angles
        turned = [torch.rot90(img, q, dims=(-2, -1)) for img, (q, _, _) in zip(batch, plans)]
        if turned[0].shape[-2:] != (out_h, out_w):
            turned = [_fit_torch(t, out_h, out_w, fill) for t in turned]
        return torch.stack(turned)
    matrices = torch.tensor(np.stack([m for _, m, _ in plans]), dtype=torch.float32, device=batch.device)
    return _warp(batch, matrices, (out_h, out_w), interpolation, fill)


def _warp(batch, matrices, size, interpolation, fill):
    """warpAffine with BORDER_CONSTANT `fill`: warp the image and a coverage mask with zero padding, then
    blend the fill in by the uncovered weight. Exact for any interpolation, since resampling is linear."""
    n, c = batch.shape[:2]
    x = torch.cat([batch.float(), torch.ones_like(batch[:, :1], dtype=torch.float32)], dim=1)
    warped = warp_affine(x, matrices, size, mode=_TORCH_INTERP[interpolation], padding_mode="zeros", align_corners=True)
    value = torch.tensor(color_values(fill, c), dtype=torch.float32, device=batch.device).view(1, c, 1, 1)
    out = warped[:, :c] + (1.0 - warped[:, c:]) * value
    return out.round_().clamp_(0, 255).to(torch.uint8)


def _fit_torch(image, height, width, fill):
    c, h, w = image.shape
    canvas = torch.tensor(color_values(fill, c), dtype=torch.uint8, device=image.device).view(c, 1, 1)
    canvas = canvas.expand(c, height, width).clone()
    sy, sx = max((h - height) // 2, 0), max((w - width) // 2, 0)
    dy, dx = max((height - h) // 2, 0), max((width - w) // 2, 0)
    ch, cw = min(h, height), min(w, width)
    canvas[:, dy:dy + ch, dx:dx + cw] = image[:, sy:sy + ch, sx:sx + cw]
    return canvas


def _rotate_output(args, height, width):
    return _rotation_plan(args["angle"], args["direction"], args["expand"], height, width)[2]


def _rotate_key(args, height, width):
    quarters, _, size = _rotation_plan(args["angle"], args["direction"], args["expand"], height, width)
    return quarters is not None, size


register(Op(
    "rotate",
    "Rotate the image by `angle` degrees about its center. `direction` says which way a positive angle "
    "turns: 'counterclockwise' (default) or 'clockwise'. With `expand` the canvas grows to hold the whole "
    "rotated image; uncovered area is filled with `fill`. Multiples of 90 degrees are exact (no "
    "interpolation, no lost corners).",
    (
        Param("angle", "float", "Rotation angle in degrees.", low=-3600, high=3600),
        Param("direction", "str", "Direction of a positive angle.", "counterclockwise", choices=("counterclockwise", "clockwise")),
        Param("expand", "bool", "Grow the canvas to fit the rotated image.", True),
        Param("interpolation", "str", "Resampling for angles that are not multiples of 90.", "linear", choices=INTERPOLATIONS),
        FILL,
    ),
    rotate_cv, rotate_torch, vectorized=("angle",), batch_key=_rotate_key, output_size=_rotate_output, tolerance=RESAMPLED, category="geometry",
    examples=(
        {"angle": 90}, {"angle": 180}, {"angle": -90, "expand": False}, {"angle": 270, "direction": "clockwise"},
        {"angle": 30}, {"angle": 30, "expand": False, "fill": [255, 0, 0]}, {"angle": -12.5, "interpolation": "nearest"},
        {"angle": 45, "interpolation": "cubic", "direction": "clockwise"},
    ),
))


# -- crop (and zoom) -----------------------------------------------------------------------------------
def crop_box(box, units, bounds, min_side, height, width):
    """The pixel box [x1, y1, x2, y2] a crop request means, or a ToolArgumentError saying why none."""
    x1, y1, x2, y2 = box
    if units == "norm1000":
        x1, x2 = x1 * width / 1000.0, x2 * width / 1000.0
        y1, y2 = y1 * height / 1000.0, y2 * height / 1000.0
    x1, y1, x2, y2 = int(x1), int(y1), int(x2), int(y2)  # fractional coordinates truncate
    # Comparisons rather than min/max calls: this runs for every crop call, twice on the OpenCV path.
    if x1 > x2:
        x1, x2 = x2, x1
    if y1 > y2:
        y1, y2 = y2, y1
    if x1 < 0 or y1 < 0 or x2 > width or y2 > height:
        if bounds == "error":
            limit = "0-1000" if units == "norm1000" else f"x in [0, {width}], y in [0, {height}]"
            raise ToolArgumentError("crop", "box",
                                    f"{_show_box(box)} lies outside the {width}x{height} image; allowed: {limit}")
        x1, x2 = max(0, min(x1, width)), max(0, min(x2, width))
        y1, y2 = max(0, min(y1, height)), max(0, min(y2, height))
    if x2 <= x1 or y2 <= y1:
        raise ToolArgumentError("crop", "box", f"{_show_box(box)} selects no pixels of the {width}x{height} image (zero area); give x2 > x1 and y2 > y1 inside the image")
    if x2 - x1 < min_side or y2 - y1 < min_side:
        x1, y1, x2, y2 = _grow(x1, y1, x2, y2, min_side, height, width)
    return x1, y1, x2, y2


def _show_box(box) -> str:
    return f"[{', '.join(f'{v:g}' for v in box)}]"


def _grow(x1, y1, x2, y2, min_side, height, width):
    """Scale the box about its center, keeping its aspect ratio, until its shorter side is min_side
    (as DeepEyes does); each side is capped at the image size and the box shifted inside the image."""
    ratio = min_side / min(x2 - x1, y2 - y1)
    new_w = min(width, math.ceil((x2 - x1) * ratio))
    new_h = min(height, math.ceil((y2 - y1) * ratio))
    left = max(0, min((x1 + x2 - new_w) // 2, width - new_w))
    top = max(0, min((y1 + y2 - new_h) // 2, height - new_h))
    return left, top, left + new_w, top + new_h


def _zoom_size(x1, y1, x2, y2, scale):
    # At least one pixel a side: `or 1` is max(1, ...) for these non-negative sizes, at half the cost.
    return round((y2 - y1) * scale) or 1, round((x2 - x1) * scale) or 1


def _crop_output(args, height, width):
    x1, y1, x2, y2 = crop_box(args["box"], args["units"], args["bounds"], args["min_side"], height, width)
    size = _zoom_size(x1, y1, x2, y2, args["scale"])
    if args["interpolation"] == "area":
        _no_area_enlarging("crop", "area", (y2 - y1, x2 - x1), size)
    return size


def _no_area_enlarging(op, interpolation, size_in, size_out):
    # OpenCV's INTER_AREA only averages when shrinking; enlarging with it is a different, rarely meant filter.
    if interpolation == "area" and (size_out[0] > size_in[0] or size_out[1] > size_in[1]):
        raise ToolArgumentError(op, "interpolation", "'area' is for shrinking; use 'linear' or 'cubic' to enlarge")


def crop_cv(image, box, units, bounds, min_side, scale, interpolation):
    h, w = image.shape[:2]
    x1, y1, x2, y2 = crop_box(box, units, bounds, min_side, h, w)
    region = image[y1:y2, x1:x2]
    if scale == 1.0:
        return np.ascontiguousarray(region)
    out_h, out_w = _zoom_size(x1, y1, x2, y2, scale)
    return cv2.resize(region, (out_w, out_h), interpolation=_CV_INTERP[interpolation])


def crop_torch(batch, box, units, bounds, min_side, scale, interpolation):
    n, c, h, w = batch.shape
    boxes = [crop_box(b, units, bounds, min_side, h, w) for b in box]
    if scale == 1.0:
        return [batch[i, :, y1:y2, x1:x2] for i, (x1, y1, x2, y2) in enumerate(boxes)]
    # One resize per distinct box: every crop is computed the same way whatever it is batched with.
    out = [None] * n
    for region in set(boxes):
        members = [i for i, b in enumerate(boxes) if b == region]
        x1, y1, x2, y2 = region
        zoomed = resize_tensor(batch[members, :, y1:y2, x1:x2], _zoom_size(x1, y1, x2, y2, scale), interpolation)
        for k, i in enumerate(members):
            out[i] = zoomed[k]
    return torch.stack(out)


def _crop_key(args, height, width):
    if args["scale"] == 1.0:
        return None
    return _zoom_size(*crop_box(args["box"], args["units"], args["bounds"], args["min_side"], height, width), args["scale"])


register(Op(
    "crop",
    "Cut out the box [x1, y1, x2, y2] (x2, y2 exclusive; corners in any order; fractions truncate) and "
    "optionally zoom it by `scale`. `units` is 'pixels' or 'norm1000' (coordinates 0-1000 relative to "
    "the image size). `bounds`: 'error' rejects a box that leaves the image, 'clamp' clips it to the "
    "image. A box whose shorter side is under `min_side` pixels is scaled up about its center "
    "(aspect ratio kept) and shifted inside the image.",
    (
        Param("box", "floats", "Box [x1, y1, x2, y2] in `units`.", length=4),
        Param("units", "str", "Coordinate units of `box`.", "pixels", choices=("pixels", "norm1000")),
        Param("bounds", "str", "What a box outside the image does.", "error", choices=("error", "clamp")),
        Param("min_side", "int", "Minimum side of the crop in pixels.", 1, 1, 4096),
        Param("scale", "float", "Zoom factor applied to the crop (1 = no resampling).", 1.0, 0.05, 16),
        Param("interpolation", "str", "Resampling used when scale != 1.", "linear", choices=INTERPOLATIONS + ("area",)),
    ),
    crop_cv, crop_torch, vectorized=("box",), batch_key=_crop_key, output_size=_crop_output, tolerance=RESAMPLED,
    category="geometry",
    examples=(
        {"box": [5, 6, 40, 30]}, {"box": [100, 200, 600, 900], "units": "norm1000"},
        {"box": [-10, -10, 20, 20], "bounds": "clamp"}, {"box": [10, 10, 12, 12], "min_side": 28},
        {"box": [8, 8, 40, 40], "scale": 2.0}, {"box": [0, 0, 64, 48], "scale": 0.5, "interpolation": "area"},
        {"box": [3, 5, 30, 41], "scale": 1.7, "interpolation": "cubic"},
    ),
))


# -- resize --------------------------------------------------------------------------------------------
def resize_size(width, height, scale, in_h, in_w):
    if scale is not None:
        if width is not None or height is not None:
            raise ToolArgumentError("resize", "scale", "give either scale or width/height, not both")
        return max(1, round(in_h * scale)), max(1, round(in_w * scale))
    if width is None and height is None:
        raise ToolArgumentError("resize", None, "give width and/or height in pixels, or scale")
    if width is None:
        width = max(1, round(in_w * height / in_h))
    if height is None:
        height = max(1, round(in_h * width / in_w))
    return height, width


def _resize_output(args, height, width):
    size = resize_size(args["width"], args["height"], args["scale"], height, width)
    _no_area_enlarging("resize", args["interpolation"], (height, width), size)
    return size


def resize_cv(image, width, height, scale, interpolation):
    out_h, out_w = resize_size(width, height, scale, *image.shape[:2])
    return cv2.resize(image, (out_w, out_h), interpolation=_CV_INTERP[interpolation])


def resize_tensor(batch, size, interpolation):
    """cv2.resize semantics on a (N, C, H, W) uint8 tensor. INTER_AREA matches OpenCV for shrinking."""
    if tuple(batch.shape[-2:]) == tuple(size):
        return batch.clone()
    x = batch.float()
    if interpolation == "nearest":
        out = F.interpolate(x, size=size, mode="nearest")
    elif interpolation == "area" and size[0] <= batch.shape[-2] and size[1] <= batch.shape[-1]:
        rows = _area_weights(batch.shape[-2], size[0], batch.device)
        cols = _area_weights(batch.shape[-1], size[1], batch.device)
        out = torch.einsum("oh,nchw,pw->ncop", rows, x, cols)
    else:
        mode = "bilinear" if interpolation in ("linear", "area") else "bicubic"
        out = F.interpolate(x, size=size, mode=mode, align_corners=False)
    return out.round_().clamp_(0, 255).to(torch.uint8)


def _area_weights(n_in: int, n_out: int, device):
    """INTER_AREA shrinking as a matrix: output cell d averages input [d*s, (d+1)*s) by overlap, s = n_in/n_out."""
    scale = n_in / n_out
    starts = torch.arange(n_out, dtype=torch.float64) * scale
    edges = torch.arange(n_in + 1, dtype=torch.float64)
    lo = torch.maximum(edges[None, :-1], starts[:, None])
    hi = torch.minimum(edges[None, 1:], starts[:, None] + scale)
    return ((hi - lo).clamp(min=0) / scale).to(device=device, dtype=torch.float32)


def resize_torch(batch, width, height, scale, interpolation):
    return resize_tensor(batch, resize_size(width, height, scale, *batch.shape[-2:]), interpolation)


register(Op(
    "resize",
    "Resize the image to `width` x `height` pixels (give one to keep the aspect ratio), or by `scale` "
    "(2.0 doubles each side, 0.5 halves it).",
    (
        Param("width", "int", "Target width in pixels.", None, 1, 16384),
        Param("height", "int", "Target height in pixels.", None, 1, 16384),
        Param("scale", "float", "Scale factor for both sides.", None, 0.01, 16),
        Param("interpolation", "str", "Resampling: 'area' is best for shrinking.", "linear", choices=INTERPOLATIONS + ("area",)),
    ),
    resize_cv, resize_torch, output_size=_resize_output, tolerance=RESAMPLED, category="geometry",
    examples=(
        {"width": 128, "height": 96}, {"scale": 0.5, "interpolation": "area"}, {"width": 30},
        {"scale": 1.5, "interpolation": "cubic"}, {"height": 100, "interpolation": "nearest"},
    ),
))


# -- translate -----------------------------------------------------------------------------------------
_BORDERS = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE, "reflect": cv2.BORDER_REFLECT_101}


def translate_cv(image, dx, dy, border, fill):
    h, w = image.shape[:2]
    matrix = np.float32([[1, 0, dx], [0, 1, dy]])
    channels = 1 if image.ndim == 2 else image.shape[2]
    return cv2.warpAffine(image, matrix, (w, h), flags=cv2.INTER_NEAREST, borderMode=_BORDERS[border],
                          borderValue=tuple(color_values(fill, channels)))


def translate_torch(batch, dx, dy, border, fill):
    n, c, h, w = batch.shape
    # Shift by exact integer indexing: output pixel (y, x) reads input (y - dy, x - dx), with the border rule.
    ys = torch.arange(h, device=batch.device) - dy
    xs = torch.arange(w, device=batch.device) - dx
    if border == "replicate":
        ys, xs = ys.clamp(0, h - 1), xs.clamp(0, w - 1)
    elif border == "reflect":
        ys, xs = reflect101(ys, h), reflect101(xs, w)
    out = batch[:, :, ys.clamp(0, h - 1)][:, :, :, xs.clamp(0, w - 1)]
    if border == "constant":
        inside = ((ys >= 0) & (ys < h))[:, None] & ((xs >= 0) & (xs < w))[None, :]
        value = torch.tensor(color_values(fill, c), dtype=torch.uint8, device=batch.device).view(1, c, 1, 1)
        out = torch.where(inside, out, value)
    return out


register(Op(
    "translate",
    "Shift the image by `dx` pixels to the right and `dy` pixels down (negative values shift left / up). "
    "The vacated area is filled by `border`: 'constant' (the `fill` color), 'replicate' (repeat edge "
    "pixels) or 'reflect'.",
    (
        Param("dx", "int", "Horizontal shift in pixels, positive = right.", 0, -16384, 16384),
        Param("dy", "int", "Vertical shift in pixels, positive = down.", 0, -16384, 16384),
        Param("border", "str", "How the vacated area is filled.", "constant", choices=tuple(_BORDERS)),
        FILL,
    ),
    translate_cv, translate_torch, category="geometry",
    examples=({"dx": 10, "dy": -5}, {"dx": -20, "border": "replicate"}, {"dy": 30, "border": "reflect"},
              {"dx": 7, "dy": 7, "fill": [255, 255, 0]}),
))


# -- pyramid -------------------------------------------------------------------------------------------
_PYR_TAPS = (1.0, 4.0, 6.0, 4.0, 1.0)


def pyramid_cv(image, direction, levels):
    step = cv2.pyrDown if direction == "down" else cv2.pyrUp
    for _ in range(levels):
        image = step(image)
    return image


def _pyr_down(x):
    """cv2.pyrDown in exact integer arithmetic: 5-tap binomial filter, BORDER_REFLECT_101, (sum+128)>>8."""
    n, c, h, w = x.shape
    taps = torch.tensor(_PYR_TAPS, dtype=torch.float64, device=x.device)
    pad = F.pad(x.double().reshape(n * c, 1, h, w), (2, 2, 2, 2), mode="reflect")
    rows = F.conv2d(pad, taps.view(1, 1, 5, 1))
    both = F.conv2d(rows, taps.view(1, 1, 1, 5))
    out = torch.floor((both[:, :, ::2, ::2] + 128) / 256)
    return out.reshape(n, c, (h + 1) // 2, (w + 1) // 2).clamp_(0, 255).to(torch.uint8)


def _pyr_up(x):
    """cv2.pyrUp: zero-insert to 2x, filter with 4x the binomial kernel, BORDER_REFLECT_101, (sum+32)>>6."""
    n, c, h, w = x.shape
    up = torch.zeros((n * c, 1, 2 * h, 2 * w), dtype=torch.float64, device=x.device)
    up[:, :, ::2, ::2] = x.double().reshape(n * c, 1, h, w)
    taps = torch.tensor(_PYR_TAPS, dtype=torch.float64, device=x.device) / 2
    pad = F.pad(up, (2, 2, 2, 2), mode="reflect")
    out = F.conv2d(F.conv2d(pad, taps.view(1, 1, 5, 1) * 2), taps.view(1, 1, 1, 5) * 2)
    out = torch.floor((out + 32) / 64)
    return out.reshape(n, c, 2 * h, 2 * w).clamp_(0, 255).to(torch.uint8)


def pyramid_torch(batch, direction, levels):
    step = _pyr_down if direction == "down" else _pyr_up
    for _ in range(levels):
        batch = step(batch)
    return batch


def _pyramid_output(args, height, width):
    for _ in range(args["levels"]):
        height, width = ((height + 1) // 2, (width + 1) // 2) if args["direction"] == "down" else (2 * height, 2 * width)
    return height, width


register(Op(
    "pyramid",
    "Gaussian pyramid step: 'down' blurs and halves each side ((w+1)//2), 'up' doubles each side and "
    "smooths; repeated `levels` times.",
    (
        Param("direction", "str", "'down' (smaller) or 'up' (larger).", "down", choices=("down", "up")),
        Param("levels", "int", "How many pyramid steps.", 1, 1, 4),
    ),
    pyramid_cv, pyramid_torch, output_size=_pyramid_output, category="geometry",
    tolerance=Tolerance(pixel=1, outliers=0.06, mean=0.1, why="pyrUp's right/bottom edge rows differ by one level"),
    examples=({"direction": "down"}, {"direction": "down", "levels": 2}, {"direction": "up"}),
))
