"""Semantics of the filter family: hand-checked cases, PIL agreement where an op claims PIL semantics, and
bit-exactness of the torch versions against OpenCV beyond the generic parity examples."""

from collections import deque

import cv2
import numpy as np
import pytest
import torch
from PIL import Image, ImageFilter

from tools import REGISTRY, Executor, ToolCall
from tools.images import demo_image
from tools.ops import filters as fl
from tools.ops.kernels import otsu_thresholds
from tools.registry import ToolArgumentError

RNG = np.random.default_rng(1234)
NOISE_RGB = RNG.integers(0, 256, (45, 67, 3)).astype(np.uint8)
NOISE_GRAY = RNG.integers(0, 256, (39, 52)).astype(np.uint8)
DEMO_RGB = demo_image(72, 96, seed=21)
DEMO_GRAY = demo_image(64, 80, seed=22, gray=True)
IMAGES = [NOISE_RGB, NOISE_GRAY, DEMO_RGB, DEMO_GRAY]


def to_batch(image):
    chw = image[None] if image.ndim == 2 else image.transpose(2, 0, 1)
    return torch.from_numpy(np.ascontiguousarray(chw))[None]


def from_batch(batch):
    out = batch[0].numpy()
    return out[0] if out.shape[0] == 1 else out.transpose(1, 2, 0)


def run_both(name, image, **args):
    """(opencv result, torch result) for one image, each as (image, data)."""
    op = REGISTRY[name]
    bound = op.bind(args)
    if op.check:
        op.check(bound, *image.shape[:2])
    ref = op.opencv(image, **bound)
    kwargs = {k: ([v] if k in op.vectorized else v) for k, v in bound.items()}
    got = op.torch(to_batch(image), **kwargs)
    ref_img, ref_data = ref if isinstance(ref, tuple) else (ref, None)
    got_img, got_data = got if isinstance(got, tuple) else (got, None)
    return (ref_img, ref_data), (from_batch(got_img), got_data[0] if got_data else None)


def assert_exact(name, image, **args):
    (ref, ref_data), (got, got_data) = run_both(name, image, **args)
    assert ref.shape == got.shape, (name, args)
    mismatch = int((ref != got).sum())
    assert mismatch == 0, f"{name}{args} on {image.shape}: {mismatch} pixels differ"
    if ref_data is not None:
        for key, value in ref_data.items():
            assert got_data[key] == pytest.approx(value, rel=1e-6, abs=1e-9), (name, args, key)
    return ref, ref_data


# -- blur ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,sigma", [(3, 0), (5, 0), (9, 0), (11, 0), (7, 1.5), (15, 3.3), (31, 4), (51, 0), (21, 10)])
def test_gaussian_fixed_point_kernel_sums_to_one(n, sigma):
    kernel = fl.gaussian_kernel_q8(n, sigma)
    assert len(kernel) == n and sum(kernel) == 256 and kernel == kernel[::-1]
    assert max(kernel) - kernel[n // 2] <= 1  # error diffusion can leave the center one below a neighbour


def test_gaussian_kernel_tables():
    assert fl.gaussian_kernel_q8(3, 0) == [64, 128, 64]
    assert fl.gaussian_kernel_q8(9, 0) == [4, 13, 30, 51, 60, 51, 30, 13, 4]
    assert fl.gaussian_ksize(2.0) == 13 and fl.gaussian_ksize(0.5) == 5


@pytest.mark.parametrize("args", [
    {"ksize": 3}, {"ksize": 5, "sigma": 0.8}, {"ksize": 7, "sigma": 1.5}, {"ksize": 11}, {"ksize": 0, "sigma": 1.7},
    {"ksize": 0, "sigma": 4.0}, {"ksize": 9, "sigma": 2.0, "sigma_y": 0.6}, {"ksize": 31, "sigma": 6}, {"ksize": 51},
])
def test_gaussian_blur_is_bit_exact(args):
    for image in IMAGES + [RNG.integers(0, 256, (4, 7, 3)).astype(np.uint8)]:
        assert_exact("blur", image, method="gaussian", **args)


@pytest.mark.parametrize("k", [1, 3, 5, 7, 9, 15, 25])
def test_average_and_median_are_bit_exact(k):
    for image in IMAGES:
        assert_exact("blur", image, method="average", ksize=k)
        assert_exact("blur", image, method="median", ksize=k)


def test_median_removes_salt_and_pepper():
    image = np.full((20, 20), 100, np.uint8)
    image[5, 5], image[12, 7] = 255, 0
    out = REGISTRY["blur"].opencv(image, **REGISTRY["blur"].bind({"method": "median", "ksize": 3}))
    assert (out == 100).all()
    (_, _), (got, _) = run_both("blur", image, method="median", ksize=3)
    assert (got == 100).all()


@pytest.mark.parametrize("args", [{"d": 9, "sigma_color": 75, "sigma_space": 75},
                                  {"d": 5, "sigma_color": 30, "sigma_space": 4},
                                  {"d": 15, "sigma_color": 20, "sigma_space": 8}])
def test_bilateral_within_one(args):
    for image in IMAGES:
        (ref, _), (got, _) = run_both("blur", image, method="bilateral", **args)
        diff = np.abs(ref.astype(int) - got)
        assert diff.max() <= 1 and diff.mean() <= 0.05, (args, image.shape, diff.mean())


def test_bilateral_keeps_a_strong_edge():
    image = np.zeros((30, 30), np.uint8)
    image[:, 15:] = 200
    (ref, _), (got, _) = run_both("blur", image, method="bilateral", d=9, sigma_color=20, sigma_space=5)
    assert (got[:, :15] <= 1).all() and (got[:, 15:] >= 199).all()


def test_blur_validation_names_the_parameter():
    op = REGISTRY["blur"]
    with pytest.raises(ToolArgumentError, match="ksize.*odd"):
        op.check(op.bind({"method": "average", "ksize": 4}), 48, 64)
    with pytest.raises(ToolArgumentError, match="sigma"):
        op.check(op.bind({"method": "gaussian", "ksize": 0}), 48, 64)
    with pytest.raises(ToolArgumentError, match="ksize"):
        op.bind({"ksize": 53})
    result = Executor("cpu").run([ToolCall("blur", DEMO_RGB, {"method": "median", "ksize": 6})])[0]
    assert not result.ok and "ksize" in result.error and "odd" in result.error


# -- PIL kernels ---------------------------------------------------------------------------------------
PIL_NAMES = {"blur": "BLUR", "contour": "CONTOUR", "detail": "DETAIL", "edge_enhance": "EDGE_ENHANCE",
             "edge_enhance_more": "EDGE_ENHANCE_MORE", "emboss": "EMBOSS", "find_edges": "FIND_EDGES",
             "sharpen": "SHARPEN", "smooth": "SMOOTH", "smooth_more": "SMOOTH_MORE"}


@pytest.mark.parametrize("kind", sorted(PIL_NAMES))
def test_filter_matches_pil(kind):
    for image in IMAGES:
        pil = np.asarray(Image.fromarray(image).filter(getattr(ImageFilter, PIL_NAMES[kind])))
        ref, _ = assert_exact("filter", image, kind=kind)  # torch == reference, bit for bit
        diff = np.abs(pil.astype(int) - ref)
        b = PIL_KERNELS_SIZE[kind] // 2
        # The frame PIL leaves unfiltered is copied exactly.
        frame = np.ones(diff.shape[:2], bool)
        frame[b:-b, b:-b] = False
        assert diff[frame].max() == 0
        if kind in ("detail", "smooth_more"):
            # Exact .5 ties (sum divisible by scale/2) round either way in PIL's float32 sums.
            assert diff.max() <= 1 and (diff > 0).mean() < 0.12, (kind, (diff > 0).mean())
        else:
            assert diff.max() == 0, (kind, int((diff > 0).sum()))


PIL_KERNELS_SIZE = {k: v[0] for k, v in fl.PIL_KERNELS.items()}


def test_emboss_and_find_edges_hand_checked():
    image = np.zeros((7, 7), np.uint8)
    image[3, 3] = 100
    emboss = REGISTRY["filter"].opencv(image, kind="emboss")
    # PIL's EMBOSS: 128 + p(y, x) - p(y + 1, x - 1).
    assert emboss[3, 3] == 228 and emboss[2, 4] == 28 and emboss[4, 4] == 128
    edges = REGISTRY["filter"].opencv(image, kind="find_edges")
    assert edges[3, 3] == 255 and edges[3, 4] == 0 and edges[0, 0] == 0


def test_sharpen_kernel_is_pil_sharpen_and_unsharp_formula():
    for image in IMAGES:
        pil = np.asarray(Image.fromarray(image).filter(ImageFilter.SHARPEN))
        ref, _ = assert_exact("sharpen", image)
        assert (ref == pil).all()
        assert_exact("sharpen", image, method="unsharp", radius=1.5, percent=250, threshold=4)
    flat = np.full((16, 16, 3), 77, np.uint8)
    (ref, _), (got, _) = run_both("sharpen", flat, method="unsharp")
    assert (ref == 77).all() and (got == 77).all()
    step = np.zeros((1, 9), np.uint8)
    step[:, 4:] = 100
    step = np.repeat(step, 9, 0)
    args = REGISTRY["sharpen"].bind({"method": "unsharp", "radius": 1.0, "percent": 100, "threshold": 0})
    out = REGISTRY["sharpen"].opencv(step, **args)
    blurred = cv2.GaussianBlur(step, (0, 0), 1.0).astype(int)
    expected = np.clip(step + (step.astype(int) - blurred), 0, 255)
    assert (out == expected).all() and out[4, 4] > 100 and out[4, 3] == 0


# -- morphology ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["erode", "dilate", "open", "close", "gradient", "tophat", "blackhat"])
@pytest.mark.parametrize("shape", ["rect", "ellipse", "cross"])
def test_morphology_is_bit_exact(op, shape):
    for k, it in [(3, 1), (5, 2), (9, 1), (15, 3)]:
        for image in (NOISE_RGB, DEMO_GRAY):
            assert_exact("morphology", image, op=op, kernel_shape=shape, kernel_size=k, iterations=it)


def test_morphology_hand_checked():
    image = np.zeros((9, 9), np.uint8)
    image[4, 4] = 255
    op = REGISTRY["morphology"]
    dil = op.opencv(image, **op.bind({"op": "dilate", "kernel_shape": "cross"}))
    expected = np.zeros_like(image)
    expected[3:6, 4] = expected[4, 3:6] = 255
    assert (dil == expected).all()
    assert (op.opencv(image, **op.bind({"op": "open"})) == 0).all()  # a lone speck is opened away
    white = np.full((6, 6), 255, np.uint8)  # outside pixels never win: erosion keeps the border white
    (ref, _), (got, _) = run_both("morphology", white, op="erode", kernel_size=5)
    assert (ref == 255).all() and (got == 255).all()
    with pytest.raises(ToolArgumentError, match="kernel_size"):
        op.check(op.bind({"kernel_size": 4}), 10, 10)


# -- gradients -----------------------------------------------------------------------------------------
def test_gradients_hand_checked_step():
    image = np.zeros((10, 10), np.uint8)
    image[:, 5:] = 10
    (ref, data), (got, got_data) = run_both("gradients", image, mode="sobel_x")
    assert (ref[:, 4:6] == 40).all() and (ref[:, :3] == 0).all() and (ref == got).all()
    assert data["max_abs"] == 40.0 and data["mean_abs"] == pytest.approx(8.0) and got_data == pytest.approx(data)
    (ref, data), _ = run_both("gradients", image, mode="sobel_y")
    assert (ref == 0).all() and data["max_abs"] == 0.0


@pytest.mark.parametrize("mode", ["sobel_x", "sobel_y", "sobel", "laplacian"])
@pytest.mark.parametrize("ksize", [1, 3, 5, 7])
def test_gradients_are_bit_exact(mode, ksize):
    for image in IMAGES:
        gray = image.ndim == 2 or ksize != 5  # ksize 5 also runs per channel on color images
        (ref, ref_data), (got, got_data) = run_both("gradients", image, mode=mode, ksize=ksize, gray=gray)
        assert (ref == got).all(), (mode, ksize)
        assert got_data["mean_abs"] == pytest.approx(ref_data["mean_abs"], rel=1e-6)
        assert got_data["max_abs"] == pytest.approx(ref_data["max_abs"], rel=1e-6)


def test_scharr_requires_ksize_3():
    op = REGISTRY["gradients"]
    with pytest.raises(ToolArgumentError, match="ksize"):
        op.check(op.bind({"mode": "scharr_x", "ksize": 5}), 10, 10)
    for image in IMAGES:
        assert_exact("gradients", image, mode="scharr_y")


# -- canny ---------------------------------------------------------------------------------------------
CANNY_CASES = [
    {}, {"low": 50, "high": 100}, {"low": 150, "high": 250}, {"low": 250, "high": 150}, {"low": 0, "high": 0},
    {"low": 20.7, "high": 80.2, "l2gradient": True}, {"low": 300, "high": 900, "aperture": 5},
    {"low": 100, "high": 400, "aperture": 5, "l2gradient": True}, {"low": 30, "high": 90, "aperture": 7},
    {"low": 300, "high": 700, "aperture": 7}, {"color": "max_channel"},
    {"color": "max_channel", "low": 40, "high": 120, "l2gradient": True},
]


@pytest.mark.parametrize("args", CANNY_CASES)
def test_canny_is_bit_exact(args):
    images = IMAGES + [demo_image(150, 130, seed=s) for s in (31, 32)]
    for image in images:
        _, data = assert_exact("canny", image, **args)
        to_gray = image.ndim == 3 and args.get("color", "gray") == "gray"
        edges = cv2.Canny(cv2.cvtColor(image, cv2.COLOR_RGB2GRAY) if to_gray else image, args.get("low", 100),
                          args.get("high", 200), apertureSize=args.get("aperture", 3),
                          L2gradient=args.get("l2gradient", False))
        assert data["edge_pixels"] == int(cv2.countNonZero(edges))


def test_canny_hand_checked_square_and_data():
    image = np.zeros((40, 40), np.uint8)
    image[10:30, 10:30] = 200
    (ref, data), (got, got_data) = run_both("canny", image, low=250, high=100)
    assert (ref == got).all() and set(np.unique(ref)) == {0, 255}
    assert ref[20, 9:11].any() and ref[20, 29:31].any() and not ref[20, 15:25].any() and not ref[:5].any()
    assert data["thresholds"] == [100.0, 250.0] and data["edge_pixels"] == int((ref > 0).sum())
    assert data["edge_ratio"] == pytest.approx(data["edge_pixels"] / 1600) and got_data == data


def test_canny_batches_different_thresholds():
    images = [demo_image(48, 64, seed=s) for s in (41, 42, 43)]
    args = [{"low": 30, "high": 90}, {"low": 100, "high": 200}, {"low": 180, "high": 60}]
    results = Executor("cpu").run([ToolCall("canny", img, a) for img, a in zip(images, args)])
    for img, a, res in zip(images, args, results):
        assert res.ok, res.error
        expected = cv2.Canny(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY), a["low"], a["high"])
        assert (res.image == expected).all()


def _bfs_hysteresis(candidate, strong):
    n, h, w = candidate.shape
    out = np.zeros_like(candidate)
    for b in range(n):
        queue = deque(zip(*np.nonzero(strong[b] & candidate[b])))
        for y, x in queue:
            out[b, y, x] = True
        while queue:
            y, x = queue.popleft()
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    yy, xx = y + dy, x + dx
                    if 0 <= yy < h and 0 <= xx < w and candidate[b, yy, xx] and not out[b, yy, xx]:
                        out[b, yy, xx] = True
                        queue.append((yy, xx))
    return out


@pytest.mark.parametrize("density", [0.3, 0.45, 0.6])
def test_hysteresis_matches_breadth_first_search(density):
    rng = np.random.default_rng(int(density * 100))
    candidate = rng.random((3, 50, 70)) < density
    strong = candidate & (rng.random((3, 50, 70)) < 0.01)
    got = fl._hysteresis(torch.from_numpy(candidate), torch.from_numpy(strong)).numpy()
    assert (got == _bfs_hysteresis(candidate, strong)).all()


def test_hysteresis_follows_a_long_serpentine():
    size = 61
    cand = np.zeros((size, size), bool)
    cand[::2] = True  # rows joined alternately at the right and the left end: one path of ~1900 pixels
    cand[1::4, -1] = True
    cand[3::4, 0] = True
    strong = np.zeros_like(cand)
    strong[-1, 0 if (size // 2) % 2 else -1] = True  # the far end of the path
    weak_only = fl._hysteresis(torch.from_numpy(cand[None]), torch.zeros((1, size, size), dtype=torch.bool)).numpy()
    got = fl._hysteresis(torch.from_numpy(cand[None]), torch.from_numpy(strong[None])).numpy()
    assert not weak_only.any()
    assert (got[0] == cand).all()
    assert (got == _bfs_hysteresis(cand[None], strong[None])).all()


# -- threshold -----------------------------------------------------------------------------------------
def test_threshold_fixed_modes_hand_checked():
    image = np.array([[0, 99, 100, 101, 200, 255]], np.uint8)
    op = REGISTRY["threshold"]

    def run(**args):
        (ref, data), (got, got_data) = run_both("threshold", image, **args)
        assert (ref == got).all() and got_data == pytest.approx(data)
        return ref[0].tolist(), data

    assert run(value=100)[0] == [0, 0, 0, 255, 255, 255]  # strict: 100 is not above 100
    assert run(value=100.9)[0] == [0, 0, 0, 255, 255, 255]  # value is floored like OpenCV
    assert run(value=100, mode="binary_inv", max_value=7)[0] == [7, 7, 7, 0, 0, 0]
    assert run(value=100, mode="trunc")[0] == [0, 99, 100, 100, 100, 100]
    assert run(value=100, mode="tozero")[0] == [0, 0, 0, 101, 200, 255]
    assert run(value=100, mode="tozero_inv")[0] == [0, 99, 100, 0, 0, 0]
    assert run(value=100, invert=True)[0] == [255, 255, 255, 0, 0, 0]
    out, data = run(value=100.9)
    assert data == {"threshold": 100.0, "nonzero_ratio": 0.5}
    with pytest.raises(ToolArgumentError, match="invert"):
        op.check(op.bind({"mode": "trunc", "invert": True}), 1, 6)
    with pytest.raises(ToolArgumentError, match="block_size"):
        op.check(op.bind({"mode": "adaptive_mean", "block_size": 10}), 1, 6)


def test_otsu_and_triangle_pick_a_valley():
    image = np.concatenate([np.full((20, 30), 40, np.uint8), np.full((20, 30), 200, np.uint8)])
    image = np.clip(image.astype(int) + RNG.integers(-10, 11, image.shape), 0, 255).astype(np.uint8)
    (ref, data), (got, got_data) = run_both("threshold", image, mode="otsu")
    assert 50 <= data["threshold"] < 190 and got_data == data and (ref == got).all()
    assert data["nonzero_ratio"] == pytest.approx(0.5)
    for image in IMAGES + [np.full((8, 8), 9, np.uint8), np.zeros((8, 8), np.uint8)]:
        for mode in ("otsu", "triangle"):
            for per_channel in (False, True):
                assert_exact("threshold", image, mode=mode, per_channel=per_channel)
                assert_exact("threshold", image, mode=mode, invert=True)


def test_otsu_matches_opencv_on_many_histograms():
    rng = np.random.default_rng(7)
    planes = []
    for k in range(40):
        centers = rng.integers(0, 256, 3)
        plane = rng.normal(centers[rng.integers(0, 3, (30, 30))], rng.uniform(1, 40))
        planes.append(np.clip(plane, 0, 255).astype(np.uint8))
    hist = np.stack([np.bincount(p.reshape(-1), minlength=256) for p in planes])
    expected = [cv2.threshold(p, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)[0] for p in planes]
    assert otsu_thresholds(hist).tolist() == expected
    expected = [cv2.threshold(p, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_TRIANGLE)[0] for p in planes]
    assert fl.triangle_thresholds(hist).tolist() == expected


@pytest.mark.parametrize("mode", ["adaptive_mean", "adaptive_gaussian"])
def test_adaptive_threshold(mode):
    for image in IMAGES:
        for block, c in [(3, 0), (11, 2), (25, -4.5), (51, 7.2)]:
            (ref, data), (got, _) = run_both("threshold", image, mode=mode, block_size=block, c=c)
            assert data["threshold"] == -1.0
            assert (ref != got).mean() <= 0.001, (mode, block, c)
            if mode == "adaptive_mean":
                assert (ref == got).all()
    flat = np.full((12, 12), 50, np.uint8)
    (ref, _), _ = run_both("threshold", flat, mode=mode, c=-1)  # pixel > mean + 1 never holds
    assert (ref == 0).all()
    (ref, _), _ = run_both("threshold", flat, mode=mode, c=1)
    assert (ref == 255).all()


def test_threshold_color_handling():
    (ref, data), _ = run_both("threshold", DEMO_RGB, value=120)
    assert ref.ndim == 2 and isinstance(data["threshold"], float)
    assert (ref == np.where(cv2.cvtColor(DEMO_RGB, cv2.COLOR_RGB2GRAY) > 120, 255, 0)).all()
    (ref, data), (got, got_data) = run_both("threshold", DEMO_RGB, mode="otsu", per_channel=True)
    assert ref.shape == DEMO_RGB.shape and len(data["threshold"]) == 3 and got_data == data and (ref == got).all()


def test_threshold_batches_different_values():
    results = Executor("cpu").run([ToolCall("threshold", DEMO_GRAY, {"value": v}) for v in (30, 128, 220)])
    for v, res in zip((30, 128, 220), results):
        assert res.ok and res.data["threshold"] == float(v)
        assert (res.image == np.where(DEMO_GRAY > v, 255, 0)).all()


# -- dft -----------------------------------------------------------------------------------------------
def test_dft_constant_image_is_a_center_dot():
    image = np.full((16, 20), 90, np.uint8)
    for log_scale in (True, False):
        (ref, _), (got, _) = run_both("dft", image, log_scale=log_scale)
        assert ref[8, 10] == 255 and got[8, 10] == 255
        ref[8, 10] = got[8, 10] = 0
        assert ref.max() == 0 and got.max() == 0


def test_dft_stripes_show_their_frequency():
    x = np.arange(64)
    image = np.repeat((127 + 100 * np.sin(2 * np.pi * x / 8))[None].astype(np.uint8), 32, 0)
    (ref, _), (got, _) = run_both("dft", image, log_scale=False)
    assert ref[16, 32] == 255 and ref[16, 32 - 8] > 100 and ref[16, 32 + 8] > 100 and ref[10, 32] < 5
    assert np.abs(ref.astype(int) - got).max() <= 1


# -- denoise -------------------------------------------------------------------------------------------
def test_denoise_runs_on_opencv_and_reduces_noise():
    op = REGISTRY["denoise"]
    assert op.cpu_only
    clean = np.full((32, 32, 3), 120, np.uint8)
    noisy = np.clip(clean + RNG.normal(0, 12, clean.shape), 0, 255).astype(np.uint8)
    for mode in ("color", "gray", "per_channel"):
        result = Executor("cpu").run([ToolCall("denoise", noisy, {"mode": mode})])[0]
        assert result.ok, result.error
        target = clean if mode != "gray" else clean[:, :, 0]
        assert result.image.shape == target.shape
        before = np.abs(noisy.astype(int) - clean).mean()
        assert np.abs(result.image.astype(int) - target).mean() < before / 2
    with pytest.raises(ToolArgumentError, match="search_window"):
        op.check(op.bind({"search_window": 20}), 32, 32)
