"""Filters: blur, sharpen, PIL-named kernels, denoise, morphology, gradients, Canny, threshold, DFT.

Conventions: images are RGB or gray uint8. Kernel sizes are in pixels and odd. Ops that work on intensity
(gradients, canny, threshold, dft) convert a color image to gray first with OpenCV's COLOR_RGB2GRAY unless
a parameter says otherwise, and then return a one-channel image.

The torch versions reproduce OpenCV's integer arithmetic: OpenCV's bit-exact fixed-point Gaussian (8-bit
kernel weights from error diffusion, Q16 accumulation, round half up), box filters rounded to nearest,
Sobel/Laplacian/Scharr in exact integers, Canny's integer non-maximum suppression, and hysteresis as
connected components. Integer filtering is either int32 shifted adds or float32 convolutions arranged to be
exact even when a GPU rounds convolution inputs to TF32 (see _conv_int), so results do not depend on the
device or on torch's TF32 settings.
"""

from __future__ import annotations

import math
import sys

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from tools.ops.kernels import gray_cv, gray_torch, otsu_thresholds, plane_hist, reflect101
from tools.registry import Op, Param, Tolerance, ToolArgumentError, register

CATEGORY = "filter"


# -- shared helpers ------------------------------------------------------------------------------------
def _border_index(n: int, before: int, after: int, mode: str, device) -> torch.Tensor:
    """Source indices for a padded axis: 'reflect101' (OpenCV BORDER_REFLECT_101) or 'replicate'."""
    idx = torch.arange(-before, n + after, device=device)
    return idx.clamp(0, n - 1) if mode == "replicate" else reflect101(idx, n)


def _pad(x: torch.Tensor, py: int, px: int, mode: str) -> torch.Tensor:
    h, w = x.shape[-2:]
    if py:
        x = x.index_select(-2, _border_index(h, py, py, mode, x.device))
    if px:
        x = x.index_select(-1, _border_index(w, px, px, mode, x.device))
    return x


def _taps(xp: torch.Tensor, kernel, length: int, dim: int) -> torch.Tensor:
    """Correlate a padded int tensor with integer `kernel` along `dim` by shifted adds (exact)."""
    out = None
    for i, k in enumerate(int(v) for v in kernel):
        if k == 0:
            continue
        piece = xp.narrow(dim, i, length)
        out = piece * k if out is None else out.add_(piece, alpha=k)
    if out is None:
        shape = list(xp.shape)
        shape[dim] = length
        out = xp.new_zeros(shape)
    return out


def _sep_int(x_u8: torch.Tensor, kx, ky, mode: str) -> torch.Tensor:
    """Exact int32 separable correlation of a uint8 batch (rows with kx, columns with ky), border `mode`."""
    h, w = x_u8.shape[-2:]
    xp = _pad(x_u8, len(ky) // 2, len(kx) // 2, mode).to(torch.int32)
    return _taps(_taps(xp, kx, w, -1), ky, h, -2)


def _corr2d_int(x_u8: torch.Tensor, kernel: np.ndarray, mode: str) -> torch.Tensor:
    """Exact int32 2D correlation with a small integer kernel (anchor at the center)."""
    kh, kw = kernel.shape
    h, w = x_u8.shape[-2:]
    xp = _pad(x_u8, kh // 2, kw // 2, mode).to(torch.int32)
    out = None
    for i in range(kh):
        for j in range(kw):
            k = int(kernel[i, j])
            if k:
                piece = xp[..., i:i + h, j:j + w]
                out = piece * k if out is None else out.add_(piece, alpha=k)
    return out if out is not None else torch.zeros_like(xp[..., :h, :w])


def _conv_int(xp: torch.Tensor, kernels, bias=None) -> torch.Tensor:
    """Per-channel 'valid' correlation of a padded uint8 batch with K small kernels in one conv2d call.

    Returns float32 (N, C, K, H', W'). Exact when every weight has at most 11 significant bits and every
    partial sum stays below 2^24 in units of the weights' finest binary fraction: the inputs (8 bits) and
    weights are then exact even as TF32, products fit in float32 and so do all partial sums, so neither
    the GPU's TF32 convolutions nor the summation order can change the result.
    """
    n, c = xp.shape[:2]
    weights = torch.tensor(np.stack(kernels), dtype=torch.float32, device=xp.device)  # (K, kh, kw)
    k = weights.shape[0]
    weights = weights.unsqueeze(1).repeat(c, 1, 1, 1)
    if bias is not None:
        bias = torch.tensor(list(bias) * c, dtype=torch.float32, device=xp.device)
    out = F.conv2d(xp.float(), weights, bias, groups=c)
    return out.view(n, c, k, *out.shape[-2:])


def _box_sum(x: torch.Tensor, k: int, mode: str) -> torch.Tensor:
    """Exact k x k window sums (int32 via cumulative sums) with border `mode`."""
    h, w = x.shape[-2:]
    p = k // 2
    c = _pad(x, p, p, mode).to(torch.int32)
    c = F.pad(c.cumsum(-1, dtype=torch.int32), (1, 0))
    c = c[..., k:] - c[..., :-k]
    c = F.pad(c.cumsum(-2, dtype=torch.int32), (0, 0, 1, 0))
    return c[..., k:, :] - c[..., :-k, :]


def _odd(op: str, name: str, value: int, allow_zero: bool = False) -> None:
    if value % 2 == 0 and not (allow_zero and value == 0):
        extra = " (or 0)" if allow_zero else ""
        raise ToolArgumentError(op, name, f"must be odd{extra}, got {value}")


def _u8(x: torch.Tensor) -> torch.Tensor:
    return x.clamp_(0, 255).to(torch.uint8)


# -- blur ----------------------------------------------------------------------------------------------
_GAUSS_TABLE = {1: [256], 3: [64, 128, 64], 5: [16, 64, 96, 64, 16], 7: [8, 28, 56, 72, 56, 28, 8],
                9: [4, 13, 30, 51, 60, 51, 30, 13, 4]}


def gaussian_ksize(sigma: float) -> int:
    """OpenCV's kernel size for ksize 0 on 8-bit images: round(6 sigma + 1) | 1."""
    return int(round(sigma * 3 * 2 + 1)) | 1


def gaussian_kernel_q8(n: int, sigma: float) -> list[int]:
    """OpenCV's bit-exact 8-bit Gaussian kernel (getGaussianKernelBitExact + getGaussianKernelFixedPoint_ED):
    Q8 weights that sum to exactly 256; sigma <= 0 means 0.15 n + 0.35 (tables for n <= 9)."""
    if sigma <= 0 and n in _GAUSS_TABLE:
        return list(_GAUSS_TABLE[n])
    s = sigma if sigma > 0 else n * 0.15 + 0.35
    scale = -0.125 / (s * s) if s * s > 0 else -math.inf  # a sigma too small to square: a delta kernel
    half = (n - 1) // 2
    values = [math.exp((x * x) * scale) for x in range(1 - n, 0, 2)][:half]
    total = 0.0
    for v in values:
        total += v
    mul = 1.0 / (total * 2 + 1.0)
    out, err, acc = [0] * n, 0.0, 0
    for i in range(half):
        adj = values[i] * mul * 256.0 + err
        q = round(adj)  # half to even, like cvRound
        err = adj - q
        out[i] = out[n - 1 - i] = q
        acc += q
    out[half] = 256 - 2 * acc
    return out


def _gaussian_sizes(ksize, sigma, sigma_y, h, w):
    # OpenCV: sigmaY 0 means sigmaX, and sigmas closer than DBL_EPSILON share the x kernel.
    sy = sigma if sigma_y <= 0 or abs(sigma_y - sigma) < sys.float_info.epsilon else sigma_y
    kx = ksize if ksize > 0 else gaussian_ksize(sigma)
    ky = ksize if ksize > 0 else gaussian_ksize(sy)
    # OpenCV drops the kernel along an axis of length 1.
    return (1 if w == 1 else kx), (1 if h == 1 else ky), sy


def gaussian_blur_torch(batch: torch.Tensor, ksize: int, sigma: float, sigma_y: float = 0.0) -> torch.Tensor:
    """cv2.GaussianBlur(img, (ksize, ksize), sigma, sigma_y, BORDER_REFLECT_101) bit-exactly."""
    h, w = batch.shape[-2:]
    kx, ky, sy = _gaussian_sizes(ksize, sigma, sigma_y, h, w)
    if kx == 1 and ky == 1:
        return batch.clone()
    qx, qy = gaussian_kernel_q8(kx, sigma), gaussian_kernel_q8(ky, sy)
    if kx * ky <= 225:
        # One conv: Q16 weights w = qy x qx split into w >> 8 (scaled 1/256) and w & 255 (scaled 1/65536,
        # plus the 0.5 of round-half-up); both channels are exact (see _conv_int) and so is their sum.
        w = np.outer(qy, qx)
        xp = _pad(batch, ky // 2, kx // 2, "reflect101")
        out = _conv_int(xp, [(w >> 8) / 256.0, (w & 255) / 65536.0], bias=(0.0, 0.5))
        return out.sum(dim=2).to(torch.uint8)  # < 256, so truncation is the floor
    acc = _sep_int(batch, qx, qy, "reflect101")
    return _u8((acc + 32768) >> 16)


def _median_torch(batch: torch.Tensor, k: int) -> torch.Tensor:
    """cv2.medianBlur (BORDER_REPLICATE) exactly."""
    if k == 1:
        return batch.clone()
    n, c, h, w = batch.shape
    if k <= 7:
        xp = _pad(batch, k // 2, k // 2, "replicate")
        # Chunk over the batch so the k*k stack stays under ~2^30 bytes.
        step = max(1, (1 << 30) // max(1, k * k * c * h * w))
        outs = []
        for s in range(0, n, step):
            part = xp[s:s + step]
            stack = torch.stack([part[..., i:i + h, j:j + w] for i in range(k) for j in range(k)])
            outs.append(stack.median(dim=0).values)
        return torch.cat(outs)
    # Large windows: median = number of levels t with count(window <= t) < (k*k + 1) / 2.
    rank = (k * k + 1) // 2
    xp = _pad(batch, k // 2, k // 2, "replicate")
    med = torch.zeros((n, c, h, w), dtype=torch.int32, device=batch.device)
    for t in range(255):
        counts = F.avg_pool2d((xp <= t).float(), k, stride=1, divisor_override=1)
        med += (counts < rank).to(torch.int32)
    return med.to(torch.uint8)


def _bilateral_radius(d: int) -> int:
    return max(d // 2, 1)


def _bilateral_torch(batch: torch.Tensor, d: int, sigma_color: float, sigma_space: float) -> torch.Tensor:
    """cv2.bilateralFilter in float32: circular window, L1 color distance summed over channels."""
    n, c, h, w = batch.shape
    sc = sigma_color if sigma_color > 0 else 1.0
    ss = sigma_space if sigma_space > 0 else 1.0
    r = _bilateral_radius(d)
    dev = batch.device
    coeff = -0.5 / (sc * sc)
    table = torch.tensor([math.exp(i * i * coeff) for i in range(256 * c)], dtype=torch.float32, device=dev)
    xp = _pad(batch, r, r, "reflect101")
    center = batch.to(torch.int32)
    centerf = batch.float()
    acc = torch.zeros_like(centerf)
    wsum = torch.zeros((n, 1, h, w), dtype=torch.float32, device=dev)
    for i in range(-r, r + 1):
        for j in range(-r, r + 1):
            dist = math.sqrt(i * i + j * j)
            if dist > r:
                continue
            sw = float(np.float32(math.exp(dist * dist * (-0.5 / (ss * ss)))))
            nb = xp[..., r + i:r + i + h, r + j:r + j + w]
            diff = (nb.to(torch.int32) - center).abs_().sum(dim=1, keepdim=True)
            weight = table[diff] * sw
            acc.addcmul_(nb.float(), weight)
            wsum += weight
    value = acc / wsum
    # OpenCV hands one-channel images with radius <= 2 to IPP, whose result is close to truncation.
    return _u8(torch.floor(value) if c == 1 and r <= 2 else torch.round(value))


_BLUR_METHODS = ("average", "gaussian", "median", "bilateral")


def _blur_check(args, height, width):
    if args["method"] == "gaussian":
        _odd("blur", "ksize", args["ksize"], allow_zero=True)
        if args["ksize"] == 0 and args["sigma"] <= 0:
            raise ToolArgumentError("blur", "sigma", "must be > 0 when ksize is 0 (the size is derived from sigma)")
    elif args["method"] in ("average", "median"):
        _odd("blur", "ksize", args["ksize"])
        if args["ksize"] == 0:
            raise ToolArgumentError("blur", "ksize", "must be >= 1 for this method")


def blur_cv(image, method, ksize, sigma, sigma_y, d, sigma_color, sigma_space):
    if method == "average":
        return cv2.blur(image, (ksize, ksize))
    if method == "gaussian":
        return cv2.GaussianBlur(image, (ksize, ksize), sigma, sigmaY=sigma_y)
    if method == "median":
        return cv2.medianBlur(image, ksize)
    return cv2.bilateralFilter(image, d, sigma_color, sigma_space)


def blur_torch(batch, method, ksize, sigma, sigma_y, d, sigma_color, sigma_space):
    if method == "average":
        k = ksize
        return _u8((_box_sum(batch, k, "reflect101") * 2 + k * k) // (2 * k * k))
    if method == "gaussian":
        return gaussian_blur_torch(batch, ksize, sigma, sigma_y)
    if method == "median":
        return _median_torch(batch, ksize)
    return _bilateral_torch(batch, d, sigma_color, sigma_space)


register(Op(
    "blur",
    "Smooth the image. 'average' is a ksize x ksize box mean; 'gaussian' a Gaussian of standard deviation "
    "`sigma` pixels (sigma 0 derives it from ksize as 0.3*((ksize-1)/2-1)+0.8; ksize 0 derives the size "
    "from sigma, so a PIL GaussianBlur radius r is roughly sigma=r with ksize=0); 'median' the median of "
    "the ksize x ksize window (removes salt-and-pepper noise); 'bilateral' an edge-preserving filter over "
    "a disk of diameter `d` with range weight sigma_color (0-255 intensity units) and spatial weight "
    "sigma_space (pixels). Borders reflect (median replicates). Output has the input's size and channels.",
    (
        Param("method", "str", "Blur type.", "gaussian", choices=_BLUR_METHODS),
        Param("ksize", "int", "Window side in pixels, odd (gaussian: 0 = derive from sigma). Not used by bilateral.",
              5, 0, 51),
        Param("sigma", "float", "Gaussian standard deviation in pixels (0 = derive from ksize).", 0.0, 0, 50),
        Param("sigma_y", "float", "Vertical Gaussian sigma in pixels (0 = same as sigma).", 0.0, 0, 50),
        Param("d", "int", "Bilateral neighbourhood diameter in pixels.", 9, 1, 50),
        Param("sigma_color", "float", "Bilateral range sigma (intensity difference, 0-255 units).", 75.0, 0.1, 1000),
        Param("sigma_space", "float", "Bilateral spatial sigma in pixels.", 75.0, 0.1, 1000),
    ),
    blur_cv, blur_torch, check=_blur_check, category=CATEGORY,
    tolerance=Tolerance(pixel=1, outliers=0.0, mean=0.05,
                        why="bilateral only: float32 summation order, and OpenCV runs one-channel images with d < 6 "
                            "through IPP (differs by 1 on ~3% of pixels); average, gaussian and median are bit-exact"),
    examples=(
        {}, {"method": "average", "ksize": 3}, {"method": "average", "ksize": 15},
        {"method": "gaussian", "ksize": 7, "sigma": 1.5}, {"method": "gaussian", "ksize": 0, "sigma": 2.0},
        {"method": "gaussian", "ksize": 9, "sigma": 0},
        {"method": "gaussian", "ksize": 5, "sigma": 1.0, "sigma_y": 3.0},
        {"method": "median", "ksize": 3}, {"method": "median", "ksize": 5}, {"method": "median", "ksize": 11},
        {"method": "bilateral", "d": 9, "sigma_color": 75, "sigma_space": 75},
        {"method": "bilateral", "d": 5, "sigma_color": 20, "sigma_space": 3},
    ),
))


# -- PIL named kernels: filter / sharpen ---------------------------------------------------------------
# (size, scale, offset, kernel) exactly as PIL.ImageFilter defines them.
PIL_KERNELS = {
    "blur": (5, 16, 0, (1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1)),
    "contour": (3, 1, 255, (-1, -1, -1, -1, 8, -1, -1, -1, -1)),
    "detail": (3, 6, 0, (0, -1, 0, -1, 10, -1, 0, -1, 0)),
    "edge_enhance": (3, 2, 0, (-1, -1, -1, -1, 10, -1, -1, -1, -1)),
    "edge_enhance_more": (3, 1, 0, (-1, -1, -1, -1, 9, -1, -1, -1, -1)),
    "emboss": (3, 1, 128, (-1, 0, 0, 0, 1, 0, 0, 0, 0)),
    "find_edges": (3, 1, 0, (-1, -1, -1, -1, 8, -1, -1, -1, -1)),
    "sharpen": (3, 16, 0, (-2, -2, -2, -2, 32, -2, -2, -2, -2)),
    "smooth": (3, 13, 0, (1, 1, 1, 1, 5, 1, 1, 1, 1)),
    "smooth_more": (5, 100, 0, (1, 1, 1, 1, 1, 1, 5, 5, 5, 1, 1, 5, 44, 5, 1, 1, 5, 5, 5, 1, 1, 1, 1, 1, 1)),
}


def _pil_kernel(kind):
    size, scale, offset, values = PIL_KERNELS[kind]
    # PIL applies the kernel's first row to the row *below* the pixel: flip it vertically for correlation.
    return np.flipud(np.array(values, np.float32).reshape(size, size)).copy(), scale, offset


def pil_filter_cv(image: np.ndarray, kind: str) -> np.ndarray:
    kernel, scale, offset = _pil_kernel(kind)
    total = cv2.filter2D(image, cv2.CV_32F, kernel, borderType=cv2.BORDER_REPLICATE)  # exact integer sums
    out = np.floor((total + (offset * scale + scale / 2)) / scale)  # PIL: clip8(sum / scale + offset + 0.5)
    out = np.clip(out, 0, 255).astype(np.uint8)
    b = kernel.shape[0] // 2
    h, w = image.shape[:2]
    if h <= 2 * b or w <= 2 * b:
        return image.copy()
    out[:b], out[h - b:], out[:, :b], out[:, w - b:] = image[:b], image[h - b:], image[:, :b], image[:, w - b:]
    return out


def pil_filter_torch(batch: torch.Tensor, kind: str) -> torch.Tensor:
    kernel, scale, offset = _pil_kernel(kind)
    total = _corr2d_int(batch, kernel.astype(np.int64), "replicate")
    out = _u8(torch.div(total * 2 + (2 * offset * scale + scale), 2 * scale, rounding_mode="floor"))
    b = kernel.shape[0] // 2
    h, w = batch.shape[-2:]
    if h <= 2 * b or w <= 2 * b:
        return batch.clone()
    inner = torch.zeros((h, w), dtype=torch.bool, device=batch.device)
    inner[b:h - b, b:w - b] = True
    return torch.where(inner, out, batch)


register(Op(
    "filter",
    "Apply one of PIL's named ImageFilter kernels with PIL's semantics: 'blur' (5x5 ring mean), 'contour', "
    "'detail', 'edge_enhance', 'edge_enhance_more', 'emboss' (gray 128 = flat), 'find_edges' (bright edges "
    "on black), 'sharpen', 'smooth', 'smooth_more' (5x5). Each channel is filtered separately; results are "
    "rounded half up and clipped to 0-255. As in PIL, the outer 1-pixel frame (2 pixels for the 5x5 "
    "kernels) is copied unchanged from the input.",
    (Param("kind", "str", "Which PIL kernel.", "sharpen", choices=tuple(PIL_KERNELS)),),
    pil_filter_cv, pil_filter_torch, category=CATEGORY,
    examples=tuple({"kind": k} for k in PIL_KERNELS),
))


def sharpen_cv(image, method, radius, percent, threshold):
    if method == "kernel":
        return pil_filter_cv(image, "sharpen")
    blurred = cv2.GaussianBlur(image, (0, 0), radius)
    diff = image.astype(np.int32) - blurred
    boosted = np.clip(image + np.fix(diff * percent / 100.0), 0, 255).astype(np.uint8)
    return np.where(np.abs(diff) >= threshold, boosted, image)


def sharpen_torch(batch, method, radius, percent, threshold):
    if method == "kernel":
        return pil_filter_torch(batch, "sharpen")
    blurred = gaussian_blur_torch(batch, 0, radius)
    x = batch.to(torch.int32)
    diff = x - blurred.to(torch.int32)
    boosted = _u8(x + torch.div(diff * percent, 100, rounding_mode="trunc"))
    return torch.where(diff.abs() >= threshold, boosted, batch)


register(Op(
    "sharpen",
    "Sharpen the image. 'kernel' is PIL's ImageFilter.SHARPEN (3x3 kernel, center 32, neighbours -2, "
    "divided by 16; the 1-pixel frame is kept). 'unsharp' is PIL's UnsharpMask formula: blur with a "
    "Gaussian of standard deviation `radius` pixels (OpenCV GaussianBlur), then every pixel whose "
    "difference from the blur is at least `threshold` (0-255) becomes pixel + difference * percent / 100 "
    "(integer, truncated), clipped to 0-255.",
    (
        Param("method", "str", "'kernel' (PIL SHARPEN) or 'unsharp' (unsharp mask).", "kernel",
              choices=("kernel", "unsharp")),
        Param("radius", "float", "Unsharp: Gaussian sigma in pixels.", 2.0, 0.1, 50),
        Param("percent", "int", "Unsharp: strength in percent (150 = add 1.5x the detail).", 150, 0, 1000),
        Param("threshold", "int", "Unsharp: minimum difference (0-255) that gets sharpened.", 3, 0, 255),
    ),
    sharpen_cv, sharpen_torch, category=CATEGORY,
    examples=({}, {"method": "unsharp"}, {"method": "unsharp", "radius": 1.0, "percent": 300, "threshold": 0},
              {"method": "unsharp", "radius": 4.5, "percent": 80, "threshold": 10}),
))


# -- denoise (OpenCV only) -----------------------------------------------------------------------------
def _denoise_check(args, height, width):
    _odd("denoise", "template_window", args["template_window"])
    _odd("denoise", "search_window", args["search_window"])


def denoise_cv(image, h, h_color, template_window, search_window, mode):
    hc = h if h_color is None else h_color
    if image.ndim == 2:
        return cv2.fastNlMeansDenoising(image, None, h, template_window, search_window)
    if mode == "gray":
        return cv2.fastNlMeansDenoising(gray_cv(image), None, h, template_window, search_window)
    if mode == "per_channel":
        return np.dstack([cv2.fastNlMeansDenoising(np.ascontiguousarray(image[:, :, k]), None, h, template_window,
                                                   search_window) for k in range(3)])
    # fastNlMeansDenoisingColored works in Lab computed from BGR: hand it BGR so luminance is right.
    bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    out = cv2.fastNlMeansDenoisingColored(bgr, None, h, hc, template_window, search_window)
    return cv2.cvtColor(out, cv2.COLOR_BGR2RGB)


register(Op(
    "denoise",
    "Remove noise with OpenCV's fast non-local means. `h` is the filter strength on lightness (higher "
    "removes more noise and more detail; 10 is typical), `h_color` the strength on color (default = h). "
    "`mode`: 'color' denoises lightness and color separately (fastNlMeansDenoisingColored), 'gray' converts "
    "to gray first and returns a gray image, 'per_channel' denoises R, G and B independently. Gray input "
    "always uses the single-channel filter. Windows are odd sizes in pixels.",
    (
        Param("h", "float", "Luminance filter strength.", 10.0, 0, 100),
        Param("h_color", "float", "Color filter strength (default: same as h).", None, 0, 100),
        Param("template_window", "int", "Patch size in pixels (odd).", 7, 3, 21),
        Param("search_window", "int", "Search area size in pixels (odd).", 21, 3, 35),
        Param("mode", "str", "How color images are handled.", "color", choices=("color", "gray", "per_channel")),
    ),
    denoise_cv, None, check=_denoise_check, category=CATEGORY,
    examples=({}, {"h": 5, "template_window": 5, "search_window": 11}, {"mode": "gray"},
              {"mode": "per_channel", "h": 15}),
))


# -- morphology ----------------------------------------------------------------------------------------
_SHAPES = {"rect": cv2.MORPH_RECT, "ellipse": cv2.MORPH_ELLIPSE, "cross": cv2.MORPH_CROSS}
_MORPH_OPS = {"erode": cv2.MORPH_ERODE, "dilate": cv2.MORPH_DILATE, "open": cv2.MORPH_OPEN, "close": cv2.MORPH_CLOSE,
              "gradient": cv2.MORPH_GRADIENT, "tophat": cv2.MORPH_TOPHAT, "blackhat": cv2.MORPH_BLACKHAT}


def _structuring_element(shape, k):
    return cv2.getStructuringElement(_SHAPES[shape], (k, k))


def _run_extreme(x: torch.Tensor, width: int, dim: int, fn) -> torch.Tensor:
    """y[i] = fn over x[i : i + width] along `dim` (length L - width + 1), by doubling (log steps)."""
    length = x.shape[dim]
    span, m = 1, x
    while 2 * span <= width:
        m = fn(m.narrow(dim, 0, m.shape[dim] - span), m.narrow(dim, span, m.shape[dim] - span))
        span *= 2
    n_out = length - width + 1
    if span == width:
        return m.narrow(dim, 0, n_out)
    return fn(m.narrow(dim, 0, n_out), m.narrow(dim, width - span, n_out))


def _morph_once(x: torch.Tensor, element: np.ndarray, erode: bool) -> torch.Tensor:
    """One erosion/dilation with OpenCV's default border (outside pixels never win)."""
    fn = torch.minimum if erode else torch.maximum
    kh, kw = element.shape
    h, w = x.shape[-2:]
    xp = F.pad(x, (kw // 2, kw // 2, kh // 2, kh // 2), value=255 if erode else 0)
    runs = []  # (x0, width, first row, last row) for vertical bands of identical row runs
    for r in range(kh):
        cols = np.flatnonzero(element[r])
        if cols.size == 0:
            continue
        x0, width = int(cols[0]), int(cols[-1] - cols[0] + 1)
        if width != cols.size:  # not a contiguous run: fall back to single taps
            runs.extend((int(c), 1, r, r) for c in cols)
            continue
        if runs and runs[-1][:2] == (x0, width) and runs[-1][3] == r - 1:
            runs[-1] = (x0, width, runs[-1][2], r)
        else:
            runs.append((x0, width, r, r))
    cache, out = {}, None
    for x0, width, r0, r1 in runs:
        if width not in cache:
            cache[width] = _run_extreme(xp, width, -1, fn)
        band = cache[width][..., x0:x0 + w]
        piece = _run_extreme(band[..., r0:r1 + h, :], r1 - r0 + 1, -2, fn)
        out = piece if out is None else fn(out, piece)
    return out if out is not None else x.clone()


def _morph_repeat(x, element, erode, iterations):
    for _ in range(iterations):
        x = _morph_once(x, element, erode)
    return x


def _morph_check(args, height, width):
    _odd("morphology", "kernel_size", args["kernel_size"])


def morphology_cv(image, op, kernel_size, kernel_shape, iterations):
    element = _structuring_element(kernel_shape, kernel_size)
    return cv2.morphologyEx(image, _MORPH_OPS[op], element, iterations=iterations)


def morphology_torch(batch, op, kernel_size, kernel_shape, iterations):
    element = _structuring_element(kernel_shape, kernel_size)
    if op in ("erode", "dilate"):
        return _morph_repeat(batch, element, op == "erode", iterations)
    if op == "gradient":
        return _morph_repeat(batch, element, False, iterations) - _morph_repeat(batch, element, True, iterations)
    first_erode = op in ("open", "tophat")
    out = _morph_repeat(_morph_repeat(batch, element, first_erode, iterations), element, not first_erode, iterations)
    if op == "tophat":
        return batch - out
    if op == "blackhat":
        return out - batch
    return out


register(Op(
    "morphology",
    "Morphological filter with a kernel_size x kernel_size structuring element ('rect', 'ellipse' or "
    "'cross'), applied per channel, repeated `iterations` times. 'erode' shrinks bright regions (local "
    "minimum), 'dilate' grows them (local maximum), 'open' = erode then dilate (removes small bright "
    "specks), 'close' = dilate then erode (fills small dark holes), 'gradient' = dilate - erode (outlines), "
    "'tophat' = image - open (small bright details), 'blackhat' = close - image (small dark details). "
    "Pixels outside the image are ignored.",
    (
        Param("op", "str", "Operation.", "open", choices=tuple(_MORPH_OPS)),
        Param("kernel_size", "int", "Structuring element side in pixels (odd).", 3, 1, 51),
        Param("kernel_shape", "str", "Structuring element shape.", "rect", choices=tuple(_SHAPES)),
        Param("iterations", "int", "How many times erosion/dilation is applied.", 1, 1, 10),
    ),
    morphology_cv, morphology_torch, check=_morph_check, category=CATEGORY,
    examples=(
        {}, {"op": "erode"}, {"op": "dilate", "kernel_size": 5, "kernel_shape": "ellipse"},
        {"op": "close", "kernel_size": 7, "kernel_shape": "cross", "iterations": 2},
        {"op": "gradient", "kernel_size": 3}, {"op": "tophat", "kernel_size": 9, "kernel_shape": "ellipse"},
        {"op": "blackhat", "kernel_size": 5}, {"op": "erode", "kernel_size": 5, "iterations": 3},
        {"op": "dilate", "kernel_size": 11, "kernel_shape": "ellipse", "iterations": 2},
    ),
))


# -- gradients -----------------------------------------------------------------------------------------
_GRAD_MODES = ("sobel_x", "sobel_y", "sobel", "laplacian", "scharr_x", "scharr_y")


def _deriv(dx, dy, ksize):
    kx, ky = cv2.getDerivKernels(dx, dy, ksize)
    return np.rint(kx[:, 0]).astype(np.int64), np.rint(ky[:, 0]).astype(np.int64)


def _laplacian_kernel(ksize):
    if ksize == 1:
        return np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], np.int64)
    if ksize == 3:
        return np.array([[2, 0, 2], [0, -8, 0], [2, 0, 2]], np.int64)
    ax, ay = _deriv(2, 0, ksize)
    bx, by = _deriv(0, 2, ksize)
    return np.outer(ay, ax) + np.outer(by, bx)


def _grad_check(args, height, width):
    if args["mode"].startswith("scharr"):
        if args["ksize"] != 3:
            raise ToolArgumentError("gradients", "ksize", "Scharr is always 3x3; use ksize 3")
    elif args["mode"] == "laplacian" and args["ksize"] not in (1, 3, 5, 7):
        raise ToolArgumentError("gradients", "ksize", f"must be 1, 3, 5 or 7, got {args['ksize']}")


def _grad_data(response_abs_mean, response_abs_max):
    return {"mean_abs": response_abs_mean, "max_abs": response_abs_max}


def gradients_cv(image, mode, ksize, gray):
    src = gray_cv(image) if gray else image
    if mode in ("sobel_x", "sobel_y"):
        resp = cv2.Sobel(src, cv2.CV_32F, int(mode == "sobel_x"), int(mode == "sobel_y"), ksize=ksize)
    elif mode in ("scharr_x", "scharr_y"):
        resp = cv2.Scharr(src, cv2.CV_32F, int(mode == "scharr_x"), int(mode == "scharr_y"))
    elif mode == "laplacian":
        resp = cv2.Laplacian(src, cv2.CV_32F, ksize=ksize)
    else:
        gx = cv2.Sobel(src, cv2.CV_32F, 1, 0, ksize=ksize)
        resp = cv2.magnitude(gx, cv2.Sobel(src, cv2.CV_32F, 0, 1, ksize=ksize))
    absval = np.abs(resp)
    return cv2.convertScaleAbs(resp), _grad_data(float(absval.mean(dtype=np.float64)), float(absval.max()))


def gradients_torch(batch, mode, ksize, gray):
    src = gray_torch(batch) if gray else batch
    if mode in ("sobel_x", "sobel_y", "scharr_x", "scharr_y"):
        k = -1 if mode.startswith("scharr") else ksize
        kx, ky = _deriv(int(mode.endswith("_x")), int(mode.endswith("_y")), k)
        resp = _sep_int(src, kx, ky, "reflect101").abs_()
        image = _u8(resp.clone())
        resp = resp.double()
    elif mode == "laplacian":
        resp = _corr2d_int(src, _laplacian_kernel(ksize), "reflect101").abs_()
        image = _u8(resp.clone())
        resp = resp.double()
    else:
        gx = _sep_int(src, *_deriv(1, 0, ksize), "reflect101").double()
        gy = _sep_int(src, *_deriv(0, 1, ksize), "reflect101").double()
        resp = torch.sqrt(gx * gx + gy * gy).float().double()  # cv2.magnitude is float32
        image = _u8(torch.round(resp).clamp_(max=255))
    flat = resp.flatten(1)
    means, maxes = flat.mean(1).tolist(), flat.amax(1).tolist()
    return image, [_grad_data(m, x) for m, x in zip(means, maxes)]


register(Op(
    "gradients",
    "Image derivatives shown as absolute values clipped to 0-255 (OpenCV convertScaleAbs): 'sobel_x' "
    "responds to vertical edges (intensity change left-right), 'sobel_y' to horizontal edges, 'sobel' is "
    "the gradient magnitude sqrt(gx^2 + gy^2), 'laplacian' the second derivative (all edges and fine "
    "detail), 'scharr_x'/'scharr_y' a more rotation-accurate 3x3 derivative. `gray` converts a color image "
    "to gray first (one-channel output); otherwise each channel is processed. Borders reflect. Returns "
    "data {mean_abs, max_abs}: the mean and maximum absolute response before clipping.",
    (
        Param("mode", "str", "Which derivative.", "sobel_x", choices=_GRAD_MODES),
        Param("ksize", "int", "Aperture in pixels: 1, 3, 5 or 7 (Scharr: 3).", 3, 1, 7, choices=(1, 3, 5, 7)),
        Param("gray", "bool", "Convert color input to gray first.", True),
    ),
    gradients_cv, gradients_torch, check=_grad_check, category=CATEGORY,
    examples=({}, {"mode": "sobel_y"}, {"mode": "sobel"}, {"mode": "sobel", "ksize": 5}, {"mode": "laplacian"},
              {"mode": "laplacian", "ksize": 3}, {"mode": "laplacian", "ksize": 5}, {"mode": "scharr_x"},
              {"mode": "scharr_y", "gray": False}, {"mode": "sobel_x", "ksize": 7, "gray": False},
              {"mode": "sobel_y", "ksize": 1}),
))


# -- canny ---------------------------------------------------------------------------------------------
_TG22 = 13573  # round(tan(22.5 deg) * 2^15)


def canny_thresholds(low: float, high: float, l2gradient: bool, aperture: int = 3) -> tuple[int, int]:
    """The integer thresholds cv2.Canny compares magnitudes against (m > low, m > high)."""
    if low > high:
        low, high = high, low
    if aperture == 7:  # the 7x7 Sobel is scaled by 1/16, and so are the thresholds
        low, high = low / 16.0, high / 16.0
    if l2gradient:
        low, high = min(32767.0, low), min(32767.0, high)
        low = low * low if low > 0 else low
        high = high * high if high > 0 else high
    return math.floor(low), math.floor(high)


def _canny_data(edges: int, total: int, low: float, high: float):
    lo, hi = (low, high) if low <= high else (high, low)
    return {"edge_pixels": edges, "edge_ratio": edges / total if total else 0.0, "thresholds": [float(lo), float(hi)]}


def canny_cv(image, low, high, aperture, l2gradient, color):
    src = gray_cv(image) if color == "gray" else image
    edges = cv2.Canny(src, low, high, apertureSize=aperture, L2gradient=l2gradient)
    return edges, _canny_data(int(cv2.countNonZero(edges)), edges.size, low, high)


def _canny_gradients(src: torch.Tensor, aperture: int):
    kx_d, ky_s = _deriv(1, 0, aperture)
    kx_s, ky_d = _deriv(0, 1, aperture)
    xp = _pad(src, aperture // 2, aperture // 2, "replicate")
    both = _conv_int(xp, [np.outer(ky_s, kx_d), np.outer(ky_d, kx_s)]).to(torch.int32)  # small integer weights
    dx, dy = both[:, :, 0], both[:, :, 1]
    if aperture == 7:  # OpenCV scales the 7x7 Sobel by 1/16 and rounds (half to even) into int16
        dx = torch.round(dx.double() / 16).to(torch.int32)
        dy = torch.round(dy.double() / 16).to(torch.int32)
    return dx.clamp_(-32768, 32767), dy.clamp_(-32768, 32767)


def canny_edges_torch(src: torch.Tensor, lows, highs, aperture: int = 3, l2gradient: bool = False) -> torch.Tensor:
    """cv2.Canny on a (N, C, H, W) uint8 batch, C in {1, 3}; per-image thresholds. Returns (N, H, W) bool:
    Sobel derivatives, magnitude, channel pick, non-maximum suppression and hysteresis."""
    dx, dy = _canny_gradients(src, aperture)
    n, c, h, w = dx.shape
    dev = dx.device
    mag = dx * dx + dy * dy if l2gradient else dx.abs() + dy.abs()
    if c > 1:  # per pixel, the channel with the largest magnitude (first one on ties)
        pick = mag.argmax(dim=1, keepdim=True)
        mag, dx, dy = mag.gather(1, pick), dx.gather(1, pick), dy.gather(1, pick)
    mag, dx, dy = mag[:, 0], dx[:, 0], dy[:, 0]
    pairs = [canny_thresholds(lo, hi, l2gradient, aperture) for lo, hi in zip(lows, highs)]
    low_t = torch.tensor([p[0] for p in pairs], dtype=torch.int64, device=dev).view(n, 1, 1)
    high_t = torch.tensor([p[1] for p in pairs], dtype=torch.int64, device=dev).view(n, 1, 1)

    # Non-maximum suppression with OpenCV's integer sector tests and asymmetric comparisons.
    mp = F.pad(mag, (1, 1, 1, 1))
    m = mp[:, 1:-1, 1:-1]
    ax = dx.abs()
    ay = dy.abs() << 15
    tg22x = ax * _TG22
    tg67x = tg22x + (ax << 16)
    horizontal = ay < tg22x
    vertical = ~horizontal & (ay > tg67x)
    keep_h = (m > mp[:, 1:-1, :-2]) & (m >= mp[:, 1:-1, 2:])
    keep_v = (m > mp[:, :-2, 1:-1]) & (m >= mp[:, 2:, 1:-1])
    same_sign = (dx ^ dy) >= 0
    keep_d = torch.where(same_sign, (m > mp[:, :-2, :-2]) & (m > mp[:, 2:, 2:]),
                         (m > mp[:, :-2, 2:]) & (m > mp[:, 2:, :-2]))
    keep = torch.where(horizontal, keep_h, torch.where(vertical, keep_v, keep_d))
    candidate = keep & (m > low_t)
    strong = candidate & (m > high_t)
    return _hysteresis(candidate, strong)


_CHECK_EVERY = 2


def _hysteresis(candidate: torch.Tensor, strong: torch.Tensor) -> torch.Tensor:
    """Keep candidate pixels 8-connected (through candidates) to a strong pixel (OpenCV's hysteresis).

    Connected components over the candidate pixels only, in compact form: candidates are numbered strong
    ones first, each holds a label (a candidate number) that starts as its own number. Each round takes the
    minimum label over the 8 neighbours, hooks it onto the candidate the current label names (scatter min,
    so separate local minima of one component merge quickly), then jumps pointers (label <- label of
    label). Labels only decrease; a component holds a strong pixel iff its converged label < #strong.
    Converges in a handful of rounds; convergence is checked every _CHECK_EVERY rounds (each check is a device sync).
    """
    n, h, w = candidate.shape
    dev = candidate.device
    flat_cand = candidate.reshape(-1)
    is_strong = strong.reshape(-1) & flat_cand
    ids = torch.cat([is_strong.nonzero().view(-1), (flat_cand & ~is_strong).nonzero().view(-1)])
    m = ids.numel()
    out = torch.zeros(n * h * w, dtype=torch.bool, device=dev)
    if m == 0:
        return out.view(n, h, w)
    n_strong = int(is_strong.sum())
    order = torch.arange(m, device=dev)
    number = torch.full((n * h * w,), -1, dtype=torch.int64, device=dev)
    number[ids] = order
    within = ids.remainder(h * w)
    ys, xs = within // w, within.remainder(w)
    neighbours = []
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            if dy == 0 and dx == 0:
                continue
            inside = (ys + dy >= 0) & (ys + dy < h) & (xs + dx >= 0) & (xs + dx < w)
            nb = number[torch.where(inside, ids + dy * w + dx, ids)]
            neighbours.append(torch.where(inside & (nb >= 0), nb, order))
    neighbours = torch.stack(neighbours, dim=1)  # (m, 8) candidate numbers (self where none)
    labels = order.clone()
    while True:
        before = labels
        for _ in range(_CHECK_EVERY):
            low = torch.minimum(labels[neighbours].amin(dim=1), labels)
            labels = labels.scatter_reduce(0, labels, low, "amin")
            labels = torch.minimum(labels, low)
            labels = labels[labels]
            labels = labels[labels]
        if torch.equal(labels, before):
            break
    out[ids] = labels < n_strong
    return out.view(n, h, w)


def canny_torch(batch, low, high, aperture, l2gradient, color):
    src = gray_torch(batch) if color == "gray" else batch
    edges = canny_edges_torch(src, low, high, aperture, l2gradient)
    counts = edges.flatten(1).sum(1).tolist()
    total = edges.shape[1] * edges.shape[2]
    data = [_canny_data(int(cnt), total, lo, hi) for cnt, lo, hi in zip(counts, low, high)]
    return edges.unsqueeze(1).to(torch.uint8) * 255, data


register(Op(
    "canny",
    "Canny edge detector (exactly cv2.Canny): returns a one-channel image with edges 255 and background 0. "
    "Gradient magnitudes (Sobel, `aperture` pixels; |gx|+|gy| or, with l2gradient, sqrt(gx^2+gy^2)) above "
    "`high` start edges, which extend through connected pixels above `low`; low/high are swapped if "
    "reversed. Typical thresholds: 50/100 (more edges), 100/200 (default), 150/250 (fewer). `color`: 'gray' "
    "converts to gray first; 'max_channel' uses, per pixel, the RGB channel with the strongest gradient "
    "(OpenCV's color Canny). Returns data {edge_pixels, edge_ratio, thresholds}.",
    (
        Param("low", "float", "Lower hysteresis threshold (gradient magnitude).", 100.0, 0, 10000),
        Param("high", "float", "Upper hysteresis threshold (gradient magnitude).", 200.0, 0, 10000),
        Param("aperture", "int", "Sobel aperture size.", 3, 3, 7, choices=(3, 5, 7)),
        Param("l2gradient", "bool", "Use the exact L2 gradient magnitude instead of |gx|+|gy|.", False),
        Param("color", "str", "How color images are reduced.", "gray", choices=("gray", "max_channel")),
    ),
    canny_cv, canny_torch, vectorized=("low", "high"), category=CATEGORY,
    examples=({}, {"low": 50, "high": 100}, {"low": 150, "high": 250}, {"low": 200, "high": 80},
              {"low": 30.5, "high": 90.7, "l2gradient": True}, {"color": "max_channel"},
              {"low": 100, "high": 300, "aperture": 5}, {"low": 20, "high": 60, "aperture": 7},
              {"low": 0, "high": 10}),
))


# -- threshold -----------------------------------------------------------------------------------------
_FIXED = {"binary": cv2.THRESH_BINARY, "binary_inv": cv2.THRESH_BINARY_INV, "trunc": cv2.THRESH_TRUNC,
          "tozero": cv2.THRESH_TOZERO, "tozero_inv": cv2.THRESH_TOZERO_INV}
_AUTO = {"otsu": cv2.THRESH_OTSU, "triangle": cv2.THRESH_TRIANGLE}
_ADAPTIVE = {"adaptive_mean": cv2.ADAPTIVE_THRESH_MEAN_C, "adaptive_gaussian": cv2.ADAPTIVE_THRESH_GAUSSIAN_C}
THRESHOLD_MODES = tuple(_FIXED) + tuple(_AUTO) + tuple(_ADAPTIVE)


def _threshold_check(args, height, width):
    mode = args["mode"]
    if mode in _ADAPTIVE:
        _odd("threshold", "block_size", args["block_size"])
    if args["invert"] and mode in ("binary_inv", "trunc", "tozero", "tozero_inv"):
        raise ToolArgumentError("threshold", "invert",
                                f"applies only to binary, otsu, triangle and adaptive modes, not {mode!r}")


def _threshold_one(plane, mode, value, max_value, block_size, c, invert):
    binary = cv2.THRESH_BINARY_INV if invert else cv2.THRESH_BINARY
    if mode in _ADAPTIVE:
        return -1.0, cv2.adaptiveThreshold(plane, max_value, _ADAPTIVE[mode], binary, block_size, c)
    if mode in _AUTO:
        return cv2.threshold(plane, 0, max_value, binary | _AUTO[mode])
    kind = binary if mode == "binary" else _FIXED[mode]
    return cv2.threshold(plane, value, max_value, kind)


def threshold_cv(image, mode, value, max_value, block_size, c, invert, per_channel):
    if image.ndim == 3 and per_channel:
        results = [_threshold_one(np.ascontiguousarray(image[:, :, k]), mode, value, max_value, block_size, c, invert)
                   for k in range(3)]
        out = np.dstack([r[1] for r in results])
        used = [float(r[0]) for r in results]
        nonzero = cv2.countNonZero(out.reshape(out.shape[0], -1))  # countNonZero takes one channel
    else:
        used, out = _threshold_one(gray_cv(image), mode, value, max_value, block_size, c, invert)
        used = float(used)
        nonzero = cv2.countNonZero(out)
    return out, {"threshold": used, "nonzero_ratio": float(nonzero) / out.size}


def triangle_thresholds(hist: np.ndarray) -> np.ndarray:
    """OpenCV's getThreshVal_Triangle_8u, vectorized over rows of `hist`."""
    hist = hist.astype(np.int64)
    m = len(hist)
    rows = np.arange(m)
    nonzero = hist > 0
    left = np.argmax(nonzero, 1)
    left = np.where(left > 0, left - 1, left)
    right = 255 - np.argmax(nonzero[:, ::-1], 1)
    right = np.where(nonzero.any(1), right, 0)
    right = np.where(right < 255, right + 1, right)
    peak = np.argmax(hist, 1)  # first maximum
    flipped = (peak - left) < (right - peak)
    h = np.where(flipped[:, None], hist[:, ::-1], hist)
    left = np.where(flipped, 255 - right, left)
    peak = np.where(flipped, 255 - peak, peak)
    a = h[rows, peak].astype(np.float64)
    b = (left - peak).astype(np.float64)
    levels = np.arange(256)
    dist = a[:, None] * levels[None, :] + b[:, None] * h
    inside = (levels[None, :] > left[:, None]) & (levels[None, :] <= peak[:, None])
    dist = np.where(inside, dist, -np.inf)
    best = np.argmax(dist, 1)
    thresh = np.where(dist[rows, best] > 0, best, left).astype(np.float64) - 1
    return np.where(flipped, 255 - thresh, thresh)


def _adaptive_mean_t(planes, block_size, mode):
    """The local mean cv2.adaptiveThreshold compares against (uint8, BORDER_REPLICATE)."""
    if mode == "adaptive_mean":
        k = block_size
        return (_box_sum(planes, k, "replicate") * 2 + k * k) // (2 * k * k)
    kernel = cv2.getGaussianKernel(block_size, 0, cv2.CV_32F)[:, 0].astype(np.float64)
    h, w = planes.shape[-2:]
    p = block_size // 2
    xp = _pad(planes, p, p, "replicate").double()
    rows = None
    for i, k in enumerate(kernel):
        piece = xp[..., i:i + w] * float(k)
        rows = piece if rows is None else rows.add_(piece)
    rows = rows.float().double()  # OpenCV keeps the row pass in float32
    out = None
    for i, k in enumerate(kernel):
        piece = rows[..., i:i + h, :] * float(k)
        out = piece if out is None else out.add_(piece)
    return torch.round(out.float()).clamp_(0, 255).to(torch.int32)


def threshold_torch(batch, mode, value, max_value, block_size, c, invert, per_channel):
    n = batch.shape[0]
    planes = batch if per_channel else gray_torch(batch)  # (N, C', H, W)
    cp = planes.shape[1]
    dev = batch.device
    maxv = int(max_value)
    if mode in _ADAPTIVE:
        x = planes.to(torch.int32)
        mean = _adaptive_mean_t(planes, block_size, mode)
        if invert:
            passed = x - mean <= -math.floor(c)
        else:
            passed = x - mean > -math.ceil(c)
        out = passed.to(torch.uint8) * maxv
        used = np.full((n, cp), -1.0)
    else:
        if mode in _AUTO:
            hist = plane_hist(planes.reshape(n * cp, *planes.shape[-2:])).cpu().numpy()
            used = (otsu_thresholds(hist) if mode == "otsu" else triangle_thresholds(hist)).reshape(n, cp)
        else:
            used = np.repeat(np.floor(np.asarray(value, dtype=np.float64)).reshape(n, 1), cp, 1)
        t = torch.tensor(np.clip(used, 0, 255), dtype=torch.uint8, device=dev).view(n, cp, 1, 1)
        above = planes > t
        kind = ("binary_inv" if invert else "binary") if mode in _AUTO or mode == "binary" else mode
        if kind == "binary":
            out = above.to(torch.uint8) * maxv
        elif kind == "binary_inv":
            out = (~above).to(torch.uint8) * maxv
        elif kind == "trunc":
            out = torch.minimum(planes, t)
        elif kind == "tozero":
            out = planes * above
        else:
            out = planes * ~above
    out = out.to(torch.uint8)
    ratios = ((out > 0).flatten(1).sum(1).double() / out[0].numel()).tolist()
    data = []
    for k in range(n):
        thr = [float(v) for v in used[k]] if cp == 3 else float(used[k][0])
        data.append({"threshold": thr, "nonzero_ratio": ratios[k]})
    return out, data


register(Op(
    "threshold",
    "Threshold intensities (0-255). A color image is converted to gray first (one-channel output) unless "
    "per_channel is true (each RGB channel thresholded separately). Fixed modes compare pixel > value: "
    "'binary' -> max_value else 0, 'binary_inv' -> 0 else max_value, 'trunc' -> value else pixel, 'tozero' "
    "-> pixel else 0, 'tozero_inv' -> 0 else pixel. 'otsu' and 'triangle' choose the value automatically "
    "(binary output). 'adaptive_mean' / 'adaptive_gaussian' compare each pixel with the (Gaussian-weighted) "
    "mean of its block_size x block_size neighbourhood minus c: pixel > mean - c -> max_value. `invert` "
    "swaps the two output levels of binary, otsu, triangle and adaptive modes. Returns data {threshold "
    "(the value used; a list per channel with per_channel; -1 for adaptive), nonzero_ratio}.",
    (
        Param("mode", "str", "Thresholding method.", "binary", choices=THRESHOLD_MODES),
        Param("value", "float", "Threshold for the fixed modes (compared as pixel > floor(value)).", 127.0, 0, 255),
        Param("max_value", "int", "Output level for pixels that pass (binary-type modes).", 255, 0, 255),
        Param("block_size", "int", "Adaptive neighbourhood size in pixels (odd).", 11, 3, 255),
        Param("c", "float", "Adaptive offset subtracted from the local mean.", 2.0, -255, 255),
        Param("invert", "bool", "Swap the output levels (binary, otsu, triangle, adaptive).", False),
        Param("per_channel", "bool", "Threshold each RGB channel instead of the gray image.", False),
    ),
    threshold_cv, threshold_torch, vectorized=("value",), check=_threshold_check, category=CATEGORY,
    tolerance=Tolerance(pixel=0, outliers=0.001, mean=0.3,
                        why="adaptive_gaussian only: OpenCV's float32 Gaussian local mean could round differently "
                            "on a rare pixel (none seen in tests); every other mode is bit-exact"),
    examples=(
        {}, {"mode": "binary_inv", "value": 100}, {"mode": "trunc", "value": 150.5}, {"mode": "tozero", "value": 90},
        {"mode": "tozero_inv", "value": 200}, {"mode": "binary", "value": 60, "max_value": 200, "invert": True},
        {"mode": "otsu"}, {"mode": "otsu", "invert": True}, {"mode": "triangle"}, {"mode": "otsu", "per_channel": True},
        {"mode": "triangle", "per_channel": True}, {"mode": "binary", "value": 128, "per_channel": True},
        {"mode": "adaptive_mean"}, {"mode": "adaptive_mean", "block_size": 25, "c": -3.5, "invert": True},
        {"mode": "adaptive_gaussian"}, {"mode": "adaptive_gaussian", "block_size": 7, "c": 5, "per_channel": True},
    ),
))


# -- dft -----------------------------------------------------------------------------------------------
def dft_cv(image, log_scale):
    gray = gray_cv(image)
    spectrum = cv2.dft(np.float32(gray), flags=cv2.DFT_COMPLEX_OUTPUT)
    spectrum = np.fft.fftshift(spectrum, axes=(0, 1))
    mag = cv2.magnitude(spectrum[:, :, 0], spectrum[:, :, 1])
    if log_scale:
        mag = 20.0 * np.log1p(mag)
    return cv2.normalize(mag, None, 0, 255, cv2.NORM_MINMAX, dtype=cv2.CV_8U)


def dft_torch(batch, log_scale):
    gray = gray_torch(batch)[:, 0].double()
    mag = torch.fft.fftshift(torch.fft.fft2(gray), dim=(-2, -1)).abs()
    if log_scale:
        mag = 20.0 * torch.log1p(mag)
    lo = mag.flatten(1).amin(1).view(-1, 1, 1)
    hi = mag.flatten(1).amax(1).view(-1, 1, 1)
    span = hi - lo
    scale = torch.where(span > 2.220446049250313e-16, 255.0 / span, torch.zeros_like(span))
    return _u8(torch.round((mag - lo) * scale)).unsqueeze(1)


register(Op(
    "dft",
    "Fourier magnitude spectrum of the gray image, centered (zero frequency in the middle), as a "
    "one-channel image: 20*log(1+|F|) (or |F| with log_scale false) stretched to 0-255. Bright lines "
    "perpendicular to strong edges or periodic patterns show their orientation and frequency.",
    (Param("log_scale", "bool", "Show 20*log(1+|F|) instead of |F|.", True),),
    dft_cv, dft_torch, category=CATEGORY,
    tolerance=Tolerance(pixel=1, outliers=0.02, mean=0.05, why="float64 torch.fft vs OpenCV's float32 DFT"),
    examples=({}, {"log_scale": False}),
))
