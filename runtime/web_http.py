"""HTTP for the live web tools. Every provider request of a run goes through one `WebHttp`, which

- sends it with the runner's own timeout (or the run's `--web_timeout_s`) and retries 429, 5xx, timeouts and
  dropped connections with backoff (honouring Retry-After), then hands the last response, or raises the last
  error, to the benchmark's own reply code, so a failure reads as the runner's reply to it;
- bounds what it reads: at most `max_bytes` per response, and a deadline per request checked between chunks;
- answers a request it has sent before, in any run, from the shared cache (successful responses only, stored
  without the keys), so the same query is paid for once;
- counts requests, retries, faults, cache hits and estimated cost per endpoint, and stops the run
  (`WebBudgetReached`) before a request that would pass the run's caps;
- refuses to fetch a model's URL on a loopback, private or link-local address (it could otherwise read a
  cluster's metadata service or internal pages), unless TIRLAB_WEB_ALLOW_PRIVATE=1 allows it (local tests).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import os
import re
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import requests
from requests.structures import CaseInsensitiveDict
from urllib3.exceptions import LocationParseError
from urllib3.util import parse_url

# Each provider endpoint by name; TIRLAB_WEB_ENDPOINTS (a JSON object of name -> URL) points names elsewhere (a
# proxy, or the local fakes of the tests). `jina_reader` is a prefix the page's URL is appended to.
ENDPOINTS = {
    "serper_search": "https://google.serper.dev/search",
    "serper_lens": "https://google.serper.dev/lens",
    "imgbb_upload": "https://api.imgbb.com/1/upload",
    "jina_reader": "https://r.jina.ai/",
    "serpapi_search": "https://serpapi.com/search",
    "openweather_geocode": "http://api.openweathermap.org/geo/1.0/direct",
    "openweather_current": "https://api.openweathermap.org/data/2.5/weather",
}
ENDPOINTS_ENV = "TIRLAB_WEB_ENDPOINTS"
PAGE = "page"  # a web page the model named (VisualToolBench's page reader fetches it directly)
# Estimated US dollars per successful request, assumed from the providers' published plans (docs/web.md): Serper's
# 50k-query pack, a Lens query at 3 credits, SerpAPI's Developer plan (5,000 searches for $75); Jina's reader,
# ImgBB and OpenWeather's free tiers cost nothing within their rate limits.
PRICES = {"serper_search": 0.001, "serper_lens": 0.003, "imgbb_upload": 0.0, "jina_reader": 0.0,
          "serpapi_search": 0.015, "openweather_geocode": 0.0, "openweather_current": 0.0, PAGE: 0.0}
REDACTED = "***"
BACKOFF_S = 5.0  # Agentic-MME's runners wait 5 s, then 10 s
ALLOW_PRIVATE_ENV = "TIRLAB_WEB_ALLOW_PRIVATE"  # 1: a model's URL may reach private addresses (local tests, intranets)
MAX_REDIRECTS = 30  # requests' own limit


class WebBudgetReached(BaseException):
    """The run's cap on web calls or cost is reached: the run stops as it does on Ctrl-C (recorded episodes kept,
    those in flight run again on resume). A BaseException, so that no tool turns it into a reply."""


class ResponseTooLarge(requests.exceptions.RequestException):
    pass


class PrivateAddress(requests.exceptions.InvalidURL):
    pass


@dataclass
class WebPolicy:
    max_calls: int | None = None  # provider requests in the whole run (every attempt counts)
    max_cost: float | None = None  # estimated US dollars in the whole run
    attempts: int = 3  # tries per request (Agentic-MME's runners try 3 times)
    backoff_s: float | None = None  # wait before the second try, doubling each try; None: BACKOFF_S
    timeout_s: float | None = None  # per read; None: each runner's own (15 s, 10 s, 45 s)
    max_wait_s: float = 60.0  # the longest wait a provider's Retry-After gets
    cache_dir: Path | None = None
    allow_private: bool = field(default_factory=lambda: os.environ.get(ALLOW_PRIVATE_ENV, "") not in ("", "0"))
    max_bytes: int = 16 * 2 ** 20
    endpoints: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        self.endpoints = {**ENDPOINTS, **json.loads(os.environ.get(ENDPOINTS_ENV) or "{}"), **self.endpoints}
        unknown = set(self.endpoints) - set(ENDPOINTS)
        if unknown:
            raise ValueError(f"{ENDPOINTS_ENV}: unknown endpoint name(s) {sorted(unknown)}; the names are "
                             f"{sorted(ENDPOINTS)}")
        if self.attempts < 1:
            raise ValueError(f"a web request needs at least 1 try, got {self.attempts}")


@dataclass
class WebUsage:
    """What the run's web calls cost, per endpoint; kept in the run directory across resumes."""
    requests: Counter = field(default_factory=Counter)  # sent to a provider, every attempt
    retries: Counter = field(default_factory=Counter)
    cache_hits: Counter = field(default_factory=Counter)
    faults: Counter = field(default_factory=Counter)  # "endpoint: kind" of a request's final failure
    cost: Counter = field(default_factory=Counter)

    def to_json(self) -> dict:
        return {name: dict(getattr(self, name)) for name in ("requests", "retries", "cache_hits", "faults", "cost")}

    @classmethod
    def from_json(cls, data: dict) -> "WebUsage":
        return cls(**{name: Counter(data.get(name) or {}) for name in ("requests", "retries", "cache_hits",
                                                                       "faults", "cost")})


class WebHttp:
    def __init__(self, policy: WebPolicy | None = None, usage: WebUsage | None = None, secrets=()):
        self.policy = policy or WebPolicy()
        self.usage = usage or WebUsage()
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._lock = threading.Lock()
        self._call = threading.local()  # the faults of the tool call in progress on this thread

    def endpoint(self, name: str) -> str:
        return self.policy.endpoints[name]

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def begin_call(self) -> None:
        self._call.faults = []

    def call_faults(self) -> list[str]:
        return list(getattr(self._call, "faults", []))

    def fault(self, endpoint: str, kind: str) -> None:
        """A request's final failure (the benchmark's code also reports a body it cannot parse)."""
        with self._lock:
            self.usage.faults[f"{endpoint}: {kind}"] += 1
        getattr(self._call, "faults", []).append(f"{endpoint}: {kind}")

    def json(self, endpoint: str, response: requests.Response):
        """`response.json()`, counted as a fault when the body is not JSON (the error is the caller's to word)."""
        try:
            return response.json()
        except ValueError:
            self.fault(endpoint, "malformed JSON")
            raise

    def get(self, endpoint: str, url: str, **kwargs) -> requests.Response:
        return self.request(endpoint, "GET", url, **kwargs)

    def post(self, endpoint: str, url: str, **kwargs) -> requests.Response:
        return self.request(endpoint, "POST", url, **kwargs)

    def request(self, endpoint: str, method: str, url: str, *, timeout: float, params=None, json=None, data=None,
                headers=None) -> requests.Response:
        """The provider's last response (any status), or its last transport error raised as requests raises it."""
        timeout = self.policy.timeout_s or timeout
        key = self._cache_key(endpoint, method, url, params, json, data)
        cached = self._cached(key)
        if cached is not None:
            with self._lock:
                self.usage.cache_hits[endpoint] += 1
            return cached
        for attempt in range(self.policy.attempts):
            self._charge(endpoint)
            last = attempt == self.policy.attempts - 1
            try:
                response = self._send(endpoint, method, url, timeout, params, json, data, headers)
            except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as err:
                if last:
                    self.fault(endpoint, "timeout" if isinstance(err, requests.exceptions.Timeout) else "connection")
                    raise
                self._wait(endpoint, attempt, None)
                continue
            except (requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema,
                    requests.exceptions.MissingSchema, LocationParseError) as err:  # the model's URL: nothing sent
                with self._lock:
                    self.usage.requests[endpoint] -= 1
                if isinstance(err, PrivateAddress):
                    self.fault(endpoint, "refused private address")
                raise
            except requests.exceptions.RequestException as err:
                self.fault(endpoint, type(err).__name__)
                raise
            if (response.status_code == 429 or response.status_code >= 500) and not last:
                self._wait(endpoint, attempt, response.headers.get("Retry-After"))
                continue
            if response.status_code >= 400:
                self.fault(endpoint, f"HTTP {response.status_code}")
            else:
                with self._lock:
                    self.usage.cost[endpoint] += PRICES.get(endpoint, 0.0)
                self._store(key, response)
            return response
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _charge(self, endpoint: str) -> None:
        policy, usage = self.policy, self.usage
        with self._lock:
            calls, cost = sum(usage.requests.values()), sum(usage.cost.values())
            if policy.max_calls is not None and calls + 1 > policy.max_calls:
                raise WebBudgetReached(f"the run's cap of {policy.max_calls} web requests is reached (--web_max_calls)")
            if policy.max_cost is not None and cost + PRICES.get(endpoint, 0.0) > policy.max_cost + 1e-12:
                raise WebBudgetReached(f"the run's estimated web cost would pass ${policy.max_cost:g} "
                                       f"(${cost:.3f} spent; --web_max_cost)")
            usage.requests[endpoint] += 1

    def _wait(self, endpoint: str, attempt: int, retry_after: str | None) -> None:
        with self._lock:
            self.usage.retries[endpoint] += 1
        delay = (BACKOFF_S if self.policy.backoff_s is None else self.policy.backoff_s) * 2 ** attempt
        if retry_after and re.fullmatch(r"[0-9]{1,6}", retry_after.strip()):
            delay = max(delay, min(float(retry_after), self.policy.max_wait_s))
        time.sleep(delay)

    def _send(self, endpoint, method, url, timeout, params, json_body, data, headers) -> requests.Response:
        deadline = time.monotonic() + max(60.0, 4 * timeout)
        with requests.Session() as session:  # a fresh one per call, as the runners' requests.get: no cookies carry
            for _ in range(MAX_REDIRECTS + 1):
                if endpoint == PAGE and not self.policy.allow_private:
                    _refuse_private(method, url, params)
                response = session.request(method, url, params=params, json=json_body, data=data, headers=headers,
                                           timeout=timeout, stream=True, allow_redirects=endpoint != PAGE)
                if endpoint != PAGE or not response.is_redirect:
                    return self._read(response, deadline)
                url, params = urljoin(response.url, response.headers["Location"]), None  # checked before it is sent
                response.close()
        raise requests.exceptions.TooManyRedirects(f"Exceeded {MAX_REDIRECTS} redirects.")

    def _read(self, response: requests.Response, deadline: float) -> requests.Response:
        chunks, size = [], 0
        try:
            for chunk in response.iter_content(64 * 1024):
                size += len(chunk)
                if size > self.policy.max_bytes:
                    raise ResponseTooLarge(f"the response from {urlsplit(response.url).netloc} is larger than "
                                           f"{self.policy.max_bytes // 2 ** 20} MiB, the most tirlab reads")
                if time.monotonic() > deadline:
                    raise requests.exceptions.ReadTimeout(f"the response from {urlsplit(response.url).netloc} "
                                                          "did not finish within the request's deadline")
                chunks.append(chunk)
        finally:
            response.close()
        response._content, response._content_consumed = b"".join(chunks), True
        return response

    def _cache_key(self, endpoint, method, url, params, json_body, data) -> str:
        def plain(value):
            if isinstance(value, dict):
                return {str(k): plain(v) for k, v in sorted(value.items())}
            return self.redact(value) if isinstance(value, str) else value

        request = [endpoint, method, self.redact(url), plain(params or {}), plain(json_body), plain(data)]
        return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def _cached(self, key: str) -> requests.Response | None:
        if self.policy.cache_dir is None:
            return None
        path = Path(self.policy.cache_dir) / key[:2] / f"{key}.json"
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            return _response(entry["status"], entry["reason"], entry["headers"], entry["url"],
                             base64.b64decode(entry["body_b64"]))
        except (OSError, ValueError, KeyError, TypeError):  # absent, or a torn or foreign file: ask the provider
            return None

    def _store(self, key: str, response: requests.Response) -> None:
        if self.policy.cache_dir is None:
            return
        path = Path(self.policy.cache_dir) / key[:2] / f"{key}.json"
        entry = {"status": response.status_code, "reason": response.reason, "url": self.redact(response.url),
                 "headers": {k: self.redact(v) for k, v in response.headers.items()},
                 "body_b64": base64.b64encode(response.content).decode("ascii")}
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        temporary.write_text(json.dumps(entry), encoding="utf-8")
        os.replace(temporary, path)  # concurrent runs sharing the cache never see a torn entry


def _response(status: int, reason: str, headers: dict, url: str, content: bytes) -> requests.Response:
    """A response rebuilt from the cache as requests builds one (its text decodes the same way)."""
    response = requests.Response()
    response.status_code, response.reason, response.url = status, reason, url
    response.headers = CaseInsensitiveDict(headers)
    response.encoding = requests.utils.get_encoding_from_headers(response.headers)
    response._content, response._content_consumed = content, True
    return response


def _refuse_private(method: str, url: str, params) -> None:
    """Refuse a URL whose host, read as urllib3 reads it to connect, is at a non-public address."""
    try:
        host = parse_url(requests.Request(method, url, params=params).prepare().url).host
        addresses = _addresses(host.strip("[]")) if host else set()
    except (requests.exceptions.RequestException, LocationParseError, ValueError, UnicodeError, socket.gaierror):
        return  # a malformed URL, or a name that does not resolve: requests words the error as the reference does
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if not ip.is_global:
            raise PrivateAddress(
                f"refused: {host} is at {ip}, a private, loopback or reserved address; tirlab does not let a model's "
                "URL reach the local network")


def _addresses(host: str) -> set[str]:
    return {info[4][0] for info in socket.getaddrinfo(host, None)}
