"""A preset never replaces a benchmark's tools: the first prompt of every preset x suite x track offers exactly the
tools the suite's protocol gives that cell, in the model's own call format, and nothing of the preset's own (no
DeepEyes zoom tool, no generic code prompt), except on TIR-Bench's main table, whose paper let each tool-using model
use its own tools (and offers no tool set of its own)."""

from __future__ import annotations

import json
import re

import pytest

from eval.config import EvalConfig
from eval.presets import PRESETS
from eval.run_vllm import resolve
from eval.suites import load_suite
from runtime.profiles import CODE_SYSTEM, DEEPEYES_SYSTEM, DEEPEYES_TURN
from runtime.protocols.base import reply_text

CELLS = {  # (suite, settings): what the cell's protocol offers
    "tir_bench": {},
    "tir_bench/function": {"study": "function_calling", "track": "function"},
    "tir_bench/code": {"study": "function_calling", "track": "code"},
    "vtc_bench/interface": {"track": "interface"},
    "vtc_bench/code": {"track": "code"},
    "visualtoolbench": {},
    "agentic_mme/atm": {"track": "atm"},
    "agentic_mme/gen": {"track": "gen"},
}
DEEPEYES_TEXTS = ("image_zoom_in_tool", DEEPEYES_SYSTEM[:200], DEEPEYES_TURN.strip())
# cells whose paper ran these presets in the model's own framework: its prompt describes the tools in its own words
# (Agentic-MME's local runners, VTC-Bench's Thyme framework); their tests check that prompt against the reference
NATIVE = {(cell, preset) for cell in ("agentic_mme/atm", "agentic_mme/gen", "vtc_bench/code")
          for preset in ("deepeyes", "thyme")}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from eval.benchmarks.agentic_mme.fixture import write_fixture as amme
    from eval.benchmarks.tir_bench.fixture import write_fixture as tir
    from eval.benchmarks.visualtoolbench.fixture import write_fixture as vtb
    from eval.benchmarks.vtc_bench.fixture import write_fixture as vtc

    root = tmp_path_factory.mktemp("benchmarks")
    return {"tir_bench": tir(root / "tir"), "vtc_bench": vtc(root / "vtc"), "visualtoolbench": vtb(root / "vtb"),
            "agentic_mme": amme(root / "amme")}


def first_prompt(data, cell: str, preset: str, tmp_path):
    suite_name = cell.split("/")[0]
    config = resolve(EvalConfig(suite=suite_name, data_dir=str(data[suite_name]), model="some/model", preset=preset,
                                backend="reference", judge_model="none", out=str(tmp_path / "run"), **CELLS[cell]))
    suite = load_suite(config)
    profile = suite.profile(PRESETS[preset].profile)
    boxes = suite.toolboxes(profile)
    task = suite.tasks[0]
    try:
        episode = suite.start(boxes(task, "tools"), profile, task, "tools", profile.budgets)
        try:
            return episode.prompt(), [schema["function"]["name"] for schema in episode.trajectory.tools]
        finally:
            episode.close()
    finally:
        boxes.close()


def offered(prompt) -> list[str]:
    """The tool names the model is shown: the request's tools, else the <tools> list in the prompt's text."""
    if prompt.tools:
        return [tool["function"]["name"] for tool in prompt.tools]
    text = "\n".join(_texts(prompt))
    listed = re.search(r"<tools>\n(.*?)\n</tools>", text, re.S)
    return [json.loads(line)["function"]["name"] for line in listed.group(1).splitlines()] if listed else []


def _texts(prompt) -> list[str]:
    return [part["text"] if isinstance(part, dict) else reply_text(part)
            for message in prompt.messages
            for part in (message["content"] if isinstance(message["content"], list) else [{"text": message["content"]}])
            if not isinstance(part, dict) or "text" in part]


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_a_preset_sees_exactly_the_suites_tools(data, cell, preset, tmp_path):
    prompt, episode_tools = first_prompt(data, cell, preset, tmp_path)
    shown = offered(prompt)
    if (cell, preset) in NATIVE:
        assert shown == [] and "image_zoom_in_tool" not in episode_tools  # no Hermes tool list of its own
        episode_tools = sorted(episode_tools)
        assert episode_tools == sorted(first_prompt(data, cell, "qwen2.5-vl", tmp_path)[1]) or not episode_tools
    else:
        assert shown == episode_tools, (f"{cell} x {preset}: the prompt lists {shown}, "
                                        f"the episode offers {episode_tools}")
    text = "\n".join(_texts(prompt))
    own_tools = cell == "tir_bench"  # TIR-Bench's main table: the model's own tools (it has none of its own)
    if not (own_tools and preset == "deepeyes"):
        assert not any(fragment in text for fragment in DEEPEYES_TEXTS), f"{cell} x {preset}: DeepEyes' own prompt"
        assert "image_zoom_in_tool" not in shown
    # the study's code track: the paper publishes its prompts, not its code conventions (tirlab's, documented)
    if not (own_tools and preset == "thyme") and cell != "tir_bench/code":
        assert CODE_SYSTEM not in text, f"{cell} x {preset}: the generic code prompt"
    if cell == "tir_bench/function":
        assert shown == ["rotate"]
    if cell in ("tir_bench/code",) or (own_tools and preset == "thyme"):
        assert shown == []  # code in the reply, no function tools
