"""Code-as-a-tool interfaces: how each published harness hands images to model-written code, where the
code must save what it makes, and how the result is reported back. The code itself always runs in
`runtime.sandbox`; these differ only in conventions.

- `thyme`: `<code>` blocks; the image path and size are given in the question; the output is what the
  code prints (or its error) plus any image it saves to the output folder.
- `pyvision`: the same conventions, reported as PyVision's `<interpreter>` turn (the protocol wraps it).
- `agentic_mme_gen`: Agentic-MME's Gen mode: `ORIGINAL_IMAGE_PATH` and `PROCESSED_IMAGE_SAVE_PATH` in the
  environment, each cell a fresh script; every image it saves is reported (`[Code output]`/`[Code error]`, then
  `[New images: Image N: transformed_image_N.png, ...]`; the suite shows each image with its `[Image N: name]`).
- `python_image_processing`: VisualToolBench's function tool (schema word for word, with the image list
  and save path filled in); the inputs are in the working directory; the code runs as the reference's
  `exec` runs it (restricted builtins and globals, `vtb_cell`) and the tool message is `str()` of
  `{"ok", "stdout", "stderr", "output_path", "output_paths"}` as its harness sends it (ok is "true"/"false").
  The `visualtoolbench` suite runs the same cell with the benchmark's per-turn folders and image paths.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from runtime.protocols import CODE_TOOL
from tools.toolset import Reply

ANY_IMAGE = re.compile(r"(?i).+\.(png|jpe?g|webp|bmp|tiff?)$")
TRANSFORMED = re.compile(r"(?i)^transformed_image_(\d+)\.png$")
AMME_OUTPUT_CHARS = 2000  # Agentic-MME's Gen runner shows this much of a cell's output


@dataclass(frozen=True)
class CodeContext:
    """Where an episode's code finds its inputs and saves its outputs (absolute paths)."""

    inputs: tuple[Path, ...]  # the task's images as files, in workspace order
    work_dir: Path
    output_dir: Path
    sizes: tuple[tuple[int, int], ...]  # (width, height) of each input


@dataclass(frozen=True)
class Saved:
    path: Path
    index: int  # the image's index in the episode workspace


@dataclass(frozen=True)
class CodeTool:
    name: str  # the call name: "python" for <code> blocks, or a function tool's name
    describe: Callable[[object, list[Saved]], str]  # (CellResult, saved images) -> observation text
    collect: re.Pattern = ANY_IMAGE  # which new files in the output folder are the tool's images
    schema: Callable[[CodeContext], dict] | None = None  # for function tools: the schema the model sees
    env: Callable[[CodeContext], dict] = lambda context: {}
    question: Callable[[str, CodeContext], str] = lambda question, context: question
    inputs_in_work_dir: bool = False  # the harness reads inputs by bare file name from the working directory
    prelude: str | None = None
    prepare: Callable[[str], "str | Reply"] | None = None  # the code to run, or the harness's reply without running


def _printed(result, saved: list[Saved]) -> str:
    """What the code printed, then its error: the text a notebook cell shows."""
    parts = [result.stdout.rstrip("\n")] if result.stdout.strip() else []
    if result.error:
        parts.append(result.error.rstrip("\n"))
    if result.restarted and not result.timed_out:
        parts.append("The Python process crashed; variables from earlier cells are lost.")
    return "\n".join(parts)


def _thyme_question(question: str, context: CodeContext) -> str:
    width, height = context.sizes[0]
    return f'{question}\n\n### User Image Path:** "{context.inputs[0]}"\n### User Image Size:** "{width}x{height}"'


def _save_path(context: CodeContext) -> dict:
    return {"PROCESSED_IMAGE_SAVE_PATH": str(context.output_dir)}


def _amme_describe(result, saved: list[Saved]) -> str:
    """The Gen runner's report of a cell: the first 2000 characters of its stdout (or of its error), then the new
    images by number (`transformed_image_N.png` is Image N, any other image its workspace index)."""
    if result.ok:
        out = result.stdout[:AMME_OUTPUT_CHARS]
        parts = [f"[Code output]\n{out}" if out.strip() else "[Code executed successfully, no output]"]
    else:
        error = "\n".join(t.rstrip("\n") for t in (result.stderr, result.error) if t and t.strip())
        parts = [f"[Code error]\n{error[:AMME_OUTPUT_CHARS]}"]
    if saved:
        listed = [f"Image {_amme_number(s)}: {s.path.name}" for s in saved]
        parts.append(f"[New images: {', '.join(listed)}]")
    return "\n".join(parts)


def _amme_number(saved: Saved) -> int:
    numbered = TRANSFORMED.match(saved.path.name)
    return int(numbered.group(1)) if numbered else saved.index


def _amme_prepare(code: str) -> str:
    """The Gen runner runs each cell as a fresh script (nothing carries over from earlier cells), with
    LOCAL_INPUT_IMAGE_PATH at the latest image: transformed_image_N.png with the largest N, else the newest image
    file, else the original."""
    return (
        "import os as _os\nimport re as _re\n"
        "_out = _os.environ['PROCESSED_IMAGE_SAVE_PATH']\n"
        "_files = [f for f in _os.listdir(_out) if _os.path.isfile(_os.path.join(_out, f))]\n"
        "_numbered = sorted((int(_re.match(r'(?i)^transformed_image_(\\d+)\\.png$', f).group(1)), f) for f in _files "
        "if _re.match(r'(?i)^transformed_image_(\\d+)\\.png$', f))\n"
        "_images = sorted((f for f in _files if _os.path.splitext(f)[1].lower() in "
        "('.png', '.jpg', '.jpeg', '.bmp', '.gif', '.tiff', '.tif')), "
        "key=lambda f: _os.stat(_os.path.join(_out, f)).st_mtime)\n"
        "_latest = _numbered[-1][1] if _numbered else (_images[-1] if _images else None)\n"
        "_os.environ['LOCAL_INPUT_IMAGE_PATH'] = _os.path.join(_out, _latest) if _latest else "
        "_os.environ['ORIGINAL_IMAGE_PATH']\n"
        f"exec(compile({code!r}, 'model_code.py', 'exec'), {{'__name__': '__main__'}})\n"
    )


# VisualToolBench's python tools (scripts/tools.py, VisionTools.python_image_processing and python_interpreter) run
# the model's code with exec() in fresh restricted globals: 17 builtins, `Image` a wrapper whose `open` fails unless
# the code imports PIL itself, separate globals and locals (so a function cannot see the cell's other names), stdout
# and stderr captured, an exception's traceback written to stderr. The cell below does the same inside our sandbox
# and prints its result as one JSON line after VTB_MARK; frames of this harness code are left out of tracebacks
# (the reference's first frame is its own tools.py line).
VTB_MARK = "@@visualtoolbench-result@@ "
VTB_OUTPUT_CHARS = 50_000  # stdout and stderr each; the reference keeps everything (our sandbox caps a cell's output)
VTB_BUILTINS = ("print", "range", "len", "min", "max", "abs", "float", "int", "str", "list", "dict", "set", "tuple",
                "enumerate", "zip", "map", "filter", "__import__")
_VTB_CELL = r"""
import builtins, contextlib, importlib, io, json, re, sys, traceback
from pathlib import Path
from PIL import Image as PILImage

def run(code, save, interpreter):
    pattern = re.compile(r"^transformed_image_(\d+)\.png$", re.IGNORECASE)

    class SafeImage:
        def __init__(self, *args, **kwargs):
            self._image = PILImage.Image(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self._image, name)

        def show(self, *args, **kwargs):
            pass

        @staticmethod
        def open(*args, **kwargs):
            image = PILImage.Image.open(*args, **kwargs)
            safe = SafeImage()
            safe._image = image
            return safe

    def optional(module):
        try:
            return importlib.import_module(module)
        except ImportError:
            return None

    present = {}
    pyplot = optional("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.switch_backend("Agg")

        class SafePyplot:
            def __getattr__(self, name):
                return getattr(pyplot, name)

            def show(self, *args, **kwargs):
                pass

        present["plt"] = SafePyplot()
    names = {"__builtins__": {name: getattr(builtins, name) for name in BUILTINS}, "Image": SafeImage,
             "np": importlib.import_module("numpy")}
    if interpreter:
        pandas, stats, bs4, tabulate = (optional(m) for m in ("pandas", "scipy.stats", "bs4", "tabulate"))
        extra = {"pandas": pandas, "pd": pandas, "requests": optional("requests"), "scipy": stats,
                 "sklearn": optional("sklearn"), "simpy": optional("simpy"),
                 "tabulate": tabulate and tabulate.tabulate, "BeautifulSoup": bs4 and bs4.BeautifulSoup}
        names.update({k: v for k, v in extra.items() if v is not None})
    else:
        save = Path(save)
        save.mkdir(parents=True, exist_ok=True)
        names.update(cv2=importlib.import_module("cv2"), PROCESSED_IMAGE_SAVE_PATH=save)
    names.update(present)

    def listed():
        return {p for p in save.iterdir() if p.is_file() and pattern.match(p.name)}

    shown, out, err, ok = sys.stdout, io.StringIO(), io.StringIO(), True
    before = set() if interpreter else listed()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(code, "<llm_code>", "exec"), names, {})
        except Exception:
            ok = False
            kind, value, trace = sys.exc_info()
            frames = [f for f in traceback.extract_tb(trace) if f.filename != "<visualtoolbench>"]
            sys.stderr.write("Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
                             + "".join(traceback.format_exception_only(kind, value)))

    def kept(text):
        return text if len(text) <= LIMIT else text[:LIMIT] + f"\n[... {len(text) - LIMIT} characters dropped]"

    result = {"stdout": kept(out.getvalue()), "stderr": kept(err.getvalue())}
    if not interpreter:
        result = {"ok": "true" if ok else "false", **result, "new": sorted(str(p) for p in listed() - before)}
    shown.write(MARK + json.dumps(result) + "\n")
    if not ok:  # the cell fails too, so the sandbox's result says the call failed
        raise RuntimeError("the code raised an exception; the tool's stderr has its traceback")
"""


def vtb_cell(code, save_dir: str | None, interpreter: bool = False) -> str:
    """The sandbox cell that runs `code` (as the model sent it: a non-string fails in compile, as in the
    reference) the way VisualToolBench's tool does; `save_dir` None: $PROCESSED_IMAGE_SAVE_PATH."""
    save = repr(save_dir) if save_dir is not None or interpreter else \
        "__import__('os').environ['PROCESSED_IMAGE_SAVE_PATH']"
    harness = (f"BUILTINS = {VTB_BUILTINS!r}\nLIMIT = {VTB_OUTPUT_CHARS}\nMARK = {VTB_MARK!r}\n" + _VTB_CELL
               + f"run({code!r}, {save}, {interpreter!r})\n")
    return f"exec(compile({harness!r}, '<visualtoolbench>', 'exec'), {{'__name__': '__visualtoolbench__'}})\n"


def vtb_result(result, interpreter: bool = False) -> dict:
    """The tool's result dict from a cell run by `vtb_cell` (`new`: the images saved as new
    transformed_image_N.png files in the save folder, for python_image_processing). A cell that did not finish
    (timeout, crash) has no result line: its output and error stand in, and it failed."""
    line = next((line for line in reversed(result.stdout.split("\n")) if line.startswith(VTB_MARK)), None)
    if line is not None:  # the code can print a line of its own that starts with the mark: it is only data
        try:
            found = json.loads(line[len(VTB_MARK):])
        except (ValueError, RecursionError):
            found = None
        fields = ("stdout", "stderr") if interpreter else ("ok", "stdout", "stderr")
        new = None if interpreter or not isinstance(found, dict) else found.get("new")
        if (isinstance(found, dict) and set(found) == {*fields, *(() if interpreter else ("new",))}
                and all(isinstance(found[name], str) for name in fields)
                and (interpreter or (isinstance(new, list) and all(isinstance(p, str) for p in new)))):
            return found
    stderr = "\n".join(t.rstrip("\n") for t in (result.stderr, result.error) if t and t.strip())
    if interpreter:
        return {"stdout": result.stdout, "stderr": stderr}
    return {"ok": "false", "stdout": result.stdout, "stderr": stderr, "new": []}


def vtb_observation(result: dict, paths: list[str]) -> dict:
    """python_image_processing's return value, with `paths` the saved images as the model is told of them."""
    return {"ok": result["ok"], "stdout": result["stdout"], "stderr": result["stderr"],
            "output_path": paths[0] if paths else "", "output_paths": list(paths)}


def _vtb_describe(result, saved: list[Saved]) -> str:
    """The tool message the reference sends: str() of the tool's dict."""
    return str(vtb_observation(vtb_result(result), [str(s.path) for s in saved]))


def _vtb_schema(context: CodeContext) -> dict:
    image_list = [path.name for path in context.inputs]
    save = context.output_dir
    return {
        "type": "function",
        "function": {
            "name": "python_image_processing",
            "description": (
                "Generate arbitrary Python code for image manipulation and save the transformed image as PNG.\n"
                f"• Read one source image (your choice) from the working-directory file list: {image_list}.\n"
                "• Perform any image processing with PIL, NumPy, or OpenCV. "
                "You cannot use matplotlib to show the image.\n"
                f"• You **must save** the transformed image as PNG to {save} using the filename pattern "
                "\"transformed_image_i.png\", where the counter **i starts at 0 and increments on each invocation** "
                "so files are never overwritten. Example:\n"
                f"    img.save(f\"{save}/transformed_image_{{i}}.png\", \"PNG\")\n"
            ),
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "Python code to run.", "minLength": 1,
                                        "maxLength": 5000}},
                "required": ["code"],
            },
        },
    }


CODE_TOOLS: dict[str, CodeTool] = {
    "thyme": CodeTool(CODE_TOOL, _printed, question=_thyme_question, env=_save_path),
    "pyvision": CodeTool(CODE_TOOL, _printed, question=_thyme_question, env=_save_path),
    "agentic_mme_gen": CodeTool(
        CODE_TOOL, _amme_describe, prepare=_amme_prepare,
        env=lambda c: {"ORIGINAL_IMAGE_PATH": str(c.inputs[0]), "PROCESSED_IMAGE_SAVE_PATH": str(c.output_dir)}),
    "python_image_processing": CodeTool(
        "python_image_processing", _vtb_describe, collect=TRANSFORMED, schema=_vtb_schema, inputs_in_work_dir=True,
        prepare=lambda code: vtb_cell(code, None), env=lambda c: {"PROCESSED_IMAGE_SAVE_PATH": str(c.output_dir)}),
}


def get_code_tool(name: str) -> CodeTool:
    try:
        return CODE_TOOLS[name]
    except KeyError:
        raise ValueError(f"unknown code tool {name!r}; available: {', '.join(CODE_TOOLS)}") from None
