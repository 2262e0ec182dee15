"""The web backend: replayed answers by call, live answers recorded (faults marked), offline replies counted, the
keys a live run needs named before it starts."""

import json

import pytest

from eval.config import EvalConfig
from runtime.web import UNAVAILABLE_MARK, LiveProvider, Web, read_recording, unavailable_calls, web_from_config
from tools.toolset import Reply


@pytest.fixture
def recording(tmp_path):
    path = tmp_path / "web.jsonl"
    lines = [{"tool": "google_search", "arguments": {"query": "pizza", "gl": "us"}, "reply": "old"},
             {"tool": "google_search", "arguments": {"gl": "us", "query": "pizza"}, "reply": "$16 a pizza"},
             {"tool": "fetch_webpage", "arguments": {"url": "https://a.example"}, "reply": "gone", "error": True},
             {"tool": "google_search", "arguments": {"query": "busy"}, "reply": "Error: HTTP 429", "error": True,
              "fault": ["serper_search: HTTP 429"]}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    return path


class Client:
    """A live client without HTTP: answers "live <query>", or a fault the test chose."""

    def __init__(self, http, keys):
        self.http, self.keys, self.asked = http, keys, []

    def search(self, query: str) -> Reply:
        self.asked.append(query)
        if query == "flaky":
            self.http.fault("serper_search", "HTTP 503")
            return Reply("Error: Search failed: HTTP 503", error=True)
        if query == "quote the key":
            return Reply(f"echo {self.keys['SEARCH_KEY']} and {self.keys['EXTRA_KEY']}")
        if query == "bug":
            raise KeyError(self.keys["SEARCH_KEY"])
        return Reply(f"live {query}")


PROVIDER = LiveProvider("Fixture", {"SEARCH_KEY": "every search"}, {"EXTRA_KEY": "nothing much"}, Client)
ENV = {"SEARCH_KEY": "s3cret-search-key", "EXTRA_KEY": "extra-key-value"}


def live(web: Web, query: str) -> tuple[Reply | None, str]:
    return web.answer("google_search", {"query": query}, lambda client: client.search(query))


def test_replay_answers_a_recorded_call_whatever_the_key_order_and_the_last_line_wins(recording):
    web = Web("replay", [recording])
    assert web.answer("google_search", {"query": "pizza", "gl": "us"})[0] == Reply("$16 a pizza")
    assert web.answer("google_search", {"gl": "us", "query": "pizza"})[0] == Reply("$16 a pizza")
    assert web.answer("fetch_webpage", {"url": "https://a.example"})[0] == Reply("gone", error=True)
    assert web.answer("google_search", {"query": "busy"})[0] == Reply("Error: HTTP 429", error=True)  # as it was
    reply, reason = web.answer("google_search", {"query": "pasta"}, lambda client: pytest.fail("replay went live"))
    assert reply is None and "--web replay" in reason and "--web live" in reason


def test_offline_answers_nothing(recording):
    reply, reason = Web("offline", [recording]).answer("google_search", {"query": "pizza", "gl": "us"})
    assert reply is None and "offline" in reason
    messages = [{"role": role, "content": [{"type": "text", "text": text}]} for role, text in
                (("tool", f"x is {UNAVAILABLE_MARK}"), ("tool", "fine"), ("assistant", UNAVAILABLE_MARK))]
    assert unavailable_calls(messages) == 1


def test_live_asks_once_per_call_records_every_reply_and_a_replay_gives_them_again(recording, tmp_path):
    stored = tmp_path / "run" / "web_record.jsonl"
    web = Web("live", [recording], stored, PROVIDER, usage_to=tmp_path / "run" / "web_usage.json", environ=ENV)
    assert web.answer("google_search", {"query": "pizza", "gl": "us"})[0] == Reply("$16 a pizza")  # recorded
    assert live(web, "pasta")[0] == Reply("live pasta")
    assert live(web, "pasta")[0] == Reply("live pasta")
    assert live(web, "flaky")[0] == Reply("Error: Search failed: HTTP 503", error=True)
    assert live(web, "flaky")[0].error  # within the run a call has one answer, fault or not
    assert live(web, "busy")[0] == Reply("live busy")  # an earlier run's fault is asked again
    assert web.client.asked == ["pasta", "flaky", "busy"]
    lines = [json.loads(line) for line in stored.read_text().splitlines()]
    assert lines == [{"tool": "google_search", "arguments": {"query": "pizza", "gl": "us"}, "reply": "$16 a pizza"},
                     {"tool": "google_search", "arguments": {"query": "pasta"}, "reply": "live pasta"},
                     {"tool": "google_search", "arguments": {"query": "flaky"},
                      "reply": "Error: Search failed: HTTP 503", "error": True, "fault": ["serper_search: HTTP 503"]},
                     {"tool": "google_search", "arguments": {"query": "busy"}, "reply": "live busy"}]
    replayed = Web("replay", [recording, stored])
    for query, expected in (("pasta", Reply("live pasta")), ("busy", Reply("live busy")),
                            ("flaky", Reply("Error: Search failed: HTTP 503", error=True))):
        assert replayed.answer("google_search", {"query": query})[0] == expected
    usage = json.loads((tmp_path / "run" / "web_usage.json").read_text())
    assert usage["faults"] == {"serper_search: HTTP 503": 1}


def test_live_never_records_or_returns_a_key(tmp_path):
    stored = tmp_path / "web_record.jsonl"
    web = Web("live", [], stored, PROVIDER, environ=ENV)
    reply, _ = live(web, "quote the key")
    assert reply.text == "echo *** and ***"
    reply, reason = live(web, "bug")  # a client bug: no reply, a reason without the key, nothing recorded
    assert reply is None and "KeyError" in reason and ENV["SEARCH_KEY"] not in reason
    assert all(key not in stored.read_text() for key in ENV.values())
    assert "bug" not in stored.read_text()


def test_live_refuses_to_start_without_its_keys_and_names_them():
    with pytest.raises(ValueError, match=r"needs SEARCH_KEY \(every search\) in the environment"):
        Web("live", provider=PROVIDER, environ={"EXTRA_KEY": "x", "SEARCH_KEY": "  "})
    assert Web("live", provider=PROVIDER, environ={"SEARCH_KEY": "k"}).client.keys == {"SEARCH_KEY": "k"}
    assert Web("replay", provider=PROVIDER, environ={}).client is None  # replay and offline need no key


def test_a_run_replays_its_own_recording_every_shards_and_the_users(recording, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "web_record.shard-1-of-2.jsonl").write_text(json.dumps(
        {"tool": "google_search", "arguments": {"query": "x"}, "reply": "own"}) + "\n")
    config = EvalConfig(suite="agentic_mme", out=str(out), web_replay=[str(recording)], shard="0/2")
    web = web_from_config(config)
    assert web.answer("google_search", {"query": "x"})[0] == Reply("own")
    assert web.answer("google_search", {"query": "pizza", "gl": "us"})[0] == Reply("$16 a pizza")
    assert web.record_to == out / "web_record.shard-0-of-2.jsonl"


@pytest.mark.parametrize("content, problem", [("{not json", "line 1"), ('{"tool": "x", "reply": 3}', "line 1"),
                                              ('\n["a"]', "line 2"),
                                              ('{"tool": "x", "arguments": {}, "reply": "r", "error": 1}', "line 1")])
def test_a_malformed_recording_names_the_file_and_line(tmp_path, content, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=f"bad.jsonl, {problem}: not a web recording"):
        read_recording(path)


def test_an_unknown_mode_says_which_exist():
    with pytest.raises(ValueError, match="unknown web mode 'record'"):
        Web("record")


def test_the_report_counts_the_calls_the_web_could_not_answer(tmp_path):
    from eval.report import write_report

    def record(task, texts):
        messages = [{"role": "tool", "content": [{"type": "text", "text": text}]} for text in texts]
        return {"id": task, "mode": "tools", "category": "c", "score": 1.0, "trajectory": {"messages": messages}}

    offline = f"google_search is {UNAVAILABLE_MARK}: offline"
    summary = write_report(tmp_path, [record("a", [offline, "found"]), record("b", [offline, offline])])
    assert summary["modes"]["tools"]["overall"]["web_unavailable"] == 3
    assert "| tools | 0.00 | 0 | 0 | 3 | 0 | 0 | - | 0 | 0 |" in (tmp_path / "report.md").read_text().splitlines()
    assert "## Web calls" not in (tmp_path / "report.md").read_text()  # no live call, no table


@pytest.mark.parametrize("settings, problem", [
    ({"suite": "agentic_mme", "web": "record"}, "--web must be one of"),
    ({"suite": "agentic_mme", "web_cache": "/tmp/c"}, "--web_cache: only read by --web live"),
    ({"suite": "agentic_mme", "web": "live", "web_max_calls": 0}, "--web_max_calls must be positive"),
    ({"suite": "visualtoolbench", "web_replay": ["no/such/file.jsonl"]}, "no/such/file.jsonl: no such file"),
])
def test_bad_web_settings_fail_with_what_to_do(settings, problem):
    with pytest.raises(ValueError, match=problem):
        EvalConfig(**settings)


def test_a_runs_own_recording_is_final_on_resume_and_another_runs_answers_join_it(recording, tmp_path):
    stored = tmp_path / "run" / "web_record.jsonl"
    first = Web("live", [], stored, PROVIDER, environ=ENV)
    assert live(first, "flaky")[0].error  # this run's answer: a fault
    resumed = Web("live", [recording], stored, PROVIDER, environ=ENV, own=[stored])
    assert live(resumed, "flaky")[0] == Reply("Error: Search failed: HTTP 503", error=True)  # not asked again
    assert resumed.answer("google_search", {"query": "pizza", "gl": "us"})[0] == Reply("$16 a pizza")
    assert resumed.client.asked == []
    replayed = Web("replay", own=[stored])  # the run's own file alone gives every reply it gave
    assert replayed.answer("google_search", {"gl": "us", "query": "pizza"})[0] == Reply("$16 a pizza")


def test_a_reply_with_line_separators_survives_its_recording_and_a_torn_last_line_is_left_out(tmp_path):
    stored = tmp_path / "web_record.jsonl"
    web = Web("live", [], stored, PROVIDER, environ=ENV)
    odd = "a\u2028b\u2029c\x85d\re"
    assert live(web, odd)[0] == Reply(f"live {odd}")
    with stored.open("a") as out:
        out.write('{"tool": "google_search", "argu')  # a run killed mid-write
    assert Web("replay", own=[stored]).answer("google_search", {"query": odd})[0] == Reply(f"live {odd}")
    again = Web("live", [], stored, PROVIDER, environ=ENV, own=[stored])
    live(again, "next")
    assert [json.loads(line)["arguments"]["query"] for line in stored.read_text().split("\n") if line] == [odd, "next"]


def test_overwrite_forgets_the_runs_own_recording_and_usage(tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCH_KEY", "k")
    out = tmp_path / "run"
    out.mkdir()
    (out / "web_record.jsonl").write_text(json.dumps({"tool": "t", "arguments": {}, "reply": "old"}) + "\n")
    (out / "web_usage.json").write_text(json.dumps({"requests": {"serper_search": 99}}))
    kept = web_from_config(EvalConfig(suite="agentic_mme", out=str(out), web="live", web_cache="none"),
                           provider=PROVIDER)
    assert kept.answer("t", {})[0] == Reply("old") and kept.http.usage.requests == {"serper_search": 99}
    fresh = web_from_config(EvalConfig(suite="agentic_mme", out=str(out), web="live", web_cache="none",
                                       overwrite=True), provider=PROVIDER)
    assert fresh.answer("t", {})[0] is None and not fresh.http.usage.requests
