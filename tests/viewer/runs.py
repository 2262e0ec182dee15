"""Runs for the viewer's tests: real episodes through the agent runtime (tools, images, errors, thinking), scripted
replies, written as an evaluation run directory with its report; and a large run made by repeating them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from eval.report import write_report
from runtime.episode import run_episodes
from runtime.profiles import get_profile
from runtime.toolbox import ToolBox
from tools.images import demo_image

CROP = '<think>The sign is small; zoom in.</think>\n<tool_call>\n{"name": "crop", "arguments": ' \
       '{"box": [8, 16, 72, 56]}}\n</tool_call>'
QWEN3_CROP = '<tool_call>\n{"name": "crop", "arguments": {"box": [500, 0, 1000, 500]}}\n</tool_call>'
ROTATE = '<tool_call>\n{"name": "rotate", "arguments": {"angle": 90}}\n</tool_call>'
UNKNOWN = '<tool_call>\n{"name": "teleport", "arguments": {}}\n</tool_call>'
HOSTILE = "</script><script>document.title='pwned'</script><img src=x onerror=alert(1)> <b>bold</b>"

# (category, profile, replies, answer the script gives, truth, score); score None: unscored
SCRIPTS = [
    ("zoom", "qwen2_5_vl", [CROP], "STOP", "STOP", 1.0),
    ("zoom", "qwen3_vl", [QWEN3_CROP], "EXIT", "EXIT", 1.0),
    ("rotate", "qwen2_5_vl", [ROTATE], "left", "right", 0.0),
    ("errors", "qwen2_5_vl", [UNKNOWN], HOSTILE, "42", 0.0),
    ("plain", "qwen2_5_vl", [], "a cat", "a cat", None),
    ("partial", "qwen2_5_vl", [CROP, ROTATE], "3 apples", "3 pears", 0.5),
]


def episodes_for(mode: str) -> list[tuple[dict, object]]:
    """(script, finished episode) per script; mode "no_tools" answers at once and is right only on the first two."""
    toolbox = ToolBox("default")
    started = []
    for k, script in enumerate(SCRIPTS):
        category, profile, replies, answer, truth, score = script
        image = demo_image(96, 80, seed=k)
        episode = toolbox.start(get_profile(profile), f"Question {k}: what does the {category} image say?", [image])
        turns = (replies if mode == "tools" else []) + [f"<answer>{answer}</answer>"]
        started.append((script, episode, turns))

    for _, episode, turns in started:  # one at a time: each its own script
        run_episodes([episode], lambda prompts, turns=turns, episode=episode:
                     [turns[min(episode.turns, len(turns) - 1)] for _ in prompts], toolbox)
    return [(script, episode) for script, episode, _ in started]


def make_run(path: Path, modes=("tools", "no_tools")) -> list[dict]:
    """An evaluation run directory (records.jsonl, images/, report.md, report.html) of the scripts in each mode."""
    path = Path(path)
    (path / "images").mkdir(parents=True, exist_ok=True)
    records = []
    for mode in modes:
        for k, ((category, profile, _, _, truth, score), episode) in enumerate(episodes_for(mode)):
            if mode == "no_tools":
                score = 1.0 if k < 2 else 0.0
            records.append({
                "id": f"task-{k}", "category": category, "scorer": "text_match", "mode": mode,
                "question": f"Question {k}: what does the {category} image say?", "truth": truth,
                "prediction": episode.answer, "stop_reason": episode.stop_reason.value, "error": None,
                "turns": episode.turns, "tool_calls": episode.tool_calls, "reference_calls": None,
                "prompt_tokens": 100 + k, "completion_tokens": 20 + k, "latency_s": 0.5 + k / 10, "model": "scripted",
                "profile": profile, "trajectory": episode.trajectory.to_dict(path / "images"), "score": score,
                "scores": {"official": score, "strict": 0.0 if score is not None else None}, "score_error": None})
    with open(path / "records.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    (path / "config.json").write_text(json.dumps({"suite": "viewer-fixture", "model": "scripted"}), encoding="utf-8")
    write_report(path, records, {"suite": "viewer-fixture", "model": "scripted"})
    return records


def make_large_run(path: Path, count: int, base: list[dict]) -> list[dict]:
    """`count` records made from `base` (their images shared), with ids, categories and scores varied. The tool
    schemas (the default tool set's, about 70 KB an episode) are left out to keep the file small: the page never
    shows them, and only the regions need them."""
    rng = np.random.default_rng(0)
    records = []
    for k in range(count):
        record = dict(base[k % len(base)])
        record["trajectory"] = {**record["trajectory"], "tools": []}
        record.update(id=f"large-{k:05d}", category=f"category-{k % 7}", mode="tools",
                      score=float(rng.integers(0, 2)), latency_s=float(rng.uniform(0.1, 9.0)))
        record["scores"] = {"official": record["score"], "strict": record["score"]}
        records.append(record)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "records.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return records
