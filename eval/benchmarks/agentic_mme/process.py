"""A record's process evaluation: the reference's eval_process (scoring.py) on what the run kept, with the two
judges' replies looked up by request, so that the suite can ask every record's judge requests in one batch.

eval_process asks its judges one request at a time, and a request can depend on the verdicts before it (a
search checkpoint that passes takes its first query away from the next ones; a visual check stops at the first
image that passes). `evaluate` walks a record with the replies known so far and stops with
`scoring.JudgePending` at the first request it has no reply for; the suite asks the pending requests of all
records at once through eval/judge.py's `ask()` and walks again, until every record is through.

A judgment is what one request got after its attempts: `ok` (a readable verdict), `malformed` (the search
judge's first line says neither PASS nor FAIL, or the visual judge's answer is empty) or `failed` (no reply).
The walk reads malformed and failed judgments as the reference reads such replies (not passed, unless the
reference's own reading passes them), and the record counts them as `unjudged`. A request for which there is
no judge at all is `missing`: the walk reads it as a failed reply, and the tables leave S, V and V_true
unscored where any is missing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from eval.benchmarks.agentic_mme import scoring
from runtime.protocols.base import reply_text

ORIGINAL = "orig.png"  # the reference judges the run's copy of the input when the model made no image
S_VERDICT = r"VERDICT: (PASS|FAIL)\nREASONING: [^\n]{0,200}"  # the format the search judge's prompt asks for
OK, MALFORMED, FAILED = "ok", "malformed", "failed"


@dataclass(frozen=True)
class Request:
    """One judge request: the search judge's messages (kind S), or the visual judge's question on one
    workspace image (kind V)."""

    key: str
    kind: str
    messages: tuple = ()
    question: str = ""
    image: int = 0


def search_request(messages: list[dict]) -> Request:
    return Request(_key(["S", messages]), "S", messages=tuple(messages))


def visual_request(question: str, image: int) -> Request:
    return Request(_key(["V", question, image]), "V", question=question, image=image)


def _key(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:20]


def evaluate(task_cfg: dict, record: dict, judgments: dict, wait: bool) -> tuple[dict, list[str]]:
    """eval_process on a record (its tool_use_list, prediction, effective_calls and images_made), the judges'
    replies taken from `judgments` (request key -> judgment). A request without a judgment raises JudgePending
    when `wait`, else reads as a failed reply. Returns the evaluation and the request keys in the order asked.
    UnscorableItem where the reference's evaluator crashes on the task."""
    asked = []
    by_name = {}  # the reference judges the files of its image folder: one per name, the latest content
    for image in record.get("images_made") or []:
        by_name[image["name"]] = image["index"]

    def reply(request: Request) -> str | None:
        asked.append(request.key)
        if request.key in judgments:
            return judgments[request.key]["reply"]
        if wait:
            raise scoring.JudgePending(request)
        return None

    def search_judge(messages):
        return reply(search_request(messages))

    def visual_judge(question, image):
        return reply(visual_request(question, by_name.get(image, 0)))

    evaluation = scoring.eval_process(task_cfg, record["tool_use_list"], record["prediction"],
                                      search_judge=search_judge, visual_judge=visual_judge, images=list(by_name),
                                      original=ORIGINAL, effective_tool_calls=record["effective_calls"])
    return evaluation, asked


def judgment(request: Request, completion, attempts: int) -> dict:
    """What a request got after `attempts` attempts: its reply text (None when the request failed) and status."""
    if completion.error:
        return {"kind": request.kind, "reply": None, "status": FAILED, "attempts": attempts,
                "error": str(completion.error)[:300]}
    text = reply_text(completion.reply)
    return {"kind": request.kind, "reply": text, "status": OK if readable(request.kind, text) else MALFORMED,
            "attempts": attempts}


def readable(kind: str, text: str) -> bool:
    """A verdict the judge meant: the search judge's first line says PASS or FAIL (the reference reads PASS
    anywhere in it); the visual judge answered something."""
    if kind == "S":
        first = text.strip().upper().split("\n")[0]
        return "PASS" in first or "FAIL" in first
    return bool(text.strip())


def summary(evaluation: dict, asked: list[str], judgments: dict) -> dict:
    """The record's process scores: S and V as eval_process gives them, and how many judge requests went
    unjudged (malformed or failed after their attempts) or had no judge (missing)."""
    statuses = [judgments[key]["status"] if key in judgments else None for key in asked]
    return {"S": evaluation["scores"]["S"], "V": evaluation["scores"]["V"], "judge_requests": len(asked),
            "unjudged": sum(status in (MALFORMED, FAILED) for status in statuses),
            "missing": sum(status is None for status in statuses)}
