"""How a VTC-Bench tool call runs, around the kernels: the agent's argument parsing and schema check
(eval/qwen_agent/tools/base.py, agent.py), and the tool's image loading, saving and reply text
(eval/qwen_agent/tools/opencv_interface.py `generate`)."""

from __future__ import annotations

import json
import re
from functools import partial
from io import BytesIO
from pathlib import Path

import cv2
import jsonschema
import numpy as np
from PIL import Image

from tools.toolset import ImageFiles, Reply, Tool
from tools.toolsets.vtc_bench.kernels import KERNELS, template_match

ACTION = "\n\n**Action Required**: Please call this tool again with absolute image path"
PATH_ERRORS = ("Unable to load image", "No such file or directory")
PATH_ERRORS_ANY_CASE = ("cannot find the file", "file not found")


def read_image(source: str | bytes | Path) -> np.ndarray:
    """An image file as the reference's tools see it, as the RGB array a workspace holds: PIL's decoding,
    np.array, then cv2's RGB2BGR (alpha and CMYK's K dropped, not composited; one-channel L and palette
    images become gray, the palette's indices, replicated; 16-bit RGB PNGs keep PIL's high byte).
    Raises ValueError for files whose pixels the reference cannot hold as 8-bit BGR (16-bit gray, 32-bit,
    float, bilevel, gray + alpha): its tools fail on them, and an 8-bit workspace cannot reproduce that."""
    with Image.open(BytesIO(source) if isinstance(source, bytes) else source) as picture:
        mode, pixels = picture.mode, np.array(picture)
    try:
        bgr = cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR)
    except cv2.error as err:
        raise ValueError(f"VTC-Bench's tools cannot convert this {mode} image: {err}") from None
    if bgr.dtype != np.uint8:
        raise ValueError(f"VTC-Bench's tools read this {mode} image as {bgr.dtype} samples, which an 8-bit workspace cannot hold")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


JSON_STRING = r'"(?:\\.|[^"\\])*"'
BARE_KEY = r"([{,])\s*([A-Za-z_][A-Za-z0-9_]*)\s*:"


def parse_arguments(text: str):
    """qwen-agent's lenient JSON: a ``` fence is stripped; strict JSON, else the common repairs
    (trailing commas, missing commas between members, unquoted keys, unclosed brackets)."""
    text = text.strip("\n")
    if text.startswith("```") and text.endswith("\n```"):
        text = "\n".join(text.split("\n")[1:-1])
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        original = err
    repaired = re.sub(r",(?=\s*[\]}])", "", text)
    repaired = re.sub(rf"({JSON_STRING})\s+(?={JSON_STRING}\s*:)", r"\1, ", repaired)
    repaired = re.sub(BARE_KEY, r'\1"\2":', repaired)
    repaired += "}" * max(0, repaired.count("{") - repaired.count("}"))
    repaired += "]" * max(0, repaired.count("[") - repaired.count("]"))
    try:
        return json.loads(repaired)
    except Exception:  # noqa: BLE001 - any failure of the repair reports the original error
        raise original from None


def _checked(arguments, schema: dict):
    """The call's arguments as the tool's `_verify_json_format_args` leaves them, or its exception."""
    if isinstance(arguments, str):
        try:
            arguments = parse_arguments(arguments)
        except json.JSONDecodeError:
            raise ValueError("Parameters must be formatted as a valid JSON!") from None
    jsonschema.validate(instance=arguments, schema=schema)
    return arguments


def agent_error(name: str, err: Exception) -> str:
    """What qwen-agent's `_call_tool` answers for an exception a tool raised. Its traceback lines name
    files on the benchmark's machine and are left out; the header, `Type: message` and the
    `Traceback:` line stay."""
    return f"An error occurred when calling tool `{name}`:\n{type(err).__name__}: {err}\nTraceback:\n"


def load(source: str, files: ImageFiles) -> np.ndarray:
    """The BGR image the reference's tools load from an `image` or `template_path` value."""
    path = source[len("file://"):] if source.startswith("file://") else source
    try:
        pixels = files.read(path)
    except FileNotFoundError:
        raise ValueError(f"Unable to load image from input: {path[:100]}...") from None
    return cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR)


def _failure(op: str, err: Exception, files: ImageFiles) -> Reply:
    text = f"Failed to run OpenCV operation '{op}':\n{err}{ACTION}"
    message = str(err)
    if any(marker in message for marker in PATH_ERRORS) or any(marker in message.lower() for marker in PATH_ERRORS_ANY_CASE):
        text += f"\n Set the 'image' parameter to: {files.original}"
    return Reply(text, error=True)


def run(name: str, schema: dict, arguments: dict | str, files: ImageFiles) -> Reply:
    """One call of tool `name`, answered as the benchmark's agent would show it to the model."""
    try:
        arguments = _checked(arguments, schema)
    except Exception as err:  # noqa: BLE001 - the agent turns any exception of the tool into text
        return Reply(agent_error(name, err), error=True)
    op = name.removeprefix("opencv_")
    params = arguments.get("param", {})
    # SIFT's keypoint colors and GrabCut's k-means draw from OpenCV's per-thread RNG, so the reference's
    # pixels depend on what its process ran before: every call here starts from a fresh process's state.
    cv2.setRNGSeed(0)
    try:
        image = load(arguments.get("image"), files)
        kernel = partial(template_match, load=partial(load, files=files)) if op == "template_match" else KERNELS[op]
        result, message = kernel(image, params)
        result = cv2.cvtColor(result, cv2.COLOR_BGR2RGB)
    except Exception as err:  # noqa: BLE001 - the tool reports any failure of the operation as text
        return _failure(op, err, files)
    return Reply(f"{message}\n\nEdited Image Path: {files.save(result)}")


def make_tool(entry: dict) -> Tool:
    """A published tool (an entry of schemas.json) that runs the reference's code."""
    schema = {"type": "function", "function": {key: entry[key] for key in ("name", "description", "parameters")}}
    return Tool(entry["name"], schema, run=partial(run, entry["name"], entry["parameters"]))


def unknown_tool(name: str) -> Reply:
    return Reply(f"Tool {name} does not exists.", error=True)
