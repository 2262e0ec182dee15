import json
import re
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from data_gen.sample import REFERENCE_PROFILE, reference_episode
from data_gen.tasks import get_task
from eval.report import PLOTS, summarize, write_report
from eval.scorers import get_scorer
from runtime.episode import Episode

CONFIG = {"model": "Qwen/Qwen2.5-VL-7B-Instruct", "profile": "qwen2_5_vl", "backend": {"kind": "vllm", "url": "x"},
          "suite": "synthetic"}


def _record(sample, episode, mode: str, run_dir, latency_s, tokens, **fields) -> dict:
    """A run record as the harness writes it, read back from JSON."""
    prediction = episode.answer or ""
    record = {"id": sample.id, "category": sample.task, "scorer": sample.scorer, "mode": mode,
              "question": sample.question, "truth": sample.answer, "prediction": prediction,
              "score": get_scorer(sample.scorer)(prediction, sample.answer), "score_error": None,
              "stop_reason": episode.stop_reason.value, "error": episode.trajectory.meta.get("error"),
              "turns": episode.turns, "tool_calls": episode.tool_calls, "reference_calls": len(sample.calls),
              "prompt_tokens": tokens[0], "completion_tokens": tokens[1], "latency_s": latency_s,
              "model": CONFIG["model"], "profile": CONFIG["profile"],
              "trajectory": episode.trajectory.to_dict(run_dir / "images"), **fields}
    episode.close()
    return json.loads(json.dumps(record))


def _with_tools(sample, answer: str, extra_calls=()) -> Episode:
    """The reference chain (after `extra_calls`), ending in `answer`."""
    return reference_episode(replace(sample, answer=answer, calls=(*extra_calls, *sample.calls)))


def _without_tools(sample, answer: str | None) -> Episode:
    """One turn that answers, or (answer None) a backend failure before any turn."""
    episode = Episode.start(REFERENCE_PROFILE, sample.question, [sample.image])
    if answer is None:
        episode.fail("ConnectError: connection refused")
    else:
        episode.prompt()
        episode.submit(f"<answer>{answer}</answer>")
    return episode


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Five tasks, each with tools and without. With tools: maze 1 and 3 right, maze 2 wrong after a failed
    extra call, spot the difference half right (IoU 1/2), jigsaw right -> 3.5 / 5. Without: maze 1 and 2
    right, maze 3 wrong, spot the difference unscored, jigsaw a backend error -> 2 / 5."""
    run_dir = tmp_path_factory.mktemp("run")
    maze = [get_task("maze").generate(seed, "easy") for seed in (1, 2, 3)]
    spot = get_task("spot_difference").generate(1, "easy")
    jigsaw = get_task("jigsaw").generate(1, "easy")
    assert len(json.loads(spot.answer)) == 1  # the hand-computed IoU below
    wrong = {s.id: "A" if s.answer != "A" else "B" for s in maze}
    failing = {"name": maze[1].calls[0]["name"], "arguments": {**maze[1].calls[0]["arguments"], "image_index": 9}}
    refusing = _with_tools(maze[2], maze[2].answer)
    refusing.refuse_image("huge.png", "its 300.0 MB of pixels are over the 256.0 MB of images the episode may hold")
    tools = [
        _record(maze[0], _with_tools(maze[0], maze[0].answer), "tools", run_dir, 1.0, (1000, 100)),
        _record(maze[1], _with_tools(maze[1], wrong[maze[1].id], [failing]), "tools", run_dir, 2.0, (1000, 100)),
        _record(maze[2], refusing, "tools", run_dir, 3.0, (1000, 100)),
        _record(spot, _with_tools(spot, json.dumps([*json.loads(spot.answer), 99])), "tools", run_dir, 4.0,
                (1000, 100)),
        _record(jigsaw, _with_tools(jigsaw, jigsaw.answer), "tools", run_dir, 5.0, (1000, 100)),
    ]
    no_tools = [
        _record(maze[0], _without_tools(maze[0], maze[0].answer), "no_tools", run_dir, 0.5, (500, 20)),
        _record(maze[1], _without_tools(maze[1], maze[1].answer), "no_tools", run_dir, 1.0, (500, 20)),
        _record(maze[2], _without_tools(maze[2], wrong[maze[2].id]), "no_tools", run_dir, 1.5, (500, 20)),
        _record(spot, _without_tools(spot, spot.answer), "no_tools", run_dir, 2.0, (500, 20),
                score=None, score_error="ValueError: scorer failed"),
        _record(jigsaw, _without_tools(jigsaw, None), "no_tools", run_dir, None, (None, None)),
    ]
    assert [r["score"] for r in tools] == [1.0, 0.0, 1.0, 0.5, 1.0]
    assert [r["score"] for r in no_tools] == [1.0, 1.0, 0.0, None, 0.0]
    summary = write_report(run_dir, tools + no_tools, CONFIG)
    return run_dir, tools, no_tools, summary


def test_summary_with_tools(run):
    _, _, _, summary = run
    tools = summary["modes"]["tools"]["overall"]
    assert tools["n"] == 5 and tools["accuracy"] == pytest.approx(0.7)
    assert tools["unscored"] == 0 and tools["errors"] == 0 and tools["images_refused"] == 1
    assert tools["tool_call_rate"] == 1.0
    assert tools["calls_per_episode"] == pytest.approx(16 / 5)  # maze 1 + 2 + 1, spot 3, jigsaw 9
    assert tools["tool_success_rate"] == pytest.approx(15 / 16)  # the failed extra call
    assert tools["chain_length_mae"] == pytest.approx(1 / 5)  # maze 2: 2 calls against 1
    assert tools["overthink"] == pytest.approx((1 / 2) / 5)
    assert tools["tool_efficiency"] == pytest.approx(7 / 16)  # effective: maze 1 each, spot 3, jigsaw 1 (last crop)
    assert tools["tool_distribution"] == {"crop": 11, "draw_polygon": 4, "difference": 1}
    assert tools["turns_distribution"] == {"2": 2, "3": 1, "4": 1, "10": 1} and tools["turns_mean"] == 21 / 5
    assert tools["stop_reasons"] == {"answer": 5}
    assert tools["latency_s_mean"] == 3.0 and (tools["prompt_tokens"], tools["completion_tokens"]) == (5000, 500)
    maze = summary["modes"]["tools"]["categories"]["maze"]
    assert maze["n"] == 3 and maze["accuracy"] == pytest.approx(2 / 3)
    assert maze["chain_length_mae"] == pytest.approx(1 / 3) and maze["calls_per_episode"] == pytest.approx(4 / 3)
    assert summary["modes"]["tools"]["categories"]["spot_difference"]["accuracy"] == 0.5
    assert summary["modes"]["tools"]["categories"]["jigsaw"]["tool_efficiency"] == pytest.approx(1 / 9)


def test_summary_without_tools_and_deltas(run):
    _, _, _, summary = run
    assert list(summary["modes"]) == ["tools", "no_tools"]
    plain = summary["modes"]["no_tools"]["overall"]
    assert plain["n"] == 5 and plain["accuracy"] == pytest.approx(0.4)
    assert plain["unscored"] == 1 and plain["errors"] == 1
    assert plain["stop_reasons"] == {"answer": 4, "error": 1} and plain["turns_distribution"] == {"0": 1, "1": 4}
    assert (plain["tool_call_rate"], plain["calls_per_episode"], plain["tool_distribution"]) == (0.0, 0.0, {})
    # no tools: nothing to compare with the reference chain, even though the records carry its length
    assert plain["tool_success_rate"] is plain["chain_length_mae"] is plain["overthink"] is None
    assert plain["latency_s_mean"] == 1.25 and (plain["prompt_tokens"], plain["completion_tokens"]) == (2000, 80)
    categories = summary["modes"]["no_tools"]["categories"]
    assert {c: s["accuracy"] for c, s in categories.items()} == pytest.approx(
        {"maze": 2 / 3, "spot_difference": 0.0, "jigsaw": 0.0})
    assert summary["delta"]["overall"] == pytest.approx(0.3)
    assert summary["delta"]["categories"] == pytest.approx({"jigsaw": 1.0, "maze": 0.0, "spot_difference": 0.5})


def test_summary_json_reads_back(run):
    run_dir, tools, no_tools, summary = run
    assert json.loads((run_dir / "summary.json").read_text()) == summary == summarize(no_tools + tools)


def test_report_tables(run):
    run_dir, _, _, _ = run
    report = (run_dir / "report.md").read_text()
    for line in ["- **model**: Qwen/Qwen2.5-VL-7B-Instruct", "- **profile**: qwen2_5_vl", "- **backend**: vllm",
                 "- **suite**: synthetic", "- **records**: 10 (tools: 5, no_tools: 5)",
                 "| tools | 70.0% | 5 | 100.0% | 93.8% | 3.20 | 0.20 | 43.8% | 0.10 |",
                 "| no_tools | 40.0% | 5 | 0.0% | - | 0.00 | - | - | - |",
                 "| category | accuracy (tools) | n (tools) | accuracy (no_tools) | n (no_tools) "
                 "| delta (tools - no_tools) |",
                 "| jigsaw | 100.0% | 1 | 0.0% | 1 | +100.0 pts |",
                 "| maze | 66.7% | 3 | 66.7% | 3 | +0.0 pts |",
                 "| spot_difference | 50.0% | 1 | 0.0% | 1 | +50.0 pts |",
                 "| **overall** | 70.0% | 5 | 40.0% | 5 | +30.0 pts |",
                 "| answer | 5 | 4 |", "| error | 0 | 1 |",
                 "| crop | 11 | 0 |", "| draw_polygon | 4 | 0 |",
                 "| tools | 4.20 | 0 | 0 | 0 | 1 | 0 | 3.00 | 5000 | 500 |",
                 "| no_tools | 0.80 | 1 | 0 | 0 | 0 | 1 | 1.25 | 2000 | 80 |"]:
        assert line in report.splitlines(), line
    assert "Overthink (Agentic-MME)" in report and "Chain MAE (VTC-Bench)" in report


def test_replies_without_the_required_answer_tag_count_as_format_failures(run):
    _, tools, no_tools, _ = run
    failed = [{**r, "stop_reason": "no_answer", "prediction": "", "score": 0.0} for r in tools[:2]]
    summary = summarize(failed + tools[2:] + no_tools)
    modes = summary["modes"]
    assert modes["tools"]["overall"]["format_failures"] == 2 and modes["no_tools"]["overall"]["format_failures"] == 0


def test_plots_are_linked_valid_pngs(run):
    run_dir, _, _, _ = run
    report = (run_dir / "report.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report)
    assert links == [f"plots/{name}" for name in PLOTS.values()]
    for link in links:
        with Image.open(run_dir / link) as image:
            assert image.format == "PNG"
            image.verify()
        with Image.open(run_dir / link) as image:
            assert len(np.unique(np.asarray(image.convert("L")))) > 2  # something is drawn


def test_one_mode_without_reference_prints_dashes(run, tmp_path):
    _, tools, _, _ = run
    records = [{**r, "reference_calls": None} for r in tools]
    summary = write_report(tmp_path, records)  # no config: the header falls back to the records
    assert "delta" not in summary and summary["modes"]["tools"]["overall"]["tool_efficiency"] == pytest.approx(7 / 16)
    report = (tmp_path / "report.md").read_text().splitlines()
    assert "| tools | 70.0% | 5 | 100.0% | 93.8% | 3.20 | - | 43.8% | - |" in report
    assert "| category | accuracy (tools) | n (tools) |" in report and "| maze | 66.7% | 3 |" in report
    assert "- **model**: Qwen/Qwen2.5-VL-7B-Instruct" in report and "- **suite**: -" in report
    assert all((tmp_path / "plots" / name).is_file() for name in PLOTS.values())


def test_duplicate_task_in_one_mode_is_refused(run, tmp_path):
    _, tools, no_tools, _ = run
    with pytest.raises(ValueError, match=re.escape(f"task {tools[3]['id']!r} appears twice in mode 'tools'")):
        write_report(tmp_path, tools + no_tools + [tools[3]])
    assert not (tmp_path / "report.md").exists()


def test_names_from_models_and_users_do_not_break_the_report(tmp_path):
    """A tool name the model made up and a category, with markdown and (broken) mathtext in them."""
    messages = [{"role": "user", "content": [{"type": "text", "text": "q"}]},
                {"role": "assistant", "content": [], "tool_calls": [
                    {"id": "c0", "type": "function", "function": {"name": "$\\frac{a|b$", "arguments": "{"}}]},
                {"role": "tool", "tool_call_id": "c0", "name": "$\\frac{a|b$", "content": [], "error": True}]
    record = {"id": "t", "category": "cat|$x^$", "mode": "tools", "score": None, "stop_reason": "max_turns",
              "turns": 1, "reference_calls": None, "trajectory": {"messages": messages}}
    write_report(tmp_path, [record])
    report = (tmp_path / "report.md").read_text().splitlines()
    assert "| $\\frac{a\\|b$ | 1 |" in report and "| cat\\|$x^$ | 0.0% | 1 |" in report
    assert "| tools | 0.0% | 1 | 100.0% | 0.0% | 1.00 | - | 0.0% | - |" in report


def test_category_missing_from_one_mode_has_no_delta(run, tmp_path):
    _, tools, no_tools, _ = run
    summary = write_report(tmp_path, tools + [r for r in no_tools if r["category"] != "jigsaw"])
    assert summary["delta"]["categories"]["jigsaw"] is None
    assert summary["delta"]["overall"] == pytest.approx(0.7 - 2 / 4)
    assert "| jigsaw | 100.0% | 1 | - | - | - |" in (tmp_path / "report.md").read_text().splitlines()


def test_a_figure_that_cannot_be_drawn_leaves_the_rest_of_the_report(tmp_path, monkeypatch):
    from eval.suites import Suite

    def broken(records, config, folder):
        raise KeyError("level")

    monkeypatch.setattr(Suite, "figures", staticmethod(broken))
    record = {"id": "t", "category": "c", "mode": "tools", "score": 1.0, "stop_reason": "answered", "turns": 1,
              "trajectory": {"messages": []}}
    write_report(tmp_path, [record])
    report = (tmp_path / "report.md").read_text()
    assert "## Accuracy per category" in report and "(plots/accuracy_per_category.png)" in report
    assert "## The paper's figures\n\nNot drawn: KeyError: 'level'" in report
