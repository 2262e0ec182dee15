"""TIR-Bench's function-calling study (paper section 4.4, appendix D): the rotation-game items, solved with a
predefined `rotate(degree)` function (track `function`) or with model-written code (track `code`), under
three prompts: `plain` (the question alone), `hint` (a hint to call the function or write code) and
`options` (try each degree of the options). After every call the harness adds the variant's return prompt;
the episode ends when the model answers without a call. Table 3 reports the mean number of calls per problem.

The prompts are protocol data (`prompts/function_calling.json`, from the paper's appendix D; the repository
does not publish them, nor the function's definition: `tools/toolsets/tir_rotate.py` reconstructs it).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from runtime.harness import Harness
from runtime.profiles import QWEN_STOP, Budgets, ModelProfile, get_profile
from runtime.protocols import CodeProtocol, HermesProtocol

PROMPTS = Path(__file__).parent / "prompts" / "function_calling.json"
TRACKS = ("function", "code")
VARIANTS = ("plain", "hint", "options")
BUDGETS = Budgets(max_turns=16, max_tool_calls=16)  # the paper calls "until the model produces a final answer"


def prompts(track: str, variant: str) -> dict:
    """The variant's `question_suffix` (appended to the item's prompt) and `return_prompt` (after each call)."""
    if track not in TRACKS:
        raise ValueError(f"unknown track {track!r} for the function-calling study; use one of {TRACKS}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown prompt variant {variant!r} for the function-calling study; use one of {VARIANTS}")
    return json.loads(PROMPTS.read_text(encoding="utf-8"))["prompts"][track][variant]


class ReturnPrompt(Harness):
    """Appends the variant's return prompt to every call's result."""

    def __init__(self, text: str):
        self.text = text

    def after_tools(self, episode) -> tuple[str, bool]:
        return self.text, False


def study_profile(profile: ModelProfile, track: str, variant: str) -> ModelProfile:
    """The model's profile for one cell of Table 3: the rotate function (tir_rotate) through the model's own
    call format, or code run in the sandbox (the model's code tool; PyVision's conventions for models without
    one)."""
    texts = prompts(track, variant)
    if track == "function":  # the rotate function alone, in the model's own call format (no tool of its own)
        protocol = profile.protocol.plain() if isinstance(profile.protocol, HermesProtocol) else profile.protocol
        if isinstance(protocol, CodeProtocol):  # a code-writing model calls the function as Hermes-served models do
            protocol = HermesProtocol(stop=QWEN_STOP)
        studied = replace(profile, protocol=protocol, system_prompt=None, toolset="tir_rotate", code_tool=None)
    else:
        studied = profile if profile.code_tool else get_profile("pyvision")
    return replace(studied, question_suffix=texts["question_suffix"], budgets=BUDGETS,
                   harness=ReturnPrompt(texts["return_prompt"]))
