"""VisualToolBench tool reference vectors: tests/eval/benchmarks/data/visualtoolbench_tool_vectors.json.

What the benchmark's tools (`scripts/tools.py`) answer: the calculator on expressions, the two python tools on code
(stdout, stderr, the images saved), the replies to wrong arguments and to web calls without API keys.

How the reference runs. Every call goes through the benchmark's own agent loop, `FunC_with_tools` in
`scripts/model_inference.py`, which maps the tool name to `VisionTools`, calls it with the JSON arguments and
answers a failing call with `{"error": str(e)}`; `scripts/tools.py`, `utils.py`, `prompt.py` and
`model_inference.py` are imported unchanged from the pinned commit. Replaced, because the tools never reach them
here: `litellm` by a scripted model that asks for the one tool call and then stops (the `reply` is the content of
the tool message the loop sends back), and `simpy`, `tabulate`, `yfinance`, `sklearn` and `dotenv` by empty modules
(only handed to the model's code or, for `load_dotenv`, run with no .env around). SERP_API_KEY and
OPENWEATHER_API_KEY are removed from the environment, so the web tools answer without the network.

The source image (the manifest's `source_image`) is saved as PNG; `SRC` in a case's code stands for its path. Each
python case gets a fresh save folder (`preexisting`: one holding `transformed_image_0.png` already). In the
results the paths are written `{save_dir}` and `{source}`, and the tree's `scripts/tools.py` in tracebacks as
`/tmp/vtbref/scripts/tools.py`, where the first vectors were made. `output_paths` are sorted and `output_path` is
the first of them: the tool lists the new files in set order, which changes with the hash seed. `images` are the
new files read back as RGB.

The cases are read from the committed file; every result, reply and image is recomputed.

    .venv/bin/python scripts/reference/visualtoolbench_tools.py --source PATH/TO/VisualToolBench
    .venv/bin/python scripts/reference/visualtoolbench_tools.py --source ... --check
"""

import contextlib
import io
import json
import os
import sys
import tempfile
import types
from pathlib import Path

import common

REPO_URL = "https://github.com/xi1ngang/VisualToolBench"
COMMIT = "d4f200a0a44790349667bed09334ac88623074b2"
LIBRARIES = {"numpy": "2.4.6", "pillow": "13.0.0", "opencv-python-headless": "5.0.0.93", "matplotlib": "3.11.2",
             "pandas": "3.1.1", "requests": "2.34.2", "beautifulsoup4": "4.15.0", "scipy": "1.17.1"}
REQUIREMENTS = [f"{name}=={pinned}" for name, pinned in LIBRARIES.items()]
VECTORS = "tests/eval/benchmarks/data/visualtoolbench_tool_vectors.json"
OUTPUTS = [VECTORS]
FIRST_TREE = "/tmp/vtbref"


class ScriptedModel:
    """Stands in for `litellm.completion`: first asks for one tool call, then answers without any."""

    def __init__(self):
        self.call = None
        self.messages = None

    def completion(self, messages, **_):
        if self.call is not None:
            function = types.SimpleNamespace(name=self.call[0], arguments=json.dumps(self.call[1]))
            self.call = None
            return self._response([types.SimpleNamespace(id="call_0", function=function)])
        self.messages = messages
        return self._response(None)

    @staticmethod
    def _response(tool_calls):
        message = types.SimpleNamespace(content="done" if tool_calls is None else "", tool_calls=tool_calls)
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])


def install_stubs(model: ScriptedModel) -> None:
    for name in ("simpy", "tabulate", "yfinance", "sklearn", "dotenv", "litellm"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["tabulate"].tabulate = lambda *args, **kwargs: ""
    sys.modules["dotenv"].load_dotenv = lambda *args, **kwargs: False
    sys.modules["litellm"].completion = model.completion


def call_tool(model_inference, model: ScriptedModel, tool: str, arguments: dict, save_dir: Path):
    """The observation the agent loop records for one call, and the reply it sends back to the model."""
    model.call, model.messages = (tool, arguments), None
    with contextlib.redirect_stdout(io.StringIO()):
        _, _, tool_uses, _ = model_inference.FunC_with_tools(
            "reference", "the task", [], max_tool_calls=2, tool_observation_save_path=str(save_dir))
    reply = next(message["content"] for message in model.messages
                 if isinstance(message, dict) and message.get("role") == "tool")
    return tool_uses[0]["observation"], reply


def python_case(model_inference, model, case: dict, tool: str, work: Path, source: Path, tree: str) -> dict:
    from PIL import Image
    import numpy as np

    save_dir = Path(tempfile.mkdtemp(dir=work))
    if case.get("preexisting"):
        Image.open(source).save(save_dir / "transformed_image_0.png")
    code = case["code"].replace("SRC", repr(str(source))) if isinstance(case["code"], str) else case["code"]
    result, _ = call_tool(model_inference, model, tool, {"code": code}, save_dir)
    if tool == "python_image_processing":
        result["output_paths"] = sorted(result["output_paths"])
        result["output_path"] = result["output_paths"][0] if result["output_paths"] else ""
    images = {Path(path).name: np.asarray(Image.open(path).convert("RGB")).tolist()
              for path in result.get("output_paths", [])}
    text = (json.dumps(result).replace(str(save_dir), "{save_dir}").replace(str(source), "{source}")
            .replace(str(Path(tree, "scripts")), FIRST_TREE + "/scripts"))
    made = {"case": case["case"], "code": case["code"], "result": json.loads(text)}
    if tool == "python_image_processing":
        made |= {"images": images, "preexisting": case["preexisting"]}
    return made


def drive(tree: str, out_dir: str) -> None:
    committed = json.loads((common.ROOT / VECTORS).read_text(encoding="utf-8"))
    model = ScriptedModel()
    install_stubs(model)
    for key in ("SERP_API_KEY", "OPENWEATHER_API_KEY"):
        os.environ.pop(key, None)
    sys.path.insert(0, str(Path(tree, "scripts")))
    import model_inference
    from PIL import Image
    import numpy as np

    made = dict(committed)
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        source = work / "image_0.png"
        Image.fromarray(np.array(committed["manifest"]["source_image"], np.uint8)).save(source)
        made["calculator"] = []
        for case in committed["calculator"]:
            result, reply = call_tool(model_inference, model, "calculator", {"expression": case["expression"]}, work)
            made["calculator"].append({"expression": case["expression"], "result": result, "reply": reply})
        for tool in ("python_image_processing", "python_interpreter"):
            made[tool] = [python_case(model_inference, model, case, tool, work, source, tree)
                          for case in committed[tool]]
        made["bad_arguments"] = []
        for case in committed["bad_arguments"]:
            result, _ = call_tool(model_inference, model, case["tool"], case["arguments"], work)
            made["bad_arguments"].append({"tool": case["tool"], "arguments": case["arguments"], "result": result})
        made["web_without_keys"] = []
        for case in committed["web_without_keys"]:
            result, reply = call_tool(model_inference, model, case["tool"], case["arguments"], work)
            made["web_without_keys"].append({"tool": case["tool"], "arguments": case["arguments"],
                                             "result": result, "reply": reply})

    environment = common.versions(list(LIBRARIES))
    made["manifest"] = {
        **committed["manifest"], "python": environment.pop("python"), "libraries": environment,
        "made_by": f"scripts/reference/{Path(__file__).name}, importing the reference's scripts/tools.py unchanged "
                   "and calling it through scripts/model_inference.py; paths replaced by {save_dir} and {source}; "
                   "output_paths sorted"}
    common.write_json(out_dir, VECTORS, {"generator": common.header(__file__, REPO_URL, COMMIT, list(LIBRARIES)),
                                         **made})


if __name__ == "__main__":
    if sys.argv[1:2] == ["--driver"]:
        drive(*sys.argv[2:4])
    else:
        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)
