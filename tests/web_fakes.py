"""A fake of the web providers the benchmark tools call (Serper search and Lens, ImgBB, Jina Reader, SerpAPI,
OpenWeather, arbitrary pages), for tests and for the reference generators of the web tools. Standard library only:
scripts/reference/*_web.py load this file by path inside their scratch venvs.

    with FakeProviders() as fake:
        fake.serve("serper_search", serper_search_body(), server_error())  # first answer, then the last repeats
        url = fake.endpoints["serper_search"]                               # f"{fake.base}/serper_search"
        ...
        fake.requests  # what arrived, in order: endpoint, method, path, target (the raw request target),
                       # query (parsed), headers, body (bytes)

A response is a dict: "status" (default 200), "headers", and the body as "body" (str, sent as UTF-8) or
"body_b64" (bytes), "repeat" (the body sent that many times over, for large pages), "hang_s" (seconds to wait
before answering, so that a client times out) or "close" (drop the connection without any response). The response
dicts are plain JSON, so cases files hold them as they are served.

Each endpoint is the first segment of the path: `/serper_search`, `/jina_reader/<page url>`, `/page/<anything>`.
A request to an endpoint nothing was served for gets 404 with a JSON body. The port is chosen by the system (the
ephemeral range, five digits on Linux), so `base` is always 22 characters long: reference texts truncated after a
URL keep their length when `base` is written back into them.
"""

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

NAMES = ("serper_search", "serper_lens", "imgbb_upload", "jina_reader", "serpapi_search", "openweather_geocode",
         "openweather_current")
REAL_URLS = {
    "serper_search": "https://google.serper.dev/search",
    "serper_lens": "https://google.serper.dev/lens",
    "imgbb_upload": "https://api.imgbb.com/1/upload",
    "jina_reader": "https://r.jina.ai/",
    "serpapi_search": "https://serpapi.com/search",
    "openweather_geocode": "http://api.openweathermap.org/geo/1.0/direct",
    "openweather_current": "https://api.openweathermap.org/data/2.5/weather",
}


class FakeProviders:
    def __init__(self):
        self._lock = threading.Lock()
        self._responses: dict[str, list[dict]] = {}
        self._served: dict[str, int] = {}
        self._requests: list[dict] = []
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.endpoints = {name: f"{self.base}/{name}" for name in NAMES}
        self.endpoints["jina_reader"] += "/"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stopping.set()  # wakes the handlers that hang
        self._server.shutdown()
        self._server.server_close()
        return False

    def serve(self, name: str, *responses: dict) -> None:
        """Sets the answers of endpoint `name`, in order; the last one repeats. Restarts its count."""
        with self._lock:
            self._responses[name] = [dict(r) for r in responses]
            self._served[name] = 0

    def reset(self) -> None:
        """Forgets every served response and every request."""
        with self._lock:
            self._responses.clear()
            self._served.clear()
            self._requests.clear()

    @property
    def requests(self) -> list[dict]:
        with self._lock:
            return list(self._requests)

    def _next(self, name: str, request: dict) -> dict:
        with self._lock:
            self._requests.append(request)
            answers = self._responses.get(name)
            if not answers:
                return {"status": 404, "headers": {"Content-Type": "application/json"},
                        "body": json.dumps({"error": f"no response served for endpoint {name!r}"})}
            k = self._served[name]
            self._served[name] = k + 1
            return answers[min(k, len(answers) - 1)]


def _handler(fake: FakeProviders):
    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            parts = urlsplit(self.path)
            name = parts.path.lstrip("/").split("/", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            response = fake._next(name, {
                "endpoint": name, "method": self.command, "path": parts.path, "target": self.path,
                "query": parse_qs(parts.query, keep_blank_values=True), "headers": dict(self.headers.items()),
                "body": body})
            if response.get("hang_s"):
                fake._stopping.wait(response["hang_s"])
            if response.get("close"):
                self.close_connection = True
                return
            payload = (base64.b64decode(response["body_b64"]) if "body_b64" in response
                       else response.get("body", "").encode("utf-8")) * int(response.get("repeat", 1))
            try:
                self.send_response(int(response.get("status", 200)))
                for key, value in response.get("headers", {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                pass

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, *args):
            pass

    return Handler


# --- responses -------------------------------------------------------------------------------------------------

JSON = {"Content-Type": "application/json; charset=utf-8"}


def json_response(data, status: int = 200, **extra) -> dict:
    return {"status": status, "headers": dict(JSON), "body": json.dumps(data, ensure_ascii=False), **extra}


def unauthorized(message: str = "Unauthorized.") -> dict:
    """401; one generic JSON error shape for every provider ({"message", "statusCode"}, as Serper answers)."""
    return json_response({"message": message, "statusCode": 401}, 401)


def rate_limited(retry_after: int | None = None) -> dict:
    response = json_response({"message": "Too many requests.", "statusCode": 429}, 429)
    if retry_after is not None:
        response["headers"]["Retry-After"] = str(retry_after)
    return response


def server_error(status: int = 500) -> dict:
    return {"status": status, "headers": {"Content-Type": "text/html"},
            "body": f"<html><body><h1>{status} Server Error</h1></body></html>"}


def not_enough_credits() -> dict:
    """What Serper answers when the account has no credits left."""
    return json_response({"message": "Not enough credits", "statusCode": 400}, 400)


def hang(seconds: float) -> dict:
    """An answer that comes only after `seconds` (a 200 with an empty JSON object, if anyone still listens)."""
    return json_response({}, hang_s=seconds)


def drop() -> dict:
    """The connection closed without any response."""
    return {"close": True}


def malformed_json() -> dict:
    return {"status": 200, "headers": dict(JSON), "body": '{"organic": [{"title": "cut off'}


def html_page(title: str, body_html: str, charset: str = "utf-8") -> dict:
    return {"status": 200, "headers": {"Content-Type": f"text/html; charset={charset}"},
            "body": f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{body_html}</body></html>"}


def huge_page(megabytes: float) -> dict:
    """A 200 text/html page of about `megabytes` MB (one paragraph repeated)."""
    chunk = "<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.</p>\n"
    return {"status": 200, "headers": {"Content-Type": "text/html; charset=utf-8"}, "body": chunk,
            "repeat": max(1, int(megabytes * 1024 * 1024 / len(chunk)))}


def latin1_page() -> dict:
    """A windows-1252 page with non-ASCII text, its charset in a meta tag only (the header names no charset)."""
    html = ('<html><head><meta charset="windows-1252"><title>Café Zürich – Menü</title></head>'
            "<body><h1>Crème brûlée</h1><p>Prix: 12€ – très «bon» à Genève.</p></body></html>")
    return {"status": 200, "headers": {"Content-Type": "text/html"},
            "body_b64": base64.b64encode(html.encode("cp1252")).decode("ascii")}


def text_response(text: str, content_type: str = "text/plain; charset=utf-8", status: int = 200) -> dict:
    return {"status": status, "headers": {"Content-Type": content_type}, "body": text}


# --- success bodies in each provider's documented shape --------------------------------------------------------

def organic_item(position: int, title: str | None = None, link: str | None = None, snippet: str | None = None,
                 **extra) -> dict:
    """One Serper organic result (fields left out when given None)."""
    item = {"title": title if title is not None else f"Result {position}",
            "link": link if link is not None else f"https://example.com/{position}",
            "snippet": snippet if snippet is not None else f"Snippet of result {position}.",
            "position": position, **extra}
    return {k: v for k, v in item.items() if v is not None}


def serper_search_body(query: str = "eiffel tower", organic=None, knowledge_graph=None, people_also_ask=None,
                       answer_box=None, related=None, gl: str = "us", hl: str = "en") -> dict:
    """Serper /search: searchParameters, knowledgeGraph, answerBox, organic, peopleAlsoAsk, relatedSearches,
    credits. Arguments left None get realistic defaults; pass [] or {} to have a part empty."""
    body = {"searchParameters": {"q": query, "gl": gl, "hl": hl, "autocorrect": True, "page": 1, "type": "search",
                                 "engine": "google"}}
    body["knowledgeGraph"] = knowledge_graph if knowledge_graph is not None else {
        "title": "Eiffel Tower", "type": "Tower", "website": "https://www.toureiffel.paris/",
        "imageUrl": "https://encrypted-tbn0.gstatic.com/images?q=tbn:eiffel",
        "description": "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.",
        "descriptionSource": "Wikipedia", "descriptionLink": "https://en.wikipedia.org/wiki/Eiffel_Tower",
        "attributes": {"Height": "330 m", "Opened": "March 31, 1889"}}
    if answer_box is not None:
        body["answerBox"] = answer_box
    body["organic"] = organic if organic is not None else [
        organic_item(1, "Eiffel Tower - Wikipedia", "https://en.wikipedia.org/wiki/Eiffel_Tower",
                     "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris.",
                     sitelinks=[{"title": "History", "link": "https://en.wikipedia.org/wiki/Eiffel_Tower#History"}]),
        organic_item(2, "Tour Eiffel - Official website", "https://www.toureiffel.paris/en",
                     "Buy your tickets online.", date="Mar 3, 2025")]
    body["peopleAlsoAsk"] = people_also_ask if people_also_ask is not None else [
        {"question": "How tall is the Eiffel Tower?", "snippet": "330 metres (1,083 ft).",
         "title": "Eiffel Tower - Wikipedia", "link": "https://en.wikipedia.org/wiki/Eiffel_Tower"}]
    body["relatedSearches"] = related if related is not None else [{"query": "eiffel tower height"},
                                                                  {"query": "eiffel tower tickets"}]
    body["credits"] = 1
    return body


def lens_item(position: int, title: str | None = None, source: str | None = None, link: str | None = None,
              **extra) -> dict:
    item = {"title": title if title is not None else f"Match {position}",
            "source": source if source is not None else "Example",
            "link": link if link is not None else f"https://example.com/match/{position}",
            "imageUrl": f"https://example.com/match/{position}.jpg",
            "thumbnailUrl": f"https://encrypted-tbn1.gstatic.com/images?q=tbn:match{position}", **extra}
    return {k: v for k, v in item.items() if v is not None}


def serper_lens_body(image_url: str = "https://i.ibb.co/abc123/image.png", organic=None) -> dict:
    """Serper /lens: searchParameters, organic (title, source, link, imageUrl, thumbnailUrl), credits."""
    return {"searchParameters": {"url": image_url, "type": "lens", "engine": "google"},
            "organic": organic if organic is not None else [lens_item(1, "Red flag on a pole", "Wikimedia Commons"),
                                                            lens_item(2, "Flag - stock photo", "Shutterstock")],
            "credits": 3}


def serpapi_item(position: int, title: str | None = None, link: str | None = None, snippet: str | None = None,
                 displayed_link: str | None = None, **extra) -> dict:
    link = link if link is not None else f"https://example.org/page{position}"
    item = {"position": position, "title": title if title is not None else f"Result {position}", "link": link,
            "redirect_link": f"https://www.google.com/url?q={link}",
            "displayed_link": displayed_link if displayed_link is not None else f"example.org › page{position}",
            "favicon": "https://serpapi.com/searches/favicon.png",
            "snippet": snippet if snippet is not None else f"Snippet of result {position}.",
            "snippet_highlighted_words": ["result"], "source": "Example", **extra}
    return {k: v for k, v in item.items() if v is not None}


def serpapi_body(query: str = "coffee", organic_results=None, total_results=4340000000) -> dict:
    """SerpAPI google engine: search_metadata, search_parameters, search_information (total_results),
    organic_results (title, link, displayed_link, snippet, ...). total_results None leaves it out."""
    information = {"organic_results_state": "Results for exact spelling", "query_displayed": query,
                   "time_taken_displayed": 0.41}
    if total_results is not None:
        information["total_results"] = total_results
    return {"search_metadata": {"id": "6650c0ffee", "status": "Success",
                                "json_endpoint": "https://serpapi.com/searches/0129b1f5/6650c0ffee.json",
                                "created_at": "2026-11-28 08:00:00 UTC", "total_time_taken": 1.11},
            "search_parameters": {"engine": "google", "q": query, "google_domain": "google.com", "device": "desktop"},
            "search_information": information,
            "organic_results": organic_results if organic_results is not None else [
                serpapi_item(1, "Coffee - Wikipedia", "https://en.wikipedia.org/wiki/Coffee",
                             "Coffee is a beverage brewed from roasted coffee beans.",
                             "en.wikipedia.org › wiki › Coffee"),
                serpapi_item(2)]}


def imgbb_body(url: str = "https://i.ibb.co/abc123/image.png") -> dict:
    """ImgBB upload: {"data": {..., "url": ...}, "success": true, "status": 200}."""
    name = url.rsplit("/", 1)[-1]
    return {"data": {"id": "abc123", "title": name.rsplit(".", 1)[0], "url_viewer": "https://ibb.co/abc123",
                     "url": url, "display_url": url, "width": 8, "height": 6, "size": 120, "time": 1764316800,
                     "expiration": 0,
                     "image": {"filename": name, "name": name.rsplit(".", 1)[0], "mime": "image/png",
                               "extension": "png", "url": url},
                     "thumb": {"filename": name, "mime": "image/png", "extension": "png", "url": url},
                     "delete_url": "https://ibb.co/abc123/deadbeef"},
            "success": True, "status": 200}


def geocode_body(name: str = "Paris", lat=48.8588897, lon=2.3200410, country: str = "FR", state="Ile-de-France",
                 **extra) -> list:
    """OpenWeather geocoding (direct): a list of places; lat or lon None leaves it out."""
    place = {"name": name, "local_names": {"en": name, "fr": name}, "lat": lat, "lon": lon, "country": country,
             "state": state, **extra}
    return [{k: v for k, v in place.items() if v is not None}]


def weather_body(temp=18.4, feels_like=17.9, temp_min=16.1, temp_max=20.3, humidity=64, pressure=1015,
                 description: str = "moderate rain", wind_speed=3.6, name: str = "Paris", lat=48.8589, lon=2.32,
                 main: bool = True) -> dict:
    """OpenWeather current weather (units=metric); main=False leaves the "main" block out."""
    body = {"coord": {"lon": lon, "lat": lat},
            "weather": [{"id": 501, "main": "Rain", "description": description, "icon": "10d"}],
            "base": "stations",
            "main": {"temp": temp, "feels_like": feels_like, "temp_min": temp_min, "temp_max": temp_max,
                     "pressure": pressure, "humidity": humidity, "sea_level": pressure, "grnd_level": pressure - 9},
            "visibility": 10000, "wind": {"speed": wind_speed, "deg": 70, "gust": 5.1}, "clouds": {"all": 75},
            "dt": 1764316800, "sys": {"type": 2, "id": 2041230, "country": "FR", "sunrise": 1764314000,
                                      "sunset": 1764345000},
            "timezone": 3600, "id": 2988507, "name": name, "cod": 200}
    if not main:
        del body["main"]
    return body


def jina_text(title: str = "Example Domain", url: str = "https://example.com/", markdown: str | None = None) -> str:
    """Jina Reader's plain-text answer: Title, URL Source, Markdown Content."""
    markdown = markdown if markdown is not None else (
        "This domain is for use in illustrative examples in documents.\n\n[More information...]"
        "(https://www.iana.org/domains/example)")
    return f"Title: {title}\n\nURL Source: {url}\n\nMarkdown Content:\n{markdown}\n"


def wait_for(predicate, timeout_s: float = 30.0, what: str = "a condition") -> None:
    """Polls `predicate` until it is true; fails naming `what` after `timeout_s`."""
    end = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Redirect:
    """Stands in for the `requests` module inside code that hard-codes the providers' URLs: get/post/request to a
    URL starting with one of `REAL_URLS` go to the fake's endpoint instead, with the timeout clamped to
    `max_timeout_s` when given; everything else is the real module. `calls` records each call's method, the URL
    and timeout the code asked for, the URL and timeout used."""

    def __init__(self, real, fake: FakeProviders, max_timeout_s: float | None = None):
        self._real, self._fake, self.max_timeout_s, self.calls = real, fake, max_timeout_s, []

    def __getattr__(self, name):
        return getattr(self._real, name)

    def _rewrite(self, url: str) -> str:
        for name, real in sorted(REAL_URLS.items(), key=lambda item: -len(item[1])):
            if isinstance(url, str) and url.startswith(real):
                return self._fake.endpoints[name] + url[len(real):]
        return url

    def request(self, method, url, **kwargs):
        asked = kwargs.get("timeout")
        if self.max_timeout_s is not None and asked is not None:
            kwargs["timeout"] = min(asked, self.max_timeout_s)
        self.calls.append({"method": method.upper(), "url": url, "url_used": self._rewrite(url), "timeout": asked,
                           "timeout_used": kwargs.get("timeout")})
        return self._real.request(method, self._rewrite(url), **kwargs)

    def get(self, url, params=None, **kwargs):
        return self.request("get", url, params=params, **kwargs)

    def post(self, url, data=None, json=None, **kwargs):
        return self.request("post", url, data=data, json=json, **kwargs)
