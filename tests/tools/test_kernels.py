"""The shared pixel kernels (tools/ops/kernels.py) agree with OpenCV exactly."""

import cv2
import numpy as np
import pytest
import torch

from tools.images import demo_image
from tools.ops.kernels import gray_cv, gray_torch, otsu_thresholds, plane_hist


def test_gray_matches_opencv_exhaustively():
    values = np.arange(256 ** 3, dtype=np.uint32)
    rgb = np.stack([values >> 16, (values >> 8) & 255, values & 255], -1).astype(np.uint8).reshape(4096, 4096, 3)
    ref = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    got = gray_torch(torch.from_numpy(rgb).permute(2, 0, 1)[None])[0, 0].numpy()
    assert np.array_equal(ref, got)


@pytest.mark.parametrize("seed", range(6))
def test_otsu_matches_opencv(seed):
    rng = np.random.default_rng(seed)
    images = [
        rng.integers(0, 256, (40, 50), dtype=np.uint8),
        np.full((30, 30), 77, np.uint8),  # constant: OpenCV returns 0
        np.where(rng.random((20, 25)) < 0.3, 10, 200).astype(np.uint8),  # two levels
        np.clip(rng.normal(90 + 20 * seed, 15, (33, 47)), 0, 255).astype(np.uint8),
        demo_image(48, 64, seed=seed, gray=True),
    ]
    for img in images:
        ref = int(cv2.threshold(img, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)[0])
        assert otsu_thresholds(plane_hist(torch.from_numpy(img)[None]).numpy()).tolist() == [ref]


def test_gray_passes_gray_through_and_histograms_count_every_pixel():
    gray = demo_image(37, 53, seed=3, gray=True)
    assert gray_cv(gray) is gray
    batch = torch.from_numpy(np.stack([gray, 255 - gray]))[:, None]
    assert gray_torch(batch) is batch
    hist = plane_hist(batch[:, 0])
    assert hist.shape == (2, 256) and hist.sum(1).tolist() == [gray.size, gray.size]
    np.testing.assert_array_equal(hist[0].numpy(), np.bincount(gray.ravel(), minlength=256))
