"""`default`: every registered op under its own clean name and parameters."""

from tools.registry import REGISTRY, Op, Param, bind_args, function_schema
from tools.toolset import Invocation, Step, Tool, ToolSet

IMAGE_INDEX = Param(
    "image_index", "int",
    "Which image to operate on: 0 = the original, 1, 2, ... = images made by earlier tool calls in order, "
    "-1 = the latest image (default).", -1, -1000, 1000,
)


def _tool(op: Op) -> Tool:
    params = [IMAGE_INDEX]
    image_params = []
    for p in op.params:
        if p.kind == "image":
            image_params.append(p.name)
            params.append(Param(f"{p.name}_index", "int", f"{p.doc} Given as an image index (see image_index).", low=-1000, high=1000))
        else:
            params.append(p)
    params = tuple(params)

    def translate(arguments: dict) -> Invocation:
        bound = bind_args(op.name, params, arguments)
        image = bound.pop("image_index")
        extra = {name: bound.pop(f"{name}_index") for name in image_params}
        args = {k: v for k, v in bound.items() if v is not None}
        return Invocation(op.name, (Step(op.name, args),), image, extra)

    return Tool(op.name, function_schema(op.name, op.doc, params), translate)


TOOLSET = ToolSet(
    "default",
    "Every tirlab image operation with tirlab's own names and parameters.",
    tuple(_tool(op) for op in sorted(REGISTRY.values(), key=lambda op: (op.category, op.name))),
)
