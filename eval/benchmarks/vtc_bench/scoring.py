"""VTC-Bench's scoring: the benchmark's own (official), reproduced from its code with its quirks, and tirlab's
stricter one. This folder's README.md explains both with examples; tests/eval/benchmarks/data/
vtc_bench_score_vectors.json holds the reference's outputs that these functions must match.

The official chain (cs-w0r1d/VTC-Bench at REFERENCE_COMMIT):
1. eval/VTC_Bench_Eval.py `process_single_item` reads the agent's answer from its last message with text
   (`final_response`, `extract_agent_answer`) and runs the agent again, up to AGENT_RUNS times, while the answer
   looks like a refusal (`answer_needs_rerun`);
2. `convert_jsonl_to_xlsx` puts the answers into the dataset's TSV (read with pandas) and writes an .xlsx, which
   VLMEvalKit's `VTCBenchDataset.evaluate` reads back: the scorer sees every cell after that round trip
   (`reference_cells`);
3. `_evaluate_single_item` scores each row by rules (`rule_score`); rows scored below 0.5 go to an LLM judge
   (`judge_request`, `judge_hit`, `official_judge`), and the final score is the rule's when it is >= 0.5, else
   the judge's (`official_score`, `official_accuracy`).
The code track's tool chains: the ground truth's length (`gt_chain_length`) and an LLM's reading of the
agent's last code block (`tool_chain_request`, `tool_chain_reply`, `official_tool_chain`).

Rows are dicts as the loader gives them: index, id, category, question, answer, A..G (str; an empty option is
None or ""), prediction (str or None).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Iterable
from functools import lru_cache
from pathlib import Path

from eval.scorers import choice, extract_answer, normalize_text, numeric, text_match

REFERENCE_REPO = "https://github.com/cs-w0r1d/VTC-Bench"
REFERENCE_COMMIT = "93a33a446c1a867b67dd76940a65b91b5b7d500d"
PROMPTS = Path(__file__).with_name("prompts") / "judge.json"

OPTION_LETTERS = "ABCDEFG"
# convert_jsonl_to_xlsx keeps the option columns A-E (those the TSV has); F and G never reach the scorer
EXPORTED_OPTIONS = "ABCDE"

AGENT_RUNS = 3  # process_single_item's MAX_RETRIES
_RERUN_WORDS = ("unable", "your final answer here", "cannot", "indiscernible", "insufficient", "unreadable")

JUDGE_MODEL = "gpt-4o-mini"  # VTC_Bench_Eval.py's --eval-model default
JUDGE_ATTEMPTS = 5  # VTCBench_auxeval's tries, each at a higher temperature
JUDGE_REQUEST_TRIES = 5  # OpenAIWrapper's re-sends of a failed or empty reply, at the same temperature
JUDGE_MAX_TOKENS = 128  # build_judge(max_tokens=128)
JUDGE_FAILED = "Failed to obtain answer via API."  # what the wrapper returns when every re-send failed

TOOL_CHAIN_TRIES = 3  # call_llm_for_tool_chain's max_retries
TOOL_CHAIN_TEMPERATURE = 0.7
TOOL_CHAIN_MAX_TOKENS = 16384


class ReferenceExportError(ValueError):
    """A value the reference's .xlsx export (xlsxwriter) raises on: the reference then scores no row of the run."""


@lru_cache(maxsize=1)
def prompts() -> dict[str, str]:
    """The protocol texts (the judge's two templates and the tool-chain analysis prompt), word for word."""
    return {name: entry["text"] for name, entry in json.loads(PROMPTS.read_text(encoding="utf-8")).items()}


# ---------------------------------------------------------------- step 1: the agent's answer


def final_response(messages: list[dict]) -> tuple[str | None, str | None]:
    """(text, reasoning) that process_single_item reads the answer from, over the messages the agent produced
    (qwen-agent's, as dicts: content a string or a list of parts with "text", optional "reasoning_content").
    It takes the last message of any role, a tool result included, whose string content is not blank or whose
    content list has a part with text, and the reasoning of that same message; with none, no text and the
    reasoning of the first message."""
    reasoning = None
    for message in reversed(messages):
        content, reasoning = message.get("content"), message.get("reasoning_content")
        if isinstance(content, str) and content.strip():
            return content, reasoning
        if isinstance(content, list):
            for part in reversed(content):
                text = part.get("text") if isinstance(part, dict) else None
                if text:
                    return text, reasoning
    return None, reasoning


def extract_agent_answer(text: str | None, reasoning: str | None = None, previous: str | None = None) -> str | None:
    """The answer process_single_item records: between the first `<answer>` and the first `</answer>` (empty
    when the close comes first); between the first two `<|answer|>` (InternVL's), which wins over the former;
    if still empty, the reasoning's first `<answer>...</answer>`. `previous` is the answer of an earlier run of
    the same item: the reference never resets it between runs, so a run without tags keeps it."""
    answer = previous
    if text and "<answer>" in text and "</answer>" in text:
        answer = text[text.find("<answer>") + len("<answer>"):text.find("</answer>")].strip()
    if text and text.count("<|answer|>") >= 2:
        start = text.find("<|answer|>") + len("<|answer|>")
        answer = text[start:text.find("<|answer|>", start)].strip()
    if not answer and reasoning and "<answer>" in reasoning and "</answer>" in reasoning:
        answer = reasoning[reasoning.find("<answer>") + len("<answer>"):reasoning.find("</answer>")].strip()
    return answer


def answer_needs_rerun(answer: str | None) -> bool:
    """should_retry_answer: an empty answer or one containing a refusal word makes the reference run the agent
    again (up to AGENT_RUNS runs in all; the last run's answer is kept whatever it is)."""
    if not answer or not answer.strip():
        return True
    return any(word in answer.lower() for word in _RERUN_WORDS)


# ---------------------------------------------------------------- step 2: the TSV -> pandas -> xlsx round trip

# pandas' default missing-value strings, which read_csv and read_excel both turn into NaN
_PANDAS_NA = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                        "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
_XLSX_STRING_MAX = 32767  # UTF-16 units; xlsxwriter truncates longer strings
_XLSX_URL_MAX = 2079  # xlsxwriter skips (writes nothing for) a link, or its #anchor, longer than this
_XLSX_URL_OBJECT_MAX = 2080  # and raises when its own Url object's link is longer
_XLSX_URL = re.compile(r"(?:ftp|http)s?://|mailto:|(?:in|ex)ternal:|file://")
_XLSX_ESCAPE = re.compile(r"(_x[0-9a-fA-F]{4}_)")
_XLSX_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")

Cell = str | int | None  # a cell as pandas gives it back: text, 0 (a formula's result) or None (NaN)


def reference_cells(row: dict) -> dict[str, Cell]:
    """The question, answer, options A-E and prediction as VTCBenchDataset sees them: the text cells went
    through pandas' read_csv, the prediction through the results JSONL, then all through vlmeval's dump
    (pandas -> xlsxwriter) and load (openpyxl -> pandas). Assumes text columns (pandas infers a column's type
    from all its cells; the dataset's columns are text, and so is the prediction column unless every
    prediction of the run reads as a number)."""
    cells = {key: _through_excel(_through_csv(row.get(key))) for key in ("question", "answer", *EXPORTED_OPTIONS)}
    return {**cells, "prediction": _through_excel(row.get("prediction"))}


def _through_csv(value: str | None) -> str | None:
    return None if value is None or value in _PANDAS_NA else value


def _through_excel(value: str | None) -> Cell:
    if value is None or value == "":
        return None  # a blank cell
    if _SURROGATE.search(value):
        raise ReferenceExportError(f"{value[:80]!r} has a lone surrogate, which the .xlsx (UTF-8) cannot hold")
    if value.startswith("=") or (value.startswith("{=") and value.endswith("}")):
        return 0  # written as a formula; openpyxl reads its cached result, which xlsxwriter leaves at 0
    if _XLSX_URL.match(value):
        value = _link_text(value)
        if value is None:
            return None
    if len(value) > _XLSX_STRING_MAX // 2 and _utf16_len(value) > _XLSX_STRING_MAX:
        value = _utf16_truncate(value, _XLSX_STRING_MAX)
    written = _XLSX_ESCAPE.sub(r"_x005F\1", value)
    written = _XLSX_CONTROL.sub(lambda m: f"_x{ord(m.group()):04X}_", written)
    written = written.replace("\ufffe", "_xFFFE_").replace("\uffff", "_xFFFF_")
    read = written.replace("x005F_", "")  # openpyxl's shared-string reader drops every "x005F_"
    return None if read in _PANDAS_NA else read


def _link_text(url: str) -> str | None:
    """The text xlsxwriter writes for a string it takes as a hyperlink; None when it writes nothing."""
    link, _, anchor = url.partition("#")
    if _utf16_len(link) > _XLSX_URL_MAX or _utf16_len(anchor) > _XLSX_URL_MAX:
        return None
    for prefix in ("mailto:", "internal:"):
        if url.startswith(prefix):
            text = url.replace(prefix, "", 1)
            if _utf16_len(url if prefix == "mailto:" else text) > _XLSX_URL_OBJECT_MAX:
                raise ReferenceExportError(f"xlsxwriter raises on the over-long link {url[:80]!r}")
            return text
    if url.startswith(("file://", "external:")):
        path = url.replace("external:", "file:///", 1).replace("file:///", "", 1).replace("file://", "", 1)
        if not path or (len(path) == 1 and path.isalpha()):
            raise ReferenceExportError(f"xlsxwriter raises (IndexError) on the file link {url!r}")
        return path.replace("/", "\\")
    return url


def _utf16_len(text: str) -> int:
    return len(text) + sum(ord(c) > 0xFFFF for c in text)


def _utf16_truncate(text: str, limit: int) -> str:
    length = 0
    for index, char in enumerate(text):
        length += 2 if ord(char) > 0xFFFF else 1
        if length > limit:
            return text[:index]
    return text


def _text(cell: Cell) -> str:
    """str() of the cell as the reference takes it: NaN is 'nan'."""
    return "nan" if cell is None else str(cell)


# ---------------------------------------------------------------- step 3: rules, judge, final score


def rule_score(row: dict) -> float:
    """_evaluate_single_item (1.0 or 0.0) on the row's cells after the round trip. A row is multiple choice when
    it has an option, or when its answer is one of a-d; the math-verify step for open answers has no effect
    (its result is discarded)."""
    cells = reference_cells(row)
    prediction = _text(cells["prediction"]).strip().lower()
    answer = _text(cells["answer"]).strip().lower()
    options = {letter: cells[letter] for letter in EXPORTED_OPTIONS if cells[letter] is not None}
    if options or (len(answer) == 1 and answer in "abcd"):
        return _mcq_rule(prediction, answer, options)
    return _open_rule(prediction, answer)


def _mcq_rule(prediction: str, answer: str, options: dict[str, Cell]) -> float:
    if len(answer) == 1 and answer in "abcdefg":  # a letter answer: the same letter, alone or before . space -
        return float(prediction == answer or (prediction[:1] == answer and prediction[1:2] in (".", " ", "-")))
    if prediction[:1] and prediction[:1] in "abcdefg":  # a text answer: a prediction starting a-g is a letter
        option = options.get(prediction[0].upper())
        return float(option is not None and _text(option).lower().strip() == answer)
    texts = [_text(option).lower().strip() for option in options.values()]
    return float(any(text == answer and text in prediction for text in texts))


def _open_rule(prediction: str, answer: str) -> float:
    squeezed_prediction, squeezed_answer = " ".join(prediction.split()), " ".join(answer.split())
    if prediction == answer or squeezed_prediction == squeezed_answer:
        return 1.0
    return float(len(squeezed_answer.split()) < 5 and squeezed_answer in squeezed_prediction)


def judge_is_mcq(row: dict) -> bool:
    """The judge's own test: an option cell survives the round trip (a letter answer alone does not count)."""
    cells = reference_cells(row)
    return any(cells[letter] is not None for letter in EXPORTED_OPTIONS)


def judge_prompt(row: dict) -> str:
    """VTCBench_auxeval's prompt: the letter-extraction template with the question, the options ("A. text "
    each) and the prediction, or the yes/no template with the answer and the prediction, all unstripped."""
    cells = reference_cells(row)
    options = "".join(f"{letter}. {_text(cells[letter])} " for letter in EXPORTED_OPTIONS if cells[letter] is not None)
    if options:
        return prompts()["mcq_judge"].format(_text(cells["question"]), options, _text(cells["prediction"]))
    return prompts()["vqa_judge"].format(_text(cells["answer"]), _text(cells["prediction"]))


def judge_request(row: dict, attempt: int, model: str = JUDGE_MODEL) -> dict:
    """The chat-completions request of judge attempt `attempt` (0-based) as OpenAIWrapper sends it: one user
    message with one text part, no system prompt, n=1, temperature attempt*0.1 (letter extraction) or
    attempt*0.5 (yes/no), max_tokens 128. (Given --eval-api-key, the reference also puts the key in the body.)"""
    step = 0.1 if judge_is_mcq(row) else 0.5
    return {"model": model, "messages": [{"role": "user", "content": [{"type": "text", "text": judge_prompt(row)}]}],
            "n": 1, "temperature": attempt * step, "max_tokens": JUDGE_MAX_TOKENS}


def judge_request_failed(reply: str | None) -> bool:
    """A reply the wrapper re-sends the same request for (up to JUDGE_REQUEST_TRIES times): a failed request or no
    content (None), a blank reply, or one containing its failure message."""
    return reply is None or not reply.strip() or JUDGE_FAILED in reply


def judge_hit(row: dict, reply: str | None) -> int | None:
    """1 or 0 from a judge reply as VTCBench_auxeval reads it (after the wrapper's strip), None when it cannot
    (then the next attempt asks again). Letter extraction: the reply must be all capital letters; its letters,
    sorted, must equal the answer's ", "-separated parts, lowercased and sorted (so an answer that is option text
    never matches). Yes/no: "yes" or "no" in any case."""
    if judge_request_failed(reply):
        return None
    reply = reply.strip()
    if judge_is_mcq(row):
        if not (reply.isupper() and reply.isalpha()):
            return None
        truth = "".join(sorted(part.lower() for part in _text(reference_cells(row)["answer"]).split(", ")))
        return int("".join(sorted(letter.lower() for letter in reply)) == truth)
    return {"yes": 1, "no": 0}.get(reply.lower().strip())


def judge_conversation(row: dict, model: str = JUDGE_MODEL) -> Generator[dict, str | None, int | None]:
    """The reference's judging of one row as a conversation: it yields each request (`judge_request`) and is
    sent the reply's content back (None for a failed request); it returns the hit, or None when every attempt
    failed, which the reference scores 0. Within an attempt, a failed or empty reply is sent again at the same
    temperature (the wrapper's re-sends); an unreadable one moves to the next attempt. One conversation per
    row, so a caller can interleave many rows' requests in one batch."""
    for attempt in range(JUDGE_ATTEMPTS):
        request = judge_request(row, attempt, model)
        for _ in range(JUDGE_REQUEST_TRIES):
            reply = yield request
            if not judge_request_failed(reply):
                break
        hit = judge_hit(row, reply)
        if hit is not None:
            return hit
    return None


def official_judge(row: dict, ask: Callable[[dict], str | None], model: str = JUDGE_MODEL) -> int | None:
    """`judge_conversation` driven one request at a time: `ask` sends a request and returns the reply's content."""
    conversation = judge_conversation(row, model)
    try:
        request = next(conversation)
        while True:
            request = conversation.send(ask(request))
    except StopIteration as done:
        return done.value


def official_score(row: dict, judge: int | None = None) -> float:
    """The final score: the rule's when it is >= 0.5, else the judge's hit. A judge that gave no verdict in
    JUDGE_ATTEMPTS attempts (None; also no judge at all) counts 0, as the reference's "All 5 retries failed"
    does; tirlab reports such a row as unscored while counting it 0 in the accuracy."""
    rule = rule_score(row)
    return rule if rule >= 0.5 else float(judge or 0)


def official_accuracy(scores: Iterable[tuple[str, float]]) -> dict[str, float]:
    """evaluate's result from (category, final score) in index order: the percentage of scores >= 0.5,
    "Overall" first, then each category in order of first appearance."""
    scores = list(scores)
    groups: dict[str, list[float]] = {"Overall": [s for _, s in scores]}
    for category, score in scores:
        groups.setdefault(category, []).append(score)
    return {name: sum(s >= 0.5 for s in group) / len(group) * 100 for name, group in groups.items() if group}


# ---------------------------------------------------------------- tirlab's strict scoring

_NUMBER = r"[-+\u2212]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:/\d+)?\s?%?"
_MATH = re.compile(r"[=^*\\$]")


def strict_score(row: dict) -> float:
    """tirlab's scoring of the row's real values (no export round trip, no judge):
    - multiple choice (a letter answer A-G, or an answer equal to exactly one option's text): eval.scorers'
      `choice` with the row's options, so "C. text", "(c)", "c" and the option's own text pick C, and a reply
      naming two options is wrong;
    - one number: `numeric`, exact ("2" = "2.0" = "2.00", "26,000" = "26000", units ignored);
    - a list of numbers ("0.894, 1.53"): the same count of comma-separated numbers, each equal, in order;
    - other text: `text_match` (case, width, spacing and end punctuation ignored), and for formulas (= ^ * \\ $)
      also with all spacing removed; an answer inside a longer reply does not count.
    A missing prediction scores 0; a row without an answer is a data error (ValueError)."""
    prediction, answer = row.get("prediction"), (row.get("answer") or "").strip()
    if not answer:
        raise ValueError(f"VTC-Bench row {row.get('id')!r} has no answer")
    if prediction is None or not prediction.strip():
        return 0.0
    options = {letter: row[letter] for letter in OPTION_LETTERS if (row.get(letter) or "").strip()}
    letter = _answer_letter(answer, options)
    if letter:
        truth = json.dumps({"answer": letter, "options": options}) if letter in options else letter
        return choice(prediction, truth)
    if re.fullmatch(_NUMBER, answer):
        return numeric(prediction, answer)
    if re.fullmatch(rf"{_NUMBER}(?:\s*[,;]\s*{_NUMBER})+", answer):
        truths = re.split(r"\s*[,;]\s*", answer)
        parts = re.split(r"\s*[,;]\s*", extract_answer(prediction).strip(" ()[]"))
        return float(len(parts) == len(truths) and all(numeric(p, t) for p, t in zip(parts, truths)))
    if text_match(prediction, answer):
        return 1.0
    return float(bool(_MATH.search(answer)) and text_match(re.sub(r"\s+", "", extract_answer(prediction)),
                                                          re.sub(r"\s+", "", answer)))


def _answer_letter(answer: str, options: dict[str, str]) -> str | None:
    """The option an answer names: a single letter A-G, or the one option whose text it is."""
    if re.fullmatch(r"[A-Ga-g]", answer):
        return answer.upper()
    same = [k for k, v in options.items() if normalize_text(v) == normalize_text(answer)]
    return same[0] if len(same) == 1 else None


# ---------------------------------------------------------------- the code track's tool chains


def gt_chain_length(cell: str | None) -> int:
    """The ground-truth chain's length as _process_single_sample counts it: the model_tools_gt cell split on
    commas, blank pieces dropped (so "[]" counts 1 and a tool name with a comma counts 2)."""
    return len([piece for piece in (cell or "").split(",") if piece.strip()])


_CURLY_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
                               "\uff02": '"'})


def parse_gt_chain(cell: str | None) -> tuple[list[str], str | None]:
    """The tool names of a model_tools_gt cell (a JSON list such as ["Crop", "Flip"]) and what was wrong with
    it, or None for a clean list. Reads what it can, never raises: a cell still CSV-escaped ("[""Crop""]"),
    curly quotes (60 of the dataset's cells), or no JSON list at all (then quoted names, else comma-separated
    pieces)."""
    if cell is None or not cell.strip():
        return [], "empty cell"
    text, problems = cell.strip(), []
    if len(text) > 1 and text[0] == text[-1] == '"' and '""' in text:
        text, problems = text[1:-1].replace('""', '"'), ["CSV-escaped quotes"]
    straight = text.translate(_CURLY_QUOTES)
    if straight != text:
        problems.append("curly quotes")
    try:
        parsed = json.loads(straight)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, list) and all(isinstance(name, str) for name in parsed):
        names = [name.strip() for name in parsed]
    else:
        problems.append("not a JSON list of tool names")
        quoted = re.findall(r'"([^"]*)"', straight)
        names = [n.strip() for n in (quoted or [p.strip(" []'") for p in straight.split(",")])]
    if any(not name for name in names):
        problems.append("empty tool name")
    return [name for name in names if name], "; ".join(problems) or None


def tool_chain_request(python_code: str, model: str) -> dict:
    """call_llm_for_tool_chain's request: the analysis prompt with the code, one user message (plain string
    content), temperature 0.7, max_tokens 16384."""
    prompt = prompts()["tool_chain_analysis"].format(python_code=python_code)
    return {"model": model, "messages": [{"role": "user", "content": prompt}],
            "temperature": TOOL_CHAIN_TEMPERATURE, "max_tokens": TOOL_CHAIN_MAX_TOKENS}


def empty_tool_chain() -> dict:
    """What the reference returns when it reads no tool chain."""
    return {"code_tools": [], "raw_tool_response": {"tool_chain": []}}


def tool_chain_reply(content: str | None) -> dict | None:
    """A reply's content read as call_llm_for_tool_chain reads it: the text from its first "{" to its last "}"
    as JSON, returned whole when it has both "code_tools" and "raw_tool_response", else the empty chain. None
    (ask again) for a failed request or no content (None) and for braces that do not parse. The reference then
    counts len(code_tools), whatever its type."""
    if content is None:
        return None
    match = re.search(r"\{[\s\S]*\}", content.strip())
    if match is None:
        return empty_tool_chain()
    try:
        parsed = json.loads(match.group(0))
    except (ValueError, RecursionError):
        return None
    return parsed if "code_tools" in parsed and "raw_tool_response" in parsed else empty_tool_chain()


def official_tool_chain(python_code: str, model: str, ask: Callable[[dict], str | None]) -> dict:
    """call_llm_for_tool_chain start to end: up to TOOL_CHAIN_TRIES requests until a reply reads."""
    request = tool_chain_request(python_code, model)
    for _ in range(TOOL_CHAIN_TRIES):
        result = tool_chain_reply(ask(request))
        if result is not None:
            return result
    return empty_tool_chain()
