"""`deepeyes`: DeepEyes' `image_zoom_in_tool` (Visual-Agent/DeepEyes, visual_toolbox_v2.py and prompt.py).

Semantics: absolute pixel box on the ORIGINAL image, clamped to the image; boxes with an aspect ratio
over 100 are rejected; a box with a side under 28 pixels is scaled up about its center to 28 (we then
keep it inside the image, where DeepEyes lets PIL pad). `label` is accepted and ignored.
"""

from tools.registry import Param, ToolArgumentError
from tools.toolset import ORIGINAL, ToolSet, flat_tool, op_step

NAME = "image_zoom_in_tool"
PARAMS = (
    Param("bbox_2d", "floats", "The bounding box of the region to zoom in, as [x1, y1, x2, y2], where (x1, y1) is the top-left corner and (x2, y2) is the bottom-right corner.", length=4),
    Param("label", "str", "The name or label of the object in the specified bounding box (optional).", None),
)
# The schema exactly as DeepEyes' system prompt publishes it, including its `"required": ["bbox"]` typo:
# the models were trained on this text. Validation requires `bbox_2d`, the parameter the code reads.
SCHEMA = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": "Zoom in on a specific region of an image by cropping it based on a bounding box (bbox) and an optional object label.",
        "parameters": {
            "type": "object",
            "properties": {
                "bbox_2d": {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4, "description": PARAMS[0].doc},
                "label": {"type": "string", "description": PARAMS[1].doc},
            },
            "required": ["bbox"],
        },
    },
}
MIN_SIDE = 28
MAX_ASPECT = 100


def _zoom(args: dict) -> list:
    x1, y1, x2, y2 = args["bbox_2d"]
    w, h = abs(x2 - x1), abs(y2 - y1)
    if min(w, h) > 0 and max(w, h) / min(w, h) > MAX_ASPECT:
        raise ToolArgumentError(NAME, "bbox_2d", f"aspect ratio {max(w, h) / min(w, h):.0f} is over {MAX_ASPECT}; give a less elongated box")
    return [op_step("crop", box=list(args["bbox_2d"]), units="pixels", bounds="clamp", min_side=MIN_SIDE)]


TOOLSET = ToolSet(
    "deepeyes",
    "DeepEyes' zoom-in tool (pixel boxes on the original image).",
    (flat_tool(NAME, SCHEMA["function"]["description"], PARAMS, _zoom, image=lambda a: ORIGINAL, schema=SCHEMA),),
)
