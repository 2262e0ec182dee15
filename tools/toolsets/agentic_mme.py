"""`agentic_mme`: Agentic-MME's atomic visual tools (Atm mode; paper App. B.3, atomic_toolbox.py).

The schemas below are the published ones, word for word. Validation and mapping follow the reference
runtime (PIL-based): every tool reads `image_index` (0 = original, each call appends an image); crop boxes
are 0-1000, truncated, reversed corners swapped, clamped; `zoom_scale` applies only above 1; rotate is
counter-clockwise with `expand` defaulting to true and nearest-neighbour resampling; threshold is
`> value` on PIL luminance; an unknown flip direction or threshold mode falls back to the default.
Known deviations: PIL's LANCZOS resampling (crop zoom, resize) maps to bicubic; PIL's GaussianBlur
(a box-blur approximation) maps to a true gaussian with sigma = radius; a zero-area crop is an error.
"""

from tools.registry import Param, ToolArgumentError
from tools.toolset import Tool, ToolSet, flat_tool, op_step

INDEX = Param("image_index", "int", "Index of the image to operate on (0 = original, 1, 2... = processed images)", low=0, high=10_000)
LABEL = Param("label", "str", "Description of what this operation is for", None)


def _published(name: str, description: str, properties: dict, required=("image_index",)) -> dict:
    props = {"image_index": {"type": "integer", "description": INDEX.doc, "minimum": 0}}
    props.update(properties)
    props["label"] = {"type": "string", "description": LABEL.doc}
    return {"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": props, "required": list(required)}}}


def _tool(name, description, properties, params, steps, required=("image_index",)) -> Tool:
    return flat_tool(name, description, (INDEX, *params, LABEL), steps, image=lambda a: a["image_index"],
                     schema=_published(name, description, properties, required))


def _crop(a):
    scale = a["zoom_scale"] if a["zoom_scale"] > 1.0 else 1.0
    return [op_step("crop", box=list(a["bbox_2d"]), units="norm1000", bounds="clamp", scale=scale, interpolation="cubic")]


def _resize(a):
    if a["width"] is not None and a["height"] is not None:
        return [op_step("resize", width=a["width"], height=a["height"], interpolation="cubic")]
    if a["scale"] is not None:
        return [op_step("resize", scale=a["scale"], interpolation="area" if a["scale"] < 1 else "cubic")]
    raise ToolArgumentError("resize", None, "resize requires (width, height) or scale")


_FLIPS = {"horizontal": "horizontal", "h": "horizontal", "left_right": "horizontal", "lr": "horizontal",
          "vertical": "vertical", "v": "vertical", "top_bottom": "vertical", "tb": "vertical",
          "both": "both", "b": "both", "hv": "both"}
_THRESHOLDS = ("binary", "binary_inv", "trunc", "tozero")


def _enhance(a):
    steps = [op_step(f"adjust_{k}", factor=a[k]) for k in ("brightness", "contrast", "sharpness") if a[k] is not None]
    return steps  # no factor given: the image comes back unchanged, as in the reference


def _edges(a):
    method = a["method"]
    if method == "canny":
        return [op_step("canny", low=100, high=200)]
    if method == "sobel":
        return [op_step("gradients", mode="sobel", ksize=3)]
    return [op_step("filter", kind="find_edges")]  # 'simple' and, as in the reference, anything else


_NUM = {"type": "number"}
TOOLSET = ToolSet(
    "agentic_mme",
    "Agentic-MME's atomic visual tools (Atm mode): image_index workspace, 0-1000 boxes, counter-clockwise rotation.",
    (
        _tool("crop", "Crop/zoom into a region of an image using normalized bounding box coordinates (0-1000 scale).",
              {"bbox_2d": {"type": "array", "items": _NUM, "minItems": 4, "maxItems": 4,
                           "description": "Bounding box [x1, y1, x2, y2] in 0-1000 normalized coordinates"},
               "zoom_scale": {"type": "number", "description": "Magnification factor for the cropped region (default: 1.0). Higher values produce larger images.",
                              "minimum": 0.5, "maximum": 5.0, "default": 1.0}},
              (Param("bbox_2d", "floats", "box", length=4), Param("zoom_scale", "float", "zoom", 1.0, 0, 16)),
              _crop, required=("image_index", "bbox_2d")),
        _tool("rotate", "Rotate an image by angle degrees (positive = counterclockwise).",
              {"angle": {"type": "number", "description": "Rotation angle in degrees"},
               "expand": {"type": "boolean", "description": "If true, expand canvas to fit rotated image. Default: true"}},
              (Param("angle", "float", "angle", low=-3600, high=3600), Param("expand", "bool", "expand", True)),
              lambda a: [op_step("rotate", angle=a["angle"], direction="counterclockwise", expand=a["expand"], interpolation="nearest")],
              required=("image_index", "angle")),
        _tool("flip", "Flip/mirror an image horizontally, vertically, or both directions.",
              {"direction": {"type": "string", "enum": ["horizontal", "vertical", "both"],
                             "description": "Flip direction: 'horizontal' (left-right mirror), 'vertical' (top-bottom mirror), or 'both'. Default: horizontal"}},
              (Param("direction", "str", "direction", "horizontal"),),
              lambda a: [op_step("flip", direction=_FLIPS.get(a["direction"].lower(), "horizontal"))]),
        _tool("resize", "Resize an image to (width, height) OR by scale factor.",
              {"width": {"type": "integer", "description": "Target width in pixels"},
               "height": {"type": "integer", "description": "Target height in pixels"},
               "scale": {"type": "number", "description": "Scale factor (e.g., 2.0 = double size, 0.5 = half)"}},
              (Param("width", "int", "w", None, 1, 16384), Param("height", "int", "h", None, 1, 16384), Param("scale", "float", "s", None, 0.01, 16)),
              _resize),
        _tool("grayscale", "Convert an image to grayscale.", {}, (),
              lambda a: [op_step("grayscale", method="pil", output_channels=3)]),
        _tool("autocontrast", "Apply automatic contrast adjustment.",
              {"cutoff": {"type": "number", "description": "Percentage of lightest/darkest pixels to ignore. Default: 0"}},
              (Param("cutoff", "float", "cutoff", 0.0, 0, 49.9),),
              lambda a: [op_step("autocontrast", cutoff=a["cutoff"])]),
        _tool("invert", "Invert the colors of an image (create negative).", {}, (), lambda a: [op_step("invert")]),
        _tool("equalize", "Equalize histogram for better contrast distribution.", {}, (),
              lambda a: [op_step("equalize", mode="per_channel", algorithm="pil")]),
        _tool("threshold", "Apply threshold to convert image to binary (black/white).",
              {"value": {"type": "integer", "description": "Threshold value (0-255). Default: 128"},
               "mode": {"type": "string", "enum": list(_THRESHOLDS), "description": "Threshold mode. Default: binary"}},
              (Param("value", "int", "value", 128, 0, 255), Param("mode", "str", "mode", "binary")),
              lambda a: [op_step("grayscale", method="pil"),
                         op_step("threshold", mode=a["mode"] if a["mode"] in _THRESHOLDS else "binary", value=a["value"])]),
        _tool("blur", "Apply Gaussian blur.", {"radius": {"type": "integer", "description": "Blur radius. Default: 2"}},
              (Param("radius", "int", "radius", 2, 1, 50),),
              lambda a: [op_step("blur", method="gaussian", ksize=0, sigma=float(a["radius"]))]),
        _tool("sharpen", "Apply sharpening filter.", {}, (), lambda a: [op_step("filter", kind="sharpen")]),
        _tool("denoise", "Remove noise from an image.",
              {"strength": {"type": "integer", "description": "Denoising strength (1-30). Default: 10"}},
              (Param("strength", "int", "strength", 10, 1, 100),),
              lambda a: [op_step("denoise", h=float(a["strength"]), h_color=float(a["strength"]), template_window=7, search_window=21, mode="color")]),
        _tool("edge_detect", "Detect edges in an image.",
              {"method": {"type": "string", "enum": ["canny", "sobel", "simple"], "description": "Edge detection method. Default: canny"}},
              (Param("method", "str", "method", "canny"),), _edges),
        _tool("enhance", "Adjust brightness, contrast, and/or sharpness. Values: 1.0 = no change, >1.0 = increase, <1.0 = decrease.",
              {k: {"type": "number", "description": f"{k.capitalize()} multiplier (1.0 = no change)"} for k in ("brightness", "contrast", "sharpness")},
              tuple(Param(k, "float", k, None, 0, 100) for k in ("brightness", "contrast", "sharpness")), _enhance),
    ),
)
