"""Agentic-MME scoring: the benchmark's own evaluator reproduced, beside our strict scoring.

The reference is evaluation/eval_runs_search.py of github.com/ChoS3nE11ven/Agentic-MME at commit 5e5dfbdc (with
verifiers.py, ast_ops.py and evaluation/analyze_v.py, and the runners' answer extraction). This is our own code;
the vectors in tests/eval/benchmarks/data/agentic_mme_score_vectors.json prove it against theirs, quirks included.
SCORING.md lists the rules and the quirks.

- Final answer: `extract_answer_text` / `general_final_answer` (what the Atm / Gen runner stores as the answer),
  then `check_final_answer_only` (Acc).
- Checkpoints: `eval_process` walks a task's checkpoints in order as the reference does (S by the search judge,
  V by the tool check and the visual judge, one tool call per checkpoint) and returns the reference's
  `checkpoint_results`, `scores` (S, V, base, penalty, PQS) and `efficiency`. The judges are callables, so the
  suite runs them through its own judge client: `search_judge_messages` / `parse_search_verdict` and
  `visual_judge_messages` / `visual_check_passes` are the pieces.
- Gen's tool calls: `infer_tool_ops` reads the image operations from a code cell as ast_ops.infer_tool_events does.
- Aggregation: `summarize` (overall and per level, as the evaluator's main() prints and writes them),
  `v_checkpoint_stats` (V_tool and V_true as analyze_v.py counts them), `overthink_analysis` and the paper's
  `overthink`.

`strict_score` scores the final answer without the quirks (see its docstring).

Inputs the reference crashes on raise `UnscorableItem` naming the field. A judge callable may raise
`JudgePending` to stop eval_process where it would wait for that judge (the suite batches judge requests).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from eval.scorers import contains, numeric, text_match

PROMPTS = Path(__file__).parent / "prompts" / "judge_prompts.json"
PRIMITIVES = ("crop", "rotate", "resize", "enhance", "flip")  # ast_ops.PRIMITIVES: the order verifier names map in
VERIFIER_OPS = ("crop", "rotate", "flip", "resize", "enhance")  # eval_process's order for a verifier's op
SEARCH_JUDGE_SAMPLING = {"temperature": 0.0, "max_tokens": 300}
VISUAL_JUDGE_SAMPLING = {"temperature": 0.0, "max_tokens": 100}
LEVELS = ("L1", "L2", "L3")

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_ANSWER_UNCLOSED = re.compile(r"<answer>(.*)", re.IGNORECASE | re.DOTALL)
_CODE = re.compile(r"<code>(.*?)</code>", re.IGNORECASE | re.DOTALL)
_TOOL_LOG = re.compile(r"<tool_log>(.*?)</tool_log>", re.IGNORECASE | re.DOTALL)
_THINKING = re.compile(r"<think(?:ing)?>(.*?)</think(?:ing)?>", re.IGNORECASE | re.DOTALL)
# check_final_answer_only looks for a one- or two-digit golden number in these phrases first.
_FINAL_ANSWER_PHRASES = (r'therefore[,\s]+(?:the\s+)?answer\s+is\s+([^\.\n]+)', r'(?:the\s+)?answer\s+is\s+([^\.\n]+)',
                         r'answer:\s*([^\.\n]+)', r'final\s+answer:\s*([^\.\n]+)')
# run_search_judge reads the expected answer of a search checkpoint from its description, first pattern first.
_EXPECTED_PATTERNS = (r'\(expected to find:\s*([^)]+)\)', r'\(expected answer:\s*([^)]+)\)', r'\(expected:\s*([^)]+)\)',
                      r'expected to find:\s*([^\n\)]+)', r'expected answer:\s*([^\n\)]+)', r'expected:\s*([^\n\)]+)')
# Names in verifiers.py's namespace that dispatch_verifier calls with keyword arguments they do not take.
_CRASHING_VERIFIERS = ("require_op", "require_transformed_images", "auto_verifier_from_name", "dispatch_verifier",
                       "read_json", "list_transformed_pngs", "_is_declared_only", "VerifyResult", "dataclass", "Any",
                       "Dict", "List", "Optional")
_TRANSFORMED = re.compile(r"^transformed_image_(\d+)\.png$", re.IGNORECASE)
_SAVED_IMAGE = re.compile(r"\.(png|jpg|jpeg)$", re.IGNORECASE)


class UnscorableItem(ValueError):
    """An input the reference evaluator crashes on; the message names the field and what is wrong."""


class JudgePending(Exception):
    """Raised by a judge callable whose reply is not known yet: eval_process stops there, where the reference
    would wait for its judge, so a caller can ask many runs' judge requests in one batch and walk them again."""

    def __init__(self, request):
        super().__init__(request)
        self.request = request


# --- The final answer -------------------------------------------------------------------------------------------

def extract_answer_text(text: str | None) -> str:
    """The Atm runner's stored answer (atomic/run_atomic_tools_openai.py `_extract_answer_text`): the first
    `<answer>...</answer>` (tags in any case, across lines), else everything after an unclosed `<answer>`, else the
    whole reply; stripped."""
    raw = text or ""
    found = _ANSWER.search(raw) or _ANSWER_UNCLOSED.search(raw)
    return (found.group(1) or "").strip() if found else raw.strip()


def parse_model_output_answer(text: str | None) -> str:
    """The answer the Gen runner parses from a reply (general/run_general_script_openai.py `parse_model_output`):
    the first closed `<answer>`, else an unclosed one, else the whole reply only when it has no `<code>`,
    `<tool_log>` or `<think>`/`<thinking>` block; "" otherwise."""
    raw = text or ""
    found = _ANSWER.search(raw) or _ANSWER_UNCLOSED.search(raw)
    if found:
        return found.group(1).strip()
    if not (_CODE.search(raw) or _TOOL_LOG.search(raw) or _THINKING.search(raw)):
        return raw.strip()
    return ""


def general_final_answer(text: str | None) -> str:
    """What the Gen runner stores from a reply that ends the episode (a reply with no code and no tool calls, or
    the reply to its last request for an answer): the parsed answer, else the whole reply, stripped."""
    return parse_model_output_answer(text) or (text or "").strip()


def check_final_answer_only(task_cfg: dict, model_answer: str | None) -> dict:
    """The reference's final-answer check, its return value exactly: {"correct", "model_answer",
    "golden_answer", "match_type"}.

    `golden_answer.value` (str() of it, stripped) against the stripped answer by `match_type`: "exact" is
    equality; "numeric" reads the whole answer as a float within `tolerance` (default 0); "contains" (the
    default) and any other type is a case-insensitive substring test, except that a "contains" golden of at most
    two characters that is a number (signs and dots ignored) must appear as a whole word, in an "answer is ..."
    phrase or anywhere. An empty golden answer is in every answer."""
    golden = _field_dict(task_cfg, "golden_answer")
    golden_value = str(golden.get("value", "")).strip()
    match_type = golden.get("match_type", "contains")
    tolerance = _float(golden.get("tolerance", 0.0), "golden_answer.tolerance")
    answer = _text(model_answer or "", "model answer").strip()
    if match_type == "exact":
        correct = answer == golden_value
    elif match_type == "numeric":
        correct = _float_or_none(answer) is not None and _float_or_none(golden_value) is not None \
            and abs(float(answer) - float(golden_value)) <= tolerance
    elif match_type == "contains" and len(golden_value) <= 2 \
            and golden_value.replace(".", "").replace("-", "").replace("+", "").isdigit():
        word = r"\b" + re.escape(golden_value) + r"\b"
        in_phrase = False
        for phrase in _FINAL_ANSWER_PHRASES:
            found = re.search(phrase, answer.lower())
            if found and re.search(word, found.group(1)):
                in_phrase = True
                break
        correct = in_phrase or bool(re.search(word, answer))
    else:
        correct = golden_value.lower() in answer.lower()
    return {"correct": correct, "model_answer": answer, "golden_answer": golden_value, "match_type": match_type}


def check_answer(checkpoint: dict, model_answer: str | None) -> bool:
    """A checkpoint's `answer_check` (eval_process's R checkpoints), by its `match_type`: "exact"/"exact_match"
    (the default) equality; "contains" case-sensitive substring; "string" either string in the other, ignoring
    case; "numeric" the whole answer as a float within `tolerance`; "keyword_inclusion" at least `min_matches`
    (default 1) of `keywords` in the answer, ignoring case; "extraction_match" every target's value within its
    tolerance of some run of digits and dots in the answer (no targets: False); anything else a case-insensitive
    substring test of a non-empty `target` (empty: False). The answer is stripped first."""
    if not isinstance(checkpoint, dict) or "answer_check" not in checkpoint:
        raise UnscorableItem("the checkpoint has no 'answer_check'")
    config = _field_dict(checkpoint, "answer_check", required=True)
    match_type = config.get("match_type", "exact")
    answer = _text(model_answer or "", "model answer").strip()
    lower = answer.lower()
    if match_type in ("exact", "exact_match"):
        return answer == config.get("target", "")
    if match_type == "contains":
        return _text(config.get("target", ""), "answer_check.target") in answer
    if match_type == "string":
        target = _text(config.get("target", ""), "answer_check.target").lower()
        return target in lower or lower in target
    if match_type == "numeric":
        value, target = _float_or_none(answer), _float_or_none(config.get("target", "0"))
        tolerance = _float_or_none(config.get("tolerance", 0.0))
        return None not in (value, target, tolerance) and abs(value - target) <= tolerance
    if match_type == "keyword_inclusion":
        keywords = config.get("keywords", [])
        minimum = _int(config.get("min_matches", 1), "answer_check.min_matches")
        return sum(1 for keyword in _iterate(keywords, "answer_check.keywords")
                   if _text(keyword, "answer_check.keywords").lower() in lower) >= minimum
    if match_type == "extraction_match":
        return _extraction_match(config.get("targets", []), answer)
    target = config.get("target", "")
    return bool(target) and _text(target, "answer_check.target").lower() in lower


def _extraction_match(targets, answer: str) -> bool:
    if not targets:
        return False
    numbers = [_float_or_none(found) for found in re.findall(r"[\d.]+", answer)]
    all_found = True  # every target is read (a later malformed one still fails the reference)
    for target in _iterate(targets, "answer_check.targets"):
        if not isinstance(target, dict):
            raise UnscorableItem(f"answer_check.targets holds {target!r}, not an object")
        tolerance = _float(target.get("tolerance", 0.0), "answer_check.targets[].tolerance")
        value = _float_or_none(target.get("value", ""))  # a value that is not a number fails this target
        all_found &= value is not None and any(n is not None and abs(n - value) <= tolerance for n in numbers)
    return all_found


# --- Strict scoring ---------------------------------------------------------------------------------------------

def strict_score(task_cfg: dict, model_answer: str | None) -> float:
    """Our scoring of the final answer, 0.0 or 1.0, with eval.scorers: "exact" is a normalized match (case,
    width, surrounding punctuation and runs of whitespace ignored); "contains" (the default) needs the golden
    answer as whole words, and an answer that offers alternatives ("A or B", "either ...") is wrong unless the
    golden answer does too; "numeric" compares the answer's first number within `tolerance`. ValueError
    (UnscorableItem) for an empty golden answer, an unknown match type or a bad tolerance, which the reference
    scores as correct, as "contains" or by crashing."""
    golden = _field_dict(task_cfg, "golden_answer")
    value = str(golden.get("value") if golden.get("value") is not None else "").strip()
    match_type = golden.get("match_type", "contains")
    answer = _text(model_answer or "", "model answer").strip()
    if not value:
        raise UnscorableItem("golden_answer.value is empty: there is nothing to compare the answer with")
    if match_type not in ("exact", "contains", "numeric"):
        raise UnscorableItem(f"golden_answer.match_type {match_type!r} is not one of exact, contains, numeric")
    if match_type == "exact":
        return text_match(answer, value)
    if match_type == "contains":
        if _hedges(answer) and not _hedges(value):
            return 0.0
        return contains(answer, value)
    tolerance = _float(golden.get("tolerance") or 0.0, "golden_answer.tolerance")
    try:
        return numeric(answer, value, abs=tolerance)
    except ValueError as err:
        raise UnscorableItem(f"golden_answer.value: {err}") from None


def _hedges(text: str) -> bool:
    return bool(re.search(r"\b(?:or|either)\b", text, re.IGNORECASE))


# --- The search judge (S) ---------------------------------------------------------------------------------------

def judge_prompts() -> dict[str, str]:
    """The judges' texts, word for word (prompts/judge_prompts.json): search, search_expected_section,
    visual_system."""
    data = json.loads(PROMPTS.read_text(encoding="utf-8"))
    return {key: data[key]["text"] for key in ("search", "search_expected_section", "visual_system")}


def search_expected_answer(description: str) -> str | None:
    """The expected answer run_search_judge reads from a checkpoint's description ("(expected to find: X)",
    "expected answer: X", "Expected: X", ..., first pattern that matches, any case), trailing .,;: removed."""
    for pattern in _EXPECTED_PATTERNS:
        found = re.search(pattern, description, re.IGNORECASE)
        if found:
            return found.group(1).strip().rstrip(".,;:")
    return None


def search_judge_prompt(description: str, queries: list, results: list) -> str:
    """run_search_judge's prompt: the description, the expected-answer section (when it names one), the queries
    numbered from 1, and the first 500 characters of each of the first three results."""
    texts = judge_prompts()
    expected = search_expected_answer(description)
    section = texts["search_expected_section"].format(expected_answer=expected) if expected else ""
    return texts["search"].format(
        checkpoint_desc=description, expected_answer_section=section,
        queries_text="\n".join(f"{i + 1}. {q}" for i, q in enumerate(queries)),
        results_text="\n".join(f"Query {i + 1} results: {r[:500]}..." for i, r in enumerate(results[:3])))


def search_judge_messages(description: str, queries: list, results: list) -> list[dict]:
    """The search judge's request (SEARCH_JUDGE_SAMPLING): the prompt as the only user message."""
    return [{"role": "user", "content": search_judge_prompt(description, queries, results)}]


def parse_search_verdict(reply: str | None) -> dict:
    """The reference's reading of a search judge's reply: {"passed", "judge_response", "reasoning"}. It passes when
    "PASS" is anywhere in the first line, any case (so "VERDICT: PASS" and "NO PASS" do); the reasoning is the
    first line that starts with "REASONING:". A failed request or an empty reply (None) is not passed."""
    if reply is None:
        return {"passed": False, "judge_response": "Judge error: no reply", "reasoning": "Error during evaluation"}
    text = reply.strip()
    reasoning = next((line.replace("REASONING:", "").strip() for line in text.split("\n")
                      if line.startswith("REASONING:")), "")
    return {"passed": "PASS" in text.upper().split("\n")[0], "judge_response": text, "reasoning": reasoning}


def run_search_judge(judge: Callable[[list[dict]], str | None], description: str, queries: list,
                     results: list) -> dict:
    """run_search_judge with `judge(messages) -> reply text` (None or an exception: the request failed): its
    result dict, with the expected answer when the description names one."""
    expected = search_expected_answer(description)
    messages = search_judge_messages(description, queries, results)
    try:
        reply = judge(messages)
    except JudgePending:
        raise
    except Exception as err:  # noqa: BLE001 - the reference counts any judge failure as not passed
        reply, error = None, str(err)
    else:
        error = "'NoneType' object has no attribute 'strip'"  # the reference's error for a reply with no text
    verdict = parse_search_verdict(reply)
    if reply is None:
        return {"passed": False, "judge_response": f"Judge error: {error}", "reasoning": "Error during evaluation",
                "queries_evaluated": queries}
    result = {**verdict, "queries_evaluated": queries}
    if expected:
        result.update(expected_answer=expected, expected_answer_found=verdict["passed"])
    return result


# --- The visual judge (V_true) ----------------------------------------------------------------------------------

def visual_judge_messages(question: str, image_url: str) -> list[dict]:
    """run_visual_judge's request (VISUAL_JUDGE_SAMPLING): the system prompt, then the image and the checkpoint's
    question."""
    return [{"role": "system", "content": judge_prompts()["visual_system"]},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": image_url}},
                                         {"type": "text", "text": question}]}]


def visual_judge_answer(reply: str | None, error: str = "no reply") -> str:
    """What run_visual_judge returns: the reply stripped, or "Error: ..." (the first 100 characters of the error)
    when the request failed; such an answer rarely contains the expected one, so it counts as not passed."""
    return (reply or "").strip() if reply is not None else f"Error: {error[:100]}"


def visual_check_passes(expected_answer: str, judge_answer: str) -> bool:
    """An image passes a visual check when the expected answer (stripped) is in the judge's answer, ignoring
    case; an empty expected answer passes every image."""
    expected, answer = expected_answer.strip().lower(), judge_answer.strip().lower()
    return expected in answer or answer == expected


# --- Gen's image operations (ast_ops) ---------------------------------------------------------------------------

_MAX_EXPAND = 50
_PIL_ENHANCE_METHODS = ("convert", "point", "paste", "putalpha", "putpixel", "autocontrast")
_DRAW_METHODS = ("rectangle", "line", "ellipse", "polygon", "text", "point")
_CV2_OPS = (("rotate", ("cv2.warpaffine", "cv2.getrotationmatrix2d", "cv2.warpperspective")), ("flip", ("cv2.flip",)),
            ("enhance", ("cv2.rectangle", "cv2.line", "cv2.circle", "cv2.ellipse", "cv2.polylines", "cv2.puttext")),
            ("enhance", ("cv2.canny", "cv2.sobel", "cv2.laplacian", "cv2.scharr")),
            ("enhance", ("cv2.blur", "cv2.gaussianblur", "cv2.medianblur", "cv2.bilateralfilter", "cv2.filter2d")),
            ("enhance", ("cv2.erode", "cv2.dilate", "cv2.morphologyex")),
            ("enhance", ("cv2.cvtcolor", "cv2.equalizehist", "cv2.clahe", "cv2.convertscaleabs")),
            ("enhance", ("cv2.threshold", "cv2.adaptivethreshold")))


def infer_tool_ops(code: str) -> list[tuple[str, int]]:
    """The image operations the Gen runner records for a code cell, (op, line) in line and column order, as
    ast_ops.infer_tool_events finds them (one tool_use_list entry each): any `.crop` / `.rotate` / `.enhance` /
    `.transpose` (FLIP_* flip, other constants enhance) / `.filter` / drawing and `.convert`-like calls that are
    not on cv2 count, `.resize` only while no crop was seen, and OpenCV's resize, warps, flips, drawing, filters
    and thresholds. Calls inside a `for` over a literal, range() or a name of known length count once per
    iteration (up to 50; more count once). Code that does not parse has none."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    return [(op, line) for op, line, _ in sorted(_OpFinder().find(tree), key=lambda o: (o[1], o[2]))]


class _OpFinder(ast.NodeVisitor):
    """ast_ops.infer_ops_and_saves' visitor, reduced to the ops: the visit order matters (resize counts only
    before the first crop visited, and a `for` loop's target and iterable are not visited)."""

    def find(self, tree: ast.AST) -> list[tuple[str, int, int]]:
        self.ops, self.lengths, self.repeats, self.cropped = [], {}, [1], False
        self.visit(tree)
        return self.ops

    def visit_Assign(self, node: ast.Assign) -> None:
        if node.targets and isinstance(node.targets[0], ast.Name):
            length = _static_length(node.value, self.lengths)
            if length is not None:
                self.lengths[node.targets[0].id] = length
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        length = _static_length(node.iter, self.lengths)
        self.repeats.append(self.repeats[-1] * (1 if length is None else length))
        for statement in node.body + node.orelse:
            self.visit(statement)
        self.repeats.pop()

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute):
            for op in self._ops(node):
                self._add(op, node)
        self.generic_visit(node)

    def _ops(self, node: ast.Call) -> list[str]:
        method, chain = node.func.attr.lower(), _attr_chain(node.func).lower()
        pil = not (chain.startswith("cv2") or "opencv" in chain)
        ops = []
        if pil and method in ("crop", "rotate"):
            ops.append(method)
            self.cropped = self.cropped or method == "crop"
        elif pil and method == "resize" and not self.cropped:
            ops.append("resize")
        if pil and method == "enhance":
            ops.append("enhance")
        if pil and method == "transpose":
            first = node.args[0] if node.args else None
            flips = not isinstance(first, ast.Attribute) or "FLIP" in first.attr.upper()
            ops += ["flip" if flips else "enhance"] if node.args else []
        if method in _DRAW_METHODS and ("draw" in chain or "imagedraw" in chain or pil):
            ops.append("enhance")
        if method == "filter" and ("imagefilter" in chain or pil):
            ops.append("enhance")
        if method in _PIL_ENHANCE_METHODS and pil:
            ops.append("enhance")
        if chain.endswith("cv2.resize"):
            ops.append("resize")
        ops += [op for op, names in _CV2_OPS if chain.endswith(names)]
        return ops

    def _add(self, op: str, node: ast.Call) -> None:
        repeat = self.repeats[-1]
        entry = (op, getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        self.ops += [entry] * (repeat if 1 < repeat <= _MAX_EXPAND else 1)


def _attr_chain(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _const_int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _const_int(node.operand)
        return -value if value is not None else None
    return None


def _static_length(node: ast.AST, lengths: dict[str, int]) -> int | None:
    """ast_ops._static_iter_len: literals, names of known length, enumerate(), range() of constants, and a dict
    literal's or known name's items()/keys()/values()."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return len(node.elts)
    if isinstance(node, ast.Dict):
        return len(node.keys)
    if isinstance(node, ast.Name):
        return lengths.get(node.id)
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name) and node.func.id == "enumerate" and node.args:
        return _static_length(node.args[0], lengths)
    if isinstance(node.func, ast.Name) and node.func.id == "range":
        length = _range_length([_const_int(a) for a in node.args])
        if length is not None:
            return length
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("items", "keys", "values"):
        base = node.func.value
        if isinstance(base, ast.Dict):
            return len(base.keys)
        if isinstance(base, ast.Name):
            return lengths.get(base.id)
    return None


def _range_length(values: list[int | None]) -> int | None:
    if not values or None in values:
        return None
    start, stop, step = (0, values[0], 1) if len(values) == 1 else (*values[:2], 1) if len(values) == 2 else values[:3]
    if step == 0:
        return None
    if (step > 0 and start >= stop) or (step < 0 and start <= stop):
        return 0
    return (stop - start + step - 1) // step if step > 0 else (stop - start + step + 1) // step


# --- The checkpoints (eval_process) -----------------------------------------------------------------------------

def dispatch_verifier(verifier, tool_use_list: list[dict], transformed_images: int = 0,
                      metrics: dict | None = None) -> tuple[bool, int | None, dict]:
    """verifiers.dispatch_verifier: (passed, hit index, detail). Empty passes with no hit; "verify_<op>_ast" names
    (any primitive in the name) become "require_op:<op>"; "require_op:<op>" is the first call named <op> or with
    that `op` argument (already used calls too); "require_images[:N]" needs N (default 1) transformed_image_K.png
    files, counted by the caller; "require_metrics[:key]" the run's metrics.json (`metrics`, None when there is
    none); "example_custom_verifier" is require_op:crop; anything else fails."""
    verifier = _text(verifier, "code_check.verifier").strip()
    if not verifier:
        return True, None, {"note": "empty_verifier_treated_as_pass"}
    mapped = next((f"require_op:{p}" for p in PRIMITIVES if p in verifier.lower()), None)
    if mapped and verifier.startswith("verify_") and verifier.endswith("_ast"):
        verifier = mapped
    if verifier == "example_custom_verifier":
        verifier = "require_op:crop"
    if verifier.startswith("require_op:"):
        op = verifier.split(":", 1)[1].lower().strip()
        hit = next((use for use in _live(tool_use_list)
                    if _lower(use.get("tool_name")) == op or _lower(_arguments(use).get("op")) == op), None)
        if hit is None:
            return False, None, {"reason": "op_not_found", "op": op}
        return True, _index(hit), {"op": op, "matched_event": hit}
    if verifier.startswith("require_images"):
        parts = verifier.split(":")
        wanted = int(parts[1]) if len(parts) > 1 and parts[1].strip().isdigit() else 1
        ok = transformed_images >= wanted
        return ok, 0 if ok else None, {"count": transformed_images, "min_count": wanted}
    if verifier.startswith("require_metrics"):
        parts = verifier.split(":")
        key = parts[1].strip() if len(parts) > 1 and parts[1].strip() else None
        if metrics is None:
            return False, None, {"reason": "metrics.json_missing"}
        if key and key not in metrics:
            return False, None, {"reason": "metrics.json_missing_key", "key": key}
        return True, 0, {"metrics_keys": list(metrics)}
    if verifier in _CRASHING_VERIFIERS:
        raise UnscorableItem(f"code_check.verifier {verifier!r} crashes the reference's dispatch_verifier")
    if verifier == "Path":  # the reference calls Path(**kwargs), a truthy non-result
        return True, None, {"note": "custom_fn_returned_nonstandard"}
    return False, None, {"reason": "unknown_verifier", "verifier": verifier}


def eval_process(task_cfg: dict, tool_use_list: list[dict], model_answer: str, *,
                 search_judge: Callable[[list[dict]], str | None], visual_judge: Callable[[str, str], str | None],
                 images: list[str], original: str | None = "orig.png", transformed_images: int | None = None,
                 metrics: dict | None = None, effective_tool_calls: int | None = None) -> dict:
    """eval_process on one run: {"checkpoint_results", "scores": {S, V, R, base, penalty, PQS}, "efficiency"}.

    `tool_use_list` is the runner's list (entries with index, tool_name, raw_tool_name, arguments, output).
    `search_judge(messages)` returns the search judge's reply (None or an exception: failed). `visual_judge(
    question, image)` returns the VLM's answer about one image (None or an exception: failed). `images` are
    the image files the model produced (the run's tool_images folder: every .png/.jpg/.jpeg), judged in this
    order until one passes; without any, `original` is judged. `transformed_images` counts the
    transformed_image_N.png among them (default: computed from the names). `effective_tool_calls` defaults
    to the length of tool_use_list (the Atm runner's count; Gen's excludes its code-cell entries).

    S: a google_search checkpoint sends every search not yet used by an earlier checkpoint to the judge (none:
    not passed, no judge); passing uses the first. A google_lens_search checkpoint takes the first unused lens
    call. V: the verifier (dispatch_verifier), else the first unused call of the verifier's op, else of one of
    the checkpoint's tools; and the visual check on the images (any image passes it); both when both are
    given. A V checkpoint with an answer_check is the final answer and left out of V. S and V are the shares
    passed, None without such checkpoints; base their mean; the penalty min(1, excess calls * per-call
    penalty), or 1 above max_tool_calls."""
    process = _field_dict(task_cfg, "process_evaluation")
    checkpoints = _items(process.get("checkpoints") or [], "process_evaluation.checkpoints")
    efficiency = _field_dict(process, "efficiency")
    if transformed_images is None:
        transformed_images = sum(1 for image in images if _TRANSFORMED.match(Path(str(image)).name))
    results, hits, used = {}, {}, set()
    for checkpoint in checkpoints:
        if not isinstance(checkpoint, dict) or "id" not in checkpoint or "axis" not in checkpoint:
            raise UnscorableItem(f"a checkpoint without 'id' and 'axis': {checkpoint!r}"[:200])
        cid, axis = checkpoint["id"], checkpoint["axis"]
        if axis == "S":
            result = _search_checkpoint(checkpoint, tool_use_list, used, search_judge)
        elif axis == "V" and "answer_check" in checkpoint:
            result = {"axis": axis}
        elif axis == "V":
            result = _visual_checkpoint(checkpoint, tool_use_list, used, visual_judge, images, original,
                                        transformed_images, metrics)
        elif axis == "R" and "answer_check" in checkpoint:
            result = {"axis": axis, "passed": check_answer(checkpoint, model_answer), "hit_index": len(tool_use_list),
                      "answer_check": checkpoint["answer_check"]}
        elif axis == "R":
            result = {"axis": axis, "passed": False, "error": "Unknown R checkpoint type"}
        else:
            result = {"axis": axis, "passed": False, "error": f"Unknown axis {axis}"}
        hits[cid] = result.get("hit_index")
        results[cid] = result
    ordering = _items(process.get("ordering_constraints") or [], "process_evaluation.ordering_constraints")
    s_ids = [c["id"] for c in checkpoints if c["axis"] == "S"]
    v_ids = [c["id"] for c in checkpoints if c["axis"] == "V" and "answer_check" not in c]
    s = sum(1 for cid in s_ids if results[cid]["passed"]) / len(s_ids) if s_ids else None
    v = sum(1 for cid in v_ids if results[cid]["passed"]) / len(v_ids) if v_ids else None
    r = sum(_order_holds(c, results, hits) for c in ordering) / len(ordering) if ordering else 1.0
    reference_calls = _int(efficiency.get("reference_tool_calls", 0), "efficiency.reference_tool_calls")
    per_call = _float(efficiency.get("penalty_per_extra_call", 0.0), "efficiency.penalty_per_extra_call")
    max_calls = _int(efficiency.get("max_tool_calls", 0) or 0, "efficiency.max_tool_calls")
    calls = len(tool_use_list) if effective_tool_calls is None else effective_tool_calls
    excess = max(0, calls - reference_calls)
    penalty = 1.0 if max_calls > 0 and calls > max_calls else min(1.0, excess * per_call)
    scored = [score for score in (s, v) if score is not None]
    base = sum(scored) / len(scored) if scored else 0.0
    return {"checkpoint_results": results,
            "scores": {"S": s, "V": v, "R": r, "base": base, "penalty": penalty, "PQS": base * (1.0 - penalty)},
            "efficiency": {"effective_tool_calls": calls, "reference_tool_calls": reference_calls,
                           "excess_calls": excess}}


def _search_checkpoint(checkpoint: dict, uses: list[dict], used: set, judge) -> dict:
    tools = {_text(t, "checkpoint tools").lower() for t in checkpoint.get("tools") or []}
    result = {"axis": "S", "passed": False, "hit_index": None}
    if "google_search" in tools:
        searches = [(use, _arguments(use).get("query", "")) for use in _live(uses)
                    if _lower(use.get("tool_name")) == "google_search" and _index(use) not in used]
        searches = [(use, query) for use, query in searches if query]
        if searches:
            contexts = [(use.get("output") or {}).get("context", "") for use, _ in searches]
            if not all(isinstance(c, str) for c in contexts):
                raise UnscorableItem("a google_search output's 'context' is not text")
            check = run_search_judge(judge, checkpoint.get("description", ""), [q for _, q in searches], contexts)
            if check["passed"]:
                result.update(passed=True, hit_index=_index(searches[0][0]))
                used.add(result["hit_index"])
            result["search_check"] = check
    elif "google_lens_search" in tools:
        lens = next((use for use in _live(uses) if _index(use) not in used
                     and _lower(use.get("tool_name")) == "google_lens_search"), None)
        if lens is not None:
            used.add(_index(lens))
            result.update(passed=True, hit_index=_index(lens), tool_hit_index=_index(lens),
                          matched_by="google_lens_search")
    else:
        result["error"] = "S-axis checkpoint must be search-related (google_search or google_lens_search)"
    return result


def _visual_checkpoint(checkpoint: dict, uses: list[dict], used: set, judge, images: list, original: str | None,
                       transformed: int, metrics: dict | None) -> dict:
    extra, tool_passed, visual_passed, hit = {}, False, False, None
    if "code_check" in checkpoint:
        check = checkpoint["code_check"] or {}
        if not isinstance(check, dict):
            raise UnscorableItem(f"code_check is {check!r}, not an object")
        verifier = check.get("verifier", "") or ""
        op = next((p for p in VERIFIER_OPS if p in _text(verifier, "code_check.verifier").lower()), None)
        passed, found, detail = dispatch_verifier(verifier, uses, transformed, metrics)
        if passed:
            tool_passed, hit = True, found
            if hit is not None:
                used.add(hit)
            extra["code_check"] = {"verifier": verifier, "verifier_op": op, "passed": True, "hit_index": found,
                                   "detail": detail}
        unused = [use for use in _live(uses) if _index(use) not in used]
        if not tool_passed and op:
            use = next((u for u in unused if _lower(u.get("tool_name")) == op
                        or _lower(_arguments(u).get("op")) == op), None)
            if use is not None:
                tool_passed, hit = True, _index(use)
                extra.update(op_hit_index=hit, matched_by="verifier_op")
        tools = {_text(t, "checkpoint tools").lower() for t in checkpoint.get("tools") or []}
        if not tool_passed and tools:
            use = next((u for u in unused if tools & set(_names(u))), None)
            if use is not None:
                tool_passed, hit = True, _index(use)
                extra.update(tool_hit_index=hit, matched_by="tools_list")
        if hit is not None:
            used.add(hit)
    if "visual_check" in checkpoint:
        visual_passed = _visual_check(checkpoint["visual_check"], judge, images, original, extra)
    kinds = ("code_check" in checkpoint, "visual_check" in checkpoint)
    if not any(kinds):
        extra["error"] = "V-axis checkpoint must have code_check or visual_check"
    passed = (not kinds[0] or tool_passed) and (not kinds[1] or visual_passed) and any(kinds)
    return {"axis": "V", "passed": passed, "hit_index": hit, **extra}


def _visual_check(check, judge, images: list, original: str | None, extra: dict) -> bool:
    if not isinstance(check, dict) or not isinstance(check.get("question"), str) \
            or not isinstance(check.get("expected_answer"), str):
        raise UnscorableItem("visual_check needs a 'question' and an 'expected_answer', both text")
    candidates = list(images) or ([original] if original else [])
    if not candidates:
        extra["visual_check"] = {"error": "No images found for visual check", "passed": False}
        return False
    answers, passed = [], False
    for image in candidates:
        try:
            answer = visual_judge_answer(judge(check["question"], image))
        except JudgePending:
            raise
        except Exception as err:  # noqa: BLE001 - run_visual_judge returns its errors as the answer
            answer = visual_judge_answer(None, str(err))
        expected = check["expected_answer"].strip()
        passed = visual_check_passes(expected, answer)
        answers.append({"image": Path(str(image)).name, "judge_answer": answer, "expected": expected,
                        "passed": passed})
        if passed:
            break
    extra["visual_check"] = {"question": check["question"], "expected_answer": check["expected_answer"],
                             "judge_results": answers, "passed": passed, "images_checked": len(answers)}
    return passed


def _order_holds(constraint: dict, results: dict, hits: dict) -> bool:
    """An ordering constraint (the R score, which the reference computes but does not report): every checkpoint of
    the sequence passed with a hit, in non-decreasing order, at most max_gap calls apart."""
    gap, indices = _int(constraint.get("max_gap", 0), "ordering_constraints.max_gap"), []
    for cid in constraint["sequence"]:
        if not results.get(cid, {}).get("passed", False) or hits.get(cid) is None:
            return False
        indices.append(int(hits[cid]))
    return all(a <= b and b - a - 1 <= gap for a, b in pairwise(indices))


def _live(uses: list[dict]) -> list[dict]:
    """The calls that ran (the reference skips entries whose output is marked declared_only)."""
    return [use for use in uses if not (use.get("output") or {}).get("declared_only")]


def _names(use: dict) -> list[str]:
    arguments = _arguments(use)
    names = [use.get("tool_name"), use.get("raw_tool_name")]
    names += [arguments.get(k) for k in ("tool_name", "raw_tool_name", "op")]
    return [_lower(n).strip() for n in names if _lower(n).strip()]


def _arguments(use: dict) -> dict:
    return use.get("arguments") or {}


def _index(use: dict) -> int:
    return int(use.get("index", 0))


def _lower(value) -> str:
    return _text(value or "", "a tool name").lower()


# --- Aggregation ------------------------------------------------------------------------------------------------

def incomplete_run_eval() -> dict:
    """The evaluation the reference gives a run that never finished (no run_meta.json): S and V 0.0 (so it counts
    in the S and V means), no checkpoints, a wrong answer; the run belongs to no level."""
    return {"checkpoint_results": {}, "ordering_results": [],
            "scores": {"S": 0.0, "V": 0.0, "R": 0.0, "base": 0.0, "penalty": 0.0, "PQS": 0.0},
            "efficiency": {"effective_tool_calls": 0, "reference_tool_calls": 0, "excess_calls": 0},
            "final_answer_accuracy": {"correct": False, "model_answer": "", "golden_answer": "",
                                      "match_type": "unknown"},
            "incomplete_run": True, "failure_reason": "Missing run_meta.json - incomplete execution"}


def summarize(results: list[dict]) -> dict:
    """The evaluator's scores over runs, overall and per level ({"overall": ..., "L1": ...}; a level without runs
    is left out), as its main() computes them. Each result is {"eval": eval_process's dict with
    "final_answer_accuracy" added, "level": 1/2/3 or None, "tool_use_list": [...] (optional)}.

    avg_S and avg_V average the runs whose S (V) is not None; final-answer accuracy, penalty and calls average over
    all runs; a run passes the 50 % / 80 % checkpoint rates on its S, V and R checkpoints (the final-answer one
    left out), runs without any counting as failing; perfect runs have PQS 1. search_checkpoint_* are always 0:
    the reference looks the task up under a key its runners never write."""
    if not results:
        return {}
    summary = {"overall": _subset_scores(results)}
    summary["overall"].update(search_checkpoints_total=0, search_checkpoints_passed=0, search_checkpoint_pass_rate=0.0)
    for level in (1, 2, 3):
        chosen = [r for r in results if r.get("level") == level]
        if chosen:
            summary[f"L{level}"] = _subset_scores(chosen)
    return summary


def _subset_scores(results: list[dict]) -> dict:
    total = len(results)
    s_scores = [r["eval"]["scores"]["S"] for r in results if r["eval"]["scores"]["S"] is not None]
    v_scores = [r["eval"]["scores"]["V"] for r in results if r["eval"]["scores"]["V"] is not None]
    correct = sum(1 for r in results if r["eval"].get("final_answer_accuracy", {}).get("correct", False))
    calls = sum(r["eval"]["efficiency"]["effective_tool_calls"] for r in results)
    rates = [_checkpoint_pass_rate(r["eval"].get("checkpoint_results", {})) for r in results]
    usage: dict[str, int] = {}
    for result in results:
        for use in _live(result.get("tool_use_list") or []):
            key = str(_arguments(use).get("op") or use.get("tool_name") or use.get("raw_tool_name") or "").lower()
            if key:
                usage[key] = usage.get(key, 0) + 1
    passing = {threshold: sum(1 for rate in rates if rate is not None and rate >= threshold)
               for threshold in (0.5, 0.8)}
    return {"total_cases": total,
            "avg_S": round(sum(s_scores) / len(s_scores), 4) if s_scores else 0.0,
            "avg_V": round(sum(v_scores) / len(v_scores), 4) if v_scores else 0.0,
            "total_s_cases": len(s_scores), "total_v_cases": len(v_scores),
            "final_answer_accuracy": round(correct / total, 4), "final_answer_correct_count": correct,
            "avg_penalty": round(sum(r["eval"]["scores"].get("penalty", 0.0) for r in results) / total, 4),
            "total_tool_calls": calls, "avg_tool_calls_per_case": round(calls / total, 2),
            "unique_tool_types": len(usage), "tool_usage": dict(sorted(usage.items(), key=lambda kv: -kv[1])),
            "perfect_cases": sum(1 for r in results if r["eval"]["scores"].get("PQS", 0.0) == 1.0),
            "checkpoint_pass_rate_50": round(passing[0.5] / total, 4),
            "checkpoint_pass_rate_80": round(passing[0.8] / total, 4),
            "cases_pass_50_checkpoints": passing[0.5], "cases_pass_80_checkpoints": passing[0.8]}


def _checkpoint_pass_rate(results: dict) -> float | None:
    counted = [r for r in results.values() if not (r.get("axis") == "V" and len(r) == 1)]
    return sum(1 for r in counted if r.get("passed", False)) / len(counted) if counted else None


def overthink_analysis(results: list[dict]) -> dict:
    """The evaluator's overthink statistics over runs, each {"eval": ..., "task_cfg": its task, None for a run that
    never finished}. Runs with a reference count above 0 are overthink (more calls), underthink (fewer) or
    optimal, and give a ratio calls / reference; the percentages are over all runs. The human side counts the
    tasks' S checkpoints and their tools, and the V checkpoints' tools (as the op in the verifier's name)."""
    total = len(results)
    counts, ratios, exceeded, reference_total, calls_total = {"over": 0, "under": 0, "optimal": 0}, [], 0, 0, 0
    s_checkpoints, human_tools = 0, {}
    for result in results:
        efficiency = result["eval"].get("efficiency", {})
        reference, calls = efficiency.get("reference_tool_calls", 0), efficiency.get("effective_tool_calls", 0)
        reference_total += reference
        calls_total += result["eval"]["efficiency"]["effective_tool_calls"]
        if result.get("task_cfg") is not None:
            s_count, over_limit = _human_side(result["task_cfg"], calls, human_tools)
            s_checkpoints, exceeded = s_checkpoints + s_count, exceeded + over_limit
        if reference > 0:
            counts["over" if calls > reference else "under" if calls < reference else "optimal"] += 1
            ratios.append(calls / reference)
    return {"human_total_reference_calls": reference_total,
            "human_avg_reference_calls": round(reference_total / total, 2),
            "human_total_s_checkpoints": s_checkpoints, "human_avg_s_checkpoints": round(s_checkpoints / total, 2),
            "human_tool_usage": dict(sorted(human_tools.items(), key=lambda kv: -kv[1])),
            "model_total_calls": calls_total, "model_avg_calls": round(calls_total / total, 2),
            "total_excess_calls": calls_total - reference_total,
            "avg_excess_calls": round((calls_total - reference_total) / total, 2),
            "avg_overthink_ratio": round(sum(ratios) / len(ratios), 2) if ratios else 0,
            "cases_overthink": counts["over"], "cases_underthink": counts["under"], "cases_optimal": counts["optimal"],
            "cases_exceeded_max": exceeded, "pct_overthink": round(counts["over"] / total * 100, 1),
            "pct_underthink": round(counts["under"] / total * 100, 1),
            "pct_optimal": round(counts["optimal"] / total * 100, 1)}


def _human_side(task: dict, calls: int, human_tools: dict) -> tuple[int, bool]:
    """(S checkpoints, over max_tool_calls) of a task, counting its tools into `human_tools`. A malformed task stops
    the count where the reference's bare `except: pass` stops it."""
    s_count = 0
    try:
        checkpoints = task.get("process_evaluation", {}).get("checkpoints", [])
        s_checkpoints = [c for c in checkpoints if c.get("axis") == "S"]
        s_count = len(s_checkpoints)
        for checkpoint in s_checkpoints:
            for tool in checkpoint.get("tools", []):
                human_tools[tool.lower()] = human_tools.get(tool.lower(), 0) + 1
        for checkpoint in [c for c in checkpoints if c.get("axis") == "V"]:
            verifier = (checkpoint.get("code_check", {}).get("verifier", "") or "").lower()
            op = next((p for p in VERIFIER_OPS if p in verifier), None)
            for tool in checkpoint.get("tools", []):
                name = op or tool.lower()
                human_tools[name] = human_tools.get(name, 0) + 1
        limit = task.get("process_evaluation", {}).get("efficiency", {}).get("max_tool_calls", 0)
        return s_count, limit > 0 and calls > limit
    except (AttributeError, TypeError, KeyError):
        return s_count, False


def overthink(agent_calls: int, human_calls: int) -> float:
    """The paper's Overthink of one task, max(0, C_agent - C_human) / (C_human + 1) (arXiv 2604.03016, eq. 2). The
    released evaluator does not compute it; C_agent is the run's effective_tool_calls (Atm: every call; Gen:
    search calls and the image operations read from its code) and C_human the task's reference_tool_calls."""
    return max(0, agent_calls - human_calls) / (human_calls + 1)


def v_checkpoint_stats(results: list[dict]) -> dict:
    """V_tool and V_true as evaluation/analyze_v.py counts them: {"Overall"/"L1"/"L2"/"L3": {"tool_use",
    "visual_check": {"total", "passed"}}}, pooled over runs. A V checkpoint result with a visual check is a
    visual-check one, any other V result (the final-answer one left out) a tool-use one. Each result is
    {"eval": ..., "level": 1/2/3 or None}; an incomplete run ({"incomplete_run": True, "task_cfg": its task})
    counts its task's tool-use and visual-check checkpoints as failed."""
    stats = {name: {"tool_use": {"total": 0, "passed": 0}, "visual_check": {"total": 0, "passed": 0}}
             for name in ("Overall", *LEVELS)}
    for result in results:
        level = f"L{result['level']}" if result.get("level") in (1, 2, 3) else None
        places = [stats["Overall"]] + ([stats[level]] if level else [])
        if result.get("incomplete_run") and result.get("task_cfg") is not None:
            task = result["task_cfg"]
            level = (task.get("meta") or {}).get("level")
            places = [stats["Overall"]] + ([stats[f"L{level}"]] if level in (1, 2, 3) else [])
            for checkpoint in (task.get("process_evaluation") or {}).get("checkpoints") or []:
                kind = _config_kind(checkpoint)
                for place in places if kind else ():
                    place[kind]["total"] += 1
            continue
        for data in result["eval"].get("checkpoint_results", {}).values():
            if data.get("axis") != "V" or len(data) == 1:
                continue
            kind = "visual_check" if "visual_check" in data else "tool_use"
            for place in places:
                place[kind]["total"] += 1
                place[kind]["passed"] += bool(data.get("passed", False))
    return stats


def _config_kind(checkpoint: dict) -> str | None:
    if checkpoint.get("axis") != "V" or "answer_check" in checkpoint:
        return None
    if "visual_check" in checkpoint:
        return "visual_check"
    return "tool_use" if "code_check" in checkpoint else None


# --- Field access with the reference's failures as clear errors -------------------------------------------------

def _field_dict(parent: dict, key: str, required: bool = False) -> dict:
    if not isinstance(parent, dict):
        raise UnscorableItem(f"expected an object holding {key!r}, got {type(parent).__name__}")
    value = parent[key] if required else (parent.get(key) or {})
    if not isinstance(value, dict):
        raise UnscorableItem(f"{key} is {value!r}, not an object"[:200])
    return value


def _text(value, what: str) -> str:
    if not isinstance(value, str):
        raise UnscorableItem(f"{what} is {value!r}, not text"[:200])
    return value


def _items(value, what: str) -> list:
    if isinstance(value, (str, dict)) or not hasattr(value, "__iter__"):
        raise UnscorableItem(f"{what} is {value!r}, not a list"[:200])
    return list(value)


def _iterate(value, what: str) -> list:
    """A value the reference loops over as it is (a string gives its characters)."""
    try:
        return list(value)
    except TypeError:
        raise UnscorableItem(f"{what} is {value!r}, not a list"[:200]) from None


def _float(value, what: str) -> float:
    number = _float_or_none(value)
    if number is None:
        raise UnscorableItem(f"{what} is {value!r}, not a number"[:200])
    return number


def _int(value, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise UnscorableItem(f"{what} is {value!r}, not an integer"[:200]) from None


def _float_or_none(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None
