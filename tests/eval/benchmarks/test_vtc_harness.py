"""VTC-Bench's Qwen-Agent loop, driven by scripted replies: the notes on tool results, the round without tools,
the dropped last-round replies, the nudges, and the 30-call cap, as fncall_agent.py runs them."""

import json

from eval.benchmarks.vtc_bench.harness import MAX_ROUNDS, QwenAgentLoop, protocol_texts
from runtime.episode import Episode, State, Stop
from runtime.profiles import Budgets, ModelProfile
from runtime.protocols import HermesProtocol, Observation
from runtime.trajectory import message_text
from tools.images import demo_image

TEXTS = protocol_texts()
TOOLS = [{"type": "function", "function": {"name": "opencv_flip", "description": "d", "parameters": {"type": "object"}}}]
QUESTION = "How many cats?\n\nOptions:\nA. 1\n\nB. 2\n"
PROMPT = TEXTS["user"].format(question=QUESTION, image_path="/x/image_0.png", image_size="16x16")
CALL = '<tool_call>\n{"name": "opencv_flip", "arguments": {"image": "/x/image_0.png", "param": {}}}\n</tool_call>'


def start() -> Episode:
    profile = ModelProfile("vtc", HermesProtocol(images_first=False), system_prompt=TEXTS["system_strong"],
                           budgets=Budgets(max_turns=MAX_ROUNDS, max_tool_calls=200), answer_with_calls="calls",
                           harness=QwenAgentLoop())
    return Episode.start(profile, PROMPT, [demo_image(16, 16)], tools=TOOLS)


def tool_round(episode: Episode) -> list[str]:
    """One round with a call; returns the texts of the tool message."""
    prompt = episode.prompt()
    assert prompt.messages[0]["content"][0]["text"].count("opencv_flip") == 1  # the tools are shown
    episode.submit(CALL)
    episode.observe({episode.pending[0].id: Observation("Flipped image horizontal.")})
    return [p["text"] for p in episode.trajectory.messages[-1]["content"] if p["type"] == "text"]


def test_notes_then_a_last_round_without_tools_then_retries_then_the_cap():
    episode = start()
    notes = [tool_round(episode)[1:] for _ in range(19)]
    assert notes[:14] == [[]] * 14  # 19..6 rounds left: no note
    assert notes[14:18] == [[TEXTS["remaining_note"].format(remaining=n)] for n in (5, 4, 3, 2)]
    assert notes[18] == [TEXTS["last_round_note"].format(question=QUESTION)]  # the question found again
    for attempt in range(5):  # the 20th round: no tools, and a reply without <answer> is asked again
        prompt = episode.prompt()
        assert "opencv_flip" not in prompt.messages[0]["content"][0]["text"]
        assert episode.submit(CALL) == []  # a call written without tools is not run
        assert episode.trajectory.messages[-1]["content"][0]["text"] == TEXTS["retry_format_nudge"]
    assert len(episode.trajectory.meta["dropped_replies"]) == 5
    assert not any(m["role"] == "assistant" and CALL in m["content"][0]["text"] for m in episode.trajectory.messages[-6:])
    while not episode.done:  # retries spent: the answer format is asked for, one round at a time, to the cap
        episode.prompt()
        episode.submit("I am still thinking.")
    assert episode.stop_reason is Stop.MAX_TURNS and episode.turns == MAX_ROUNDS
    nudges = [message_text(m) for m in episode.trajectory.messages if m["role"] == "user"][1:]
    assert nudges[-1] == TEXTS["final_format_nudge"]


def test_a_reply_without_call_or_answer_is_told_to_go_on():
    episode = start()
    episode.prompt()
    episode.submit("Let me look at the image.")
    assert episode.state is State.GENERATING
    assert episode.trajectory.messages[-1]["content"][0]["text"] == TEXTS["continue_nudge"]
    episode.prompt()
    episode.submit("<think>two</think>\n<answer>B</answer>")
    assert episode.stop_reason is Stop.ANSWER and episode.answer == "B"


def test_calls_beside_an_answer_still_run_and_an_answer_in_the_last_round_ends_it():
    episode = start()
    episode.prompt()
    assert episode.submit(CALL + "\n<answer>A</answer>")  # the reference runs the call and goes on
    episode.observe({episode.pending[0].id: Observation("ok")})
    for _ in range(18):
        tool_round(episode)
    episode.prompt()
    episode.submit("<answer>A</answer>")
    assert episode.stop_reason is Stop.ANSWER and episode.turns == 20
    assert "dropped_replies" not in episode.trajectory.meta


def test_the_protocol_texts_are_the_published_ones():
    texts = json.loads((protocol_texts.__globals__["PROTOCOL"]).read_text())
    for key, entry in texts.items():
        assert entry["source"]["repo"] == "https://github.com/cs-w0r1d/VTC-Bench", key
        assert entry["source"]["commit"] == "93a33a446c1a867b67dd76940a65b91b5b7d500d", key
    assert TEXTS["continue_nudge"] == "Please continue the analysis based on the tool"
    assert "{reference_trajectory}" in TEXTS["user_with_chain"] and "{reference_trajectory}" not in TEXTS["user"]


def test_the_cap_leaves_the_last_nudge_as_the_final_message():
    """The reference appends the nudge, then its loop ends: its answer extraction reads the nudge."""
    episode = start()
    while not episode.done:
        episode.prompt()
        episode.submit("Still looking.")
    assert episode.turns == MAX_ROUNDS and message_text(episode.trajectory.messages[-1]) in (
        TEXTS["continue_nudge"], TEXTS["final_format_nudge"], TEXTS["retry_format_nudge"])


def test_an_unreadable_call_is_text_and_a_cut_reply_does_not_end_the_item():
    episode = start()
    episode.prompt()
    assert episode.submit('<tool_call>\n{"name": "opencv_flip", "arguments": {oops}}\n</tool_call>') == []
    assert message_text(episode.trajectory.messages[-1]) == TEXTS["continue_nudge"]
    assert "oops" in message_text(episode.trajectory.messages[-2])  # the reply is kept as text
    episode.prompt()
    episode.submit("<think>I was counting and then", truncated=True)
    assert episode.state is State.GENERATING and message_text(episode.trajectory.messages[-1]) == TEXTS["continue_nudge"]


def test_rendering_a_prompt_twice_does_not_spend_a_round():
    episode = start()
    episode.prompt()
    episode.prompt()
    assert episode.harness_state["qwen_agent"]["left"] == 19
