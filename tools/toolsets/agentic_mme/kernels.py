"""Agentic-MME's 14 atomic tools (atomic_toolbox.py's `tool_*` functions, with the argument conversions the
runner's `dispatch_image_tool` applies first), one function per tool.

Each takes the episode's images (a `Workspace`: the reference's AtomicState) and the call's arguments as the
runner parsed them, and returns the reference's result dict or raises what the reference raises. The spec is
the reference's code, quirks included: values are converted with the same Python calls in the same order (so
a bad value fails at the same point, with the same message: `int("2.5")` fails, `int(2.5)` truncates, any
non-empty string is a true `expand`), options are compared lower-cased with the same fallbacks, values the
result echoes are echoed as given (enhance's factors) or as converted (cutoff, angle), and each operation
makes the same PIL / OpenCV / numpy calls on the same RGB image.
"""

from __future__ import annotations

from typing import Callable, Protocol

import cv2
import numpy as np
from PIL import Image, ImageEnhance, ImageFilter, ImageOps

WHOLE_IMAGE = (0, 0, 1000, 1000)  # crop's box when a call gives none (0-1000 units)
CANNY_THRESHOLDS = (100, 200)


class Workspace(Protocol):
    def open(self, index: int) -> Image.Image:
        """Image `index` as an RGB PIL image; the reference's ValueError for an index outside the list."""

    def save(self, picture: Image.Image) -> tuple[int, str]:
        """Add an image to the list: its new index and the output path the reply names."""


def _index_and_label(args: dict) -> tuple[int, str]:
    return int(args.get("image_index", 0)), str(args.get("label", ""))


def _result(op: str, source: int, saved: tuple[int, str], **fields) -> dict:
    """The reference's result dict: these keys first, then each tool's own, in its order."""
    new_index, path = saved
    return {"ok": "true", "op": op, "source_image_index": source, "new_image_index": new_index, "output_path": path,
            **fields}


def pixel_box(box, width: int, height: int) -> list[int]:
    """A 0-1000 box in pixels: each corner truncated with int(), corners swapped into order, then clamped."""
    x1, y1 = int(box[0] / 1000 * width), int(box[1] / 1000 * height)
    x2, y2 = int(box[2] / 1000 * width), int(box[3] / 1000 * height)
    x1, x2 = min(x1, x2), max(x1, x2)
    y1, y2 = min(y1, y2), max(y1, y2)
    return [max(0, min(x1, width)), max(0, min(y1, height)), max(0, min(x2, width)), max(0, min(y2, height))]


def crop(ws: Workspace, args: dict) -> dict:
    """A zero-area box gives an empty image, which fails when saved (after it took a file number); a zoom
    applies only above 1, with LANCZOS, to sizes truncated from the scale."""
    index, label = _index_and_label(args)
    box = args.get("bbox_2d", list(WHOLE_IMAGE))
    zoom = float(args.get("zoom_scale", 1.0))
    picture = ws.open(index)
    x1, y1, x2, y2 = pixel_box(box, *picture.size)
    region = picture.crop((x1, y1, x2, y2))
    if zoom > 1.0:
        region = region.resize((int(region.width * zoom), int(region.height * zoom)), Image.LANCZOS)
    saved = ws.save(region)
    return _result("crop", index, saved, bbox_normalized=box, bbox_absolute=[x1, y1, x2, y2], zoom_scale=zoom,
                   label=label, size=list(region.size))


def rotate(ws: Workspace, args: dict) -> dict:
    """PIL's rotate: counter-clockwise, nearest neighbour, black corners; `expand` is bool() of what was sent."""
    index, label = _index_and_label(args)
    angle, expand = float(args["angle"]), bool(args.get("expand", True))
    turned = ws.open(index).rotate(angle, expand=expand)
    saved = ws.save(turned)
    return _result("rotate", index, saved, angle=angle, expand=expand, label=label, size=list(turned.size))


FLIPS = {"horizontal": (Image.Transpose.FLIP_LEFT_RIGHT,), "vertical": (Image.Transpose.FLIP_TOP_BOTTOM,),
         "both": (Image.Transpose.FLIP_LEFT_RIGHT, Image.Transpose.FLIP_TOP_BOTTOM)}
FLIP_NAMES = {"h": "horizontal", "left_right": "horizontal", "lr": "horizontal", "v": "vertical",
              "top_bottom": "vertical", "tb": "vertical", "b": "both", "hv": "both"}


def flip(ws: Workspace, args: dict) -> dict:
    """Any direction it does not know (after lower-casing) flips horizontally."""
    index, label = _index_and_label(args)
    direction = str(args.get("direction", "horizontal"))
    flipped = ws.open(index)
    wanted = direction.lower()
    name = wanted if wanted in FLIPS else FLIP_NAMES.get(wanted, "horizontal")
    for method in FLIPS[name]:
        flipped = flipped.transpose(method)
    saved = ws.save(flipped)
    return _result("flip", index, saved, direction=name, label=label, size=list(flipped.size))


def resize(ws: Workspace, args: dict) -> dict:
    """Width and height win when both are given, else the scale (sizes truncated). The reply converts the scale
    with float() after the image is saved: a width, a height and a scale float() rejects add the image to the
    list and still answer with the error."""
    index, label = _index_and_label(args)
    width, height, scale = args.get("width"), args.get("height"), args.get("scale")
    picture = ws.open(index)
    if width is None or height is None:
        if scale is None:
            raise ValueError("resize requires (width, height) or scale")
        width, height = int(picture.width * float(scale)), int(picture.height * float(scale))
    resized = picture.resize((int(width), int(height)), Image.LANCZOS)
    saved = ws.save(resized)
    return _result("resize", index, saved, size=[int(width), int(height)], scale=float(scale) if scale else None,
                   label=label)


def enhance(ws: Workspace, args: dict) -> dict:
    """Brightness, then contrast, then sharpness, each only when given; the reply echoes the values as sent."""
    index, label = _index_and_label(args)
    factors = {name: args.get(name) for name in ("brightness", "contrast", "sharpness")}
    picture = ws.open(index)
    for name, enhancer in (("brightness", ImageEnhance.Brightness), ("contrast", ImageEnhance.Contrast),
                           ("sharpness", ImageEnhance.Sharpness)):
        if factors[name] is not None:
            picture = enhancer(picture).enhance(float(factors[name]))
    saved = ws.save(picture)
    return _result("enhance", index, saved, **factors, label=label, size=list(picture.size))


def grayscale(ws: Workspace, args: dict) -> dict:
    index, label = _index_and_label(args)
    gray = ws.open(index).convert("L").convert("RGB")
    return _result("grayscale", index, ws.save(gray), label=label, size=list(gray.size))


def autocontrast(ws: Workspace, args: dict) -> dict:
    index, label = _index_and_label(args)
    cutoff = float(args.get("cutoff", 0))
    stretched = ImageOps.autocontrast(ws.open(index), cutoff=cutoff)
    return _result("autocontrast", index, ws.save(stretched), cutoff=cutoff, label=label, size=list(stretched.size))


def blur(ws: Workspace, args: dict) -> dict:
    """PIL's GaussianBlur (box-blur passes) with the radius truncated; radius 0 gives the image back."""
    index, label = _index_and_label(args)
    radius = int(args.get("radius", 2))
    blurred = ws.open(index).filter(ImageFilter.GaussianBlur(radius=radius))
    return _result("blur", index, ws.save(blurred), radius=radius, label=label, size=list(blurred.size))


def sharpen(ws: Workspace, args: dict) -> dict:
    index, label = _index_and_label(args)
    sharpened = ws.open(index).filter(ImageFilter.SHARPEN)
    return _result("sharpen", index, ws.save(sharpened), label=label, size=list(sharpened.size))


def denoise(ws: Workspace, args: dict) -> dict:
    """OpenCV's coloured non-local means on the RGB array (the function expects BGR: its luminance weights
    fall on the wrong channels, as in the reference); h = hColor = strength."""
    index, label = _index_and_label(args)
    strength = int(args.get("strength", 10))
    pixels = np.array(ws.open(index))
    cleaned = Image.fromarray(cv2.fastNlMeansDenoisingColored(pixels, None, h=strength, hColor=strength,
                                                              templateWindowSize=7, searchWindowSize=21))
    return _result("denoise", index, ws.save(cleaned), strength=strength, label=label, size=list(cleaned.size))


def _canny(picture: Image.Image) -> np.ndarray:
    return cv2.Canny(np.array(picture.convert("L")), *CANNY_THRESHOLDS)


def _sobel(picture: Image.Image) -> np.ndarray:
    gray = np.array(picture.convert("L"))
    along_x, along_y = cv2.Sobel(gray, cv2.CV_64F, 1, 0, ksize=3), cv2.Sobel(gray, cv2.CV_64F, 0, 1, ksize=3)
    return np.uint8(np.clip(np.sqrt(along_x ** 2 + along_y ** 2), 0, 255))


EDGE_METHODS: dict[str, Callable[[Image.Image], np.ndarray]] = {"canny": _canny, "sobel": _sobel}


def edge_detect(ws: Workspace, args: dict) -> dict:
    """Canny or Sobel on PIL's luminance; any other method (after lower-casing) is PIL's FIND_EDGES filter.
    The reply echoes the method as sent."""
    index, label = _index_and_label(args)
    method = str(args.get("method", "canny"))
    picture = ws.open(index)
    detector = EDGE_METHODS.get(method.lower())
    if detector is None:
        edges = picture.filter(ImageFilter.FIND_EDGES).convert("RGB")
    else:
        edges = Image.fromarray(detector(picture)).convert("RGB")
    return _result("edge_detect", index, ws.save(edges), method=method, label=label, size=list(edges.size))


def invert(ws: Workspace, args: dict) -> dict:
    index, label = _index_and_label(args)
    inverted = ImageOps.invert(ws.open(index))
    return _result("invert", index, ws.save(inverted), label=label, size=list(inverted.size))


def equalize(ws: Workspace, args: dict) -> dict:
    index, label = _index_and_label(args)
    equalized = ImageOps.equalize(ws.open(index))
    return _result("equalize", index, ws.save(equalized), label=label, size=list(equalized.size))


# Each mode's rule for a luminance x against the value v; PIL's point() tabulates it over 0-255 (and clips).
THRESHOLD_RULES = {
    "binary": lambda v: lambda x: 255 if x > v else 0,
    "binary_inv": lambda v: lambda x: 0 if x > v else 255,
    "trunc": lambda v: lambda x: v if x > v else x,
    "tozero": lambda v: lambda x: x if x > v else 0,
}


def threshold(ws: Workspace, args: dict) -> dict:
    """On PIL's luminance; any value is used as given (no clamp); an unknown mode is binary. The reply echoes
    the mode as sent."""
    index, label = _index_and_label(args)
    value, mode = int(args.get("value", 128)), str(args.get("mode", "binary"))
    gray = ws.open(index).convert("L")
    rule = THRESHOLD_RULES.get(mode.lower(), THRESHOLD_RULES["binary"])
    binary = gray.point(rule(value)).convert("RGB")
    return _result("threshold", index, ws.save(binary), value=value, mode=mode, label=label, size=list(binary.size))


Kernel = Callable[[Workspace, dict], dict]
KERNELS: dict[str, Kernel] = {
    kernel.__name__: kernel for kernel in (crop, rotate, flip, resize, enhance, grayscale, autocontrast, blur, sharpen,
                                           denoise, edge_detect, invert, equalize, threshold)
}
