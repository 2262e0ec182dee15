"""TIR-Bench's function-calling study (paper section 4.4, appendix D): the rotation-game items, solved with a
predefined `rotate(degree)` function (track `function`) or with model-written code (track `code`), under
three prompts: `plain` (the question alone), `hint` (a hint to call the function or write code) and
`options` (try each degree of the options). After every call the harness adds the variant's return prompt;
the episode ends when the model answers without a call. Table 3 reports the mean number of calls per problem,
Figure 3 the accuracy of each cell.

The study is one run: each rotation-game item once per cell (track x prompt), as a task of its own
(`<id>@<track>/<prompt>`) whose record carries its cell as `variant`, so one command gives every cell of Table 3
and Figure 3 and resumes like any run; `--track` and `--prompt_variant` keep some cells.

The prompts are protocol data (`prompts/function_calling.json`, from the paper's appendix D; the repository
does not publish them, nor the function's definition: `tools/toolsets/tir_rotate.py` reconstructs it).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from eval.benchmarks.tir_bench.scoring import listed_options
from eval.suites import Skipped, Task
from runtime.harness import Harness
from runtime.profiles import QWEN_STOP, Budgets, ModelProfile, get_profile
from runtime.protocols import CodeProtocol, HermesProtocol

PROMPTS = Path(__file__).parent / "prompts" / "function_calling.json"
TRACKS = ("function", "code")
VARIANTS = ("plain", "hint", "options")
BUDGETS = Budgets(max_turns=16, max_tool_calls=16)  # the paper calls "until the model produces a final answer"
CELL_MARK = "@"  # a study task's id: the item's id, then its cell


def cells(track: str | None, variant: str | None) -> list[tuple[str, str]]:
    """The (track, prompt) cells a run keeps: all six, or those of the track and/or prompt it names."""
    for name, known, kind, flag in ((track, TRACKS, "track", "--track"),
                                    (variant, VARIANTS, "prompt variant", "--prompt_variant")):
        if name is not None and name not in known:
            raise ValueError(f"unknown {kind} {name!r} for the function-calling study; use one of {known}, or leave "
                             f"{flag} out to run all of them")
    return [(t, v) for t in TRACKS for v in VARIANTS if track in (None, t) and variant in (None, v)]


def cell_name(track: str, variant: str) -> str:
    """A cell as records carry it (`variant`)."""
    return f"{track}/{variant}"


def record_cell(record: dict) -> str | None:
    """The cell of a study record: its `variant`, or, for a row the loader skipped (recorded with the run's
    variant), the end of its id."""
    names = {cell_name(t, v) for t in TRACKS for v in VARIANTS}
    if record.get("variant") in names:
        return record["variant"]
    cell = str(record.get("id", "")).rpartition(CELL_MARK)[2]
    return cell if cell in names else None


def study_tasks(tasks: list[Task], skipped: list[Skipped],
                chosen: list[tuple[str, str]]) -> tuple[list[Task], list[Skipped]]:
    """Each rotation-game item once per chosen cell, item by item (a --limit run sees every cell)."""
    def suffix(track, variant):
        return CELL_MARK + cell_name(track, variant)

    studied = [replace(task, id=task.id + suffix(*cell), meta={**task.meta, "cell": cell},
                       reference=_rotation_call(task) if cell[0] == "function" else ())
               for task in tasks for cell in chosen]
    return studied, [replace(row, id=row.id + suffix(*cell)) for row in skipped for cell in chosen]


def _rotation_call(task: Task) -> tuple[dict, ...]:
    """The call that restores the image (the right option's degrees), for `--backend reference` to replay; none when
    the prompt's options do not say."""
    degrees = re.match(r"\s*(-?\d+)", listed_options(task.question).get(task.answer, ""))
    return ({"name": "rotate", "arguments": {"degree": int(degrees.group(1))}},) if degrees else ()


def prompts(track: str, variant: str) -> dict:
    """The variant's `question_suffix` (appended to the item's prompt) and `return_prompt` (after each call)."""
    cells(track, variant)  # an unknown name is an error that lists the known ones
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
