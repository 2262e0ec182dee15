"""The embedded default without a GPU: the shipped toy checkpoints, evaluated by `eval/run_vllm.py` with no
--model (what `make run` runs) through the vLLM CPU engine on held-out rotated OCR, greedy."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from eval.config import TOY_CHECKPOINTS

ROOT = Path(__file__).resolve().parents[2]
FORMS = ("agentic", "direct")


def test_the_shipped_checkpoints_are_the_recorded_ones():
    shipped = sorted(folder.name for folder in TOY_CHECKPOINTS.iterdir() if folder.is_dir())
    # agentic-weak: where the toy GRPO recipe starts; base: where the paper-design pilot sweep fine-tunes from
    assert shipped == ["agentic", "agentic-weak", "base", "direct"]
    for form in shipped:
        sums = (TOY_CHECKPOINTS / form / "SHA256SUMS").read_text().split("\n")
        listed = dict(reversed(line.split("  ", 1)) for line in sums if line)
        assert "model.safetensors" in listed and "tokenizer.json" in listed
        for name, digest in listed.items():
            assert hashlib.sha256((TOY_CHECKPOINTS / form / name).read_bytes()).hexdigest() == digest, (form, name)


def test_the_shipped_base_reads_upright_words_and_not_rotated_ones(tmp_path):
    """The pilot's base, like a pretrained MLLM, reads text that is upright and has never learned to read it
    turned: held-out words of both kinds, through eval/run_vllm.py (transformers backend), greedy, no tools."""
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, str(ROOT / "eval" / "run_vllm.py"), "--backend", "hf", "--model",
                             str(TOY_CHECKPOINTS / "base"), "--tasks", "rotated_ocr:angles=none,render=aligned",
                             "rotated_ocr:angles=quarter,render=aligned", "--tools", "none", "--per_task", "16",
                             "--max_pixels", "0", "--dtype", "float32", "--max_tokens", "16", "--out", str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    right = {angles: [r["score"] for r in records if f"-{angles}-" in r["id"]] for angles in ("none", "quarter")}
    assert len(right["none"]) == len(right["quarter"]) == 16
    assert sum(right["none"]) >= 10 and sum(right["quarter"]) == 0  # shipped: 89.0% and 0.0% of 300 each (reads.json)
    reads = json.loads((TOY_CHECKPOINTS / "base" / "reads.json").read_text())
    assert reads["upright"]["n"] == reads["rotated"]["n"] == 300 and reads["rotated"]["correct"] == 0
    assert json.loads((TOY_CHECKPOINTS / "base" / "tirlab_sft.json").read_text())["generation"]["options"] == {
        "angles": "none", "render": "aligned"}  # pretrained on upright words only


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("toy_run") / "run"
    result = subprocess.run([sys.executable, str(ROOT / "eval" / "run_vllm.py"), "--per_task", "32", "--out",
                             str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out, result.stdout


def test_the_agentic_model_calls_rotate_itself_and_reads_the_restored_image(toy_run):
    out, stdout = toy_run
    assert "shipped toy models" in stdout and "RANDOM-WEIGHT" not in stdout
    summary = json.loads((out / "summary.json").read_text())["modes"]
    agentic, direct = summary["tools"]["overall"], summary["no_tools"]["overall"]
    assert agentic["n"] == direct["n"] == 32
    assert agentic["accuracy"] >= 0.8, agentic
    assert agentic["tool_call_rate"] >= 0.9 and direct["tool_call_rate"] == 0
    records = [json.loads(line) for line in (out / "agentic" / "records.jsonl").read_text().splitlines()]
    config = json.loads((out / "agentic" / "config.json").read_text())
    assert config["force_tool_calls"] == 0 and config["temperature"] == 0  # its own calls, greedy
    calls = [call["function"] for r in records for m in r["trajectory"]["messages"] for call in m.get("tool_calls", [])]
    assert calls and {call["name"] for call in calls} == {"rotate"}
    assert {json.loads(call["arguments"])["degree"] for call in calls} <= {90, 180, 270}
    report = (out / "report.md").read_text()
    assert str(TOY_CHECKPOINTS / "agentic") in report and str(TOY_CHECKPOINTS / "direct") in report
