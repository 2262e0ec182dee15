"""Images in and out: every input becomes uint8 RGB (H, W, 3) or gray (H, W), by documented rules.

- PIL images, numpy arrays, torch tensors and file paths are accepted. Numpy arrays and tensors are RGB
  (not OpenCV's BGR): numpy as (H, W[, C]), tensors as (C, H, W) or (H, W).
- Alpha (RGBA, LA, P with transparency, 4-channel arrays) is composited over white, as Qwen-VL's
  preprocessing does, so a tool sees what the model sees.
- P and CMYK (and other PIL modes) convert through PIL to RGB; 1 and L stay gray.
- 16-bit data (PIL I;16 / I, uint16 arrays) scale to 8 bits by value / 257, rounded; PIL mode I
  is read as 16-bit and clipped to 0..65535. Float data (PIL F, float arrays and tensors) are read as
  intensities in [0, 1], scaled by 255, rounded and clipped. Bool arrays map to 0 / 255.
- An image over `max_pixels` (width * height) is rejected before it is decoded: a decompression bomb
  never reaches memory.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import numpy as np
from PIL import Image

from tools.registry import ToolError

DEFAULT_MAX_PIXELS = 8192 * 8192
_UINT8 = np.dtype(np.uint8)


class ImageTooLargeError(ToolError):
    pass


def check_pixels(width: int, height: int, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
    if width * height > max_pixels:
        raise ImageTooLargeError(
            f"image is {width}x{height} = {width * height:,} pixels, over the limit of {max_pixels:,} pixels "
            f"(max_pixels); pass a larger max_pixels only for images you trust"
        )


def to_array(image, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Any supported image as a uint8 numpy array: (H, W, 3) RGB or (H, W) gray."""
    if type(image) is np.ndarray and image.dtype is _UINT8:
        # Already a uint8 RGB or gray array, the usual tool input: passed through after the size check.
        shape = image.shape
        if (len(shape) == 2 or len(shape) == 3 and shape[2] == 3) and shape[0] * shape[1] <= max_pixels:
            return image
    if isinstance(image, np.ndarray):
        return _from_numpy(image, max_pixels)
    if isinstance(image, Image.Image):
        check_pixels(image.width, image.height, max_pixels)
        return _from_pil(image)
    if isinstance(image, (str, os.PathLike)):
        return _from_file(open_image(image, max_pixels), image, f"image {image}")
    if type(image).__module__.startswith("torch"):
        return _from_numpy(_tensor_to_hwc(image), max_pixels)
    raise ToolError(
        f"unsupported image type {type(image).__name__}; pass a PIL image, a numpy array, a torch tensor or a file path"
    )


def open_image(path, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Open an image file, checking its size from the header before decoding any pixels (decoding is lazy)."""
    path = Path(path)
    if not path.is_file():
        raise ToolError(f"image file not found: {path}")
    return _open(path, f"image {path}", max_pixels)


def open_image_bytes(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """`open_image` for a file's bytes."""
    return _open(io.BytesIO(data), "the image data", max_pixels)


def decode_bytes(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """An image file's bytes as `to_array` reads the file."""
    return _from_file(open_image_bytes(data, max_pixels), np.frombuffer(data, np.uint8), "the image data")


def _from_file(pil: Image.Image, source, name: str) -> np.ndarray:
    """An opened image file's pixels; `source` (its path, or its bytes as a uint8 array) for 16-bit colour PNGs."""
    if _is_16bit_color_png(pil):  # PIL would keep only the high byte of each sample
        pil.close()
        return _from_numpy(_decode_16bit_png(source, name), None)
    return _from_pil(pil)


def _open(source, name: str, max_pixels: int) -> Image.Image:
    with warnings.catch_warnings():
        # Our own limit replaces PIL's warning; PIL's hard error (at 2x its limit) is reworded below.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            pil = Image.open(source)
        except Image.DecompressionBombError as err:
            raise ImageTooLargeError(f"{name}: {err}") from None
        except OSError as err:  # PIL names a buffer by its repr: of no use to a reader
            raise ToolError(f"cannot read {name}: {str(err).replace(f' {source!r}', '')}") from None
        try:
            check_pixels(pil.width, pil.height, max_pixels)
        except ImageTooLargeError:
            pil.close()
            raise
    return pil


def _is_16bit_color_png(pil: Image.Image) -> bool:
    return pil.format == "PNG" and pil.mode in ("RGB", "RGBA") and any(";16" in str(tile.args) for tile in pil.tile)


def _decode_16bit_png(source, name) -> np.ndarray:
    """A 16-bit colour PNG (a path, or its bytes as a uint8 array) through OpenCV, which keeps both bytes."""
    import cv2

    if isinstance(source, np.ndarray):
        bgr = cv2.imdecode(source, cv2.IMREAD_UNCHANGED)
    else:
        bgr = cv2.imread(str(source), cv2.IMREAD_UNCHANGED)
    if bgr is None:
        raise ToolError(f"cannot read {name}: the 16-bit PNG data is corrupt or truncated")
    return cv2.cvtColor(bgr, cv2.COLOR_BGRA2RGBA if bgr.shape[2] == 4 else cv2.COLOR_BGR2RGB)


GRAY_MODES = ("1", "L", "LA", "La", "I", "I;16", "I;16L", "I;16B", "I;16N", "F")  # read as (H, W); the rest as RGB


def decoded_bytes(pil: Image.Image) -> int:
    """The bytes `to_array` will decode an opened image to, from its header alone."""
    return pil.width * pil.height * (1 if pil.mode in GRAY_MODES else 3)


def _from_pil(pil: Image.Image) -> np.ndarray:
    mode = pil.mode
    if mode in ("RGB", "L"):
        return np.asarray(pil, dtype=np.uint8).copy()
    if mode == "1":
        return np.asarray(pil.convert("L"), dtype=np.uint8).copy()
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        return _from_numpy(np.clip(np.asarray(pil, dtype=np.int64), 0, 65535).astype(np.uint16), None)
    if mode == "F":
        return _from_numpy(np.asarray(pil, dtype=np.float32), None)
    if mode == "LA" or mode == "La":
        return _from_numpy(np.asarray(pil.convert("LA")), None)
    if mode in ("RGBA", "RGBa", "PA") or (mode == "P" and "transparency" in pil.info):
        return _from_numpy(np.asarray(pil.convert("RGBA")), None)
    return np.asarray(pil.convert("RGB"), dtype=np.uint8).copy()


def _from_numpy(array: np.ndarray, max_pixels: int | None) -> np.ndarray:
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (2, 3, 4)):
        raise ToolError(f"unsupported image shape {array.shape}; expected (H, W), (H, W, 3) or (H, W, 4)")
    if max_pixels is not None:
        check_pixels(array.shape[1], array.shape[0], max_pixels)
    if array.dtype != np.uint8:
        array = _to_uint8(array)
    if array.ndim == 3 and array.shape[2] in (2, 4):
        return _over_white(array)
    return array


def _to_uint8(array: np.ndarray) -> np.ndarray:
    if array.dtype == np.bool_:
        return array.astype(np.uint8) * 255
    if array.dtype == np.uint16:
        return ((array.astype(np.uint32) * 2 + 257) // 514).astype(np.uint8)  # round(value / 257)
    if np.issubdtype(array.dtype, np.floating):
        return np.clip(np.rint(np.nan_to_num(array) * 255.0), 0, 255).astype(np.uint8)
    raise ToolError(f"unsupported image dtype {array.dtype}; use uint8, uint16, bool or float in [0, 1]")


def _over_white(array: np.ndarray) -> np.ndarray:
    """Each colour over white by its alpha, round((color * alpha + 255 * (255 - alpha)) / 255), read from a
    table of all 65,536 (alpha, color) pairs: 7x faster than the arithmetic on a large image."""
    index = (array[..., -1:].astype(np.uint16) << 8) | array[..., :-1]
    out = _OVER_WHITE[index]
    return out[..., 0] if out.shape[2] == 1 else out


_LEVELS = np.arange(256, dtype=np.uint32)
_OVER_WHITE = ((_LEVELS[None, :] * _LEVELS[:, None] + 255 * (255 - _LEVELS[:, None]) + 127) // 255).astype(
    np.uint8).ravel()  # [alpha << 8 | color]


def _tensor_to_hwc(tensor) -> np.ndarray:
    array = tensor.detach().cpu().numpy()
    if array.ndim == 3:
        return np.ascontiguousarray(array.transpose(1, 2, 0))
    return array


def luma(rgb) -> int:
    """The gray level OpenCV gives the color [R, G, B] (cv2.COLOR_RGB2GRAY): how a color reads on a gray image."""
    import cv2

    return int(cv2.cvtColor(np.array([[rgb]], np.uint8), cv2.COLOR_RGB2GRAY)[0, 0])


def color_values(rgb, channels: int) -> list[int]:
    """A color [R, G, B] as channel values for an image with `channels` channels (gray: its luma)."""
    return [int(v) for v in rgb] if channels == 3 else [luma(rgb)]


def demo_image(height: int = 512, width: int = 512, seed: int = 0, gray: bool = False) -> np.ndarray:
    """A deterministic synthetic test image: smooth gradients, filled shapes, thin lines and mild noise.

    It has edges, flat regions and texture, so filters, edge detectors and thresholds all have work.
    """
    import cv2

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.stack(
        [
            96 + 80 * np.sin(xx / max(width, 1) * 3.0 + seed),
            96 + 80 * np.cos(yy / max(height, 1) * 2.0),
            64 + 60 * (xx + yy) / max(width + height, 1),
        ],
        axis=-1,
    ).astype(np.uint8)
    scale = min(height, width)
    for _ in range(6):
        center = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        color = tuple(int(c) for c in rng.integers(0, 256, 3))
        cv2.circle(image, center, int(rng.integers(scale // 20 + 1, scale // 5 + 2)), color, -1)
        corner = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        size = (int(rng.integers(scale // 10 + 1, scale // 3 + 2)), int(rng.integers(scale // 10 + 1, scale // 3 + 2)))
        cv2.rectangle(image, corner, (corner[0] + size[0], corner[1] + size[1]), tuple(int(c) for c in rng.integers(0, 256, 3)), -1)
    for _ in range(4):
        p1 = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        p2 = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        cv2.line(image, p1, p2, (255, 255, 255), 1)
    noise = rng.integers(-8, 9, image.shape)
    image = np.clip(image.astype(np.int16) + noise, 0, 255).astype(np.uint8)
    return cv2.cvtColor(image, cv2.COLOR_RGB2GRAY) if gray else image
