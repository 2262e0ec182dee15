"""An LLM judge for free-form answers, on any tirlab backend (the vLLM engine, an OpenAI-compatible server, HF
generate).

- Without a rubric, one judgment per item: does the answer agree with the reference answer? Score 1 or 0.
- With a rubric (VisualToolBench's rubrics, Agentic-MME's process checkpoints), one judgment per criterion, as
  VisualToolBench's judge does ("each judgment considers one rubric at a time", paper App. D.3): the score is
  the share of criteria met, and `Verdict.items` keeps each criterion's verdict, so a caller can weight them
  (VisualToolBench's weights and critical rubrics).

Every judgment asks for a JSON object `{"explanation": ..., "judge_result": ...}`. It is read wherever it is in
the reply (fenced or not, after any thinking; the last one wins). A reply without one, or a failed request,
gives score None and an error string, never an exception. On backends with structured outputs (vLLM engines
and servers) `Sampling(regex=VERDICT_REGEX)` makes every reply parse.

    judge = Judge(backend)
    verdicts = judge.judge_many([JudgeItem("How much is the pizza?", "$16", reply, rubric=["Reports $16."])])

All judgments are submitted at once, so the backend batches them; the judge needs the backend to itself while
`judge_many` runs (it would not know where another caller's completions go).
"""

from __future__ import annotations

import json
import re
import string
import uuid
from dataclasses import dataclass
from typing import Callable

import numpy as np

from eval.backends import Backend, Completion, Sampling
from runtime.protocols import Prompt
from runtime.protocols.base import reply_text

JUDGE = "judge"  # the scorer name of tasks an LLM judge scores (task.meta["rubric"]: its criteria, if any)


@dataclass(frozen=True)
class JudgeItem:
    question: str
    truth: str  # the reference (golden) answer; "" when a rubric alone decides
    prediction: str  # what the judged model answered
    rubric: list[str] | None = None  # criteria, each judged on its own
    images: tuple[np.ndarray, ...] = ()  # shown to the judge before the text, e.g. the question's image

    def __post_init__(self):
        if self.rubric is not None and (not isinstance(self.rubric, (list, tuple)) or not self.rubric
                                        or not all(isinstance(c, str) and c.strip() for c in self.rubric)):
            raise ValueError(f"a rubric is a non-empty list of criteria (non-empty strings) or None, got "
                             f"{self.rubric!r:.200}")
        if self.rubric is None and not self.truth.strip():
            raise ValueError("a judge item needs a reference answer (truth), a rubric, or both")


@dataclass(frozen=True)
class Verdict:
    score: float | None  # 1 or 0 against the reference, or the share of rubric criteria met; None: see error
    raw: str  # the judge's reply; with a rubric, the replies in criterion order, separated by blank lines
    error: str | None  # why there is no score: a failed request or a reply without a verdict
    items: list[dict] | None = None  # with a rubric: {"criterion", "met" (bool | None), "explanation", "error"}


@dataclass(frozen=True)
class JudgeTemplate:
    """The judge's instructions, as `str.format` templates (literal braces doubled)."""

    reference: str  # fields: {question}, {truth}, {prediction}
    rubric: str  # fields: {question}, {truth}, {prediction}, {criterion}


# Written for tirlab: a reference check that accepts equivalent forms and refuses hedged answers.
REFERENCE_PROMPT = """\
You are an expert evaluator. Decide whether a model's answer to a question is correct, using the golden \
(reference) answer, which is correct by definition.

### Inputs:
**Question:** {question}

**Golden Answer:** {truth}

**Model Answer:** {prediction}

### Rules:
- The model's answer is correct when its final answer agrees with the golden answer: the same value, option, \
entity or meaning. Equivalent forms count: a different wording or formatting, a synonym, units written \
differently, a fraction or percentage for the same number, a number given at least as precisely as the golden \
answer.
- Judge only the final answer, not the reasoning or the style.
- An answer that gives several different final answers, or none, is incorrect.
- Do not solve the question yourself.

### Output Format:
Output only a JSON object, with no other text:
{{"explanation": "Brief explanation of your judgement", "judge_result": "Correct" or "Incorrect"}}
"""

# VisualToolBench's rubric judge, worded as published: paper App. D.3 ("LLM Judge Prompt") and
# xi1ngang/VisualToolBench scripts/run_judge_single_turn.py (LLM_Judge.LLMasJudge).
RUBRIC_PROMPT = """\
You are an expert evaluator tasked with judging whether a model's answer meets a specific rubric criterion.
You will be provided with:
- a question
- a golden (reference) answer
- a rubric criterion
- the model's answer

Your task is to decide if the model's answer **meets** or **does not meet** the given rubric criterion, \
referencing the golden answer only as needed.

### Inputs:
**Question:** {question}

**Golden Answer:** {truth}

**Rubric Criterion:** {criterion}

**Model Answer:** {prediction}

### Important Notes:
- The model's answer does not need to be correct to meet the criterion if correctness is not required.
*Example:* If the rubric is "The model should show its reasoning process to answer the question," the answer \
can be incorrect but still meet the rubric if model's reasoning process is present.
- For writing style or presentation rubrics, apply leniency.
*Example:* If the rubric asks for conciseness, answers that are slightly longer than the golden answer but \
still reasonably length should be considered as meeting the rubric.
- The model's answer may satisfy the rubric implicitly without explicitly mentioning the exact term. This \
should still be considered as meeting the criterion if model's answer is reasonable and makes sense.
*Example:* If the rubric is "The model should demonstrate understanding of photosynthesis," and the model \
states "Plants make their own food using sunlight," without explicitly mentioning the term "photosynthesis," \
it still meets the criterion.

### Output Format:
Return your judgement in the following JSON format:
{{
    "explanation": "Brief explanation of your judgement",
    "judge_result": "Met" or "Not Met"
}}
"""

DEFAULT_TEMPLATE = JudgeTemplate(reference=REFERENCE_PROMPT, rubric=RUBRIC_PROMPT)

# Structured outputs: the verdict object alone, its explanation bounded so the reply fits in max_tokens.
VERDICT_REGEX = r'\{"explanation": "[^"\\\n]{0,300}", "judge_result": "(Met|Not Met|Correct|Incorrect)"\}'

# Both prompts' verdict words are read in both modes (they mean the same), plus common synonyms.
PASSED = {"met": True, "correct": True, "pass": True, "yes": True, "true": True,
          "not met": False, "incorrect": False, "fail": False, "no": False, "false": False}


def parse_verdict(reply: str) -> tuple[bool | None, str, str | None]:
    """(passed, explanation, error) from a judge's reply: the last JSON object in it with a `judge_result`."""
    decoder, found = json.JSONDecoder(), None
    for start in (m.start() for m in re.finditer(r"\{", reply)):
        try:
            candidate, _ = decoder.raw_decode(reply, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(candidate, dict) and "judge_result" in candidate:
            found = candidate
    if found is None:
        return None, "", 'no JSON object with a "judge_result" in the reply'
    result, explanation = found["judge_result"], found.get("explanation")
    explanation = explanation if isinstance(explanation, str) else ""
    passed = PASSED.get(" ".join(re.sub(r"[_-]", " ", result).casefold().strip(" .!*").split())) \
        if isinstance(result, str) else result
    if not isinstance(passed, bool):
        return None, explanation, (f'"judge_result" is {json.dumps(result)[:80]}, not "Met"/"Not Met" or '
                                   '"Correct"/"Incorrect"')
    return passed, explanation, None


class Judge:
    def __init__(self, backend: Backend, sampling: Sampling = Sampling(max_tokens=512, temperature=0.0),
                 template: JudgeTemplate = DEFAULT_TEMPLATE, retries: int = 1):
        _check_fields("reference", template.reference, {"prediction"}, {"question", "truth"})
        _check_fields("rubric", template.rubric, {"prediction", "criterion"}, {"question", "truth"})
        self.backend, self.sampling, self.template, self.retries = backend, sampling, template, retries

    def prompts(self, item: JudgeItem) -> list[Prompt]:
        """One prompt per judgment: the reference check, or one per rubric criterion."""
        fields = {"question": item.question, "truth": item.truth or "(none given)", "prediction": item.prediction}
        texts = ([self.template.reference.format(**fields)] if item.rubric is None
                 else [self.template.rubric.format(**fields, criterion=c) for c in item.rubric])
        content = [{"type": "image"} for _ in item.images]
        return [Prompt(messages=[{"role": "user", "content": content + [{"type": "text", "text": text}]}],
                       images=list(item.images)) for text in texts]

    def judge_many(self, items: list[JudgeItem]) -> list[Verdict]:
        """Judge every item: all judgments are submitted at once; one that fails or gives no verdict is asked
        again, up to `retries` attempts in all."""
        prompts = {(i, j): prompt for i, item in enumerate(items) for j, prompt in enumerate(self.prompts(item))}
        completions = ask(self.backend, list(prompts), lambda key, attempt: (prompts[key], self.sampling),
                          self.retries, accept=lambda key, completion: _judgment(completion)[3] is None)
        return [verdict(item, [completions[i, j] for j in range(len(item.rubric or [None]))])
                for i, item in enumerate(items)]


def ask(backend: Backend, keys: list, request: Callable[[object, int], tuple[Prompt, Sampling]], attempts: int = 1,
        accept: Callable[[object, Completion], bool] = lambda key, completion: completion.error is None) -> dict:
    """One completion per key: every request is submitted at once (the backend batches them), then the ones
    that failed or that `accept(key, completion)` refuses are sent again (`request(key, attempt)` may change the prompt or the
    sampling per attempt), up to `attempts` in all. Returns each key's last completion. The caller needs the
    backend to itself meanwhile (it would not know where another caller's completions go)."""
    batch, done, pending = uuid.uuid4().hex[:12], {}, list(keys)
    for attempt in range(max(1, attempts)):
        wire = {f"judge-{batch}/{attempt}/{n}": key for n, key in enumerate(pending)}
        for name, key in wire.items():
            backend.submit(name, *request(key, attempt))
        for name, completion in _collect(backend, wire).items():
            done[wire[name]] = completion
        pending = [key for key in pending if not accept(key, done[key])]
        if not pending:
            break
    return done


def _collect(backend: Backend, wire: dict) -> dict[str, Completion]:
    completions: dict[str, Completion] = {}
    while len(completions) < len(wire):
        finished = backend.poll(timeout=None)
        if not finished and backend.in_flight() == 0:  # a backend that dropped requests: say so
            for name in wire:
                completions.setdefault(name, Completion("", error="the backend returned no completion"))
        for name, completion in finished:
            if name not in wire:
                raise RuntimeError(f"the backend returned {name!r}, which this judge did not submit; give the "
                                   "judge a backend of its own while it runs")
            completions[name] = completion
    return completions


def verdict(item: JudgeItem, completions: list[Completion]) -> Verdict:
    """An item's verdict from the judge's completions, one per judgment in `Judge.prompts` order (so stored
    judge replies can be scored again)."""
    judged = [_judgment(c) for c in completions]
    raw = "\n\n".join(text for text, _, _, _ in judged)
    if item.rubric is None:
        _, passed, _, error = judged[0]
        return Verdict(None if error else float(passed), raw, error)
    items = [{"criterion": c, "met": passed, "explanation": explanation, "error": error}
             for c, (_, passed, explanation, error) in zip(item.rubric, judged)]
    errors = [f"criterion {k}: {entry['error']}" for k, entry in enumerate(items, 1) if entry["error"]]
    if errors:
        return Verdict(None, raw, "; ".join(errors), items)
    return Verdict(sum(entry["met"] for entry in items) / len(items), raw, None, items)


def _judgment(completion: Completion) -> tuple[str, bool | None, str, str | None]:
    """(reply text, passed, explanation, error) of one judgment."""
    text = reply_text(completion.reply)
    if completion.error:
        return text, None, "", f"the judge request failed: {completion.error}"
    passed, explanation, error = parse_verdict(text)
    if error and completion.truncated:
        error += " (the reply stopped at max_tokens: raise Sampling.max_tokens)"
    return text, passed, explanation, error


def _check_fields(name: str, template: str, required: set[str], optional: set[str]) -> None:
    try:
        fields = {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}
    except ValueError as err:
        raise ValueError(f"the judge's {name} template is not a str.format template ({err}); double literal "
                         "braces") from None
    if not required <= fields <= required | optional:
        raise ValueError(f"the judge's {name} template uses the fields {sorted(fields)}; it must use "
                         f"{sorted(required)} and may use {sorted(optional)} (double literal braces)")
