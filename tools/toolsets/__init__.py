"""Named tool sets: `default` plus one per published interface. A model sees a tool set, never the registry."""

from tools.registry import UnknownToolError
from tools.toolset import ToolSet
from tools.toolsets import deepeyes, default, tir_rotate

TOOLSETS: dict[str, ToolSet] = {m.TOOLSET.name: m.TOOLSET for m in (default, deepeyes, tir_rotate)}


def get_toolset(name: str) -> ToolSet:
    try:
        return TOOLSETS[name]
    except KeyError:
        raise UnknownToolError(f"unknown tool set {name!r}; available: {', '.join(TOOLSETS)}") from None
