"""Agentic-MME's scoring as its evaluator computes it: tests/eval/benchmarks/data/agentic_mme_score_vectors.json.

Every section is recomputed by the reference's code from the inputs the vector file holds:
- `final_answer`: evaluation/eval_runs_search.py `check_final_answer_only` (its result, or the name of the
  exception it raises); `check_answer`: eval_runs_search.py `check_answer` likewise.
- `extraction`: the Atm runner's `_extract_answer_text`, the Gen runner's `parse_model_output` answer, and what
  the Gen runner keeps from a reply that ends the episode (see agentic_mme_extraction.py, which this script
  shares).
- `code_ops`: ast_ops.py `infer_tool_events`, each event as [op, line].
- `search_judge`: eval_runs_search.py `run_search_judge` with a scripted judge client that replies `reply` (None
  as a None message content, "RAISE" as a connection error) and records each request (`sent`, less the model).
- `visual_match`: eval_process on one visual-check checkpoint whose judge answers `answer`.
- `eval_process`: eval_process on the case in a run folder holding orig.png and tool_images/<`images`>, with the
  scripted judge client replying `judge_replies` in turn ("VERDICT: FAIL" once they run out) and a visual judge
  answering `visual_answers` by (question, image name) ("I cannot tell" otherwise); both record their requests.
- `aggregation`: eval_runs_search.py `main()` on a runs folder made from the runs (run_meta.json naming the task
  file, tool_use_list.json, model_answer.txt, orig.png, tool_images; `incomplete_run` ones hold only orig.png),
  scoring each run with a scripted client: its search replies are the run's `judge_replies`, its visual judge
  (run_visual_judge, unmodified) answers by the question alone; then evaluation/analyze_v.py
  `analyze_checkpoints` on main's output for `v_checkpoint_stats` and `missing`.

Fakes and why: judges are OpenAI clients (network); main's make_openai_client is replaced by one returning a
placeholder, and main's call of score_one_run goes through a wrapper that hands the real score_one_run the run's
scripted client. The reference lists tool_images with Path.iterdir, whose order the filesystem decides; the driver
makes that listing follow each case's `images` order, the order the tests replay, so the vectors do not depend on
the filesystem. All reference modules are imported or exec'd from the tree unmodified.

    .venv/bin/python scripts/reference/agentic_mme_score.py \\
        --source PATH/TO/Agentic-MME [--check]
"""

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from agentic_mme_extraction import answer_readers, eval_runs_search, general_final_answer

REPO_URL = "https://github.com/ChoS3nE11ven/Agentic-MME"
COMMIT = "5e5dfbdc7b40b53dea17d5ce754c14034acb185b"
REQUIREMENTS = ["pillow==13.0.0"]
VECTORS = "tests/eval/benchmarks/data/agentic_mme_score_vectors.json"
OUTPUTS = [VECTORS]
AGGREGATION_VISUAL_ANSWERS = {"Is the sign red?": "yes", "What number?": "42", "Is it a cat?": "no"}

_LISTING_ORDER: dict[str, list[str]] = {}  # folder -> names in the order its listing yields them
_iterdir = Path.iterdir


def _listing_in_case_order(folder: Path):
    entries = list(_iterdir(folder))
    order = _LISTING_ORDER.get(str(folder))
    return iter(entries if order is None else sorted(entries, key=lambda entry: order.index(entry.name)))


class ScriptedJudge:
    """An OpenAI client whose search judge replies from a script and whose visual judge (a request with a system
    message) answers by the question; it records the search requests."""

    def __init__(self, replies: list, visual_answers: dict | None = None, unknown: str = "unsure"):
        self.replies, self.visual_answers, self.unknown = list(replies), visual_answers or {}, unknown
        self.sent = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **request):
        messages = request["messages"]
        if messages[0]["role"] == "system":
            question = next(part["text"] for part in messages[1]["content"] if part["type"] == "text")
            reply = self.visual_answers.get(question, self.unknown)
        else:
            self.sent.append({key: value for key, value in request.items() if key != "model"})
            reply = self.replies.pop(0) if self.replies else "VERDICT: FAIL"
            if reply == "RAISE":
                raise RuntimeError("connection reset by peer")
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=reply))])


def record_outcome(case: dict, function, *args) -> None:
    """The case's `result`, or `raises`: the name of the exception the reference raises."""
    case.pop("result", None)
    case.pop("raises", None)
    try:
        case["result"] = function(*args)
    except Exception as error:
        case["raises"] = type(error).__name__


def make_run_dir(run_dir: Path, images: list[str]) -> None:
    """A run folder: a valid orig.png and tool_images holding `images`, listed in that order."""
    from PIL import Image

    (run_dir / "tool_images").mkdir(parents=True)
    Image.new("RGB", (4, 4), (200, 30, 30)).save(run_dir / "orig.png")
    for name in images:
        Image.new("RGB", (4, 4), (30, 200, 30)).save(run_dir / "tool_images" / name)
    _LISTING_ORDER[str(run_dir / "tool_images")] = list(images)


def processed(evaluation, case: dict, run_dir: Path) -> dict:
    make_run_dir(run_dir, case["images"])
    answers = {(question, image): answer for question, image, answer in case["visual_answers"]}
    client, visual_requests = ScriptedJudge(case["judge_replies"]), []

    def visual_judge(question, image_path):
        visual_requests.append([question, image_path.name])
        return answers.get((question, image_path.name), "I cannot tell")

    result = evaluation.eval_process(case["task_cfg"], run_dir, {}, case["model_answer"], case["tool_use_list"],
                                     visual_judge, client=client)
    return {"search_requests": client.sent, "visual_requests": visual_requests, "result": result}


def visual_match(evaluation, case: dict, run_dir: Path) -> bool:
    make_run_dir(run_dir, [])
    checkpoint = {"id": "v", "axis": "V", "visual_check": {"question": "q", "expected_answer": case["expected"]}}
    result = evaluation.eval_process({"process_evaluation": {"checkpoints": [checkpoint]}}, run_dir, {}, "", [],
                                     lambda question, image_path: case["answer"])
    return result["checkpoint_results"]["v"]["passed"]


def aggregated(tree: str, evaluation, aggregation: dict, scratch: Path) -> dict:
    """eval_runs_search.main() over the runs, then analyze_v.analyze_checkpoints on its output."""
    runs_dir, tasks_dir = scratch / "runs" / "atomic" / "model", scratch / "tasks"
    # main() fails when given --out_json (it reads `parts`, set only without it): it writes runs/scores/ under the
    # working folder, named after the last two parts of the runs folder
    out_json = scratch / "runs" / "scores" / "atomic_model_scored.json"
    tasks_dir.mkdir(parents=True)
    clients = {}
    for run in aggregation["runs"]:
        run_dir, task_file = runs_dir / run["run_id"], tasks_dir / f"{run['run_id']}.json"
        task_file.write_text(json.dumps(run["task_cfg"]), encoding="utf-8")
        make_run_dir(run_dir, run.get("images") or [])
        if run.get("incomplete_run"):
            continue
        (run_dir / "run_meta.json").write_text(json.dumps({"task_file": str(task_file),
                                                           "effective_tool_calls": run["effective_tool_calls"]}))
        (run_dir / "tool_use_list.json").write_text(json.dumps(run["tool_use_list"]), encoding="utf-8")
        (run_dir / "model_answer.txt").write_text(run["model_answer"], encoding="utf-8")
        clients[run["run_id"]] = ScriptedJudge(run["judge_replies"], AGGREGATION_VISUAL_ANSWERS)

    score_one_run = evaluation.score_one_run
    evaluation.score_one_run = lambda client, judge_model, run_dir: score_one_run(
        clients.get(run_dir.name), judge_model, run_dir)
    evaluation.make_openai_client = lambda **settings: None
    sys.argv = ["eval_runs_search.py", "--runs_dir", str(runs_dir)]
    os.chdir(scratch)
    evaluation.main()
    scored = json.loads(out_json.read_text(encoding="utf-8"))

    spec = importlib.util.spec_from_file_location("analyze_v", Path(tree) / "evaluation/analyze_v.py")
    analyze_v = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(analyze_v)
    stats, missing = analyze_v.analyze_checkpoints(out_json, tasks_dir)

    evals = {Path(result["run_dir"]).name: result["eval"] for result in scored["results"]}
    for run in aggregation["runs"]:
        run["eval"] = evals[run["run_id"]]
    return {"runs": aggregation["runs"], "overall_scores": scored["overall_scores"],
            "level_scores": scored["level_scores"], "overthink_analysis": scored["overthink_analysis"],
            "v_checkpoint_stats": stats, "missing": missing}


def drive(tree: str, out_dir: str) -> None:
    import PIL

    sys.path.insert(0, tree)
    Path.iterdir = _listing_in_case_order
    extract_answer_text, parse_model_output = answer_readers(tree)
    evaluation = eval_runs_search(tree)
    import ast_ops  # from the tree, as eval_runs_search's verifiers import it

    vectors = json.loads((common.ROOT / VECTORS).read_text(encoding="utf-8"))
    for case in vectors["final_answer"]:
        record_outcome(case, evaluation.check_final_answer_only, case["task_cfg"], case["model_answer"])
    for case in vectors["extraction"]:
        case.update(atomic=extract_answer_text(case["text"]), general=parse_model_output(case["text"])[2],
                    general_final=general_final_answer(parse_model_output, case["text"]))
    for case in vectors["check_answer"]:
        record_outcome(case, evaluation.check_answer, case["checkpoint"], case["model_answer"])
    for case in vectors["code_ops"]:
        case["ops"] = [[event["arguments"]["op"], event["arguments"]["line"]]
                       for event in ast_ops.infer_tool_events(case["code"])]
    for case in vectors["search_judge"]:
        client = ScriptedJudge([case["reply"]])
        case["result"] = evaluation.run_search_judge(client, "gpt-4o-mini", case["description"], case["queries"],
                                                     case["results"])
        case["sent"] = client.sent
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        for number, case in enumerate(vectors["visual_match"]):
            case["passed"] = visual_match(evaluation, case, scratch / "visual_match" / str(number))
        for number, case in enumerate(vectors["eval_process"]):
            case.update(processed(evaluation, case, scratch / "eval_process" / str(number)))
        vectors["aggregation"] = aggregated(tree, evaluation, vectors["aggregation"], scratch)

    header = vectors["header"]
    header["python"], header["packages"] = sys.version.split()[0], {"pillow": PIL.__version__}
    header["made_by"] = "scripts/reference/agentic_mme_score.py importing the reference modules (the runners' " \
                        "functions exec'd from their source); judges are scripted fake OpenAI clients that record " \
                        "the requests sent"
    vectors.pop("generator", None)
    vectors = {"generator": common.header(__file__, REPO_URL, COMMIT, ["pillow"]), **vectors}
    common.write_json(out_dir, VECTORS, vectors)


if __name__ == "__main__":
    import common  # before the reference tree joins sys.path

    if sys.argv[1:2] == ["--driver"]:
        drive(sys.argv[2], sys.argv[3])
    else:
        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)
