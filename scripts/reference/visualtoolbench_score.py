"""VisualToolBench scoring reference vectors: tests/eval/benchmarks/data/visualtoolbench_score_vectors.json.

What the benchmark's judge scripts do with designed judge replies: the requests they send, the per-task results,
the crashes, and what their `analyze_results` makes of the results.

How the reference runs. `scripts/run_judge_single_turn.py` and `scripts/run_judge_multi_turn.py` are imported
unchanged from the pinned commit, with the openai and python-dotenv they import. Each case (and the chunk) runs
`process_chunk_judging(examples, 1, 1, "o4-mini", client, path, clean_rubrics)` of its script with a fake OpenAI
client in place of the network: `chat.completions.create` finds the tag `[rNNN]` in the rubric criterion of the
prompt and returns the case's `replies[tag]` in order (a string, null for content None, `{"raise": ...}` for a
request that raises; past the list it raises). `time.sleep` is a no-op, so retries do not wait. Recorded:
`calls`, each request (the prompt's SHA-256, the message count and first role, the model, the other keyword
arguments); `prompts`, the distinct prompts in order (none for the bulk cases, to keep the file small);
`results`, what the function returned; `fatal`, the message of the crash it printed (the chunk is lost);
`skipped`, the tasks it skipped for want of rubrics. Each analysis runs `analyze_results` on a JSON file of the
results of the cases it names.

The examples, rubrics and replies are read from the committed file; everything the scripts produce is recomputed.

    .venv/bin/python scripts/reference/visualtoolbench_score.py --source PATH/TO/VisualToolBench
    .venv/bin/python scripts/reference/visualtoolbench_score.py --source ... --check
"""

import contextlib
import hashlib
import io
import json
import re
import sys
import tempfile
import time
import types
from importlib.metadata import distributions
from pathlib import Path

import common

REPO_URL = "https://github.com/xi1ngang/VisualToolBench"
COMMIT = "d4f200a0a44790349667bed09334ac88623074b2"
# the scratch venv in full (openai and python-dotenv with their dependencies), as the manifest lists it
REQUIREMENTS = ["annotated-types==0.8.0", "anyio==4.16.0", "h11==0.16.0", "httpcore2==2.16.2", "httpx2==2.16.2",
                "idna==3.20", "jiter==0.19.0", "openai==3.57.0", "pydantic==2.14.4", "pydantic_core==2.50.5",
                "python-dotenv==1.2.4", "sniffio==1.3.1", "truststore==0.10.5", "typing-inspection==0.4.5",
                "typing_extensions==4.16.0"]
VECTORS = "tests/eval/benchmarks/data/visualtoolbench_score_vectors.json"
OUTPUTS = [VECTORS]
JUDGE_MODEL = "o4-mini"
# the manifest's account of how the reference was run
HOW = ("Each case ran the reference's process_chunk_judging(examples, 1, 1, 'o4-mini', client, path, "
       "clean_rubrics) with a fake OpenAI client: chat.completions.create returns, for the rubric whose "
       "description carries the tag [rNNN], the case's `replies[tag]` in order (a string, null for content None, "
       "or {'raise': ...} for a request that raises; past the list it raises). time.sleep was replaced by a "
       "no-op. `calls` are the requests the reference made, in order (the prompt's SHA-256, the message count and "
       "role, model, the other keyword arguments); `prompts` the distinct prompts in full, in order, except for "
       "the bulk cases; `results` what it returned ([] when the chunk crashed: `fatal` is the message it printed; "
       "`skipped` counts tasks it skipped for want of rubrics). Analyses ran the reference's analyze_results on "
       "the JSON of the listed eval results. The generator is scripts/reference/visualtoolbench_score.py.")
# which cases' results each analysis reads, by the analysis's name
ANALYSES = {
    "single script": lambda cases: [r for case in cases if case["script"] == "single" for r in case["results"]],
    "multi script": lambda cases: [r for case in cases if case["script"] == "multi" for r in case["results"]],
    "all tasks": lambda cases: [r for case in cases for r in case["results"]],
    "empty": lambda cases: [],
    "one task": lambda cases: [r for case in cases for r in case["results"]][:1],
    "bulk only": lambda cases: [r for case in cases if is_bulk(case) for r in case["results"]],
}


def is_bulk(case: dict) -> bool:
    return case["name"].startswith("bulk ")


class FakeOpenAI:
    """`client.chat.completions.create` answering from a case's scripted replies, recording every request."""

    def __init__(self, replies: dict[str, list]):
        self.pending = {tag: list(answers) for tag, answers in replies.items()}
        self.calls, self.prompts = [], []
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self.create))

    def create(self, model, messages, **kwargs):
        prompt = messages[0]["content"]
        self.prompts.append(prompt)
        self.calls.append({"prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest(), "role": messages[0]["role"],
                           "messages": len(messages), "model": model, "kwargs": kwargs})
        tag = re.search(r"\[(r\d+)\]", prompt.split("**Rubric Criterion:** ", 1)[1]).group(1)
        if not self.pending[tag]:
            raise RuntimeError("script exhausted")
        reply = self.pending[tag].pop(0)
        if isinstance(reply, dict):
            raise RuntimeError(reply["raise"])
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=types.SimpleNamespace(content=reply))])


def judge(script, case: dict, work: Path) -> dict:
    """One case through the script's `process_chunk_judging`; the case with every output recomputed."""
    client = FakeOpenAI(case["replies"])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        results = script.process_chunk_judging(case["examples"], 1, 1, JUDGE_MODEL, client,
                                               str(work / "eval_results.json"), case["clean_rubrics"])
    printed = printed.getvalue()
    fatal_mark = "\nFatal error in chunk 1: "
    return {**{key: case[key] for key in ("name", "script", "examples", "clean_rubrics", "replies")},
            "calls": client.calls, "prompts": [] if is_bulk(case) else list(dict.fromkeys(client.prompts)),
            "results": results,
            "fatal": printed.split(fatal_mark, 1)[1].removesuffix("\n") if fatal_mark in printed else None,
            "skipped": printed.count("Warning: No item found for task ID")}


def analyze(single_turn, eval_results: list, work: Path):
    path = work / "analysis.json"
    path.write_text(json.dumps(eval_results), encoding="utf-8")
    with contextlib.redirect_stdout(io.StringIO()):
        return single_turn.analyze_results(str(path))


def counts(cases: list[dict], analyses: list[dict]) -> dict:
    def described_rubrics(item) -> int:
        """Rubrics with a description (the ones a judge can be asked about), single- or multi-turn."""
        groups = [item.get("rubrics")] + [turn.get("rubrics") for turn in item.get("turns", [])
                                          if isinstance(turn, dict)]
        return sum("description" in rubric for group in groups if isinstance(group, dict)
                   for rubric in group.values())

    return {"cases": len(cases), "tasks": sum(len(case["examples"]) for case in cases),
            "scored_tasks": sum(len(case["results"]) for case in cases),
            "judge_requests": sum(len(case["calls"]) for case in cases),
            "rubrics": sum(described_rubrics(item) for case in cases for item in case["clean_rubrics"]),
            "analyses": len(analyses)}


def installed() -> list[str]:
    """The scratch venv's distributions as `pip freeze` lists them."""
    names = {dist.metadata["Name"]: dist.version for dist in distributions()}
    return [f"{name}=={names[name]}" for name in sorted(names, key=str.lower) if name not in ("pip", "setuptools")]


def drive(tree: str, out_dir: str) -> None:
    committed = json.loads((common.ROOT / VECTORS).read_text(encoding="utf-8"))
    sys.path.insert(0, str(Path(tree, "scripts")))
    time.sleep = lambda seconds: None
    import run_judge_multi_turn
    import run_judge_single_turn

    scripts = {"single": run_judge_single_turn, "multi": run_judge_multi_turn}
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        cases = [judge(scripts[case["script"]], case, work) for case in committed["cases"]]
        chunk = judge(scripts[committed["chunk"]["script"]], committed["chunk"], work)
        analyses = [{"name": analysis["name"], "eval_results": ANALYSES[analysis["name"]](cases)}
                    for analysis in committed["analyses"]]
        for analysis in analyses:
            analysis["output"] = analyze(run_judge_single_turn, analysis["eval_results"], work)

    manifest = {
        **committed["manifest"], "python": sys.version.split()[0], "libraries": installed(),
        "how": HOW, "counts": counts(cases, analyses)}
    header = common.header(__file__, REPO_URL, COMMIT, [line.split("==")[0] for line in REQUIREMENTS])
    common.write_json(out_dir, VECTORS, {"generator": header, "manifest": manifest, "cases": cases, "chunk": chunk,
                                         "analyses": analyses})


if __name__ == "__main__":
    if sys.argv[1:2] == ["--driver"]:
        drive(*sys.argv[2:4])
    else:
        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)
