"""`vtc_bench`: VTC-Bench's 35 OpenCV interface tools (cs-w0r1d/VTC-Bench, eval/qwen_agent/tools/opencv_*.py).

Calls have the published shape `{"image": <path>, "param": {...}}` and the names the model sees carry the
`opencv_` prefix. Mapping follows the reference runtime, not just the schema text: rotate is clockwise with
an expanded black canvas and the angle truncated to an integer; colors (`color`, `newVal`, `loDiff`,
`upDiff`, BGR in-range bounds) are BGR and swapped to RGB here; crop / zoom_in reject boxes outside the
image; out-of-range thresholds, kernel sizes and windows are clamped, evened up or reset the way the
runtime does; `param` given as a JSON string is parsed (unparseable: empty), unknown keys are ignored.
Known deviations: rotate keeps our exact canvas (ceil of the rotated extent, pixel-center pivot) where the
reference truncates; `color_mode: "bgr"` Canny runs on gray and per-channel threshold / denoise process all
three channels (their `channels` lists are ignored; histogram honours them);
`colorspace_gray` and gray results are one-channel; hsv/lab results are shown as the reference's file
shows them (channels reversed, as its BGR-to-RGB save does).
"""

import json

from tools.registry import Param, ToolArgumentError, bind_args
from tools.toolset import Invocation, Tool, ToolSet, op_step

PREFIX = "opencv_"
IMAGE = {"type": "string", "description": "The input image identifier"}
_INT, _NUM, _STR, _BOOL = ({"type": t} for t in ("integer", "number", "string", "boolean"))
_INTS = {"type": "array", "items": {"type": "integer"}}


def _p(schema: dict, description: str) -> dict:
    return {**schema, "description": description}


def _vtc(name, description, props, params, steps, required=(), outer=("image", "param"), extra=None) -> Tool:
    full = PREFIX + name
    schema = {"type": "function", "function": {"name": full, "description": description, "parameters": {
        "type": "object",
        "properties": {"image": IMAGE, "param": {"type": "object", "properties": props, "required": list(required)}},
        "required": list(outer)}}}
    known = {p.name for p in params}

    def translate(arguments: dict) -> Invocation:
        if not isinstance(arguments, dict):
            raise ToolArgumentError(full, None, "arguments must be a JSON object with 'image' and 'param'")
        image = arguments.get("image")
        if not isinstance(image, str) or not image.strip():
            raise ToolArgumentError(full, "image", "is required: the absolute path of the image to process")
        param = arguments.get("param") or {}
        if isinstance(param, str):  # the reference accepts a JSON string and treats a bad one as {}
            try:
                param = json.loads(param)
            except json.JSONDecodeError:
                param = {}
        param = param if isinstance(param, dict) else {}
        args = bind_args(full, params, {k: v for k, v in param.items() if k in known})
        return Invocation(full, tuple(steps(args)), image, extra(args) if extra else {})

    return Tool(full, schema, translate)


def _rgb(bgr) -> list[int]:
    """A BGR color as the reference reads it (clamped to 0-255, truncated), in RGB order."""
    return [int(min(255, max(0, v))) for v in reversed(bgr)]


def _odd(value: int, low: int, high: int) -> int:
    value = value + 1 if value % 2 == 0 else value
    return min(high, max(low, value))


def _box(a, op="crop"):
    if a["x"] < 0 or a["y"] < 0:
        raise ToolArgumentError(PREFIX + op, "x", "x and y must be non-negative integers")
    if a["width"] <= 0 or a["height"] <= 0:
        raise ToolArgumentError(PREFIX + op, "width", "width and height must be positive integers")
    return [a["x"], a["y"], a["x"] + a["width"], a["y"] + a["height"]]


def _resize(a):
    if a["preset"]:
        if a["preset"] not in ("half", "double"):
            raise ToolArgumentError(PREFIX + "resize", "preset", f"must be 'half' or 'double', got {a['preset']!r}")
        return [op_step("resize", scale=0.5 if a["preset"] == "half" else 2.0)]
    for key in ("width", "height"):
        if a[key] is None or not 0 < a[key] <= 10000:
            raise ToolArgumentError(PREFIX + "resize", key, "width and height must be positive integers up to 10000 (or give preset 'half' / 'double')")
    return [op_step("resize", width=a["width"], height=a["height"])]


def _zoom(a):
    steps = [op_step("crop", box=_box(a, "zoom_in"), bounds="error")]
    if a["scale"] is not None:
        if not 0 < a["scale"] <= 10:
            raise ToolArgumentError(PREFIX + "zoom_in", "scale", f"must be in (0, 10], got {a['scale']:g}")
        size = (int(a["width"] * a["scale"]), int(a["height"] * a["scale"]))
    elif a["target_width"] is not None or a["target_height"] is not None:
        size = (a["target_width"] or a["width"], a["target_height"] or a["height"])
    else:
        return steps
    if not (0 < size[0] <= 10000 and 0 < size[1] <= 10000):
        raise ToolArgumentError(PREFIX + "zoom_in", "target_width", f"target size {size[0]}x{size[1]} must be 1-10000 pixels per side")
    return steps + [op_step("resize", width=size[0], height=size[1])]


_SHIFT = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}


def _translate(a):
    if a["direction"] not in _SHIFT:
        raise ToolArgumentError(PREFIX + "translate", "direction", f"must be 'left', 'right', 'up' or 'down', got {a['direction']!r}")
    sx, sy = _SHIFT[a["direction"]]
    return [op_step("translate", dx=sx * a["distance"], dy=sy * a["distance"], border="replicate")]


def _blur(a):
    method = {"avg": "average"}.get(a["method"], a["method"])
    if method not in ("average", "gaussian", "median", "bilateral"):
        raise ToolArgumentError(PREFIX + "blur", "method", f"must be 'average', 'gaussian', 'median' or 'bilateral', got {a['method']!r}")
    ksize = a["ksize"] + 1 if a["ksize"] % 2 == 0 else a["ksize"]
    return [op_step("blur", method=method, ksize=ksize, sigma=a["sigma_x"], sigma_y=a["sigma_y"], d=a["d"],
                    sigma_color=a["sigma_color"], sigma_space=a["sigma_space"])]


_DENOISE = {"fast_means_gray": "gray", "fast_means_color": "color", "fast_means_bgr_channel": "per_channel"}


def _denoise(a):
    if a["mode"] not in _DENOISE:
        raise ToolArgumentError(PREFIX + "denoise", "mode", f"must be one of {', '.join(_DENOISE)}, got {a['mode']!r}")
    template = a["template_window"] if 3 <= a["template_window"] <= 21 else 7  # out of range resets, as in the reference
    search = a["search_window"] if 3 <= a["search_window"] <= 31 else 21
    return [op_step("denoise", h=min(50.0, max(1.0, a["h"])), h_color=min(50.0, max(1.0, a["h_color"])),
                    template_window=template | 1, search_window=search | 1, mode=_DENOISE[a["mode"]])]


def _threshold(a):
    if a["mode"] not in ("binary", "otsu", "adaptive_mean", "adaptive_gaussian"):
        raise ToolArgumentError(PREFIX + "threshold", "mode", f"must be 'binary', 'otsu', 'adaptive_mean' or 'adaptive_gaussian', got {a['mode']!r}")
    return [op_step("threshold", mode=a["mode"], value=float(min(255, max(0, a["threshold_value"]))),
                    block_size=_odd(a["adaptive_block_size"], 3, 101), c=float(a["adaptive_constant"]),
                    invert=a["invert"], per_channel=a["color_mode"] == "bgr")]


def _morphology(a):
    if a["op"] not in ("erode", "dilate", "open", "close"):
        raise ToolArgumentError(PREFIX + "morphology", "op", f"must be 'erode', 'dilate', 'open' or 'close', got {a['op']!r}")
    return [op_step("morphology", op=a["op"], kernel_size=_odd(a["kernel_size"], 3, 21),
                    iterations=min(10, max(1, a["iterations"])), kernel_shape="ellipse" if a["kernel_shape"] == "ellipse" else "rect")]


def _histogram(a):
    if a["mode"] not in ("equalize", "clahe"):
        raise ToolArgumentError(PREFIX + "histogram", "mode", f"must be 'equalize' or 'clahe', got {a['mode']!r}")
    mode = {"grayscale": "gray", "bgr": "per_channel", "hsv": "value"}.get(a["color_mode"], "gray")
    channels = sorted({2 - c for c in a["channels"] if 0 <= c <= 2}) or [0, 1, 2]  # BGR indices -> RGB
    if a["mode"] == "equalize":
        return [op_step("equalize", mode=mode, channels=channels)]
    return [op_step("clahe", mode=mode, channels=channels, clip_limit=a["clip_limit"], tile_grid=list(a["tile_grid_size"]))]


_CANNY_PRESETS = {"low": (50, 100), "medium": (100, 200), "high": (150, 250)}


def _canny(a):
    low, high = _CANNY_PRESETS.get(a["preset"], _CANNY_PRESETS["medium"])
    if a["threshold_low"] is not None and a["threshold_high"] is not None:  # only both together override
        low, high = sorted(min(255, max(0, v)) for v in (a["threshold_low"], a["threshold_high"]))
    return [op_step("canny", low=float(low), high=float(high))]


def _gradients(a):
    if a["mode"] not in ("sobel_x", "sobel_y", "laplacian"):
        raise ToolArgumentError(PREFIX + "gradients", "mode", f"must be 'sobel_x', 'sobel_y' or 'laplacian', got {a['mode']!r}")
    return [op_step("gradients", mode=a["mode"], ksize=1 if a["mode"] == "laplacian" else 3)]


_CONTOUR_PROPS = {
    "mode": _p(_STR, "'external|list'."),
    "canny_low": _p(_INT, "<int default 100>"),
    "canny_high": _p(_INT, "<int default 200>"),
    "rank": _p(_INT, "<optional int 1 = largest>"),
    "max_contours": _p(_INT, "<optional int default 20>"),
}
_DRAW_PROPS = {"color": _p(_INTS, "BGR color [B, G, R]"), "thickness": _p(_INT, "<optional int default 2>")}


def _contour_params(color):
    return (Param("mode", "str", "", "external"), Param("canny_low", "int", "", 100, 0, 10000), Param("canny_high", "int", "", 200, 0, 10000),
            Param("rank", "int", "", None, -10**6, 10**6), Param("max_contours", "int", "", 20, -10**6, 10**6),
            Param("color", "floats", "", color, length=3), Param("thickness", "int", "", 2, -10**6, 10**6),
            Param("epsilon_ratio", "float", "", 0.02, -10**6, 10**6))


def _contours(draw, label):
    def steps(a):
        rank = a["rank"] if a["rank"] is not None and a["rank"] >= 1 else 1
        return [op_step(
            "contours", binarize="canny", canny_low=a["canny_low"], canny_high=a["canny_high"],
            mode="external" if a["mode"] == "external" else "list", sort_by="area",
            rank=rank if a["rank"] is not None else 0, max_contours=a["max_contours"] if a["max_contours"] > 0 else 10_000,
            epsilon_ratio=max(0.0, a["epsilon_ratio"]), draw=draw, label=label,
            color=_rgb(a["color"]), thickness=min(50, max(1, a["thickness"])))]
    return steps


def _components(a):
    binarize = {"otsu": "otsu", "binary": "binary", "none": "nonzero"}.get(a["threshold_mode"])
    if binarize is None:
        raise ToolArgumentError(PREFIX + "connected_components_with_stats", "threshold_mode", f"must be 'otsu', 'binary' or 'none', got {a['threshold_mode']!r}")
    if a["connectivity"] not in (4, 8):
        raise ToolArgumentError(PREFIX + "connected_components_with_stats", "connectivity", f"must be 4 or 8, got {a['connectivity']}")
    return [op_step("connected_components", binarize=binarize, threshold=min(255, max(0, a["threshold_value"])),
                    connectivity=a["connectivity"], max_components=max(1, a["max_components"]))]


def _floodfill(a):
    lo = a["loDiff"] if len(a["loDiff"]) >= 3 else (10, 10, 10)
    up = a["upDiff"] if len(a["upDiff"]) >= 3 else (10, 10, 10)
    flags = a["flags"]
    return [op_step("flood_fill", x=a["x"], y=a["y"], lo_diff=_rgb(lo[:3]), up_diff=_rgb(up[:3]), color=_rgb(a["newVal"]),
                    connectivity=8 if flags & 0xFF == 8 else 4, fixed_range=bool(flags & (1 << 16)))]


_FEATURES = ("harris", "shi_tomasi", "sift", "fast", "orb")


def _features(a):
    if a["method"] in ("surf", "brief"):
        raise ToolArgumentError(PREFIX + "features", "method", f"'{a['method']}' needs opencv-contrib, which is not installed; use one of {', '.join(_FEATURES)}")
    if a["method"] not in _FEATURES:
        raise ToolArgumentError(PREFIX + "features", "method", f"must be one of {', '.join(_FEATURES)}, got {a['method']!r}")
    return [op_step("keypoints", method=a["method"], max_points=min(500, max(1, a["max_points"])))]


_MATCH = {"sqdiff": "sqdiff", "ccorr": "ccorr_normed", "ccoeff": "ccoeff_normed"}


def _template(a):
    if a["method"] not in _MATCH:
        raise ToolArgumentError(PREFIX + "template_match", "method", f"must be 'sqdiff', 'ccorr' or 'ccoeff', got {a['method']!r}")
    if not a["template_path"]:
        raise ToolArgumentError(PREFIX + "template_match", "template_path", "is required: the path of the template image")
    return [op_step("template_match", method=_MATCH[a["method"]])]


def _inpaint(a):
    if a["preset"] not in ("canny", "threshold"):
        raise ToolArgumentError(PREFIX + "inpaint", "preset", f"must be 'canny' or 'threshold', got {a['preset']!r}")
    low, high = sorted(min(255, max(0, v)) for v in (a["canny_low"], a["canny_high"]))
    return [op_step("inpaint", mask="canny" if a["preset"] == "canny" else "bright", canny_low=low, canny_high=high,
                    threshold=min(255, max(0, a["threshold_value"])), radius=min(10, max(1, a["radius"])),
                    method="ns" if a["method"] == "ns" else "telea")]


def _inrange(a):
    if a["lower"] is None or a["upper"] is None:
        raise ToolArgumentError(PREFIX + "inrange_color", "lower", "lower and upper must be lists of three integers, e.g., lower:[0,50,50], upper:[10,255,255]")
    lower, upper = ([int(min(255, max(0, v))) for v in a[k]] for k in ("lower", "upper"))
    if a["colorspace"] == "bgr":
        lower, upper = lower[::-1], upper[::-1]
    # 'both' shows the masked image, or the mask when nothing matched: both are black then, so 'masked' is the same.
    output = "mask" if a["output_format"] == "mask" else "masked"
    return [op_step("in_range", space="rgb" if a["colorspace"] == "bgr" else "hsv", lower=lower, upper=upper, output=output)]


def _draw_line(a):
    for key in ("x1", "y1", "x2", "y2"):
        if a[key] is None:
            raise ToolArgumentError(PREFIX + "draw_line", key, "is required")
    return [op_step("draw_line", x1=float(a["x1"]), y1=float(a["y1"]), x2=float(a["x2"]), y2=float(a["y2"]),
                    color=_rgb(a["color"]), thickness=max(1, a["thickness"]))]


def _draw_circle(a):
    for key in ("x", "y", "radius"):
        if a[key] is None:
            raise ToolArgumentError(PREFIX + "draw_circle", key, "is required")
    if a["radius"] <= 0:
        raise ToolArgumentError(PREFIX + "draw_circle", "radius", f"must be a positive integer, got {a['radius']}")
    return [op_step("draw_circle", x=float(a["x"]), y=float(a["y"]), radius=a["radius"], color=_rgb(a["color"]),
                    thickness=-1 if a["thickness"] < 0 else max(1, a["thickness"]))]


def _i(name, default=None, low=-10**6, high=10**6):
    return Param(name, "int", "", default, low, high)


def _f(name, default=None, low=-10**6, high=10**6):
    return Param(name, "float", "", default, low, high)


def _s(name, default=None):
    return Param(name, "str", "", default)


def _c(name, default):
    return Param(name, "floats", "", default, length=3)


def _ints(name, default):
    return Param(name, "ints", "", default)


TOOLSET = ToolSet("vtc_bench", "VTC-Bench's OpenCV interface tools (opencv_*; {image, param}; clockwise rotate; BGR colors).", (
    _vtc("resize", "Resizes the image to specified dimensions or by a preset scale (half or double). You can specify any positive integer width and height (recommended range: 1-10000 pixels). Returns detailed size information including original and new dimensions.",
         {"width": _p(_INT, "<positive integer>"), "height": _p(_INT, "<positive integer>"),
          "preset": _p(_STR, "Resize preset: 'half' or 'double'. Model can decide the value.")},
         (_i("width"), _i("height"), _s("preset")), _resize, required=("width", "height")),
    _vtc("rotate", "Rotates the image by specified angle in degrees (clockwise). Supports arbitrary angles (e.g., 45, 90, 180, 270, etc.). The output image will be resized to fit the entire rotated content. Returns rotation details including angle, center point, and size changes.",
         {"angle": _p(_NUM, "Rotation angle in degrees (clockwise). Can be any number, e.g., 45, 90, 180, 270, etc.")},
         (_f("angle", 0.0, -3600, 3600),),
         lambda a: [op_step("rotate", angle=float(int(a["angle"])), direction="clockwise", expand=True)] if int(a["angle"]) else [],
         required=("angle",)),
    _vtc("translate", "Shifts the image by a specified number of pixels in the specified direction (left, right, up, or down). You can specify any positive integer distance (recommended range: 1-10000 pixels). Default distance is 32 pixels. Returns translation details.",
         {"direction": _p(_STR, "'left', 'right', 'up', or 'down'. Model can decide the value."),
          "distance": _p(_INT, "(any non-negative integer, default: 32, recommended range: 1-10000)")},
         (_s("direction", "right"), _i("distance", 32, 0, 10000)), _translate, required=("direction",)),
    _vtc("flip", "Flips the image horizontally or vertically.",
         {"direction": _p(_STR, "Flip direction: 'horizontal' or 'vertical'. Model can decide the value.")},
         (Param("direction", "str", "", "horizontal", choices=("horizontal", "vertical")),),
         lambda a: [op_step("flip", direction=a["direction"])], required=("direction",)),
    _vtc("crop", "Crops a rectangular region from the image. Returns the cropped region with detailed information about the crop area.",
         {"x": _p(_INT, "<non-negative integer>"), "y": _p(_INT, "<non-negative integer>"),
          "width": _p(_INT, "<positive integer>"), "height": _p(_INT, "<positive integer>")},
         (_i("x", 0), _i("y", 0), _i("width", 0), _i("height", 0)),
         lambda a: [op_step("crop", box=_box(a), bounds="error")]),
    _vtc("zoom_in", "Zooms into a specific region of the image by cropping and optionally resizing. Useful for focusing on a particular area and enlarging it for better visibility.",
         {"x": _p(_INT, "<non-negative integer>"), "y": _p(_INT, "<non-negative integer>"),
          "width": _p(_INT, "<positive integer>"), "height": _p(_INT, "<positive integer>"),
          "scale": _p(_NUM, "<optional float 0-10>"), "target_width": _p(_INT, "<optional positive integer>"),
          "target_height": _p(_INT, "<optional positive integer>")},
         (_i("x", 0), _i("y", 0), _i("width", 0), _i("height", 0), _f("scale"), _i("target_width"), _i("target_height")), _zoom),
    _vtc("pyramid", "Applies image pyramid operations (upsample or downsample by one level). Returns size information.",
         {"mode": _p(_STR, "'pyr_up|pyr_down'. Model can decide the value.")},
         (Param("mode", "str", "", "pyr_down", choices=("pyr_up", "pyr_down")),),
         lambda a: [op_step("pyramid", direction="up" if a["mode"] == "pyr_up" else "down")], required=("mode",)),
    *(_vtc(f"colorspace_{space}", "Converts the image to a different color space (grayscale, HSV, or LAB). Useful for enhancing contrast or isolating specific color channels.",
           {}, (), steps, outer=("image",))
      for space, steps in (
          ("gray", lambda a: [op_step("grayscale")]),
          ("hsv", lambda a: [op_step("convert_color", space="hsv"), op_step("convert_color", space="bgr")]),
          ("lab", lambda a: [op_step("convert_color", space="lab"), op_step("convert_color", space="bgr")]),
      )),
    _vtc("inrange_color", "Creates a mask for pixels within a specified color range. Supports HSV or BGR colorspace and flexible output formats.",
         {"colorspace": _p(_STR, "'hsv|bgr' (default: 'hsv')."), "lower": _p({"type": "array", "items": _NUM}, "Lower bound for color range [h/b, s/g, v/r]"),
          "upper": _p({"type": "array", "items": _NUM}, "Upper bound for color range [h/b, s/g, v/r]"),
          "output_format": _p(_STR, "'mask|masked_image|both' (default: 'both')")},
         (Param("colorspace", "str", "", "hsv", choices=("hsv", "bgr")), _c("lower", None), _c("upper", None),
          Param("output_format", "str", "", "both", choices=("mask", "masked_image", "both"))),
         _inrange, required=("lower", "upper")),
    _vtc("blur", "Applies blurring to reduce noise or smooth the image. Supports multiple blur methods: average (simple box blur), gaussian (weighted blur), median (good for salt-pepper noise), and bilateral (edge-preserving).",
         {"method": _p(_STR, "'average'/'avg' (simple box blur), 'gaussian' (weighted blur, default), 'median' (salt-pepper noise), 'bilateral' (edge-preserving)"),
          "ksize": _p(_INT, "Kernel size (must be odd, 3-51). Default: 5"),
          "sigma_x": _p(_NUM, "(0-10). Only for gaussian blur. Default: 0 (auto-calculated from ksize)"),
          "sigma_y": _p(_NUM, "(0-10). Only for gaussian blur. Default: 0 (auto-calculated from ksize)"),
          "d": _p(_INT, "(1-50). Only for bilateral filter. Default: 9"),
          "sigma_color": _p(_NUM, "(1-200). Only for bilateral filter. Default: 75"),
          "sigma_space": _p(_NUM, "(1-200). Only for bilateral filter. Default: 75")},
         (_s("method", "gaussian"), _i("ksize", 5, 3, 51), _f("sigma_x", 0.0, 0, 10), _f("sigma_y", 0.0, 0, 10),
          _i("d", 9, 1, 50), _f("sigma_color", 75.0, 1, 200), _f("sigma_space", 75.0, 1, 200)), _blur, required=("method", "ksize")),
    _vtc("denoise", "Applies fast non-local means denoising. Supports grayscale, color, or per-channel.",
         {"mode": _p(_STR, "'fast_means_gray|fast_means_color|fast_means_bgr_channel' (default: 'fast_means_color')"),
          "h": _p(_NUM, "<float 1-50> (default: 10)"), "h_color": _p(_NUM, "<float 1-50> (default: 10)"),
          "template_window": _p(_INT, "<odd int 3-21> (default: 7)"), "search_window": _p(_INT, "<odd int 3-31> (default: 21)"),
          "channels": _p(_INTS, "List of channel indices [0, 1, 2]")},
         (_s("mode", "fast_means_color"), _f("h", 10.0), _f("h_color", 10.0), _i("template_window", 7), _i("search_window", 21),
          _ints("channels", (0, 1, 2))), _denoise),
    _vtc("threshold", "Applies thresholding to create a binary image. Supports multiple color modes (grayscale or BGR channel-wise) and various threshold methods.",
         {"mode": _p(_STR, "'binary|otsu|adaptive_mean|adaptive_gaussian' (default: 'otsu')"), "invert": _p(_BOOL, "true|false (default: false)"),
          "color_mode": _p(_STR, "'grayscale|bgr' (default: 'grayscale')"), "threshold_value": _p(_INT, "<int 0-255> (for binary mode)"),
          "adaptive_block_size": _p(_INT, "<odd int 3-101> (default: 11)"), "adaptive_constant": _p(_INT, "<int> (default: 2)"),
          "channels": _p(_INTS, "List of channel indices [0, 1, 2]")},
         (_s("mode", "otsu"), Param("invert", "bool", "", False), _s("color_mode", "grayscale"), _i("threshold_value", 127),
          _i("adaptive_block_size", 11), _i("adaptive_constant", 2, -255, 255), _ints("channels", (0, 1, 2))), _threshold, required=("mode",)),
    _vtc("morphology", "Applies morphological operations (erode, dilate, open, close) with flexible kernel size and shape.",
         {"op": _p(_STR, "'erode|dilate|open|close' (default: 'open')"), "kernel_size": _p(_INT, "<odd int 3-21> (default: 3)"),
          "iterations": _p(_INT, "<int 1-10> (default: 1)"), "kernel_shape": _p(_STR, "'rect|ellipse' (default: 'rect')")},
         (_s("op", "open"), _i("kernel_size", 3), _i("iterations", 1), _s("kernel_shape", "rect")), _morphology, outer=("image",)),
    _vtc("histogram", "Applies histogram equalization or CLAHE to enhance image contrast. Supports multiple color modes (grayscale, BGR, HSV) and flexible channel selection to preserve color information or deal with specific channels.",
         {"mode": _p(_STR, "'equalize|clahe'. Model can decide the value."), "color_mode": _p(_STR, "'grayscale|bgr|hsv' (default: 'grayscale')"),
          "channels": _p(_INTS, "List of channel indices [0, 1, 2]"), "clip_limit": _p(_NUM, "<float> (for CLAHE)"),
          "tile_grid_size": _p(_INTS, "Tile grid size [width, height], default [8, 8]")},
         (_s("mode", "equalize"), _s("color_mode", "grayscale"), _ints("channels", (0, 1, 2)), _f("clip_limit", 2.0, 0, 1000),
          Param("tile_grid_size", "ints", "", (8, 8), 1, 64, length=2)), _histogram, required=("mode",)),
    _vtc("convertscaleabs", "Converts image to absolute value and scales it to 0-255 range. Useful for visualizing gradient images or other signed data. Applies scaling and offset transformations.",
         {"alpha": _p(_NUM, "<optional float default 1.0>"), "beta": _p(_NUM, "<optional float default 0>")},
         (_f("alpha", 1.0, 1e-9, 1000), _f("beta", 0.0, -10**4, 10**4)),
         lambda a: [op_step("convert_scale_abs", alpha=a["alpha"], beta=a["beta"])]),
    _vtc("inpaint", "Inpaints (fills) regions in the image using automatically generated mask. Supports canny edge or threshold based masks.",
         {"preset": _p(_STR, "'canny|threshold' (default: 'canny')"), "canny_low": _p(_INT, "<int 0-255> (default: 100)"),
          "canny_high": _p(_INT, "<int 0-255> (default: 200)"), "threshold_value": _p(_INT, "<int 0-255> (default: 127)"),
          "radius": _p(_INT, "<int 1-10> (default: 3)"), "method": _p(_STR, "'telea|ns' (default: 'telea')")},
         (_s("preset", "canny"), _i("canny_low", 100), _i("canny_high", 200), _i("threshold_value", 127), _i("radius", 3), _s("method", "telea")),
         _inpaint),
    _vtc("gradients", "Computes gradient images using Sobel (x or y direction) or Laplacian operator.",
         {"mode": _p(_STR, "'sobel_x|sobel_y|laplacian'. Model can decide the value.")},
         (_s("mode", "sobel_x"),), _gradients, required=("mode",)),
    _vtc("canny", "Detects edges using Canny edge detector. Supports preset thresholds or custom values, and can deal with grayscale or individual BGR channels.",
         {"preset": _p(_STR, "'low|medium|high' (default: 'medium'). Model can decide the value or provide custom threshold_low and threshold_high"),
          "threshold_low": _p(_INT, "<int 0-255> (overrides preset)"), "threshold_high": _p(_INT, "<int 0-255> (overrides preset)"),
          "color_mode": _p(_STR, "'grayscale|bgr' (default: 'grayscale')"), "channels": _p(_INTS, "List of channel indices [0, 1, 2]")},
         (_s("preset", "medium"), _i("threshold_low"), _i("threshold_high"), _s("color_mode", "grayscale"), _ints("channels", (0, 1, 2))),
         _canny, outer=("image",)),
    _vtc("contours", "Finds contours using Canny edges and returns bounding boxes/areas. Helpful for locating shapes before further analysis.",
         _CONTOUR_PROPS, _contour_params((0, 255, 0)), _contours("all", "none"), outer=("image",)),
    _vtc("contour_area", "Calculates contour areas using cv2.contourArea and overlays the values near each contour. Useful for comparing object sizes.",
         {**_CONTOUR_PROPS, **_DRAW_PROPS}, _contour_params((255, 0, 0)), _contours("selected", "area")),
    _vtc("arc_length", "Computes contour perimeters using cv2.arcLength and overlays the values. Helps measure object outlines.",
         {**_CONTOUR_PROPS, **_DRAW_PROPS}, _contour_params((0, 0, 255)), _contours("selected", "perimeter")),
    _vtc("approx_poly", "Approximates contours with fewer points using cv2.approxPolyDP (epsilon_ratio controls simplification). Great for polygonal shape summaries.",
         {"epsilon_ratio": _p(_NUM, "<float default 0.02>"), **_CONTOUR_PROPS, **_DRAW_PROPS}, _contour_params((255, 0, 255)), _contours("polygons", "vertices")),
    _vtc("connected_components_with_stats", "Finds and analyzes connected components in a binary image. Returns statistics including bounding boxes, areas, and centroids for each component.",
         {"threshold_mode": _p(_STR, "'otsu|binary|none'."), "threshold_value": _p(_INT, "<optional integer for binary mode default 127>"),
          "connectivity": _p(_INT, "<4|8 default 8>"), "max_components": _p(_INT, "<optional integer default 20>")},
         (_s("threshold_mode", "otsu"), _i("threshold_value", 127), _i("connectivity", 8), _i("max_components", 20)), _components),
    _vtc("hough_lines", "Detects line segments in the image using Hough transform. Returns line coordinates and lengths.",
         {k: _p(_INT, f"<optional integer default {d}>") for k, d in (("threshold", 80), ("minLineLength", 50), ("maxLineGap", 10), ("canny_low", 80), ("canny_high", 200), ("max_lines", 20))},
         (_i("threshold", 80, 1), _i("minLineLength", 50, 0), _i("maxLineGap", 10, 0), _i("canny_low", 80, 0), _i("canny_high", 200, 0), _i("max_lines", 20, 1)),
         lambda a: [op_step("hough_lines", threshold=a["threshold"], min_line_length=a["minLineLength"], max_line_gap=a["maxLineGap"],
                            canny_low=a["canny_low"], canny_high=a["canny_high"], max_lines=a["max_lines"])]),
    _vtc("hough_circles", "Detects circles in the image using Hough transform. Returns circle centers and radii.",
         {"dp": _p(_NUM, "<optional float default 1.2>"), **{k: _p(_INT, f"<optional integer default {d}>") for k, d in (("minDist", 50), ("param1", 100), ("param2", 50), ("minRadius", 10), ("maxRadius", 0), ("max_circles", 20))}},
         (_f("dp", 1.2, 0.1), _f("minDist", 50.0, 0.1), _f("param1", 100.0, 0.1), _f("param2", 50.0, 0.1), _i("minRadius", 10, 0), _i("maxRadius", 0, 0), _i("max_circles", 20, 1)),
         lambda a: [op_step("hough_circles", dp=a["dp"], min_dist=a["minDist"], param1=a["param1"], param2=a["param2"],
                            min_radius=a["minRadius"], max_radius=a["maxRadius"], max_circles=a["max_circles"], sort_by="radius")]),
    _vtc("watershed", "Applies watershed segmentation to separate overlapping objects. Returns region count and labels.",
         {"max_regions": _p(_INT, "<optional integer default 20>")}, (_i("max_regions", 20, 1),),
         lambda a: [op_step("watershed", max_regions=a["max_regions"], color=[0, 0, 255])], outer=("image",)),
    _vtc("grabcut", "Performs foreground/background segmentation using GrabCut algorithm with preset rectangle. Returns foreground pixel statistics.",
         {"preset": _p(_STR, "'center|tight|loose'.")}, (Param("preset", "str", "", "center", choices=("center", "tight", "loose")),),
         lambda a: [op_step("grabcut", preset=a["preset"], iterations=5)], required=("preset",)),
    _vtc("floodfill", "Performs flood fill operation starting from a seed point. Fills connected pixels with similar color values.",
         {"x": _p(_INT, "<non-negative integer>"), "y": _p(_INT, "<non-negative integer>"),
          "loDiff": _p(_INTS, "Lower difference [B, G, R], default [10, 10, 10]"), "upDiff": _p(_INTS, "Upper difference [B, G, R], default [10, 10, 10]"),
          "newVal": _p(_INTS, "New fill color [B, G, R], default [0, 255, 0]"), "flags": _p(_INT, "<optional integer default 4|FLOODFILL_FIXED_RANGE>")},
         (_i("x", 0, 0), _i("y", 0, 0), Param("loDiff", "floats", "", (10, 10, 10)), Param("upDiff", "floats", "", (10, 10, 10)),
          _c("newVal", (0, 255, 0)), _i("flags", 4 | (1 << 16), 0, 1 << 20)), _floodfill),
    _vtc("features", "Detects and draws keypoints using various feature detection methods (harris, shi_tomasi, sift, surf, fast, brief, orb). Returns keypoint coordinates.",
         {"method": _p(_STR, "'harris|shi_tomasi|sift|surf|fast|brief|orb'."), "max_points": _p(_INT, "Maximum number of keypoints to detect")},
         (_s("method", "orb"), _i("max_points", 50)), _features),
    _vtc("template_match", "Matches a template image within the source image. Returns match score and bounding box coordinates.",
         {"template_path": _p(_STR, "'path/to/template'"), "method": _p(_STR, "'sqdiff|ccorr|ccoeff'.")},
         (_s("template_path", ""), _s("method", "ccorr")), _template, extra=lambda a: {"template": a["template_path"]}),
    _vtc("dft", "Computes and visualizes the Discrete Fourier Transform magnitude spectrum.", {}, (),
         lambda a: [op_step("dft", log_scale=True)], outer=("image",)),
    _vtc("draw_line", "Draws a line segment between two points with configurable color and thickness.",
         {**{k: _p(_INT, "<integer>") for k in ("x1", "y1", "x2", "y2")}, "color": _p(_INTS, "BGR color [B, G, R]"), "thickness": _p(_INT, "<optional integer default 2>")},
         (_i("x1", None), _i("y1", None), _i("x2", None), _i("y2", None), _c("color", (0, 255, 0)), _i("thickness", 2)),
         _draw_line, required=("x1", "y1", "x2", "y2")),
    _vtc("draw_circle", "Draws a circle on the image at specified center coordinates with given radius.",
         {"x": _p(_INT, "<integer>"), "y": _p(_INT, "<integer>"), "radius": _p(_INT, "<positive integer>"),
          "color": _p(_INTS, "Circle color [B, G, R], default [0, 255, 0]"), "thickness": _p(_INT, "<optional integer default 2>")},
         (_i("x", None), _i("y", None), _i("radius", None), _c("color", (0, 255, 0)), _i("thickness", 2)),
         _draw_circle, required=("x", "y", "radius")),
))

