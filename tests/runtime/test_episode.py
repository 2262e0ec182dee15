"""The episode state machine and the image-tool path of the toolbox, driven by scripted replies (the
way data_gen replays reference trajectories)."""

import json

import numpy as np
import pytest

from runtime.episode import Episode, EpisodeError, State, Stop, run_episodes
from runtime.profiles import BoxConvention, Budgets, ModelProfile, get_profile
from runtime.protocols import HermesProtocol, OpenAIProtocol
from runtime.toolbox import ToolBox
from tools.executor import Executor, ToolCall
from tools.images import demo_image

HERMES = HermesProtocol()


def call(name, **arguments):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


def drive(toolbox, episodes, replies):
    """Run episodes with a fixed list of replies each (by position)."""
    queues = {id(e): list(r) for e, r in zip(episodes, replies)}
    order = list(episodes)

    def generate(prompts):
        waiting = [e for e in order if e.state is State.GENERATING]
        assert len(waiting) == len(prompts)
        return [queues[id(e)].pop(0) for e in waiting]

    run_episodes(episodes, generate, toolbox)


def test_state_machine_and_stop_reasons():
    toolbox = ToolBox("default")
    episode = toolbox.start(HERMES, "q", [demo_image(64, 48)])
    assert episode.state is State.PENDING
    with pytest.raises(EpisodeError, match="needs generating"):
        episode.submit("hi")
    episode.prompt()
    assert episode.state is State.GENERATING
    pending = episode.submit(call("flip", direction="horizontal"))
    assert episode.state is State.RUNNING_TOOLS and len(pending) == 1
    with pytest.raises(EpisodeError, match="needs pending or generating"):
        episode.prompt()
    toolbox.run([episode])
    assert episode.state is State.GENERATING and len(episode.workspace) == 2
    np.testing.assert_array_equal(episode.workspace[1], episode.workspace[0][:, ::-1])
    episode.submit("<think>done</think><answer> left </answer>")
    assert episode.done and episode.stop_reason is Stop.ANSWER and episode.answer == "left"
    assert episode.trajectory.meta["stop_reason"] == "answer" and episode.trajectory.meta["tool_calls"] == 1


def test_reply_without_calls_is_the_final_message():
    episode = Episode.start(HERMES, "q", [demo_image(16, 16)])
    episode.prompt()
    episode.submit("<think>hmm</think> It is a cat.")
    assert episode.stop_reason is Stop.FINAL_MESSAGE and episode.answer == "It is a cat."


@pytest.mark.parametrize("budgets, replies, reason", [
    (Budgets(max_turns=2), [call("flip"), call("flip"), "<answer>x</answer>"], Stop.MAX_TURNS),
    (Budgets(max_tool_calls=2), [call("flip"), call("flip") + call("flip")], Stop.MAX_TOOL_CALLS),
    (Budgets(max_images=3), [call("flip") + call("flip") + call("flip")], Stop.MAX_IMAGES),
])
def test_budgets_end_the_episode(budgets, replies, reason):
    toolbox = ToolBox("default")
    episode = toolbox.start(HERMES, "q", [demo_image(16, 16)], budgets=budgets)
    drive(toolbox, [episode], [replies])
    assert episode.stop_reason is reason


def test_context_budget_and_truncation():
    toolbox = ToolBox("default")
    episode = toolbox.start(HERMES, "q", [demo_image(16, 16)], budgets=Budgets(max_context_tokens=100))
    drive(toolbox, [episode], [[{"completion": call("flip"), "prompt_tokens": 90, "completion_tokens": 20}]])
    assert episode.stop_reason is Stop.MAX_CONTEXT_TOKENS
    episode = toolbox.start(HERMES, "q", [demo_image(16, 16)])
    drive(toolbox, [episode], [[{"completion": "<think>and then", "truncated": True}]])
    assert episode.stop_reason is Stop.TRUNCATED


def test_answer_with_calls_policy():
    toolbox = ToolBox("default")
    wins = toolbox.start(HERMES, "q", [demo_image(16, 16)])
    runs = toolbox.start(ModelProfile("calls-first", HERMES, answer_with_calls="calls"), "q", [demo_image(16, 16)])
    both = call("flip") + "<answer>a</answer>"
    drive(toolbox, [wins, runs], [[both], [both, "<answer>b</answer>"]])
    assert (wins.answer, wins.tool_calls) == ("a", 0)
    assert (runs.answer, runs.tool_calls) == ("b", 1)


def test_errors_become_observations_and_the_episode_goes_on():
    toolbox = ToolBox("default")
    episode = toolbox.start(HERMES, "q", [demo_image(32, 32)])
    reply = ("<tool_call>\n{not json}\n</tool_call>\n" + call("no_such_tool") + call("crop", box=[1, 2])
             + call("flip", image_index=7) + call("crop", box=[0, 0, 500, 10], units="pixels"))
    drive(toolbox, [episode], [[reply, "<answer>ok</answer>"]])
    assert episode.stop_reason is Stop.ANSWER
    tool_texts = [m["content"][-1]["text"] for m in episode.trajectory.messages if m["role"] == "tool"]
    assert len(tool_texts) == 5 and all(t.startswith("Error: ") for t in tool_texts)
    assert "not valid JSON" in tool_texts[0]
    assert "no_such_tool" in tool_texts[1]
    assert "box" in tool_texts[2]
    assert "image index 7 does not exist" in tool_texts[3]
    assert "outside" in tool_texts[4] or "leaves" in tool_texts[4] or "image" in tool_texts[4]
    episode.trajectory.validate()


def test_many_episodes_batch_their_image_tools_and_match_the_executor():
    toolbox = ToolBox("default")
    images = [demo_image(40 + 8 * i, 56, seed=i) for i in range(5)]
    episodes = [toolbox.start(HERMES, "q", [im]) for im in images]
    replies = [[call("rotate", angle=30 + i) + call("blur", method="gaussian", ksize=5, image_index=0), "<answer>x</answer>"]
               for i in range(5)]
    drive(toolbox, episodes, replies)
    reference = Executor(device="opencv")
    for i, (episode, image) in enumerate(zip(episodes, images)):
        rotated, blurred = reference.run([ToolCall("rotate", image, {"angle": 30 + i}),
                                          ToolCall("blur", image, {"method": "gaussian", "ksize": 5})])
        np.testing.assert_array_equal(episode.workspace[1], rotated.image)
        np.testing.assert_array_equal(episode.workspace[2], blurred.image)


def test_box_convention_of_the_profile_reads_model_boxes():
    qwen3 = get_profile("qwen3_vl")
    toolbox = ToolBox("default")
    episode = toolbox.start(qwen3, "q", [demo_image(200, 100)])
    drive(toolbox, [episode], [[call("crop", box=[0, 0, 500, 500]), "<answer>x</answer>"]])
    assert episode.workspace[1].shape[:2] == (100, 50)  # 0-1000 relative: the top-left quarter
    pixels = ModelProfile("pixels", HERMES, BoxConvention("pixels", "clamp", 28))
    episode = toolbox.start(pixels, "q", [demo_image(200, 100)])
    drive(toolbox, [episode], [[call("crop", box=[10, 10, 12, 12]), "<answer>x</answer>"]])
    assert min(episode.workspace[1].shape[:2]) == 28


def test_path_based_tool_set_reads_and_writes_workspace_files():
    toolbox = ToolBox("vtc_bench")
    episode = toolbox.start(OpenAIProtocol(), "q", [demo_image(64, 64)])
    original = str(toolbox.image_path(episode, 0))
    episode.prompt()
    episode.submit({"content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "opencv_flip", "arguments": json.dumps(
            {"image": original, "param": {"flip_code": 1}})}},
        {"id": "b", "type": "function", "function": {"name": "opencv_flip", "arguments": json.dumps(
            {"image": "/etc/passwd", "param": {}})}},  # a file outside the episode is never opened
        {"id": "c", "type": "function", "function": {"name": "opencv_sharpen", "arguments": "{}"}},
    ]})
    toolbox.run([episode])
    flipped, missing, unknown = [m for m in episode.trajectory.messages if m["role"] == "tool"]
    saved = str(episode.scratch / "image_1.png")
    assert flipped["tool_call_id"] == "a" and flipped["content"][-1]["text"] == f"Flipped image horizontal.\n\nEdited Image Path: {saved}"
    np.testing.assert_array_equal(episode.workspace[1], episode.workspace[0][:, ::-1])
    assert missing["content"][-1]["text"] == ("Failed to run OpenCV operation 'flip':\nUnable to load image from input: /etc/passwd...\n\n"
                                              "**Action Required**: Please call this tool again with absolute image path\n"
                                              f" Set the 'image' parameter to: {original}")
    assert unknown["content"][-1]["text"] == "Tool opencv_sharpen does not exists."
    assert [m["error"] for m in (flipped, missing, unknown)] == [False, True, True]
    episode.prompt()
    episode.submit({"content": "", "tool_calls": [  # the saved file is a workspace file: the next call reads it
        {"id": "d", "type": "function", "function": {"name": "opencv_flip", "arguments": json.dumps(
            {"image": saved, "param": {"direction": "Vertical"}})}}]})
    toolbox.run([episode])
    np.testing.assert_array_equal(episode.workspace[2], episode.workspace[0][::-1, ::-1])
    episode.close()


def test_generate_failure_ends_those_episodes_with_the_error():
    toolbox = ToolBox("default")
    episodes = [toolbox.start(HERMES, "q", [demo_image(16, 16)]) for _ in range(2)]

    def broken(prompts):
        raise ConnectionError("server went away")

    run_episodes(episodes, broken, toolbox)
    assert all(e.stop_reason is Stop.ERROR and "server went away" in e.trajectory.meta["error"] for e in episodes)


def test_bad_budget_and_policy_are_rejected():
    with pytest.raises(ValueError, match="max_turns"):
        Budgets(max_turns=0)
    with pytest.raises(ValueError, match="answer_with_calls"):
        ModelProfile("x", HERMES, answer_with_calls="both")


def test_call_ids_stay_unique_when_a_server_reuses_them():
    toolbox = ToolBox("default")
    episode = toolbox.start(OpenAIProtocol(), "q", [demo_image(16, 16)])
    episode.prompt()
    pending = episode.submit({"content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "flip", "arguments": "{}"}},
        {"type": "function", "function": {"name": "nope", "arguments": "{}"}},
        {"id": "call_1", "type": "function", "function": {"name": "flip", "arguments": "{}"}}]})
    assert len({p.id for p in pending}) == 3 and pending[0].id == "call_1"
    toolbox.run([episode])
    texts = [m["content"][-1].get("text", "") for m in episode.trajectory.messages if m["role"] == "tool"]
    assert "unknown tool 'nope'" in texts[1]


def test_skipped_calls_do_not_spend_the_tool_budget():
    deepeyes = ModelProfile("one-per-turn", HermesProtocol(), budgets=Budgets(max_tool_calls=2), max_calls_per_turn=1)
    toolbox = ToolBox("default")
    episode = toolbox.start(deepeyes, "q", [demo_image(16, 16)])
    drive(toolbox, [episode], [[call("flip") * 3, call("flip"), "<answer>a</answer>"]])
    assert episode.stop_reason is Stop.ANSWER and episode.tool_calls == 2


def test_a_turn_over_the_tool_budget_runs_what_fits_and_answers_the_rest():
    toolbox = ToolBox("default")
    episode = toolbox.start(ModelProfile("b", HERMES, budgets=Budgets(max_tool_calls=2)), "q", [demo_image(16, 16)])
    drive(toolbox, [episode], [[call("flip") * 3]])
    tools = [m for m in episode.trajectory.messages if m["role"] == "tool"]
    assert episode.stop_reason is Stop.MAX_TOOL_CALLS and len(episode.workspace) == 3
    assert [m["error"] for m in tools] == [False, False, True] and "budget" in tools[2]["content"][-1]["text"]


def test_openai_unreadable_call_errors_follow_the_tool_messages():
    toolbox = ToolBox("default")
    episode = toolbox.start(OpenAIProtocol(), "q", [demo_image(16, 16)])
    episode.prompt()
    episode.submit({"content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "flip", "arguments": "{}"}}, {"id": "x"},
        {"id": "b", "type": "function", "function": {"name": "flip", "arguments": "{}"}}]})
    toolbox.run([episode])
    roles = [m["role"] for m in OpenAIProtocol().render(episode.trajectory).messages]
    assert roles == ["user", "assistant", "tool", "tool", "user"]


def test_draw_boxes_follow_the_profile_units_too():
    toolbox = ToolBox("default")
    episode = toolbox.start(get_profile("qwen3_vl"), "q", [np.zeros((100, 200, 3), np.uint8)])
    drive(toolbox, [episode], [[call("draw_box", box=[0, 0, 500, 500], thickness=-1), "<answer>x</answer>"]])
    painted = episode.workspace[1].any(axis=2)
    assert painted[:50, :100].all() and not painted[60:, 110:].any()


def test_garbled_replies_fail_only_their_episode():
    toolbox = ToolBox("default")
    good, bad = (toolbox.start(HERMES, "q", [demo_image(16, 16)]) for _ in range(2))
    drive(toolbox, [good, bad], [["<answer>a</answer>"], [None]])
    assert good.stop_reason is Stop.ANSWER and bad.stop_reason is Stop.FINAL_MESSAGE and bad.answer == ""


def test_tool_images_past_the_episodes_image_memory_are_refused_and_recorded():
    from runtime.episode import ImageBudgetError

    episode = Episode.start(HERMES, "q", [demo_image(1000, 1000)], budgets=Budgets(max_image_mb=1))
    assert episode.image_bytes_left == 1 << 20  # the task's own images are not the tools'
    episode.add_image(np.zeros((500, 500, 3), np.uint8))
    with pytest.raises(ImageBudgetError, match=r"^Not shown: the zoom result \(its 0.5 MB of pixels are over"):
        episode.add_image(np.zeros((400, 400, 3), np.uint8), "the zoom result")
    assert len(episode.workspace) == 2 and episode.image_bytes_left == (1 << 20) - 500 * 500 * 3
    assert episode.trajectory.meta["refused_images"] == [
        "Not shown: the zoom result (its 0.5 MB of pixels are over the 0.3 MB of images this episode may still "
        "hold (at most 1 MB in all))"]
