"""VTC-Bench's Thyme framework (how the paper ran DeepEyes and Thyme in the code track): its prompts word for word,
the reference's own loop and sandbox reproduced on scripted replies (data/vtc_thyme_framework_vectors.json, made by
scripts/reference/vtc_thyme_framework.py from cs-w0r1d/VTC-Bench@93a33a4), and the suite run end to end with the
deepeyes and thyme presets, which never see DeepEyes' zoom tool or the generic code prompt."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from eval.benchmarks.vtc_bench import thyme_framework as tf
from eval.benchmarks.vtc_bench.fixture import write_fixture
from eval.config import EvalConfig
from eval.run_vllm import evaluate, resolve
from eval.rundir import RunDir
from runtime.episode import Stop, run_episodes
from runtime.profiles import CODE_SYSTEM, DEEPEYES_SYSTEM, get_profile
from runtime.sandbox import SandboxPool
from runtime.toolbox import ToolBox
from runtime.trajectory import message_text
from tests.eval.benchmarks.helpers import ScriptedBackend

VECTORS = json.loads((Path(__file__).parent / "data" / "vtc_thyme_framework_vectors.json").read_text())
HEADER = VECTORS["header"]


def test_the_prompts_are_the_recorded_file():
    sums = (tf.PROMPT_FILE.parent / "SHA256SUMS").read_text()
    assert f"{hashlib.sha256(tf.PROMPT_FILE.read_bytes()).hexdigest()}  thyme_framework.json" in sums
    assert tf.TEXTS["reasoning_system"].startswith("You are a helpful assistant.\n\nSolve the following problem ,")
    assert "image_zoom_in_tool" not in json.dumps(tf.TEXTS)


@pytest.fixture(scope="module")
def toolbox():
    pool = SandboxPool(tf.SANDBOX_CONFIG)
    yield ToolBox(None, code_tools=[tf.THYME_SANDBOX], sandbox=pool)
    pool.close()


def _image() -> np.ndarray:
    pixels = np.zeros((90, 120, 3), np.uint8)
    pixels[10:50, 20:70] = (255, 0, 0)
    pixels[50:80, 70:110] = (0, 0, 255)
    return pixels


def _seen(prompt, temp: str, input_path: str) -> list[dict]:
    """A prompt as the vectors record requests: strings for string contents, `<image>` for image parts, the
    sandbox's folder and the input's path as placeholders."""
    def normal(value: str) -> str:
        return value.replace(temp, "{temp}").replace(input_path, "{input}")

    seen = []
    for message in prompt.messages:
        content = message["content"]
        if message["role"] in ("system", "assistant"):
            content = normal(content if isinstance(content, str) else "".join(p["text"] for p in content))
        else:
            content = [normal(p["text"]) if p["type"] == "text" else "<image>" for p in content]
        seen.append({"role": message["role"], "content": content})
    return seen


def _reference_view(request: dict) -> list[dict]:
    """A recorded request with adjacent text parts joined: Qwen's template writes them back to back."""
    def joined(parts: list[str]) -> list[str]:
        out = []
        for part in parts:
            if part != "<image>" and out and out[-1] != "<image>":
                out[-1] += part
            else:
                out.append(part)
        return out

    return [{**m, "content": m["content"] if m["role"] in ("system", "assistant") else joined(m["content"])}
            for m in request["messages"]]


@pytest.mark.parametrize("name", sorted(VECTORS["scenarios"]))
def test_the_thyme_framework_reproduces_the_reference_on_scripted_replies(name, toolbox):
    scenario = VECTORS["scenarios"][name]
    replies, requests = iter(scenario["replies"]), []
    base = get_profile("thyme")
    generations, phase = 0, "generation"
    while True:  # generate_inner: generations from the first prompt, then the simple prompt (the suite's reruns)
        paths = []

        def prompt(found):
            paths.extend(found)
            return tf.user_prompt(HEADER["question"], HEADER["options"], str(found[0]), "120x90")

        profile = tf.profile_for(base, fallback=phase == "fallback")
        question = tf.simple_prompt(HEADER["question"], HEADER["options"]) if phase == "fallback" else prompt
        episode = toolbox.start(profile, question, [_image()], budgets=profile.budgets)
        temp = str(episode.resources["sandbox"].output_dir / "tmp_img")

        def generate(prompts):
            requests.append({"stop": list(prompts[0].stop),
                             "messages": _seen(prompts[0], temp, str(paths[0]) if paths else "\0")})
            return [next(replies)]

        run_episodes([episode], generate, toolbox)
        last = episode.answer
        if episode.stop_reason is Stop.ANSWER or phase == "fallback":
            break
        generations += 1
        phase = "generation" if generations < tf.MAX_GENERATIONS else "fallback"
    assert next(replies, None) is None
    assert len(requests) == len(scenario["requests"])
    for ours, theirs in zip(requests, scenario["requests"]):
        assert ours["stop"] == theirs["stop"]
        assert ours["messages"] == _reference_view(theirs)
    if "raises" in scenario:
        assert tf.final_answer(last) is None  # the reference raises; the suite runs the item again
    else:
        assert tf.final_answer(last) == scenario["prediction"]


@pytest.mark.parametrize("text, answer", [
    ("<answer> B </answer>", "B"), ("x <|answer|>C<|/answer|>", "C"),
    ("<answer>\\boxed{\\frac{1}{2}}</answer>", "\\frac{1}{2}"),
    ("no tags", "no tags"), ("<answer>\\boxed{7</answer>", "\\boxed{7"), ("<|answer|>A<|answer|>", None)])
def test_post_processing_reads_answers_as_the_reference(text, answer):
    assert tf.final_answer(text) == answer


@pytest.fixture(scope="module")
def vtc_data(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("vtc-thyme") / "VTC-Bench")


def _run(preset: str, data, out, backend, **settings):
    config = resolve(EvalConfig(suite="vtc_bench", data_dir=str(data), model="scripted", preset=preset, tools="on",
                                track="code", tasks=["ocr"], judge_model="none", out=str(out), **settings))
    evaluate(config, backend=backend)
    return RunDir(out).records(), json.loads((Path(out) / "config.json").read_text())


@pytest.mark.parametrize("preset", tf.PRESETS)
def test_generations_restart_then_the_simple_prompt_answers(preset, vtc_data, tmp_path):
    backend = ScriptedBackend(["Still looking."] * tf.MAX_GENERATIONS + ["The text."])
    records, saved = _run(preset, vtc_data, tmp_path / "run", backend)
    assert [r["prediction"] for r in records] == ["The text."]
    assert len(records[0]["earlier_runs"]) == tf.MAX_GENERATIONS
    systems = [message_text(prompt.messages[0]) for prompt, _ in backend.sent]
    assert systems == [tf.TEXTS["reasoning_system"]] * tf.MAX_GENERATIONS + [tf.TEXTS["simple_system"]]
    assert [prompt.stop for prompt, _ in backend.sent][-2:] == [tf.STOP, tf.FALLBACK_STOP]
    assert saved["protocol"]["harness"] == tf.NAME
    assert all(saved[k] == v for k, v in tf.SAMPLING[preset].items()) and saved["max_pixels"] == 0


@pytest.mark.parametrize("preset", tf.PRESETS)
def test_the_presets_run_the_thyme_framework_on_the_vllm_engine(preset, tiny_engine, vtc_data, tmp_path):
    out = tmp_path / preset
    config = resolve(EvalConfig(suite="vtc_bench", data_dir=str(vtc_data), model=tiny_engine.model, preset=preset,
                                tools="both", track="code", tasks=["ocr"], max_tokens=24, max_images=4,
                                dtype="float32", judge_model="none", out=str(out)))
    evaluate(config, backend=tiny_engine)
    records = RunDir(out).records()
    tools = next(r for r in records if r["mode"] == "tools")
    first = (tools.get("earlier_runs") or [tools])[0]["trajectory"]["messages"]  # the first generation's prompt
    assert message_text(first[0]) == tf.TEXTS["reasoning_system"]
    assert message_text(first[1]).startswith("<image>\nQuestion: ")
    every = json.dumps(records)
    assert "image_zoom_in_tool" not in every and DEEPEYES_SYSTEM[:60] not in every and CODE_SYSTEM[:60] not in every
    assert json.loads((out / "config.json").read_text())["protocol"]["harness"] == tf.NAME
    shutil.rmtree(out, ignore_errors=True)


@pytest.mark.parametrize("stdout", [
    tf.RESULT_MARK + '{"error": null, "content": [["text", "cut off', tf.RESULT_MARK + '{"error": null}',
    tf.RESULT_MARK + '{"error": null, "content": [["text", 5]]}', tf.RESULT_MARK + '[1, 2]'])
def test_a_result_line_the_host_cannot_read_is_the_cells_error_not_a_crash(stdout):
    """The result line is the model's code's output too: cut by the output limit, or forged by the code itself."""
    from types import SimpleNamespace

    said = tf.describe(SimpleNamespace(stdout=f"printed\n{stdout}", timed_out=False), [])
    assert said.startswith(tf.ERROR_MARK) and "could not be read" in said
