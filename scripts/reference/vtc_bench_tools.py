"""Writes tests/tools/data/vtc_bench/ (manifest.json, cases.json.gz, outputs.npz): VTC-Bench's 35 OpenCV tools
(eval/qwen_agent/tools/opencv_tools.py over opencv_interface.py) called as its agent calls them, once per recorded
case. The cases (the hand-written ones and the random ones: id, tool, arguments, original, loader) and the input
files (inputs/) are the committed ones; everything the reference answers (verdict, reply, output image) and the
environment each case runs in are recomputed.

How the reference runs (manifest.json's `reference.how`): qwen_agent's packages are registered as empty modules
pointing at the checkout's folders, so their __init__ files (which import every agent, LLM client and tool) never
run; eval/qwen_agent/tools/opencv_tools.py, opencv_interface.py, base.py, utils/utils.py, llm/schema.py, log.py
and settings.py run unmodified. Each case is `tool.call(arguments, messages=[system, user])` with the task's image
as the user message's first item, wrapped in Agent._call_tool's handling (eval/qwen_agent/agent.py, reproduced:
an unknown name, an exception turned into text). cv2.setNumThreads(1) as eval/VTC_Bench_Eval.py sets it, and
cv2.setRNGSeed(0) before each call. The inputs are copied to /tmp/vtc/in/ (the paths in the arguments); each
worker's working and home folders hold nothing but the tools' output folder.

The cases run in worker processes, one per environment (manifest.json's `environments`): `main`, and two built
here beside the orchestrator's venv because the reference fails on today's libraries: `opencv4` (OpenCV 4 for
opencv_hough_lines) and `numpy1` (numpy 1 for opencv_features' shi_tomasi, installed with --no-deps since
OpenCV 5 asks for numpy 2). A case that kills its worker (OpenCV's SIGFPE) is recorded as a crash and the worker
restarts after it; every crash must be explained in manifest.json's `crashes`.

    .venv/bin/python scripts/reference/vtc_bench_tools.py --source PATH/TO/VTC-Bench [--check]
"""

import contextlib
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

REPO_URL = "https://github.com/cs-w0r1d/VTC-Bench"
COMMIT = "93a33a446c1a867b67dd76940a65b91b5b7d500d"
SHARED = ["pillow==13.0.0", "jsonschema==4.26.0", "json5==0.17.3", "pydantic==2.14.3", "requests==2.34.2"]
REQUIREMENTS = ["opencv-python-headless==5.0.0.93", "numpy==2.3.5", *SHARED]
ENVIRONMENTS = {
    "main": REQUIREMENTS,
    "opencv4": ["opencv-python-headless==4.13.0.92", "numpy==2.3.5", *SHARED],
    # Every distribution pinned, as --no-deps installs none of their requirements.
    "numpy1": ["--no-deps", "opencv-python-headless==5.0.0.93", "numpy==1.26.4", *SHARED,
               "annotated-types==0.8.0", "attrs==26.1.0", "certifi==2026.10.19.post1", "charset-normalizer==3.5.3",
               "idna==3.20", "jsonschema-specifications==2025.9.1", "pydantic-core==2.50.4", "referencing==0.37.0",
               "rpds-py==2026.9.1", "typing-extensions==4.16.0", "typing-inspection==0.4.5", "urllib3==2.8.0"],
}
LIBRARIES = ["opencv-python-headless", "numpy", "pillow", "jsonschema", "json5", "pydantic", "requests"]
DATA = "tests/tools/data/vtc_bench"
OUTPUTS = ["tests/tools/data/vtc_bench/manifest.json", "tests/tools/data/vtc_bench/cases.json.gz",
           "tests/tools/data/vtc_bench/outputs.npz"]
QWEN_AGENT = "eval/qwen_agent"
INPUTS = Path("/tmp/vtc/in")
CASE_INPUTS = ("id", "tool", "arguments", "original")
TRACEBACK = "Traceback:\n"
IMAGE_PATH = "Edited Image Path: "


def environment(case: dict) -> str:
    """Where a case runs: OpenCV 4 for the tool written against HoughLinesP's (N, 1, 4) result, numpy 1 for the
    method that calls np.int0, today's libraries for the rest."""
    if case["tool"] == "opencv_hough_lines":
        return "opencv4"
    arguments = case["arguments"]
    param = arguments.get("param") if isinstance(arguments, dict) else None
    method = param.get("method") if isinstance(param, dict) else None
    if case["tool"] == "opencv_features" and isinstance(method, str) and method.lower() == "shi_tomasi":
        return "numpy1"
    return "main"


def worker(tree: Path, cases_file: str, results_file: str) -> None:
    """Runs the cases of one environment in order, one JSON line per answer, written as soon as it is known."""
    import common

    for name in ("qwen_agent", "qwen_agent.tools", "qwen_agent.llm", "qwen_agent.utils"):
        package = types.ModuleType(name)
        package.__path__ = [str(tree / QWEN_AGENT / name.removeprefix("qwen_agent").lstrip(".").replace(".", "/"))]
        sys.modules[name] = package
    import cv2

    import qwen_agent.tools.opencv_tools  # noqa: F401 - registers the tools
    from qwen_agent.llm.schema import ContentItem, Message
    from qwen_agent.tools.base import TOOL_REGISTRY

    cv2.setNumThreads(1)
    tools = {name: tool() for name, tool in TOOL_REGISTRY.items()}
    with open(results_file, "a", encoding="utf-8") as results:
        results.write(json.dumps({"versions": common.versions(LIBRARIES)}) + "\n")
        for case in json.loads(Path(cases_file).read_text(encoding="utf-8")):
            messages = [Message(role="system", content=[ContentItem(text="You are a helpful assistant.")]),
                        Message(role="user", content=[ContentItem(image=case["original"]),
                                                      ContentItem(text="Answer the question.")])]
            cv2.setRNGSeed(0)
            answer = call_tool(tools, case["tool"], case["arguments"], messages)
            results.write(json.dumps({"id": case["id"], **answer}) + "\n")
            results.flush()


def call_tool(tools: dict, name: str, arguments, messages: list) -> dict:
    """Agent._call_tool's answer, as a verdict, the reply and the saved image's path."""
    if name not in tools:
        return {"verdict": "unknown_tool", "reply": f"Tool {name} does not exists.", "image": None}
    try:
        items = tools[name].call(arguments, messages=messages)
    except Exception as ex:  # noqa: BLE001 - the agent turns any exception into text
        # The frames after "Traceback:" name this machine's paths; the agent's text is kept up to there.
        return {"verdict": "rejected", "reply": f"An error occurred when calling tool `{name}`:\n"
                f"{type(ex).__name__}: {ex}\n{TRACEBACK}", "image": None}
    images = [item.image for item in items if item.image]
    text = items[0].text
    if images:
        return {"verdict": "ok", "reply": text.replace(IMAGE_PATH + images[0], IMAGE_PATH + "<output>"),
                "image": images[0]}
    return {"verdict": "failed", "reply": text, "image": None}


def run_environment(tree: Path, name: str, cases: list[dict], scratch: Path) -> tuple[dict, dict]:
    """The answers of one environment's worker (restarted after each case that kills it) and its versions."""
    import common

    python = common.scratch_venv(ENVIRONMENTS[name]) if name != "main" else Path(sys.executable)
    folder = scratch / name
    folder.mkdir()
    results_file, answers, versions = folder / "results.jsonl", {}, None
    remaining = cases
    while remaining:
        cases_file = folder / "cases.json"
        cases_file.write_text(json.dumps([{k: case[k] for k in CASE_INPUTS} for case in remaining]))
        run = subprocess.run([str(python), str(Path(__file__).resolve()), "--worker", str(tree), str(cases_file),
                              str(results_file)], cwd=folder, env={**os.environ, "HOME": str(folder)},
                             capture_output=True, text=True)
        for line in results_file.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if "versions" in record:
                versions = record["versions"]
            else:
                answers[record.pop("id")] = record
        remaining = [case for case in remaining if case["id"] not in answers]
        if run.returncode == 0:
            break
        if run.returncode > 0:
            sys.exit(f"the {name} worker failed:\n{run.stderr[-3000:]}")
        answers[remaining[0]["id"]] = {"verdict": "crash", "reply": None, "image": None}  # killed by a signal
        remaining = remaining[1:]
    return answers, versions


def check_versions(recorded: dict, found: dict, name: str) -> None:
    """The manifest's versions of an environment are those its worker ran with."""
    listed = {k: v for k, v in recorded.items() if k != "used for" and isinstance(v, str)}
    listed.update(recorded.get("also installed for the package's imports", {}))
    wrong = {k: (v, found.get(k)) for k, v in listed.items() if v.split(" ")[0] != found.get(k)}
    assert not wrong, f"{name}: manifest versions differ from the installed ones: {wrong}"


def output_key(pixels) -> str:
    return "o" + hashlib.sha1(pixels.tobytes() + str(pixels.shape).encode()).hexdigest()[:16]


@contextlib.contextmanager
def _removed_after(folder: Path):
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def driver(tree: Path, out_dir: str) -> None:
    import common
    import numpy as np
    from PIL import Image

    data = common.ROOT / DATA
    manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
    excluded = set(manifest["excluded"]["ids"])
    cases = [case for case in json.loads(gzip.decompress((data / "cases.json.gz").read_bytes()))
             if case["id"] not in excluded]
    if INPUTS.parent.exists():  # the path is in the vectors' arguments and replies, so it cannot move
        sys.exit(f"{INPUTS.parent} exists: this generator needs it for itself; move it away and run it again")
    shutil.copytree(data / "inputs", INPUTS)
    answers = {}
    with tempfile.TemporaryDirectory(prefix="vtc-tools-") as scratch, _removed_after(INPUTS.parent):
        for name in manifest["environments"]:
            chosen = [case for case in cases if environment(case) == name]
            found, versions = run_environment(tree, name, chosen, Path(scratch))
            if chosen:
                check_versions(manifest["environments"][name], versions, name)
            answers.update({case_id: {**answer, "reference": name} for case_id, answer in found.items()})
        records, images = [], {}
        for case in cases:
            answer = answers[case["id"]]
            output = None
            if answer["image"]:
                pixels = np.array(Image.open(answer["image"]))
                output = output_key(pixels)
                images.setdefault(output, pixels)
            records.append({**{k: case[k] for k in CASE_INPUTS}, "reference": answer["reference"],
                            "verdict": answer["verdict"], "reply": answer["reply"],
                            **({"loader": case["loader"]} if "loader" in case else {}), "output": output})
    crashes = {record["id"] for record in records if record["verdict"] == "crash"}
    assert crashes == set(manifest["crashes"]), f"explain each crash in manifest.json: {sorted(crashes)}"
    manifest = {"generator": common.header(__file__, REPO_URL, COMMIT, LIBRARIES),
                **{k: v for k, v in manifest.items() if k != "generator"},
                "counts": {"cases": len(records), "distinct output images": len(images)}}
    common.write_json(out_dir, OUTPUTS[0], manifest, indent=2)
    text = "[\n" + ",\n".join(json.dumps(record) for record in records) + "\n]\n"
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="cases.json", mode="wb", fileobj=buffer, mtime=0) as compressed:
        compressed.write(text.encode())
    (Path(out_dir) / OUTPUTS[1]).write_bytes(buffer.getvalue())
    np.savez_compressed(Path(out_dir) / OUTPUTS[2], **images)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--driver"]:
        driver(Path(sys.argv[2]), sys.argv[3])
    elif sys.argv[1:2] == ["--worker"]:
        worker(Path(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        import common

        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)
