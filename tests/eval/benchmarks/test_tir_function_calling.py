"""TIR-Bench's function-calling study (section 4.4): the variant's prompt after the question, the rotate function
of the original image, the return prompt after every call, and an answer without a call ends the episode."""

import json

import numpy as np
import pytest

from eval.benchmarks.tir_bench.function_calling import VARIANTS, prompts, study_profile
from runtime.episode import Stop, run_episodes
from runtime.profiles import get_profile
from runtime.toolbox import ToolBox
from runtime.trajectory import message_text
from tools.images import demo_image


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_function_track_rotates_the_original_and_returns_the_variants_prompt(variant):
    profile = study_profile(get_profile("qwen2_5_vl"), "function", variant)
    texts = prompts("function", variant)
    toolbox = ToolBox(profile.toolset)
    image = demo_image(40, 24)
    episode = toolbox.start(profile, "How many degrees?\nA. 90\nB. 180", [image])
    call = {"name": "rotate", "arguments": {"degree": 90}}
    replies = [f"<tool_call>\n{json.dumps(call)}\n</tool_call>"] * 2 + ["B"]
    run_episodes([episode], lambda prompts: [replies.pop(0) for _ in prompts], toolbox)
    messages = episode.trajectory.messages
    assert message_text(next(m for m in messages if m["role"] == "user")).endswith(texts["question_suffix"] or "B. 180")
    results = [m for m in messages if m["role"] == "tool"]
    assert len(results) == 2 and all(message_text(m).endswith(texts["return_prompt"]) for m in results)
    np.testing.assert_array_equal(episode.workspace[2], np.rot90(image, -1))  # each call rotates the original
    assert episode.stop_reason is Stop.FINAL_MESSAGE and episode.answer == "B"


def test_the_code_track_uses_the_models_code_tool_or_pyvisions():
    assert study_profile(get_profile("qwen2_5_vl"), "code", "hint").code_tool == "pyvision"
    assert study_profile(get_profile("thyme"), "code", "hint").code_tool == "thyme"
    with pytest.raises(ValueError, match="unknown prompt variant 'loud'"):
        prompts("code", "loud")
