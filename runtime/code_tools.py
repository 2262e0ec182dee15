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
  and save path filled in); the inputs are in the working directory; it returns
  `{"ok", "stdout", "stderr", "output_path", "output_paths"}` as its harness does (ok is "true"/"false").
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
        "('.png', '.jpg', '.jpeg', '.bmp', '.gif', '.tiff', '.tif')), key=lambda f: _os.stat(_os.path.join(_out, f)).st_mtime)\n"
        "_latest = _numbered[-1][1] if _numbered else (_images[-1] if _images else None)\n"
        "_os.environ['LOCAL_INPUT_IMAGE_PATH'] = _os.path.join(_out, _latest) if _latest else "
        "_os.environ['ORIGINAL_IMAGE_PATH']\n"
        f"exec(compile({code!r}, 'model_code.py', 'exec'), {{'__name__': '__main__'}})\n"
    )


def _vtb_describe(result, saved: list[Saved]) -> str:
    paths = [str(s.path) for s in saved]
    stderr = "\n".join(t.rstrip("\n") for t in (result.stderr, result.error) if t and t.strip())
    return json.dumps({"ok": "true" if result.ok else "false", "stdout": result.stdout, "stderr": stderr,
                       "output_path": paths[0] if paths else "", "output_paths": paths}, ensure_ascii=False)


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
                "• Perform any image processing with PIL, NumPy, or OpenCV. You cannot use matplotlib to show the image.\n"
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
        prelude=("import os\nfrom pathlib import Path\nimport numpy as np\nimport cv2\nfrom PIL import Image\n"
                 "PROCESSED_IMAGE_SAVE_PATH = Path(os.environ['PROCESSED_IMAGE_SAVE_PATH'])\n"),
        env=lambda c: {"PROCESSED_IMAGE_SAVE_PATH": str(c.output_dir)}),
}


def get_code_tool(name: str) -> CodeTool:
    try:
        return CODE_TOOLS[name]
    except KeyError:
        raise ValueError(f"unknown code tool {name!r}; available: {', '.join(CODE_TOOLS)}") from None
