"""Evaluation suites: where the tasks come from, and what a run of them needs besides the model.

- `synthetic`: the `data_gen/` tasks, generated from seeds on the fly (the default suite);
- `jsonl`: the user's own tasks, one JSON object per line with image files beside it (format in
  `eval/suites/jsonl.py` and the README);
- the public benchmarks, one folder each in `eval/benchmarks/` (`tir_bench`, `vtc_bench`, `visualtoolbench`,
  `agentic_mme`): their data, their published protocol and their official scoring.

A `Suite` holds the tasks and the hooks where a benchmark's protocol differs from tirlab's defaults: the
prompt and budgets (`profile`, `start`), the sampling its paper used (`defaults`), its tools (`toolboxes`),
how an episode is scored (`score`, then `judge` for what needs an LLM), its paper-layout tables (`tables`)
and the paper's figures redrawn (`figures`). The synthetic and JSONL suites use every default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np

if TYPE_CHECKING:
    from eval.backends import Backend
    from eval.loop import Finished, ToolBoxes
    from runtime.episode import Episode
    from runtime.profiles import Budgets, ModelProfile
    from runtime.toolbox import ToolBox


@dataclass(frozen=True)
class FollowUp:
    """A scripted user turn sent after the model answers (VisualToolBench's multi-turn tasks)."""
    text: str
    images: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class Task:
    id: str
    question: str
    images: Sequence[np.ndarray]  # uint8 RGB, in the order the question refers to them (benchmarks: decoded lazily)
    answer: str  # the ground truth, in the scorer's format
    scorer: str  # a name in eval.scorers (or the benchmark's own scoring, for benchmark suites)
    category: str = "default"  # reports break accuracy down by it
    toolset: str = "default"  # the tool set the task was made for (a model profile may bring its own)
    reference_calls: int | None = None  # length of a reference tool chain, for chain-length MAE / overthink
    reference: tuple[dict, ...] = ()  # the reference calls themselves, {"name", "arguments"}, when known
    follow_ups: tuple[FollowUp, ...] = ()
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Skipped:
    """A dataset row the loader could not turn into a task. It still counts: the run records it as unscored
    in every mode, so a denominator never silently shrinks."""
    id: str
    category: str
    reason: str  # names the file, the row and the field


class Suite:
    """A suite with tirlab's own protocol: the tasks' questions as they are, the preset's prompts and
    sampling, and each answer scored by its task's scorer (`judge` tasks by the LLM judge)."""

    name = "tasks"
    # the SUITE_SETTINGS it reads (a tasks file: the tools it is offered, the episode's budgets)
    settings = frozenset({"toolset", "max_turns", "max_tool_calls"})

    def __init__(self, tasks: list[Task], skipped: list[Skipped] = ()):
        self.tasks = list(tasks)
        self.skipped = list(skipped)

    def describe(self) -> dict:
        """What the report states about the suite's protocol: dataset, prompt variant, scoring, judge."""
        return {}

    @property
    def variant_name(self) -> str | None:
        """Which of a benchmark's protocol variants this run is (tracks, prompts): records carry it, so runs of
        several variants can be reported together."""
        return None

    def profile(self, profile: ModelProfile) -> ModelProfile:
        """The model's profile with the suite's prompts, tools and budgets."""
        return profile

    def defaults(self, model: str, preset: str) -> dict:
        """Run settings the suite's paper fixes for `model` run with `preset` (EvalConfig fields: sampling,
        `max_tokens` (0: no cap), `max_pixels` (0: the checkpoint processor's own), `max_images`). A setting the
        user gives wins, and the report marks it as a deviation from the paper's protocol."""
        return {}

    def toolboxes(self, profile: ModelProfile) -> ToolBoxes:
        """The tools of each (task, mode): the profile's tool set or code tool, else the task's."""
        from eval.loop import toolboxes

        return toolboxes(profile)

    def start(self, toolbox: ToolBox, profile: ModelProfile, task: Task, mode: str, budgets: Budgets) -> Episode:
        """The episode of a task: its first prompt."""
        from eval.loop import start_episode

        return start_episode(toolbox, profile, task, mode, budgets)

    def rerun(self, finished: Finished) -> bool:
        """Whether the benchmark's own harness would run this task again from the start (the new run gets the
        earlier ones in `Finished.earlier`)."""
        return False

    def score(self, task: Task, finished: Finished) -> dict:
        """Record fields from an episode: `score` (None: not scored, `score_error` says why), and
        `judge_pending` when an LLM must still look at it (`judge`)."""
        from eval.judge import JUDGE
        from eval.scorers import get_scorer

        if task.scorer == JUDGE:
            return {"score": None, "score_error": "not judged yet", "judge_pending": True}
        try:
            return {"score": get_scorer(task.scorer)(finished.answer, task.answer), "score_error": None}
        except Exception as err:  # noqa: BLE001 - a scorer that fails on one answer must not stop the run
            return {"score": None, "score_error": f"{type(err).__name__}: {err}"}

    def needs_judge(self) -> str | None:
        """Why this suite needs an LLM judge (an error then asks for --judge_model), or None."""
        from eval.judge import JUDGE

        judged = [t.id for t in self.tasks if t.scorer == JUDGE]
        if judged:
            return f"{len(judged)} task(s), e.g. {judged[0]!r}, are scored by an LLM judge"
        return None

    def judge(self, items: list[tuple[Task, dict]], backend: Backend, judge_name: str,
              retries: int) -> Iterator[tuple[dict, dict]]:
        """Judge the records waiting for it; yields (record, fields to update it with) as verdicts arrive."""
        from eval.judge import Judge, JudgeItem

        judged = Judge(backend, retries=retries).judge_many(
            [JudgeItem(task.question, task.answer, record["prediction"], task.meta.get("rubric"), task.images)
             for task, record in items])
        for (_, record), verdict in zip(items, judged):
            yield record, {"score": verdict.score, "score_error": verdict.error,
                           "judge": {"model": judge_name, "reply": verdict.raw, "criteria": verdict.items}}

    @staticmethod
    def tables(records: list[dict], config: dict) -> list[str]:
        """Markdown sections in the suite's paper layout, for the report (from records alone, so `run_vllm.py
        report` can write them again without the data)."""
        return []

    @staticmethod
    def figures(records: list[dict], config: dict, folder: Path) -> list[tuple[str, str]]:
        """The paper's figures redrawn from the run's records (PNG files written into `folder`, the paper's points
        beside ours where the paper gives numbers): (title, file name) of each, for the report to link."""
        return []


# The public benchmarks, "module:class", imported on first use: the benchmarks build on this module, never the
# other way round.
BENCHMARKS = {
    "tir_bench": "eval.benchmarks.tir_bench:TirBench",
    "vtc_bench": "eval.benchmarks.vtc_bench:VtcBench",
    "visualtoolbench": "eval.benchmarks.visualtoolbench:VisualToolBench",
    "agentic_mme": "eval.benchmarks.agentic_mme:AgenticMme",
}
# Settings that only some suites read. Each suite names those it reads (`Suite.settings`); a run that sets
# another one is refused rather than silently ignored.
# the web tools' settings, read by the suites with web tools (runtime/web.py)
WEB_SETTINGS = ("web", "web_replay", "web_record", "web_cache", "web_max_calls", "web_max_cost", "web_timeout_s")
SUITE_SETTINGS = ("data_dir", "revision", "scoring", "prompt_variant", "track", "ablation", "study", "critical",
                  *WEB_SETTINGS, "tasks", "per_task", "difficulty", "toolset", "max_turns", "max_tool_calls")
SYNTHETIC_SETTINGS = frozenset({"tasks", "per_task", "difficulty", "toolset", "max_turns", "max_tool_calls"})


def suite_class(name: str | None) -> type[Suite]:
    if name in BENCHMARKS:
        from importlib import import_module

        module, cls = BENCHMARKS[name].split(":")
        return getattr(import_module(module), cls)
    return Suite


def check_settings(suite: str, chosen: set[str]) -> None:
    """Refuse the suite-specific settings a run chose that its suite does not read."""
    reads = SYNTHETIC_SETTINGS if suite == "synthetic" else suite_class(suite).settings
    unused = [name for name in SUITE_SETTINGS if name in chosen and name not in reads]
    if unused:
        label = suite if suite == "synthetic" or suite in BENCHMARKS else "a tasks .jsonl file"
        read = ", ".join("--" + k for k in SUITE_SETTINGS if k in reads) or "none of the suite settings"
        raise ValueError(f"--suite {label} does not use {', '.join('--' + k for k in unused)}: drop "
                         f"{'it' if len(unused) == 1 else 'them'} (this suite reads {read})")


def suite_tables(name: str | None, records: list[dict], config: dict) -> list[str]:
    """The paper-layout sections of a suite's report."""
    return suite_class(name).tables(records, config)


def suite_figures(name: str | None, records: list[dict], config: dict, folder: Path) -> list[tuple[str, str]]:
    """The paper figures of a suite's report, drawn into `folder`."""
    return suite_class(name).figures(records, config, folder)


def load_suite(config) -> Suite:
    """The suite a run names: 'synthetic', a benchmark, or a tasks .jsonl file."""
    if config.suite == "synthetic":
        from data_gen.tasks import TASKS
        from eval.suites.synthetic import synthetic_suite

        return Suite(list(synthetic_suite(config.tasks or tuple(TASKS), config.per_task, config.difficulty)))
    if config.suite in BENCHMARKS:
        return suite_class(config.suite).from_config(config)
    from eval.suites.jsonl import jsonl_suite

    return Suite(list(jsonl_suite(config.suite)))
