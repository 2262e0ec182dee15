"""Agentic-MME's answer reading, final-answer check and checkpoint walk:
tests/eval/benchmarks/data/agentic_mme_reference.json.

- `extraction`: each reply read as the Atm runner stores its answer (atomic/run_atomic_tools_openai.py
  `_extract_answer_text`) and as the Gen runner parses it (general/run_general_script_openai.py
  `parse_model_output`: its code and its answer; `gen_final_answer` is what the Gen runner keeps from a reply that
  ends the episode: the parsed answer, else the whole reply, stripped).
- `final_answer`: evaluation/eval_runs_search.py `check_final_answer_only` on the golden answer and the answer.
- `process`: eval_runs_search.py `eval_process` (with verifiers.py) on the checkpoints and tool calls, in a run
  folder holding `transformed` empty files tool_images/transformed_image_<k>.png, without a judge client
  (client=None), so S checkpoints on google_search fail; no case has a visual check, so the visual judge is never
  called.

The runners import network clients and the image toolbox at module level, so their functions are taken from their
source as it stands: the driver execs the module-level regular expressions and the named functions, unmodified,
in a namespace of the standard-library imports they use. eval_runs_search.py is imported as it is (its `openai`
import fails in the scratch venv, which common_utils.py tolerates; no client is made).

    .venv/bin/python scripts/reference/agentic_mme_extraction.py \\
        --source PATH/TO/Agentic-MME [--check]
"""

import ast
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

REPO_URL = "https://github.com/ChoS3nE11ven/Agentic-MME"
COMMIT = "5e5dfbdc7b40b53dea17d5ce754c14034acb185b"
REQUIREMENTS = ["pillow==11.3.0"]
VECTORS = "tests/eval/benchmarks/data/agentic_mme_reference.json"
OUTPUTS = [VECTORS]
ATOMIC_RUNNER = "atomic/run_atomic_tools_openai.py"
GENERAL_RUNNER = "general/run_general_script_openai.py"


def runner_functions(tree: str, path: str, names: set[str]) -> dict:
    """The named top-level functions and regular expressions of a runner, exec'd from its source as it stands
    (the runner itself cannot be imported: it imports network clients and the image toolbox)."""
    source = (Path(tree) / path).read_text(encoding="utf-8")
    namespace = {}
    exec("import json, re\nfrom typing import Any, Dict, List, Optional, Tuple", namespace)
    for node in ast.parse(source).body:
        wanted = (isinstance(node, ast.FunctionDef) and node.name in names) or \
            (isinstance(node, ast.Assign) and ast.unparse(node.value).startswith("re.compile("))
        if wanted:
            exec(compile(ast.Module([node], []), str(Path(tree) / path), "exec"), namespace)
    missing = names - namespace.keys()
    if missing:
        raise LookupError(f"{path} has no {sorted(missing)}")
    return namespace


def answer_readers(tree: str) -> tuple:
    """The Atm runner's `_extract_answer_text` and the Gen runner's `parse_model_output`."""
    atomic = runner_functions(tree, ATOMIC_RUNNER, {"_extract_answer_text"})
    general = runner_functions(tree, GENERAL_RUNNER, {"parse_model_output"})
    return atomic["_extract_answer_text"], general["parse_model_output"]


def general_final_answer(parse_model_output, reply: str | None) -> str:
    """What the Gen runner keeps from a reply that ends the episode (its last request for an answer); a message
    with no content is read as "", as the runner reads it."""
    reply = reply or ""
    _, _, answer, _, _ = parse_model_output(reply)
    return answer.strip() if answer.strip() else reply.strip()


def eval_runs_search(tree: str):
    """evaluation/eval_runs_search.py imported as it is (its imports need the tree on sys.path)."""
    spec = importlib.util.spec_from_file_location("eval_runs_search", Path(tree) / "evaluation/eval_runs_search.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def no_visual_judge(question, image_path):
    raise AssertionError("no case has a visual check")


def walk(evaluation, case: dict, scratch: Path) -> dict:
    run_dir = Path(tempfile.mkdtemp(dir=scratch))
    (run_dir / "tool_images").mkdir()
    for k in range(1, case["transformed"] + 1):
        (run_dir / "tool_images" / f"transformed_image_{k}.png").touch()
    task_cfg = {"process_evaluation": {"checkpoints": case["checkpoints"]}}
    return evaluation.eval_process(task_cfg, run_dir, {}, "", case["tool_use_list"], no_visual_judge, client=None)


def drive(tree: str, out_dir: str) -> None:
    import PIL

    sys.path.insert(0, tree)
    extract_answer_text, parse_model_output = answer_readers(tree)
    evaluation = eval_runs_search(tree)
    vectors = json.loads((common.ROOT / VECTORS).read_text(encoding="utf-8"))

    for case in vectors["extraction"]:
        reply = case["reply"]
        _, code, answer, _, _ = parse_model_output(reply)
        case.update(atm_answer=extract_answer_text(reply), gen_code=code, gen_tag_answer=answer,
                    gen_final_answer=general_final_answer(parse_model_output, reply))
    for case in vectors["final_answer"]:
        case["correct"] = evaluation.check_final_answer_only({"golden_answer": case["golden_answer"]},
                                                            case["answer"])["correct"]
    with tempfile.TemporaryDirectory() as scratch:
        for case in vectors["process"]:
            walked = walk(evaluation, case, Path(scratch))
            case["results"] = {cid: {"passed": result.get("passed"), "hit_index": result.get("hit_index")}
                               for cid, result in walked["checkpoint_results"].items()}
            case["S"], case["V"] = walked["scores"]["S"], walked["scores"]["V"]

    vectors["reference"]["versions"] = {"python": sys.version.split()[0], "pillow": PIL.__version__}
    vectors["reference"]["generator"] = "scripts/reference/agentic_mme_extraction.py; S checkpoints on " \
                                        "google_search fail without a judge client"
    vectors.pop("generator", None)
    vectors = {"generator": common.header(__file__, REPO_URL, COMMIT, ["pillow"]), **vectors}
    common.write_json(out_dir, VECTORS, vectors)


if __name__ == "__main__":
    import common  # before the reference tree joins sys.path

    if sys.argv[1:2] == ["--driver"]:
        drive(sys.argv[2], sys.argv[3])
    else:
        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)
