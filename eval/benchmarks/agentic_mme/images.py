"""Images as Agentic-MME's runners send them: each image goes into the conversation as a data URL made by
common_utils.py `image_to_data_url` from a file (the runner's `orig.png` copy of the dataset image, the PNG an atomic
tool saved, or the file Gen code saved), with the limits `get_adaptive_image_params` gives for the number of
messages that already hold an image (the first user message: the runners' `--max_image_pixels 2048*2048`,
`--image_quality 95` and `max_size_mb=8.0`). The file goes as it is when it is small enough in pixels and bytes,
else it is resized (LANCZOS, int sizes) and/or re-encoded as JPEG at falling qualities, then smaller still.

The model receives the data URL's image as an OpenAI-compatible vLLM server decodes it: RGB, transparency
composited on white (vllm.multimodal.media.image.ImageMediaIO). Both steps are proven against the reference's code
and vLLM's by tests/eval/benchmarks/data/agentic_mme_image_vectors.json.
"""

from __future__ import annotations

import io
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image

MB = 1024 * 1024
QUALITY_LADDER = (90, 85, 80, 75, 70, 60, 50)  # tried after the caller's quality, in this order
SCALE_LADDER = (0.8, 0.6, 0.5, 0.4)  # then smaller images at quality 60
SCALED_QUALITY = 60
PNG_KEEPS = ("L", "LA", "RGB", "RGBA")  # modes a PNG copy holds pixel for pixel, with nothing to carry beside them


@dataclass(frozen=True)
class Limits:
    """image_to_data_url's parameters."""

    max_pixels: int
    quality: int
    max_size_mb: float


FIRST_MESSAGE = Limits(2048 * 2048, 95, 8.0)  # the task's image(s) in the first user message
JUDGE = Limits(2048 * 2048, 95, 15.0)  # the evaluator's visual judge calls image_to_data_url(path) with its defaults


def adaptive_limits(image_messages: int) -> Limits:
    """get_adaptive_image_params: the limits for an image added when `image_messages` messages hold images."""
    if image_messages <= 2:
        return Limits(2048 * 2048, 95, 5.0)
    if image_messages <= 5:
        return Limits(1536 * 1536, 85, 3.0)
    if image_messages <= 8:
        return Limits(1280 * 1280, 75, 2.0)
    if image_messages <= 12:
        return Limits(1024 * 1024, 65, 1.5)
    return Limits(800 * 800, 55, 1.0)


def compressed(picture: Image.Image, file_bytes: Callable[[], int], limits: Limits) -> bytes | None:
    """image_to_data_url on a file that holds `picture` (opened from it, in its own mode): None when the runner
    sends the file as it is, else the JPEG it sends. `file_bytes` gives the file's size, asked only when the
    pixels are within the limit. The reference's own failure (a last resize to a zero side) raises ValueError."""
    width, height = picture.size
    if width * height <= limits.max_pixels and file_bytes() / MB <= limits.max_size_mb:
        return None
    if width * height > limits.max_pixels:
        scale = (limits.max_pixels / (width * height)) ** 0.5
        width, height = int(width * scale), int(height * scale)
        picture = picture.resize((width, height), Image.Resampling.LANCZOS)
    picture = _jpeg_ready(picture)
    limit = int(limits.max_size_mb * MB)
    for quality in (limits.quality, *QUALITY_LADDER):
        data = _jpeg(picture, quality)
        if len(data) <= limit:
            return data
    for factor in SCALE_LADDER:
        smaller = picture.resize((int(width * factor), int(height * factor)), Image.Resampling.LANCZOS)
        data = _jpeg(smaller, SCALED_QUALITY)
        if len(data) <= limit:
            return data
    return data  # the reference sends the last, smallest attempt anyway


def _jpeg_ready(picture: Image.Image) -> Image.Image:
    """The reference's conversion for JPEG: RGBA, LA and P pasted on white (P through RGBA, by its alpha if it
    has one), any other mode converted to RGB."""
    if picture.mode in ("RGBA", "LA", "P"):
        background = Image.new("RGB", picture.size, (255, 255, 255))
        if picture.mode == "P":
            picture = picture.convert("RGBA")
        if "A" in picture.mode:
            background.paste(picture, mask=picture.split()[-1])
        else:
            background.paste(picture)
        return background
    return picture if picture.mode == "RGB" else picture.convert("RGB")


def _jpeg(picture: Image.Image, quality: int) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", quality=quality, optimize=True)
    return buffer.getvalue()


def server_rgb(picture: Image.Image) -> np.ndarray:
    """The image as a vLLM OpenAI server hands it to the model: RGB, an image with transparency (RGBA, LA, PA or
    a tRNS chunk) composited on white through RGBA."""
    transparent = picture.mode in ("RGBA", "LA", "PA") or "transparency" in picture.info
    if not transparent:
        return np.array(picture if picture.mode == "RGB" else picture.convert("RGB"))
    rgba = picture if picture.mode == "RGBA" else picture.convert("RGBA")
    background = Image.new("RGB", rgba.size, (255, 255, 255))
    background.paste(rgba, mask=rgba.split()[3])
    return np.array(background)


def png_bytes(picture: Image.Image) -> bytes:
    """The file PIL writes for `save(path)` to a .png: what the runners' tools save, and their orig.png copy."""
    buffer = io.BytesIO()
    picture.save(buffer, "PNG")
    return buffer.getvalue()


def runner_copy(source: str | Path) -> bytes:
    """The runner's `orig.png`: `Image.open(dataset file).save(orig.png, "PNG")`."""
    with Image.open(source) as original:
        try:
            return png_bytes(original)
        except (OSError, ValueError) as err:
            raise ValueError(f"Agentic-MME's runner cannot copy this {original.mode} image as PNG: {err}") from None


def sent_original(source: str | Path, limits: Limits) -> np.ndarray:
    """A task's image as the model receives it: its orig.png copy through image_to_data_url."""
    with Image.open(source) as original:
        if original.width * original.height > limits.max_pixels and original.mode in PNG_KEEPS:
            # over the pixel limit the copy's size is never asked, and its pixels are the file's own: writing the
            # copy (seconds for a photo) is skipped
            return _decoded(compressed(original, lambda: 0, limits))
    copy = runner_copy(source)
    with Image.open(io.BytesIO(copy)) as picture:
        data = compressed(picture, lambda: len(copy), limits)
        return server_rgb(picture) if data is None else _decoded(data)


def sent_made(image: np.ndarray, limits: Limits) -> np.ndarray:
    """An image the model made (an atomic tool's PNG, or a file Gen code saved, taken as the PNG PIL writes for
    its pixels) as the model receives it; the workspace array itself when the file goes as it is."""
    picture = Image.fromarray(image)
    data = compressed(picture, lambda: len(png_bytes(picture)), limits)
    return image if data is None else _decoded(data)


def _decoded(jpeg: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(jpeg)) as picture:
        return server_rgb(picture)


_SENT: dict[tuple[int, Limits], tuple[weakref.ref, np.ndarray]] = {}  # (image id, limits) -> (image, as sent)


def as_sent(image: np.ndarray, limits: Limits, source: str | Path | None = None) -> np.ndarray:
    """A workspace image as the model receives it under `limits`: from its dataset file `source` (a task's
    image) or as an image the model made. Kept while the image lives, since every round renders every image."""
    key = (id(image), limits)
    known = _SENT.get(key)
    if known is not None and known[0]() is image:
        return known[1]
    sent = sent_original(source, limits) if source is not None else sent_made(image, limits)
    for stale in [k for k, (ref, _) in _SENT.items() if ref() is None]:
        del _SENT[stale]
    _SENT[key] = (weakref.ref(image), sent)
    return sent


def message_limits(messages: list[dict]) -> list[Limits | None]:
    """The limits each message's images were sent with, by the runners' count when the message was added: the
    first message with images is the task's (FIRST_MESSAGE); every later one gets get_adaptive_image_params of
    the number of earlier messages holding an image (a message counts once, however many images it holds)."""
    limits, holding = [], 0
    for message in messages:
        if not any(part["type"] == "image" for part in message["content"]):
            limits.append(None)
            continue
        limits.append(FIRST_MESSAGE if holding == 0 else adaptive_limits(holding))
        holding += 1
    return limits
