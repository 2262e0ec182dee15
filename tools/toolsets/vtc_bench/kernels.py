"""VTC-Bench's OpenCV operations (eval/qwen_agent/tools/opencv_interface.py), one function per operation.

Each takes the BGR uint8 image the reference's tool loaded and the call's `param` dict, and returns
(BGR image, message) or raises with the reference's error text. The reference is the spec, quirks
included: values are converted with the same Python and NumPy calls (so a bad value fails with the same
exception text), option names are lower-cased, out-of-range values are clamped, reset or rejected where
the reference does, and the same OpenCV calls run in the same order on the same arrays.
"""

from __future__ import annotations

import json
from typing import Callable

import cv2
import numpy as np

Kernel = Callable[[np.ndarray, dict], tuple[np.ndarray, str]]
GREEN, BLUE, RED, MAGENTA = (0, 255, 0), (255, 0, 0), (0, 0, 255), (255, 0, 255)  # BGR
ALL_CHANNELS = [0, 1, 2]


def _info(message: str, info: dict) -> str:
    return f"{message} INFO: {json.dumps(info)}"


def _bgr(value, default: tuple) -> tuple:
    """A color as the reference reads it: three values clamped to 0-255 and truncated, else the default."""
    if isinstance(value, (list, tuple)) and len(value) == 3:
        try:
            return tuple(int(max(0, min(255, v))) for v in value)
        except (TypeError, ValueError):
            pass
    return tuple(default)


def _int_or(value, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _clamp(value, low, high):
    return max(low, min(high, value))


def _odd_up(value: int) -> int:
    return value + 1 if value % 2 == 0 else value


def _selected(channels) -> list:
    """The listed channels the reference processes: 0, 1 or 2, in the order given (repeats included)."""
    return [ch for ch in channels if 0 <= ch < 3]


def _gray(image: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)


def _as_bgr(gray: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR)


# -- color spaces -----------------------------------------------------------------------------------------------
def colorspace_gray(image, params):
    return _as_bgr(_gray(image)), "Converted to grayscale."


def colorspace_hsv(image, params):
    """The HSV array itself; saved as if it were BGR, so the file shows V, S, H as R, G, B."""
    return cv2.cvtColor(image, cv2.COLOR_BGR2HSV), "Converted to HSV."


def colorspace_lab(image, params):
    return cv2.cvtColor(image, cv2.COLOR_BGR2LAB), "Converted to LAB."


# -- geometry -----------------------------------------------------------------------------------------------------
PRESET_SCALES = {"half": 0.5, "double": 2.0}


def resize(image, params):
    """`preset` wins over width/height (which the published schema still requires); sizes truncate."""
    h, w = image.shape[:2]
    preset = params.get("preset")
    if preset:
        preset = str(preset).lower()
        if preset not in PRESET_SCALES:
            raise ValueError("resize preset must be one of: half, double.")
        size = (int(w * PRESET_SCALES[preset]), int(h * PRESET_SCALES[preset]))
    else:
        width, height = int(params.get("width", 0)), int(params.get("height", 0))
        if width <= 0 or height <= 0:
            raise ValueError(f"width and height must be positive integers, got width={width}, height={height}.")
        if width > 10000 or height > 10000:
            raise ValueError("width and height should not exceed 10000 pixels to prevent memory issues, "
                             f"got width={width}, height={height}.")
        size = (width, height)
    resized = cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)
    info = {"original_size": [w, h], "new_size": list(size), "scale": [size[0] / w, size[1] / h] if preset else None}
    return resized, _info(f"Resized from {w}x{h} to {size[0]}x{size[1]}.", info)


def rotate(image, params):
    """Clockwise by int(angle) degrees about (w/2, h/2), on a black canvas of the truncated rotated extent."""
    angle = float(int(params.get("angle", 0)))
    if angle == 0:
        return image, "No rotation applied (angle=0)."
    h, w = image.shape[:2]
    center = (w / 2, h / 2)
    matrix = cv2.getRotationMatrix2D(center, -angle, 1.0)
    cos, sin = abs(matrix[0, 0]), abs(matrix[0, 1])
    size = (int(h * sin + w * cos), int(h * cos + w * sin))
    matrix[0, 2] += size[0] / 2 - center[0]
    matrix[1, 2] += size[1] / 2 - center[1]
    rotated = cv2.warpAffine(image, matrix, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0))
    info = {"angle": angle, "center": list(center), "original_size": [w, h], "rotated_size": list(size)}
    return rotated, _info(f"Rotated by {angle} degrees clockwise.", info)


SHIFTS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}


def translate(image, params):
    direction = str(params.get("direction", "right")).lower()
    distance = params.get("distance")
    if distance is None:
        distance = 32
    else:
        try:
            distance = int(distance)
            if distance < 0:
                raise ValueError(f"distance must be non-negative, got {distance}.")
            if distance > 10000:
                raise ValueError(f"distance should not exceed 10000 pixels, got {distance}.")
        except (TypeError, ValueError) as err:
            raise ValueError(f"distance must be a non-negative integer: {err}") from None
    if direction not in SHIFTS:
        raise ValueError(f"direction must be one of: left, right, up, down. Got: {direction}")
    dx, dy = (step * distance for step in SHIFTS[direction])
    h, w = image.shape[:2]
    shifted = cv2.warpAffine(image, np.float32([[1, 0, dx], [0, 1, dy]]), (w, h), borderMode=cv2.BORDER_REPLICATE)
    info = {"direction": direction, "distance": distance, "translation": [int(dx), int(dy)], "total_pixels": abs(dx) + abs(dy)}
    return shifted, _info(f"Translated {direction} by {distance} pixels.", info)


FLIP_CODES = {"horizontal": 1, "vertical": 0}


def flip(image, params):
    direction = params.get("direction", "horizontal").lower()
    if direction not in FLIP_CODES:
        raise ValueError("flip direction must be horizontal or vertical.")
    return cv2.flip(image, FLIP_CODES[direction]), f"Flipped image {direction}."


def pyramid(image, params):
    mode = params.get("mode", "pyr_down").lower()
    if mode not in ("pyr_down", "pyr_up"):
        raise ValueError("pyramid mode must be pyr_down or pyr_up.")
    h, w = image.shape[:2]
    resized = cv2.pyrDown(image) if mode == "pyr_down" else cv2.pyrUp(image)
    info = {"mode": mode, "original_size": [w, h], "new_size": [resized.shape[1], resized.shape[0]]}
    label = "downsample" if mode == "pyr_down" else "upsample"
    return resized, _info(f"Pyramid {label} (1 level).", info)


def _region(params, op: str) -> tuple[int, int, int, int]:
    try:
        return tuple(int(params.get(key, 0)) for key in ("x", "y", "width", "height"))
    except (ValueError, TypeError):
        raise ValueError(f"{op} parameters must be integers: x, y, width, height.") from None


def _check_region(image, x, y, width, height, what: str, verb: str) -> None:
    h, w = image.shape[:2]
    if width <= 0 or height <= 0:
        raise ValueError(f"width and height must be positive integers, got width={width}, height={height}.")
    if x < 0 or y < 0:
        raise ValueError(f"x and y must be non-negative integers, got x={x}, y={y}.")
    if x + width > w or y + height > h:
        raise ValueError(f"{what} region exceeds image bounds. Image size: {w}x{h}, {verb}: x={x}, y={y}, "
                         f"width={width}, height={height}.")


def crop(image, params):
    x, y, width, height = _region(params, "crop")
    _check_region(image, x, y, width, height, "Crop", "crop")
    h, w = image.shape[:2]
    info = {"original_size": [w, h], "crop_region": {"x": x, "y": y, "width": width, "height": height},
            "cropped_size": [width, height]}
    return image[y:y + height, x:x + width], _info(f"Cropped region ({x}, {y}, {width}, {height}) from {w}x{h} image.", info)


def _zoom_size(params, width: int, height: int):
    """(target size or (None, None), scale): `scale` wins over target_width/target_height."""
    scale = params.get("scale")
    if scale is not None:
        try:
            scale = float(scale)
            if scale <= 0 or scale > 10:
                raise ValueError
            return (int(width * scale), int(height * scale)), scale
        except (ValueError, TypeError):
            raise ValueError(f"scale must be a positive number, got {scale}.") from None
    if "target_width" in params or "target_height" in params:
        try:
            size = int(params.get("target_width", width)), int(params.get("target_height", height))
        except (ValueError, TypeError):
            size = (0, 0)
        if min(size) <= 0 or max(size) > 10000:
            raise ValueError("target_width and target_height must be positive integers.")
        return size, scale
    return (None, None), scale


def zoom_in(image, params):
    """Crop, then resize by `scale` or to the target size; a scale that truncates a side to 0 keeps the crop."""
    x, y, width, height = _region(params, "zoom_in")
    _check_region(image, x, y, width, height, "Zoom", "zoom")
    zoomed = image[y:y + height, x:x + width]
    size, scale = _zoom_size(params, width, height)
    if size[0] and size[1]:
        zoomed = cv2.resize(zoomed, size, interpolation=cv2.INTER_LINEAR)
    else:
        size = (width, height)
    h, w = image.shape[:2]
    info = {"original_size": [w, h], "zoom_region": {"x": x, "y": y, "width": width, "height": height},
            "zoomed_size": list(size), "scale": scale if scale else None}
    return zoomed, _info(f"Zoomed into region ({x}, {y}, {width}, {height}) from {w}x{h} image, result size: "
                         f"{size[0]}x{size[1]}.", info)


# -- filters --------------------------------------------------------------------------------------------------------
def _blur_ksize(params, label: str) -> int:
    ksize = int(params.get("ksize", 5))
    if ksize < 3 or ksize > 51:
        raise ValueError(f"{label} blur ksize must be between 3 and 51, got {ksize}.")
    return _odd_up(ksize)


def _in_range(value, low, high, what: str) -> None:
    if value < low or value > high:
        raise ValueError(f"{what} must be between {low} and {high}, got {value}.")


def blur(image, params):
    method = str(params.get("method", "gaussian")).lower()
    if method in ("average", "avg"):
        ksize = _blur_ksize(params, "Average")
        info = {"method": "average", "ksize": ksize}
        return cv2.blur(image, (ksize, ksize)), _info(f"Applied average blur {ksize}x{ksize}.", info)
    if method == "gaussian":
        ksize, sigma_x, sigma_y = int(params.get("ksize", 5)), float(params.get("sigma_x", 0)), float(params.get("sigma_y", 0))
        if ksize < 3 or ksize > 51:
            raise ValueError(f"Gaussian blur ksize must be between 3 and 51, got {ksize}.")
        ksize = _odd_up(ksize)
        _in_range(sigma_x, 0, 10, "Gaussian blur sigma_x")
        _in_range(sigma_y, 0, 10, "Gaussian blur sigma_y")
        info = {"method": "gaussian", "ksize": ksize, "sigma_x": sigma_x, "sigma_y": sigma_y}
        return (cv2.GaussianBlur(image, (ksize, ksize), sigma_x, sigma_y),
                _info(f"Applied Gaussian blur {ksize}x{ksize} (sigma_x={sigma_x}, sigma_y={sigma_y}).", info))
    if method == "median":
        ksize = _blur_ksize(params, "Median")
        return cv2.medianBlur(image, ksize), _info(f"Applied median blur k={ksize}.", {"method": "median", "ksize": ksize})
    if method == "bilateral":
        d = int(params.get("d", 9))
        sigma_color, sigma_space = float(params.get("sigma_color", 75)), float(params.get("sigma_space", 75))
        _in_range(d, 1, 50, "Bilateral filter d")
        _in_range(sigma_color, 1, 200, "Bilateral filter sigma_color")
        _in_range(sigma_space, 1, 200, "Bilateral filter sigma_space")
        info = {"method": "bilateral", "d": d, "sigma_color": sigma_color, "sigma_space": sigma_space}
        return (cv2.bilateralFilter(image, d, sigma_color, sigma_space),
                _info(f"Applied bilateral filter (d={d}, sigma_color={sigma_color}, sigma_space={sigma_space}).", info))
    raise ValueError(f"Blur method must be one of: average, gaussian, median, bilateral. Got: {method}.")


ADAPTIVE = {"adaptive_mean": cv2.ADAPTIVE_THRESH_MEAN_C, "adaptive_gaussian": cv2.ADAPTIVE_THRESH_GAUSSIAN_C}


def _thresholder(mode: str, params) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """One plane -> (threshold used, binary plane), with the mode's parameters read as the reference does."""
    if mode == "binary":
        value = _clamp(int(params.get("threshold_value", 127)), 0, 255)
        return lambda plane: cv2.threshold(plane, value, 255, cv2.THRESH_BINARY)
    if mode == "otsu":
        return lambda plane: cv2.threshold(plane, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    block = _clamp(_odd_up(int(params.get("adaptive_block_size", 11))), 3, 101)
    constant = int(params.get("adaptive_constant", 2))
    return lambda plane: (-1, cv2.adaptiveThreshold(plane, 255, ADAPTIVE[mode], cv2.THRESH_BINARY, block, constant))


def threshold(image, params):
    mode = str(params.get("mode", "otsu")).lower()
    invert = bool(params.get("invert", False))
    color_mode = str(params.get("color_mode", "grayscale")).lower()
    if mode not in ("binary", "otsu", "adaptive_mean", "adaptive_gaussian"):
        raise ValueError("threshold mode must be binary, otsu, adaptive_mean, or adaptive_gaussian.")
    if color_mode == "grayscale":
        used, binary = _thresholder(mode, params)(_gray(image))
        if invert:
            binary = 255 - binary
        white = int(np.sum(binary == 255))
        info = {"mode": mode, "color_mode": "grayscale", "threshold": float(used), "white_pixels": white,
                "white_ratio": float(white) / binary.size, "invert": invert}
        return _as_bgr(binary), _info(f"Applied {mode} threshold (grayscale mode).", info)
    if color_mode == "bgr":
        channels = params.get("channels", ALL_CHANNELS)
        apply = _thresholder(mode, params)
        result = image.copy()
        for ch in _selected(channels):
            result[:, :, ch] = apply(image[:, :, ch])[1]
        if invert:
            result = 255 - result
        white = int(np.sum(result == 255))
        info = {"mode": mode, "color_mode": "bgr", "channels": channels, "white_pixels": white,
                "white_ratio": float(white) / result.size, "invert": invert}
        return result, _info(f"Applied {mode} threshold to BGR channels {channels}.", info)
    raise ValueError("color_mode must be 'grayscale' or 'bgr'.")


KERNEL_SHAPES = {"ellipse": cv2.MORPH_ELLIPSE, "rect": cv2.MORPH_RECT}


def morphology(image, params):
    op = str(params.get("op", "open")).lower()
    size = _clamp(_odd_up(int(params.get("kernel_size", 3))), 3, 21)
    iterations = _clamp(int(params.get("iterations", 1)), 1, 10)
    shape = str(params.get("kernel_shape", "rect")).lower()
    if shape not in KERNEL_SHAPES:
        raise ValueError("kernel_shape must be 'rect' or 'ellipse'.")
    kernel = cv2.getStructuringElement(KERNEL_SHAPES[shape], (size, size))
    if op == "erode":
        result = cv2.erode(image, kernel, iterations=iterations)
    elif op == "dilate":
        result = cv2.dilate(image, kernel, iterations=iterations)
    elif op in ("open", "close"):
        result = cv2.morphologyEx(image, cv2.MORPH_OPEN if op == "open" else cv2.MORPH_CLOSE, kernel, iterations=iterations)
    else:
        raise ValueError("morphology op must be 'erode', 'dilate', 'open', or 'close'.")
    info = {"op": op, "kernel_size": size, "kernel_shape": shape, "iterations": iterations}
    return result, _info(f"Applied {op} with {shape} kernel {size}x{size} for {iterations} iterations.", info)


def gradients(image, params):
    gray = _gray(image)
    mode = params.get("mode", "sobel_x").lower()
    if mode == "sobel_x":
        grad = cv2.Sobel(gray, cv2.CV_64F, 1, 0, ksize=3)
    elif mode == "sobel_y":
        grad = cv2.Sobel(gray, cv2.CV_64F, 0, 1, ksize=3)
    elif mode == "laplacian":
        grad = cv2.Laplacian(gray, cv2.CV_64F)
    else:
        raise ValueError("gradient mode must be sobel_x, sobel_y, or laplacian.")
    return _as_bgr(cv2.convertScaleAbs(grad)), f"Computed {mode} gradient."


CANNY_PRESETS = {"low": (50, 100), "medium": (100, 200), "high": (150, 250)}


def canny(image, params):
    """Thresholds: both custom values (clamped, ordered), else the preset, else 'medium (default)'."""
    color_mode = str(params.get("color_mode", "grayscale")).lower()
    preset = str(params.get("preset", "medium")).lower()
    if "threshold_low" in params and "threshold_high" in params:
        low, high = sorted(_clamp(int(params.get(key)), 0, 255) for key in ("threshold_low", "threshold_high"))
        preset_name = "custom"
    elif preset in CANNY_PRESETS:
        (low, high), preset_name = CANNY_PRESETS[preset], preset
    else:
        (low, high), preset_name = CANNY_PRESETS["medium"], "medium (default)"
    if color_mode == "grayscale":
        edges = cv2.Canny(_gray(image), low, high)
        count = int(np.count_nonzero(edges))
        info = {"preset": preset_name, "color_mode": "grayscale", "thresholds": [low, high], "edge_pixels": count,
                "edge_ratio": float(count / edges.size)}
        return _as_bgr(edges), _info(f"Applied Canny edges ({low}, {high}) in grayscale mode.", info)
    if color_mode == "bgr":
        channels = params.get("channels", ALL_CHANNELS)
        result = np.zeros_like(image)
        count = 0
        for ch in _selected(channels):
            result[:, :, ch] = cv2.Canny(image[:, :, ch], low, high)
            count += int(np.count_nonzero(result[:, :, ch]))
        info = {"preset": preset_name, "color_mode": "bgr", "channels": channels, "thresholds": [low, high],
                "edge_pixels": count, "edge_ratio": float(count / result.size)}
        return result, _info(f"Applied Canny edges ({low}, {high}) to BGR channels {channels}.", info)
    raise ValueError("color_mode must be 'grayscale' or 'bgr'.")


def _clahe_plane(clahe, plane: np.ndarray, tile_grid: tuple) -> np.ndarray:
    """CLAHE of one plane. A tile grid with a zero side makes OpenCV divide by zero and kills the
    reference's process (SIGFPE); here it is that call's error instead."""
    if any(side == 0 for side in tile_grid):
        raise ValueError(f"tile_grid_size {list(tile_grid)} has a zero side: CLAHE needs at least one tile per side.")
    return clahe.apply(plane)


def histogram(image, params):
    """Equalization or CLAHE of the gray image, of the listed BGR channels, or of HSV's V channel."""
    mode = params.get("mode", "equalize").lower()
    color_mode = params.get("color_mode", "grayscale").lower()
    if mode not in ("equalize", "clahe"):
        raise ValueError("histogram mode must be 'equalize' or 'clahe'.")
    clip_limit = params.get("clip_limit", 2.0)
    tile_grid = tuple(params.get("tile_grid_size", [8, 8]))
    if mode == "equalize":
        apply, name, settings = cv2.equalizeHist, "histogram equalization", ""
    else:
        clahe = cv2.createCLAHE(clipLimit=clip_limit, tileGridSize=tile_grid)
        apply = lambda plane: _clahe_plane(clahe, plane, tile_grid)  # noqa: E731
        name, settings = "CLAHE", f"clipLimit={clip_limit}, tileGridSize={tile_grid}"
    if color_mode == "grayscale":
        return _as_bgr(apply(_gray(image))), f"Applied {name} ({', '.join(filter(None, ('grayscale mode', settings)))})."
    suffix = f" ({settings})." if settings else "."
    if color_mode == "bgr":
        channels = params.get("channels", ALL_CHANNELS)
        result = image.copy()
        for ch in _selected(channels):
            result[:, :, ch] = apply(image[:, :, ch])
        return result, f"Applied {name} to BGR channels {channels}{suffix}"
    if color_mode == "hsv":
        hsv = cv2.cvtColor(image, cv2.COLOR_BGR2HSV)
        hsv[:, :, 2] = apply(hsv[:, :, 2])
        return cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR), f"Applied {name} to HSV V channel{suffix}"
    raise ValueError("color_mode must be 'grayscale', 'bgr', or 'hsv'.")


def convertscaleabs(image, params):
    alpha, beta = float(params.get("alpha", 1.0)), float(params.get("beta", 0))
    if alpha <= 0:
        raise ValueError(f"alpha must be positive, got {alpha}.")
    scaled = cv2.convertScaleAbs(image.astype(np.float32) * alpha + beta)
    info = {"alpha": alpha, "beta": beta, "output_range": [0, 255], "data_type": "uint8"}
    return scaled, _info(f"Applied convertScaleAbs with alpha={alpha}, beta={beta}.", info)


def _window(value, default: int, low: int, high: int) -> int:
    """A non-local-means window: out of range resets to the default, even sizes go up by one."""
    try:
        size = int(value)
    except Exception:  # noqa: BLE001 - the reference falls back on any failure
        size = default
    if size < low or size > high:
        size = default
    return _odd_up(size)


def _strength(params, key: str) -> float:
    try:
        value = float(params.get(key, 10))
    except (TypeError, ValueError):
        value = 10.0
    return _clamp(value, 1.0, 50.0)


def denoise(image, params):
    mode = str(params.get("mode", "fast_means_color")).lower()
    if mode not in ("fast_means_gray", "fast_means_color", "fast_means_bgr_channel"):
        raise ValueError("denoise mode must be fast_means_gray, fast_means_color, or fast_means_bgr_channel.")
    channels = params.get("channels", ALL_CHANNELS)
    h = _strength(params, "h")
    h_color = _strength(params, "h_color") if mode == "fast_means_color" else None
    template = _window(params.get("template_window", 7), 7, 3, 21)
    search = _window(params.get("search_window", 21), 21, 3, 31)
    windows = {"template_window": int(template), "search_window": int(search)}
    if mode == "fast_means_gray":
        result = _as_bgr(cv2.fastNlMeansDenoising(_gray(image), None, h, template, search))
        return result, _info("Applied fastNlMeansDenoising (grayscale).", {"mode": mode, "h": float(h), **windows})
    if mode == "fast_means_color":
        result = cv2.fastNlMeansDenoisingColored(image, None, h, h_color, template, search)
        info = {"mode": mode, "h": float(h), "h_color": float(h_color), **windows}
        return result, _info("Applied fastNlMeansDenoisingColored.", info)
    result = image.copy()
    for ch in _selected(channels):
        result[:, :, ch] = cv2.fastNlMeansDenoising(image[:, :, ch], None, h, template, search)
    info = {"mode": mode, "channels": channels, "h": float(h), **windows}
    return result, _info(f"Applied fastNlMeansDenoising to BGR channels {channels}.", info)


INPAINT_METHODS = {"telea": cv2.INPAINT_TELEA, "ns": cv2.INPAINT_NS}


def inpaint(image, params):
    """The mask comes from the image itself: dilated Canny edges, or the pixels above a gray threshold."""
    preset = str(params.get("preset", "canny")).lower()
    radius = _clamp(int(params.get("radius", 3)), 1, 10)
    method = str(params.get("method", "telea")).lower()
    if method not in INPAINT_METHODS:
        raise ValueError("inpaint method must be 'telea' or 'ns'.")
    if preset == "canny":
        low, high = sorted(_clamp(int(params.get(key, default)), 0, 255) for key, default in (("canny_low", 100), ("canny_high", 200)))
        mask = cv2.dilate(cv2.Canny(_gray(image), low, high), np.ones((3, 3), np.uint8), iterations=1)
        detail = f"Canny ({low}, {high})"
    elif preset == "threshold":
        value = _clamp(int(params.get("threshold_value", 127)), 0, 255)
        mask = cv2.threshold(_gray(image), value, 255, cv2.THRESH_BINARY)[1]
        detail = f"threshold ({value})"
    else:
        raise ValueError("inpaint preset must be 'canny' or 'threshold'.")
    result = cv2.inpaint(image, mask, radius, INPAINT_METHODS[method])
    info = {"preset": preset, "mask_strategy": detail, "radius": radius, "method": method}
    return result, _info(f"Inpainted regions using {preset} mask.", info)


def dft(image, params):
    """Log magnitude spectrum, 20*log(|F| + 1e-5), min-max stretched and truncated to uint8. The shift
    also swaps the real and imaginary planes, which the magnitude does not see."""
    spectrum = np.fft.fftshift(cv2.dft(np.float32(_gray(image)), flags=cv2.DFT_COMPLEX_OUTPUT))
    magnitude = 20 * np.log(cv2.magnitude(spectrum[:, :, 0], spectrum[:, :, 1]) + 1e-5)
    magnitude = cv2.normalize(magnitude, None, 0, 255, cv2.NORM_MINMAX)
    return _as_bgr(magnitude.astype(np.uint8)), "Computed DFT magnitude spectrum."


# -- analysis ---------------------------------------------------------------------------------------------------------
def inrange_color(image, params):
    colorspace = str(params.get("colorspace", "hsv")).lower()
    output = str(params.get("output_format", "both")).lower()
    lower, upper = params.get("lower"), params.get("upper")
    if not all(isinstance(bound, (list, tuple)) and len(bound) == 3 for bound in (lower, upper)):
        raise ValueError("lower and upper must be lists of three integers, e.g., lower:[0,50,50], upper:[10,255,255]")
    lower, upper = np.array(lower, dtype=np.uint8), np.array(upper, dtype=np.uint8)
    if colorspace not in ("hsv", "bgr"):
        raise ValueError("colorspace must be 'hsv' or 'bgr'.")
    mask = cv2.inRange(cv2.cvtColor(image, cv2.COLOR_BGR2HSV) if colorspace == "hsv" else image.copy(), lower, upper)
    count = int(np.count_nonzero(mask))
    if output == "mask" or (output == "both" and count == 0):
        result = _as_bgr(mask)
    elif output in ("masked_image", "both"):
        result = cv2.bitwise_and(image, image, mask=mask)
    else:
        raise ValueError("output_format must be 'mask', 'masked_image', or 'both'.")
    info = {"colorspace": colorspace, "lower": lower.tolist(), "upper": upper.tolist(), "output_format": output,
            "mask_pixels": count, "mask_ratio": float(count / mask.size)}
    return result, _info(f"Applied color range mask ({colorspace}).", info)


def _contours_ranked(image, params):
    """All contours of the Canny edges, and the records `rank` (1 = largest area; out of range: 1) or the
    first `max_contours` (<= 0: all) select, largest area first."""
    canny_low, canny_high = int(params.get("canny_low", 100)), int(params.get("canny_high", 200))
    edges = cv2.Canny(_gray(image), canny_low, canny_high)
    mode = str(params.get("mode", "external")).lower()
    contours, _ = cv2.findContours(edges, cv2.RETR_EXTERNAL if mode == "external" else cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    records = []
    for index, contour in enumerate(contours):
        x, y, w, h = cv2.boundingRect(contour)
        records.append({"index": index, "contour": contour, "area": float(cv2.contourArea(contour)),
                        "bbox": {"x": int(x), "y": int(y), "width": int(w), "height": int(h)}})
    records.sort(key=lambda record: record["area"], reverse=True)
    rank = params.get("rank")
    max_contours = _int_or(params.get("max_contours", 20), 20)
    if rank is not None:
        rank = _int_or(rank, 1)
        rank = rank if 1 <= rank <= len(records) else 1
        selected = records[rank - 1:rank]
    else:
        selected = records[:max_contours] if max_contours > 0 else records
    info = {"total_contours": len(contours), "returned_contours": len(selected), "mode": mode,
            "canny": {"low": canny_low, "high": canny_high},
            "contours": [{"index": r["index"], "area": r["area"], "bbox": r["bbox"]} for r in selected]}
    return contours, selected, info


def _pen(params, default: tuple) -> tuple[tuple, int]:
    return _bgr(params.get("color", default), default), max(1, _int_or(params.get("thickness", 2), 2))


def _label(canvas, text: str, at: tuple, color: tuple) -> None:
    cv2.putText(canvas, text, at, cv2.FONT_HERSHEY_SIMPLEX, 0.5, color, 1, cv2.LINE_AA)


def contours(image, params):
    """Every contour is drawn (green, 2 px), whatever rank / max_contours select for the message."""
    found, _, info = _contours_ranked(image, params)
    canvas = image.copy()
    if found:
        canvas = cv2.drawContours(canvas, found, -1, GREEN, 2)
    return canvas, _info(f"Found {info['total_contours']} contours, returned {info['returned_contours']}.", info)


def contour_area(image, params):
    _, selected, info = _contours_ranked(image, params)
    color, thickness = _pen(params, BLUE)
    canvas = image.copy()
    areas = []
    for record in selected:
        box = record["bbox"]
        areas.append({"index": record["index"], "area": record["area"], "bbox": box})
        cv2.drawContours(canvas, [record["contour"]], -1, color, thickness)
        _label(canvas, f"{record['area']:.1f}", (box["x"], max(0, box["y"] - 5)), color)
    info.update(areas=areas, measurement="contour_area")
    return canvas, _info("Calculated contour areas with cv2.contourArea.", info)


def arc_length(image, params):
    _, selected, info = _contours_ranked(image, params)
    color, thickness = _pen(params, RED)
    canvas = image.copy()
    perimeters = []
    for record in selected:
        box = record["bbox"]
        perimeter = float(cv2.arcLength(record["contour"], True))
        perimeters.append({"index": record["index"], "perimeter": perimeter, "bbox": box})
        cv2.drawContours(canvas, [record["contour"]], -1, color, thickness)
        _label(canvas, f"{perimeter:.1f}", (int(box["x"] + box["width"] / 2), int(box["y"] + box["height"] / 2)), color)
    info.update(perimeters=perimeters, measurement="arc_length")
    return canvas, _info("Computed contour perimeters with cv2.arcLength.", info)


def approx_poly(image, params):
    _, selected, info = _contours_ranked(image, params)
    try:
        ratio = float(params.get("epsilon_ratio", 0.02))
    except (TypeError, ValueError):
        ratio = 0.02
    ratio = max(0.0, ratio)
    color, thickness = _pen(params, MAGENTA)
    canvas = image.copy()
    polygons = []
    for record in selected:
        epsilon = ratio * cv2.arcLength(record["contour"], True)
        approx = cv2.approxPolyDP(record["contour"], epsilon, True)
        points = []
        if approx is not None and approx.size > 0:
            cv2.drawContours(canvas, [approx], -1, color, thickness)
            center = np.mean(approx.reshape(-1, 2), axis=0)
            _label(canvas, f"{len(approx)}pts", (int(center[0]), int(center[1])), color)
            points = approx.reshape(-1, 2).astype(int).tolist()
        polygons.append({"index": record["index"], "points_count": len(points), "points": points, "bbox": record["bbox"],
                         "epsilon": float(epsilon)})
    info.update(approx=polygons, epsilon_ratio=float(ratio), measurement="approx_poly_dp")
    return canvas, _info("Approximated contours with cv2.approxPolyDP.", info)


MATCH_METHODS = {"sqdiff": cv2.TM_SQDIFF, "ccorr": cv2.TM_CCORR_NORMED, "ccoeff": cv2.TM_CCOEFF_NORMED}


def template_match(image, params, load: Callable[[str], np.ndarray]):
    """`load` reads the template as the tool reads its image (BGR). The best match is boxed in red."""
    path = params.get("template_path")
    method = str(params.get("method", "ccorr")).lower()
    if method not in MATCH_METHODS:
        raise ValueError("template match method must be sqdiff, ccorr, or ccoeff.")
    if not path:
        raise ValueError("template_path is required for template_match.")
    template = load(path)
    low, high, low_at, high_at = cv2.minMaxLoc(cv2.matchTemplate(image, template, MATCH_METHODS[method]))
    (x, y), score = (low_at, low) if method == "sqdiff" else (high_at, high)
    h, w = template.shape[:2]
    canvas = image.copy()
    cv2.rectangle(canvas, (x, y), (x + w, y + h), RED, 2)
    info = {"method": method, "score": float(score), "bbox": {"x": int(x), "y": int(y), "width": int(w), "height": int(h)},
            "top_left": {"x": int(x), "y": int(y)}, "bottom_right": {"x": int(x + w), "y": int(y + h)},
            "template_size": {"width": int(w), "height": int(h)}}
    return canvas, _info(f"Template match ({method}) score {score:.3f}.", info)


def hough_lines(image, params):
    """Probabilistic Hough on the Canny edges; every segment is drawn in red, the longest are listed.
    The reference unpacks `line[0]` of OpenCV 4's (N, 1, 4) result, which fails on OpenCV 5's (N, 4):
    this is what it does under OpenCV 4."""
    canny_low, canny_high = int(params.get("canny_low", 80)), int(params.get("canny_high", 200))
    edges = cv2.Canny(_gray(image), canny_low, canny_high)
    votes, min_length, max_gap = (int(params.get(key, default)) for key, default in (("threshold", 80), ("minLineLength", 50), ("maxLineGap", 10)))
    if votes <= 0:
        raise ValueError("threshold must be positive.")
    if min_length <= 0:
        raise ValueError("minLineLength must be positive.")
    if max_gap < 0:
        raise ValueError("maxLineGap must be non-negative.")
    found = cv2.HoughLinesP(edges, 1, np.pi / 180, threshold=votes, minLineLength=min_length, maxLineGap=max_gap)
    canvas = image.copy()
    lines = []
    for x1, y1, x2, y2 in ([] if found is None else found.reshape(-1, 4).tolist()):
        lines.append({"p1": {"x": x1, "y": y1}, "p2": {"x": x2, "y": y2}, "length": float(np.hypot(x2 - x1, y2 - y1))})
        cv2.line(canvas, (x1, y1), (x2, y2), RED, 2)
    lines.sort(key=lambda line: line["length"], reverse=True)
    max_lines = int(params.get("max_lines", 20))
    listed = lines[:max_lines] if max_lines > 0 else lines
    info = {"total_lines": len(lines), "returned_lines": len(listed), "lines": listed,
            "parameters": {"threshold": votes, "minLineLength": min_length, "maxLineGap": max_gap,
                           "canny_low": canny_low, "canny_high": canny_high}}
    return canvas, _info(f"Detected {len(lines)} line segments, returned {len(listed)} (threshold={votes}, "
                         f"minLineLength={min_length}).", info)


def hough_circles(image, params):
    """Circles on the median-blurred gray image, rounded to uint16, drawn green with a blue center; the
    count in the message is after the `max_circles` cut."""
    blurred = cv2.medianBlur(_gray(image), 5)
    dp = float(params.get("dp", 1.2))
    min_dist, param1, param2, min_radius, max_radius = (
        int(params.get(key, default)) for key, default in (("minDist", 50), ("param1", 100), ("param2", 50), ("minRadius", 10), ("maxRadius", 0)))
    for ok, rule in ((dp > 0, "dp must be positive."), (min_dist > 0, "minDist must be positive."),
                     (param1 > 0, "param1 must be positive."), (param2 > 0, "param2 must be positive."),
                     (min_radius >= 0, "minRadius must be non-negative."), (max_radius >= 0, "maxRadius must be non-negative."),
                     (not 0 < max_radius < min_radius, "maxRadius must be >= minRadius.")):
        if not ok:
            raise ValueError(rule)
    found = cv2.HoughCircles(blurred, cv2.HOUGH_GRADIENT, dp=dp, minDist=min_dist, param1=param1, param2=param2,
                             minRadius=min_radius, maxRadius=max_radius)
    canvas = image.copy()
    circles = []
    for x, y, r in ([] if found is None else np.uint16(np.around(found))[0].tolist()):
        circles.append({"center": {"x": x, "y": y}, "radius": r})
        cv2.circle(canvas, (x, y), r, GREEN, 2)
        cv2.circle(canvas, (x, y), 2, BLUE, 3)
    circles.sort(key=lambda circle: circle["radius"], reverse=True)
    max_circles = int(params.get("max_circles", 20))
    if max_circles > 0:
        circles = circles[:max_circles]
    info = {"total_circles": len(circles), "circles": circles,
            "parameters": {"dp": dp, "minDist": min_dist, "param1": param1, "param2": param2, "minRadius": min_radius,
                           "maxRadius": max_radius if max_radius > 0 else None}}
    return canvas, _info(f"Detected {len(circles)} circles (param2={param2}, minDist={min_dist}).", info)


def watershed(image, params):
    """Marker watershed from Otsu's foreground (opening, distance transform at half its maximum);
    boundaries are painted blue. Labels -1 (boundary) and 1 (background) are not regions."""
    canvas = image.copy()
    kernel = np.ones((3, 3), np.uint8)
    opened = cv2.morphologyEx(cv2.threshold(_gray(canvas), 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)[1], cv2.MORPH_OPEN, kernel, iterations=2)
    background = cv2.dilate(opened, kernel, iterations=3)
    distance = cv2.distanceTransform(opened, cv2.DIST_L2, 5)
    foreground = np.uint8(cv2.threshold(distance, 0.5 * distance.max(), 255, 0)[1])
    unknown = cv2.subtract(background, foreground)
    markers = cv2.connectedComponents(foreground)[1] + 1
    markers[unknown == 255] = 0
    cv2.watershed(canvas, markers)
    canvas[markers == -1] = [255, 0, 0]
    regions = [int(label) for label in np.unique(markers) if label not in (-1, 1)]
    max_regions = int(params.get("max_regions", 20))
    listed = regions[:max_regions] if max_regions > 0 else regions
    info = {"total_regions": len(regions), "returned_regions": len(listed), "labels": listed}
    return canvas, _info(f"Applied watershed segmentation. Found {len(regions)} regions, returned {len(listed)}.", info)


GRABCUT_RECTS = {"center": (0.1, 0.8), "tight": (0.2, 0.6), "loose": (0.05, 0.9)}  # (offset, size) as image fractions


def grabcut(image, params):
    preset = str(params.get("preset", "center")).lower()
    if preset not in GRABCUT_RECTS:
        raise ValueError("grabcut preset must be center, tight, or loose.")
    h, w = image.shape[:2]
    offset, size = GRABCUT_RECTS[preset]
    rect = (int(w * offset), int(h * offset), int(w * size), int(h * size))
    mask = np.zeros((h, w), np.uint8)
    cv2.grabCut(image, mask, rect, np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64), 5, cv2.GC_INIT_WITH_RECT)
    foreground = np.where((mask == cv2.GC_BGD) | (mask == cv2.GC_PR_BGD), 0, 1).astype(np.uint8)
    pixels = int(foreground.sum())
    info = {"preset": preset, "rect": list(rect), "foreground_pixels": pixels, "foreground_ratio": float(pixels / (h * w))}
    return image * foreground[:, :, np.newaxis], _info(f"Applied GrabCut with {preset} rectangle.", info)


def _max_points(params) -> int:
    try:
        return int(params.get("max_points", 50)) if params else 50
    except Exception:  # noqa: BLE001 - the reference falls back on any failure
        return 50


def _keypoints(name: str, keypoints, limit: int) -> str:
    coords = [[int(k.pt[0]), int(k.pt[1])] for k in keypoints[:limit]]
    return f"{name} keypoints: {len(keypoints)}. Returned {len(coords)} points: {json.dumps(coords)}"


def features(image, params):
    """Keypoints drawn on the image. Shi-Tomasi truncates corners with np.intp, as numpy 1's np.int0
    (the reference's spelling, gone in numpy 2) did. SURF and BRIEF need opencv-contrib, which the
    pinned headless build does not have."""
    method = params.get("method", "orb").lower()
    gray = _gray(image)
    canvas = image.copy()
    if method == "harris":
        response = cv2.dilate(cv2.cornerHarris(np.float32(gray), 2, 3, 0.04), None)
        corners = np.argwhere(response > 0.01 * response.max())
        ranked = sorted(((response[y, x], (x, y)) for y, x in corners), reverse=True)
        limit = _max_points(params)
        if len(ranked) > limit:
            ranked = ranked[:limit]
        points = []
        for _, (x, y) in ranked:
            cv2.circle(canvas, (int(x), int(y)), 3, RED, -1)
            points.append([int(x), int(y)])
        return canvas, f"Harris corners: {len(corners)} detected, returned {len(points)}. Points: {json.dumps(points)}"
    if method == "shi_tomasi":
        corners = cv2.goodFeaturesToTrack(gray, maxCorners=200, qualityLevel=0.01, minDistance=5)
        corners = [] if corners is None else corners.astype(np.intp).reshape(-1, 2).tolist()
        points = corners[:_max_points(params)]
        for x, y in points:
            cv2.circle(canvas, (x, y), 3, GREEN, -1)
        return canvas, f"Shi-Tomasi corners: {len(corners)}. Returned {len(points)} points: {json.dumps(points)}"
    if method == "sift":
        keypoints = cv2.SIFT_create().detectAndCompute(gray, None)[0]
        canvas = cv2.drawKeypoints(image, keypoints, None, flags=cv2.DRAW_MATCHES_FLAGS_DRAW_RICH_KEYPOINTS)
        return canvas, _keypoints("SIFT", keypoints, _max_points(params))
    if method in ("surf", "brief"):
        raise ValueError(f"{method.upper()} requires xfeatures2d (contrib) build.")
    if method == "fast":
        keypoints = cv2.FastFeatureDetector_create().detect(gray, None)
        canvas = cv2.drawKeypoints(image, keypoints, None, color=BLUE)
        return canvas, _keypoints("FAST", keypoints, _max_points(params))
    if method == "orb":
        keypoints = cv2.ORB_create().detectAndCompute(gray, None)[0]
        canvas = cv2.drawKeypoints(image, keypoints, None, color=GREEN, flags=0)
        return canvas, _keypoints("ORB", keypoints, _max_points(params))
    raise ValueError("feature method must be one of: harris, shi_tomasi, sift, surf, fast, brief, orb.")


def floodfill(image, params):
    """cv2.floodFill from (x, y); difference and color lists shorter than 3 fall back to the defaults,
    longer ones are cut to 3. `flags` is OpenCV's (default 4-connected, fixed range)."""
    h, w = image.shape[:2]
    try:
        x, y = int(params.get("x", 0)), int(params.get("y", 0))
    except (ValueError, TypeError):
        raise ValueError("floodFill parameters x and y must be integers.") from None
    if not (0 <= x < w and 0 <= y < h):
        raise ValueError(f"Seed point ({x}, {y}) is out of image bounds. Image size: {w}x{h}.")

    def triple(key, default):
        value = params.get(key, list(default))
        return (tuple(value[:3]) if len(value) >= 3 else default) if isinstance(value, list) else value

    lo_diff, up_diff, new_val = triple("loDiff", (10, 10, 10)), triple("upDiff", (10, 10, 10)), triple("newVal", GREEN)
    flags = _int_or(params.get("flags", 4 | cv2.FLOODFILL_FIXED_RANGE), 4 | cv2.FLOODFILL_FIXED_RANGE)
    mask = np.zeros((h + 2, w + 2), np.uint8)
    _, filled_image, mask, rect = cv2.floodFill(image.copy(), mask, (x, y), new_val, lo_diff, up_diff, flags)
    filled = int(np.sum(mask[1:-1, 1:-1] > 0))
    ratio = float(filled) / (h * w)
    info = {"seed_point": {"x": x, "y": y}, "filled_pixels": filled, "fill_ratio": ratio,
            "new_color": list(new_val) if isinstance(new_val, tuple) else new_val,
            "rect": {"x": int(rect[0]), "y": int(rect[1]), "width": int(rect[2]), "height": int(rect[3])}}
    return filled_image, _info(f"Flood fill from seed point ({x}, {y}), filled {filled} pixels ({ratio * 100:.2f}%).", info)


def connected_components_with_stats(image, params):
    """Components of the binarized gray image; every one is boxed green with a red centroid dot, the
    largest `max_components` (<= 0: all) are listed."""
    gray = _gray(image)
    mode = str(params.get("threshold_mode", "otsu")).lower()
    connectivity = int(params.get("connectivity", 8))
    if mode == "otsu":
        binary = cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)[1]
    elif mode == "binary":
        binary = cv2.threshold(gray, int(params.get("threshold_value", 127)), 255, cv2.THRESH_BINARY)[1]
    elif mode == "none":
        binary = gray
    else:
        raise ValueError("threshold_mode must be one of: otsu, binary, none.")
    if connectivity not in (4, 8):
        raise ValueError("connectivity must be 4 or 8.")
    count, _, stats, centroids = cv2.connectedComponentsWithStats(binary, connectivity=connectivity)
    canvas = image.copy()
    components = []
    for label in range(1, count):
        x, y, w, h, area = (int(v) for v in stats[label, :5])
        cx, cy = float(centroids[label, 0]), float(centroids[label, 1])
        cv2.rectangle(canvas, (x, y), (x + w, y + h), GREEN, 2)
        cv2.circle(canvas, (int(cx), int(cy)), 3, RED, -1)
        components.append({"label": label, "bbox": {"x": x, "y": y, "width": w, "height": h}, "area": area,
                           "centroid": {"x": cx, "y": cy}})
    components.sort(key=lambda component: component["area"], reverse=True)
    max_components = int(params.get("max_components", 20))
    if max_components > 0:
        components = components[:max_components]
    info = {"total_components": count - 1, "returned_components": len(components), "connectivity": connectivity,
            "threshold_mode": mode, "components": components}
    return canvas, _info(f"Found {count - 1} connected components (connectivity={connectivity}).", info)


# -- drawing ----------------------------------------------------------------------------------------------------------
def draw_line(image, params):
    try:
        x1, y1, x2, y2 = (int(params.get(key)) for key in ("x1", "y1", "x2", "y2"))
    except (TypeError, ValueError):
        raise ValueError("x1, y1, x2, y2 must be valid integers.") from None
    color, thickness = _pen(params, GREEN)
    canvas = image.copy()
    cv2.line(canvas, (x1, y1), (x2, y2), color, thickness)
    info = {"start": [x1, y1], "end": [x2, y2], "color": list(color), "thickness": thickness}
    return canvas, _info(f"Drew line from ({x1}, {y1}) to ({x2}, {y2}).", info)


def draw_circle(image, params):
    """The center must lie in the image; thickness is not clamped (-1 fills)."""
    h, w = image.shape[:2]
    try:
        x, y, radius = (int(params.get(key)) for key in ("x", "y", "radius"))
    except (TypeError, ValueError):
        raise ValueError("x, y, and radius must be valid integers.") from None
    if radius <= 0:
        raise ValueError(f"radius must be positive, got {radius}.")
    if not (0 <= x < w and 0 <= y < h):
        raise ValueError(f"Circle center ({x}, {y}) is out of image bounds. Image size: {w}x{h}.")
    color = _bgr(params.get("color", GREEN), GREEN)
    thickness = _int_or(params.get("thickness", 2), 2)
    canvas = image.copy()
    cv2.circle(canvas, (x, y), radius, color, thickness)
    info = {"center": [x, y], "radius": radius, "color": list(color), "thickness": thickness, "filled": thickness == -1}
    return canvas, _info(f"Drew circle at ({x}, {y}) with radius {radius}.", info)


KERNELS: dict[str, Kernel] = {kernel.__name__: kernel for kernel in (
    colorspace_gray, colorspace_hsv, colorspace_lab, resize, rotate, translate, flip, blur, threshold, morphology,
    gradients, canny, pyramid, contours, draw_line, contour_area, arc_length, approx_poly, histogram, dft,
    hough_lines, hough_circles, watershed, grabcut, features, denoise, inpaint, inrange_color, crop, zoom_in,
    floodfill, connected_components_with_stats, convertscaleabs, draw_circle)}
