"""Pixel kernels that several op families share: exact OpenCV gray conversion, batched histograms, Otsu."""

from __future__ import annotations

import cv2
import numpy as np
import torch


def gray_cv(image: np.ndarray) -> np.ndarray:
    """cv2.COLOR_RGB2GRAY of an RGB image; gray images pass through."""
    return image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)


def gray_torch(batch: torch.Tensor) -> torch.Tensor:
    """cv2.COLOR_RGB2GRAY exactly on (N, 3, H, W) uint8 -> (N, 1, H, W); gray batches pass through.

    OpenCV 5 uses 15-bit fixed point, (9798 R + 19235 G + 3735 B + 2^14) >> 15 (checked on all 2^24
    colors); the familiar 14-bit weights are off by one on about 0.3% of pixels."""
    if batch.shape[1] == 1:
        return batch
    x = batch.to(torch.int32)
    return ((x[:, 0:1] * 9798 + x[:, 1:2] * 19235 + x[:, 2:3] * 3735 + (1 << 14)) >> 15).to(torch.uint8)


def reflect101(index: torch.Tensor, n: int) -> torch.Tensor:
    """Map any integer indices into [0, n) the way OpenCV's BORDER_REFLECT_101 does (gfedcb|abcdefgh|gfedcba)."""
    if n == 1:
        return torch.zeros_like(index)
    period = 2 * (n - 1)
    index = index.remainder(period)
    return torch.where(index >= n, period - index, index)


_CHUNK = 1 << 26  # elements per launch, bounding the int32 index temporaries (256 MiB)


def plane_chunks(planes: int, size: int):
    step = max(1, _CHUNK // max(size, 1))
    for start in range(0, planes, step):
        yield start, min(planes, start + step)


def plane_hist(planes: torch.Tensor) -> torch.Tensor:
    """Histograms of uint8 planes (P, ...) -> (P, 256) int64, via one bincount on offset indices per chunk."""
    p = planes.shape[0]
    flat = planes.reshape(p, -1)
    m = flat.shape[1]
    out = []
    for a, b in plane_chunks(p, m):
        offsets = torch.arange(b - a, device=planes.device, dtype=torch.int32).mul_(256).view(-1, 1)
        index = (flat[a:b].int() + offsets).reshape(-1)
        out.append(torch.bincount(index, minlength=(b - a) * 256).view(b - a, 256))
    return out[0] if len(out) == 1 else torch.cat(out)


def otsu_thresholds(hist: np.ndarray) -> np.ndarray:
    """OpenCV's getThreshVal_Otsu_8u, vectorized over rows of `hist` (same double-precision recurrence)."""
    hist = hist.astype(np.float64)
    scale = 1.0 / hist.sum(1)
    levels = np.arange(256, dtype=np.float64)
    mu = np.zeros(len(hist))
    for i in range(256):
        mu += levels[i] * hist[:, i]
    mu *= scale
    mu1 = np.zeros(len(hist))
    q1 = np.zeros(len(hist))
    max_sigma = np.zeros(len(hist))
    max_val = np.zeros(len(hist))
    eps = float(np.finfo(np.float32).eps)
    for i in range(256):
        p_i = hist[:, i] * scale
        mu1 = mu1 * q1
        q1 = q1 + p_i
        q2 = 1.0 - q1
        valid = ~((np.minimum(q1, q2) < eps) | (np.maximum(q1, q2) > 1.0 - eps))
        with np.errstate(divide="ignore", invalid="ignore"):
            new_mu1 = (mu1 + i * p_i) / q1
            mu2 = (mu - q1 * new_mu1) / q2
            sigma = q1 * q2 * (new_mu1 - mu2) * (new_mu1 - mu2)
        mu1 = np.where(valid, new_mu1, mu1)
        better = valid & (sigma > max_sigma)
        max_sigma = np.where(better, sigma, max_sigma)
        max_val = np.where(better, float(i), max_val)
    return max_val
