"""The fake provider server of tests/web_fakes.py: canned answers in order, the request log, hangs, dropped
connections, and the failure and page helpers."""

import json

import pytest
import requests

from tests import web_fakes as w


@pytest.fixture
def fake():
    with w.FakeProviders() as server:
        yield server


def test_endpoints_are_named_under_the_base(fake):
    assert fake.base.startswith("http://127.0.0.1:")
    assert set(fake.endpoints) == set(w.NAMES) == set(w.REAL_URLS)
    assert fake.endpoints["serper_search"] == fake.base + "/serper_search"
    assert fake.endpoints["jina_reader"] == fake.base + "/jina_reader/"


def test_answers_in_order_and_the_last_repeats_and_requests_are_logged(fake):
    fake.serve("serper_search", w.server_error(503), w.json_response(w.serper_search_body("q1")))
    codes = [requests.post(fake.endpoints["serper_search"], json={"q": "q1"}, headers={"X-API-KEY": "k"},
                           timeout=10).status_code for _ in range(3)]
    assert codes == [503, 200, 200]
    body = requests.post(fake.endpoints["serper_search"], json={"q": "q1"}, timeout=10).json()
    assert body["searchParameters"]["q"] == "q1" and body["organic"] and body["knowledgeGraph"]["title"]
    fake.serve("jina_reader", w.text_response(w.jina_text("T", "https://example.com/a")))
    page = requests.get(fake.endpoints["jina_reader"] + "https://example.com/a?x=1", timeout=10)
    assert page.text.startswith("Title: T")
    log = fake.requests
    assert [r["endpoint"] for r in log] == ["serper_search"] * 4 + ["jina_reader"]
    assert log[0]["method"] == "POST" and json.loads(log[0]["body"]) == {"q": "q1"}
    assert log[0]["headers"]["X-API-KEY"] == "k"
    assert log[-1]["path"] == "/jina_reader/https://example.com/a" and log[-1]["query"] == {"x": ["1"]}


def test_unknown_endpoint_and_unserved_endpoint_answer_404(fake):
    for url in (fake.base + "/nothing", fake.endpoints["serpapi_search"]):
        response = requests.get(url, params={"api_key": "k"}, timeout=10)
        assert response.status_code == 404 and "error" in response.json()
    assert fake.requests[1]["query"] == {"api_key": ["k"]}


def test_hang_makes_a_client_time_out(fake):
    fake.serve("page", w.hang(30))
    with pytest.raises(requests.exceptions.Timeout):
        requests.get(fake.base + "/page/slow", timeout=0.3)
    w.wait_for(lambda: len(fake.requests) == 1, what="the hanging request to be logged")


def test_drop_closes_without_a_response(fake):
    fake.serve("imgbb_upload", w.drop(), w.json_response(w.imgbb_body("https://i.ibb.co/x/y.png")))
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(fake.endpoints["imgbb_upload"], params={"key": "k"}, data={"image": "aGk="}, timeout=10)
    second = requests.post(fake.endpoints["imgbb_upload"], params={"key": "k"}, data={"image": "aGk="}, timeout=10)
    assert second.json()["data"]["url"] == "https://i.ibb.co/x/y.png"
    assert fake.requests[1]["body"] == b"image=aGk%3D"


def test_failure_helpers(fake):
    for response, status in ((w.unauthorized(), 401), (w.rate_limited(retry_after=7), 429), (w.server_error(), 500),
                             (w.not_enough_credits(), 400)):
        fake.serve("serper_lens", response)
        answer = requests.post(fake.endpoints["serper_lens"], json={}, timeout=10)
        assert answer.status_code == status
    assert answer.json()["message"] == "Not enough credits"
    fake.serve("serper_lens", w.rate_limited(retry_after=7))
    assert requests.post(fake.endpoints["serper_lens"], timeout=10).headers["Retry-After"] == "7"
    fake.serve("serper_lens", w.malformed_json())
    with pytest.raises(ValueError):
        requests.post(fake.endpoints["serper_lens"], timeout=10).json()


def test_pages_huge_and_latin1(fake):
    fake.serve("page", w.huge_page(1.5), w.latin1_page())
    big = requests.get(fake.base + "/page/big", timeout=30)
    assert 1.4e6 < len(big.content) <= 1.5 * 1024 * 1024 and big.headers["Content-Type"].startswith("text/html")
    latin = requests.get(fake.base + "/page/latin", timeout=10)
    assert "charset" not in latin.headers["Content-Type"]
    assert b'<meta charset="windows-1252">' in latin.content
    assert "Café Zürich".encode("cp1252") in latin.content and "é".encode("utf-8") not in latin.content


def test_success_bodies_have_the_documented_fields():
    assert {"searchParameters", "knowledgeGraph", "organic", "peopleAlsoAsk", "relatedSearches", "credits"} <= set(
        w.serper_search_body())
    assert {"title", "source", "link", "imageUrl", "thumbnailUrl"} <= set(w.serper_lens_body()["organic"][0])
    serpapi = w.serpapi_body()
    assert {"title", "link", "displayed_link", "snippet"} <= set(serpapi["organic_results"][0])
    assert serpapi["search_information"]["total_results"] == 4340000000
    assert w.imgbb_body("u")["data"]["url"] == "u" and w.imgbb_body()["success"] is True
    assert {"lat", "lon", "name", "country"} <= set(w.geocode_body()[0]) and "lat" not in w.geocode_body(lat=None)[0]
    assert {"temp", "feels_like", "temp_min", "temp_max", "humidity", "pressure"} <= set(w.weather_body()["main"])
    assert "main" not in w.weather_body(main=False)


def test_redirect_rewrites_real_urls_only_and_clamps_timeouts(fake):
    fake.serve("serpapi_search", w.json_response(w.serpapi_body()))
    fake.serve("page", w.text_response("hello"))
    redirect = w.Redirect(requests, fake, max_timeout_s=5)
    assert redirect.get("https://serpapi.com/search", params={"q": "coffee"}, timeout=15).json()["organic_results"]
    assert redirect.get(fake.base + "/page/x", timeout=15).text == "hello"
    assert redirect.exceptions is requests.exceptions
    assert [(c["url_used"], c["timeout"], c["timeout_used"]) for c in redirect.calls] == [
        (fake.endpoints["serpapi_search"], 15, 5), (fake.base + "/page/x", 15, 5)]
