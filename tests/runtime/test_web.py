"""The web backend: replayed answers by call, recording through a live provider, offline replies counted."""

import json
import sys
import types

import pytest

from eval.config import EvalConfig
from runtime.web import UNAVAILABLE_MARK, Web, read_recording, unavailable_calls, web_from_config

SEARCH = {"type": "function", "function": {"name": "google_search", "parameters": {"type": "object"}}}


@pytest.fixture
def recording(tmp_path):
    path = tmp_path / "web.jsonl"
    lines = [{"tool": "google_search", "arguments": {"query": "pizza", "gl": "us"}, "reply": "old"},
             {"tool": "google_search", "arguments": {"gl": "us", "query": "pizza"}, "reply": "$16 a pizza"},
             {"tool": "fetch_webpage", "arguments": {"url": "https://a.example"}, "reply": "page"}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    return path


@pytest.fixture
def provider():
    calls = []

    def answer(tool, arguments):
        calls.append((tool, arguments))
        if arguments.get("query") == "boom":
            raise ConnectionError("no route to host")
        return f"live answer to {arguments['query']}"

    module = types.ModuleType("web_provider_for_tests")
    module.answer, module.not_callable = answer, 3
    sys.modules["web_provider_for_tests"] = module
    yield calls
    del sys.modules["web_provider_for_tests"]


def test_replay_answers_a_recorded_call_whatever_the_key_order_and_the_last_line_wins(recording):
    tool = Web("replay", [recording]).tool(SEARCH)
    assert tool.run({"query": "pizza", "gl": "us"}, None).text == "$16 a pizza"
    assert tool.run('{"gl": "us", "query": "pizza"}', None).text == "$16 a pizza"
    missing = tool.run({"query": "pasta"}, None)
    assert missing.error and UNAVAILABLE_MARK in missing.text and "--web replay" in missing.text


def test_offline_answers_nothing_in_the_benchmarks_error_shape(recording):
    tool = Web("offline", [recording]).tool(SEARCH, unavailable=lambda m: json.dumps({"ok": "false", "error": m}))
    reply = tool.run({"query": "pizza", "gl": "us"}, None)
    assert reply.error and json.loads(reply.text)["ok"] == "false" and "offline" in reply.text
    messages = [{"role": role, "content": [{"type": "text", "text": text}]} for role, text in
                (("tool", reply.text), ("tool", "fine"), ("assistant", UNAVAILABLE_MARK))]
    assert unavailable_calls(messages) == 1


def test_a_key_function_identifies_the_call(recording, tmp_path):
    web = Web("replay", [recording])
    tool = web.tool({"name": "fetch_webpage"}, key=lambda arguments, files: {"url": arguments["url"].strip()})
    assert tool.run({"url": " https://a.example ", "max_chars": 100}, None).text == "page"


def test_record_replays_first_then_asks_the_provider_and_stores_its_answer(recording, provider, tmp_path):
    stored = tmp_path / "run" / "web_record.jsonl"
    tool = Web("record", [recording], stored, "web_provider_for_tests:answer").tool(SEARCH)
    assert tool.run({"query": "pizza", "gl": "us"}, None).text == "$16 a pizza"
    assert tool.run({"query": "pasta"}, None).text == "live answer to pasta"
    assert tool.run({"query": "pasta"}, None).text == "live answer to pasta"
    assert provider == [("google_search", {"query": "pasta"})]
    failed = tool.run({"query": "boom"}, None)
    assert failed.error and "ConnectionError: no route to host" in failed.text
    assert read_recording(stored) == {'["google_search",{"query":"pasta"}]': "live answer to pasta"}
    replayed = Web("replay", [stored]).tool(SEARCH)
    assert replayed.run({"query": "pasta"}, None).text == "live answer to pasta"


def test_a_run_replays_its_own_recording_and_the_users(recording, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "web_record.jsonl").write_text(json.dumps({"tool": "google_search", "arguments": {"query": "x"},
                                                      "reply": "own"}) + "\n")
    config = EvalConfig(suite="agentic_mme", out=str(out), web_replay=[str(recording)])
    tool = web_from_config(config).tool(SEARCH)
    assert tool.run({"query": "x"}, None).text == "own"
    assert tool.run({"query": "pizza", "gl": "us"}, None).text == "$16 a pizza"


@pytest.mark.parametrize("content, problem", [("{not json", "line 1"), ('{"tool": "x", "reply": 3}', "line 1"),
                                              ('\n["a"]', "line 2")])
def test_a_malformed_recording_names_the_file_and_line(tmp_path, content, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=f"bad.jsonl, {problem}: not a web recording"):
        Web("replay", [path])


@pytest.mark.parametrize("mode, provider_spec, problem", [
    ("live", None, "unknown web mode"), ("record", None, "needs a provider"),
    ("replay", "web_provider_for_tests:answer", "only it uses one"),
    ("record", "no_such_module_here:answer", "cannot import it"),
    ("record", "web_provider_for_tests:not_callable", "not a function")])
def test_bad_settings_say_what_to_do(provider, mode, provider_spec, problem):
    with pytest.raises(ValueError, match=problem):
        Web(mode, provider=provider_spec)


def test_the_report_counts_the_calls_the_web_could_not_answer(tmp_path):
    from eval.report import write_report

    def record(task, texts):
        messages = [{"role": "tool", "content": [{"type": "text", "text": text}]} for text in texts]
        return {"id": task, "mode": "tools", "category": "c", "score": 1.0, "trajectory": {"messages": messages}}

    offline = Web("offline").tool(SEARCH).run({"query": "x"}, None).text
    summary = write_report(tmp_path, [record("a", [offline, "found"]), record("b", [offline, offline])])
    assert summary["modes"]["tools"]["overall"]["web_unavailable"] == 3
    assert "| tools | 0.00 | 0 | 0 | 3 | 0 | 0 | - | 0 | 0 |" in (tmp_path / "report.md").read_text().splitlines()


@pytest.mark.parametrize("settings, problem", [
    ({"suite": "agentic_mme", "web": "live"}, "--web must be one of"),
    ({"suite": "agentic_mme", "web": "record"}, "--web record needs --web_provider"),
    ({"suite": "agentic_mme", "web_provider": "m:f"}, "--web record needs --web_provider"),
    ({"suite": "visualtoolbench", "web_replay": ["no/such/file.jsonl"]}, "no/such/file.jsonl: no such file"),
])
def test_bad_web_settings_fail_with_what_to_do(settings, problem):
    with pytest.raises(ValueError, match=problem):
        EvalConfig(**settings)
