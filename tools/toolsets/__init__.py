"""Named tool sets: `default` plus one per published interface. A model sees a tool set, never the registry."""

from tools.registry import UnknownToolError
from tools.toolset import ToolSet
from tools.toolsets import agentic_mme, deepeyes, default, tir_rotate, visualtoolbench, vtc_bench

TOOLSETS: dict[str, ToolSet] = {m.TOOLSET.name: m.TOOLSET for m in (default, vtc_bench, agentic_mme, visualtoolbench, deepeyes, tir_rotate)}


def get_toolset(name: str) -> ToolSet:
    try:
        return TOOLSETS[name]
    except KeyError:
        raise UnknownToolError(f"unknown tool set {name!r}; available: {', '.join(TOOLSETS)}") from None
