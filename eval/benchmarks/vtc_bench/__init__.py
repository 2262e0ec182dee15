"""VTC-Bench (arXiv 2603.15030, github.com/cs-w0r1d/VTC-Bench) as a suite: 680 problems in 9 categories and 3
tiers, run as the benchmark's Qwen-Agent harness runs them: its system prompt (strong or weak) and user
template (with the ground-truth tool chain as a hint, or without), the 35 `opencv_*` tools reproduced to the
pixel (interface track) or model-written Python in the sandbox (code track), its 20-round loop with its notes
and nudges, and the paper's sampling for open models; then its own scoring (rule-based matching, and an LLM
judge for what the rules reject). README.md in this folder explains each part.
"""

from __future__ import annotations

from dataclasses import replace

from eval.backends import Sampling
from eval.benchmarks.data import keep, wanted
from eval.benchmarks.vtc_bench import data, scoring, tables, thyme_framework
from eval.benchmarks.vtc_bench.harness import MAX_ROUNDS, QwenAgentLoop, protocol_texts
from eval.config import NO_JUDGE
from eval.suites import Skipped, Suite
from runtime.profiles import QWEN_STOP, Budgets
from runtime.protocols import HermesProtocol, OpenAIProtocol, Prompt
from runtime.protocols.base import reply_text
from runtime.trajectory import message_text

VARIANTS = ("strong", "weak", "strong_chain", "weak_chain")
TRACKS = ("interface", "code")
# appendix 0.A: the sampling of open models (seed: the harness seeds each request from the run's --seed)
SAMPLING = {"instruct": {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "presence_penalty": 1.5, "max_tokens": 16384},
            "thinking": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "presence_penalty": 0.0, "max_tokens": 40960}}
MAX_IMAGES = 32  # the original, up to 20 rounds of tool images and room for several calls in a round


class VtcBench(Suite):
    name = "vtc_bench"
    # the suite-specific settings it reads (eval.suites.SUITE_SETTINGS); any other one is refused
    settings = frozenset({"data_dir", "revision", "scoring", "tasks", "track", "prompt_variant", "max_turns",
                          "max_tool_calls"})

    def __init__(self, tasks, skipped, dataset: str, scoring_mode: str, judge: str | None,
                 track: str = "interface", variant: str = "strong", preset: str | None = None,
                 counts: str | None = None):
        super().__init__(tasks, skipped)
        self.dataset, self.scoring, self.judge_model = dataset, scoring_mode, judge
        self.counts = counts  # the rows read against the paper's item counts
        self.track, self.variant = track, variant
        self.texts = protocol_texts()
        # the paper ran DeepEyes and Thyme through the Thyme framework in the code track (thyme_framework.py)
        self.thyme = track == "code" and preset in thyme_framework.PRESETS
        self.preset = preset
        self._base_profile = None  # the Qwen-Agent path's profile: the direct (no tools) setting of a Thyme run
        self._next_phase: dict[tuple[str, str], str] = {}  # a Thyme run's next restart: "generation" or "fallback"

    @classmethod
    def from_config(cls, config) -> "VtcBench":
        track, variant = config.track or "interface", config.prompt_variant or "strong"
        if track not in TRACKS:
            raise ValueError(f"unknown --track {track!r} for vtc_bench; use one of {TRACKS}")
        if variant not in VARIANTS:
            raise ValueError(f"unknown --prompt_variant {variant!r} for vtc_bench; use one of {VARIANTS}")
        categories = wanted(config.tasks, data.CATEGORIES, "VTC-Bench category")
        loaded = data.load(config.data_dir, config.revision, track)
        print(loaded.counts)
        tasks, skipped = loaded.tasks, loaded.skipped
        if variant.endswith("_chain"):  # the prompt shows the task's own chain: a task without one cannot be asked
            tasks, skipped = [t for t in tasks if "no_chain" not in t.meta], skipped + [
                Skipped(t.id, t.category, f"no ground-truth chain for the {variant} prompt: {t.meta['no_chain']}")
                for t in tasks if "no_chain" in t.meta]
        judge = None if config.judge_model == NO_JUDGE else config.judge_model
        return cls(*keep(tasks, skipped, categories, data.CATEGORIES), loaded.source, config.scoring, judge, track,
                   variant, config.preset, loaded.counts)

    @property
    def variant_name(self) -> str:
        return f"{self.track}/{self.variant}"

    def describe(self) -> dict:
        if self.thyme:
            sampling = ", ".join(f"{k} {v}" for k, v in thyme_framework.SAMPLING[self.preset].items())
            config = "Custom-DeepEyes" if self.preset == "deepeyes" else "Custom-Thyme"
            protocol = (f"code track through the Thyme framework (VLMEvalKit's ThymeAPI, {config} in "
                        "cs-w0r1d/VTC-Bench@93a33a4): REASONING_SYS_PROMPT and generate_prompt_final_qa, <code> "
                        "blocks run in the sandbox by the reference's rules, "
                        f"{thyme_framework.MAX_ITERATIONS} model calls per generation, "
                        f"{thyme_framework.MAX_GENERATIONS} generations then the simple prompt, the item "
                        f"run again while its answer is empty ({thyme_framework.API_RETRIES} in all); the model's own "
                        f"sampling ({sampling}); images at the checkpoint processor's own size; the --prompt_variant "
                        "does not apply. Without tools: the suite's prompts, one reply")
        else:
            protocol = (f"{self.track} track, {self.variant.replace('_chain', '')} system prompt, "
                        f"{'with' if self.variant.endswith('_chain') else 'without'} the ground-truth tool chain "
                        "in the prompt; Qwen-Agent's 20-round loop; the paper's sampling for open models; images at "
                        "the checkpoint processor's own size")
        chainless = [t for t in self.tasks if "no_chain" in t.meta]
        return {
            "benchmark": "VTC-Bench (arXiv 2603.15030)",
            "dataset": self.dataset,
            **({"counts": self.counts} if self.counts else {}),
            "ground-truth chains": (f"{len(chainless)} of {len(self.tasks)} task(s) have none, so no chain MAE ("
                                    + "; ".join(f"{t.id}: {t.meta['no_chain']}" for t in chainless[:5])
                                    + (f"; and {len(chainless) - 5} more" if len(chainless) > 5 else "") + ")"
                                    if chainless else f"every task has its own ({len(self.tasks)})"),
            "harness": thyme_framework.NAME if self.thyme else "qwen-agent",
            "protocol": protocol,
            "scoring": f"{self.scoring} (official: VLMEvalKit's VTCBenchDataset in cs-w0r1d/VTC-Bench@93a33a4; "
                       "strict: tirlab's scorers)",
            "judge": (f"{self.judge_model} for the answers the rules reject (the paper names GPT-4o; the script's "
                      f"default is {scoring.JUDGE_MODEL})" if self.judge_model else
                      "none: rule-based matching only (the reference's fallback without an API key)"),
        }

    def defaults(self, model: str, preset: str) -> dict:
        if self.track == "code" and preset in thyme_framework.PRESETS:  # Custom-DeepEyes / Custom-Thyme
            return {**thyme_framework.SAMPLING[preset], "max_pixels": 0, "max_images": MAX_IMAGES}
        # the paper serves open models with vLLM, whose processor keeps the checkpoint's own image size
        return {**SAMPLING["thinking" if "thinking" in model.lower() else "instruct"], "max_pixels": 0,
                "max_images": MAX_IMAGES}

    def profile(self, profile):
        protocol = profile.protocol
        if isinstance(protocol, OpenAIProtocol):
            protocol = replace(protocol, images_first=False)
        else:  # hermes through the model's own format; DeepEyes' zoom-only tool prompt and Thyme's code do not apply
            hermes = protocol.plain() if isinstance(protocol, HermesProtocol) else HermesProtocol(stop=QWEN_STOP)
            protocol = replace(hermes, name="hermes-vtc", images_first=False)
        system = self.texts["system_weak" if self.variant.startswith("weak") else "system_strong"]
        base = replace(profile, protocol=protocol, system_prompt=system, question_suffix="",
                       toolset="vtc_bench" if self.track == "interface" else None, code_tool=None,
                       budgets=Budgets(max_turns=MAX_ROUNDS, max_tool_calls=10 * MAX_ROUNDS, max_images=MAX_IMAGES),
                       answer_with_calls="calls", harness=QwenAgentLoop(),
                       # Qwen-Agent runs every call of a reply (the prompt asks for one); a reply without a call
                       # or an answer gets the harness's nudge
                       max_calls_per_turn=None, answer_tag_required=False)
        if not self.thyme:
            return base
        self._base_profile = base
        return thyme_framework.profile_for(base)

    def toolboxes(self, profile):
        from eval.loop import ToolBoxes
        from runtime.toolbox import ToolBox

        def make(mode) -> ToolBox:
            if mode == "no_tools":
                return ToolBox(None)
            if self.thyme:
                from runtime.sandbox import SandboxPool

                return ToolBox(None, code_tools=[thyme_framework.THYME_SANDBOX],
                               sandbox=SandboxPool(thyme_framework.SANDBOX_CONFIG))
            if self.track == "code":
                from eval.benchmarks.vtc_bench.code_track import CODE_INTERPRETER, SANDBOX_CONFIG
                from runtime.sandbox import SandboxPool

                return ToolBox(None, code_tools=[CODE_INTERPRETER], sandbox=SandboxPool(SANDBOX_CONFIG))
            return ToolBox("vtc_bench")

        return ToolBoxes(lambda task, mode: mode, make)

    def start(self, toolbox, profile, task, mode, budgets):
        if self.thyme and mode == "tools":
            return self._start_thyme(toolbox, profile, task)
        if mode == "no_tools":  # the direct baseline: the same prompts, one reply, no tools
            profile = replace(self._base_profile or profile, harness=None)
            budgets = profile.budgets if self._base_profile else budgets
        template = self.texts["user_with_chain" if self.variant.endswith("_chain") else "user"]
        question = _with_options(task.question, task.meta["options"])
        width, height = task.meta["image_size"]
        chain = task.meta["row"].get("model_tools_gt") or ""

        def prompt(paths) -> str:
            fields = {"question": question, "image_path": str(paths[0]), "image_size": f"{width}x{height}"}
            return template.format(**fields, **({"reference_trajectory": chain} if "_chain" in self.variant else {}))

        return toolbox.start(profile, prompt, task.images, budgets=budgets,
                             meta={"task": task.id, "category": task.category, "mode": mode})

    def _start_thyme(self, toolbox, profile, task):
        """A generation of ThymeAPI.generate_inner from its first prompt, or its simple-prompt fallback."""
        phase = self._next_phase.pop((task.id, "tools"), "generation")
        options = task.meta["options"]
        width, height = task.meta["image_size"]
        if phase == "fallback":
            profile = thyme_framework.profile_for(self._base_profile or profile, fallback=True)
            prompt = thyme_framework.simple_prompt(task.question, options)
        else:
            def prompt(paths) -> str:
                return thyme_framework.user_prompt(task.question, options, str(paths[0]), f"{width}x{height}")
        return toolbox.start(profile, prompt, task.images, budgets=profile.budgets,
                             meta={"task": task.id, "category": task.category, "mode": "tools", "thyme_phase": phase})

    def rerun(self, finished) -> bool:
        if self.thyme and finished.mode == "tools":
            return self._rerun_thyme(finished)
        return self._rerun_qwen_agent(finished)

    def _rerun_thyme(self, finished) -> bool:
        """A generation without an answer starts again (5 generations, then the simple prompt); an item whose
        answer is empty (or where the reference's answer extraction raises) is run again, 10 times in all."""
        calls = _thyme_calls((*finished.earlier, finished))
        last = calls[-1]
        if not _thyme_call_ended(last):
            generations = sum(run.trajectory.meta.get("thyme_phase") == "generation" for run in last)
            self._next_phase[(finished.task.id, "tools")] = \
                "generation" if generations < thyme_framework.MAX_GENERATIONS else "fallback"
            return True
        if _thyme_call_answer(last) in ("", None) and len(calls) < thyme_framework.API_RETRIES:
            self._next_phase[(finished.task.id, "tools")] = "generation"
            return True
        return False

    def _rerun_qwen_agent(self, finished) -> bool:
        """process_single_item runs an item again (3 runs in all) while its answer is empty or refuses."""
        runs = 1 + len(finished.earlier)
        return runs < scoring.AGENT_RUNS and scoring.answer_needs_rerun(_answer(finished)[1])

    def score(self, task, finished) -> dict:
        text, prediction = _thyme_answer(finished) if self.thyme and finished.mode == "tools" else _answer(finished)
        row = {**task.meta["row"], "prediction": prediction}
        fields = {"response": text, "prediction": prediction, "variant": self.variant_name,
                  "chain": _chain_fields(finished.trajectory.messages),
                  # the ground truth's tools, for the figures of chain length and tool diversity
                  "gt_chain": scoring.parse_gt_chain(task.meta["row"]["model_tools_gt"])[0]
                  if task.meta["row"].get("model_tools_gt") else None,
                  **({"no_chain": task.meta["no_chain"]} if "no_chain" in task.meta else {})}
        errors = {}
        try:
            rule = fields["rule_score"] = scoring.rule_score(row)
            official = rule if rule >= 0.5 or not self.judge_model else None
        except scoring.ReferenceExportError as err:  # the reference's export of the run would fail on it
            official, errors["official"] = None, f"the benchmark cannot score this answer: {err}"
        try:
            strict = scoring.strict_score(row)
        except ValueError as err:
            strict, errors["strict"] = None, f"strict scoring cannot score this item: {err}"
        scores = {"official": official, "strict": strict}
        if official is None and "official" not in errors:  # the judge looks at what the rules reject
            return {**fields, "scores": scores, "score": scores["strict"] if self.scoring == "strict" else None,
                    "score_error": errors.get("strict") if self.scoring == "strict" else "not judged yet",
                    "judge_pending": True}
        return {**fields, "scores": scores, "score": scores[self.scoring], "score_error": errors.get(self.scoring)}

    def judge(self, items, backend, judge_name: str, retries: int):
        """The benchmark's judge (`scoring.judge_conversation`, the reference's own retry protocol: the run's
        --judge_retries does not apply), every row's next request in one batch until each has its verdict."""
        from eval.judge import ask

        rows = {k: {**task.meta["row"], "prediction": record["prediction"]} for k, (task, record) in enumerate(items)}
        conversations = {key: scoring.judge_conversation(row, judge_name) for key, row in rows.items()}
        requests = {key: next(conversation) for key, conversation in conversations.items()}
        replies, hits = {}, {}
        while requests:
            completions = ask(backend, list(requests), lambda key, _: (
                Prompt(requests[key]["messages"], images=[]),
                Sampling(max_tokens=requests[key]["max_tokens"], temperature=requests[key]["temperature"])))
            for key, completion in completions.items():
                replies[key] = None if completion.error else reply_text(completion.reply)
                try:
                    requests[key] = conversations[key].send(replies[key])
                except StopIteration as done:
                    hits[key] = done.value
                    del requests[key]
        for key, (task, record) in enumerate(items):
            hit = hits[key]
            scores = {**record["scores"], "official": None if hit is None else float(hit)}
            error = None if hit is not None else (f"the judge gave no verdict in {scoring.JUDGE_ATTEMPTS} attempts "
                                                  "(the benchmark counts the answer wrong)")
            yield record, {"score": scores[self.scoring], "scores": scores, "score_error": error,
                           "judge": {"model": judge_name, "reply": replies[key]}}

    @staticmethod
    def tables(records: list[dict], config: dict) -> list[str]:
        return tables.sections(records, config)

    @staticmethod
    def figures(records: list[dict], config: dict, folder) -> list[tuple[str, str]]:
        from eval.benchmarks.vtc_bench import figures

        return figures.draw(records, config, folder)


def _with_options(question: str, options: dict) -> str:
    """The question as the benchmark's script writes it: non-empty options appended one per paragraph."""
    lines = [f"{key}. {value}\n" for key, value in options.items()]
    return question + "\n\nOptions:\n" + "\n".join(lines) if lines else question


def _answer(finished) -> tuple[str | None, str | None]:
    """The last run's response text and the answer the benchmark records: it never resets the answer between
    runs, so a run without answer tags keeps the earlier run's."""
    answer = text = None
    for run in (*finished.earlier, finished):
        text, reasoning = scoring.final_response(agent_messages(run.trajectory.messages))
        answer = scoring.extract_agent_answer(text, reasoning, previous=answer)
    return text, answer


def _thyme_calls(runs) -> list[list]:
    """The runs grouped into ThymeAPI.generate_inner calls: a call ends with an answered run or its fallback."""
    calls, current = [], []
    for run in runs:
        current.append(run)
        if _thyme_call_ended(current):
            calls, current = calls + [current], []
    return calls + ([current] if current else [])


def _thyme_call_ended(call: list) -> bool:
    run = call[-1]
    return run.stop_reason == "answer" or run.trajectory.meta.get("thyme_phase") == "fallback"


def _thyme_call_response(call: list) -> str:
    """generate_inner's final response: the last reply of its last conversation (an answer as written)."""
    if call[-1].stop_reason == "answer":
        return call[-1].answer
    for run in reversed(call):
        replies = [message_text(m) for m in run.trajectory.messages if m["role"] == "assistant"]
        if replies:
            return replies[-1]
    return ""


def _thyme_call_answer(call: list) -> str | None:
    return thyme_framework.final_answer(_thyme_call_response(call))


def _thyme_answer(finished) -> tuple[str, str]:
    """The last response and the prediction BaseAPI.generate returns: the last answer that did not raise, or its
    failure message when that is empty."""
    calls = _thyme_calls((*finished.earlier, finished))
    answers = [a for a in map(_thyme_call_answer, calls) if a is not None]
    answer = answers[-1] if answers else None
    return _thyme_call_response(calls[-1]), answer if answer not in ("", None) else thyme_framework.FAIL_MESSAGE


def agent_messages(messages: list[dict]) -> list[dict]:
    """The messages the benchmark's agent loop produced, shaped as Qwen-Agent holds them (what its answer
    extraction reads): replies and nudges with string content, tool results as lists of parts."""
    first_user = next((k for k, m in enumerate(messages) if m["role"] == "user"), len(messages))
    return [{"role": m["role"], "content": m["content"] if m["role"] == "tool" else message_text(m)}
            for m in messages[first_user + 1:]]


def _chain_fields(messages: list[dict]) -> dict:
    from eval.metrics import calls, effective_chain

    chain = calls(messages)
    effective = effective_chain(chain)
    return {"calls": [c.name for c in chain], "effective": [c.name for c in effective]}
