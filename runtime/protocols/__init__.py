"""Protocol adapters: each renders a trajectory into the prompt a model expects and parses a completion
into text, tool calls and a final answer. They are the only place that knows how a model spells a call."""

from runtime.protocols.base import Call, Observation, Parsed, Prompt, Protocol, final_text
from runtime.protocols.code import CODE_TOOL, CodeProtocol
from runtime.protocols.hermes import HermesProtocol, tools_section
from runtime.protocols.openai import OpenAIProtocol

__all__ = ["CODE_TOOL", "Call", "CodeProtocol", "HermesProtocol", "Observation", "OpenAIProtocol", "Parsed",
           "Prompt", "Protocol", "final_text", "tools_section"]
