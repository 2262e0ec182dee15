"""tirlab image tools: a registry of image ops (batched torch/kornia + OpenCV reference), tool sets
that expose them to models under published interfaces, and a batching executor."""

from tools import ops  # noqa: F401  (registers every op)
from tools.executor import Executor, ToolCall, ToolResult
from tools.images import DEFAULT_MAX_PIXELS, ImageTooLargeError, to_array
from tools.registry import REGISTRY, Op, Param, ToolArgumentError, ToolError, UnknownToolError, get_op

__all__ = [
    "DEFAULT_MAX_PIXELS", "Executor", "ImageTooLargeError", "Op", "Param", "REGISTRY", "ToolArgumentError",
    "ToolCall", "ToolError", "ToolResult", "UnknownToolError", "get_op", "to_array",
]
