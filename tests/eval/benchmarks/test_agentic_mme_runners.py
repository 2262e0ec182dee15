"""Agentic-MME's local-model runners (Thyme, DeepEyes; Atm and Gen; eval/benchmarks/agentic_mme/runners.py) against
reference vectors made by running the benchmark's own runners (scripts/reference/agentic_mme_runners.py): their
readers of a reply, their code cleaning, and whole episodes, every request as the runner's wrapper hands it to the
chat template; then the suite with those presets on the tiny model through the real vLLM CPU engine, and the other
presets' first prompts."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from eval.benchmarks.agentic_mme import IMAGE_TOOLS, AgenticMme, runners
from eval.benchmarks.agentic_mme.fixture import write_fixture
from eval.config import EvalConfig
from eval.presets import PRESETS
from eval.run_vllm import evaluate, resolve
from eval.rundir import RunDir
from runtime.profiles import DEEPEYES_SYSTEM, DEEPEYES_TURN
from tools.toolset import Reply
from tests.eval.benchmarks.helpers import ScriptedBackend

VECTORS = json.loads((Path(__file__).parent / "data" / "agentic_mme_runner_vectors.json").read_text(encoding="utf-8"))
TEXTS = runners.local_texts()
LENS = re.compile(r"Lens results for [^\"\]\\]+")
SAVE = re.compile(r"Redirecting (PIL |cv2\.imwrite )?(save )?to: \S*/(image_\d+\.png)")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRLAB_CACHE", str(tmp_path / "cache"))


def test_the_runners_prompts_are_the_ones_the_reference_sent():
    sent = set(VECTORS["system_prompts"])
    for key in ("thyme_atm_system", "deepeyes_atm_system", "thyme_gen_system", "deepeyes_gen_system"):
        assert hashlib.sha256(TEXTS[key].encode()).hexdigest() in sent, key
    assert hashlib.sha256((TEXTS["thyme_gen_early_answer"] + TEXTS["thyme_gen_system"]).encode()).hexdigest() in sent
    assert TEXTS["thyme_atm_system"] == TEXTS["deepeyes_atm_system"]  # one text under two names in the reference


@pytest.mark.parametrize("case", VECTORS["parse_tool_log"] + VECTORS["parse_tool_log_deepeyes"],
                         ids=lambda c: c["text"][:30])
def test_parse_tool_log(case):
    assert list(runners.parse_tool_log(case["text"])) == case["out"]


@pytest.mark.parametrize("case", VECTORS["parse_model_output"], ids=lambda c: c["text"][:30])
def test_parse_model_output(case):
    assert list(runners.parse_model_output(case["text"])) == case["out"]


def test_tool_requests_and_placeholders():
    for case in VECTORS["normalize_tool_request"]:
        assert list(runners.normalize_tool_request(case["entry"])) == case["out"]
    env = {"LOCAL_INPUT_IMAGE_PATH": "/run/cur.png", "PROCESSED_IMAGE_SAVE_PATH": "/run/tool_images"}
    for case in VECTORS["expand_placeholders"]:
        assert runners.expand_placeholders(case["value"], env) == case["out"]


@pytest.mark.parametrize("runner", runners.RUNNERS)
def test_clean_code(runner):
    for case in VECTORS[f"clean_{runner}_code"]:
        assert runners.clean_code(runner, case["code"], case["turn"]) == case["out"]


class Web:
    """The search answers the vectors' generator gave the reference (its network functions replaced)."""

    def answer(self, tool, key, live=None):
        if tool == "google_search":
            return Reply(f"Search results for: {key['query']}"), ""
        if tool == "fetch_webpage":
            return Reply(f"Page text of {key['url']} " + "x" * 40), ""
        return Reply("Lens results for *"), ""


def _dataset(root: Path, case) -> Path:
    (root / "json").mkdir(parents=True)
    (root / "images").mkdir()
    for k, (width, height) in enumerate(case["sizes"]):
        picture = np.zeros((height, width, 3), np.uint8)
        picture[: height // 2] = (200, 30, 30)
        picture[height // 2:, : width // 3] = (20, 160, 40)
        name = "image_0001.png" if len(case["sizes"]) == 1 else f"image_0001_{k + 1}.png"
        Image.fromarray(picture).save(root / "images" / name)
    (root / "json" / "0001.json").write_text(json.dumps(
        {"task_id": "t1", "input": {"prompt": case["prompt"]}, "golden_answer": {"value": "red"}, "meta": {"level": 1},
         "process_evaluation": {"checkpoints": [], "efficiency": {"reference_tool_calls": 1}}}))
    return root


def _portable(text: str) -> str:
    text = SAVE.sub(lambda m: f"Redirecting {m.group(1) or ''}{m.group(2) or ''}to: <out>/{m.group(3)}", text)
    text = LENS.sub("Lens results for *", text)
    if text.startswith("[Code error]"):
        return "[Code error]"  # the traceback's frames name the runner's script or our sandbox's cell
    results = re.fullmatch(r"<tool_results>(.*)</tool_results>", text, re.S)
    if results:  # the Serper response and the upload's URL are not recorded: the suite leaves them out
        listed = json.loads(results.group(1))
        for item in listed:
            for key in ("raw", "final_image_url"):
                item["output"].pop(key, None)
        text = "<tool_results>" + json.dumps(listed, ensure_ascii=False) + "</tool_results>"
    return text


def _reference_messages(request) -> list:
    shown = []
    for message in request["messages"]:
        content = message["content"]
        if message["role"] == "system":
            shown.append(("system", content["sha256"]))
            continue
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        shown.append((message["role"], _parts([("image", tuple(p["size"])) if p["type"] == "image" else
                                               ("text", p["text"]) for p in parts])))
    return shown


def _our_messages(prompt) -> list:
    shown, images = [], iter(prompt.images)
    for message in prompt.messages:
        if message["role"] == "system":
            shown.append(("system", hashlib.sha256(message["content"][0]["text"].encode()).hexdigest()))
            continue
        parts = []
        for part in message["content"]:
            if part["type"] == "image":
                image = next(images)
                parts.append(("image", (image.shape[1], image.shape[0])))
            else:
                parts.append(("text", part["text"]))
        shown.append((message["role"], _parts(parts)))
    return shown


def _parts(parts) -> tuple:
    """Adjacent texts joined (the chat template writes them back to back), then made portable."""
    joined = []
    for kind, value in parts:
        if kind == "text" and joined and joined[-1][0] == "text":
            joined[-1] = ("text", joined[-1][1] + value)
        elif kind == "image" or value:
            joined.append((kind, value))
    return tuple((kind, _portable(value) if kind == "text" else value) for kind, value in joined)


@pytest.mark.parametrize("case", VECTORS["episodes"],
                         ids=lambda c: f"{c['runner']}-{c['track']}-{len(c['replies'])}-{c['sizes'][-1][0]}")
def test_an_episode_sends_what_the_reference_runner_sends(case, tmp_path, monkeypatch):
    import runtime.web

    monkeypatch.setattr(runtime.web, "web_from_config", lambda config, shipped=(), provider=None: Web())
    data = _dataset(tmp_path / "data", case)
    backend = ScriptedBackend(case["replies"])
    run = tmp_path / "run"
    evaluate(resolve(EvalConfig(suite="agentic_mme", data_dir=str(data), model="scripted", backend="openai",
                                base_url="http://unused", preset=case["runner"], track=case["track"], tools="on",
                                judge_model="none", out=str(run))), backend=backend)
    assert not backend.replies, "every scripted reply was asked for"
    assert len(backend.sent) == case["api_calls"]
    for k, ((prompt, sampling), request) in enumerate(zip(backend.sent, case["requests"])):
        assert _our_messages(prompt) == _reference_messages(request), f"request {k}"
        assert prompt.tools in (None, [])
        assert sampling.temperature == 0.0 and not request["generate"]["do_sample"]
        assert set(request["generate"].get("stop_strings") or ()) <= set(prompt.stop)
        if k < len(backend.sent) - 1 or case["api_calls"] < 16:  # the final request: the runner's 2000 tokens
            assert sampling.max_tokens == request["generate"]["max_new_tokens"]
    record = RunDir(run).records()[0]
    assert record["prediction"] == case["answer"]
    reference_uses = [(u["tool_name"], u["raw_tool_name"]) for u in case["tool_use_list"]]
    assert [(u["tool_name"], u["raw_tool_name"]) for u in record["tool_use_list"]] == reference_uses


class Recording:
    """A backend that keeps every prompt it passes on."""

    def __init__(self, backend):
        self.backend, self.prompts, self.name = backend, [], backend.name

    def submit(self, key, prompt, sampling):
        self.prompts.append((prompt, sampling))
        self.backend.submit(key, prompt, sampling)

    def poll(self, timeout=None):
        return self.backend.poll(timeout)

    def in_flight(self):
        return self.backend.in_flight()


def _texts(prompt) -> str:
    return "\n".join(p["text"] for m in prompt.messages for p in m["content"] if p["type"] == "text") + \
        json.dumps(prompt.tools or [])


@pytest.fixture(scope="module")
def amme_data(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("amme-runners") / "Agentic-MME")


@pytest.mark.parametrize("preset", runners.RUNNERS)
@pytest.mark.parametrize("track", ("atm", "gen"))
def test_the_thyme_and_deepeyes_presets_run_their_runner_on_the_vllm_engine(preset, track, tiny_engine, amme_data,
                                                                          tmp_path):
    backend = Recording(tiny_engine)
    run = tmp_path / "run"
    evaluate(resolve(EvalConfig(suite="agentic_mme", data_dir=str(amme_data), model=tiny_engine.model, preset=preset,
                                track=track, tools="on", tasks=["L1"], max_tokens=12, dtype="float32",
                                judge_model="none", web_replay=[str(amme_data / "web_replay.jsonl")], out=str(run))),
             backend=backend)
    first = backend.prompts[0][0]
    assert first.messages[0]["content"][0]["text"] == TEXTS[f"{preset}_{track}_system"]
    assert first.tools in (None, []) and len(first.messages) == 2
    for prompt, sampling in backend.prompts:
        assert "image_zoom_in_tool" not in _texts(prompt) and DEEPEYES_TURN.strip() not in _texts(prompt)
        assert sampling.temperature == 0.0
    if preset == "thyme" and track == "gen":
        assert {"</code>", "</tool_log>"} <= set(first.stop)
    records = [r for r in RunDir(run).records() if r["stop_reason"] != "skipped"]
    assert records and all(r["stop_reason"] != "error" for r in records)
    protocol = json.loads((run / "config.json").read_text())["protocol"]
    assert protocol["harness"] == f"{preset}-runner" and f"{preset} runner" in protocol["protocol"]


@pytest.mark.parametrize("preset", ("qwen2.5-vl", "qwen3-vl", "generic", "openai"))
@pytest.mark.parametrize("track", ("atm", "gen"))
def test_other_presets_get_the_suites_tools_only(preset, track, amme_data, tmp_path):
    backend = ScriptedBackend(["<answer>red</answer>"] * 3, as_message=preset == "openai")
    evaluate(resolve(EvalConfig(suite="agentic_mme", data_dir=str(amme_data), model="scripted", backend="openai",
                                base_url="http://unused", preset=preset, track=track, tools="on", tasks=["L1"],
                                max_active=1, judge_model="none", out=str(tmp_path / "run"))), backend=backend)
    prompt = backend.sent[0][0]
    words = _texts(prompt)
    assert "image_zoom_in_tool" not in words and DEEPEYES_SYSTEM[:60] not in words
    assert "Solve the question about the image. You can write Python code" not in words
    assert prompt.messages[0]["content"][0]["text"].startswith("You are a multimodal reasoning agent")
    offered = set(re.findall(r'"name": "([a-z_]+)"', json.dumps(prompt.tools or [])) +
                  re.findall(r'"name": "([a-z_]+)"', words))
    search = {"google_search", "google_lens_search", "fetch_webpage"}
    assert offered == (search | set(IMAGE_TOOLS) if track == "atm" else search)


def test_describe_names_the_runner(amme_data):
    suite = AgenticMme.from_config(resolve(EvalConfig(suite="agentic_mme", data_dir=str(amme_data), preset="deepeyes",
                                                      model="scripted", track="gen")))
    described = suite.describe()
    assert described["harness"] == "deepeyes-runner"
    assert "run_general_script_deepeyes.py" in described["protocol"] and "12000" in described["protocol"]
    assert suite.defaults("m", "deepeyes") == {"temperature": 0.0, "max_tokens": 12000, "max_pixels": 0,
                                               "max_images": 64}
    other = AgenticMme.from_config(resolve(EvalConfig(suite="agentic_mme", data_dir=str(amme_data), preset="qwen3-vl",
                                                      model="scripted")))
    assert other.describe()["harness"] == "openai-runner"


def test_a_tool_log_entry_named_like_the_code_tool_is_an_unknown_tool_not_code():
    protocol = runners.local_profile(PRESETS["thyme"].profile, "gen").protocol
    parsed = protocol.parse('<tool_log>[{"tool_name": "python", "code": 5}]</tool_log>')
    assert [(c.name, c.arguments, c.error) for c in parsed.calls] == [("python", None, "Error: Unknown tool: python")]
