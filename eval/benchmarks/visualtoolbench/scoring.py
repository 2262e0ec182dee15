"""VisualToolBench scoring: the benchmark's own rubric judging and analysis reproduced, beside our strict scoring.

The reference is scripts/run_judge_single_turn.py and scripts/run_judge_multi_turn.py of
github.com/xi1ngang/VisualToolBench at commit d4f200a0 (`LLM_Judge.LLMasJudge`, `process_chunk_judging`,
`analyze_results`). This is our own code; tests/eval/benchmarks/data/visualtoolbench_score_vectors.json proves
it against theirs, quirks included. SCORING.md lists the rules and the quirks.

Everything works on the reference's own data shapes, under its names:

- a model-response example: single-turn `{"task_id", "prompt", "golden_answer", "model_answer", "turncase",
  "eval_focus", "prompt_category", ...}`; multi-turn `{"task_id", "turns": [{"prompt", "golden_answer",
  "model_answer"}, ...], "turncase", "eval_focus", "prompt_category", ...}`;
- the clean rubrics (a list, searched by `task_id`): single-turn `{"task_id", "rubrics": {rubric_id:
  {"description", "weight", ...}}}`; multi-turn `{"task_id", "turns": [{"rubrics": {...}}, ...]}`. Rubrics must
  be dicts here (the dataset stores each turn's rubrics as a JSON string: parse it first);
- a per-task eval result `{"task_id", "turncase", "eval_focus", "prompt_category", "judge_result", "score",
  "accuracy"}`, the input of `analyze_results`.

API, in the order a suite calls it:

    requests = rubric_requests(example, clean_rubrics)        # one RubricRequest per rubric, reference order
    # ask the judge: messages = judge_messages(request.prompt), sampling = judge_sampling(), up to
    # JUDGE_ATTEMPTS attempts per request; retry while not reply_accepted(attempt, scoring)
    task = score_task(example, clean_rubrics, attempts, scoring="official" | "strict", critical="weight" | "flag")
    record["visualtoolbench"] = task_record(task, example, call_results, judge=JUDGE_MODEL or the judge used)
    tables.tables(records, config)                            # the paper's tables from those records

- `judge_prompt(question, golden_answer, model_answer, rubric_criteria)`: the exact string LLMasJudge sends
  (prompts/judge_prompt.json); `judge_messages(prompt)`: the single user message.
- The request: the reference sets `response_format={"type": "json_object"}` and leaves temperature (and every
  other setting) at the API's defaults (temperature 1 on OpenAI's API). `JUDGE_REQUEST` records it; our
  backends have no response_format, so `judge_sampling()` is temperature 1 without constraints, and
  `judge_sampling(regex=eval.judge.VERDICT_REGEX)` constrains a vLLM judge to a verdict object instead (stricter
  than json_object mode: it also fixes the keys).
- `attempts` (one list per request, in `requests` order) holds what each attempt returned, in order: the reply
  text, None for an empty reply (OpenAI's content None), or an exception for a failed request (e.g.
  `JudgeRequestError(completion.error)`). Officially only the first truthy reply, or else the last attempt,
  counts, so a caller that kept only the last completion passes `[None] * (JUDGE_ATTEMPTS - 1) + [last]` when
  every attempt was refused.
- `score_task(...) -> TaskScore`: `.result` is the reference's per-task dict (official) or ours (strict), None
  when unscored; `.unscored` says why; `.rubrics` has every rubric's verdict.
- `analyze_results(eval_results)`: the reference's analysis (overall APR / ARS, per domain with the STEM merge,
  per eval_focus) on the scored results, exactly; None for an empty list, as the reference returns.
- Tool metrics (paper App. B.2.2): `call_succeeded(observation)` and `tool_metrics(calls_per_task)`:
  proactivity, success rate, volume.

Scoring modes:

- "official" reproduces the reference: a verdict counts as met only when judge_result == "Met", and a task fails
  when a rubric of weight >= 4 has judge_result == "Not Met" (any other verdict, e.g. "met" or "Partially Met",
  is neither met nor a critical failure); weights are summed over all turns of a multi-turn task (zip of the
  response's and the rubrics' turns, the shorter wins); score 0 when the total weight is 0; a request that
  raised on the last of 3 attempts becomes FALLBACK_REPLY ("Not Met"), and so does a rubric whose prompt cannot
  be built (a missing description or answer field, caught by the reference's retry loop). Where the reference
  crashes (a reply json.loads cannot read, e.g. None, "" or fenced JSON; a reply that is not an object with a
  judge_result; a non-numeric weight; missing fields) it loses the whole chunk of tasks, and where it finds no
  rubrics for a task it skips it: we mark that task unscored, with the reason, and keep every other task.
- "strict" (ours): a verdict is the reply's JSON object (optionally in one markdown fence) with judge_result
  exactly "Met" or "Not Met"; anything else is refused and asked again, up to JUDGE_ATTEMPTS, then the rubric is
  unjudged and its task unscored (it stays in every denominator as unscored). A task with no rubric weight is
  unscored too.
- `critical="weight"`: weight >= 4 (paper Sec. 2.3, the reference); `critical="flag"`: the rubric's own
  `critical` field (true/false or "Yes"/"No"); a rubric without a readable flag makes the task unscored.

The record the tables read, `record["visualtoolbench"]` (built by `task_record`):
  {"turncase": "single-turn" | "multi-turn", "prompt_category", "domain" (STEM merged), "eval_focus",
   "score": float | None, "accuracy": 0 | 1 | None, "unscored": reason | None, "rubrics": n, "unjudged": n,
   "tool_calls": n, "failed_calls": n, "scoring": "official" | "strict", "critical": "weight" | "flag",
   "judge": judge model name}
beside the usual record fields ("id", "mode" tools | no_tools, ...).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from eval.backends import Sampling

PROMPT_FILE = Path(__file__).parent / "prompts" / "judge_prompt.json"
JUDGE_MODEL = "o4-mini"  # the paper's judge (IRIS v1 App. B.7) and run_judge_*.py's --judge_model default
JUDGE_ATTEMPTS = 3  # process_chunk_judging's max_retries
FALLBACK_REPLY = '{"explanation": "Failed to get judge result", "judge_result": "Not Met"}'
JUDGE_REQUEST = {"response_format": {"type": "json_object"}}  # nothing else is set: temperature is the API's (1)
CRITICAL_WEIGHT = 4  # official: a rubric of weight >= 4 is critical
STEM_CATEGORIES = ("chemistry", "maths", "biology", "engineering", "physics")  # analyze_results merges them
SCORINGS = ("official", "strict")
CRITICAL_RULES = ("weight", "flag")
MET, NOT_MET = "Met", "Not Met"

_FENCED = re.compile(r"\A```(?:json)?\s*\n(.*)\n\s*```\Z", re.DOTALL)
_FLAGS = {"yes": True, "true": True, "no": False, "false": False}


class UnscorableTask(ValueError):
    """A task the reference cannot score (it crashes, losing its chunk, or skips the task); the message says
    why."""


class JudgeRequestError(Exception):
    """A judge request that failed (the reference's client raised); its verdict follows the retry rules."""


@dataclass(frozen=True)
class RubricRequest:
    turn: int | None  # the turn's index for multi-turn tasks; None for single-turn
    rubric_id: str
    rubric: object  # the rubric as given ({"description", "weight", ...})
    prompt: str | None  # what the judge is asked; None when the reference cannot build it (its fallback applies)
    error: str | None = None  # why there is no prompt


@dataclass
class TaskScore:
    task_id: object
    scoring: str
    critical: str
    result: dict | None  # the per-task eval result ({"task_id", ..., "score", "accuracy"}); None when unscored
    unscored: str | None = None
    rubrics: list[dict] = field(default_factory=list)  # {"turn", "rubric_id", "weight", "critical", "verdict", "reply"}

    @property
    def score(self) -> float | None:
        return None if self.result is None else self.result["score"]

    @property
    def accuracy(self) -> int | None:
        return None if self.result is None else self.result["accuracy"]

    @property
    def unjudged(self) -> int:
        return sum(r["verdict"] is None for r in self.rubrics)


# --- The judge's request ----------------------------------------------------------------------------------------

def _template() -> str:
    return json.loads(PROMPT_FILE.read_text(encoding="utf-8"))["template"]


def judge_prompt(question, golden_answer, model_answer, rubric_criteria) -> str:
    """The exact prompt LLMasJudge builds (its f-string formats any value with format(value, ""), as we do)."""
    return _template().format(question=question, golden_answer=golden_answer, model_answer=model_answer,
                              rubric_criteria=rubric_criteria)


def judge_messages(prompt: str) -> list[dict]:
    """The judge's conversation: the prompt as the only message, from the user."""
    return [{"role": "user", "content": prompt}]


def judge_sampling(max_tokens: int = 2048, regex: str | None = None) -> Sampling:
    """Our closest request: temperature 1 and top-p 1 (the API defaults the reference leaves in place); the
    reference sets no max_tokens, so give one long enough for a reasoning judge's reply."""
    return Sampling(max_tokens=max_tokens, temperature=1.0, top_p=1.0, regex=regex)


def rubric_requests(example: dict, clean_rubrics: list[dict], multi_turn: bool | None = None) -> list[RubricRequest]:
    """One request per rubric, exactly those the reference makes (before its retries), in its order. `multi_turn`
    picks the script (None: multi-turn when the example has "turns"). Where the reference crashes while walking
    the rubrics, the list stops there (score_task then says why the task is unscored)."""
    return _plan(example, clean_rubrics, multi_turn).requests


@dataclass
class _Plan:
    requests: list[RubricRequest] = field(default_factory=list)
    turns: int | None = None  # how many turns the multi-turn script walks (zip of both lists); None: single-turn
    crash: str | None = None  # why the reference cannot score the task, found from the data alone


def _plan(example: dict, clean_rubrics: list[dict], multi_turn: bool | None) -> _Plan:
    plan = _Plan()
    try:
        if not isinstance(example, dict):
            raise UnscorableTask(f"the model response is not an object: {example!r:.80}")
        if "task_id" not in example:
            raise UnscorableTask("the model response has no task_id")
        item = _rubrics_item(clean_rubrics, example["task_id"])
        if not ("turns" in example if multi_turn is None else multi_turn):
            _walk(plan, None, example, _field(item, "rubrics", "the task's rubrics"))
        else:
            # zip: the shorter of the response's and the rubrics' turns decides how many turns are judged
            pairs = list(zip(_sequence(_field(example, "turns", "the model response"), "the response's turns"),
                             _sequence(_field(item, "turns", "the task's rubrics"), "the rubrics' turns")))
            plan.turns = len(pairs)
            for index, (turn, rubric_turn) in enumerate(pairs):
                _walk(plan, index, turn, _field(rubric_turn, "rubrics", f"turn {index} of the task's rubrics"))
        for name in ("turncase", "eval_focus", "prompt_category"):  # read after judging: the calls happen first
            if name not in example:
                raise UnscorableTask(f"the model response has no {name}")
    except UnscorableTask as err:
        plan.crash = str(err)
    return plan


def _walk(plan: _Plan, turn: int | None, source, rubrics) -> None:
    if not isinstance(rubrics, dict):
        raise UnscorableTask("the rubrics are not an object of rubric_id -> rubric (a JSON string must be parsed "
                             f"first): {rubrics!r:.80}")
    for rubric_id, rubric in rubrics.items():
        plan.requests.append(_request(turn, source, rubric_id, rubric))
        _weight(rubric_id, rubric)  # read after the judge's verdict, outside the reference's retry loop


def _weight(rubric_id, rubric) -> int | float:
    if not isinstance(rubric, dict) or "weight" not in rubric:
        raise UnscorableTask(f"rubric {rubric_id!r} has no weight")
    if not isinstance(rubric["weight"], (int, float)):
        raise UnscorableTask(f"rubric {rubric_id!r} has a weight that is not a number: {rubric['weight']!r:.40}")
    return rubric["weight"]


def _rubrics_item(clean_rubrics: list[dict], task_id) -> dict:
    """The first clean-rubrics item with this task_id (the reference's next(...) over the list)."""
    for item in clean_rubrics:
        if not isinstance(item, dict) or "task_id" not in item:
            raise UnscorableTask(f"a clean-rubrics item before task {task_id!r} has no task_id: {item!r:.80}")
        if item["task_id"] == task_id:
            return item
    raise UnscorableTask(f"no rubrics for task {task_id!r} (the reference skips the task)")


def _field(container, name: str, what: str):
    if not isinstance(container, dict) or name not in container:
        raise UnscorableTask(f"{what} has no {name!r}")
    return container[name]


def _sequence(value, what: str):
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise UnscorableTask(f"{what} is not a list: {value!r:.80}")
    return value


def _request(turn: int | None, source, rubric_id, rubric) -> RubricRequest:
    """Reading the fields happens inside the reference's try, so a missing one ends in its fallback verdict."""
    missing = [name for name in ("prompt", "golden_answer", "model_answer") if not isinstance(source, dict)
               or name not in source]
    if missing or not isinstance(rubric, dict) or "description" not in rubric:
        where = "the model response" if turn is None else f"turn {turn} of the model response"
        error = f"{where} has no {missing[0]}" if missing else f"rubric {rubric_id!r} has no description"
        return RubricRequest(turn, rubric_id, rubric, None, error)
    return RubricRequest(turn, rubric_id, rubric, judge_prompt(source["prompt"], source["golden_answer"],
                                                               source["model_answer"], rubric["description"]))


# --- Replies ----------------------------------------------------------------------------------------------------

def reply_accepted(attempt, scoring: str = "official") -> bool:
    """Whether the judge is done with a rubric after this attempt: officially any non-empty reply ends the
    retries; strictly only a well-formed verdict does."""
    if isinstance(attempt, BaseException) or not attempt:
        return False
    return scoring == "official" or parse_judge_reply(attempt)[0] is not None


def reference_reply(attempts: list) -> str | None:
    """The judge_result string the reference keeps from a rubric's attempts (see the module docstring):
    the first truthy reply; else FALLBACK_REPLY if the last attempt raised, else the last (empty) reply."""
    reply = None
    for number, attempt in enumerate(attempts[:JUDGE_ATTEMPTS]):
        if isinstance(attempt, BaseException):
            if number == JUDGE_ATTEMPTS - 1:
                reply = FALLBACK_REPLY
            continue
        reply = attempt
        if attempt:
            return attempt
    if len(attempts) < JUDGE_ATTEMPTS:
        raise ValueError(f"{len(attempts)} attempt(s) without a reply: the judge must be asked {JUDGE_ATTEMPTS} "
                         "times before a rubric's verdict is known")
    return reply


def official_verdict(reply) -> object:
    """The reference's json.loads(reply)["judge_result"]; raises UnscorableTask where that crashes."""
    try:
        parsed = json.loads(reply)
    except (TypeError, ValueError) as err:
        raise UnscorableTask(f"the judge's reply is not JSON ({err}): {reply!r:.80}") from None
    if not isinstance(parsed, dict) or "judge_result" not in parsed:
        raise UnscorableTask(f"the judge's reply has no judge_result: {reply!r:.80}")
    return parsed["judge_result"]


def parse_judge_reply(reply) -> tuple[str | None, str, str | None]:
    """(verdict "Met" | "Not Met" | None, explanation, error) of one reply, strictly: the reply is one JSON
    object (whitespace around it, or one markdown fence, allowed) whose judge_result is exactly "Met" or
    "Not Met"."""
    if not isinstance(reply, str) or not reply.strip():
        return None, "", "the judge's reply is empty"
    text = reply.strip()
    fenced = _FENCED.match(text)
    try:
        parsed = json.loads(fenced.group(1) if fenced else text)
    except ValueError:
        return None, "", f"the judge's reply is not a JSON object: {text[:80]!r}"
    if not isinstance(parsed, dict) or "judge_result" not in parsed:
        return None, "", f"the judge's reply has no judge_result: {text[:80]!r}"
    explanation = parsed.get("explanation") if isinstance(parsed.get("explanation"), str) else ""
    if parsed["judge_result"] not in (MET, NOT_MET):
        return None, explanation, f'judge_result is {json.dumps(parsed["judge_result"])[:40]}, not "Met" or "Not Met"'
    return parsed["judge_result"], explanation, None


# --- A task's score ---------------------------------------------------------------------------------------------

def is_critical(rubric: dict, critical: str = "weight") -> bool:
    """weight >= 4 (the reference), or the rubric's own critical flag; raises UnscorableTask without one."""
    if critical == "weight":
        return rubric["weight"] >= CRITICAL_WEIGHT
    flag = rubric.get("critical")
    if isinstance(flag, str):
        flag = _FLAGS.get(flag.strip().lower())
    if not isinstance(flag, bool):
        raise UnscorableTask(f"a rubric has no critical flag (true/false or Yes/No): {rubric.get('critical')!r:.40}")
    return flag


def score_task(example: dict, clean_rubrics: list[dict], attempts: list[list] | None, scoring: str = "official",
               critical: str = "weight", multi_turn: bool | None = None) -> TaskScore:
    """A task's score from the judge's attempts for each of `rubric_requests(...)` (same order; None when there
    was nothing to judge). Never raises for bad data or replies: the task is unscored, with the reason."""
    if scoring not in SCORINGS or critical not in CRITICAL_RULES:
        raise ValueError(f"scoring must be one of {SCORINGS} and critical one of {CRITICAL_RULES}, got "
                         f"{scoring!r}, {critical!r}")
    task_id = example.get("task_id") if isinstance(example, dict) else None
    task = TaskScore(task_id, scoring, critical, None)
    try:
        plan = _plan(example, clean_rubrics, multi_turn)
        attempts = list(attempts or [])
        if len(attempts) != len(plan.requests):
            raise ValueError(f"task {task_id!r}: {len(attempts)} rubric verdict(s) for {len(plan.requests)} "
                             "rubric(s)")
        if scoring == "official":
            task.result = _official(task, example, plan, attempts, critical)
        else:
            task.result = _strict(task, example, plan, attempts, critical)
    except UnscorableTask as err:
        task.result, task.unscored = None, str(err)
    return task


def _official(task: TaskScore, example: dict, plan: _Plan, attempts: list[list], critical: str) -> dict:
    accuracy, total_weight, met_weight = 1, 0, 0
    # the reference's judge_result: the rubrics' replies, in one list per judged turn for multi-turn tasks
    judge_results = [] if plan.turns is None else [[] for _ in range(plan.turns)]
    for request, tries in zip(plan.requests, attempts):
        reply = FALLBACK_REPLY if request.prompt is None else reference_reply(tries)
        entry = {"rubric_id": request.rubric_id, "judge_result": reply}
        (judge_results if request.turn is None else judge_results[request.turn]).append(entry)
        verdict = official_verdict(reply)
        weight = _weight(request.rubric_id, request.rubric)
        rubric_critical = is_critical(request.rubric, critical)
        task.rubrics.append({"turn": request.turn, "rubric_id": request.rubric_id, "weight": weight,
                             "critical": rubric_critical, "verdict": verdict, "reply": reply})
        total_weight += weight
        if verdict == MET:
            met_weight += weight
        if verdict == NOT_MET and rubric_critical:
            accuracy = 0
    if plan.crash:
        raise UnscorableTask(plan.crash)
    return _result(example, judge_results, met_weight / total_weight if total_weight > 0 else 0, accuracy)


def _strict(task: TaskScore, example: dict, plan: _Plan, attempts: list[list], critical: str) -> dict:
    if plan.crash:
        raise UnscorableTask(plan.crash)
    accuracy, total_weight, met_weight, unjudged = 1, 0, 0, []
    for request, tries in zip(plan.requests, attempts):
        verdict, reply = None, None
        for attempt in (tries or [])[:JUDGE_ATTEMPTS]:
            reply = attempt if isinstance(attempt, str) else None
            verdict = parse_judge_reply(attempt)[0] if request.prompt is not None else None
            if verdict is not None:
                break
        weight, rubric_critical = request.rubric["weight"], is_critical(request.rubric, critical)
        task.rubrics.append({"turn": request.turn, "rubric_id": request.rubric_id, "weight": weight,
                             "critical": rubric_critical, "verdict": verdict, "reply": reply})
        if verdict is None:
            unjudged.append(request.error or _why_unjudged(tries))
            continue
        total_weight += weight
        met_weight += weight if verdict == MET else 0
        accuracy = 0 if verdict == NOT_MET and rubric_critical else accuracy
    if unjudged:
        raise UnscorableTask(f"{len(unjudged)} rubric(s) unjudged: {unjudged[0]}")
    if total_weight <= 0:
        raise UnscorableTask("the task has no rubric weight to score")
    return _result(example, None, met_weight / total_weight, accuracy)


def _why_unjudged(tries: list) -> str:
    if not tries:
        return "the judge was not asked"
    last = tries[-1]
    if isinstance(last, BaseException):
        return f"the judge request failed: {last}"
    return parse_judge_reply(last)[2] or "no verdict"


def _result(example: dict, judge_results: list | None, score: float, accuracy: int) -> dict:
    """The per-task eval result, keys in the reference's order (strict results have no raw replies)."""
    result = {name: example[name] for name in ("task_id", "turncase", "eval_focus", "prompt_category")}
    if judge_results is not None:
        result["judge_result"] = judge_results
    return {**result, "score": score, "accuracy": accuracy}


# --- The analysis -----------------------------------------------------------------------------------------------

def domain(prompt_category) -> object:
    """The domain analyze_results reports a category under: the STEM subjects merge into "STEM"."""
    return "STEM" if prompt_category in STEM_CATEGORIES else prompt_category


def analyze_results(eval_results: list[dict]) -> dict | None:
    """The reference's analyze_results on the per-task results (the scored ones: the reference has no others):
    overall accuracy (APR) and score (ARS), per domain and per eval_focus, summed in the reference's order."""
    if not eval_results:
        return None
    for item in eval_results:
        missing = [k for k in ("accuracy", "score", "prompt_category", "eval_focus", "turncase")
                   if not isinstance(item, dict) or k not in item]
        if missing:
            raise ValueError(f"an eval result lacks {missing}: {item!r:.120}")
    apr, ars = 0, 0
    domains: dict = {}
    focuses: dict = {}
    for item in eval_results:
        apr += item["accuracy"]
        ars += item["score"]
        for groups, key in ((domains, domain(item["prompt_category"])), (focuses, item["eval_focus"])):
            group = groups.setdefault(key, {"scores": [], "accuracies": []})
            group["scores"].append(item["score"])
            group["accuracies"].append(item["accuracy"])
    return {"overall_accuracy": apr / len(eval_results), "overall_score": ars / len(eval_results),
            "domain_results": _averages(domains), "eval_focus_results": _averages(focuses),
            "total_examples": len(eval_results)}


def _averages(groups: dict) -> dict:
    try:
        keys = sorted(groups)
    except TypeError:
        raise ValueError(f"categories of mixed types cannot be sorted: {list(groups)!r:.120}") from None
    return {key: {"scores": sum(groups[key]["scores"]) / len(groups[key]["scores"]),
                  "accuracies": sum(groups[key]["accuracies"]) / len(groups[key]["accuracies"])} for key in keys}


# --- Tool metrics -----------------------------------------------------------------------------------------------

def call_succeeded(observation) -> bool:
    """Paper App. B.2.2: a call whose output is an error message is not valid. The harness's outputs say so with
    an "error" (a raised tool, a failed search or page or weather request) or "ok": "false" (python tools)."""
    if isinstance(observation, dict):
        return not (observation.get("error") or observation.get("status") == "error"
                    or str(observation.get("ok", "true")).lower() == "false")
    return not (isinstance(observation, str) and observation.lstrip().lower().startswith("error"))


def tool_metrics(calls_per_task: list[list[bool]]) -> dict:
    """Proactivity (share of tasks with at least one call), success rate (valid calls / calls; None without
    calls) and volume (calls per task) over tasks, each given as its calls' validity (paper Eqs. 3-5)."""
    tasks = len(calls_per_task)
    calls = sum(len(c) for c in calls_per_task)
    return {"tasks": tasks, "calls": calls,
            "proactivity": sum(bool(c) for c in calls_per_task) / tasks if tasks else None,
            "success_rate": sum(sum(bool(ok) for ok in c) for c in calls_per_task) / calls if calls else None,
            "volume": calls / tasks if tasks else None}


def task_record(task: TaskScore, example: dict, call_results: list[bool], judge: str) -> dict:
    """The `record["visualtoolbench"]` entry the tables read (see the module docstring)."""
    example = example if isinstance(example, dict) else {}
    turncase = example.get("turncase") or ("multi-turn" if "turns" in example else "single-turn")
    return {"turncase": turncase, "prompt_category": example.get("prompt_category"),
            "domain": domain(example.get("prompt_category")), "eval_focus": example.get("eval_focus"),
            "score": task.score, "accuracy": task.accuracy, "unscored": task.unscored, "rubrics": len(task.rubrics),
            "unjudged": task.unjudged, "tool_calls": len(call_results),
            "failed_calls": sum(not ok for ok in call_results), "scoring": task.scoring, "critical": task.critical,
            "judge": judge}
