"""Agentic-MME's search tools against the live providers, as its runners call them: Serper's Google search, Serper's
Lens after an upload of the image to ImgBB, and Jina's reader (search_tools.py at ChoS3nE11ven/Agentic-MME
5e5dfbd), each reply the text the runner hands the model: the compact `context` of a search, the page's text, or
"Error: " and the runner's wording of the failure (`runner_error`, the except branch of both runners).

Requests, payloads, timeouts (45 s) and reply formatting follow the reference line by line; the vectors in
tests/eval/benchmarks/data/ prove it (their generators: docs/testing.md). Departures, all deliberate: requests
go through `runtime.web_http` (429 is retried as well as 5xx, timeouts and dropped connections; the shared cache;
the run's budget), the image a Lens call names is uploaded as PNG (the runners upload the file on their disk), and
a key never reaches the model: a provider's reply that quotes one has it replaced by "***".
"""

from __future__ import annotations

import base64
import io

import numpy as np
import requests
from PIL import Image

from runtime.web import LiveProvider
from runtime.web_http import WebHttp
from tools.toolset import Reply

TIMEOUT_S = 45  # SearchConfig.request_timeout_s
LENS_NUM = 5  # SearchTools.google_lens_search(num=5)
KEYS = {"SERPER_API_KEY": "google_search and google_lens_search, through Serper.dev",
        "IMGBB_API_KEY": "google_lens_search, which uploads the image to ImgBB for a public URL"}
OPTIONAL_KEYS = {"JINA_API_KEY": "fetch_webpage reads pages through Jina's reader keyless, at its free rate limit"}


def runner_error(message: str) -> str:
    """The runners' reply to a search call that raised (both runners' except branch), after "Error: "."""
    lower = message.lower()
    if "not enough credits" in lower:
        return ("Serper API credits exhausted (Not enough credits). Please top up Serper credits or disable search "
                "for this run.")
    if "504" in message or "timeout" in lower:
        return "Search service timeout. Please try again or use a different approach."
    if "SSL" in message or "ssl" in lower:
        return "Network error accessing the URL. The website may be unavailable."
    return f"Search failed: {message[:200]}"


class SearchClient:
    """The runners' `SearchTools` (SearchConfig from the environment: SERPER_API_KEY, IMGBB_API_KEY, JINA_API_KEY;
    gl "us" and hl "en" by default, no cache of its own). Each method returns the reply the model reads."""

    def __init__(self, http: WebHttp, keys: dict[str, str]):
        self.http = http
        self.serper_key, self.imgbb_key = keys["SERPER_API_KEY"], keys["IMGBB_API_KEY"]
        self.jina_key = keys.get("JINA_API_KEY")

    def google_search(self, query, gl, hl) -> Reply:
        payload = {"q": query, "gl": gl, "hl": hl, "autocorrect": True, "page": 1, "type": "search"}
        return self._reply(lambda: compact_search(self._serper("serper_search", payload)))

    def google_lens_search(self, image: np.ndarray) -> Reply:
        def search() -> str:
            url = self._upload(image)
            return compact_lens(self._serper("serper_lens", {"url": url, "page": 1, "num": LENS_NUM}))

        return self._reply(search)

    def google_lens_search_path(self, path: str) -> Reply:
        """A Lens call on a file the workspace does not hold: ensure_public_image_url's FileNotFoundError."""
        return self._reply(lambda: _raise(FileNotFoundError(path)))

    def fetch_webpage(self, url: str) -> Reply:
        """The page's whole text (the tool cuts it at the call's max_chars, as SearchTools.fetch_webpage does)."""
        return self._reply(lambda: self._jina_read(url))

    def _reply(self, run) -> Reply:
        try:
            return Reply(run())
        except Exception as err:  # noqa: BLE001 - the runners answer every failure with their error text
            return Reply(f"Error: {runner_error(self.http.redact(str(err)))}", error=True)

    def _serper(self, endpoint: str, payload: dict):
        """_post_json_with_retry: the retries on 5xx, timeouts and dropped connections are WebHttp's."""
        url = self.http.endpoint(endpoint)
        headers = {"X-API-KEY": self.serper_key, "Content-Type": "application/json"}
        attempts = self.http.policy.attempts
        try:
            response = self.http.post(endpoint, url, headers=headers, json=payload, timeout=TIMEOUT_S)
        except requests.exceptions.Timeout:
            raise RuntimeError(f"Request timeout after {attempts} attempts: {url}") from None
        except requests.exceptions.ConnectionError as err:
            raise RuntimeError(f"Connection error after {attempts} attempts: {err}") from None
        if response.status_code >= 400:
            raise RuntimeError(f"HTTP {response.status_code} from {url}: {response.text[:500]}")
        return self.http.json(endpoint, response)

    def _upload(self, image: np.ndarray) -> str:
        """ensure_public_image_url and imgbb_upload_image (one try in the reference; WebHttp's retries here). The
        reference's reply without IMGBB_API_KEY never happens: --web live refuses to start without it."""
        buffer = io.BytesIO()
        Image.fromarray(np.asarray(image, dtype=np.uint8)).save(buffer, format="PNG")
        response = self.http.post("imgbb_upload", self.http.endpoint("imgbb_upload"), params={"key": self.imgbb_key},
                                  data={"image": base64.b64encode(buffer.getvalue()).decode("ascii")},
                                  timeout=TIMEOUT_S)
        if response.status_code >= 400:
            raise RuntimeError(f"ImgBB upload failed (HTTP {response.status_code}): {response.text[:500]}")
        uploaded = self.http.json("imgbb_upload", response)
        try:
            return uploaded["data"]["url"]
        except Exception as err:
            raise RuntimeError(f"ImgBB response missing data.url: {uploaded}") from err

    def _jina_read(self, url: str) -> str:
        if not (url.startswith("http://") or url.startswith("https://")):
            raise ValueError(f"url must be http(s), got: {url}")
        headers = {"Authorization": f"Bearer {self.jina_key}"} if self.jina_key else {}
        try:
            response = self.http.get("jina_reader", self.http.endpoint("jina_reader") + url, headers=headers,
                                     timeout=TIMEOUT_S)
        except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as err:
            raise RuntimeError(f"Jina Reader failed after {self.http.policy.attempts} attempts: {err}") from None
        if response.status_code >= 400:
            raise RuntimeError(f"Jina Reader failed (HTTP {response.status_code}): {response.text[:300]}")
        return response.text


def compact_search(resp) -> str:
    """_compact_serper_search(resp, max_items=5): the context a google_search hands the model."""
    lines = []
    kg = resp.get("knowledgeGraph")
    if isinstance(kg, dict):
        title, desc, website = kg.get("title"), kg.get("description"), kg.get("website")
        if title:
            lines.append(f"[KnowledgeGraph] {title}")
        if desc:
            lines.append(f"  - {desc}")
        if website:
            lines.append(f"  - {website}")
        lines.append("")
    organic = resp.get("organic") or []
    if isinstance(organic, list):
        lines.append("[Organic]")
        for i, item in enumerate(organic[:5], start=1):
            if not isinstance(item, dict):
                continue
            t = (item.get("title") or "").strip()
            link = (item.get("link") or "").strip()
            snip = (item.get("snippet") or "").strip()
            date = (item.get("date") or "").strip()
            if not (t or link or snip):
                continue
            head = f"{i}. {t}" if t else f"{i}."
            if date:
                head += f" ({date})"
            lines.append(head)
            if link:
                lines.append(f"   {link}")
            if snip:
                lines.append(f"   {snip}")
        lines.append("")
    paa = resp.get("peopleAlsoAsk") or []
    if isinstance(paa, list) and paa:
        lines.append("[PeopleAlsoAsk]")
        for item in paa[:5]:
            if not isinstance(item, dict):
                continue
            q = (item.get("question") or "").strip()
            snip = (item.get("snippet") or "").strip()
            link = (item.get("link") or "").strip()
            if q:
                lines.append(f"- Q: {q}")
                if snip:
                    lines.append(f"  A: {snip}")
                if link:
                    lines.append(f"  {link}")
        lines.append("")
    return "\n".join(lines).strip()


def compact_lens(resp) -> str:
    """_compact_serper_lens(resp, max_items=5): the context a google_lens_search hands the model."""
    lines = []
    organic = resp.get("organic") or []
    if isinstance(organic, list):
        lines.append("[Lens Organic]")
        for i, item in enumerate(organic[:5], start=1):
            if not isinstance(item, dict):
                continue
            title = (item.get("title") or "").strip()
            source = (item.get("source") or "").strip()
            link = (item.get("link") or "").strip()
            thumbnail_url = (item.get("thumbnailUrl") or "").strip()
            if not (title or link):
                continue
            head = f"{i}. {title}" if title else f"{i}."
            if source:
                head += f" [{source}]"
            lines.append(head)
            if link:
                lines.append(f"   {link}")
            if thumbnail_url:
                lines.append(f"   thumbnailUrl: {thumbnail_url}")
        lines.append("")
    return "\n".join(lines).strip()


def _raise(err: Exception):
    raise err


PROVIDER = LiveProvider("Agentic-MME", KEYS, OPTIONAL_KEYS, SearchClient)
