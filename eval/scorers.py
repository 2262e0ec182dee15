"""Answer scorers: one module for evaluation and RL rewards, so the two never drift apart.

A scorer takes the model's final text and the ground truth and returns a score in [0, 1]. The truth is a
self-contained string: data records the scorer's SPEC and the truth with each item (`extra_info.scorer` in RL
rows), never a copy of the logic. A spec is a scorer's name, with parameters where it has any:

    spec  := name | name "(" [param ("," param)*] ")"       e.g. numeric, numeric(abs=0.5), numeric(rel=0.02)
    param := key "=" number                                  a finite number >= 0 (every parameter is a tolerance)

`get_scorer(spec)` returns the configured scorer and `check_scorer(spec)` validates one; a bad spec is a
ValueError naming the problem and listing the scorers and their parameters.

Which text is the answer:
- the last `<answer>...</answer>`, else the last `\\boxed{...}`: that text alone (`extract_answer`);
- otherwise the whole reply. Scorers that search the answer (numeric's first number, contains) search all of
  it. Scorers that compare the answer as a whole (text_match, choice) also try its last non-empty line without
  an "Answer:" label, so "Let me think...\\nParis" answers "Paris": text_match accepts either (the whole reply
  equals the truth only when it is nothing else); choice takes the whole reply's pick when it picks exactly one
  option, else the last line's. Neither gives a reply two guesses.

Scorers and their truths:
- text_match: normalized equality (case, compatibility forms, whitespace, end punctuation ignored). The truth
  may be a JSON array of strings, the accepted variants (`["NYC", "New York City"]`); any other truth, even
  valid JSON such as "[1, 2]" or "3", is one literal string. To accept text that is itself a JSON array of
  strings, wrap it in an array. (Agentic-MME's `exact` match type is text_match.)
- contains: a variant appears in the answer as whole words, after both are normalized. Variants as above.
- choice: multiple choice, truth a letter ("B") or `{"answer": "B", "options": {"A": "12 cm", "B": "40%"}}`.
  The answer picks an option by its text (equal to exactly one option's text) or else by naming exactly one
  option letter: a standalone capital ("B", "B. 40%", "Answer: B", "**B**"), "(b)", or a lone lowercase
  letter. "A" and "I" followed by a lowercase word ("A cat", "I think") are English words, not letters, unless
  the word is one of _LETTER_WORDS ("A or B", "A is right"). With options in the truth only their letters
  count and their texts are masked first ("A. Vitamin B" names A); without, any capital counts, so prose such as
  "B, since X is longer" names two letters. An answer naming two different letters is wrong.
  `option_letter` is the same scorer under its first name (data_gen and stored data use it).
- numeric: the FIRST number of the answer against the truth's first number, exact unless a tolerance is
  given: right when |p - t| <= abs or |p - t| <= rel * |t|. Numbers read: "-3", "+3", "\u22123", "1,234.5"
  (comma groups of three), ".5", "1e3", "3/4", "3.5 cm" (units ignored), "40%". A percentage against a plain
  truth is read both as written and as a fraction ("40%" matches 40 and 0.4); a plain number against a
  percentage truth likewise ("0.4" and "40" match "40%"), and the tolerance is in the truth's units.
- json_list, list_iou, jigsaw_positions: a JSON list (see each).
A truth the scorer cannot read (no number, a bad choice object) raises ValueError: that is a data error.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import string
import unicodedata
from fractions import Fraction
from functools import partial
from typing import Callable

from runtime.protocols.base import last_tag

Scorer = Callable[[str, str], float]


def extract_answer(text: str) -> str:
    """The last `<answer>...</answer>`, else the last `\\boxed{...}` (braces balanced), else the whole text."""
    tagged = _tagged_answer(text or "")
    return (tagged if tagged is not None else text or "").strip()


def _tagged_answer(text: str) -> str | None:
    tagged = last_tag(text, "answer")
    return tagged if tagged is not None else _last_boxed(text)


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, begin = 0, start + len("\\boxed{")
    for k in range(begin, len(text)):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        if depth < 0:
            return text[begin:k]
    return None


_ANSWER_LABEL = re.compile(r"^[\s*_#>-]*(?:the\s+)?(?:final\s+)?answer\b(?:\s+is\b)?[\s:：*_]*", re.I)


def _answer_candidates(text: str) -> list[str]:
    """What whole-answer scorers compare, in order: the tagged answer alone, else the whole reply and then its
    last non-empty line without an "Answer:" label."""
    text = text or ""
    tagged = _tagged_answer(text)
    if tagged is not None:
        return [tagged.strip()]
    lines = [line for line in text.splitlines() if line.strip()]
    last_line = _ANSWER_LABEL.sub("", lines[-1]).strip() if lines else ""
    return [text.strip()] if last_line == text.strip() else [text.strip(), last_line]


def normalize_text(text: str) -> str:
    """Case, accents of compatibility forms, punctuation and markdown `*` at the ends and runs of whitespace
    ignored."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(text.split()).strip(" .,;:!?\"'*")


def _variants(truth: str) -> list[str]:
    """A JSON array of strings is a list of accepted variants; any other truth is one literal string."""
    if truth.lstrip().startswith("["):
        try:
            parsed = json.loads(truth)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, list) and parsed and all(isinstance(v, str) for v in parsed):
            return parsed
    return [truth]


def text_match(prediction: str, truth: str) -> float:
    accepted = {normalize_text(v) for v in _variants(truth)}
    return float(any(normalize_text(c) in accepted for c in _answer_candidates(prediction)))


def contains(prediction: str, truth: str) -> float:
    answer = normalize_text(extract_answer(prediction))
    return float(any(re.search(rf"(?<!\w){re.escape(v)}(?!\w)", answer)
                     for v in map(normalize_text, _variants(truth)) if v))


# After "A" or "I", these words make it a letter ("A or B", "A is right") rather than an article or pronoun.
_LETTER_WORDS = ("or", "and", "nor", "vs", "is", "was", "seems", "looks", "because", "since")
_CAPITAL = re.compile(r"(?<![\w'’])([A-Z])(?![\w'’])")
_ENGLISH_WORD_AFTER = re.compile(rf"\s+(?!(?:{'|'.join(_LETTER_WORDS)})\b)[a-z]")
_PARENTHESIZED = re.compile(r"(?<![A-Za-z])\(\s*([a-z])\s*\)")


def choice(prediction: str, truth: str) -> float:
    answer, options = _choice_truth(truth)
    for candidate in _answer_candidates(prediction):
        picked = _picked_option(unicodedata.normalize("NFKC", candidate), options)
        if picked is not None:
            return float(picked == answer)
    return 0.0


def _choice_truth(truth: str) -> tuple[str, dict[str, str]]:
    """(right letter, {letter: option text}); the options are empty when the truth is a bare letter."""
    if not truth.lstrip().startswith("{"):
        if not re.fullmatch(r"\s*[A-Za-z]\s*", truth):
            raise ValueError(f"a choice truth is a letter or a JSON object, got {truth[:80]!r}")
        return truth.strip().upper(), {}
    try:
        parsed = json.loads(truth)
        answer, options = parsed["answer"].strip().upper(), {k.strip().upper(): str(v)
                                                             for k, v in parsed["options"].items()}
    except (ValueError, RecursionError, KeyError, TypeError, AttributeError):
        raise ValueError('a choice truth object is {"answer": "B", "options": {"A": "...", "B": "..."}}, got '
                         f"{truth[:80]!r}") from None
    if answer not in options or not all(len(k) == 1 and k in string.ascii_uppercase for k in options):
        raise ValueError(f"a choice truth's options are keyed by single letters and include its answer, got "
                         f"{truth[:80]!r}")
    return answer, options


def _picked_option(text: str, options: dict[str, str]) -> str | None:
    """The one option an answer picks, by its text or else by the letters it names; None for none or several."""
    same_text = [k for k, v in options.items() if normalize_text(v) and normalize_text(v) == normalize_text(text)]
    if len(same_text) == 1:
        return same_text[0]
    for option_text in options.values():
        if len(option_text.strip()) > 1:  # an option's own capitals ("Vitamin B") are not letters the answer names
            text = text.replace(option_text.strip(), " ")
    named = {m.group(1) for m in _CAPITAL.finditer(text)
             if m.group(1) not in "AI" or not _ENGLISH_WORD_AFTER.match(text, m.end())}
    named |= {m.group(1).upper() for m in _PARENTHESIZED.finditer(text)}
    if lone := re.fullmatch(r"\W*([a-z])\W*", text):
        named.add(lone.group(1).upper())
    if options:
        named &= set(options)
    return named.pop() if len(named) == 1 else None


def json_list(prediction: str, truth: str) -> float:
    """A list answer (e.g. a jigsaw permutation), compared element by element after JSON parsing."""
    try:
        predicted = json.loads(extract_answer(prediction))
    except (ValueError, RecursionError):
        return 0.0
    return float(isinstance(predicted, list) and predicted == json.loads(truth))


def jigsaw_positions(prediction: str, truth: str) -> float:
    """TIR-Bench's jigsaw score: the share of positions where the predicted permutation has the right
    piece. Accepts a JSON list or TIR-Bench's "1, 16, 15, 2" form."""
    expected = json.loads(truth)
    predicted = [int(x) for x in re.findall(r"-?\d+", extract_answer(prediction))]
    return sum(p == t for p, t in zip(predicted, expected)) / len(expected) if expected else 0.0


def list_iou(prediction: str, truth: str) -> float:
    """A set answer (e.g. the patches that differ): intersection over union of the predicted and true
    lists, as TIR-Bench scores spot the difference. The last `[...]` of the answer is the prediction, so
    `{"different_patches": [2, 6]}` in a code fence counts."""
    lists = re.findall(r"\[[^\[\]]*\]", extract_answer(prediction))
    try:
        predicted = json.loads(lists[-1]) if lists else None
    except ValueError:
        return 0.0
    if not isinstance(predicted, list) or not all(type(x) in (int, str) for x in predicted):
        return 0.0
    predicted, expected = set(predicted), set(json.loads(truth))
    union = predicted | expected
    return len(predicted & expected) / len(union) if union else 1.0


_NUMBER = re.compile(r"""
    (?<![\w.])(?P<sign>[-+\u2212])?
    (?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)   # 1,234.5 | 1234.5 | .5
    (?:[eE](?P<exponent>[-+]?\d{1,3})(?!\d))?                     # bounded: 1e999999999 is not a number here
    (?:/(?P<denominator>\d+(?:\.\d+)?)(?![\d/]))?                 # 3/4, but not a date 3/4/2020
    (?P<percent>\s?%)?
""", re.X)


def _first_number(text: str) -> tuple[Fraction, bool] | None:
    """The first number of the text, exactly, and whether it is a percentage; None when there is none or it
    cannot be read (a zero denominator, more digits than Python converts)."""
    match = _NUMBER.search(unicodedata.normalize("NFKC", text))
    if match is None:
        return None
    try:
        value = Fraction(match["digits"].replace(",", "")) * Fraction(10) ** int(match["exponent"] or 0)
        if match["denominator"]:
            value /= Fraction(match["denominator"])
    except (ValueError, ZeroDivisionError):
        return None
    return (-value if match["sign"] in ("-", "\u2212") else value), bool(match["percent"])


def numeric(prediction: str, truth: str, *, abs: float = 0.0, rel: float = 0.0) -> float:
    """The first number of the answer within `abs` or `rel` * |truth| of the truth's number (exact by default)."""
    expected = _first_number(truth)
    if expected is None:
        raise ValueError(f"a numeric truth needs a number, got {truth[:80]!r}")
    predicted = _first_number(extract_answer(prediction))
    if predicted is None:
        return 0.0
    (value, value_percent), (target, target_percent) = predicted, expected
    # the prediction in the truth's units; a percentage on one side only may be meant either way
    readings = [value]
    if value_percent and not target_percent:
        readings.append(value / 100)
    if target_percent and not value_percent:
        readings.append(value * 100)
    tolerance = max(Fraction(abs), Fraction(rel) * (target if target >= 0 else -target))
    return float(any(-tolerance <= reading - target <= tolerance for reading in readings))


SCORERS: dict[str, Scorer] = {"text_match": text_match, "choice": choice, "option_letter": choice, "contains": contains,
                              "numeric": numeric, "json_list": json_list, "list_iou": list_iou,
                              "jigsaw_positions": jigsaw_positions}

_SPEC = re.compile(r"\s*([A-Za-z_]\w*)\s*(?:\((.*)\))?\s*", re.S)


def get_scorer(spec: str) -> Scorer:
    """The scorer a spec names, configured with its parameters ("numeric(rel=0.02)"); ValueError if bad."""
    if not isinstance(spec, str):
        raise ValueError(f"a scorer spec is a string, got {type(spec).__name__}; available: {_available()}")
    match = _SPEC.fullmatch(spec)
    if match is None:
        raise ValueError(f"scorer spec {spec!r} is not NAME or NAME(key=number, ...); available: {_available()}")
    name, arguments = match.groups()
    if name not in SCORERS:
        raise ValueError(f"unknown scorer {name!r}; available: {_available()}")
    scorer, accepted, params = SCORERS[name], _parameters(SCORERS[name]), {}
    arguments = (arguments or "").strip()
    for argument in arguments.split(",") if arguments else []:
        key, equals, value = (part.strip() for part in argument.partition("="))
        if not equals or not key:
            raise ValueError(f"scorer spec {spec!r}: {argument.strip()!r} is not key=number; {_signature(name)}")
        if key not in accepted:
            raise ValueError(f"scorer spec {spec!r}: {name} has no parameter {key!r}; {_signature(name)}")
        if key in params:
            raise ValueError(f"scorer spec {spec!r}: {key!r} is given twice; {_signature(name)}")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"scorer spec {spec!r}: {key} must be a finite number >= 0, got {value!r}; "
                             f"{_signature(name)}")
        params[key] = number
    return partial(scorer, **params) if params else scorer


def check_scorer(spec: str) -> None:
    """Raise ValueError naming the problem if `spec` is not a valid scorer spec."""
    get_scorer(spec)


def _parameters(scorer: Scorer) -> dict[str, object]:
    """A scorer's parameters: its keyword-only arguments and their defaults."""
    return {p.name: p.default for p in inspect.signature(scorer).parameters.values() if p.kind is p.KEYWORD_ONLY}


def _signature(name: str) -> str:
    params = _parameters(SCORERS[name])
    return (f"it takes {name}({', '.join(f'{k}={v}' for k, v in params.items())})" if params
            else f"{name} takes no parameters")


def _available() -> str:
    return ", ".join(name + (f"({', '.join(f'{k}={v}' for k, v in _parameters(scorer).items())})"
                             if _parameters(scorer) else "") for name, scorer in SCORERS.items())


def deepeyes_reward(prediction: str, truth: str, scorer: str, used_tool: bool) -> float:
    """DeepEyes' RL reward: 0.8 accuracy + 0.2 format (a well-formed <answer>) + 1.2 tool use, the tool
    term counting only when the answer is correct (so calling tools never pays by itself)."""
    accuracy = get_scorer(scorer)(prediction, truth)
    well_formed = float(last_tag(prediction or "", "answer") is not None and "</answer>" in (prediction or ""))
    return 0.8 * accuracy + 0.2 * well_formed + 1.2 * float(used_tool and accuracy > 0)
