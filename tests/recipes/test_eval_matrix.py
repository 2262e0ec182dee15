"""The evaluation matrix (eval/benchmarks/README.md): one recipe per model x benchmark cell, each listed in the
table, each run end to end on the benchmark's fixture (a backend that answers at once, no judge) with the
settings its paper used for that model: the report states no deviation from the paper's protocol, and every
paper row it prints beside ours is like for like except for the judge this offline test cannot call."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from eval.backends import Completion
from eval.run_vllm import evaluate, parse, resolve
from tests.eval.benchmarks.helpers import shared_sandbox_pools

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "eval" / "benchmarks" / "README.md"
RECIPES = sorted(p for p in (ROOT / "recipes" / "eval").glob("*/*.yaml") if p.stem != "synthetic")
UNLIKE = re.compile(r"not like for like: (.*?)\) \|")


class Answers:
    """A backend whose every reply is a final answer: the cell's harness, scoring and report run, no model."""
    name = "answers"

    def __init__(self):
        self.done = []

    def submit(self, key, prompt, sampling):
        self.done.append((key, Completion("<answer>A</answer>", prompt_tokens=1, completion_tokens=1)))

    def poll(self, timeout=None):
        done, self.done = self.done, []
        return done

    def in_flight(self):
        return len(self.done)

    def close(self):
        pass


@pytest.fixture(scope="module", autouse=True)
def pools():
    with shared_sandbox_pools():
        yield


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from eval.benchmarks.agentic_mme.fixture import write_fixture as amme
    from eval.benchmarks.tir_bench.fixture import write_fixture as tir
    from eval.benchmarks.visualtoolbench.fixture import write_fixture as vtb
    from eval.benchmarks.vtc_bench.fixture import write_fixture as vtc

    root = tmp_path_factory.mktemp("benchmarks")
    return {"tir_bench": tir(root / "tir"), "vtc_bench": vtc(root / "vtc"), "visualtoolbench": vtb(root / "vtb"),
            "agentic_mme": amme(root / "amme")}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRLAB_CACHE", str(tmp_path / "cache"))


def test_every_recipe_is_a_cell_of_the_matrix_and_every_cell_has_its_recipe():
    listed = set(re.findall(r"\((?:\.\./\.\./)?(recipes/eval/[\w.]+/[\w.]+\.yaml)\)", MATRIX.read_text()))
    assert listed == {str(p.relative_to(ROOT)) for p in RECIPES}


def run_offline(recipe: Path, data: dict, out: Path, *flags: str):
    """The recipe's cell on the fixture, without its judge, the first two tasks; returns the config and records."""
    config = resolve(parse(["--config", str(recipe), *flags]))
    offline = replace(config, data_dir=str(data[config.suite]), judge_model="none", judge_base_url=None, limit=2,
                      out=str(out))
    offline.explicit = config.explicit | {"data_dir", "judge_model", "judge_base_url", "limit", "out"}
    return config, evaluate(offline, backend=Answers())


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_recipe_runs_its_cell_as_the_paper_ran_it(recipe, data, tmp_path):
    config, records = run_offline(recipe, data, tmp_path / "run")
    assert records and all(r["model"] == config.model for r in records)
    report = (tmp_path / "run" / "report.md").read_text()
    assert "- **deviations from the paper's protocol**: none" in report
    for differences in UNLIKE.findall(report):
        assert all(d.startswith("judge none here") for d in differences.split("; ")), differences


def test_the_matrix_table_has_a_row_per_cell_and_mode_with_its_deviations(data, tmp_path):
    from eval.matrix import matrix

    recipes = ROOT / "recipes" / "eval"
    run_offline(recipes / "qwen3_vl_8b" / "vtc_bench_interface.yaml", data, tmp_path / "vtc")
    run_offline(recipes / "qwen2_5_vl_7b" / "agentic_mme_atm.yaml", data, tmp_path / "amme", "--max_tokens", "512")
    table = matrix([tmp_path / "vtc", tmp_path / "amme", tmp_path / "missing"])
    lines = table.splitlines()
    vtc = [line for line in lines if "vtc_bench" in line]
    assert len(vtc) == 2 and "| tools |" in vtc[0] and "| no_tools |" in vtc[1]  # Inter. and Base
    assert all("| track interface, prompt_variant strong |" in line and "| none |" in line for line in vtc)
    assert all("| 2 of 3 not like for like |" in line for line in vtc)  # the judge it lacks; the Code row: no run
    (amme,) = [line for line in lines if "agentic_mme" in line]
    assert "| max_tokens 512 |" in amme and "| no paper row |" in amme
    missing = [line for line in lines if str(tmp_path / "missing") in line]
    assert missing == ["| - | - | - | - | not finished (no summary.json: run it, or merge its shards) | - | - | - | "
                       f"- | {tmp_path / 'missing'} |"]  # one cell per column
