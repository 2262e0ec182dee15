"""VTC-Bench's prompt ablation (Figure 9) and the paper's figures, from the CLI on the fixture: three runs with
the reference policy (Base and the strong prompt, the weak prompt, the strong prompt with the ground-truth chain),
merged by `run_vllm.py report` into one report with a row per setting beside the paper's, and Figures 5, 6, 7, 9
and 10 drawn from the records."""

import json
import re
import shutil

import pytest

from eval.benchmarks.vtc_bench import figures
from eval.benchmarks.vtc_bench.fixture import write_fixture
from eval.rundir import RunDir
from eval.run_vllm import main

MODEL = "Qwen/Qwen3-VL-8B-Instruct"  # a model of the paper's Table 4, so its rows come beside ours


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("vtc-ablation")
    fixture = write_fixture(root / "VTC-Bench")
    folders = []
    for name, settings in (("strong", ["--tools", "both"]), ("weak", ["--tools", "on", "--prompt_variant", "weak"]),
                           ("chain", ["--tools", "on", "--prompt_variant", "strong_chain"])):
        folders.append(root / name)
        assert main(["--suite", "vtc_bench", "--data_dir", str(fixture), "--model", "reference", "--backend",
                     "reference", *settings, "--out", str(folders[-1])]) == 0
    return folders


def test_a_merged_report_has_one_row_per_prompt_setting_beside_the_papers(runs, tmp_path):
    config = json.loads((runs[0] / "config.json").read_text())
    (runs[0] / "config.json").write_text(json.dumps({**config, "model": MODEL}))  # compare with a paper model
    weak = tmp_path / "weak"  # the weak prompt's run, every answer wrong: each setting's numbers stay in its row
    shutil.copytree(runs[1], weak)
    wrong = [{**r, "score": 0.0} for r in RunDir(weak).records()]
    (weak / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in wrong))
    assert main(["report", str(runs[0]), str(weak), str(runs[2])]) == 0
    text = (runs[0] / "report.md").read_text()
    for setting in ("Base", "Inter.", "Inter. (strong + GT chain)"):
        assert f"| this run: {setting} | 100.0 |" in text  # Table 4: each its own row
    assert "| this run: Inter. (weak prompt) | 0.0 | -100.0 |" in text  # against the Base run
    assert "| this run: Inter. | 100.0 | 0.0 |" in text
    assert "## VTC-Bench Figure 9: APR (%) per prompt setting" in text
    assert "| this run: Inter. | 100.0 | 0.0 | 100.0 | 100.0 |" in text  # Direct, Weak, Strong, Strong + GT
    assert re.search(r"\| paper: Qwen3-VL-Instruct 8B Inter\. \(Table 4\) \(not like for like: [^|]*\) \| 30\.74 \| - "
                     r"\| 28\.68 \| - \|", text)
    assert "every task has its own (9)" in text and "VTC-Bench: a subset, 9 rows of the paper's 680 items" in text
    for number in (5, 6, 7, 9, 10):
        name, title = figures.FILES[number]
        assert f"![{title}](plots/{name})" in text and (runs[0] / "plots" / name).stat().st_size > 10_000


def test_the_figures_have_the_papers_axes(runs, tmp_path):
    records = [r for run in runs for r in RunDir(run).records()]
    drawn = figures.drawn(records, {"model": MODEL}, tmp_path)
    assert sorted(drawn) == [5, 6, 7, 9, 10]
    labels = {number: [(ax.get_xlabel(), ax.get_ylabel()) for ax in figure.axes]
              for number, figure in drawn.items()}
    assert labels[5] == [("Tool Call Rate (%)", "APR (%)"), ("Tool Call Efficiency (%)", "APR (%)"),
                         ("Tool Call Rate (%)", "Tool Call Efficiency (%)")]
    assert ("ground-truth chain length", "items") in labels[7] and ("chain length", "share of items (%)") in labels[7]
    assert ("ground-truth tool diversity (distinct tools)", "items") in labels[7]
    assert labels[10] == [("chain length", "share of items (%)")] * 9
    assert labels[9] == [("", "APR (%)")] and labels[6] == [("share of calls (%)", "tool")]
    paper_points = [text.get_text() for text in drawn[5].axes[0].texts if text.get_text().startswith("paper: ")]
    assert len(paper_points) == 8  # Table 5's models
    ticks = [t.get_text() for t in drawn[9].axes[0].get_xticklabels()]
    assert ticks == ["Direct", "Weak Prompt", "Strong Prompt", "Strong Prompt + GT Tools"]
