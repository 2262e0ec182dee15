"""The evaluation loop on the real vLLM CPU engine and the tiny random-weight model: complete multi-turn
episodes whose tool calls (scripted by eval/forcing.py) run through the real tools; episodes batched
across turns; no-tools mode; HF generate agreeing with vLLM; the reference policy scoring the suite."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from dataclasses import replace

import psutil
import pytest

from eval.backends import Sampling
from eval.backends.hf_generate import HFGenerateBackend
from eval.backends.reference import ReferenceBackend
from eval.backends.vllm_engine import keep_off_worker_cores, pin_threads
from eval.forcing import ForcedReplies, draw_arguments
from eval.loop import EvalLoop, toolboxes
from eval.presets import get_preset
from eval.suites import FollowUp, Task
from eval.suites.synthetic import synthetic_suite
from runtime.profiles import get_profile
from runtime.protocols import HermesProtocol, Prompt
from runtime.toolbox import ToolBox
from tools.registry import REGISTRY

PROFILE = get_preset("qwen2.5-vl").profile


@pytest.fixture(scope="module")
def tasks():
    return list(synthetic_suite(("rotated_ocr", "rotation_game"), per_task=3))


class CountingBackend:
    """The real engine, watched: how many requests are in flight at each submit, and at which turns."""

    def __init__(self, backend):
        self.backend, self.in_flight_at_submit, self.turns_in_flight = backend, [], []

    def submit(self, key, prompt, sampling):
        self.backend.submit(key, prompt, sampling)
        self.in_flight_at_submit.append(self.backend.in_flight())
        self.turns_in_flight.append(key.split(":")[0])

    def __getattr__(self, name):
        return getattr(self.backend, name)


def test_forced_tool_calls_run_real_tools_in_every_episode(tiny_engine, tasks):
    backend = CountingBackend(tiny_engine)
    loop = EvalLoop(backend, PROFILE, Sampling(max_tokens=160, temperature=1.0), toolboxes(PROFILE),
                    forced=ForcedReplies(2))
    checked = tiny_engine.prompt_tokens.checked
    finished = list(loop.run([(task, "tools") for task in tasks]))
    # every turn's prompt went in as token ids from remembered pieces, each the engine's own ids for its text
    assert tiny_engine.prompt_tokens.checked - checked == 3 * len(tasks)
    assert tiny_engine.prompt_tokens.mismatch is None
    assert sorted(f.task.id for f in finished) == sorted(t.id for t in tasks)
    for episode in finished:
        messages = episode.trajectory.messages
        calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", ())]
        tool_messages = [m for m in messages if m["role"] == "tool"]
        assert episode.stop_reason == "answer" and episode.turns == 3 and len(calls) == 2
        assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in calls]
        for call, message in zip(calls, tool_messages):
            assert call["function"]["name"] == "rotate"
            json.loads(call["function"]["arguments"])
            if message["error"]:  # a random angle out of range: the tool's error goes back to the model
                assert message["content"][-1]["text"].startswith("Error: ")
            else:  # a rotation ran: its image is in the workspace and the tool message
                assert any(part["type"] == "image" for part in message["content"])
        assert episode.prompt_tokens > 0 and episode.completion_tokens > 0
    assert sum(not m["error"] for f in finished for m in f.trajectory.messages if m["role"] == "tool") >= 2
    # continuous batching: turns of all episodes share the engine, and later turns join while others run
    assert max(backend.in_flight_at_submit) == len(tasks)
    assert len(set(backend.turns_in_flight)) == 3


def test_no_tools_mode_shows_no_tools_and_answers_in_one_turn(tiny_engine, tasks):
    loop = EvalLoop(tiny_engine, PROFILE, Sampling(max_tokens=48), toolboxes(PROFILE), forced=ForcedReplies(2))
    finished = list(loop.run([(task, "no_tools") for task in tasks[:3]]))
    for episode in finished:
        assert episode.trajectory.tools == [] and episode.turns == 1 and episode.stop_reason == "answer"
        system = episode.trajectory.messages[0]
        assert system["role"] != "system" or "<tools>" not in system["content"][0]["text"]


def test_a_prompt_over_the_context_ends_that_episode_only(tiny_engine, tasks):
    long_task = Task("long", "word " * 40000, tasks[0].images, "x", "text_match")
    loop = EvalLoop(tiny_engine, PROFILE, Sampling(max_tokens=16), toolboxes(PROFILE))
    finished = {f.task.id: f for f in loop.run([(long_task, "tools"), (tasks[0], "tools")])}
    assert finished["long"].stop_reason == "error" and "vLLM refused" in finished["long"].error
    assert finished[tasks[0].id].error is None


def test_a_scripted_reply_is_the_script_with_the_models_own_free_tokens(tiny_engine):
    script = ("<think>", 12, "</think>\n<answer>", 3, "</answer>")
    prompt = Prompt([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], [])
    tiny_engine.submit("scripted", prompt, Sampling(max_tokens=64, temperature=1.0, script=script))
    ((_, completion),) = tiny_engine.poll(timeout=None)
    assert completion.error is None and not completion.truncated
    assert re.fullmatch(r"<think>[^<>]+</think>\n<answer>[^<>]+</answer>", completion.reply), completion.reply
    forced = sum(len(tiny_engine.processor.tokenizer.encode(part, add_special_tokens=False))
                 for part in script if isinstance(part, str))
    assert completion.completion_tokens == forced + 12 + 3 + 1  # and the end token
    # free tokens are whole words: the text tokenizes back to as many ids, so the next turn hits the prefix cache
    assert len(tiny_engine.processor.tokenizer.encode(completion.reply)) == completion.completion_tokens - 1


def test_the_engines_scheduler_runs_off_its_workers_cores(tiny_engine):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: the worker and the scheduler share it")
    schedulers = [p for p in psutil.Process().children() if p.name().startswith("VLLM::EngineCore")]
    assert schedulers, "the tiny engine's scheduler process was not found"
    for scheduler in schedulers:
        workers = scheduler.children(recursive=True)
        worker_cores = set().union(*(worker.cpu_affinity() for worker in workers))
        assert worker_cores and not worker_cores & set(scheduler.cpu_affinity())


def test_keep_off_worker_cores_moves_this_process_and_the_scheduler_then_gives_the_cores_back():
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    # a scheduler process whose child (the worker) is bound to the first core, as vLLM's CPU worker is
    scheduler = subprocess.Popen([sys.executable, "-c", (
        "import os, subprocess, sys, time\n"
        "worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"os.sched_setaffinity(worker.pid, {{{cores[0]}}})\n"
        "print(worker.pid, flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    worker = psutil.Process(int(scheduler.stdout.readline()))
    try:
        before = keep_off_worker_cores([psutil.Process(scheduler.pid)])
        assert before == cores
        rest = set(cores[1:])
        assert all(os.sched_getaffinity(thread.id) == rest for thread in psutil.Process().threads())
        assert os.sched_getaffinity(scheduler.pid) == rest
        assert worker.cpu_affinity() == [cores[0]]
        assert keep_off_worker_cores([]) is None  # no workers: nothing moves
    finally:
        pin_threads(psutil.Process(), cores)
        worker.kill()
        scheduler.kill()
    assert sorted(os.sched_getaffinity(0)) == cores


def test_drawn_tool_calls_fit_every_tools_schema():
    """A forced call can fail on the image (a box outside it), never on the shape of its arguments."""
    for op in REGISTRY.values():
        parameters = op.schema()["function"]["parameters"]
        for seed in range(20):
            op.bind(draw_arguments(parameters, random.Random(seed)))


def test_a_drawn_call_names_the_image_every_episode_has():
    parameters = {"properties": {"image_index": {"type": "integer", "minimum": 0}, "angle": {"type": "number"}},
                  "required": ["image_index", "angle"]}
    assert {draw_arguments(parameters, random.Random(seed))["image_index"] for seed in range(20)} == {0}


def test_forced_replies_need_the_vllm_engine(tasks):
    with pytest.raises(ValueError, match="need the vLLM engine backend, not 'reference'"):
        EvalLoop(ReferenceBackend(tasks), PROFILE, Sampling(), toolboxes(PROFILE), forced=ForcedReplies(2))


def test_hf_generate_and_vllm_agree_on_greedy_replies(tiny_engine, tiny_model_dir, tasks):
    hf = HFGenerateBackend(str(tiny_model_dir), dtype="float32", batch_size=4)
    sampling = Sampling(max_tokens=24)
    replies = {}
    for name, backend in (("vllm", tiny_engine), ("hf", hf)):
        loop = EvalLoop(backend, PROFILE, sampling, toolboxes(PROFILE))
        replies[name] = {f.task.id: f.trajectory.messages[-1]["content"][0]["text"]
                         for f in loop.run([(task, "tools") for task in tasks[:4]])}
    assert replies["hf"] == replies["vllm"]


def test_follow_ups_continue_an_answered_episode():
    task = next(t for t in synthetic_suite(("rotated_ocr",), per_task=1))
    image = task.images[0][:64, :64]
    task = Task(task.id, task.question, task.images, task.answer, task.scorer, reference=task.reference,
                reference_calls=task.reference_calls, toolset=task.toolset,
                follow_ups=(FollowUp("And now this one?", (image,)), FollowUp("Sure?")))
    profile = get_profile("qwen2_5_vl")
    loop = EvalLoop(ReferenceBackend([task]), profile, Sampling(), lambda t, m: ToolBox(t.toolset))
    (finished,) = loop.run([(task, "tools")])
    users = [m for m in finished.trajectory.messages if m["role"] == "user"]
    assert [m["content"][-1]["text"] for m in users[-2:]] == ["And now this one?", "Sure?"]
    assert finished.trajectory.meta["answers"] == [task.answer, task.answer]
    assert finished.answer == task.answer and finished.stop_reason == "answer"
    assert (finished.trajectory.images[-1] == image).all()


def test_a_prompt_that_cannot_be_built_fails_its_episode_only(monkeypatch, tasks):
    from runtime.episode import Episode

    build = Episode.prompt

    def prompt(episode):
        if episode.trajectory.meta.get("task") == tasks[0].id and episode.turns == 1:
            raise ValueError("an image the model cannot be sent")
        return build(episode)

    monkeypatch.setattr(Episode, "prompt", prompt)
    loop = EvalLoop(ReferenceBackend(tasks), PROFILE, Sampling(), lambda t, m: ToolBox(t.toolset))
    finished = {f.task.id: f for f in loop.run([(task, "tools") for task in tasks])}
    assert sorted(finished) == sorted(t.id for t in tasks)
    broken = finished.pop(tasks[0].id)
    assert broken.stop_reason == "error" and "could not build the prompt: ValueError" in broken.error
    assert all(f.stop_reason == "answer" for f in finished.values())


def test_generic_profile_renders_tools_through_the_template():
    assert isinstance(get_preset("generic").profile.protocol, HermesProtocol)
    assert get_preset("generic").profile.protocol.tools_in == "template"


def test_the_engine_reports_the_stop_string_that_ended_a_reply(tiny_engine):
    """A reply stopped by `</code>` says so (the text lacks it, as servers strip it): the protocol then knows the
    block was closed. One that ends on the end-of-turn token names no stop string."""
    prompt = Prompt([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], [], stop=("</code>",))
    tiny_engine.submit("stopped", prompt, Sampling(max_tokens=64, script=("<code>print(1)</code> more",)))
    tiny_engine.submit("ended", replace(prompt, stop=()), Sampling(max_tokens=64, script=("<code>print(1)</code>",)))
    tiny_engine.submit("cut", prompt, Sampling(max_tokens=3, script=("<code>print(1)</code>",)))
    done = dict(tiny_engine.poll(timeout=None))
    while len(done) < 3:
        done.update(tiny_engine.poll(timeout=None))
    assert (done["stopped"].reply, done["stopped"].stop, done["stopped"].truncated) == ("<code>print(1)", "</code>", False)
    assert (done["ended"].reply, done["ended"].stop) == ("<code>print(1)</code>", None)
    assert done["cut"].truncated and done["cut"].stop is None


def test_hf_generate_samples_as_asked_whatever_the_checkpoints_generation_config(tiny_model_dir, tmp_path, tasks):
    """A checkpoint's generation_config.json (Qwen2.5-VL's sets top_k 1 and a repetition penalty) must not change
    how the HF backend samples: the same seeded request gives the same reply with and without one."""
    import json
    import shutil

    shipped = tmp_path / "with-generation-config"
    shutil.copytree(tiny_model_dir, shipped)
    config = json.loads((shipped / "generation_config.json").read_text())
    config.update(top_k=1, top_p=0.5, temperature=0.1, repetition_penalty=1.3, do_sample=True)
    (shipped / "generation_config.json").write_text(json.dumps(config))
    sampling = Sampling(max_tokens=16, temperature=1.0, seed=3)
    prompt = toolboxes(PROFILE)(tasks[0], "tools").start(PROFILE, tasks[0].question, tasks[0].images).prompt()
    replies = {}
    for name, model in (("plain", tiny_model_dir), ("configured", shipped)):
        backend = HFGenerateBackend(str(model), dtype="float32")
        backend.submit("k", prompt, sampling)
        replies[name] = backend.poll()[0][1].reply
    assert replies["configured"] == replies["plain"] and len(replies["plain"].split()) > 1
