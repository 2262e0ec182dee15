"""Writes tests/eval/benchmarks/data/vtc_bench_score_vectors.json: VTC-Bench's scoring (eval/VTC_Bench_Eval.py's
answer extraction, rerun test and JSONL -> xlsx conversion; VLMEvalKit's VTCBenchDataset.evaluate with its GPT
judge, its tool-chain extractor and ground-truth tool counts) run on the designed rows and replies the file holds.
The header's `procedure` says what every field means; this script is that procedure.

How the reference runs: VLMEvalKit's packages are registered as empty modules pointing at the checkout's folders,
so their __init__ files (which import every model and dataset) never run. The real smp package, api/base.py,
api/gpt.py, dataset/image_base.py, dataset/image_vqa.py, dataset/utils/judge_util.py and utils/mp_util.py run
unmodified; the names the empty packages would export (`vlmeval.api.OpenAIWrapper`, `vlmeval.dataset.utils.
build_judge`/`DEBUG_MESSAGE`, `vlmeval.utils.track_progress_rich`) are set on them, and judge_util's other two
judges (SiliconFlowAPI, HFChatModel, never built for gpt-4o-mini) are placeholders. Stub modules for qwen_agent
(FnCallAgent, Message, ContentItem, FunctionCall) and cv2 let eval/VTC_Bench_Eval.py import; its own import of
VTC_BenchDataset fails, so its HAS_EVAL_SUPPORT flag is set as a working install would have it.

What is replaced, and why:
- requests.post is a scripted server: each judged row consumes its recorded replies in order (null: a failed
  request), the tool-chain cases theirs (null: the failure the case's name says); the judge's "hello" liveness
  checks get "Hello!". The judge runs four threads (nproc 4) and some rows carry the same prompt, so the worker
  thread's current row is noted as track_progress_rich hands it to VTCBench_auxeval; the server answers from it.
- time.sleep does nothing: the waits between retries and the judge's random delays change no output.
- process_single_item gets a scripted agent whose run_nonstream returns each recorded run in turn.

    .venv/bin/python scripts/reference/vtc_bench_score.py --source PATH/TO/VTC-Bench [--check]
"""

import csv
import json
import math
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

REPO_URL = "https://github.com/cs-w0r1d/VTC-Bench"
COMMIT = "93a33a446c1a867b67dd76940a65b91b5b7d500d"
SCORED = ["pandas==3.1.1", "openpyxl==3.1.5", "xlsxwriter==3.3.1", "numpy==2.4.6", "math-verify==0.9.0",
          "latex2sympy2_extended==1.11.0", "sympy==1.14.0", "antlr4-python3-runtime==4.13.2"]
# What the real smp package and VTC_Bench_Eval.py import besides; none of it touches a score.
IMPORTED = ["requests==2.34.2", "tqdm==4.70.1", "rich==15.0.0", "matplotlib==3.11.2", "tabulate==0.10.0",
            "huggingface_hub==2.4.0", "sty==1.0.6", "portalocker==4.4.2", "validators==0.36.0", "pillow==13.0.0",
            "pyyaml==6.0.3"]
REQUIREMENTS = SCORED + IMPORTED
LIBRARIES = [requirement.split("==")[0] for requirement in SCORED]
VECTORS = "tests/eval/benchmarks/data/vtc_bench_score_vectors.json"
OUTPUTS = [VECTORS]
VLMEVAL = "eval/eval/VLMEvalKit/vlmeval"
JUDGE_KEY = "sk-vectors"
JUDGE_BASE = "http://judge.invalid/v1/chat/completions"
CELLS = ["question", "answer", "A", "B", "C", "D", "E", "prediction"]
ALL_FAILED = "All 5 retries failed.\n"


class Response:
    def __init__(self, status_code: int, body):
        self.status_code, self.body = status_code, body
        self.text = json.dumps(body)

    def json(self):
        return self.body


def chat(content) -> Response:
    return Response(200, {"choices": [{"message": {"content": content}}]})


def register_reference(tree: Path) -> types.ModuleType:
    """Imports the reference modules as the header's procedure describes; returns eval/VTC_Bench_Eval.py."""
    def package(name: str, folder: Path) -> types.ModuleType:
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]
        sys.modules[name] = module
        return module

    root = tree / VLMEVAL
    package("vlmeval", root)
    api = package("vlmeval.api", root / "api")
    package("vlmeval.dataset", root / "dataset")
    dataset_utils = package("vlmeval.dataset.utils", root / "dataset" / "utils")
    utils = package("vlmeval.utils", root / "utils")
    from vlmeval.api.gpt import OpenAIWrapper
    from vlmeval.dataset.utils.judge_util import DEBUG_MESSAGE, build_judge
    from vlmeval.utils.mp_util import track_progress_rich

    api.OpenAIWrapper = OpenAIWrapper
    api.SiliconFlowAPI = api.HFChatModel = None
    dataset_utils.build_judge, dataset_utils.DEBUG_MESSAGE = build_judge, DEBUG_MESSAGE
    utils.track_progress_rich = track_progress_rich
    import vlmeval.dataset.image_vqa  # noqa: F401 - imports the names set above

    qwen_agent = package("qwen_agent", tree / "missing")  # nothing of qwen-agent's own is imported
    qwen_agent.agents = types.ModuleType("qwen_agent.agents")
    qwen_agent.agents.FnCallAgent = object
    schema = types.ModuleType("qwen_agent.llm.schema")
    schema.Message, schema.ContentItem, schema.FunctionCall = Message, ContentItem, object
    cv2 = types.ModuleType("cv2")
    cv2.setNumThreads = lambda threads: None
    sys.modules.update({"qwen_agent.agents": qwen_agent.agents, "qwen_agent.llm": types.ModuleType("qwen_agent.llm"),
                        "qwen_agent.llm.schema": schema, "cv2": cv2})
    sys.path.insert(0, str(tree / "eval"))
    import VTC_Bench_Eval

    VTC_Bench_Eval.HAS_EVAL_SUPPORT = True
    return VTC_Bench_Eval


class ContentItem:
    def __init__(self, text=None, image=None):
        self.text, self.image = text, image


class Message:
    """A qwen-agent Message as the agent returns it: list content holds ContentItem parts."""

    def __init__(self, role, content, reasoning_content=None):
        self.role, self.reasoning_content = role, reasoning_content
        self.content = [ContentItem(**part) if isinstance(part, dict) else part for part in content] \
            if isinstance(content, list) else content


def score_rows(vectors: dict, folder: Path, evaluation) -> None:
    """The rows through TSV -> results JSONL -> convert_jsonl_to_xlsx -> VTCBenchDataset.evaluate with the judge."""
    import requests
    from vlmeval.dataset import image_vqa
    from vlmeval.smp import load

    rows = vectors["rows"]
    tsv, jsonl, xlsx = folder / "VTC_Bench.tsv", folder / "results.jsonl", folder / "results.xlsx"
    columns = [column for column in rows[0]["row"] if column != "prediction"]
    with open(tsv, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, delimiter="\t")
        writer.writerow(columns)
        for vector in rows:
            writer.writerow(["" if vector["row"][c] is None else vector["row"][c] for c in columns])
    with open(jsonl, "w", encoding="utf-8") as out:
        for vector in rows:
            if not vector.get("no_jsonl_record"):
                out.write(json.dumps({"status": "success", "item_id": vector["row"]["id"],
                                      "agent_answer": vector["row"]["prediction"]}, ensure_ascii=False) + "\n")
    assert evaluation.convert_jsonl_to_xlsx(str(jsonl), str(tsv), str(xlsx))

    scripts = {v["row"]["index"]: list(v["judge"]["replies"]) for v in rows if v["judge"]}
    seen = {index: {"replies": [], "temperatures": [], "payloads": []} for index in scripts}
    current = threading.local()

    def judge_server(url, headers=None, data=None, timeout=None, **kwargs):
        payload = json.loads(data)
        if payload["messages"][-1]["content"][0]["text"] == "hello":
            return chat("Hello!")
        index = current.index
        reply = scripts[index].pop(0)
        seen[index]["replies"].append(reply)
        seen[index]["temperatures"].append(payload["temperature"])
        seen[index]["payloads"].append(payload)
        return Response(500, {"error": "scripted failure"}) if reply is None else chat(reply)

    real_track = image_vqa.track_progress_rich

    def track_noting_rows(func, tasks, **kwargs):
        def noted(model, line):
            current.index = int(line["index"])
            return func(model, line)
        return real_track(noted, tasks, **kwargs)

    image_vqa.track_progress_rich = track_noting_rows
    requests.post = judge_server
    dataset = image_vqa.VTCBenchDataset.__new__(image_vqa.VTCBenchDataset)
    result = dataset.evaluate(str(xlsx), model="gpt-4o-mini", nproc=4, key=JUDGE_KEY, api_key=JUDGE_KEY,
                              api_base=JUDGE_BASE)
    assert not any(scripts.values()), "every scripted judge reply is used"
    vectors["accuracy"] = {k: float(v) for k, v in result.iloc[0].items()}

    loaded = load(str(xlsx)).sort_values(by="index")
    combined = load(str(folder / "results_combined.xlsx")).set_index("index")
    judged = load(str(folder / "results_gpt-4o-mini.pkl"))
    fields = None
    for vector, (_, line) in zip(rows, loaded.iterrows()):
        index = vector["row"]["index"]
        assert int(line["index"]) == index
        changed = {}
        for cell in CELLS:
            value = plain(line[cell])
            if value != vector["row"][cell]:
                changed[cell] = value
        vector["reference_cells_changed"] = changed
        vector["rule_score"] = float(dataset._evaluate_single_item(line))
        vector["final_score"] = float(combined.loc[index, "final_score"])
        if index in judged:
            payloads = seen[index]["payloads"]
            prompts = {p["messages"][0]["content"][0]["text"] for p in payloads}
            assert len(prompts) == 1, index
            vector["judge"] = {"prompt": prompts.pop(), "replies": seen[index]["replies"],
                               "temperatures": seen[index]["temperatures"], "hit": judged[index]["hit"],
                               "res": judged[index]["res"],
                               "all_attempts_failed": judged[index]["log"].endswith(ALL_FAILED)}
            request_fields = [{k: v for k, v in p.items() if k not in ("messages", "temperature")} for p in payloads]
            fields = fields or request_fields[0]
            assert all(f == fields for f in request_fields)
        else:
            vector["judge"] = None
    vectors["header"]["judge_request_fields"] = fields
    example = vectors["header"]["judge_request_example"]
    example["payload"] = seen[example["index"]]["payloads"][example["attempt"]]


def plain(value):
    """A cell as JSON holds it: NaN as null, numpy scalars as Python's."""
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value


def extraction(vectors: dict, folder: Path, evaluation) -> None:
    """process_single_item on scripted agent runs: how many runs it asks for and the answer it keeps."""
    from PIL import Image

    image = folder / "image.png"
    Image.new("RGB", (4, 3)).save(image)
    row = {"index": 1, "id": "x_1", "category": "counting", "image": str(image), "question": "How many?",
           "answer": "B", "A": "1", "B": "2", "C": "3", "D": "4", "E": ""}
    evaluation._worker_config = {}
    for vector in vectors["extraction"]:
        runs = [[Message(**message) for message in run] for run in vector["runs"]]
        calls = []

        class Agent:
            system_message = "You are a helpful assistant."

            def run_nonstream(self, messages, question_id):
                calls.append(question_id)
                return runs[min(len(calls), len(runs)) - 1]

        evaluation.init_agent = lambda *args, **kwargs: Agent()
        result = evaluation.process_single_item(({}, (0, row), str(folder), "{question}", True, "scripted"))
        assert result["status"] == "success", result
        vector.update({"agent_runs": len(calls), "agent_answer": result["agent_answer"],
                       "full_response": result["full_response"]})


def tool_chain(vectors: dict, dataset_class) -> None:
    """call_llm_for_tool_chain on scripted responses."""
    import requests

    example = vectors["header"]["tool_chain_request_example"]
    for vector in vectors["tool_chain_replies"]:
        replies, payloads = list(vector["replies"]), []

        def server(url, headers=None, json=None, timeout=None, **kwargs):
            payloads.append(json)
            return failure(vector["case"]) if (reply := replies.pop(0)) is None else chat(reply)

        requests.post = server
        vector["result"] = dataset_class.call_llm_for_tool_chain(example["python_code"], JUDGE_KEY, JUDGE_BASE,
                                                                 example["model"])
        vector["requests"] = len(payloads)
        assert not replies, vector["case"]
        example["payload"] = payloads[0]


def failure(case: str) -> Response:
    """A null reply, as the case's name says it fails: no choices, no content key, null content or HTTP 500."""
    if "no choices" in case:
        return Response(200, {"choices": []})
    if "no content key" in case:
        return Response(200, {"choices": [{"message": {}}]})
    if "null content" in case:
        return chat(None)
    return Response(500, {"error": "scripted failure"})


def driver(tree: Path, out_dir: str) -> None:
    import common

    vectors = json.loads((common.ROOT / VECTORS).read_text(encoding="utf-8"))
    time.sleep = lambda seconds: None
    evaluation = register_reference(tree)
    from vlmeval.dataset.image_vqa import VTCBenchDataset

    with tempfile.TemporaryDirectory() as folder:
        score_rows(vectors, Path(folder), evaluation)
    with tempfile.TemporaryDirectory() as folder:
        extraction(vectors, Path(folder), evaluation)
    for vector in vectors["reruns"]:
        vector["rerun"] = evaluation.should_retry_answer(vector["answer"])
    dataset = VTCBenchDataset.__new__(VTCBenchDataset)
    for vector in vectors["gt_tool_counts"]:
        cell = float("nan") if vector["cell"] is None else vector["cell"]
        vector["count"] = dataset._process_single_sample((0, {"model_tools_gt": cell}, None, None, None, None))[
            "gt_tool_count"]
    tool_chain(vectors, VTCBenchDataset)
    header = vectors["header"]
    header["procedure"] = header["procedure"].replace(
        "in a scratch virtualenv outside this repository", "by scripts/reference/vtc_bench_score.py in a scratch "
        "virtualenv")
    common.write_json(out_dir, VECTORS, {"generator": common.header(__file__, REPO_URL, COMMIT, LIBRARIES),
                                         **{k: v for k, v in vectors.items() if k != "generator"}})


if __name__ == "__main__":
    if sys.argv[1:2] == ["--driver"]:
        driver(Path(sys.argv[2]), sys.argv[3])
    else:
        import common

        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)
