"""Agentic-MME's suite without a model: the loader (bad rows), the runners' prompts word for word, and the runners'
loop rules driven by scripted replies (answer and action in one turn, empty replies, the call budget, the last
rounds), the tool replies and how the model sees them, the search tools on replayed answers."""

import json
from pathlib import Path

import numpy as np
import pytest

from eval.benchmarks.agentic_mme import (MAX_ROUNDS, MAX_TOOL_CALLS, SKIPPED_CALL, AgenticMme, gen_code,
                                         image_sha256, runner_texts, scoring, search_schemas)
from eval.benchmarks.agentic_mme import data as amme_data
from eval.benchmarks.agentic_mme.fixture import IMAGES, TASKS, write_fixture
from runtime.profiles import AMME_GEN_SYSTEM, ModelProfile
from runtime.protocols import HermesProtocol
from runtime.trajectory import message_text
from runtime.web import UNAVAILABLE_MARK, Web
from tools.toolset import ToolSet

TEXTS = runner_texts()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    folder = write_fixture(tmp_path_factory.mktemp("amme"))
    tasks, skipped, _, _ = amme_data.load(str(folder))
    return folder, tasks, skipped


def suite(dataset, track: str) -> AgenticMme:
    folder, tasks, skipped = dataset
    return AgenticMme(tasks, skipped, "fixture", "official", None, track, Web("replay", [folder / "web_replay.jsonl"]))


def start(dataset, track: str, task_id: str = "0001"):
    amme = suite(dataset, track)
    profile = amme.profile(ModelProfile("qwen", HermesProtocol(stop=("<|im_end|>",))))
    toolbox = amme.toolboxes(profile)(None, "tools")
    task = next(t for t in amme.tasks if t.id == task_id)
    return amme, toolbox, amme.start(toolbox, profile, task, "tools", profile.budgets)


def close(toolbox, episode) -> None:
    episode.close()
    if toolbox.sandbox is not None:
        toolbox.sandbox.close()


def call(name: str, **arguments) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


def reply(episode, toolbox, text: str) -> None:
    episode.prompt()
    episode.submit(text)
    if episode.pending:
        toolbox.run([episode])


def rendered(episode) -> list[dict]:
    return episode.protocol.render(episode.trajectory).messages


def texts_of(message: dict) -> list[str]:
    return [p["text"] for p in message["content"] if p["type"] == "text"]


def test_the_loader_reads_the_published_layout_and_skips_what_the_reference_cannot_run(dataset):
    _, tasks, skipped = dataset
    assert [t.id for t in tasks] == [f"{n:04d}" for n in TASKS]
    assert {t.category for t in tasks} == {"L1", "L2", "L3"}
    two = next(t for t in tasks if t.id == "0003")
    assert len(two.images) == 2 and np.array_equal(two.images[1], IMAGES[3][1])
    assert two.reference_calls == 3 and two.meta["search"] and two.answer == "21"
    assert next(t for t in tasks if t.id == "0006").answer == ""  # kept: the verifier counts it correct
    reasons = {s.id: s.reason for s in skipped}
    assert set(reasons) == {"0097", "0098", "0099", "extra"}
    assert "no image_0097.png" in reasons["0097"] and "not JSON" in reasons["0098"]
    assert "does not decode" in reasons["0099"] and "numeric id" in reasons["extra"]


def test_the_prompts_are_the_runners_word_for_word(dataset):
    assert AMME_GEN_SYSTEM == TEXTS["gen_system"]
    assert TEXTS["atm_system"].startswith("You are a multimodal reasoning agent with access to image manipulation")
    assert [s["function"]["name"] for s in search_schemas("gen")] == ["google_search", "google_lens_search",
                                                                      "fetch_webpage"]
    assert "image_index" in json.dumps(search_schemas("atm")) and "image_ref" in json.dumps(search_schemas("gen"))
    for track in ("atm", "gen"):
        _, toolbox, episode = start(dataset, track, "0003")
        system, user = rendered(episode)[:2]
        close(toolbox, episode)
        assert texts_of(system)[0].startswith(TEXTS[f"{track}_system"])
        assert [p["type"] for p in user["content"]] == ["image", "image", "text"]
        assert texts_of(user) == [f"[Image 0, Image 1: original inputs]\n\n{TASKS[3]['input']['prompt']}"]
        assert '"name": "google_lens_search"' in texts_of(system)[0]
        assert ('"name": "crop"' in texts_of(system)[0]) == (track == "atm")


def test_the_answer_readers_follow_the_runners():
    assert scoring.extract_answer_text("x <answer> A </answer> <answer>B</answer>") == "A"
    assert scoring.extract_answer_text("so <answer>C") == "C" and scoring.extract_answer_text("  plain  ") == "plain"
    assert scoring.extract_answer_text("<answer> </answer>") == ""  # empty: the runner asks again
    assert scoring.general_final_answer("<think>hm</think>") == "<think>hm</think>"  # no answer: the raw text
    assert scoring.general_final_answer("no tags") == "no tags"
    assert scoring.general_final_answer("<answer>5</answer>") == "5"
    assert gen_code("<code>```python\nprint(1)\n```</code><code>print(2)</code>") == "print(1)"
    assert gen_code("<code>  </code>") is None and gen_code("<code>print(1)") is None


def test_atm_runs_calls_beside_an_answer_and_shows_each_image_after_its_json(dataset):
    _, toolbox, episode = start(dataset, "atm")
    reply(episode, toolbox,
          call("crop", image_index=0, bbox_2d=[0, 0, 500, 500], label="left") + "<answer>red</answer>")
    assert not episode.done and episode.workspace[1].shape[0] > 0
    tool, image_turn = rendered(episode)[-2:]
    assert tool["content"][0]["text"].startswith("<tool_response>")
    assert [p["type"] for p in image_turn["content"]] == ["image", "text"]
    assert texts_of(image_turn)[0].startswith("[Image 1: crop")
    reply(episode, toolbox, "It is <answer>red</answer>.")
    assert episode.trajectory.meta["agentic_mme"] == {"answer": "red", "ended": "answer"}


def test_atm_tool_messages_are_the_toolsets_reply_text_and_each_new_image_gets_the_runners_line(dataset, monkeypatch):
    replies, run = [], ToolSet.run

    def recorded(toolset, name, arguments, files):
        replies.append(run(toolset, name, arguments, files))
        return replies[-1]

    monkeypatch.setattr(ToolSet, "run", recorded)
    _, toolbox, episode = start(dataset, "atm")
    reply(episode, toolbox, call("crop", image_index=0, bbox_2d=[0, 0, 500, 500], label="the left part") + "\n"
          + call("crop", image_index=9, bbox_2d=[0, 0, 500, 500]) + "\n" + call("sharpen", image_index=1) + "\n"
          + call("google_search", query="red"))
    wire = episode.protocol.wire_messages(episode.trajectory.messages)
    tools = [k for k, m in enumerate(wire) if m["role"] == "tool"]
    assert len(tools) == len(replies) == 4 and [r.error for r in replies] == [False, True, False, False]
    for k, answer in zip(tools, replies):
        assert texts_of(wire[k]) == [answer.text]  # passed through as the tool set wrote it
        if answer.error or wire[k]["name"] == "google_search":  # the runner shows no image after these
            assert k + 1 == len(wire) or wire[k + 1]["role"] != "user"
            continue
        out = json.loads(answer.text)
        label = f" - {out['label']}" if out.get("label") else ""
        assert [p["type"] for p in wire[k + 1]["content"]] == ["image", "text"]
        assert texts_of(wire[k + 1]) == [f"[Image {out['new_image_index']}: {wire[k]['name']}{label}]"]
    assert texts_of(wire[tools[0] + 1]) == ["[Image 1: crop - the left part]"]


def test_atm_empty_reply_asks_for_the_answer_without_tools(dataset):
    _, toolbox, episode = start(dataset, "atm")
    reply(episode, toolbox, "<answer></answer>")
    assert message_text(episode.trajectory.messages[-1]) == TEXTS["atm_request"].format(reason=TEXTS["reason_empty"])
    prompt = episode.prompt()
    assert '"name": "crop"' not in prompt.messages[0]["content"][0]["text"]  # the tools are gone
    episode.submit(call("crop", image_index=0, bbox_2d=[0, 0, 9, 9]))  # written without tools: text, the answer
    assert episode.done and episode.trajectory.meta["agentic_mme"]["answer"].startswith("<tool_call>")


def test_the_sixteenth_call_is_not_run_nor_shown_and_the_answer_is_asked_for(dataset):
    _, toolbox, episode = start(dataset, "atm")
    for _ in range(7):
        reply(episode, toolbox, call("grayscale", image_index=0) + "\n" + call("invert", image_index=0))
    reply(episode, toolbox, call("flip", image_index=0) + "\n" + call("sharpen", image_index=0) + "\n"
          + call("blur", image_index=0))
    tools = [m for m in episode.trajectory.messages if m["role"] == "tool"]
    request = TEXTS["atm_request"].format(reason=TEXTS["reason_budget"].format(max_tool_calls=15))
    assert len(tools) == 17 and texts_of(tools[-1]) == [f"Error: {SKIPPED_CALL}", request]
    assert episode.tool_calls == MAX_TOOL_CALLS
    wire = rendered(episode)
    assert texts_of(wire[-1]) == [request]
    assert SKIPPED_CALL not in json.dumps(wire)
    assert '"name": "crop"' not in episode.prompt().messages[0]["content"][0]["text"]


def test_atm_one_round_left_then_the_final_request_gives_the_answer(dataset):
    _, toolbox, episode = start(dataset, "atm")
    for turn in range(MAX_ROUNDS - 1):
        reply(episode, toolbox, call("sharpen", image_index=0))
    request = TEXTS["atm_request"].format(reason=TEXTS["reason_one_round"])
    assert texts_of(rendered(episode)[-1]) == [request]
    reply(episode, toolbox, "")  # the last round, empty: the runner's final request
    assert message_text(episode.trajectory.messages[-1]) == TEXTS["atm_final"]
    reply(episode, toolbox, "")
    assert episode.done and episode.turns == MAX_ROUNDS + 1
    assert episode.trajectory.meta["agentic_mme"] == {"answer": "", "ended": "final_request"}


def test_gen_code_beside_an_answer_runs_then_ends_with_that_answer(dataset):
    _, toolbox, episode = start(dataset, "gen")
    try:
        code = ("import os\nfrom PIL import Image\nim = Image.open(os.environ['ORIGINAL_IMAGE_PATH'])\n"
                "im.crop((0, 0, 8, 8)).save(os.path.join(os.environ['PROCESSED_IMAGE_SAVE_PATH'], "
                "'transformed_image_1.png'))\nprint(im.size)")
        reply(episode, toolbox, f"<code>\n```python\n{code}\n```\n</code>" + call("google_search", query="red"))
        assert [m.get("name") for m in episode.trajectory.messages if m["role"] == "tool"] == ["python"]
        turn = rendered(episode)[-1]
        assert turn["role"] == "user" and [p["type"] for p in turn["content"]] == ["image", "text"]
        assert texts_of(turn)[0] == ("[Image 1: transformed_image_1.png][Code output]\n(64, 48)\n\n"
                                     "[New images: Image 1: transformed_image_1.png]")
        assert episode.prompt().messages[2]["content"][0]["text"].count("<tool_call>") == 0  # the call is dropped
        episode.submit("<code>x = 1\nprint(undefined)</code> <answer>red</answer>")
        toolbox.run([episode])
        assert episode.done and episode.trajectory.meta["agentic_mme"] == {"answer": "red",
                                                                             "ended": "answer_after_code"}
        assert "[Code error]" in message_text(episode.trajectory.messages[-1])
    finally:
        close(toolbox, episode)


def test_gen_search_replies_are_the_recorded_context_or_the_runners_error(dataset):
    _, toolbox, episode = start(dataset, "gen", "0005")
    reply(episode, toolbox, call("google_search", query="red") + "\n" + call("google_lens_search", image_ref="original")
          + "\n" + call("fetch_webpage", url="north", max_chars=10) + "\n" + call("google_search", query="")
          + "\n" + call("google_lens_search", image_path="transformed_image_9.png") + "\n" + call("zoom"))
    replies = [message_text(m) for m in episode.trajectory.messages if m["role"] == "tool"]
    assert replies[0].startswith("[Organic]\n1. Red") and replies[1].startswith("[Lens Organic]\n1. Fixture image 5")
    assert replies[2] == "Title: nor"
    assert replies[3] == "Error: google_search requires 'query' argument"
    assert replies[4].startswith("Error: Search failed: google_lens_search is " + UNAVAILABLE_MARK)
    assert replies[5] == "Error: Unknown tool: zoom"
    close(toolbox, episode)


def test_the_lens_key_is_the_images_pixels():
    assert image_sha256(IMAGES[1][0]) == image_sha256(IMAGES[1][0].copy())
    assert image_sha256(IMAGES[1][0]) != image_sha256(IMAGES[2][0])


REFERENCE = json.loads((Path(__file__).parent / "data" / "agentic_mme_reference.json").read_text(encoding="utf-8"))


def test_the_answer_readers_match_the_reference_vectors():
    for case in REFERENCE["extraction"]:
        reply = case["reply"]
        assert scoring.extract_answer_text(reply) == case["atm_answer"], reply
        assert (gen_code(reply) or "") == case["gen_code"], reply
        assert scoring.parse_model_output_answer(reply) == case["gen_tag_answer"], reply
        assert scoring.general_final_answer(reply) == case["gen_final_answer"], reply


def test_the_final_answer_check_matches_the_reference_vectors():
    for case in REFERENCE["final_answer"]:
        verdict = scoring.check_final_answer_only({"golden_answer": case["golden_answer"]}, case["answer"])
        assert verdict["correct"] == case["correct"], case


def test_the_checkpoint_walk_matches_the_reference_vectors():
    """The reference ran these without a judge client: its google_search checkpoints fail unjudged, which is
    how eval_process reads a judge that gives no reply."""
    for case in REFERENCE["process"]:
        config = {"process_evaluation": {"checkpoints": case["checkpoints"]}}
        images = [f"transformed_image_{k}.png" for k in range(1, case["transformed"] + 1)]
        ours = scoring.eval_process(config, case["tool_use_list"], "", search_judge=lambda messages: None,
                                    visual_judge=lambda question, image: None, images=images)["checkpoint_results"]
        for cid, expected in case["results"].items():
            if expected["passed"] is None:  # the final-answer checkpoint: left out of V
                assert ours[cid] == {"axis": "V"}
            else:
                assert (ours[cid]["passed"], ours[cid]["hit_index"]) == (expected["passed"], expected["hit_index"]), \
                    (case["track"], case["config"], cid)
