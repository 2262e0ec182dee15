"""Live web tools end to end, against fake providers on 127.0.0.1: a scripted model runs each suite's fixture with
`--web live`; every provider reply is recorded, a replay of that record (no keys, no providers) gives every tool
reply again, a provider fault reaches the model as the runner's error text, the web budget stops a run cleanly
and a resume finishes it, and no key appears in anything the runs write or print."""

from __future__ import annotations

import json

import pytest

import runtime.web_http as web_http
from eval.backends import Completion
from eval.config import EvalConfig
from eval.run_vllm import evaluate, resolve
from eval.rundir import RunDir
from runtime.trajectory import message_text
from runtime.web_http import WebBudgetReached
from tests.web_fakes import (FakeProviders, geocode_body, imgbb_body, latin1_page, serpapi_body, serper_lens_body,
                             serper_search_body, server_error, unauthorized, weather_body)

KEYS = {"SERP_API_KEY": "serpapi-KEY-e2e-5829", "OPENWEATHER_API_KEY": "openweather-KEY-e2e-1177",
        "SERPER_API_KEY": "serper-KEY-e2e-3310", "IMGBB_API_KEY": "imgbb-KEY-e2e-9054",
        "JINA_API_KEY": "jina-KEY-e2e-6642"}


def call(name: str, **arguments) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


def ok(body) -> dict:
    return {"status": 200, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}


class Scripted:
    """The evaluated model: each task's replies in order, then a plain answer."""
    name = "scripted"

    def __init__(self, script: dict):
        self.script, self.done = {k: list(v) for k, v in script.items()}, []

    def submit(self, key, prompt, sampling):
        queue = self.script.get(key.split(":", 2)[2]) or []
        self.done.append((key, Completion(queue.pop(0) if queue else "<answer>red</answer>")))

    def poll(self, timeout=None):
        done, self.done = self.done, []
        return done

    def in_flight(self):
        return len(self.done)

    def close(self):
        pass


@pytest.fixture
def fake(monkeypatch, tmp_path):
    with FakeProviders() as providers:
        monkeypatch.setenv(web_http.ENDPOINTS_ENV, json.dumps(providers.endpoints))
        monkeypatch.setenv(web_http.ALLOW_PRIVATE_ENV, "1")
        monkeypatch.setattr(web_http, "BACKOFF_S", 0.01)
        monkeypatch.setenv("TIRLAB_CACHE", str(tmp_path / "tirlab-cache"))
        for name, value in KEYS.items():
            monkeypatch.setenv(name, value)
        yield providers


def tool_replies(run) -> dict:
    """Every tool message of every episode, by task."""
    return {r["id"]: [message_text(m) for m in r["trajectory"]["messages"] if m["role"] == "tool"]
            for r in RunDir(run).records() if r.get("trajectory")}


def no_key_in(paths, printed: str) -> None:
    for value in KEYS.values():
        assert value not in printed
        for root in paths:
            for path in [root] if root.is_file() else root.rglob("*"):
                if path.is_file():
                    assert value.encode() not in path.read_bytes(), (value, path)


def replay_without_keys(monkeypatch, config: EvalConfig, script: dict, recording) -> dict:
    for name in KEYS:
        monkeypatch.delenv(name)
    monkeypatch.delenv(web_http.ENDPOINTS_ENV)
    run = config.out + "-replay"
    evaluate(resolve(EvalConfig(**{**vars_of(config), "web": "replay", "web_replay": [str(recording)], "out": run,
                                   "web_cache": None})), backend=Scripted(script))
    return tool_replies(run)


def vars_of(config: EvalConfig) -> dict:
    from dataclasses import fields

    return {f.name: getattr(config, f.name) for f in fields(EvalConfig) if f.name in config.explicit}


@pytest.fixture(scope="module")
def vtb_data(tmp_path_factory):
    from eval.benchmarks.visualtoolbench.fixture import write_fixture

    return write_fixture(tmp_path_factory.mktemp("vtb") / "VisualToolBench")


@pytest.fixture(scope="module")
def amme_data(tmp_path_factory):
    from eval.benchmarks.agentic_mme.fixture import write_fixture

    return write_fixture(tmp_path_factory.mktemp("amme") / "Agentic-MME")


def vtb_script(fake, task: str = "vtb_fixture_s0") -> dict:
    return {task: [call("google_search", query="red things", num_results=3),
                               call("browser_get_page_text", url=f"{fake.base}/page/article"),
                               call("historical_weather", location="Paris", date="2024-05-01"),
                               "The answer is red."]}


def vtb_config(data, out, **settings) -> EvalConfig:
    return resolve(EvalConfig(suite="visualtoolbench", data_dir=str(data), model="scripted-model",
                              preset="qwen2.5-vl", judge_model="none", out=str(out), max_active=1, web="live",
                              **settings))


def test_visualtoolbench_live_run_records_replays_exactly_and_keeps_keys_secret(fake, vtb_data, tmp_path,
                                                                               monkeypatch, capfd):
    fake.serve("serpapi_search", ok(serpapi_body("red things")))
    fake.serve("page", latin1_page())
    fake.serve("openweather_geocode", unauthorized())  # the weather provider refuses the key
    config = vtb_config(vtb_data, tmp_path / "live", web_cache=str(tmp_path / "web-cache"))
    evaluate(config, backend=Scripted(vtb_script(fake)))
    live = tool_replies(config.out)
    search, page, weather = live["vtb_fixture_s0"]
    assert search.startswith("{'results': [{'title': ") and "'status': 'success'" in search
    assert "'status': 'success'" in page and "\\ufffd" not in page and "é" in page  # decoded by its meta charset
    assert weather.startswith("{'location': 'Paris', 'date': '2024-05-01', 'status': 'error', 'error': '401 Client "
                              "Error") and "appid=***" in weather  # the runner's error dict, the key redacted
    sent = {r["endpoint"]: r for r in fake.requests}
    assert sent["serpapi_search"]["query"] == {"api_key": [KEYS["SERP_API_KEY"]], "q": ["red things"], "num": ["3"],
                                               "engine": ["google"]}
    recording = RunDir(config.out).web_record_path
    lines = [json.loads(line) for line in recording.read_text().splitlines()]
    assert [(line["tool"], line.get("error", False), bool(line.get("fault"))) for line in lines] == [
        ("google_search", False, False), ("browser_get_page_text", False, False), ("historical_weather", True, True)]
    report = (tmp_path / "live" / "report.md").read_text()
    assert "## Web calls" in report and "| openweather_geocode | 1 | 0 | 0 | HTTP 401 x1 |" in report
    requests_made = len(fake.requests)
    replayed = replay_without_keys(monkeypatch, config, vtb_script(fake), recording)
    assert replayed == live and len(fake.requests) == requests_made
    no_key_in([tmp_path], "".join(capfd.readouterr()))


def test_a_web_budget_stops_the_run_cleanly_and_a_resume_finishes_it(fake, vtb_data, tmp_path, capfd):
    fake.serve("serpapi_search", ok(serpapi_body("red things")))
    fake.serve("page", latin1_page())
    fake.serve("openweather_geocode", ok(geocode_body("Paris")))
    fake.serve("openweather_current", ok(weather_body()))
    config = vtb_config(vtb_data, tmp_path / "capped", web_cache="none", web_max_calls=2)
    with pytest.raises(WebBudgetReached):  # the third task calls the web; two are recorded before it
        evaluate(config, backend=Scripted(vtb_script(fake, "vtb_fixture_s2")))
    printed = capfd.readouterr().err
    assert "stopped: the run's cap of 2 web requests is reached (--web_max_calls)" in printed
    assert "raise the cap and run the same command again" in printed
    assert len(fake.requests) == 2  # search and page; the weather's geocoding would have been the third
    recorded = {r["id"] for r in RunDir(config.out).records()}
    assert recorded == {"vtb_fixture_s0", "vtb_fixture_s1"}  # s2 was in flight: dropped, to run again
    assert "## Web calls" in (tmp_path / "capped" / "report.md").read_text()
    resumed = vtb_config(vtb_data, tmp_path / "capped", web_cache="none", web_max_calls=10)
    evaluate(resumed, backend=Scripted(vtb_script(fake, "vtb_fixture_s2")))
    replies = tool_replies(resumed.out)["vtb_fixture_s2"]
    assert len(replies) == 3 and "'conditions': " in replies[2] and "'status': 'success'" in replies[2]
    # the run's recorded search and page answered the resumed episode: only the weather was asked
    assert [r["endpoint"] for r in fake.requests[2:]] == ["openweather_geocode", "openweather_current"]


def amme_script() -> dict:
    return {"0001": [call("google_search", query="red block"), call("google_lens_search", image_index=0),
                     call("fetch_webpage", url="https://example.org/red", max_chars=40), "<answer>red</answer>"]}


def test_agentic_mme_live_run_records_replays_exactly_and_faults_read_as_the_runner_words_them(
        fake, amme_data, tmp_path, monkeypatch, capfd):
    fake.serve("serper_search", ok(serper_search_body("red block")))
    fake.serve("imgbb_upload", ok(imgbb_body("https://i.ibb.co/fixture/block.png")))
    fake.serve("serper_lens", ok(serper_lens_body()))
    fake.serve("jina_reader", server_error())  # persistent: the reader fails after the retries
    config = resolve(EvalConfig(suite="agentic_mme", data_dir=str(amme_data), model="scripted-model",
                                preset="qwen2.5-vl", judge_model="none", out=str(tmp_path / "live"), max_active=1,
                                tasks=["L1"], web="live", web_cache=str(tmp_path / "web-cache")))
    evaluate(config, backend=Scripted(amme_script()))
    live = tool_replies(config.out)
    search, lens, page = live["0001"]
    assert search.startswith("[Organic]\n1. ") or search.startswith("[KnowledgeGraph] ")
    assert lens.startswith("[Lens Organic]\n1. ")
    assert page.startswith("Error: Search failed: Jina Reader failed (HTTP 500): ")
    jina = [r for r in fake.requests if r["endpoint"] == "jina_reader"]
    assert len(jina) == 3 and jina[0]["path"].endswith("/https://example.org/red")
    assert jina[0]["headers"]["Authorization"] == f"Bearer {KEYS['JINA_API_KEY']}"
    upload = next(r for r in fake.requests if r["endpoint"] == "imgbb_upload")
    assert upload["query"] == {"key": [KEYS["IMGBB_API_KEY"]]}
    lens_sent = json.loads(next(r for r in fake.requests if r["endpoint"] == "serper_lens")["body"])
    assert lens_sent == {"url": "https://i.ibb.co/fixture/block.png", "page": 1, "num": 5}
    recording = RunDir(config.out).web_record_path
    requests_made = len(fake.requests)
    replayed = replay_without_keys(monkeypatch, config, amme_script(), recording)
    assert replayed == live and len(fake.requests) == requests_made
    no_key_in([tmp_path], "".join(capfd.readouterr()))


def test_live_refuses_to_start_without_the_keys_and_names_them(amme_data, tmp_path, monkeypatch):
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SERPER_API_KEY", "set")
    config = resolve(EvalConfig(suite="agentic_mme", data_dir=str(amme_data), model="scripted-model",
                                preset="qwen2.5-vl", judge_model="none", out=str(tmp_path / "run"), web="live"))
    with pytest.raises(ValueError, match=r"--web live calls Agentic-MME's providers and needs IMGBB_API_KEY"):
        evaluate(config, backend=Scripted({}))
