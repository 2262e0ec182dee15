"""VisualToolBench as its paper runs every model: each preset's first prompt offers exactly the runner's six tools
in the preset's call format and nothing of the preset's own (prompt, tools, response wrappers, turn reminder,
one-call limit); the suite's defaults (sampling, no token cap, the processor's image size); `--tasks` selecting
single- or multi-turn tasks and domains; Table 5 rendered from records."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from eval.benchmarks.papers import paper_rows
from eval.benchmarks.visualtoolbench import (HARNESS, TOOL_NAMES, VisualToolBench, calculator, data, scoring,
                                             system_prompt, tables)
from eval.benchmarks.visualtoolbench.fixture import MULTI, SINGLE, write_fixture
from eval.config import EvalConfig
from eval.run_vllm import evaluate, resolve
from eval.presets import PRESETS
from runtime.profiles import CODE_SYSTEM, DEEPEYES_SYSTEM, DEEPEYES_TURN, Budgets
from runtime.protocols import HermesProtocol, OpenAIProtocol
from runtime.protocols.hermes import tools_section
from runtime.trajectory import message_text


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("vtb") / "VisualToolBench")


@pytest.fixture(scope="module")
def suite(fixture_dir):
    tasks, skipped, dataset, _ = data.load(str(fixture_dir))
    return VisualToolBench(tasks, skipped, dataset, "official", None)


@pytest.fixture(scope="module")
def toolbox(suite):
    boxes = suite.toolboxes(suite.profile(PRESETS["qwen2.5-vl"].profile))  # one box serves every profile
    yield boxes(suite.tasks[0], "tools")
    boxes.close()


def offered(prompt) -> tuple[list[str], str]:
    """The tool names the prompt offers (the request's `tools=`, or the <tools> list in the system prompt) and its
    system prompt."""
    system = said(prompt.messages[0]) if prompt.messages[0]["role"] == "system" else ""
    if prompt.tools:
        return [tool["function"]["name"] for tool in prompt.tools], system
    listed = re.search(r"<tools>\n(.*)\n</tools>", system, re.DOTALL)
    return ([json.loads(line)["function"]["name"] for line in listed.group(1).splitlines()] if listed else []), system


def said(message: dict) -> str:
    return message["content"] if isinstance(message["content"], str) else message_text(message)


def calls_reply(protocol, *expressions):
    """A reply with a calculator call per expression, in the protocol's own format."""
    if isinstance(protocol, OpenAIProtocol):
        return {"content": "", "tool_calls": [
            {"id": f"call_{k}", "type": "function",
             "function": {"name": "calculator", "arguments": json.dumps({"expression": e})}}
            for k, e in enumerate(expressions)]}
    return "\n".join(f'<tool_call>\n{json.dumps({"name": "calculator", "arguments": {"expression": e}})}\n'
                     "</tool_call>" for e in expressions)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_sees_exactly_the_runners_tools_in_its_own_call_format(suite, toolbox, preset):
    own = PRESETS[preset].profile
    profile = suite.profile(own)
    inner = profile.protocol.inner
    if isinstance(own.protocol, OpenAIProtocol):
        assert inner == own.protocol
    else:  # vLLM's hermes parser: the profile's tool placement and stop strings, nothing else of its own
        tools_in = own.protocol.tools_in if isinstance(own.protocol, HermesProtocol) else "system"
        stop = own.protocol.stop if isinstance(own.protocol, HermesProtocol) else ("<|im_end|>",)
        assert inner == HermesProtocol(tools_in=tools_in, stop=stop)
    assert (profile.toolset, profile.code_tool, profile.question_suffix, profile.max_calls_per_turn) == \
        (None, None, "", None)
    task = suite.tasks[0]
    episode = suite.start(toolbox, profile, task, "tools", Budgets(max_images=8))
    try:
        prompt = episode.prompt()
        names, system = offered(prompt)
        assert sorted(names) == sorted(TOOL_NAMES)
        if prompt.tools or isinstance(inner, OpenAIProtocol):
            assert system == system_prompt()
        else:
            shown = profile.protocol.wire_tools(episode.trajectory)
            assert system == system_prompt() + "\n\n" + tools_section(shown)
        assert said(prompt.messages[1]) == task.question and len(prompt.images) == 1
        everything = json.dumps([prompt.messages, prompt.tools])
        for foreign in ("image_zoom_in_tool", DEEPEYES_SYSTEM[:60], DEEPEYES_TURN.strip()[:40], CODE_SYSTEM[:60],
                        "<code>"):
            assert json.dumps(foreign)[1:-1] not in everything, foreign
        # two calls in one reply both run, and their replies come back in the plain format
        assert len(episode.submit(calls_reply(inner, "1 + 1", "2 * 3"))) == 2
        toolbox.run([episode])
        later = episode.prompt()
        replies = [str(calculator("1 + 1")), str(calculator("2 * 3"))]
        if isinstance(inner, OpenAIProtocol) or inner.tools_in == "template":
            assert [said(m) for m in later.messages if m["role"] == "tool"] == replies
        else:
            assert said(later.messages[-1]) == "\n".join(f"<tool_response>\n{r}\n</tool_response>"
                                                                 for r in replies)
        assert sorted(offered(later)[0]) == sorted(TOOL_NAMES)
        assert DEEPEYES_TURN.strip()[:40] not in json.dumps(later.messages)
    finally:
        episode.close()


def test_defaults_are_the_papers_sampling_without_a_token_cap(suite):
    for preset in PRESETS:
        assert suite.defaults("Qwen/Qwen2.5-VL-7B-Instruct", preset) == \
            {"temperature": 0.0, "max_tokens": 0, "max_pixels": 0, "max_images": 64}
    assert suite.defaults("ChenShawn/DeepEyes-7B", "deepeyes")["max_tokens"] == 0
    # FunC_with_tools: 1.0 for OpenAI's reasoning models (and "thinking" names), by the API model's name only
    assert suite.defaults("openai/o4-mini", "openai")["temperature"] == 1.0
    assert suite.defaults("gpt-5-think", "openai")["temperature"] == 1.0
    assert suite.defaults("gpt-4.1", "openai")["temperature"] == 0.0
    assert suite.defaults("/ckpt/video3-thinking", "qwen3-vl")["temperature"] == 0.0
    described = suite.describe()
    assert described["harness"] == HARNESS == "visualtoolbench-runner"
    assert all(words in described["protocol"] for words in ("temperature 0", "no token cap", "processor's own size"))


def test_tasks_selects_single_or_multi_turn_and_domains(fixture_dir):
    def ids(*names):
        return [t.id for t in data.load(str(fixture_dir), None, *data.selection(list(names)))[0]]

    assert ids("single") == [r["id"] for r in SINGLE]
    assert ids("multi") == [r["id"] for r in MULTI]
    assert ids() == ids("single", "multi") == [r["id"] for r in SINGLE + MULTI]
    assert ids("single", "STEM") == ["vtb_fixture_s0"]  # maths is merged into STEM
    assert ids("medicine") == ["vtb_fixture_m0"]
    with pytest.raises(ValueError, match=r"unknown --tasks value\(s\) \['both'\].*single, multi"):
        data.selection(["both"])
    with pytest.raises(ValueError, match="no row of the selection"):
        data.load(str(fixture_dir), None, {"multi_turn"}, {"Finance"})


def test_skipped_rows_count_for_their_selection_only(fixture_dir, tmp_path):
    folder = shutil.copytree(fixture_dir, tmp_path / "VisualToolBench")
    listed = folder / "data" / "single_turn" / "dataset.json"
    single = json.loads(listed.read_text())
    listed.write_text(json.dumps(single + [{**single[0], "id": "broken", "rubrics_by_turn": ["{not json"]}]))
    for names, skipped in ((["single"], ["broken"]), (["multi"], []), ([], ["broken"])):
        loaded = VisualToolBench.from_config(EvalConfig(suite="visualtoolbench", data_dir=str(folder), tasks=names,
                                                        out=str(tmp_path / "run")))
        assert [s.id for s in loaded.skipped] == skipped, names
        assert {t.meta["multi_turn"] for t in loaded.tasks} == ({True} if names == ["multi"] else
                                                                {False} if names == ["single"] else {True, False})


def _record(task_id, turncase, category, accuracy, mode="tools"):
    example = {"id": task_id, "task_id": task_id, "turncase": turncase, "eval_focus": "region_switch",
               "prompt_category": category}
    task = scoring.TaskScore(task_id, "official", "weight", {"score": float(accuracy), "accuracy": accuracy}, None)
    return {"id": task_id, "mode": mode, "category": category,
            "visualtoolbench": scoring.task_record(task, example, [], judge="o4-mini")}


def test_table_5_renders_single_turn_apr_beside_the_papers_row():
    records = [_record("s1", "single-turn", "maths", 1), _record("s2", "single-turn", "physics", 0),
               _record("s3", "single-turn", "medical", 1), _record("m1", "multi-turn", "finance", 1)]
    like = {"temperature": 0.0, "max_tokens": 0, "judge_model": "o4-mini",
            "protocol": {"harness": "visualtoolbench-runner"}}
    out = tables.tables(records, {**like, "model": "Kwai-Keye/Thyme-RL"})
    table5 = next(section for section in out if "Table 5" in section)
    assert out.index(table5) == 1 and "judge: o4-mini" in table5
    assert "| Single-Turn Overall | Single-Turn STEM | Single-Turn Medicine |" in table5
    assert "| this run | 66.67 | 50.00 | 100.00 | - | - | - |" in table5  # the multi-turn task is not in it
    assert "| paper: Thyme-7B | 1.82 | 2.59 | 2.48 | 0.81 | 0.00 | 3.23 |" in table5
    assert "| tasks | 3 | 2 | 1 | 0 | 0 | 0 |" in table5
    assert "0 of 3 episode(s) unscored" in table5
    deepeyes = next(s for s in tables.tables(records, {**like, "model": "ChenShawn/DeepEyes-7B", "max_tokens": 2048})
                    if "Table 5" in s)
    assert "| paper: Deepeyes-7B (not like for like: max_tokens 2048 here, no cap in the paper) | 3.32 |" in deepeyes
    assert "paper:" not in next(s for s in tables.tables(records, {"model": "Qwen/Qwen2.5-VL-7B-Instruct"})
                                if "Table 5" in s)


def test_table_5_rows_are_found_by_hub_name():
    path = tables.PAPER
    assert [r["model"] for r in paper_rows(path, "Table 5", "Kwai-Keye/Thyme-RL")] == ["Thyme-7B"]
    assert [r["model"] for r in paper_rows(path, "Table 5", "ChenShawn/DeepEyes-7B")] == ["Deepeyes-7B"]
    assert [r["model"] for r in paper_rows(path, "Table 5", "Qwen/Qwen3-VL-30B-A3B-Thinking")] == \
        ["Qwen3-VL-30b-think"]


def test_a_single_turn_deepeyes_run_calls_the_runners_tools_uncapped(fixture_dir, tmp_path, monkeypatch):
    from tests.eval.benchmarks.test_visualtoolbench_runs import ScriptedModel, call

    class Model(ScriptedModel):
        def submit(self, key, prompt, sampling):
            self.sampling = sampling
            super().submit(key, prompt, sampling)

    monkeypatch.setenv("TIRLAB_CACHE", str(tmp_path / "cache"))
    model = Model({"vtb_fixture_s1": [call("python_interpreter", code="print(12 * 1.08)"), "12.96"]})
    run = tmp_path / "run"
    records = evaluate(resolve(EvalConfig(suite="visualtoolbench", data_dir=str(fixture_dir), tasks=["single"],
                                          model="scripted-model", preset="deepeyes", out=str(run))), backend=model)
    assert sorted(r["id"] for r in records) == sorted(r["id"] for r in SINGLE)
    task = {r["id"]: r for r in records}["vtb_fixture_s1"]
    reply = [m for m in task["trajectory"]["messages"] if m["role"] == "tool"][0]["content"][-1]["text"]
    assert reply == "{'stdout': '12.96\\n', 'stderr': ''}" and task["prediction"] == "12.96"
    assert model.sampling.max_tokens is None and model.sampling.temperature == 0.0
    settings = json.loads((run / "config.json").read_text())
    assert settings["max_tokens"] == 0 and settings["max_pixels"] == 0
    assert "Table 5: single-turn APR" in (run / "report.md").read_text()
