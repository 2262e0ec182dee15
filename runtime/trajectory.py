"""The canonical trajectory: what data_gen/ writes, eval/ logs and train/ reads.

A trajectory is OpenAI-style `messages` plus the images they show. Every message's `content` is a list
of parts, `{"type": "text", "text": ...}` or `{"type": "image", "image": i}` where `i` indexes
`Trajectory.images`, the episode's image workspace (0 = the original; each tool image appends).

    {"role": "system" | "user", "content": [parts]}
    {"role": "assistant", "content": [parts], "tool_calls": [               # tool_calls only when present
        {"id": "call_0", "type": "function", "function": {"name": ..., "arguments": "<JSON string>"}}]}
    {"role": "tool", "tool_call_id": "call_0" | None, "name": ..., "content": [parts], "error": bool}

Arguments are JSON strings (as in the OpenAI API and in Arrow files, where a dict column would need one
schema for every tool). A tool message whose `tool_call_id` is None answers a call that could not be
parsed; the call's text stays in the assistant content, as the model wrote it.

On disk a trajectory is one JSON line; images are PNG files named by a hash of their pixels in an image
folder shared by many trajectories, so a dataset stores each distinct image once. Loading checks the
hashes, and a round trip is exact.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
from PIL import Image

FORMAT_VERSION = 1
ROLES = ("system", "user", "assistant", "tool")


class TrajectoryError(ValueError):
    pass


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def image(index: int) -> dict:
    return {"type": "image", "image": index}


def tool_call(call_id: str, name: str, arguments: dict | str) -> dict:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def message_text(message: dict) -> str:
    """The message's text parts joined (images left out)."""
    return "".join(part["text"] for part in message["content"] if part["type"] == "text")


@dataclass
class Trajectory:
    messages: list[dict] = field(default_factory=list)
    images: list[np.ndarray] = field(default_factory=list)
    tools: list[dict] = field(default_factory=list)  # the function schemas the model was shown
    meta: dict = field(default_factory=dict)  # task id, protocol, model, stop reason, answer, ...

    def add_image(self, picture) -> int:
        """Append an image (uint8 RGB (H, W, 3) or gray (H, W) array) to the workspace; returns its index."""
        array = np.ascontiguousarray(picture)
        _check_image(array, len(self.images))
        self.images.append(array)
        return len(self.images) - 1

    def add(self, role: str, *parts: dict | str, **fields) -> dict:
        """Append a message; plain strings are text parts."""
        message = {"role": role, "content": [text(p) if isinstance(p, str) else p for p in parts], **fields}
        _check_message(message, len(self.images), len(self.messages))
        self.messages.append(message)
        return message

    def validate(self) -> None:
        for i, array in enumerate(self.images):
            _check_image(array, i)
        for i, message in enumerate(self.messages):
            _check_message(message, len(self.images), i)
        for name in ("messages", "tools", "meta"):  # what is written must read back equal
            value = getattr(self, name)
            try:
                same = json.loads(json.dumps(value, allow_nan=False)) == value
            except (TypeError, ValueError) as err:
                raise TrajectoryError(f"{name} is not JSON: {err}") from None
            if not same:
                raise TrajectoryError(f"{name} would not read back equal from JSON (tuples, non-string keys?): "
                                      "use lists and string keys")

    def to_dict(self, image_dir: str | Path) -> dict:
        """A JSON-serializable dict; images are written to `image_dir` (once per distinct image)."""
        self.validate()
        return {
            "version": FORMAT_VERSION,
            "messages": copy.deepcopy(self.messages),
            "images": [save_image(array, image_dir) for array in self.images],
            "tools": copy.deepcopy(self.tools),
            "meta": copy.deepcopy(self.meta),
        }

    @classmethod
    def from_dict(cls, data: dict, image_dir: str | Path) -> "Trajectory":
        if data.get("version") != FORMAT_VERSION:
            raise TrajectoryError(f"trajectory format version {data.get('version')!r} is not {FORMAT_VERSION}; "
                                  "re-export it with this version of tirlab")
        trajectory = cls(data["messages"], [load_image(key, image_dir) for key in data["images"]],
                         data.get("tools", []), data.get("meta", {}))
        trajectory.validate()
        return trajectory

    def __eq__(self, other) -> bool:
        if not isinstance(other, Trajectory):
            return NotImplemented
        return (self.messages == other.messages and self.tools == other.tools and self.meta == other.meta
                and len(self.images) == len(other.images)
                and all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(self.images, other.images)))


def image_key(array: np.ndarray) -> str:
    """Content hash of an image's pixels (shape included), the name of its file."""
    digest = hashlib.sha256(f"{array.dtype}:{array.shape}:".encode())
    digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:32]


def save_image(array: np.ndarray, image_dir: str | Path) -> str:
    key = image_key(array)
    path = Path(image_dir) / f"{key}.png"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="PNG", compress_level=1)
        handle, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "wb") as f:
            f.write(buffer.getvalue())
        os.replace(tmp, path)  # atomic: a crash never leaves a half-written image under its final name
    return key


def load_image(key: str, image_dir: str | Path) -> np.ndarray:
    path = Path(image_dir) / f"{key}.png"
    if not path.is_file():
        raise TrajectoryError(f"image {key} is missing: expected {path}; copy the image folder along with the .jsonl file")
    with Image.open(path) as pil:
        array = np.asarray(pil).copy()
    if image_key(array) != key:
        raise TrajectoryError(f"image file {path} does not match its hash {key}: the file was modified or corrupted")
    return array


def json_line(value) -> str:
    """One JSON line, as UTF-8 text where it can be. Text with a lone surrogate (a model's reply or a tool's
    output can hold one) cannot be encoded as UTF-8, so that line is written ASCII-escaped, which JSON reads
    back exactly: nothing a trajectory holds stops it from being written."""
    line = json.dumps(value, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(value)
    return line + "\n"


def write_jsonl(path: str | Path, trajectories: Iterable[Trajectory], image_dir: str | Path | None = None,
                append: bool = False) -> int:
    """Write trajectories as JSON lines, images under `image_dir` (default: `images/` beside the file).
    Each line is flushed as it is written, so an interrupted writer loses at most the line in flight;
    `append=True` first cuts such a partial line, then adds after the last whole one."""
    path = Path(path)
    image_dir = Path(image_dir) if image_dir else path.parent / "images"
    path.parent.mkdir(parents=True, exist_ok=True)
    if append and path.exists():
        drop_partial_line(path)
    count = 0
    with open(path, "a" if append else "w", encoding="utf-8") as f:
        for trajectory in trajectories:
            f.write(json_line(trajectory.to_dict(image_dir)))
            f.flush()
            count += 1
    return count


def read_jsonl(path: str | Path, image_dir: str | Path | None = None) -> Iterator[Trajectory]:
    """Read trajectories written by `write_jsonl`. A last line without its newline (a writer that was
    killed mid-line) is skipped; any other bad line is an error naming the line."""
    path = Path(path)
    image_dir = Path(image_dir) if image_dir else path.parent / "images"
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith("\n"):
                return
            try:
                data = json.loads(line)
            except json.JSONDecodeError as err:
                raise TrajectoryError(f"{path}:{number}: not a JSON line ({err.msg})") from None
            try:
                trajectory = Trajectory.from_dict(data, image_dir)
            except (KeyError, TypeError, AttributeError, TrajectoryError) as err:
                raise TrajectoryError(f"{path}:{number}: not a trajectory ({err})") from None
            yield trajectory


def drop_partial_line(path: Path) -> None:
    """Cut a last line that a killed writer left without its newline, so appending starts a clean line."""
    with open(path, "rb+") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        position = size
        while position > 0:
            step = min(65536, position)
            f.seek(position - step)
            chunk = f.read(step)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                f.truncate(position - step + newline + 1)
                return
            position -= step
        f.truncate(0)  # no newline at all: the whole file is the unfinished line
        f.truncate(0)


def _check_image(array, index: int) -> None:
    if not isinstance(array, np.ndarray) or array.dtype != np.uint8 or not (
            array.ndim == 2 or (array.ndim == 3 and array.shape[2] == 3)) or 0 in array.shape:
        raise TrajectoryError(f"image {index} must be a non-empty uint8 array, (H, W, 3) RGB or (H, W) gray; "
                              f"got {getattr(array, 'dtype', type(array).__name__)} {getattr(array, 'shape', '')} "
                              "(convert with tools.images.to_array)")


def _check_message(message: dict, n_images: int, index: int) -> None:
    where = f"message {index}"
    if message.get("role") not in ROLES:
        raise TrajectoryError(f"{where}: role {message.get('role')!r} is not one of {ROLES}")
    content = message.get("content")
    if not isinstance(content, list):
        raise TrajectoryError(f"{where}: content must be a list of parts, got {type(content).__name__}")
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            continue
        if kind == "image" and isinstance(part.get("image"), int) and 0 <= part["image"] < n_images:
            continue
        raise TrajectoryError(f"{where}: bad content part {part!r}: expected {{'type': 'text', 'text': str}} or "
                              f"{{'type': 'image', 'image': index below {n_images}}}")
    for call in message.get("tool_calls", ()):
        function = call.get("function") if isinstance(call, dict) else None
        if not (isinstance(function, dict) and isinstance(function.get("name"), str)
                and isinstance(function.get("arguments"), str) and isinstance(call.get("id"), str)):
            raise TrajectoryError(f"{where}: bad tool call {call!r}: expected "
                                  "{'id': str, 'type': 'function', 'function': {'name': str, 'arguments': JSON string}}")
    if "tool_calls" in message and message["role"] != "assistant":
        raise TrajectoryError(f"{where}: only assistant messages carry tool_calls")
