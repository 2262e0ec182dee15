"""`agentic_mme`: Agentic-MME's 14 atomic image tools (Atm mode), reproducing the benchmark's own code
(github.com/ChoS3nE11ven/Agentic-MME at 5e5dfbd: atomic_toolbox.py, and in atomic/run_atomic_tools_openai.py
`dispatch_image_tool` and run_one's handling of an image tool call).

Reproduced: the published schemas word for word (`schemas.json`, from `build_atomic_tools_schema`); the
runner's argument parsing (`json.loads(arguments or "{}")`, anything unreadable becomes `{}` and the call runs
on defaults); dispatch's conversions and every tool's PIL / OpenCV calls (`kernels.py`); the image list
(index 0 the task's image, each image a call saves appends one; an index outside it is the reference's
"Invalid image_index ..." error); images read back as the runner re-reads its PNG files, as RGB (a workspace
holds exactly what the PNG decodes to, so nothing is lost between calls); and the tool message: on success
`json.dumps(result, ensure_ascii=False)` with the reference's fields (`new_image_index`, `output_path`,
`bbox_absolute`, `size`, `label`, ...), on any exception `json.dumps({"ok": "false", "error": str(e)})`.
Calls run on CPU one at a time. Checked call by call against the reference's own outputs in
tests/tools/test_agentic_mme_reference.py.

How images and paths map onto an episode (`ImageFiles`): image 0 is `files.original`, image i the file
`image_<i>.png` beside it (the layout of the episode's scratch folder, runtime/toolbox.py). The reference names
each output `<run_dir>/tool_images/transformed_image_<N>.png`; here the run directory is the folder of
`files.original` (the episode's scratch folder) and `output_path` names that file, which is not written (the
image is the workspace's image_<i>.png; Atm-mode tools address images by index, never by path).

Where we differ, and why:
- OpenCV: requirements.txt does not list it and atomic_toolbox.py imports it optionally; without it the
  reference's denoise is a median filter and every edge method is PIL's FIND_EDGES. We reproduce the setup
  the published `canny` / `sobel` methods assume, with OpenCV installed.
- `transformed_image_<N>`: N is the new image's index, the reference's number for a task with one image.
  The reference counts its own files instead: a task with k images numbers its first output 1, not k, and a
  call that fails while saving (a zero-area crop without zoom) still uses up a number. A tool here sees only
  the workspace, so those paths differ; `new_image_index`, the pixels and every other field do not.
- A resize whose width and height are valid but whose `scale` float() rejects saves the image and then fails
  (the reply is built after the save). The reference keeps that image in its list without showing it; here it
  is in the workspace too (same indices afterwards), and the episode shows it beside the error.
- Size: an episode refuses an image over its `max_pixels` (default 8192 x 8192) when the tool adds it, and
  the call answers with that error; the reference has no limit of its own (a resize that large fails there
  only when memory runs out).
- Task images: the runner copies the dataset file as PNG and the tools convert it to RGB (alpha and the
  palette's transparency dropped, not composited; L replicated). `read_image` does exactly that; a file PNG
  cannot hold (CMYK, ...) stops the reference's run before any tool and is an error here.
- Unknown tool names are answered by the runner's search branch ("Error: Unknown tool: ..." or "Error: Search
  is not enabled"), which is the suite's (eval/benchmarks/agentic_mme), not this set's.
"""

from __future__ import annotations

import io
import json
import os
from functools import partial
from pathlib import Path

import numpy as np
from PIL import Image

from tools.toolset import ImageFiles, Reply, Tool, ToolSet
from tools.toolsets.agentic_mme.kernels import KERNELS, Kernel

SCHEMAS = Path(__file__).with_name("schemas.json")
PUBLISHED = json.loads(SCHEMAS.read_text(encoding="utf-8"))


class FilesWorkspace:
    """The reference's AtomicState over an episode's images (see the module docstring for the layout)."""

    def __init__(self, files: ImageFiles):
        self.files = files
        self.folder = os.path.dirname(files.original)

    def _path(self, index: int) -> str:
        return self.files.original if index == 0 else os.path.join(self.folder, f"image_{index}.png")

    def count(self) -> int:
        count = 0
        while True:
            try:
                self.files.read(self._path(count))
            except FileNotFoundError:
                return count
            count += 1

    def open(self, index: int) -> Image.Image:
        count = self.count()
        if index < 0 or index >= count:
            raise ValueError(f"Invalid image_index {index}. Valid range: 0-{count - 1}")
        return Image.fromarray(self.files.read(self._path(index))).convert("RGB")

    def save(self, picture: Image.Image) -> tuple[int, str]:
        if not picture.width or not picture.height:
            picture.save(io.BytesIO(), "PNG")  # PIL refuses an empty image: the reference's error, at its point
        index = self.count()
        self.files.save(np.array(picture))
        return index, os.path.join(self.folder, "tool_images", f"transformed_image_{index}.png")


def parse_arguments(arguments: dict | str):
    """A call's arguments as the runner reads them: a string through json.loads (empty -> {}; unreadable ->
    {}, so the tool runs on its defaults). What it reads need not be a dict: the tool then fails."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments or "{}")
    except Exception:  # noqa: BLE001 - the runner's bare except
        return {}


def run_call(kernel: Kernel, arguments: dict | str, files: ImageFiles) -> Reply:
    """One image tool call as run_one makes it: whatever the tool raises becomes the error message."""
    try:
        return Reply(json.dumps(kernel(FilesWorkspace(files), parse_arguments(arguments)), ensure_ascii=False))
    except Exception as err:  # noqa: BLE001 - the runner answers every exception with its text
        return Reply(json.dumps({"ok": "false", "error": str(err)}, ensure_ascii=False), error=True)


def read_image(source: str | bytes | Path) -> np.ndarray:
    """A task's image file as the tools see it: the runner's copy (`Image.open(path).save(orig.png, "PNG")`),
    then the tools' `Image.open(...).convert("RGB")`. ValueError for a file the copy cannot write."""
    with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as picture:
        copy = io.BytesIO()
        try:
            picture.save(copy, "PNG")
        except (OSError, ValueError) as err:
            raise ValueError(f"Agentic-MME's runner cannot copy this {picture.mode} image as PNG: {err}") from None
    with Image.open(copy) as copied:
        return np.array(copied.convert("RGB"))


TOOLSET = ToolSet(
    "agentic_mme",
    "Agentic-MME's atomic tools (Atm mode), reproducing the benchmark's own code: image_index workspace, "
    "0-1000 boxes, counter-clockwise rotation, JSON replies.",
    tuple(Tool(entry["function"]["name"], entry, run=partial(run_call, KERNELS[entry["function"]["name"]]))
          for entry in PUBLISHED["tools"]),
)

__all__ = ["PUBLISHED", "SCHEMAS", "TOOLSET", "read_image", "parse_arguments"]
