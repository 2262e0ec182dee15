"""The region a tool call named, as the runtime read it: which image of the workspace the call worked on and the
box on it, so the viewer can draw the box over that image.

The call is translated exactly as the agent runtime translates it (`ToolSet.translate`, then the model profile's
box convention), so a Qwen3-VL 0-1000 box and a DeepEyes pixel box on the original land where the tool cut; a tool
that runs a benchmark's own code (Agentic-MME's crop) is read from the box its reply reports. The tool set is found
from the schemas the trajectory shows the model; a call that names no region, a code cell, or a tool set the
trajectory does not identify has none.
"""

from __future__ import annotations

import json

from runtime.profiles import PROFILES
from tools.ops.geometry import crop_box
from tools.registry import bind_args, get_op
from tools.toolset import ToolSet
from tools.toolsets import TOOLSETS

_SCHEMAS: dict[str, dict[str, str]] = {}  # tool set -> tool name -> its schema as JSON text
_FOUND: dict[tuple, ToolSet | None] = {}  # (name, description) of each shown tool -> its tool set


def toolset_of(schemas: list[dict]) -> ToolSet | None:
    """The tool set whose schemas the trajectory shows (every shown tool identical), or None. A run shows the same
    schemas in every episode: they are compared once per distinct list."""
    if not schemas or not all(isinstance(s, dict) and isinstance(s.get("function"), dict) for s in schemas):
        return None
    key = tuple((str(s["function"].get("name")), str(s["function"].get("description"))) for s in schemas)
    if key not in _FOUND:
        _FOUND[key] = _match(schemas)
    return _FOUND[key]


def _match(schemas: list[dict]) -> ToolSet | None:
    shown = {s["function"].get("name"): json.dumps(s, sort_keys=True) for s in schemas}
    for name, toolset in TOOLSETS.items():
        if name not in _SCHEMAS:
            _SCHEMAS[name] = {s["function"]["name"]: json.dumps(s, sort_keys=True) for s in toolset.schemas()}
        own = _SCHEMAS[name]
        if all(own.get(tool) == text for tool, text in shown.items()):
            return toolset
    return None


def reply_region(reply: str, workspace: int, image_size) -> dict | None:
    """The region a tool that runs a benchmark's own code reports in its reply: Agentic-MME's crop answers with
    `source_image_index` and `bbox_absolute` (pixels), the box it cut."""
    if '"bbox_absolute"' not in reply:  # most replies: no need to parse them
        return None
    try:
        fields, _ = json.JSONDecoder().raw_decode(reply.strip())  # a harness note may follow the reply
        index, box = fields["source_image_index"], fields["bbox_absolute"]
        x1, y1, x2, y2 = (float(v) for v in box)
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(index, int) or not 0 <= index < workspace:
        return None
    width, height = image_size(index)
    fractions = [max(0.0, min(1.0, v / size)) for v, size in ((x1, width), (y1, height), (x2, width), (y2, height))]
    return {"image": index, "box": [round(v, 5) for v in fractions]}


def call_region(toolset: ToolSet | None, profile: str | None, name: str, arguments: str, workspace: int,
                image_size) -> dict | None:
    """{"image": i, "box": [x1, y1, x2, y2]} (fractions of image i's width and height) for a call whose first step
    takes a box, else None. `workspace` is the number of images the episode held when the call ran;
    `image_size(i)` gives image i's (width, height)."""
    if toolset is None:
        return None
    try:
        invocation = toolset.translate(name, arguments)
        if profile in PROFILES:
            invocation = PROFILES[profile].boxes.apply(invocation)
    except Exception:  # noqa: BLE001 - a call the tool set refused named no region it worked on
        return None
    if not invocation.steps or not isinstance(invocation.image, int):
        return None
    step = invocation.steps[0]
    op = get_op(step.op)
    if "box" not in {p.name for p in op.params}:
        return None
    try:
        args = bind_args(op.name, op.params, step.args)
    except Exception:  # noqa: BLE001
        return None
    if args.get("box") is None:
        return None
    index = invocation.image if invocation.image >= 0 else workspace + invocation.image
    if not 0 <= index < workspace:
        return None
    width, height = image_size(index)
    units = args.get("units", "pixels")
    if step.op == "crop":
        try:
            x1, y1, x2, y2 = crop_box(args["box"], units, args["bounds"], args["min_side"], height, width)
        except Exception:  # noqa: BLE001 - the crop failed: the model got an error, no region was cut
            return None
    else:
        x1, y1, x2, y2 = args["box"]
        if units == "norm1000":
            x1, x2, y1, y2 = x1 * width / 1000, x2 * width / 1000, y1 * height / 1000, y2 * height / 1000
        x1, x2, y1, y2 = min(x1, x2), max(x1, x2), min(y1, y2), max(y1, y2)
    box = [max(0.0, min(1.0, v / size)) for v, size in ((x1, width), (y1, height), (x2, width), (y2, height))]
    return {"image": index, "box": [round(v, 5) for v in box]}
