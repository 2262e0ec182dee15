"""TIR-Bench (arXiv 2511.01833, github.com/agents-x-project/TIR-Bench) as a suite: 1,215 items over 13 tasks,
the dataset's own prompts, greedy decoding with 2,048 new tokens (the paper's appendix E), answers extracted
by an LLM with the repository's per-task few-shot prompts (OCR is scored on the raw response), then scored
as its `calculate_score.py` scores them. `--study function_calling` runs the section 4.4 study instead: all six
cells of its Table 3 in one run (`--track`, `--prompt_variant` keep some).
README.md in this folder explains the protocol, the official and strict scoring and the reference vectors.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from eval.backends import Sampling
from eval.benchmarks.data import keep, wanted
from eval.benchmarks.tir_bench import data, figures, function_calling, tables
from eval.benchmarks.tir_bench.extraction import EXTRACTION_MODEL, extraction_messages
from eval.benchmarks.tir_bench.scoring import UnscorableItem, score_item, strict_score
from eval.config import NO_JUDGE
from eval.scorers import extract_answer
from eval.suites import Suite
from runtime.protocols import Prompt, final_text
from runtime.protocols.base import reply_text

MAX_NEW_TOKENS = 2048  # appendix E: greedy, max new tokens 2048 for the open models
EXTRACTION_SAMPLING = Sampling(max_tokens=1024, temperature=0.0)


class TirBench(Suite):
    name = "tir_bench"
    # the suite-specific settings it reads (eval.suites.SUITE_SETTINGS); any other one is refused
    settings = frozenset({"data_dir", "revision", "scoring", "tasks", "toolset", "study", "track", "prompt_variant",
                          "max_turns", "max_tool_calls"})

    def __init__(self, tasks, skipped, dataset: str, scoring: str, judge: str | None, study: str | None = None,
                 cells: tuple[tuple[str, str], ...] = (), preset: str | None = None, counts: str = "",
                 flagged: tuple[str, ...] = ()):
        super().__init__(tasks, skipped)
        self.dataset, self.scoring, self.judge_model = dataset, scoring, judge
        self.study, self.cells, self.preset = study, tuple(cells), preset
        self.counts, self.flagged = counts, tuple(flagged)

    @classmethod
    def from_config(cls, config) -> "TirBench":
        if config.study not in (None, "function_calling"):
            raise ValueError(f"unknown --study {config.study!r} for tir_bench; the paper's study is 'function_calling'")
        if config.study:  # an unknown track or variant fails here, before loading
            cells = function_calling.cells(config.track, config.prompt_variant)
            if config.tools != "on" or config.tasks:
                raise ValueError("--study function_calling runs the rotation-game items with the rotate function or "
                                 "code (Table 3 has no run without tools): drop --tools none|both and --tasks")
        elif config.track or config.prompt_variant:
            raise ValueError("--track and --prompt_variant select a cell of tir_bench's --study function_calling; "
                             "the main benchmark has one protocol")
        categories = {"rotation_game"} if config.study else wanted(config.tasks, data.TASKS, "TIR-Bench task")
        loaded = data.load(config.data_dir, config.revision)
        print(loaded.counts, flush=True)
        if loaded.flagged:
            print(f"{len(loaded.flagged)} row(s) kept as the benchmark scores them, but their fields disagree:\n  "
                  + "\n  ".join(loaded.flagged), flush=True)
        tasks, skipped = keep(loaded.tasks, loaded.skipped, categories, data.TASKS)
        if config.study:
            tasks, skipped = function_calling.study_tasks(tasks, skipped, cells)
        return cls(tasks, skipped, loaded.source, config.scoring, config.judge_model, config.study,
                   cells if config.study else (), config.preset, loaded.counts, loaded.flagged)

    @property
    def variant_name(self) -> str | None:
        """The study's cell when the run has one; with several, each record carries its own (`score`), and a row
        the loader skipped carries the study's name (its id names its cell)."""
        if not self.study:
            return None
        return function_calling.cell_name(*self.cells[0]) if len(self.cells) == 1 else self.study

    def describe(self) -> dict:
        described = {
            "benchmark": "TIR-Bench (arXiv 2511.01833)",
            "dataset": self.dataset,
            # the paper lets a tool-using model use its own tools (DeepEyes' framework); it has no tool set
            "harness": ("function-calling-study" if self.study else
                        self.preset if self.preset in ("deepeyes", "thyme") else "hermes-default-tools"),
            "protocol": ("the rotation-game items, each cell's prompt after the question and its return prompt "
                         "after every call (paper appendix D); greedy decoding, 2048 new tokens (appendix E); up to "
                         f"{function_calling.BUDGETS.max_turns} replies" if self.study else
                         "the dataset's prompts and images at the checkpoint processor's own size; greedy decoding, "
                         "2048 new tokens (paper appendix E); with tools: the model's own (DeepEyes' zoom tool, "
                         "Thyme's code), else tirlab's default tool set in the model's call format"),
            "scoring": f"{self.scoring} (official: calculate_score.py of agents-x-project/TIR-Bench@f79c756; "
                       "strict: tirlab's scorers)",
            "answer extraction": (f"{self.judge_model} with the repository's few-shot prompts (the repository uses "
                                  f"{EXTRACTION_MODEL})" if self.judge_model not in (None, NO_JUDGE) else
                                  "none: the <answer> tag or the whole reply, not the benchmark's LLM extraction "
                                  "(not comparable with the paper)"),
            "counts": self.counts,
        }
        if self.flagged:
            described["flagged rows"] = "; ".join(self.flagged)
        if self.study:
            described["study"] = ("function calling (section 4.4), cells (track/prompt): "
                                  + ", ".join(function_calling.cell_name(*cell) for cell in self.cells))
        return described

    def defaults(self, model: str, preset: str) -> dict:
        # the paper sets no image size: its scripts load each checkpoint with its processor's own
        return {"temperature": 0.0, "max_tokens": MAX_NEW_TOKENS, "max_pixels": 0}

    def profile(self, profile):
        # TIR-Bench scores the raw final response: a reply without an answer tag is still the answer. The study's
        # budgets are set here, so a run's own --max_turns still wins; each cell's tools and prompts are set per
        # episode (`start`).
        profile = replace(profile, answer_tag_required=False)
        return replace(profile, budgets=function_calling.BUDGETS) if self.study else profile

    def toolboxes(self, profile):
        if not self.study:
            return super().toolboxes(profile)
        from eval.loop import ToolBoxes
        from runtime.toolbox import ToolBox

        def make(track):  # one per track: the rotate function, or the sandbox the cell's code runs in
            if track is None:
                return ToolBox(None)
            studied = function_calling.study_profile(profile, track, function_calling.VARIANTS[0])
            if studied.code_tool:
                from runtime.sandbox import SandboxPool

                return ToolBox.for_profile(studied, sandbox=SandboxPool())
            return ToolBox(studied.toolset)

        return ToolBoxes(lambda task, mode: None if mode == "no_tools" else task.meta["cell"][0], make)

    def start(self, toolbox, profile, task, mode, budgets):
        if self.study:  # the cell's prompts, tools and return prompt; the run's budgets
            profile = function_calling.study_profile(profile, *task.meta["cell"])
        return super().start(toolbox, profile, task, mode, budgets)

    def needs_judge(self) -> str | None:
        if any(t.category != "ocr" for t in self.tasks):
            return ("TIR-Bench's scoring first extracts each answer with an LLM (gpt-4.1 in its repository); "
                    "choose the extractor with --judge_model, or --judge_model none to read answers without one "
                    "(not comparable with the paper)")
        return None

    def score(self, task, finished) -> dict:
        response = final_text(finished.trajectory)
        cell = task.meta.get("cell")
        fields = {"response": response, "variant": function_calling.cell_name(*cell) if cell else None}
        if task.category == "ocr":  # scored on the raw response, never extracted
            return {**fields, **self._scored(_item(task, response, None))}
        if self.judge_model == NO_JUDGE:
            extracted = extract_answer(response)
            return {**fields, "extracted": extracted, **self._scored(_item(task, response, extracted))}
        return {**fields, "score": None, "score_error": "the answer is not extracted yet", "judge_pending": True}

    def judge(self, items, backend, judge_name: str, retries: int):
        from eval.judge import ask

        prompts = {index: Prompt(extraction_messages(task.category, task.question, record["response"]), images=[])
                   for index, (task, record) in enumerate(items)}
        completions = ask(backend, list(prompts), lambda key, attempt: (prompts[key], EXTRACTION_SAMPLING), retries)
        for index, (task, record) in enumerate(items):
            completion = completions[index]
            judge = {"model": judge_name, "reply": reply_text(completion.reply)}  # servers reply with a message
            if completion.error:
                yield record, {"score": None, "scores": None, "judge": judge,
                               "score_error": f"answer extraction failed after {retries} attempt(s): {completion.error}"}
                continue
            extracted = judge["reply"]
            yield record, {"extracted": extracted, "judge": judge,
                           **self._scored(_item(task, record["response"], extracted))}

    def _scored(self, item: dict) -> dict:
        """Both scoring modes of one item, and the run's --scoring as its score."""
        scores, errors = {}, {}
        for mode, scorer in (("official", score_item), ("strict", strict_score)):
            try:
                scores[mode] = float(scorer(item))
            except UnscorableItem as err:
                scores[mode], errors[mode] = None, f"{mode} scoring cannot score this item: {err}"
        return {"score": scores[self.scoring], "scores": scores, "score_error": errors.get(self.scoring)}

    @staticmethod
    def tables(records: list[dict], config: dict) -> list[str]:
        return tables.sections(records, config)

    @staticmethod
    def figures(records: list[dict], config: dict, folder: Path) -> list[tuple[str, str]]:
        return figures.draw(records, config, folder)


def _item(task, response: str, extracted: str | None) -> dict:
    """The record in the repository's own result format, as `calculate_score.py` reads it."""
    row = task.meta["row"]
    return {**row, "model_response": response, "extracted_answer": extracted, "question_id": row.get("id")}

