"""OpenAIHTTPBackend against a real vLLM OpenAI server on 127.0.0.1 samples as the in-process engine
(VLLMEngineBackend) does: the same prompts and `Sampling` give the same replies, token for token, and the server
logs the same SamplingParams the engine was given.

What the test guards against (vLLM 0.32's source): the server takes every sampling field a request leaves out
from the checkpoint's `generation_config.json` (`--generation-config auto`, the default).
`ModelConfig.get_diff_sampling_param` (vllm/config/model.py) reads repetition_penalty, presence_penalty,
frequency_penalty, temperature, top_k, top_p, min_p and max_new_tokens from it (and from
`--override-generation-config`); `ChatCompletionRequest.to_sampling_params`
(vllm/entrypoints/openai/chat_completion/protocol.py) takes each of the first seven from there when the request
has none, and `get_max_tokens` (vllm/entrypoints/serve/utils/api_utils.py) max_tokens. The seed never comes from
it. The in-process engine samples with the SamplingParams it is given. The checkpoint served here (the shipped
toy agentic model, which calls `rotate` and answers) gets a generation_config.json with every one of those fields
away from vLLM's defaults; presence and frequency penalty go through `--override-generation-config`, as
transformers' GenerationConfig drops them from the file. `test_fields_left_out_come_from_generation_config` shows
the test would see a field the backend left out.

Sampling deterministically on vLLM's CPU build, from its source:
- greedy requests draw nothing (`Sampler.sample` returns the argmax before any draw when every request is greedy);
- a sampling step draws one seed per batch row from the worker's global torch generator, or, for a request with
  its own seed, from that request's generator (`TopKTopPSampler.forward_cpu`). The worker reseeds the global
  generator with the engine's `--seed` after start-up's warm-up (`CPUWorker.compile_or_warm_up_model`).
So, without per-request seeds, replies depend on everything sampled since start: both engines get the same
seed and scheduler limits, and the same requests, one at a time, in the same order (`PLAN`). With per-request
seeds a reply depends on its seed only; but a seeded request whose prefill is split in chunks kills the CPU
engine ("CPU Generator does not use offset": the model runner rewinds the request generator's offset for the
token it discards after a partial prefill), which is why VLLMEngineBackend drops per-request seeds on CPU. Here
every prompt is prefilled in one step (one request at a time, max_num_batched_tokens = max_model_len), so the
test turns them back on for the engine's seeded requests. Against a CPU server, whose scheduler chunks long or
concurrent prefills, seeded sampling is not safe: a seeded request that gets chunked ends the server.

Two vLLM start-ups (about a minute each on two cores), one after the other: the engine runs `PLAN` and closes,
then the server starts and runs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import httpx
import psutil
import pytest

from data_gen.tasks import rotated_ocr
from eval.backends import Sampling
from eval.backends.openai_http import OpenAIHTTPBackend
from eval.config import TOY_CHECKPOINTS
from eval.suites.synthetic import SEED_OFFSET
from runtime.profiles import PROFILES
from runtime.protocols.hermes import call_block
from runtime.toolbox import ToolBox
from tests.eval.conftest import free_port, wait_until_serving

pytest.importorskip("vllm")

SERVER_START_S = 300  # about 60 s on two shared cores
ENGINE = dict(max_model_len=4096, dtype="float32", seed=0, max_num_seqs=4, max_num_batched_tokens=4096)
LIMIT_IMAGES = 4
# The checkpoint's sampling settings, all away from vLLM's defaults; a field the backend leaves out gets its value
GENERATION_CONFIG = dict(do_sample=True, temperature=0.3, top_k=1, top_p=0.5, min_p=0.5, repetition_penalty=1.3,
                         max_new_tokens=5)
OVERRIDES = dict(presence_penalty=1.5, frequency_penalty=1.5)  # generation_config.json cannot carry these
COMPARED = ("n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p", "top_k",
            "min_p", "seed", "stop", "max_tokens")  # the SamplingParams fields both sides must agree on
GREEDY = Sampling(max_tokens=48)
SAMPLED = Sampling(max_tokens=48, temperature=1.0)
TASKS = 3  # held-out rotated-OCR tasks, each as two prompts: its first turn (1 image) and its second (2 images)
PROMPTS = 2 * TASKS
# (kind, prompt index, sampling), run in this order, one at a time, on both sides
PLAN = ([("greedy", i, GREEDY) for i in range(PROMPTS)]
        + [("sampled", i, SAMPLED) for _ in range(2) for i in range(PROMPTS)]
        + [("seeded", i, replace(SAMPLED, seed=seed)) for seed in (11, 12, 13) for i in range(PROMPTS)])


def prompts() -> list:
    """Each held-out task's first turn, and its second after the reference `rotate` call ran."""
    profile = PROFILES["qwen2_5_vl"]
    made = []
    for k in range(TASKS):
        sample = rotated_ocr.generate(SEED_OFFSET + k, "medium", angles="quarter", render="aligned")
        toolbox = ToolBox(sample.toolset)
        episode = toolbox.start(profile, sample.question, [sample.image])
        try:
            made.append(episode.prompt())
            (call,) = sample.calls
            episode.submit(call_block(call["name"], json.dumps(call["arguments"])))
            toolbox.run([episode])
            made.append(episode.prompt())
        finally:
            episode.close()
    return made


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("vllm_server") / "agentic"
    shutil.copytree(TOY_CHECKPOINTS / "agentic", folder)
    config = folder / "generation_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), **GENERATION_CONFIG}, indent=2))
    return folder


@pytest.fixture(scope="module")
def module_prompts() -> list:
    return prompts()


@pytest.fixture(scope="module")
def engine_run(model_dir, module_prompts):
    """`PLAN` through VLLMEngineBackend: [(completion, the SamplingParams it was given, as vLLM prints them)]."""
    from eval.backends.vllm_engine import VLLMEngineBackend, pin_threads

    cores = sorted(os.sched_getaffinity(0))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
        backend = VLLMEngineBackend(str(model_dir), limit_images=LIMIT_IMAGES, **ENGINE)
    try:
        given = []
        add_request = backend.engine.add_request

        def recording(key, request, params, *args, **kwargs):
            given.append(repr(params))  # before the engine adds its own stop tokens, as the server logs it
            return add_request(key, request, params, *args, **kwargs)

        backend.engine.add_request = recording
        assert hasattr(backend, "request_seeds")  # dropped on CPU; PLAN's prompts are prefilled in one step
        results = []
        for n, (kind, index, sampling) in enumerate(PLAN):
            backend.request_seeds = kind == "seeded"
            results.append(_one(backend, f"{n}", module_prompts[index], sampling))
        return list(zip(results, given, strict=True))
    finally:
        backend.close()
        pin_threads(psutil.Process(), cores)  # the engine moved this process off its worker's cores


@pytest.fixture(scope="module")
def server(model_dir, engine_run, tmp_path_factory):
    """A vLLM OpenAI server of the same checkpoint and engine settings, started once the engine is closed;
    yields (base_url, log path). Its processes are ended at teardown, whatever happened."""
    port = free_port()
    log = tmp_path_factory.mktemp("vllm_server_log") / "server.log"
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
               "--host", "127.0.0.1", "--port", str(port), "--max-model-len", str(ENGINE["max_model_len"]),
               "--dtype", ENGINE["dtype"], "--seed", str(ENGINE["seed"]), "--max-num-seqs", str(ENGINE["max_num_seqs"]),
               "--max-num-batched-tokens", str(ENGINE["max_num_batched_tokens"]), "--enable-prefix-caching",
               "--limit-mm-per-prompt", json.dumps({"image": LIMIT_IMAGES, "video": 0}),
               "--generation-config", "auto", "--override-generation-config", json.dumps(OVERRIDES),
               "--enable-log-requests"]
    # INFO: the request log the test reads (importing TRL anywhere in the session sets VLLM_LOGGING_LEVEL=ERROR)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "INFO"}
    with open(log, "wb") as out:  # (`vllm serve` fails on the CPU build: no `vllm` distribution for --version)
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    seen: dict[int, psutil.Process] = {}
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_serving("the vLLM server", process, base_url, log, SERVER_START_S,
                           every_poll=lambda: _below(process, seen))
        _below(process, seen)
        yield base_url, log
    finally:
        _below(process, seen)
        process.send_signal(signal.SIGTERM)  # it shuts its engine processes down
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for child in seen.values():
            try:
                child.wait(timeout=10)
            except psutil.TimeoutExpired:
                child.kill()
            except psutil.Error:  # gone already
                pass


@pytest.fixture(scope="module")
def server_run(server, model_dir, module_prompts):
    """`PLAN` through OpenAIHTTPBackend(api="vllm"): [(completion, the SamplingParams the server logged for it)]."""
    base_url, log = server
    logged_before = len(_logged_params(log))
    with OpenAIHTTPBackend(base_url, str(model_dir), concurrency=1, text_replies=True, api="vllm") as backend:
        results = [_one(backend, f"{n}", module_prompts[index], sampling)
                   for n, (kind, index, sampling) in enumerate(PLAN)]
    logged = _logged_params(log)[logged_before:]
    return list(zip(results, logged, strict=True))


def _one(backend, key: str, prompt, sampling: Sampling):
    backend.submit(key, prompt, sampling)
    ((done, completion),) = backend.poll(timeout=None)
    assert done == key and completion.error is None, completion.error
    return completion


def _pairs(engine_run, server_run, kind: str):
    return [(prompt_index, engine, server) for (k, prompt_index, _), engine, server in zip(PLAN, engine_run, server_run)
            if k == kind]


@pytest.mark.parametrize("kind", ["greedy", "sampled", "seeded"])
def test_the_server_replies_as_the_engine_does(engine_run, server_run, kind):
    """Greedy, sampled with the engine's seed (no per-request seed) and sampled with a seed per request: the
    same text, the same prompt (its token count: the chat template and the images were read alike) and the same
    number of tokens generated."""
    pairs = _pairs(engine_run, server_run, kind)
    for index, (engine, _), (served, _) in pairs:
        assert served.reply == engine.reply, (kind, index)
        assert (served.prompt_tokens, served.completion_tokens, served.truncated, served.stop) == (
            engine.prompt_tokens, engine.completion_tokens, engine.truncated, engine.stop), (kind, index)
    replies = [engine.reply for _, (engine, _), _ in pairs]
    if kind == "greedy":  # the toy model is a real one: it calls rotate on a first turn and answers after it
        assert all(r.startswith("<tool_call>") for r in replies[0::2]), replies
        assert all(r.startswith("<answer>") for r in replies[1::2]), replies
    else:  # it did sample: some replies are not the greedy ones
        greedy = {i: engine.reply for i, (engine, _), _ in _pairs(engine_run, server_run, "greedy")}
        assert any(engine.reply != greedy[i] for i, (engine, _), _ in pairs), replies


def test_the_server_samples_with_what_the_engine_is_given(engine_run, server_run):
    """The SamplingParams the server logs for each request (`--enable-log-requests`) are the engine's: no field
    from the checkpoint's generation_config.json."""
    for (kind, index, sampling), (_, given), (_, logged) in zip(PLAN, engine_run, server_run):
        engine, served = _fields(given), _fields(logged)
        assert {k: served[k] for k in COMPARED} == {k: engine[k] for k in COMPARED}, (kind, index)
    greedy, seeded = _fields(server_run[0][1]), _fields(server_run[-1][1])
    assert (greedy["temperature"], greedy["repetition_penalty"], greedy["presence_penalty"],
            greedy["frequency_penalty"], greedy["max_tokens"]) == ("0.0", "1.0", "0.0", "0.0", "48")
    assert (seeded["top_k"], seeded["top_p"], seeded["min_p"], seeded["seed"]) == ("0", "1.0", "0.0", "13")


def test_fields_left_out_come_from_generation_config(server, model_dir, module_prompts, engine_run):
    """The control: the strict wire format (`api="openai"`, and what this backend sent vLLM before it sent
    every field: vLLM's own only when not at their defaults) samples with the checkpoint's settings on a vLLM
    server, and the greedy replies change. A field the backend left out would fail the tests above."""
    base_url, log = server
    logged_before = len(_logged_params(log))
    with OpenAIHTTPBackend(base_url, str(model_dir), concurrency=1, text_replies=True, api="openai") as strict:
        replies = [_one(strict, f"strict-{n}", prompt, sampling).reply
                   for n, (prompt, sampling) in enumerate((p, s) for s in (GREEDY, SAMPLED) for p in module_prompts)]
        bare = {k: v for k, v in strict.body(module_prompts[1], GREEDY).items()
                if k not in ("max_tokens", "temperature", "top_p")}
    with httpx.Client(timeout=120) as client:
        response = client.post(f"{base_url}/chat/completions", json=bare)
    assert response.status_code == 200, response.text
    logged = [_fields(p) for p in _logged_params(log)[logged_before:]]
    assert len(logged) == 2 * PROMPTS + 1
    greedy, sampled, bare_params = logged[0], logged[PROMPTS], logged[-1]
    # greedy: vLLM turns top_k, top_p and min_p off itself; the penalties stay
    assert (greedy["repetition_penalty"], greedy["presence_penalty"], greedy["frequency_penalty"]) == (
        "1.3", "1.5", "1.5")
    # sampled: top_p was sent (an OpenAI field); top_k and min_p were not
    assert (sampled["top_k"], sampled["min_p"], sampled["top_p"], sampled["temperature"]) == ("1", "0.5", "1.0", "1.0")
    assert (bare_params["temperature"], bare_params["top_p"], bare_params["max_tokens"]) == ("0.3", "0.5", "5")
    assert response.json()["usage"]["completion_tokens"] <= 5
    engine_greedy = [engine.reply for (kind, _, _), (engine, _) in zip(PLAN, engine_run) if kind == "greedy"]
    assert replies[:PROMPTS] != engine_greedy  # the penalties change what the toy model answers


def _fields(params: str) -> dict[str, str]:
    """A SamplingParams as vLLM prints it -> {field: its printed value}."""
    inner = params[params.index("(") + 1:params.rindex(")")]
    return dict(re.findall(r"(\w+)=(\[[^\]]*\]|[^,]+)", inner))


def _logged_params(log: Path) -> list[str]:
    """The SamplingParams of every request the server logged, in order."""
    return re.findall(r"Received request \S+: params: (SamplingParams\(.*\)), lora_request",
                      log.read_text(errors="replace"))


def _below(process: subprocess.Popen, seen: dict[int, psutil.Process]) -> None:
    """Adds the processes now below `process` (vLLM's engine and worker) to `seen`."""
    try:
        for child in psutil.Process(process.pid).children(recursive=True):
            seen.setdefault(child.pid, child)
    except psutil.Error:  # ended meanwhile
        pass
