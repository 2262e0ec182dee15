"""Color and intensity: color-space conversion, grayscale, invert, color range masks, PIL-style
enhancement (brightness, contrast, saturation, sharpness, autocontrast), histogram equalization,
CLAHE, convertScaleAbs, gamma and histogram statistics.

Conventions: images are RGB (or gray) uint8. Color spaces follow OpenCV's 8-bit conventions: hue is
0-179 (degrees / 2) in 'hsv' and 'hls', 0-255 in 'hsv_full'; Lab stores L*255/100 and a, b offset by
128; YCrCb / YUV chroma is offset by 128. Gray input is treated as RGB with R = G = B.

Torch versions: every 8-bit color conversion is exact. Gray (15-bit fixed point) and YCrCb (14-bit)
use OpenCV's integer formulas; the other spaces read a 2^24-entry table built once per device by running
cv2.cvtColor on every RGB color (the same bytes OpenCV produces, in one gather per pixel). Histograms
(equalize, CLAHE tiles, autocontrast, statistics) are per-plane bincounts on offset indices, so a batch
is one launch with no per-image loop.
"""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np
import torch

from tools.ops.kernels import gray_torch, plane_chunks, plane_hist, reflect101
from tools.registry import Op, Param, Tolerance, ToolArgumentError, register

CATEGORY = "color"

# -- color spaces --------------------------------------------------------------------------------------
# space -> (RGB->space code, space->RGB code, channel names)
SPACES = {
    "gray": (cv2.COLOR_RGB2GRAY, None, ("gray",)),
    "hsv": (cv2.COLOR_RGB2HSV, cv2.COLOR_HSV2RGB, ("H", "S", "V")),
    "hsv_full": (cv2.COLOR_RGB2HSV_FULL, cv2.COLOR_HSV2RGB_FULL, ("H", "S", "V")),
    "hls": (cv2.COLOR_RGB2HLS, cv2.COLOR_HLS2RGB, ("H", "L", "S")),
    "lab": (cv2.COLOR_RGB2Lab, cv2.COLOR_Lab2RGB, ("L", "a", "b")),
    "luv": (cv2.COLOR_RGB2Luv, cv2.COLOR_Luv2RGB, ("L", "u", "v")),
    "ycrcb": (cv2.COLOR_RGB2YCrCb, cv2.COLOR_YCrCb2RGB, ("Y", "Cr", "Cb")),
    "yuv": (cv2.COLOR_RGB2YUV, cv2.COLOR_YUV2RGB, ("Y", "U", "V")),
    "xyz": (cv2.COLOR_RGB2XYZ, cv2.COLOR_XYZ2RGB, ("X", "Y", "Z")),
    "bgr": (cv2.COLOR_RGB2BGR, cv2.COLOR_BGR2RGB, ("B", "G", "R")),
}
# The torch tables hold OpenCV's SIMD results. OpenCV converts the last pixels of each row (fewer than a
# SIMD block) with scalar code, which rounds differently by 1 for HSV->RGB (~70% of such pixels) and
# RGB->HLS (~0.03%); all other conversions agree exactly everywhere (tested).
# The value range [0, high) of each channel, for histograms: hue is 0-179 in hsv / hls.
_HUE_180 = ("hsv", "hls")


def _channel_ranges(space: str, channels: int) -> tuple[int, ...]:
    if space in _HUE_180:
        return (180, 256, 256)
    return (256,) * channels


def _to_space_cv(image: np.ndarray, space: str) -> np.ndarray:
    """RGB or gray uint8 image in `space` ('rgb' = unchanged)."""
    if space == "rgb":
        return image
    if image.ndim == 2:
        if space == "gray":
            return image
        image = cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
    return cv2.cvtColor(image, SPACES[space][0])


# Exact OpenCV integer formulas (verified on all 2^24 colors). In-place int32 arithmetic keeps the
# temporaries to one plane each.
def _planes_int(batch: torch.Tensor):
    return batch[:, 0:1].int(), batch[:, 1:2].int(), batch[:, 2:3].int()


def _ycrcb_t(batch: torch.Tensor) -> torch.Tensor:
    """cv2.COLOR_RGB2YCrCb (14-bit fixed point)."""
    r, g, b = _planes_int(batch)
    y = (r * 4899).add_(g.mul_(9617)).add_(b * 1868).add_(1 << 13).bitwise_right_shift_(14)
    cr = r.sub_(y).mul_(11682).add_((128 << 14) + (1 << 13)).bitwise_right_shift_(14)
    cb = b.sub_(y).mul_(9241).add_((128 << 14) + (1 << 13)).bitwise_right_shift_(14)
    return torch.cat([y, cr.clamp_(0, 255), cb.clamp_(0, 255)], 1).to(torch.uint8)


def _ycrcb_to_rgb_t(ycc: torch.Tensor) -> torch.Tensor:
    """cv2.COLOR_YCrCb2RGB (14-bit fixed point)."""
    y, cr, cb = _planes_int(ycc)
    cr.sub_(128)
    cb.sub_(128)
    r = (cr * 22987).add_(1 << 13).bitwise_right_shift_(14).add_(y)
    g = (cb * -5636).add_(cr.mul_(-11698)).add_(1 << 13).bitwise_right_shift_(14).add_(y)
    b = cb.mul_(29049).add_(1 << 13).bitwise_right_shift_(14).add_(y)
    return torch.cat([r, g, b], 1).clamp_(0, 255).to(torch.uint8)


@lru_cache(maxsize=None)
def _host_table(code: int) -> np.ndarray:
    """cv2.cvtColor of every 8-bit color triple, packed c0 << 16 | c1 << 8 | c2 (2^24 int32)."""
    every = np.empty((256, 256, 256, 3), np.uint8)
    ramp = np.arange(256, dtype=np.uint8)
    every[..., 0] = ramp[:, None, None]
    every[..., 1] = ramp[None, :, None]
    every[..., 2] = ramp[None, None, :]
    out = cv2.cvtColor(every.reshape(4096, 4096, 3), code).reshape(-1, 3)
    packed = np.zeros((1 << 24, 4), np.uint8)  # little-endian bytes of c0 << 16 | c1 << 8 | c2
    packed[:, 0], packed[:, 1], packed[:, 2] = out[:, 2], out[:, 1], out[:, 0]
    return packed.view("<i4").reshape(-1)


_TABLES: dict = {}


def _table(code: int, device) -> torch.Tensor:
    key = (code, str(device))
    if key not in _TABLES:
        _TABLES[key] = torch.from_numpy(_host_table(code)).to(device)
    return _TABLES[key]


def _lookup3(batch: torch.Tensor, code: int) -> torch.Tensor:
    """Per-pixel 3-byte -> 3-byte conversion through the cvtColor table of `code`."""
    index = (batch[:, 0].int() << 16) | (batch[:, 1].int() << 8) | batch[:, 2].int()
    packed = _table(code, batch.device)[index]
    return torch.stack([(packed >> 16) & 255, (packed >> 8) & 255, packed & 255], 1).to(torch.uint8)


def _as_rgb_t(batch: torch.Tensor) -> torch.Tensor:
    return batch.expand(-1, 3, -1, -1) if batch.shape[1] == 1 else batch


def to_space_t(batch: torch.Tensor, space: str) -> torch.Tensor:
    """(N, C, H, W) RGB/gray uint8 -> (N, C', H, W) in `space` (exact)."""
    if space == "rgb":
        return batch
    if space == "gray":
        return batch if batch.shape[1] == 1 else gray_torch(batch)
    rgb = _as_rgb_t(batch)
    if space == "bgr":
        return rgb.flip(1)
    if space == "ycrcb":
        return _ycrcb_t(rgb)
    return _lookup3(rgb, SPACES[space][0])


def from_space_t(batch: torch.Tensor, space: str) -> torch.Tensor:
    if space == "ycrcb":
        return _ycrcb_to_rgb_t(batch)
    if space == "bgr":
        return batch.flip(1)
    return _lookup3(batch, SPACES[space][1])


# -- per-plane histograms and lookup tables (batched) ----------------------------------------------------
def apply_plane_lut(planes: torch.Tensor, lut: torch.Tensor) -> torch.Tensor:
    """out[p, ...] = lut[p, planes[p, ...]] for uint8 planes (P, ...) and a (P, 256) uint8 table."""
    p = planes.shape[0]
    flat = planes.reshape(p, -1)
    m = flat.shape[1]
    table = lut.reshape(-1)
    out = torch.empty_like(flat)
    for a, b in plane_chunks(p, m):
        offsets = torch.arange(a, b, device=planes.device, dtype=torch.int32).mul_(256).view(-1, 1)
        out[a:b] = table[flat[a:b].int() + offsets]
    return out.view_as(planes)


# -- shared: apply a per-plane intensity transform in a chosen color mode --------------------------------
MODES = ("luma", "lightness", "value", "per_channel", "gray")
# mode -> (space, channel index transformed)
_MODE_SPACE = {"luma": ("ycrcb", 0), "lightness": ("lab", 0), "value": ("hsv", 2)}
_MODE_DOC = (
    "How a color image is processed: 'luma' = the Y channel of YCrCb (keeps hue), 'lightness' = the L "
    "channel of Lab, 'value' = the V channel of HSV, 'per_channel' = each RGB channel listed in "
    "`channels` independently (colors may shift), 'gray' = convert to gray first (1-channel output). "
    "Gray images are always processed directly."
)
CHANNELS = Param("channels", "ints", "RGB channel indices (0 = R, 1 = G, 2 = B) processed in 'per_channel' mode.",
                 (0, 1, 2), 0, 2)


def _check_channels(op: str, channels) -> None:
    if not channels or len(set(channels)) != len(channels):
        raise ToolArgumentError(op, "channels", f"must list 1-3 distinct indices from 0, 1, 2, got {list(channels)}")


def _modal_cv(image: np.ndarray, mode: str, channels, fn) -> np.ndarray:
    """Apply `fn` (uint8 plane -> uint8 plane) to the planes `mode` selects, OpenCV-style."""
    if image.ndim == 2:
        return fn(image)
    if mode == "gray":
        return fn(cv2.cvtColor(image, cv2.COLOR_RGB2GRAY))
    if mode == "per_channel":
        planes = list(cv2.split(image))
        for c in channels:
            planes[c] = fn(planes[c])
        return cv2.merge(planes)
    space, index = _MODE_SPACE[mode]
    code, back, _ = SPACES[space]
    planes = list(cv2.split(cv2.cvtColor(image, code)))
    planes[index] = fn(planes[index])
    return cv2.cvtColor(cv2.merge(planes), back)


def _modal_t(batch: torch.Tensor, mode: str, channels, fn) -> torch.Tensor:
    """Torch twin of _modal_cv; `fn` maps uint8 planes (P, H, W) -> (P, H, W) for all planes at once."""
    n, c, h, w = batch.shape
    if c == 1 or mode == "gray":
        gray = to_space_t(batch, "gray")
        return fn(gray.reshape(n, h, w)).view(n, 1, h, w)
    if mode == "per_channel":
        chans = list(channels)
        out = batch.clone()
        out[:, chans] = fn(batch[:, chans].reshape(n * len(chans), h, w)).view(n, len(chans), h, w)
        return out
    space, index = _MODE_SPACE[mode]
    conv = to_space_t(batch, space)  # always a new tensor for these spaces
    conv[:, index] = fn(conv[:, index].contiguous())
    return from_space_t(conv, space)


# OpenCV's HSV->RGB (8-bit) gives +-1 different results for the same color depending on whether the
# pixel falls in a SIMD block or in the scalar tail of a row (so on the image width and the CPU). The
# torch table reproduces the SIMD result; only mode 'value' converts back from HSV.
_HSV_BACK = Tolerance(pixel=1, outliers=0.0, mean=0.2,
                      why="mode 'value' only: OpenCV's own HSV->RGB rounds row-tail pixels differently by 1; other modes are exact")
_CLAHE_WHY = "exact on the tested images (float32 tile blend in OpenCV's operation order)"


def _modal_check(op_name):
    def check(args, height, width):
        if args["mode"] == "per_channel":
            _check_channels(op_name, args["channels"])
    return check


# ======================================================================================================
# convert_color
def convert_color_cv(image, space, channel):
    out = _to_space_cv(image, space)
    if channel is None:
        return out
    return out if out.ndim == 2 else np.ascontiguousarray(out[:, :, channel])


def convert_color_torch(batch, space, channel):
    out = to_space_t(batch, space)
    if channel is None or out.shape[1] == 1:
        return out
    return out[:, channel:channel + 1]


def _convert_check(args, height, width):
    if args["space"] == "gray" and args["channel"] not in (None, 0):
        raise ToolArgumentError("convert_color", "channel", f"gray has one channel (0), got {args['channel']}")


register(Op(
    "convert_color",
    "Convert the RGB image to another color space (OpenCV 8-bit conventions) and return the converted "
    "channels as a 3-channel image in the space's channel order ('gray': 1 channel). Ranges: 'hsv' and "
    "'hls' hue 0-179 (degrees / 2), S, V, L 0-255; 'hsv_full' hue 0-255; 'lab' L = L*255/100, a and b "
    "offset by 128; 'ycrcb' / 'yuv' chroma offset by 128; 'xyz' 0-255; 'bgr' swaps R and B. Channel "
    "orders: hsv H,S,V; hls H,L,S; lab L,a,b; luv L,u,v; ycrcb Y,Cr,Cb; yuv Y,U,V; xyz X,Y,Z. "
    "Note: the output holds raw channel values, not a viewable RGB picture. With `channel` "
    "(0, 1 or 2) only that channel is returned, as a gray image (e.g. space='hsv', channel=1 = saturation).",
    (
        Param("space", "str", "Target color space.", choices=tuple(SPACES)),
        Param("channel", "int", "Return only this channel (0-2) as a gray image; omit for all channels.", None, 0, 2),
    ),
    convert_color_cv, convert_color_torch, check=_convert_check, category=CATEGORY,
    tolerance=Tolerance(pixel=1, outliers=0.0, mean=0.002,
                        why="'hls' only: OpenCV's scalar row-tail code rounds ~0.03% of pixels differently by 1; other spaces are exact"),
    examples=(
        {"space": "gray"}, {"space": "hsv"}, {"space": "hsv_full"}, {"space": "hls"}, {"space": "lab"},
        {"space": "luv"}, {"space": "ycrcb"}, {"space": "yuv"}, {"space": "xyz"}, {"space": "bgr"},
        {"space": "hsv", "channel": 0}, {"space": "lab", "channel": 2}, {"space": "gray", "channel": 0},
    ),
))


# ======================================================================================================
# grayscale
def _pil_luma_np(image: np.ndarray) -> np.ndarray:
    """PIL Image.convert('L'): (19595 R + 38470 G + 7471 B + 2^15) >> 16 (ITU-R 601)."""
    x = image.astype(np.uint32)
    return ((x[:, :, 0] * 19595 + x[:, :, 1] * 38470 + x[:, :, 2] * 7471 + 0x8000) >> 16).astype(np.uint8)


def _pil_luma_t(batch: torch.Tensor) -> torch.Tensor:
    r, g, b = batch[:, 0:1].int(), batch[:, 1:2].int(), batch[:, 2:3].int()
    return ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16).to(torch.uint8)


def grayscale_cv(image, method, output_channels):
    if image.ndim == 2:
        gray = image
    elif method == "opencv":
        gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    else:
        gray = _pil_luma_np(image)
    return cv2.cvtColor(gray, cv2.COLOR_GRAY2RGB) if output_channels == 3 else gray


def grayscale_torch(batch, method, output_channels):
    if batch.shape[1] == 1:
        gray = batch
    else:
        gray = gray_torch(batch) if method == "opencv" else _pil_luma_t(batch)
    return gray.expand(-1, 3, -1, -1).contiguous() if output_channels == 3 else gray


register(Op(
    "grayscale",
    "Convert to grayscale by ITU-R 601 luminance 0.299 R + 0.587 G + 0.114 B. 'opencv' rounds like "
    "cv2.COLOR_RGB2GRAY, 'pil' like PIL Image.convert('L') (they differ by at most 1 level). "
    "`output_channels` 1 gives a gray image, 3 repeats it as R = G = B.",
    (
        Param("method", "str", "Rounding convention.", "opencv", choices=("opencv", "pil")),
        Param("output_channels", "int", "1 (gray) or 3 (gray repeated as RGB).", 1, choices=(1, 3)),
    ),
    grayscale_cv, grayscale_torch, category=CATEGORY,
    examples=({}, {"method": "pil"}, {"output_channels": 3}, {"method": "pil", "output_channels": 3}),
))


# ======================================================================================================
# invert
def invert_cv(image):
    return cv2.bitwise_not(image)


def invert_torch(batch):
    return 255 - batch


register(Op(
    "invert", "Invert the image (photographic negative): every channel value x becomes 255 - x.",
    (), invert_cv, invert_torch, category=CATEGORY, examples=({},),
))


# ======================================================================================================
# in_range
_RANGE_SPACES = ("rgb", "hsv", "lab")


def _in_range_mask_cv(image, space, lower, upper):
    if image.ndim == 2 and space == "rgb":  # R = G = B = v: every bound applies to v
        return cv2.inRange(image, max(lower), min(upper))
    conv = _to_space_cv(image if image.ndim == 3 else cv2.cvtColor(image, cv2.COLOR_GRAY2RGB), space)
    if space == "hsv" and lower[0] > upper[0]:  # hue range wraps through 0 (reds)
        low_part = cv2.inRange(conv, (lower[0], lower[1], lower[2]), (255, upper[1], upper[2]))
        high_part = cv2.inRange(conv, (0, lower[1], lower[2]), (upper[0], upper[1], upper[2]))
        return cv2.bitwise_or(low_part, high_part)
    return cv2.inRange(conv, lower, upper)


def in_range_cv(image, space, lower, upper, output):
    mask = _in_range_mask_cv(image, space, lower, upper)
    count = cv2.countNonZero(mask)
    data = {"pixel_count": int(count), "fraction": count / mask.size, "total_pixels": int(mask.size)}
    if output == "mask":
        return mask, data
    return cv2.bitwise_and(image, image, mask=mask), data


def in_range_torch(batch, space, lower, upper, output):
    n, c, h, w = batch.shape
    conv = to_space_t(_as_rgb_t(batch) if space != "rgb" else batch, space)
    if conv.shape[1] == 1:  # gray image in rgb space: R = G = B = v
        lo, hi = max(lower), min(upper)
    else:
        lo = torch.tensor(lower, device=batch.device, dtype=torch.uint8).view(1, 3, 1, 1)
        hi = torch.tensor(upper, device=batch.device, dtype=torch.uint8).view(1, 3, 1, 1)
    inside = (conv >= lo) & (conv <= hi)
    if space == "hsv" and lower[0] > upper[0]:
        inside[:, 0] = (conv[:, 0] >= lower[0]) | (conv[:, 0] <= upper[0])
    mask = inside.all(dim=1, keepdim=True)
    counts = mask.view(n, -1).sum(1).tolist()
    total = h * w
    data = [{"pixel_count": int(k), "fraction": k / total, "total_pixels": total} for k in counts]
    if output == "mask":
        return mask.to(torch.uint8) * 255, data
    return batch * mask, data


def _in_range_check(args, height, width):
    for k, (a, b) in enumerate(zip(args["lower"], args["upper"])):
        if a > b and not (k == 0 and args["space"] == "hsv"):
            raise ToolArgumentError(
                "in_range", "lower", f"lower[{k}] = {a} exceeds upper[{k}] = {b}; give lower <= upper "
                "(only the hsv hue may wrap: lower hue > upper hue selects hue >= lower or <= upper)")


register(Op(
    "in_range",
    "Select the pixels whose color lies inside [lower, upper] (inclusive, per channel; cv2.inRange) in "
    "`space`: 'rgb' bounds are [R, G, B] 0-255; 'hsv' bounds are [H, S, V] in OpenCV units (H 0-179 = "
    "degrees / 2, S and V 0-255), e.g. red-ish [0, 70, 50]-[10, 255, 255], green [35, 50, 50]-[85, 255, 255]; "
    "if lower H > upper H the hue range wraps around (e.g. [170, 70, 50]-[10, 255, 255] = all reds); "
    "'lab' bounds are [L*255/100, a+128, b+128]. Output image: 'mask' (white = selected, black = not) or "
    "'masked' (the original colors where selected, black elsewhere). Data: pixel_count and fraction "
    "(0-1) of the image selected, total_pixels — use it for 'what share of the image is <color>'.",
    (
        Param("space", "str", "Color space of the bounds.", "hsv", choices=_RANGE_SPACES),
        Param("lower", "ints", "Lower bound per channel (inclusive).", low=0, high=255, length=3),
        Param("upper", "ints", "Upper bound per channel (inclusive).", low=0, high=255, length=3),
        Param("output", "str", "'mask' or 'masked' (image kept where selected).", "mask", choices=("mask", "masked")),
    ),
    in_range_cv, in_range_torch, check=_in_range_check, category=CATEGORY,
    examples=(
        {"lower": [0, 50, 50], "upper": [30, 255, 255]},
        {"lower": [160, 40, 40], "upper": [20, 255, 255], "output": "masked"},
        {"space": "rgb", "lower": [100, 0, 0], "upper": [255, 120, 200]},
        {"space": "rgb", "lower": [60, 60, 60], "upper": [200, 200, 200], "output": "masked"},
        {"space": "lab", "lower": [50, 100, 100], "upper": [220, 160, 170]},
    ),
))


# ======================================================================================================
# PIL ImageEnhance: out = blend(degenerate, image, factor), computed in float32 and truncated, clipped.
_FACTOR = Param("factor", "float", "Enhancement factor: 1 = unchanged, 0 = fully degenerate, > 1 = stronger.",
                low=0.0, high=10.0)


def _blend_np(degenerate, image: np.ndarray, factor: float) -> np.ndarray:
    """PIL ImagingBlend: (uint8)(in1 + alpha * (in2 - in1)) in float32, clipped to 0-255."""
    d = np.asarray(degenerate, dtype=np.float32)
    out = d + np.float32(factor) * (image.astype(np.float32) - d)
    return np.clip(out, 0, 255).astype(np.uint8)


def _blend_t(degenerate, batch: torch.Tensor, factor: list) -> torch.Tensor:
    alpha = torch.tensor(factor, dtype=torch.float32, device=batch.device).view(-1, 1, 1, 1)
    d = degenerate.float() if isinstance(degenerate, torch.Tensor) else degenerate
    out = d + alpha * (batch.float() - d)
    return out.clamp_(0, 255).to(torch.uint8)


def _luma_np(image):
    return image if image.ndim == 2 else _pil_luma_np(image)


def _luma_t(batch):
    return batch if batch.shape[1] == 1 else _pil_luma_t(batch)


def adjust_brightness_cv(image, factor):
    return _blend_np(0.0, image, factor)


def adjust_brightness_torch(batch, factor):
    return _blend_t(0.0, batch, factor)


def adjust_contrast_cv(image, factor):
    # PIL: mean = int(mean of the 'L' image + 0.5), degenerate = that constant gray.
    mean = int(float(np.mean(_luma_np(image), dtype=np.float64)) + 0.5)
    return _blend_np(np.float32(mean), image, factor)


def adjust_contrast_torch(batch, factor):
    n = batch.shape[0]
    luma = _luma_t(batch).reshape(n, -1)
    means = torch.floor(luma.sum(1, dtype=torch.int64).double() / luma.shape[1] + 0.5)
    return _blend_t(means.float().view(n, 1, 1, 1), batch, factor)


def adjust_saturation_cv(image, factor):
    if image.ndim == 2:
        return image.copy()
    return _blend_np(_pil_luma_np(image)[:, :, None], image, factor)


def adjust_saturation_torch(batch, factor):
    if batch.shape[1] == 1:
        return batch.clone()
    return _blend_t(_pil_luma_t(batch), batch, factor)


_SMOOTH_EDGE, _SMOOTH_CENTER = np.float32(1) / np.float32(13), np.float32(5) / np.float32(13)


def _smooth_np(image: np.ndarray) -> np.ndarray:
    """PIL ImageFilter.SMOOTH (3x3 [1 1 1; 1 5 1; 1 1 1] / 13), float32 in PIL's order, borders copied."""
    h, w = image.shape[:2]
    out = image.copy()
    if h < 3 or w < 3:
        return out
    x = image.astype(np.float32)
    e, c = _SMOOTH_EDGE, _SMOOTH_CENTER

    def row(r, k):  # (p[x-1] k0 + p[x] k1) + p[x+1] k2 for the interior columns of rows r
        return x[r, :-2] * e + x[r, 1:-1] * k + x[r, 2:] * e

    ss = np.float32(0.5) + row(slice(2, None), e)
    ss = ss + row(slice(1, -1), c)
    ss = ss + row(slice(0, -2), e)
    out[1:-1, 1:-1] = np.clip(ss, 0, 255).astype(np.uint8)
    return out


def _smooth_t(batch: torch.Tensor) -> torch.Tensor:
    h, w = batch.shape[-2:]
    out = batch.clone()
    if h < 3 or w < 3:
        return out
    x = batch.float()
    e, c = float(_SMOOTH_EDGE), float(_SMOOTH_CENTER)

    def row(a, b, k):
        r = x[:, :, a:b]
        return r[..., :-2] * e + r[..., 1:-1] * k + r[..., 2:] * e

    ss = 0.5 + row(2, h, e)
    ss = ss + row(1, h - 1, c)
    ss = ss + row(0, h - 2, e)
    out[:, :, 1:-1, 1:-1] = ss.clamp_(0, 255).to(torch.uint8)
    return out


def adjust_sharpness_cv(image, factor):
    return _blend_np(_smooth_np(image), image, factor)


def adjust_sharpness_torch(batch, factor):
    return _blend_t(_smooth_t(batch), batch, factor)


_PIL_NOTE = " Same result as PIL's ImageEnhance (float32 blend, truncated and clipped to 0-255)."
_ENHANCE = {
    "adjust_brightness": (
        "Change brightness: out = factor * x (0 = black, 1 = unchanged, 2 = twice as bright, clipped).",
        adjust_brightness_cv, adjust_brightness_torch),
    "adjust_contrast": (
        "Change contrast around the mean gray level m of the image: out = m + factor * (x - m) "
        "(0 = flat gray, 1 = unchanged, > 1 = more contrast).",
        adjust_contrast_cv, adjust_contrast_torch),
    "adjust_saturation": (
        "Change color saturation: out = g + factor * (x - g) with g the pixel's gray value (0 = grayscale, "
        "1 = unchanged, > 1 = more vivid). Gray images are returned unchanged.",
        adjust_saturation_cv, adjust_saturation_torch),
    "adjust_sharpness": (
        "Change sharpness: out = s + factor * (x - s) with s the image smoothed by a 3x3 filter "
        "[1 1 1; 1 5 1; 1 1 1]/13 (0 = slightly blurred, 1 = unchanged, 2 = sharpened). The 1-pixel "
        "border is left unchanged.",
        adjust_sharpness_cv, adjust_sharpness_torch),
}
for _name, (_doc, _cv, _t) in _ENHANCE.items():
    register(Op(
        _name, _doc + _PIL_NOTE, (_FACTOR,), _cv, _t, vectorized=("factor",), category=CATEGORY,
        examples=({"factor": 0.0}, {"factor": 0.5}, {"factor": 1.0}, {"factor": 1.7}, {"factor": 3.3}, {"factor": 10.0}),
    ))


# ======================================================================================================
# autocontrast (PIL ImageOps.autocontrast)
def _autocontrast_luts(hist: np.ndarray | torch.Tensor, cutoff: float, xp):
    """PIL's per-band autocontrast tables from (P, 256) int64 histograms (numpy or torch, same code)."""
    is_t = xp is torch
    n = hist.sum(-1, keepdims=True) if not is_t else hist.sum(-1, keepdim=True)
    if cutoff:
        # cut = int(n * cutoff // 100); remove `cut` pixels from the low end, then from the high end.
        cut = (n.double() * cutoff // 100).long() if is_t else (n.astype(np.float64) * cutoff // 100).astype(np.int64)
        cum = hist.cumsum(-1)
        hist = xp.minimum(xp.maximum(cum - cut, 0 * hist), hist)
        rev = hist.flip(-1).cumsum(-1).flip(-1) if is_t else np.flip(np.flip(hist, -1).cumsum(-1), -1)
        hist = xp.minimum(xp.maximum(rev - cut, 0 * hist), hist)
    nonzero = hist > 0
    any_ = nonzero.any(-1)
    lo = xp.where(any_, nonzero.int().argmax(-1) if is_t else nonzero.argmax(-1), 255)
    last = (nonzero.flip(-1).int().argmax(-1) if is_t else np.flip(nonzero, -1).argmax(-1))
    hi = xp.where(any_, 255 - last, 0)
    ramp = xp.arange(256, dtype=xp.float64, **({"device": hist.device} if is_t else {}))
    span = (hi - lo).double() if is_t else (hi - lo).astype(np.float64)
    lo_f = lo.double() if is_t else lo.astype(np.float64)
    # (a full tensor, not a scalar, is divided: torch evaluates `scalar / t` as reciprocal(t) * scalar)
    scale = (0 * span + 255.0) / xp.where(span > 0, span, 1.0 + 0 * span)
    offset = -lo_f * scale
    values = ramp * scale[:, None] + offset[:, None]
    values = xp.trunc(values)
    lut = xp.where((hi > lo)[:, None], values.clip(0, 255) if not is_t else values.clamp(0, 255), ramp)
    return lut.to(torch.uint8) if is_t else lut.astype(np.uint8)


def _hist256_np(image: np.ndarray) -> np.ndarray:
    """(C, 256) int64 histograms; cv2.calcHist (fast) while its float32 counts are exact (< 2^24 pixels)."""
    channels = 1 if image.ndim == 2 else image.shape[2]
    if image.shape[0] * image.shape[1] < (1 << 24):
        return np.stack([cv2.calcHist([image], [c], None, [256], [0, 256]).reshape(-1) for c in range(channels)]).astype(np.int64)
    offsets = np.arange(channels, dtype=np.uint16) * 256
    return np.bincount((image.reshape(-1, channels) + offsets).reshape(-1), minlength=256 * channels).reshape(channels, 256)


def autocontrast_cv(image, cutoff):
    hist = _hist256_np(image)
    luts = _autocontrast_luts(hist, cutoff, np)
    if image.ndim == 2:
        return cv2.LUT(image, luts[0])
    return cv2.LUT(image, np.ascontiguousarray(luts.T.reshape(256, 1, 3)))


def autocontrast_torch(batch, cutoff):
    n, c, h, w = batch.shape
    planes = batch.reshape(n * c, h, w)
    luts = _autocontrast_luts(plane_hist(planes), cutoff, torch)
    return apply_plane_lut(planes, luts).view(n, c, h, w)


register(Op(
    "autocontrast",
    "Stretch each channel so its darkest pixel becomes 0 and its brightest 255 (PIL ImageOps.autocontrast), "
    "after ignoring `cutoff` percent of the darkest and `cutoff` percent of the lightest pixels per channel.",
    (Param("cutoff", "float", "Percent (0-49.9) of darkest and of lightest pixels ignored per channel.", 0.0, 0.0, 49.9),),
    autocontrast_cv, autocontrast_torch, category=CATEGORY,
    examples=({}, {"cutoff": 1.0}, {"cutoff": 2.5}, {"cutoff": 10}, {"cutoff": 45}),
))


# ======================================================================================================
# equalize
def _equalize_luts_t(hist: torch.Tensor, algorithm: str) -> torch.Tensor:
    """(P, 256) histograms -> (P, 256) uint8 tables: cv2.equalizeHist or PIL ImageOps.equalize."""
    ramp = torch.arange(256, device=hist.device)
    cum = hist.cumsum(-1)
    total = cum[:, -1:]
    nonzero = hist > 0
    if algorithm == "opencv":
        first = nonzero.int().argmax(-1, keepdim=True)
        h_first = hist.gather(1, first)
        denom = (total - h_first).float()
        scale = torch.tensor(255.0, dtype=torch.float32, device=hist.device) / denom
        lut = ((cum - h_first).float() * scale).round_().clamp_(0, 255)
        lut = torch.where(h_first == total, ramp.float().expand_as(lut), lut)
        return lut.to(torch.uint8)
    last = 255 - nonzero.flip(-1).int().argmax(-1, keepdim=True)
    step = (total - hist.gather(1, last)) // 255
    exclusive = cum - hist
    lut = (step // 2 + exclusive) // step.clamp(min=1)
    identity = (nonzero.sum(-1, keepdim=True) <= 1) | (step == 0)
    return torch.where(identity, ramp.expand_as(lut), lut.clamp(0, 255)).to(torch.uint8)


def _pil_equalize_np(plane: np.ndarray) -> np.ndarray:
    hist = np.bincount(plane.reshape(-1), minlength=256).astype(np.int64)
    nonzero = np.flatnonzero(hist)
    if len(nonzero) <= 1:
        return plane.copy()
    step = (int(hist.sum()) - int(hist[nonzero[-1]])) // 255
    if not step:
        return plane.copy()
    exclusive = np.cumsum(hist) - hist
    return cv2.LUT(plane, np.clip((step // 2 + exclusive) // step, 0, 255).astype(np.uint8))


def equalize_cv(image, mode, channels, algorithm):
    fn = cv2.equalizeHist if algorithm == "opencv" else _pil_equalize_np
    return _modal_cv(image, mode, channels, fn)


def equalize_torch(batch, mode, channels, algorithm):
    def fn(planes):
        return apply_plane_lut(planes, _equalize_luts_t(plane_hist(planes), algorithm))
    return _modal_t(batch, mode, channels, fn)


register(Op(
    "equalize",
    "Histogram equalization: spread the intensity levels so the histogram becomes flat, raising global "
    "contrast. " + _MODE_DOC + " `algorithm` 'opencv' = cv2.equalizeHist (default), 'pil' = PIL "
    "ImageOps.equalize (PIL's equalize of an RGB image is mode 'per_channel').",
    (
        Param("mode", "str", "Which channel(s) to equalize for a color image.", "luma", choices=MODES),
        CHANNELS,
        Param("algorithm", "str", "Equalization formula.", "opencv", choices=("opencv", "pil")),
    ),
    equalize_cv, equalize_torch, check=_modal_check("equalize"), category=CATEGORY, tolerance=_HSV_BACK,
    examples=(
        {}, {"mode": "per_channel"}, {"mode": "per_channel", "channels": [2, 0]}, {"mode": "lightness"},
        {"mode": "value"}, {"mode": "gray"}, {"algorithm": "pil", "mode": "per_channel"}, {"algorithm": "pil"},
    ),
))


# ======================================================================================================
# CLAHE (cv2.createCLAHE(clipLimit, tileGridSize).apply), batched
def _clahe_geometry(h: int, w: int, tiles_x: int, tiles_y: int):
    """OpenCV pads to tile multiples with BORDER_REFLECT_101 when either side is not divisible; its
    padding is tiles - size % tiles on BOTH sides then (a whole extra tile on a divisible side)."""
    if h % tiles_y == 0 and w % tiles_x == 0:
        return h, w
    return h + tiles_y - h % tiles_y, w + tiles_x - w % tiles_x


def _clahe_planes_t(planes: torch.Tensor, clip_limit: float, tiles_x: int, tiles_y: int) -> torch.Tensor:
    p, h, w = planes.shape
    dev = planes.device
    hp, wp = _clahe_geometry(h, w, tiles_x, tiles_y)
    th, tw = hp // tiles_y, wp // tiles_x
    tiles = tiles_x * tiles_y
    rows = torch.arange(hp, device=dev)
    cols = torch.arange(wp, device=dev)
    padded = planes if (hp, wp) == (h, w) else planes[:, reflect101(rows, h)][:, :, reflect101(cols, w)]

    # Histogram of every tile of every plane: bincount over (plane, tile, value) indices.
    tile_map = ((rows // th).view(-1, 1) * tiles_x + (cols // tw).view(1, -1)).int().mul_(256)
    hist = torch.empty((p, tiles, 256), dtype=torch.int64, device=dev)
    for a, b in plane_chunks(p, hp * wp):
        offsets = torch.arange(b - a, device=dev, dtype=torch.int32).mul_(tiles * 256).view(-1, 1, 1)
        index = (padded[a:b].int() + tile_map + offsets).reshape(-1)
        hist[a:b] = torch.bincount(index, minlength=(b - a) * tiles * 256).view(b - a, tiles, 256)

    area = th * tw
    if clip_limit > 0:
        limit = max(int(clip_limit * area / 256), 1)
        clipped = (hist - limit).clamp_(min=0).sum(-1, keepdim=True)
        hist = hist.clamp_(max=limit)
        batch, residual = clipped // 256, clipped % 256
        ramp = torch.arange(256, device=dev)
        step = (256 // residual.clamp(min=1)).clamp(min=1)
        extra = (residual > 0) & (ramp % step == 0) & (ramp // step < residual)
        hist = hist + batch + extra
    lut_scale = torch.tensor(np.float32(255.0 / area), device=dev)
    lut = (hist.cumsum(-1).float() * lut_scale).round_().clamp_(0, 255).reshape(-1)  # (P * tiles * 256)

    # Bilinear interpolation between the four nearest tile centers, in OpenCV's float32 arithmetic.
    def axis(n, size, count):
        inv = torch.tensor(np.float32(1.0) / np.float32(size), device=dev)
        f = torch.arange(n, device=dev, dtype=torch.float32) * inv - 0.5
        i1 = torch.floor(f)
        frac = f - i1
        i1 = i1.long()
        return i1.clamp(min=0), (i1 + 1).clamp(max=count - 1), frac, 1.0 - frac

    y1, y2, ya, ya1 = axis(h, th, tiles_y)
    x1, x2, xa, xa1 = axis(w, tw, tiles_x)
    idx11 = ((y1.view(-1, 1) * tiles_x + x1.view(1, -1)) * 256).int()
    idx12 = ((y1.view(-1, 1) * tiles_x + x2.view(1, -1)) * 256).int()
    idx21 = ((y2.view(-1, 1) * tiles_x + x1.view(1, -1)) * 256).int()
    idx22 = ((y2.view(-1, 1) * tiles_x + x2.view(1, -1)) * 256).int()
    ya, ya1, xa, xa1 = ya.view(-1, 1), ya1.view(-1, 1), xa.view(1, -1), xa1.view(1, -1)
    out = torch.empty_like(planes)
    for a, b in plane_chunks(p, h * w):
        base = planes[a:b].int() + torch.arange(a, b, device=dev, dtype=torch.int32).mul_(tiles * 256).view(-1, 1, 1)
        top = lut[base + idx11] * xa1 + lut[base + idx12] * xa
        bottom = lut[base + idx21] * xa1 + lut[base + idx22] * xa
        out[a:b] = (top * ya1 + bottom * ya).round_().clamp_(0, 255).to(torch.uint8)
    return out


def clahe_cv(image, clip_limit, tile_grid, mode, channels):
    clahe = cv2.createCLAHE(clipLimit=clip_limit, tileGridSize=(tile_grid[0], tile_grid[1]))
    return _modal_cv(image, mode, channels, clahe.apply)


def clahe_torch(batch, clip_limit, tile_grid, mode, channels):
    def fn(planes):
        return _clahe_planes_t(planes, clip_limit, tile_grid[0], tile_grid[1])
    return _modal_t(batch, mode, channels, fn)


def _clahe_check(args, height, width):
    _modal_check("clahe")(args, height, width)


register(Op(
    "clahe",
    "CLAHE (contrast-limited adaptive histogram equalization, cv2.createCLAHE): equalize each tile of a "
    "`tile_grid` = [columns, rows] grid separately, limiting contrast by `clip_limit`, and blend "
    "neighboring tiles bilinearly. Brings out local detail in dark or hazy regions with less noise "
    "than global equalization. Larger clip_limit = stronger effect (0 = no limit). " + _MODE_DOC,
    (
        Param("clip_limit", "float", "Contrast limit (OpenCV clipLimit; 2-4 is typical; 0 = no limit).", 2.0, 0.0, 100.0),
        Param("tile_grid", "ints", "Tiles per row and per column [columns, rows].", (8, 8), 1, 64, length=2),
        Param("mode", "str", "Which channel(s) to process for a color image.", "lightness", choices=MODES),
        CHANNELS,
    ),
    clahe_cv, clahe_torch, check=_clahe_check, category=CATEGORY,
    tolerance=Tolerance(pixel=1, outliers=0.0, mean=0.2, why=_HSV_BACK.why + "; CLAHE itself: " + _CLAHE_WHY),
    examples=(
        {}, {"mode": "luma"}, {"mode": "per_channel", "clip_limit": 4.0}, {"mode": "value", "tile_grid": [4, 4]},
        {"clip_limit": 0.0, "tile_grid": [3, 5]}, {"mode": "gray", "tile_grid": [16, 2]},
        {"mode": "per_channel", "channels": [1], "clip_limit": 1.0, "tile_grid": [7, 6]},
        {"clip_limit": 40.0, "tile_grid": [1, 1], "mode": "luma"},
    ),
))


# ======================================================================================================
# convert_scale_abs
def convert_scale_abs_cv(image, alpha, beta):
    return cv2.convertScaleAbs(image, alpha=alpha, beta=beta)


def convert_scale_abs_torch(batch, alpha, beta):
    # OpenCV computes x * alpha + beta as a float32 fused multiply-add: one rounding of the exact value.
    # In float64 the product of a uint8 and a float32 is exact, so a single cast to float32 matches it.
    alpha, beta = float(np.float32(alpha)), float(np.float32(beta))
    out = (batch.double() * alpha + beta).float()
    return out.abs_().round_().clamp_(0, 255).to(torch.uint8)


register(Op(
    "convert_scale_abs",
    "Linear brightness/contrast change (cv2.convertScaleAbs): out = |alpha * x + beta|, rounded and "
    "clipped to 0-255, per channel. alpha > 1 raises contrast, beta > 0 brightens (beta in gray levels).",
    (
        Param("alpha", "float", "Gain (multiplier).", 1.0, -100.0, 100.0),
        Param("beta", "float", "Offset added after the gain, in gray levels.", 0.0, -1000.0, 1000.0),
    ),
    convert_scale_abs_cv, convert_scale_abs_torch, category=CATEGORY,
    examples=({}, {"alpha": 1.5, "beta": 20}, {"alpha": 0.5}, {"alpha": 2.0, "beta": -100}, {"alpha": -1.0, "beta": 30.5},
              {"alpha": 0.37, "beta": 0.5}),
))


# ======================================================================================================
# gamma
@lru_cache(maxsize=256)
def _gamma_table(gamma: float) -> np.ndarray:
    x = np.arange(256, dtype=np.float64) / 255.0
    return np.clip(np.round(255.0 * x ** (1.0 / gamma)), 0, 255).astype(np.uint8)


def gamma_cv(image, gamma):
    return cv2.LUT(image, _gamma_table(gamma))


def gamma_torch(batch, gamma):
    return torch.from_numpy(_gamma_table(gamma)).to(batch.device)[batch.long()]


register(Op(
    "gamma",
    "Gamma correction via a lookup table: out = round(255 * (x / 255) ^ (1 / gamma)). gamma > 1 brightens "
    "dark and mid tones (good for low-light images), gamma < 1 darkens them; 1 = unchanged.",
    (Param("gamma", "float", "Gamma (0.05-20); > 1 brightens.", low=0.05, high=20.0),),
    gamma_cv, gamma_torch, category=CATEGORY,
    examples=({"gamma": 2.2}, {"gamma": 0.5}, {"gamma": 1.0}, {"gamma": 0.05}, {"gamma": 20}),
))


# ======================================================================================================
# histogram (data only)
_HIST_SPACES = ("rgb",) + tuple(s for s in SPACES if s != "bgr")


def _hist_space_names(space: str, channels: int) -> tuple[str, ...]:
    if space == "rgb":
        return ("gray",) if channels == 1 else ("R", "G", "B")
    return SPACES[space][2]


@lru_cache(maxsize=None)
def _bin_index(bins: int, high: int) -> np.ndarray:
    """Bin of each value 0-255 for `bins` uniform bins over [0, high), as cv2.calcHist's 8-bit table
    (floor(v * bins / high)). Values >= high exist only for hue (180, OpenCV's rounding of 359.x degrees
    in hls): hue is circular, so they count in bin 0."""
    a = bins / float(high)
    idx = np.floor(np.arange(256) * a).astype(np.int64)
    idx[idx >= bins] = 0
    return idx


def _hist_data(space, bins, names, counts_list, stats_list, pixels):
    channels = {}
    for name, counts, (mean, std, lo, hi) in zip(names, counts_list, stats_list):
        channels[name] = {"counts": [int(v) for v in counts], "mean": round(float(mean), 4), "std": round(float(std), 4),
                          "min": int(lo), "max": int(hi)}
    return {"space": space, "bins": bins, "pixels": pixels, "channels": channels}


def histogram_cv(image, bins, space):
    conv = _to_space_cv(image, space)
    planes = [conv] if conv.ndim == 2 else cv2.split(conv)
    names = _hist_space_names(space, len(planes))
    highs = _channel_ranges(space, len(planes))
    counts, stats = [], []
    for plane, high in zip(planes, highs):
        if plane.size < (1 << 24):
            hist = cv2.calcHist([plane], [0], None, [bins], [0, high]).reshape(-1)
        else:  # float32 counts would round: bin the exact 256-level histogram instead
            hist = np.bincount(_bin_index(bins, high), weights=_hist256_np(plane)[0], minlength=bins)
            high = 256  # values >= the hue range are already in bin 0
        if high < 256:
            hist[0] += np.count_nonzero(plane >= high)  # hue 180 = 0 degrees
        counts.append(hist)
        mean, std = cv2.meanStdDev(plane)
        lo, hi, _, _ = cv2.minMaxLoc(plane)
        stats.append((mean[0, 0], std[0, 0], lo, hi))
    return None, _hist_data(space, bins, names, counts, stats, int(planes[0].size))


def histogram_torch(batch, bins, space):
    conv = to_space_t(batch, space)
    n, c, h, w = conv.shape
    full = plane_hist(conv.reshape(n * c, h, w)).double()  # (N*C, 256) exact counts
    values = torch.arange(256, device=batch.device, dtype=torch.float64)
    pixels = h * w
    mean = (full * values).sum(-1) / pixels
    var = ((full * (values - mean[:, None]) ** 2).sum(-1) / pixels).clamp(min=0)
    present = full > 0
    lo = present.int().argmax(-1)
    hi = 255 - present.flip(-1).int().argmax(-1)
    binned = []
    for k, high in enumerate(_channel_ranges(space, c)):
        idx = torch.from_numpy(_bin_index(bins, high)).to(batch.device)
        part = full.view(n, c, 256)[:, k]
        binned.append(torch.zeros((n, bins), dtype=torch.float64, device=batch.device).index_add_(1, idx, part))
    binned = torch.stack(binned, 1).long().cpu().tolist()
    mean, std = mean.view(n, c).cpu().tolist(), var.sqrt().view(n, c).cpu().tolist()
    lo, hi = lo.view(n, c).cpu().tolist(), hi.view(n, c).cpu().tolist()
    names = _hist_space_names(space, c)
    data = [_hist_data(space, bins, names, binned[i], list(zip(mean[i], std[i], lo[i], hi[i])), pixels) for i in range(n)]
    return None, data


register(Op(
    "histogram",
    "Measure the intensity distribution (no image output). Data per channel of `space` ('rgb' = the "
    "image's own channels, R, G, B or gray; or a color space such as 'hsv', 'lab', 'gray'): `counts` "
    "= pixel counts in `bins` equal-width bins over the channel's range (0-255; hue 0-179 in hsv / hls, "
    "so bin k covers [k * range / bins, (k+1) * range / bins); a rare hue of 180 counts as 0), plus mean, std (population), min and max "
    "of the raw channel values; `pixels` = pixels per channel.",
    (
        Param("bins", "int", "Number of bins per channel (2-256).", 32, 2, 256),
        Param("space", "str", "Color space to measure in.", "rgb", choices=_HIST_SPACES),
    ),
    histogram_cv, histogram_torch, category=CATEGORY,
    examples=({}, {"bins": 256}, {"bins": 10, "space": "hsv"}, {"bins": 7, "space": "gray"}, {"bins": 2, "space": "lab"},
              {"bins": 180, "space": "hls"}),
))
