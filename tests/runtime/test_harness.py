"""A profile's harness (a benchmark's own agent loop) at the episode's three hook points: tools hidden for a
round, a reply answered by a nudge or dropped, notes on tool results and an early stop."""

import json

from runtime.episode import Episode, State, Stop
from runtime.harness import Harness, Nudge
from runtime.profiles import Budgets, ModelProfile
from runtime.protocols import HermesProtocol, Observation
from tools.images import demo_image

TOOLS = [{"type": "function", "function": {"name": "flip", "description": "d", "parameters": {"type": "object"}}}]


def call(name, **arguments):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


class Scripted(Harness):
    """Hides the tools on the second prompt, nudges replies without calls, drops 'retry', notes 'seen'."""

    def offer_tools(self, episode):
        episode.harness_state["prompts"] = episode.harness_state.get("prompts", 0) + 1
        return episode.harness_state["prompts"] != 2

    def after_reply(self, episode, reply, has_calls):
        if reply == "retry":
            return Nudge("again", keep_reply=False)
        if not has_calls and "<answer>" not in reply:
            return Nudge("go on")
        return None

    def after_tools(self, episode):
        return "seen", episode.tool_calls >= 2


def episode(budgets=Budgets()):
    profile = ModelProfile("scripted", HermesProtocol(tools_in="system"), harness=Scripted(), budgets=budgets)
    return Episode.start(profile, "q", [demo_image(16, 16)], tools=TOOLS)


def test_hooks_shape_the_conversation():
    e = episode()
    first = e.prompt()
    assert "flip" in first.messages[0]["content"][0]["text"]  # tools shown
    assert e.submit(call("flip", direction="h"))
    e.observe({e.pending[0].id: Observation("done")})
    tool = e.trajectory.messages[-1]
    assert [p["text"] for p in tool["content"] if p["type"] == "text"] == ["done", "seen"]
    second = e.prompt()
    assert all("flip" not in m["content"][0]["text"] for m in second.messages if m["role"] == "system")
    assert e.submit(call("flip", direction="h")) == []  # no tools this round: the call is text, nudged
    assert e.state is State.GENERATING and e.trajectory.messages[-1] == {"role": "user", "content": [
        {"type": "text", "text": "go on"}]}
    e.prompt()
    assert e.submit("retry") == [] and e.trajectory.messages[-1]["content"][0]["text"] == "again"
    assert e.trajectory.meta["dropped_replies"] == ["retry"]
    assert not any(m["role"] == "assistant" and m["content"][0]["text"] == "retry" for m in e.trajectory.messages)
    e.prompt()
    e.submit(call("flip", direction="v"))
    e.observe({e.pending[0].id: Observation("done")})
    assert e.stop_reason is Stop.MAX_TURNS and e.done  # the harness ended it after the second call


def test_a_nudge_respects_the_turn_budget():
    e = episode(Budgets(max_turns=1))
    e.prompt()
    e.submit("thinking out loud")
    assert e.done and e.stop_reason is Stop.MAX_TURNS


def test_text_first_observations():
    protocol = HermesProtocol(images_first=False)
    parts = protocol.observation_parts(Observation("words", (1,)))
    assert [p["type"] for p in parts] == ["text", "image"]
    assert [p["type"] for p in HermesProtocol().observation_parts(Observation("words", (1,)))] == ["image", "text"]
