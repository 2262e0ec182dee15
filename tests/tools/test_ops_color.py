"""Semantics of the color ops: hand-checked values, agreement with OpenCV and PIL, validation errors."""

import numpy as np
import pytest
import torch
from PIL import Image, ImageEnhance, ImageOps

import cv2
from tools import REGISTRY, Executor, ToolCall
from tools.images import demo_image
from tools.ops import color as C
from tools.ops import kernels
from tools.ops.kernels import plane_hist
from tools.registry import ToolArgumentError


def T(img: np.ndarray) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(img))
    return (t[None, None] if img.ndim == 2 else t.permute(2, 0, 1)[None]).contiguous()


def N(t: torch.Tensor) -> np.ndarray:
    a = t[0].permute(1, 2, 0).numpy()
    return a[..., 0] if a.shape[2] == 1 else a


def both(name, img, **args):
    """(OpenCV reference, torch) results of op `name` on one image, with validated arguments."""
    op = REGISTRY[name]
    bound = op.bind(args)
    ref = op.opencv(img, **bound)
    kwargs = {k: ([v] if k in op.vectorized else v) for k, v in bound.items()}
    got = op.torch(T(img), **kwargs)
    if isinstance(got, tuple):
        return ref, (None if got[0] is None else N(got[0]), got[1][0])
    return ref, N(got)


RNG = np.random.default_rng(123)
IMAGES = [
    demo_image(48, 64, seed=1),
    demo_image(37, 53, seed=2, gray=True),
    demo_image(61, 33, seed=3),
    RNG.integers(0, 256, (2, 5, 3), dtype=np.uint8),
    RNG.integers(0, 256, (3, 3), dtype=np.uint8),
    RNG.integers(0, 256, (20, 15, 3), dtype=np.uint8),
    np.full((20, 30, 3), 100, np.uint8),
]
ALL_COLORS = np.arange(1 << 24, dtype=np.uint32)
ALL_COLORS = np.stack([ALL_COLORS >> 16, (ALL_COLORS >> 8) & 255, ALL_COLORS & 255], -1).astype(np.uint8).reshape(4096, 4096, 3)


# -- color spaces ---------------------------------------------------------------------------------------
def test_integer_formulas_match_opencv_on_every_color():
    batch = T(ALL_COLORS)
    np.testing.assert_array_equal(N(C._ycrcb_t(batch)), cv2.cvtColor(ALL_COLORS, cv2.COLOR_RGB2YCrCb))
    np.testing.assert_array_equal(N(C._ycrcb_to_rgb_t(batch)), cv2.cvtColor(ALL_COLORS, cv2.COLOR_YCrCb2RGB))


@pytest.mark.parametrize("space", ["hsv", "hls", "lab", "luv", "xyz", "yuv", "hsv_full"])
def test_table_conversions_match_opencv_at_odd_sizes(space):
    for shape in [(1, 1, 3), (7, 3, 3), (37, 53, 3)]:
        img = RNG.integers(0, 256, shape, dtype=np.uint8)
        ref, got = both("convert_color", img, space=space)
        if space == "hls":  # OpenCV's scalar row tail rounds a few pixels differently
            diff = np.abs(ref.astype(int) - got)
            assert diff.max() <= 1 and (diff > 0).mean() < 0.002
        else:
            np.testing.assert_array_equal(got, ref)


def test_known_hsv_lab_values():
    img = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255], [0, 0, 0]]], np.uint8)
    for ref_or_got in both("convert_color", img, space="hsv"):
        np.testing.assert_array_equal(ref_or_got[0], [[0, 255, 255], [60, 255, 255], [120, 255, 255], [0, 0, 255], [0, 0, 0]])
    _, full = both("convert_color", img, space="hsv_full")
    assert full[0, 1, 0] == 85 and full[0, 2, 0] == 171  # 120 and 240 degrees on 0-255
    _, lab = both("convert_color", img, space="lab")
    np.testing.assert_array_equal(lab[0, 3], [255, 128, 128])  # white: L=100 -> 255, neutral a/b -> 128
    np.testing.assert_array_equal(lab[0, 4], [0, 128, 128])


def test_convert_color_channel_and_gray_input():
    img = demo_image(20, 30, seed=5)
    ref, got = both("convert_color", img, space="hsv", channel=1)
    assert ref.shape == got.shape == (20, 30)
    np.testing.assert_array_equal(got, cv2.cvtColor(img, cv2.COLOR_RGB2HSV)[:, :, 1])
    gray = demo_image(20, 30, seed=5, gray=True)
    ref, got = both("convert_color", gray, space="lab")
    np.testing.assert_array_equal(got, cv2.cvtColor(cv2.cvtColor(gray, cv2.COLOR_GRAY2RGB), cv2.COLOR_RGB2Lab))
    np.testing.assert_array_equal(ref, got)
    res = Executor(device="opencv").run([ToolCall("convert_color", img, {"space": "gray", "channel": 2})])[0]
    assert not res.ok and "channel" in res.error
    with pytest.raises(ToolArgumentError, match="space"):
        REGISTRY["convert_color"].bind({"space": "cmyk"})


def test_grayscale_methods_and_channels():
    img = IMAGES[0]
    ref, got = both("grayscale", img)
    np.testing.assert_array_equal(ref, cv2.cvtColor(img, cv2.COLOR_RGB2GRAY))
    np.testing.assert_array_equal(got, ref)
    pil = np.asarray(Image.fromarray(img).convert("L"))
    ref, got = both("grayscale", img, method="pil", output_channels=3)
    assert ref.shape == (48, 64, 3)
    for k in range(3):
        np.testing.assert_array_equal(ref[:, :, k], pil)
        np.testing.assert_array_equal(got[:, :, k], pil)
    assert np.abs(pil.astype(int) - cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)).max() <= 1


def test_invert():
    img = IMAGES[0]
    ref, got = both("invert", img)
    np.testing.assert_array_equal(ref, 255 - img)
    np.testing.assert_array_equal(got, 255 - img)
    np.testing.assert_array_equal(ref, np.asarray(ImageOps.invert(Image.fromarray(img))))


# -- in_range -------------------------------------------------------------------------------------------
def _stripes():
    img = np.zeros((10, 20, 3), np.uint8)
    img[:, :5] = (255, 0, 0)      # red, H = 0
    img[:, 5:10] = (255, 0, 40)   # crimson, H = 175
    img[:, 10:15] = (0, 0, 255)   # blue, H = 120
    img[:, 15:] = (128, 128, 128)  # gray, S = 0
    return img


def test_in_range_counts_and_hue_wrap():
    img = _stripes()
    (mask, data), (tmask, tdata) = both("in_range", img, lower=[100, 100, 100], upper=[130, 255, 255])
    assert data == tdata == {"pixel_count": 50, "fraction": 0.25, "total_pixels": 200}
    assert mask.shape == (10, 20) and mask[:, 10:15].min() == 255 and mask[:, :10].max() == 0
    np.testing.assert_array_equal(mask, tmask)
    # lower hue > upper hue wraps: both reds, not blue or gray
    (mask, data), (tmask, tdata) = both("in_range", img, lower=[170, 100, 100], upper=[10, 255, 255], output="masked")
    assert data["pixel_count"] == tdata["pixel_count"] == 100
    np.testing.assert_array_equal(mask[:, :10], img[:, :10])
    assert mask[:, 10:].max() == 0
    np.testing.assert_array_equal(mask, tmask)
    # rgb bounds; gray input applies every bound to the gray value
    (_, data), _ = both("in_range", img, space="rgb", lower=[200, 0, 0], upper=[255, 10, 50])
    assert data["pixel_count"] == 100
    gray = np.arange(200, dtype=np.uint8).reshape(10, 20)
    (m, data), (tm, tdata) = both("in_range", gray, space="rgb", lower=[10, 20, 0], upper=[255, 100, 50])
    assert data["pixel_count"] == tdata["pixel_count"] == 31  # 20..50
    np.testing.assert_array_equal(m, tm)


def test_in_range_rejects_inverted_bounds_with_the_parameter_name():
    res = Executor(device="opencv").run([ToolCall("in_range", _stripes(), {"space": "rgb", "lower": [10, 200, 0], "upper": [20, 100, 255]})])[0]
    assert not res.ok and "lower[1]" in res.error and "'lower'" in res.error
    with pytest.raises(ToolArgumentError, match="upper"):
        REGISTRY["in_range"].bind({"lower": [0, 0, 0], "upper": [0, 0, 300]})


# -- PIL ImageEnhance / ImageOps agreement (exact) -----------------------------------------------------------
ENHANCERS = {"adjust_brightness": ImageEnhance.Brightness, "adjust_contrast": ImageEnhance.Contrast,
             "adjust_saturation": ImageEnhance.Color, "adjust_sharpness": ImageEnhance.Sharpness}


@pytest.mark.parametrize("name", sorted(ENHANCERS))
def test_enhance_matches_pil_exactly(name):
    for img in IMAGES:
        for factor in (0.0, 0.3, 0.5, 1.0, 1.3, 2.0, 3.7, 10.0):
            pil = np.asarray(ENHANCERS[name](Image.fromarray(img)).enhance(factor))
            ref, got = both(name, img, factor=factor)
            np.testing.assert_array_equal(ref, pil, err_msg=f"{name} {img.shape} {factor}")
            np.testing.assert_array_equal(got, pil, err_msg=f"{name} torch {img.shape} {factor}")


def test_enhance_per_image_factors_in_one_batch():
    imgs = [demo_image(30, 40, seed=s) for s in range(3)]
    factors = [0.2, 1.0, 2.5]
    calls = [ToolCall("adjust_contrast", img, {"factor": f}) for img, f in zip(imgs, factors)]
    for img, f, res in zip(imgs, factors, Executor(device="cpu").run(calls), strict=True):
        np.testing.assert_array_equal(res.image, np.asarray(ImageEnhance.Contrast(Image.fromarray(img)).enhance(f)))


def test_brightness_hand_values():
    img = np.array([[10, 100, 200, 255]], np.uint8)
    ref, got = both("adjust_brightness", img, factor=1.5)
    np.testing.assert_array_equal(ref, [[15, 150, 255, 255]])
    np.testing.assert_array_equal(got, ref)
    with pytest.raises(ToolArgumentError, match="factor"):
        REGISTRY["adjust_brightness"].bind({"factor": 11})


def test_autocontrast_matches_pil_exactly():
    for img in IMAGES:
        for cutoff in (0, 0.5, 1, 2.5, 10, 33, 49.9):
            pil = np.asarray(ImageOps.autocontrast(Image.fromarray(img), cutoff=cutoff))
            ref, got = both("autocontrast", img, cutoff=cutoff)
            np.testing.assert_array_equal(ref, pil, err_msg=f"{img.shape} {cutoff}")
            np.testing.assert_array_equal(got, pil, err_msg=f"torch {img.shape} {cutoff}")


def test_autocontrast_hand_values():
    img = np.array([[50, 100, 150]], np.uint8)
    ref, got = both("autocontrast", img)
    np.testing.assert_array_equal(ref, [[0, 127, 255]])  # int(50 * 2.55) = 127
    np.testing.assert_array_equal(got, ref)


# -- equalize ---------------------------------------------------------------------------------------------
def test_equalize_matches_opencv_and_pil():
    for img in IMAGES + [RNG.integers(0, 256, (70, 90, 3), dtype=np.uint8)]:
        color = img.ndim == 3
        ref, got = both("equalize", img, mode="per_channel")
        expect = cv2.merge([cv2.equalizeHist(p) for p in cv2.split(img)]) if color else cv2.equalizeHist(img)
        np.testing.assert_array_equal(ref, expect)
        np.testing.assert_array_equal(got, expect)
        pil = np.asarray(ImageOps.equalize(Image.fromarray(img)))
        ref, got = both("equalize", img, mode="per_channel", algorithm="pil")
        np.testing.assert_array_equal(ref, pil)
        np.testing.assert_array_equal(got, pil)
        if color:
            ref, got = both("equalize", img)  # luma: Y of YCrCb
            ycc = cv2.cvtColor(img, cv2.COLOR_RGB2YCrCb)
            ycc[:, :, 0] = cv2.equalizeHist(np.ascontiguousarray(ycc[:, :, 0]))
            np.testing.assert_array_equal(ref, cv2.cvtColor(ycc, cv2.COLOR_YCrCb2RGB))
            np.testing.assert_array_equal(got, ref)
            for mode in ("lightness", "gray"):
                ref, got = both("equalize", img, mode=mode)
                np.testing.assert_array_equal(got, ref, err_msg=mode)


def test_equalize_hand_values_and_constant_image():
    img = np.array([[0, 0, 100, 100, 100, 200, 200, 255]], np.uint8)
    ref, got = both("equalize", img)
    # cv2.equalizeHist: lut[v] = round(255 * (cdf(v) - cdf(0)) / (8 - 2))
    np.testing.assert_array_equal(ref, [[0, 0, 128, 128, 128, 212, 212, 255]])
    np.testing.assert_array_equal(got, ref)
    flat = np.full((5, 6), 77, np.uint8)
    for algorithm in ("opencv", "pil"):
        ref, got = both("equalize", flat, algorithm=algorithm)
        np.testing.assert_array_equal(ref, flat)
        np.testing.assert_array_equal(got, flat)


def test_equalize_subset_of_channels_and_channel_validation():
    img = IMAGES[0]
    ref, got = both("equalize", img, mode="per_channel", channels=[2])
    np.testing.assert_array_equal(ref[:, :, :2], img[:, :, :2])
    np.testing.assert_array_equal(ref[:, :, 2], cv2.equalizeHist(np.ascontiguousarray(img[:, :, 2])))
    np.testing.assert_array_equal(got, ref)
    res = Executor(device="opencv").run([ToolCall("equalize", img, {"mode": "per_channel", "channels": [1, 1]})])[0]
    assert not res.ok and "channels" in res.error


# -- CLAHE ----------------------------------------------------------------------------------------------
def test_clahe_planes_match_opencv_on_random_configs():
    rng = np.random.default_rng(7)
    for trial in range(40):
        h, w = int(rng.integers(1, 150)), int(rng.integers(1, 150))
        img = demo_image(h, w, seed=trial, gray=True) if trial % 2 else rng.integers(0, 256, (h, w), dtype=np.uint8)
        if trial % 5 == 0:
            img = (img // 32 * 32).astype(np.uint8)  # few levels: heavy clipping and redistribution
        clip = float(rng.choice([0.0, 1.0, 2.0, 3.7, 40.0]))
        tx, ty = int(rng.integers(1, 17)), int(rng.integers(1, 17))
        ref = cv2.createCLAHE(clip, (tx, ty)).apply(img)
        got = C._clahe_planes_t(torch.from_numpy(img)[None], clip, tx, ty)[0].numpy()
        np.testing.assert_array_equal(got, ref, err_msg=f"{h}x{w} clip={clip} grid={tx}x{ty}")


def test_clahe_padding_quirk_when_one_side_divides():
    # 64 rows divide 8 tiles but 37 columns do not: OpenCV then pads BOTH sides (a whole extra tile row).
    img = demo_image(64, 37, seed=11, gray=True)
    assert C._clahe_geometry(64, 37, 8, 8) == (72, 40)
    ref = cv2.createCLAHE(2.0, (8, 8)).apply(img)
    np.testing.assert_array_equal(C._clahe_planes_t(torch.from_numpy(img)[None], 2.0, 8, 8)[0].numpy(), ref)


def test_clahe_color_modes():
    img = IMAGES[2]
    ref, got = both("clahe", img, clip_limit=3.0, tile_grid=[4, 6])
    lab = cv2.cvtColor(img, cv2.COLOR_RGB2Lab)
    lab[:, :, 0] = cv2.createCLAHE(3.0, (4, 6)).apply(np.ascontiguousarray(lab[:, :, 0]))
    np.testing.assert_array_equal(ref, cv2.cvtColor(lab, cv2.COLOR_Lab2RGB))
    np.testing.assert_array_equal(got, ref)
    for mode in ("luma", "per_channel", "gray"):
        ref, got = both("clahe", img, mode=mode)
        np.testing.assert_array_equal(got, ref, err_msg=mode)
    ref, got = both("clahe", img, mode="value")
    assert np.abs(ref.astype(int) - got).max() <= 1  # OpenCV's HSV->RGB row-tail rounding


def test_batched_torch_equals_per_image():
    imgs = [demo_image(40, 56, seed=s) for s in range(4)]
    batch = torch.cat([T(i) for i in imgs])
    out = REGISTRY["clahe"].torch(batch, **REGISTRY["clahe"].bind({"mode": "per_channel"}))
    eq = REGISTRY["equalize"].torch(batch, **REGISTRY["equalize"].bind({}))
    for k, img in enumerate(imgs):
        np.testing.assert_array_equal(N(out[k:k + 1]), REGISTRY["clahe"].opencv(img, **REGISTRY["clahe"].bind({"mode": "per_channel"})))
        np.testing.assert_array_equal(N(eq[k:k + 1]), REGISTRY["equalize"].opencv(img, **REGISTRY["equalize"].bind({})))


def test_plane_helpers_chunking(monkeypatch):
    monkeypatch.setattr(kernels, "_CHUNK", 100)  # force one plane per chunk
    planes = torch.from_numpy(RNG.integers(0, 256, (5, 12, 13), dtype=np.uint8))
    hist = plane_hist(planes)
    for k in range(5):
        np.testing.assert_array_equal(hist[k].numpy(), np.bincount(planes[k].reshape(-1).numpy(), minlength=256))
    lut = torch.from_numpy(RNG.integers(0, 256, (5, 256), dtype=np.uint8))
    out = C.apply_plane_lut(planes, lut)
    for k in range(5):
        np.testing.assert_array_equal(out[k].numpy(), lut[k].numpy()[planes[k].numpy()])
    img = planes[0].numpy()
    np.testing.assert_array_equal(C._clahe_planes_t(planes[:1], 2.0, 3, 3)[0].numpy(), cv2.createCLAHE(2.0, (3, 3)).apply(img))


# -- convertScaleAbs, gamma -------------------------------------------------------------------------------
def test_convert_scale_abs_matches_opencv_on_every_value():
    img = np.tile(np.arange(256, dtype=np.uint8), (37, 3)).reshape(37, 256, 3)  # wide rows: SIMD path
    rng = np.random.default_rng(3)
    # (1.1, 1.1): x * alpha + beta lands on .5 only with a fused multiply-add (134 -> 148, not 149).
    for alpha, beta in [(1.0, 0.0), (0.5, 0.0), (1.5, 0.25), (-1.0, 30.5), (0.37, 0.5), (1.1, 1.1), (0.7, 0.5)] + [
            (float(a), float(b)) for a, b in zip(rng.uniform(-5, 5, 40), rng.uniform(-300, 300, 40))]:
        ref, got = both("convert_scale_abs", img, alpha=alpha, beta=beta)
        np.testing.assert_array_equal(ref, cv2.convertScaleAbs(img, alpha=alpha, beta=beta))
        np.testing.assert_array_equal(got, ref, err_msg=f"{alpha} {beta}")
    ref, _ = both("convert_scale_abs", np.array([[0, 10, 200]], np.uint8), alpha=-2.0, beta=10.0)
    np.testing.assert_array_equal(ref, [[10, 10, 255]])  # |10|, |-10|, |-390| -> 255


def test_gamma():
    img = np.array([[0, 64, 255]], np.uint8)
    ref, got = both("gamma", img, gamma=2.0)
    np.testing.assert_array_equal(ref, [[0, 128, 255]])  # 255 * sqrt(64/255) = 127.75
    np.testing.assert_array_equal(got, ref)
    ref, _ = both("gamma", IMAGES[0], gamma=1.0)
    np.testing.assert_array_equal(ref, IMAGES[0])
    with pytest.raises(ToolArgumentError, match="gamma"):
        REGISTRY["gamma"].bind({"gamma": 0})


# -- histogram --------------------------------------------------------------------------------------------
def test_histogram_known_counts_and_stats():
    img = np.zeros((4, 4, 3), np.uint8)
    img[:2, :, 0] = 255  # R: 8 pixels 255, 8 pixels 0
    img[:, :, 1] = 100
    img[:, :2, 2] = [[10, 130]] * 4
    (_, data), (_, tdata) = both("histogram", img, bins=4)
    r, g, b = data["channels"]["R"], data["channels"]["G"], data["channels"]["B"]
    assert data["pixels"] == 16 and data["bins"] == 4
    assert r["counts"] == [8, 0, 0, 8] and r["mean"] == 127.5 and r["std"] == 127.5 and (r["min"], r["max"]) == (0, 255)
    assert g["counts"] == [0, 16, 0, 0] and g["std"] == 0.0
    assert b["counts"] == [12, 0, 4, 0] and (b["min"], b["max"]) == (0, 130)
    assert tdata == data


def test_histogram_hue_bins_and_parity():
    img = _stripes()
    (_, data), (_, tdata) = both("histogram", img, bins=6, space="hsv")
    # hue range 0-179 in 6 bins of 30: red (0) -> bin 0, blue (120) -> bin 4, crimson (175) -> bin 5, gray H=0
    assert data["channels"]["H"]["counts"] == [100, 0, 0, 0, 50, 50]
    assert tdata == data
    for img in IMAGES:
        for bins, space in [(256, "rgb"), (7, "gray"), (180, "hls"), (13, "lab"), (2, "hsv")]:
            (_, data), (_, tdata) = both("histogram", img, bins=bins, space=space)
            conv = C._to_space_cv(img, space)
            planes = [conv] if conv.ndim == 2 else cv2.split(conv)
            for name, plane in zip(data["channels"], planes):
                high = 180 if space in ("hsv", "hls") and name == "H" else 256
                expect = cv2.calcHist([plane], [0], None, [bins], [0, high]).reshape(-1)
                expect[0] += np.count_nonzero(plane >= high)  # hls hue may round to 180 = 0 degrees
                assert data["channels"][name]["counts"] == expect.astype(int).tolist()
                assert sum(data["channels"][name]["counts"]) == plane.size
                assert tdata["channels"][name]["counts"] == data["channels"][name]["counts"]
                assert tdata["channels"][name]["mean"] == pytest.approx(data["channels"][name]["mean"], abs=2e-4)
                assert tdata["channels"][name]["std"] == pytest.approx(data["channels"][name]["std"], abs=2e-4)
    with pytest.raises(ToolArgumentError, match="bins"):
        REGISTRY["histogram"].bind({"bins": 1})


def test_schemas_are_well_formed():
    for name in ("convert_color", "grayscale", "invert", "in_range", "adjust_brightness", "adjust_contrast",
                 "adjust_saturation", "adjust_sharpness", "autocontrast", "equalize", "clahe", "convert_scale_abs",
                 "histogram", "gamma"):
        op = REGISTRY[name]
        schema = op.schema()["function"]
        assert schema["name"] == name and len(schema["description"]) > 40
        assert op.category == "color" and not op.cpu_only
