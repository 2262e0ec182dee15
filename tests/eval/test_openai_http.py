"""OpenAIHTTPBackend against real servers on 127.0.0.1: `transformers serve` with a tiny model fine-tuned to call
tools (conftest.py; a strict server: `api="openai"`), and a scripted `http.server` for what a healthy server
never does (errors, stalls, broken bodies) and for what only the server side can see (concurrency, the request
bodies). A real vLLM server: test_vllm_server.py."""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

from data_gen.tasks import rotated_ocr
from eval.backends import Sampling
from eval.backends.openai_http import OpenAIHTTPBackend
from runtime.episode import State, Stop
from runtime.profiles import PROFILES
from runtime.protocols import Prompt
from runtime.toolbox import ToolBox

PROFILE = PROFILES["qwen2_5_vl"]
GREEDY = Sampling(max_tokens=48)
FAST_RETRIES = dict(retries=2, backoff_s=0.01)
STRICT = "openai"  # `transformers serve` refuses the fields only vLLM knows
HELD_OUT_SEEDS = (5000, 5001, 5002)  # the tool caller was trained on seeds 0-95
PATIENCE_S = 60  # the most a wait on the scripted server may take: a loaded machine slows every step


def first_prompt(seed: int):
    """The first turn of a rotated-OCR episode (hermes tools in the system prompt, the image, the question)."""
    sample = rotated_ocr.generate(seed, difficulty="easy")
    toolbox = ToolBox(sample.toolset)
    episode = toolbox.start(PROFILE, sample.question, [sample.image])
    try:
        return episode.prompt()
    finally:
        episode.close()


def one(backend: OpenAIHTTPBackend, prompt: Prompt, sampling: Sampling = GREEDY):
    backend.submit("only", prompt, sampling)
    ((key, completion),) = backend.poll(timeout=None)
    assert key == "only" and backend.in_flight() == 0
    return completion


# ---- transformers serve ----

def test_round_trip_with_an_image_returns_the_servers_parsed_tool_call(transformers_server):
    prompt = first_prompt(HELD_OUT_SEEDS[0])
    with OpenAIHTTPBackend(transformers_server.base_url, transformers_server.model, send_stop=False,
                           api=STRICT) as backend:
        completion = one(backend, prompt)
        without_image = one(backend, Prompt([{"role": m["role"], "content": [p for p in m["content"]
                                                                            if p["type"] == "text"]}
                                             for m in prompt.messages], []))
    assert completion.error is None and not completion.truncated and completion.latency_s > 0
    assert completion.completion_tokens > 0
    assert completion.prompt_tokens > without_image.prompt_tokens + 1  # the image's tokens were counted
    # transformers serve parses Qwen's <tool_call> out of the text (hence text_replies for hermes)
    (call,) = completion.reply["tool_calls"]
    assert call["function"]["name"] == "rotate" and "degree" in json.loads(call["function"]["arguments"])
    assert completion.reply["content"] in ("", None)


def test_text_replies_give_the_model_text_back(transformers_server):
    with OpenAIHTTPBackend(transformers_server.base_url, transformers_server.model, send_stop=False,
                           text_replies=True, api=STRICT) as backend:
        completion = one(backend, first_prompt(HELD_OUT_SEEDS[0]))
    assert completion.error is None
    assert completion.reply.startswith('<tool_call>\n{"name": "rotate", "arguments": {"degree": ')
    parsed = PROFILE.protocol.parse(completion.reply)
    assert [c.name for c in parsed.calls] == ["rotate"] and parsed.calls[0].error is None


def test_episodes_call_tools_and_answer(transformers_server):
    """Whole episodes: the model calls rotate, the tool runs, the rotated image goes back, the model answers."""
    samples = [rotated_ocr.generate(seed, difficulty="easy") for seed in HELD_OUT_SEEDS]
    toolbox = ToolBox(samples[0].toolset)
    episodes = {str(i): toolbox.start(PROFILE, s.question, [s.image]) for i, s in enumerate(samples)}
    with OpenAIHTTPBackend(transformers_server.base_url, transformers_server.model, concurrency=2, send_stop=False,
                           text_replies=True, api=STRICT) as backend:
        for key, episode in episodes.items():
            backend.submit(key, episode.prompt(), GREEDY)
        while backend.in_flight():
            for key, completion in backend.poll(timeout=None):
                assert completion.error is None
                episode = episodes[key]
                episode.submit(completion.reply, completion.prompt_tokens, completion.completion_tokens,
                               completion.truncated)
                if episode.state is State.RUNNING_TOOLS:
                    toolbox.run([episode])
                if not episode.done:
                    backend.submit(key, episode.prompt(), GREEDY)
    for episode in episodes.values():
        messages = episode.trajectory.messages
        ran = [m for m in messages if m["role"] == "tool" and not m["error"]]
        assert episode.stop_reason is Stop.ANSWER and episode.answer is not None, messages[2:]
        assert episode.tool_calls >= 1 and ran and ran[0]["name"] == "rotate"
        assert len(episode.workspace) == 2  # the original and the rotated image the tool returned
        assert episode.context_tokens > 0
        episode.close()


def test_a_field_the_server_refuses_is_not_retried_and_names_the_servers_message(transformers_server):
    prompt = Prompt([{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                     {"role": "assistant", "content": [{"type": "text", "text": "<answer>"}]}], [],
                    continue_final_message=True)
    with OpenAIHTTPBackend(transformers_server.base_url, transformers_server.model, send_stop=False, api=STRICT,
                           **FAST_RETRIES) as backend:
        completion = one(backend, prompt)
    assert completion.reply == "" and completion.error.startswith("HTTP 422 from ")
    assert "Unexpected fields" in completion.error and "continue_final_message" in completion.error


def test_a_strict_server_refuses_the_sampling_fields_only_vllm_knows(transformers_server):
    """Why `api="openai"` exists: vLLM's sampling fields, sent in full for a vLLM server, are unknown to a
    strict server. There the backend refuses a sampling that needs them at submit, before anything is sent."""
    with OpenAIHTTPBackend(transformers_server.base_url, transformers_server.model, send_stop=False, api="vllm",
                           **FAST_RETRIES) as backend:
        completion = one(backend, first_prompt(HELD_OUT_SEEDS[0]))
    assert completion.reply == "" and completion.error.startswith("HTTP 422 from ")
    assert "Unexpected fields" in completion.error and "top_k" in completion.error
    with OpenAIHTTPBackend(transformers_server.base_url, transformers_server.model, send_stop=False,
                           api=STRICT) as backend:
        with pytest.raises(ValueError, match=r"speaks the OpenAI API only \(api='openai'\), which has no top_k=1"):
            backend.submit("k", first_prompt(HELD_OUT_SEEDS[0]), replace(GREEDY, top_k=1))
        assert backend.in_flight() == 0


def test_transformers_serve_fails_stop_strings_on_a_vlm(transformers_server):
    """The quirk `send_stop=False` works around; when this fails, transformers fixed it: drop the advice.
    The server answers 500, or, on a retry over the same connection, sometimes resets it: its log names the cause."""
    with OpenAIHTTPBackend(transformers_server.base_url, transformers_server.model, api=STRICT,
                           **FAST_RETRIES) as backend:
        completion = one(backend, first_prompt(HELD_OUT_SEEDS[1]))
    assert completion.error.startswith("3 attempt(s) failed; the last: ")
    assert ("HTTP 500 from " in completion.error) or ("Connection reset" in completion.error), completion.error
    log = transformers_server.log.read_text(errors="replace")
    assert "StopStringCriteria" in log and "object has no attribute 'get_vocab'" in log


# ---- a scripted server ----

class ScriptedServer:
    """A real HTTP server on 127.0.0.1. POST /v1/chat/completions answers from `script`, a list of (status,
    headers, body) popped in order, then with a chat completion that echoes the last message's text. It records
    each request and the most it held at once. Requests are held until `hold` of them have been in flight at once
    (PATIENCE_S at most: after that none is held, and `hold_missed` says so), then each waits `delay_s` more, or until
    `release()`."""

    def __init__(self, script=(), hold: int = 1, delay_s: float = 0.0):
        self.script, self.hold, self.delay_s = list(script), hold, delay_s
        self.requests: list[dict] = []  # {"at": monotonic time, "headers": {...}, "body": parsed JSON}
        self.in_flight = self.max_in_flight = 0
        self.hold_missed = False
        self.changed = threading.Condition()
        self.stopping = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def release(self):
        """Every delay, current and future, ends now."""
        self.stopping.set()

    def close(self):
        self.release()
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, body: dict) -> tuple[int, dict, bytes]:
        with self.changed:
            if self.script:
                status, headers, payload = self.script.pop(0)
                return status, headers, payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        content = body["messages"][-1]["content"]
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
        return 200, {}, json.dumps(chat_completion(f"echo: {text}")).encode()

    def _handler(self):
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self._send(200, {}, b'{"object": "list", "data": []}')

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with scripted.changed:
                    scripted.requests.append({"at": time.monotonic(), "headers": dict(self.headers), "body": body})
                    scripted.in_flight += 1
                    scripted.max_in_flight = max(scripted.max_in_flight, scripted.in_flight)
                    scripted.changed.notify_all()
                    if not scripted.changed.wait_for(lambda: scripted.hold_missed
                                                     or scripted.max_in_flight >= scripted.hold, timeout=PATIENCE_S):
                        scripted.hold_missed = True
                        scripted.changed.notify_all()
                scripted.stopping.wait(scripted.delay_s)
                answer = scripted._answer(body)
                with scripted.changed:  # before the answer leaves: the client may send its next request at once
                    scripted.in_flight -= 1
                try:
                    self._send(*answer)
                except OSError:  # the client gave up (a timeout test)
                    pass

            def _send(self, status, headers, payload):
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        return Handler


def chat_completion(content: str, finish_reason: str = "stop") -> dict:
    return {"id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": finish_reason,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}


@pytest.fixture
def scripted():
    servers = []

    def start(*args, **kwargs) -> ScriptedServer:
        servers.append(ScriptedServer(*args, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def text_prompt(text: str) -> Prompt:
    return Prompt([{"role": "user", "content": [{"type": "text", "text": text}]}], [])


def test_concurrency_is_bounded_and_replies_come_back_under_their_keys(scripted):
    server = scripted(hold=3, delay_s=0.05)
    with OpenAIHTTPBackend(server.url, "m", concurrency=3) as backend:
        for n in range(9):
            backend.submit(f"key-{n}", text_prompt(f"question {n}"), GREEDY)
        assert backend.in_flight() == 9
        replies = {}
        while backend.in_flight():
            replies.update(backend.poll(timeout=None))
    assert not server.hold_missed, f"3 requests were never in flight at once within {PATIENCE_S} s"
    assert server.max_in_flight == 3
    assert {key: c.reply["content"] for key, c in replies.items()} == {
        f"key-{n}": f"echo: question {n}" for n in range(9)}
    assert all(c.error is None and c.prompt_tokens == 7 and c.completion_tokens == 3 for c in replies.values())


def test_poll_returns_nothing_when_nothing_is_in_flight(scripted):
    server = scripted()
    with OpenAIHTTPBackend(server.url, "m") as backend:
        assert backend.poll(timeout=None) == [] and backend.in_flight() == 0


def test_server_errors_are_retried_until_one_succeeds(scripted):
    server = scripted(script=[(503, {}, b"overloaded"), (502, {}, b"bad gateway"), (200, {}, chat_completion("ok"))])
    with OpenAIHTTPBackend(server.url, "m", retries=4, backoff_s=0.01) as backend:
        completion = one(backend, text_prompt("hi"))
    assert completion.error is None and completion.reply == {"content": "ok", "tool_calls": []}
    assert len(server.requests) == 3


def test_retry_after_is_honored(scripted):
    server = scripted(script=[(429, {"Retry-After": "1"}, b"slow down")])
    with OpenAIHTTPBackend(server.url, "m", retries=1, backoff_s=0.001) as backend:
        completion = one(backend, text_prompt("hi"))
    assert completion.error is None
    first, second = server.requests
    assert second["at"] - first["at"] >= 0.95  # the backoff alone would have waited about 1 ms


def test_a_client_error_is_not_retried_and_names_the_servers_message(scripted):
    server = scripted(script=[(400, {}, {"error": {"message": "max_tokens is too large for this model"}})])
    with OpenAIHTTPBackend(server.url, "m", retries=4, backoff_s=0.01) as backend:
        completion = one(backend, text_prompt("hi"))
    assert completion.reply == "" and len(server.requests) == 1
    assert completion.error.startswith(f"HTTP 400 from {server.url}/chat/completions: ")
    assert "max_tokens is too large for this model" in completion.error


def test_a_stalled_server_ends_in_an_error_after_the_retries(scripted):
    server = scripted(delay_s=5)
    with OpenAIHTTPBackend(server.url, "m", timeout_s=0.2, **FAST_RETRIES) as backend:
        completion = one(backend, text_prompt("hi"))
    assert completion.reply == "" and len(server.requests) == 3
    assert completion.error == (f"3 attempt(s) failed; the last: no answer from {server.url}/chat/completions "
                                "within 0.2 s")


def test_a_refused_connection_ends_in_an_error_after_the_retries(scripted):
    server = scripted()
    url = server.url
    server.close()
    with OpenAIHTTPBackend(url, "m", **FAST_RETRIES) as backend:
        completion = one(backend, text_prompt("hi"))
    assert completion.error.startswith(f"3 attempt(s) failed; the last: ConnectError from {url}/chat/completions")


@pytest.mark.parametrize("payload", [b"{not json", b'{"choices": []}', b'{"choices": [{"message": "hi"}]}', b"[]",
                                     json.dumps({**chat_completion("x"), "usage": "many"}).encode()])
def test_a_body_that_is_not_a_chat_completion_is_an_error(scripted, payload):
    server = scripted(script=[(200, {}, payload)])
    with OpenAIHTTPBackend(server.url, "m", **FAST_RETRIES) as backend:
        completion = one(backend, text_prompt("hi"))
    assert completion.reply == "" and len(server.requests) == 1
    assert completion.error.startswith(f"{server.url}/chat/completions answered 200 with a body that is not a chat "
                                       "completion")


def test_truncation_and_text_replies(scripted):
    message = {"role": "assistant", "content": "Let me look.", "reasoning_content": "The text is upside down.",
               "tool_calls": [{"id": "c1", "type": "function",
                               "function": {"name": "rotate", "arguments": '{"degree": 180, "why": "\\u00e9"}'}}]}
    reply = {**chat_completion(""), "choices": [{"index": 0, "finish_reason": "length", "message": message}]}
    server = scripted(script=[(200, {}, reply)])
    with OpenAIHTTPBackend(server.url, "m", text_replies=True) as backend:
        completion = one(backend, text_prompt("hi"))
    assert completion.truncated
    assert completion.reply == ('<think>The text is upside down.</think>Let me look.\n<tool_call>\n'
                                '{"name": "rotate", "arguments": {"degree": 180, "why": "é"}}\n</tool_call>')


def test_the_request_body(scripted):
    """Images as PNG data URLs in order, messages as the protocol wrote them, tools, at most 4 stop strings, and
    for a vLLM server (`api="vllm"`) every sampling field, at its value even when that is vLLM's default: a
    field left out is one vLLM's server fills from the checkpoint's generation_config.json."""
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (8 + i, 12, 3), dtype=np.uint8) for i in range(2)]
    tools = [{"type": "function", "function": {"name": "rotate", "parameters": {"type": "object"}}}]
    call = {"id": "c0", "type": "function", "function": {"name": "rotate", "arguments": '{"degree": 90}'}}
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Read it."}]},
                {"role": "assistant", "content": [], "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c0", "name": "rotate", "content": "rotated"},
                {"role": "user", "content": [{"type": "image"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "<answer>"}]}]
    prompt = Prompt(messages, images, tools=tools, continue_final_message=True, stop=tuple("abcdef"))
    server = scripted()
    with OpenAIHTTPBackend(server.url, "the-model", api_key="secret", extra_body={"priority": 1},
                           api="vllm") as backend:
        one(backend, prompt, Sampling(max_tokens=9, temperature=0.5, top_p=0.9, top_k=5, repetition_penalty=1.1,
                                      presence_penalty=0.5, seed=3, regex="A|B"))
        one(backend, text_prompt("plain"))
        one(backend, text_prompt("top_k -1"), replace(GREEDY, top_k=-1))
    (tuned, plain, minus_one) = [r["body"] for r in server.requests]
    assert server.requests[0]["headers"]["Authorization"] == "Bearer secret"
    urls = [part["image_url"]["url"] for m in tuned["messages"] if isinstance(m["content"], list)
            for part in m["content"] if part["type"] == "image_url"]
    decoded = [np.asarray(Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1])))) for u in urls]
    assert all(u.startswith("data:image/png;base64,") for u in urls)
    assert len(decoded) == 2 and all(np.array_equal(a, b) for a, b in zip(decoded, images))
    assert tuned["messages"][1] == {"role": "assistant", "content": None, "tool_calls": [call]}
    assert tuned["messages"][2] == messages[2]
    assert {k: v for k, v in tuned.items() if k != "messages"} == {
        "model": "the-model", "tools": tools, "stop": ["a", "b", "c", "d"], "max_tokens": 9, "temperature": 0.5,
        "top_p": 0.9, "top_k": 5, "min_p": 0.0, "repetition_penalty": 1.1, "presence_penalty": 0.5,
        "frequency_penalty": 0.0, "seed": 3, "structured_outputs": {"regex": "A|B"},
        "continue_final_message": True, "add_generation_prompt": False, "priority": 1}
    assert {k: v for k, v in plain.items() if k != "messages"} == {
        "model": "the-model", "max_tokens": GREEDY.max_tokens, "temperature": 0.0, "top_p": 1.0, "top_k": 0,
        "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "priority": 1}
    assert minus_one["top_k"] == 0  # vLLM's "off" (it also takes -1, "quietly", as its source says)


def test_the_request_body_for_a_strict_server(scripted):
    """`api="openai"`, the default: the OpenAI API's fields only; presence_penalty when set. A sampling only vLLM
    can do is refused at submit with what it needs, and nothing is sent."""
    server = scripted()
    with OpenAIHTTPBackend(server.url, "the-model") as backend:
        assert backend.api == "openai"
        one(backend, text_prompt("tuned"), Sampling(max_tokens=9, temperature=0.5, top_p=0.9, presence_penalty=0.5,
                                                    seed=3))
        one(backend, text_prompt("plain"))
        for sampling, refused in [(replace(GREEDY, top_k=5), "top_k=5"),
                                  (replace(GREEDY, repetition_penalty=1.1), "repetition_penalty=1.1"),
                                  (replace(GREEDY, regex="A|B"), "regex"),
                                  (replace(GREEDY, top_k=2, regex="A"), "top_k=2, regex")]:
            with pytest.raises(ValueError, match=f"{server.url} speaks the OpenAI API only .*which has no {refused}"):
                backend.submit("k", text_prompt("refused"), sampling)
            with pytest.raises(ValueError, match="has no"):
                backend.body(text_prompt("refused"), sampling)
        assert backend.in_flight() == 0
    (tuned, plain) = [r["body"] for r in server.requests]
    assert {k: v for k, v in tuned.items() if k != "messages"} == {
        "model": "the-model", "max_tokens": 9, "temperature": 0.5, "top_p": 0.9, "presence_penalty": 0.5, "seed": 3}
    assert {k: v for k, v in plain.items() if k != "messages"} == {
        "model": "the-model", "max_tokens": GREEDY.max_tokens, "temperature": 0.0, "top_p": 1.0}
    with pytest.raises(ValueError, match=r"api must be one of \('vllm', 'openai'\)"):
        OpenAIHTTPBackend(server.url, "m", api="sglang")


@pytest.mark.parametrize("api", ["vllm", "openai"])
def test_the_eval_config_names_the_servers_api(api):
    """`--backend openai --api ...` reaches the backend (eval/run_vllm.py); vLLM's is the default."""
    from eval.config import EvalConfig
    from eval.presets import get_preset
    from eval.run_vllm import _backend

    assert EvalConfig().api == "vllm"
    config = EvalConfig(model="m", backend="openai", base_url="http://127.0.0.1:1/v1", api=api)
    backend = _backend(config, get_preset("qwen2.5-vl"), [])
    try:
        assert isinstance(backend, OpenAIHTTPBackend) and backend.api == api
    finally:
        backend.close()


def test_a_prompt_whose_images_do_not_match_its_placeholders_is_refused_at_submit(scripted):
    server = scripted()
    with OpenAIHTTPBackend(server.url, "m") as backend:
        with pytest.raises(ValueError, match="has 0 image placeholders but 1 images"):
            backend.submit("k", Prompt(text_prompt("hi").messages, [np.zeros((4, 4, 3), np.uint8)]), GREEDY)
        assert backend.in_flight() == 0


def test_close_returns_queued_requests_as_errors(scripted):
    server = scripted(delay_s=PATIENCE_S)  # no answer before release(): the other requests are still queued
    backend = OpenAIHTTPBackend(server.url, "m", concurrency=1)
    for n in range(3):
        backend.submit(f"k{n}", text_prompt("hi"), GREEDY)
    backend.close()
    server.release()
    finished = {}
    while backend.in_flight():
        finished.update(backend.poll(timeout=None))
    assert set(finished) == {"k0", "k1", "k2"}
    assert finished["k1"].error == finished["k2"].error == "the backend was closed before this request was sent"


def test_wait_ready(scripted):
    server = scripted()
    with OpenAIHTTPBackend(server.url, "m") as backend:
        backend.wait_ready(timeout_s=PATIENCE_S)
    server.close()
    with OpenAIHTTPBackend(server.url, "m") as backend:
        with pytest.raises(TimeoutError, match=f"no OpenAI-compatible server answered {server.url}/models within "
                                               r"0.3 s \(last: ConnectError"):
            backend.wait_ready(timeout_s=0.3, interval_s=0.1)


@pytest.mark.parametrize("choice, stop", [
    ({"finish_reason": "stop", "stop_reason": "</code>"}, "</code>"),  # vLLM's server names the stop string
    ({"finish_reason": "stop", "stop_reason": None}, None),  # the end-of-turn token
    ({"finish_reason": "stop", "stop_reason": 151645}, None),  # a stop token id: the end of turn
    ({"finish_reason": "stop"}, None),  # a server that does not say: unknown, read as the end of turn
    ({"finish_reason": "length", "stop_reason": None}, None),
    ({"finish_reason": "stop", "stop_reason": "</answer>"}, None),  # not a stop string this request sent
], ids=["stop_string", "end_of_turn", "stop_token", "unknown", "length", "foreign"])
def test_the_stop_string_that_ended_a_reply_is_reported(scripted, choice, stop):
    body = chat_completion("<code>print(1)")
    body["choices"][0].update(choice)
    server = scripted(script=[(200, {}, body)])
    prompt = replace(text_prompt("hi"), stop=("</code>",))
    with OpenAIHTTPBackend(server.url, "m") as backend:
        completion = one(backend, prompt)
    assert completion.stop == stop and completion.truncated == (choice["finish_reason"] == "length")
