"""Any OpenAI-compatible chat server (`vllm serve`, `transformers serve`, a hosted API) as a backend.

    backend = OpenAIHTTPBackend("http://127.0.0.1:8000/v1", "Qwen/Qwen2.5-VL-7B-Instruct", concurrency=32,
                                api="vllm")     # a vLLM server (eval/run_vllm.py: --api, vllm by default)
    backend.wait_ready(300)                     # a server started by the same script
    backend.submit("task-7/turn-2", prompt, Sampling(max_tokens=512))
    for key, completion in backend.poll(timeout=0.05): ...

Requests run on `concurrency` worker threads sharing one pooled HTTP client, so at most that many are in
flight; the rest wait in submission order. Connection errors, timeouts, 429 and 5xx are retried with
exponential backoff and jitter (a `Retry-After` header wins); any other answer ends the request with a
`Completion.error` naming the server's message. Nothing a server does raises out of `poll`.

What goes on the wire:
- image placeholders become `image_url` parts with PNG data URLs; tool calls and tool messages go as the
  protocol wrote them; `tools` when the prompt has them;
- `stop`: the first 4 of the prompt's stop strings (OpenAI's limit). Servers strip the one that ended a
  reply; the protocols handle that;
- sampling, by what the server understands (`api`):
  - `api="vllm"` (vLLM's OpenAI server; the evaluation's `--api` default): every field vLLM samples with, at
    its value even when that is the default: `max_tokens`, `temperature`, `top_p`, `top_k` (0: off), `min_p`
    (0), `repetition_penalty`, `presence_penalty`, `frequency_penalty` (0), `seed` when the sampling has one,
    and `Sampling.regex` as `structured_outputs: {"regex": ...}`. vLLM's server takes each of these a request
    omits from the checkpoint's `generation_config.json` (its default `--generation-config auto`; checkpoints
    ship sampling settings there, a top_k or a repetition penalty), the in-process engine never does: sent in
    full, a request samples as `VLLMEngineBackend` samples the same `Sampling` (tests/eval/test_vllm_server.py);
  - `api="openai"` (the class's default: what any OpenAI-compatible server takes; `transformers serve`, OpenAI
    and other strict servers refuse fields they do not know): the OpenAI API's fields only, `max_tokens`,
    `temperature`, `top_p`, `seed` when set and `presence_penalty` when not 0. A sampling these servers cannot
    do (`top_k`, `repetition_penalty` other than 1, `regex`) is refused at `submit` with a ValueError, never
    sent without them. Such a server may still fill what the API cannot say from the checkpoint's generation
    config (`transformers serve` does);
- `prompt.continue_final_message` sends vLLM's `continue_final_message: true, add_generation_prompt: false`.
  Other servers refuse them (`transformers serve`: HTTP 422) or ignore them; use vLLM for code protocols that
  continue the assistant turn.

Known server quirks:
- `transformers serve` (5.19) fails every request that has stop strings on a vision-language model (HTTP
  500: it hands the processor to its stop-string criteria): pass `send_stop=False`; Qwen's replies end on
  their end-of-turn token anyway. It also ignores `presence_penalty` (a warning in its log).
- vLLM's CPU build (0.32) dies on a sampled request with a `seed` whose prefill is split in chunks (a long
  prompt, or several prefilling at once): "CPU Generator does not use offset", every request then fails.
  VLLMEngineBackend drops per-request seeds on CPU for this; against a CPU server sample greedily, or pass
  `extra_body={"seed": None}` (the engine's `--seed` then draws).
- Servers that parse tool calls and thinking out of the model's text return them as structured fields
  (`transformers serve` always does for Qwen models; vLLM with `--tool-call-parser` / `--reasoning-parser`).
  Protocols that read calls from the text (hermes) need `text_replies=True`: the reply is then the text
  again, thinking as `<think>...</think>` before the content and each call as a hermes `<tool_call>` block
  after it.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import httpx

from eval.backends import Completion, Sampling, data_url
from runtime.protocols import Prompt
from runtime.protocols.hermes import call_block

MAX_STOP = 4  # OpenAI's limit on stop strings
APIS = ("vllm", "openai")  # what the server understands: vLLM's OpenAI server, or the OpenAI API's fields only
RETRY_STATUS = {408, 409, 429}  # and every 5xx (what the OpenAI SDK retries)
EXCERPT = 300  # characters of a server's answer quoted in errors


class OpenAIHTTPBackend:
    name = "openai_http"

    def __init__(self, base_url: str, model: str, api_key: str | None = None, concurrency: int = 16,
                 timeout_s: float = 600, retries: int = 4, extra_body: dict | None = None, send_stop: bool = True,
                 text_replies: bool = False, backoff_s: float = 1.0, max_backoff_s: float = 60.0,
                 api: str = "openai"):
        """`base_url` ends where `/chat/completions` and `/models` begin (usually `.../v1`); `api_key`
        defaults to $OPENAI_API_KEY; `timeout_s` bounds each attempt; `retries` is how many times a failed
        attempt is repeated; `extra_body` is merged into every request (server-specific fields);
        `backoff_s` is the first retry's delay, doubled per retry up to `max_backoff_s`, which also caps a
        server's Retry-After; `api`: what the server understands, "openai" (the OpenAI API's fields only, which
        every such server takes) or "vllm" (vLLM's server: every sampling field is sent, so it fills none from
        the checkpoint's generation config), see the module's docstring."""
        if concurrency < 1 or retries < 0 or timeout_s <= 0:
            raise ValueError(f"need concurrency >= 1, retries >= 0 and timeout_s > 0; got {concurrency}, {retries}, "
                             f"{timeout_s}")
        if api not in APIS:
            raise ValueError(f"api must be one of {APIS} (what the server understands), got {api!r}")
        self.api = api
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.retries = retries
        self.timeout_s = timeout_s
        self.extra_body = dict(extra_body or {})
        self.send_stop = send_stop
        self.text_replies = text_replies
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, timeout=timeout_s,
                                    limits=httpx.Limits(max_connections=concurrency,
                                                        max_keepalive_connections=concurrency))
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai-http")
        self._futures: dict[Future, str] = {}  # in submission order
        self._closed = threading.Event()

    def submit(self, key: str, prompt: Prompt, sampling: Sampling) -> None:
        placeholders = sum(1 for m in prompt.messages if isinstance(m.get("content"), list)
                           for part in m["content"] if part.get("type") == "image")
        if placeholders != len(prompt.images):
            raise ValueError(f"prompt {key!r} has {placeholders} image placeholders but {len(prompt.images)} images")
        self.sampling_fields(sampling)  # a sampling this server cannot do is refused here, not sent without it
        self._futures[self._pool.submit(self._request, prompt, sampling, time.perf_counter())] = key

    def poll(self, timeout: float | None = None) -> list[tuple[str, Completion]]:
        if not self._futures:
            return []
        finished = [future for future in self._futures if future.done()]
        if not finished:  # (`wait` never counts the futures close() cancelled: they are picked up above)
            wait(self._futures, timeout=timeout, return_when=FIRST_COMPLETED)
            finished = [future for future in self._futures if future.done()]
        return [(self._futures.pop(future), _outcome(future)) for future in finished]

    def in_flight(self) -> int:
        return len(self._futures)

    def close(self) -> None:
        """Drop queued requests (poll returns them as errors) and stop retrying the ones on the wire."""
        self._closed.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def wait_ready(self, timeout_s: float = 300, interval_s: float = 0.5) -> None:
        """Wait until the server answers `GET /models` (for scripts that start the server themselves)."""
        deadline = time.monotonic() + timeout_s
        cause = "no attempt"
        while True:
            try:
                response = self._client.get(f"{self.base_url}/models", timeout=max(interval_s, 5.0))
                if response.status_code == 200:
                    return
                cause = f"HTTP {response.status_code}: {_excerpt(response.text)}"
            except httpx.HTTPError as err:
                cause = f"{type(err).__name__}: {err}"
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no OpenAI-compatible server answered {self.base_url}/models within "
                                   f"{timeout_s:g} s (last: {cause}). Is it started, and does base_url end in /v1?")
            time.sleep(interval_s)

    def body(self, prompt: Prompt, sampling: Sampling) -> dict:
        """The JSON of one chat-completion request."""
        images = iter(prompt.images)
        messages = []
        for message in prompt.messages:
            wired = dict(message)
            if isinstance(message.get("content"), list):
                wired["content"] = [{"type": "image_url", "image_url": {"url": data_url(next(images))}}
                                    if part.get("type") == "image" else part for part in message["content"]]
                if not wired["content"] and message.get("tool_calls"):
                    wired["content"] = None  # OpenAI's form of a reply that only calls tools
            messages.append(wired)
        body = {"model": self.model, "messages": messages, **self.sampling_fields(sampling)}
        if prompt.tools:
            body["tools"] = prompt.tools
        if prompt.stop and self.send_stop:
            body["stop"] = list(prompt.stop[:MAX_STOP])
        if prompt.continue_final_message:
            body.update(continue_final_message=True, add_generation_prompt=False)
        body.update(self.extra_body)
        return body

    def sampling_fields(self, sampling: Sampling) -> dict:
        """The request's sampling fields, for the server's `api` (the module's docstring). Raises ValueError for
        a sampling a strict server cannot do."""
        fields = {"temperature": sampling.temperature, "top_p": sampling.top_p}
        if sampling.max_tokens is not None:  # left out, the server generates up to the context length
            fields["max_tokens"] = sampling.max_tokens
        if sampling.seed is not None:
            fields["seed"] = sampling.seed
        if self.api == "vllm":  # every field vLLM's server would otherwise fill from generation_config.json
            fields.update(top_k=max(sampling.top_k, 0), min_p=0.0, repetition_penalty=sampling.repetition_penalty,
                          presence_penalty=sampling.presence_penalty, frequency_penalty=0.0)
            if sampling.regex is not None:
                fields["structured_outputs"] = {"regex": sampling.regex}
            return fields
        unknown = [f"top_k={sampling.top_k}"] if sampling.top_k > 0 else []
        unknown += [f"repetition_penalty={sampling.repetition_penalty:g}"] if sampling.repetition_penalty != 1 else []
        unknown += ["regex (structured outputs)"] if sampling.regex is not None else []
        if unknown:
            raise ValueError(f"the server at {self.base_url} speaks the OpenAI API only (api='openai'), which has no "
                             f"{', '.join(unknown)}: serve the model with vLLM (api='vllm', --api vllm) or sample "
                             "without them")
        if sampling.presence_penalty:
            fields["presence_penalty"] = sampling.presence_penalty
        return fields

    def _request(self, prompt: Prompt, sampling: Sampling, submitted: float) -> Completion:
        url = f"{self.base_url}/chat/completions"
        body = self.body(prompt, sampling)
        cause = ""
        for attempt in range(self.retries + 1):
            delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt) * random.uniform(0.5, 1.5)
            try:
                response = self._client.post(url, json=body)
            except httpx.TimeoutException:
                cause = f"no answer from {url} within {self.timeout_s:g} s"
            except httpx.HTTPError as err:
                cause = f"{type(err).__name__} from {url}: {err}"
            else:
                if response.status_code == 200:
                    return self._completion(response, url, prompt, submitted)
                cause = f"HTTP {response.status_code} from {url}: {_excerpt(response.text)}"
                if response.status_code not in RETRY_STATUS and response.status_code < 500:
                    return Completion("", latency_s=time.perf_counter() - submitted, error=cause)
                delay = _retry_after(response, self.max_backoff_s, delay)
            if attempt == self.retries or self._closed.wait(delay):
                break
        return Completion("", latency_s=time.perf_counter() - submitted,
                          error=f"{attempt + 1} attempt(s) failed; the last: {cause}")

    def _completion(self, response: httpx.Response, url: str, prompt: Prompt, submitted: float) -> Completion:
        latency = time.perf_counter() - submitted
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice["message"]
            if not isinstance(message, dict):
                raise TypeError(f"message is {type(message).__name__}")
            usage = data.get("usage") or {}
            prompt_tokens, completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
            return Completion("", latency_s=latency, error=f"{url} answered 200 with a body that is not a chat "
                              f"completion ({type(err).__name__}: {err}): {_excerpt(response.text)}")
        reply = {"content": message.get("content"), "tool_calls": message.get("tool_calls") or []}
        return Completion(_as_text(message) if self.text_replies else reply, prompt_tokens=prompt_tokens,
                          completion_tokens=completion_tokens, truncated=choice.get("finish_reason") == "length",
                          stop=_stop_string(choice, prompt),
                          latency_s=latency)


def _stop_string(choice: dict, prompt: Prompt) -> str | None:
    """The stop string that ended the reply: vLLM's servers name it in `stop_reason`. Servers that do not
    name it leave it unknown, and a block left open counts as unclosed (never run), the safe reading."""
    reason = choice.get("stop_reason")
    return reason if choice.get("finish_reason") == "stop" and isinstance(reason, str) and reason in prompt.stop else None


def _as_text(message: dict) -> str:
    """A reply message as the model wrote it, for protocols that parse text: the server's reasoning field as
    `<think>...</think>` before the content, its parsed tool calls as hermes blocks after it."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    text = content if isinstance(content, str) else ""
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        text = f"<think>{reasoning}</think>{text}"
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        if isinstance(arguments, str):  # as the model wrote it, when it is JSON (servers re-encode it ASCII-escaped)
            try:
                arguments = json.dumps(json.loads(arguments), ensure_ascii=False)
            except ValueError:
                pass
        else:
            arguments = json.dumps(arguments, ensure_ascii=False)
        text += ("\n" if text else "") + call_block(str(function.get("name", "")), arguments)
    return text


def _outcome(future: Future) -> Completion:
    if future.cancelled():
        return Completion("", error="the backend was closed before this request was sent")
    error = future.exception()
    if error is not None:  # a bug in building the request, not a server failure: still only this request ends
        return Completion("", error=f"could not send the request: {type(error).__name__}: {error}")
    return future.result()


def _retry_after(response: httpx.Response, cap: float, default: float) -> float:
    """The server's Retry-After (seconds or an HTTP date), capped; `default` when absent or unreadable."""
    value = response.headers.get("Retry-After")
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return default
    return min(cap, max(0.0, seconds))


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT else text[:EXCERPT] + "..."
