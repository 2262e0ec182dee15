"""The live web tools' HTTP against local fake providers: retries with backoff on 429 and 5xx, the last failure
handed over as requests raises it, bounded reads, the shared cache (successes only, no keys), the run's caps on
calls and cost, and no model-named page on a private address."""

from __future__ import annotations

import json
import time

import pytest
import requests

import runtime.web_http as web_http
from runtime.web_http import PAGE, ResponseTooLarge, WebBudgetReached, WebHttp, WebPolicy, WebUsage
from tests.web_fakes import (FakeProviders, hang, huge_page, malformed_json, rate_limited, serpapi_body,
                             server_error, unauthorized)

KEY = "serpapi-KEY-for-http-tests"
OK = {"status": 200, "headers": {"Content-Type": "application/json"}, "body": json.dumps({"organic_results": []})}


@pytest.fixture
def fake():
    with FakeProviders() as providers:
        yield providers


def http(fake, **policy) -> WebHttp:
    policy = {"backoff_s": 0.01, "timeout_s": 5.0, **policy}
    return WebHttp(WebPolicy(endpoints=fake.endpoints, **policy), WebUsage(), secrets=[KEY])


def search(client: WebHttp, query: str = "q") -> requests.Response:
    return client.get("serpapi_search", client.endpoint("serpapi_search"), params={"api_key": KEY, "q": query},
                      timeout=15)


def test_429_and_5xx_are_retried_with_backoff_and_the_answer_is_the_last_response(fake):
    fake.serve("serpapi_search", rate_limited(), server_error(), OK)
    client = http(fake)
    response = search(client)
    assert response.status_code == 200 and response.json() == {"organic_results": []}
    assert len(fake.requests) == 3 and all(r["query"]["api_key"] == [KEY] for r in fake.requests)
    usage = client.usage
    assert (usage.requests["serpapi_search"], usage.retries["serpapi_search"], sum(usage.faults.values())) == (3, 2, 0)
    assert usage.cost["serpapi_search"] == pytest.approx(web_http.PRICES["serpapi_search"])


def test_retry_after_is_honoured(fake):
    fake.serve("serpapi_search", rate_limited(retry_after=1), OK)
    started = time.monotonic()
    assert search(http(fake)).status_code == 200
    assert time.monotonic() - started >= 0.9  # the provider asked for a second; backoff alone is 0.01 s


@pytest.mark.parametrize("failure, status", [(server_error, 500), (rate_limited, 429), (unauthorized, 401)])
def test_a_persistent_failure_is_handed_over_and_counted_once(fake, failure, status):
    fake.serve("serpapi_search", failure())
    client = http(fake)
    response = search(client)
    assert response.status_code == status
    assert len(fake.requests) == (1 if status == 401 else 3)  # a bad key is not retried
    assert client.usage.faults == {f"serpapi_search: HTTP {status}": 1} and not client.usage.cost


def test_a_hang_times_out_on_every_try_and_raises_as_requests_does(fake):
    fake.serve("serpapi_search", hang(30))
    client = http(fake, timeout_s=0.3)
    with pytest.raises(requests.exceptions.ReadTimeout, match="read timeout=0.3"):
        search(client)
    assert len(fake.requests) == 3 and client.usage.faults == {"serpapi_search: timeout": 1}


def test_a_dropped_connection_is_retried_then_raised(fake):
    fake.serve("serpapi_search", {"close": True}, {"close": True}, OK)
    assert search(http(fake)).status_code == 200
    fake.serve("serpapi_search", {"close": True})
    client = http(fake, attempts=2)
    with pytest.raises(requests.exceptions.ConnectionError):
        search(client)
    assert client.usage.faults == {"serpapi_search: connection": 1}


def test_a_body_past_the_cap_is_not_read(fake):
    fake.serve(PAGE, huge_page(3))
    client = http(fake, max_bytes=2 ** 20, allow_private=True)
    with pytest.raises(ResponseTooLarge, match="larger than 1 MiB"):
        client.get(PAGE, f"{fake.base}/page/huge", timeout=15)
    assert len(fake.requests) == 1 and client.usage.faults == {"page: ResponseTooLarge": 1}


def test_a_body_that_is_not_json_is_a_fault_the_caller_words(fake):
    fake.serve("serpapi_search", malformed_json())
    client = http(fake)
    response = search(client)
    with pytest.raises(ValueError):
        client.json("serpapi_search", response)
    assert client.usage.faults == {"serpapi_search: malformed JSON": 1}


def test_the_shared_cache_pays_once_keeps_no_key_and_no_failure(fake, tmp_path):
    fake.serve("serpapi_search", {**OK, "body": json.dumps(serpapi_body("cats"))})
    first = search(http(fake, cache_dir=tmp_path / "cache"), "cats")
    second_client = http(fake, cache_dir=tmp_path / "cache")
    second = search(second_client, "cats")
    assert len(fake.requests) == 1 and second_client.usage.cache_hits == {"serpapi_search": 1}
    assert (second.status_code, second.text, second.headers["Content-Type"]) == \
        (first.status_code, first.text, first.headers["Content-Type"])
    assert not second_client.usage.requests and not second_client.usage.cost  # a cache hit costs nothing
    stored = "".join(path.read_text() for path in (tmp_path / "cache").rglob("*.json"))
    assert stored and KEY not in stored
    fake.serve("serpapi_search", server_error())
    search(http(fake, cache_dir=tmp_path / "cache"), "dogs")
    search(http(fake, cache_dir=tmp_path / "cache"), "dogs")
    assert len(fake.requests) == 1 + 3 + 3  # a failure is asked again


def test_the_caps_stop_before_the_request_that_would_pass_them(fake):
    fake.serve("serpapi_search", OK)
    client = http(fake, max_calls=2)
    search(client, "a")
    search(client, "b")
    with pytest.raises(WebBudgetReached, match="cap of 2 web requests"):
        search(client, "c")
    assert len(fake.requests) == 2
    client = http(fake, max_cost=0.02)  # SerpAPI: $0.015 a search
    search(client, "a")
    with pytest.raises(WebBudgetReached, match=r"would pass \$0.02"):
        search(client, "b")
    assert len(fake.requests) == 3
    assert not issubclass(WebBudgetReached, Exception)  # no tool's `except Exception` turns it into a reply


def test_a_model_named_page_on_a_private_address_is_refused_and_so_is_a_redirect_there(fake, monkeypatch):
    fake.serve(PAGE, {"status": 200, "headers": {"Content-Type": "text/html"}, "body": "<p>inside</p>"})
    client = http(fake)
    with pytest.raises(requests.exceptions.InvalidURL, match="refused: 127.0.0.1 is at 127.0.0.1"):
        client.get(PAGE, f"{fake.base}/page/secret", timeout=15)
    assert not fake.requests and client.usage.faults == {"page: refused private address": 1}
    # the first hop passes as public; its redirect to localhost does not
    real = web_http._addresses
    monkeypatch.setattr(web_http, "_addresses", lambda host: {"93.184.216.34"} if host == "127.0.0.1" else real(host))
    port = fake.base.rsplit(":", 1)[1]
    fake.serve(PAGE, {"status": 302, "headers": {"Location": f"http://localhost:{port}/page/secret"}, "body": ""})
    with pytest.raises(requests.exceptions.InvalidURL, match="refused: localhost"):
        client.get(PAGE, f"{fake.base}/page/start", timeout=15)
    assert [r["path"] for r in fake.requests] == ["/page/start"]


def test_endpoints_can_be_pointed_elsewhere_by_name_only(monkeypatch):
    monkeypatch.setenv(web_http.ENDPOINTS_ENV, json.dumps({"serper_search": "http://proxy.local/search"}))
    assert WebPolicy().endpoints["serper_search"] == "http://proxy.local/search"
    monkeypatch.setenv(web_http.ENDPOINTS_ENV, json.dumps({"bing": "http://x"}))
    with pytest.raises(ValueError, match="unknown endpoint name"):
        WebPolicy()


def test_a_url_read_differently_by_two_parsers_is_judged_by_the_one_that_connects(fake):
    fake.serve(PAGE, {"status": 200, "headers": {"Content-Type": "text/html"}, "body": "<p>inside</p>"})
    client = http(fake)
    port = fake.base.rsplit(":", 1)[1]
    with pytest.raises(requests.exceptions.InvalidURL, match="refused: 127.0.0.1"):
        client.get(PAGE, f"http://127.0.0.1:{port}\\@example.com/page/secret", timeout=15)
    assert not fake.requests


def test_no_cookie_carries_from_one_call_to_the_next(fake):
    fake.serve(PAGE, {"status": 200, "headers": {"Content-Type": "text/html", "Set-Cookie": "meter=1; Path=/"},
                      "body": "<p>one</p>"})
    client = http(fake, allow_private=True)
    client.get(PAGE, f"{fake.base}/page/a", timeout=15)
    client.get(PAGE, f"{fake.base}/page/b", timeout=15)
    assert [r["headers"].get("Cookie") for r in fake.requests] == [None, None]


def test_every_5xx_is_retried_and_an_odd_retry_after_is_only_ignored(fake):
    fake.serve("serpapi_search", server_error(520), {**rate_limited(), "headers": {"Retry-After": "\u00b2"}}, OK)
    client = http(fake)
    assert search(client).status_code == 200 and len(fake.requests) == 3
