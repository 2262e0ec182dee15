"""GRPO's reward terms, read from each finished episode (`episode`, train/rollout.py) and the dataset's `answer` and
`scorer` columns. TRL weights them (`reward_weights`, DeepEyes' 0.8 / 0.2 / 1.2 by default) and logs each one as
`rewards/<name>/mean`.

- `accuracy`: the task's scorer (eval.scorers) on the episode's answer, exactly as evaluation scores it; an
  answer the scorer fails on is unscored (None), as in evaluation.
- `format`: DeepEyes' format term, -1 for a malformed episode, else 0: no answer its protocol accepts (cut off, out
  of budget, an answer tag missing where the profile requires one), or a tool call that could not be parsed.
- `tool`: DeepEyes' tool term, 1 when the answer is right (accuracy > 0.5) and a tool call ran, else 0: calling
  tools never pays by itself. DeepEyes counts tool-returned images, which every call of its tools returns; here a
  call that ran counts, so tools that answer in text count too.
"""

from __future__ import annotations

from eval.scorers import get_scorer


def accuracy(completions, answer, scorer, episode, **kwargs) -> list[float | None]:
    return [_score(spec, e["answer"], truth) if e["answered"] else 0.0
            for truth, spec, e in zip(answer, scorer, episode, strict=True)]


def _score(spec: str, prediction: str, truth: str) -> float | None:
    try:
        return get_scorer(spec)(prediction, truth)
    except Exception:  # noqa: BLE001 - as evaluation: unscored (None; TRL leaves it out of the group's baseline)
        return None


def format(completions, episode, **kwargs) -> list[float]:  # noqa: A001 - TRL logs the term by its function's name
    return [0.0 if e["answered"] and not e["malformed"] else -1.0 for e in episode]


def tool(completions, answer, scorer, episode, **kwargs) -> list[float]:
    right = accuracy(completions, answer, scorer, episode)
    return [None if r is None else float(r > 0.5 and e["tool_calls"] - e["tool_errors"] > 0)
            for r, e in zip(right, episode, strict=True)]


REWARD_FUNCS = [accuracy, format, tool]
