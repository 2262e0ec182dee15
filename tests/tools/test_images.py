"""tools.images.to_array: every documented input conversion, size limits (decompression bombs rejected
before decoding), and exact quarter-turn rotations through the executor."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageFile

from tools import Executor, ToolCall
from tools.images import DEFAULT_MAX_PIXELS, ImageTooLargeError, check_pixels, demo_image, open_image, to_array
from tools.registry import ToolError

RNG = np.random.default_rng(0)
RGB = RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8)
GRAY = RNG.integers(0, 256, (5, 7), dtype=np.uint8)


def _assert_u8(out, shape):
    assert isinstance(out, np.ndarray) and out.dtype == np.uint8 and out.shape == shape, (type(out), getattr(out, "dtype", None), getattr(out, "shape", None))


# -- PIL modes ---------------------------------------------------------------------------------------------
def test_pil_rgb():
    out = to_array(Image.fromarray(RGB))
    _assert_u8(out, (5, 7, 3))
    np.testing.assert_array_equal(out, RGB)


def test_pil_l_stays_gray():
    out = to_array(Image.fromarray(GRAY))
    _assert_u8(out, (5, 7))
    np.testing.assert_array_equal(out, GRAY)


def test_pil_rgba_composited_over_white():
    rgba = np.zeros((1, 4, 4), np.uint8)
    rgba[0, 0] = (255, 0, 0, 128)   # half-transparent red
    rgba[0, 1] = (10, 20, 30, 0)    # fully transparent: white
    rgba[0, 2] = (10, 20, 30, 255)  # opaque: unchanged
    rgba[0, 3] = (0, 0, 0, 255 // 2)  # half-transparent black: mid gray (255 * 128 / 255 = 128)
    out = to_array(Image.fromarray(rgba, "RGBA"))
    _assert_u8(out, (1, 4, 3))
    # red over white at alpha 128/255: R = 255, G = B = 255 * (1 - 128/255) = 127
    assert out[0, 0].tolist() == [255, 127, 127]
    assert out[0, 1].tolist() == [255, 255, 255]
    assert out[0, 2].tolist() == [10, 20, 30]
    assert out[0, 3].tolist() == [128, 128, 128]


def test_numpy_rgba_matches_pil_rgba():
    rgba = RNG.integers(0, 256, (6, 5, 4), dtype=np.uint8)
    a = to_array(rgba)
    b = to_array(Image.fromarray(rgba, "RGBA"))
    _assert_u8(a, (6, 5, 3))
    np.testing.assert_array_equal(a, b)
    alpha = rgba[..., 3:].astype(np.float64) / 255
    expected = rgba[..., :3] * alpha + 255 * (1 - alpha)
    assert np.abs(a.astype(np.float64) - expected).max() <= 0.5 + 1e-9  # correctly rounded


def test_pil_la_composited_to_gray():
    la = Image.new("LA", (2, 1))
    la.putpixel((0, 0), (0, 128))
    la.putpixel((1, 0), (40, 255))
    out = to_array(la)
    _assert_u8(out, (1, 2))
    assert out.tolist() == [[127, 40]]


def test_pil_mode_1():
    bits = Image.new("1", (3, 2), 0)
    bits.putpixel((1, 0), 1)
    out = to_array(bits)
    _assert_u8(out, (2, 3))
    assert out.tolist() == [[0, 255, 0], [0, 0, 0]]


def _palette_image():
    p = Image.new("P", (3, 1))
    p.putpalette([10, 20, 30, 200, 100, 50, 1, 2, 3] + [0] * (768 - 9))
    for x in range(3):
        p.putpixel((x, 0), x)
    return p


def test_pil_palette_without_transparency():
    out = to_array(_palette_image())
    _assert_u8(out, (1, 3, 3))
    assert out.tolist() == [[[10, 20, 30], [200, 100, 50], [1, 2, 3]]]


def test_pil_palette_with_transparency_via_png(tmp_path):
    p = _palette_image()
    path = tmp_path / "p.png"
    p.save(path, transparency=1)  # palette index 1 is transparent
    reread = Image.open(path)
    assert reread.mode == "P" and "transparency" in reread.info
    for source in (reread, path, str(path)):
        out = to_array(source)
        _assert_u8(out, (1, 3, 3))
        assert out.tolist() == [[[10, 20, 30], [255, 255, 255], [1, 2, 3]]]


def test_pil_cmyk():
    cmyk = Image.new("CMYK", (3, 1))
    cmyk.putpixel((0, 0), (0, 0, 0, 0))      # white
    cmyk.putpixel((1, 0), (255, 0, 0, 0))    # cyan
    cmyk.putpixel((2, 0), (0, 0, 0, 255))    # black
    out = to_array(cmyk)
    _assert_u8(out, (1, 3, 3))
    assert out.tolist() == [[[255, 255, 255], [0, 255, 255], [0, 0, 0]]]


SIXTEEN = np.array([[65535, 257, 0, 128, 129, 32896]], np.uint16)
SIXTEEN_8 = [[255, 1, 0, 0, 1, 128]]  # round(v / 257): 128/257 = 0.498 -> 0, 129/257 = 0.502 -> 1


def test_pil_i16():
    pil = Image.fromarray(SIXTEEN)
    assert pil.mode == "I;16"
    out = to_array(pil)
    _assert_u8(out, (1, 6))
    assert out.tolist() == SIXTEEN_8


def test_pil_mode_i_is_clipped_16_bit():
    pil = Image.fromarray(np.array([[70000, -5, 65535, 257]], np.int32))
    assert pil.mode == "I"
    assert to_array(pil).tolist() == [[255, 0, 255, 1]]


def test_pil_mode_f_is_unit_float():
    pil = Image.fromarray(np.array([[0.0, 1.0, 2.0, -1.0, 0.2]], np.float32))
    assert pil.mode == "F"
    assert to_array(pil).tolist() == [[0, 255, 255, 0, 51]]


# -- numpy -------------------------------------------------------------------------------------------------
def test_numpy_uint8_passes_through():
    np.testing.assert_array_equal(to_array(RGB), RGB)
    np.testing.assert_array_equal(to_array(GRAY), GRAY)


def test_numpy_uint16():
    out = to_array(SIXTEEN)
    _assert_u8(out, (1, 6))
    assert out.tolist() == SIXTEEN_8
    rgb16 = np.stack([SIXTEEN] * 3, axis=-1)
    assert to_array(rgb16)[..., 1].tolist() == SIXTEEN_8


def test_numpy_float_unit_range():
    arr = np.array([[0.0, 1.0, 0.2, 1.5, -0.3, np.nan]], np.float64)
    out = to_array(arr)
    _assert_u8(out, (1, 6))
    assert out.tolist() == [[0, 255, 51, 255, 0, 0]]
    rgb = np.full((2, 2, 3), 0.6, np.float32)
    assert (to_array(rgb) == 153).all()


def test_numpy_bool():
    arr = np.array([[True, False], [False, True]])
    out = to_array(arr)
    _assert_u8(out, (2, 2))
    assert out.tolist() == [[255, 0], [0, 255]]


def test_numpy_single_channel_is_squeezed():
    out = to_array(GRAY[:, :, None])
    _assert_u8(out, (5, 7))
    np.testing.assert_array_equal(out, GRAY)


def test_numpy_two_channel_is_gray_alpha():
    la = np.array([[[0, 128], [40, 255], [200, 0]]], np.uint8)
    assert to_array(la).tolist() == [[127, 40, 255]]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.complex64])
def test_unsupported_dtype(dtype):
    with pytest.raises(ToolError, match="dtype"):
        to_array(np.zeros((4, 4, 3), dtype))


@pytest.mark.parametrize("shape", [(4,), (4, 4, 5), (2, 4, 4, 3), (4, 4, 0)])
def test_unsupported_shape(shape):
    with pytest.raises(ToolError, match="shape"):
        to_array(np.zeros(shape, np.uint8))


@pytest.mark.parametrize("value", [[[1, 2], [3, 4]], b"\x89PNG", 42, None])
def test_unsupported_type(value):
    with pytest.raises(ToolError, match="unsupported image type"):
        to_array(value)


# -- torch tensors (C, H, W) -------------------------------------------------------------------------------
def test_tensor_chw_uint8():
    t = torch.from_numpy(RGB.transpose(2, 0, 1).copy())
    out = to_array(t)
    _assert_u8(out, (5, 7, 3))
    np.testing.assert_array_equal(out, RGB)


def test_tensor_chw_float():
    t = torch.from_numpy(RGB.transpose(2, 0, 1).astype(np.float32) / 255).requires_grad_()
    out = to_array(t)
    _assert_u8(out, (5, 7, 3))
    np.testing.assert_array_equal(out, RGB)


def test_tensor_single_channel_and_2d():
    t = torch.from_numpy(GRAY.copy())
    for tensor in (t, t[None]):
        out = to_array(tensor)
        _assert_u8(out, (5, 7))
        np.testing.assert_array_equal(out, GRAY)


def test_tensor_rgba_composited():
    t = torch.tensor([255, 0, 0, 128], dtype=torch.uint8).view(4, 1, 1)
    assert to_array(t).tolist() == [[[255, 127, 127]]]


def test_tensor_unsupported_dtype():
    with pytest.raises(ToolError, match="dtype"):
        to_array(torch.zeros((3, 4, 4), dtype=torch.int64))


# -- files -------------------------------------------------------------------------------------------------
def test_png_file_paths(tmp_path):
    path = tmp_path / "rgb.png"
    Image.fromarray(RGB).save(path)
    for source in (path, str(path)):
        out = to_array(source)
        _assert_u8(out, (5, 7, 3))
        np.testing.assert_array_equal(out, RGB)
    gray_path = tmp_path / "gray.png"
    Image.fromarray(GRAY).save(gray_path)
    np.testing.assert_array_equal(to_array(gray_path), GRAY)


def test_16_bit_png_file(tmp_path):
    path = tmp_path / "sixteen.png"
    Image.fromarray(SIXTEEN).save(path)
    with open(path, "rb") as f:
        header = f.read(33)
    assert header[24] == 16  # the file really is 16-bit (IHDR bit depth)
    out = to_array(path)
    _assert_u8(out, (1, 6))
    assert out.tolist() == SIXTEEN_8


def test_16_bit_rgb_png_file_matches_uint16_array(tmp_path):
    import cv2

    rgb16 = np.array([[[511, 33023, 65535], [0, 256, 384], [128, 129, 32896]]], np.uint16)
    path = tmp_path / "rgb16.png"
    assert cv2.imwrite(str(path), rgb16[..., ::-1])  # OpenCV writes BGR
    np.testing.assert_array_equal(to_array(path), to_array(rgb16))


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(ToolError, match="not found"):
        to_array(tmp_path / "nope.png")
    with pytest.raises(ToolError, match="not found"):
        to_array(tmp_path)  # a directory is not an image file
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"this is not an image")
    with pytest.raises(ToolError, match="cannot read image"):
        to_array(bad)


def test_executor_reads_paths(tmp_path):
    path = tmp_path / "rgb.png"
    Image.fromarray(RGB).save(path)
    for device in ("opencv", "cpu"):
        res = Executor(device).run([ToolCall("flip", str(path), {"direction": "vertical"})])[0]
        assert res.ok, res.error
        np.testing.assert_array_equal(res.image, RGB[::-1])


# -- size limits -------------------------------------------------------------------------------------------
def _png_declaring(path: Path, width: int, height: int) -> Path:
    """A valid 1x1 PNG whose IHDR is patched (with a correct CRC) to declare width x height."""
    buf = io.BytesIO()
    Image.new("L", (1, 1)).save(buf, "PNG")
    data = bytearray(buf.getvalue())
    assert data[12:16] == b"IHDR"
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    path.write_bytes(bytes(data))
    return path


@pytest.fixture
def no_decoding(monkeypatch):
    """Fail the test if any image file's pixels are decoded."""
    calls = []

    def load(self, *args, **kwargs):
        calls.append(self.size)
        raise AssertionError(f"pixels of a {self.size} image were decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    return calls


def test_no_decoding_fixture_catches_decoding(tmp_path, no_decoding):
    """Control for the bomb tests: decoding a normal file does trip the spy."""
    path = tmp_path / "small.png"
    Image.fromarray(RGB).save(path)
    with pytest.raises(AssertionError, match="decoded"):
        to_array(path)
    assert no_decoding == [(7, 5)]


@pytest.mark.parametrize("width, height", [
    (9000, 9000),        # over our 64 MP limit, under PIL's own warning threshold
    (12000, 12000),      # over PIL's warning threshold (PIL only warns)
    (100000, 100000),    # over PIL's hard limit (PIL raises DecompressionBombError)
    (1 << 30, 1),        # absurdly wide
])
def test_decompression_bomb_rejected_before_decoding(tmp_path, no_decoding, width, height):
    path = _png_declaring(tmp_path / "bomb.png", width, height)
    assert path.stat().st_size < 200
    with pytest.raises(ImageTooLargeError):
        to_array(path)
    with pytest.raises(ImageTooLargeError):
        open_image(str(path))
    assert no_decoding == []


def test_rejected_file_is_closed(tmp_path, monkeypatch):
    path = _png_declaring(tmp_path / "bomb.png", 9000, 9000)
    opened = []
    real_open = Image.open

    def spy_open(*args, **kwargs):
        opened.append(real_open(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(Image, "open", spy_open)
    with pytest.raises(ImageTooLargeError):
        to_array(path)
    assert len(opened) == 1
    fp = opened[0].fp
    assert fp is None or fp.closed


def test_bomb_through_executor_is_an_error_result(tmp_path):
    path = _png_declaring(tmp_path / "bomb.png", 9000, 9000)
    for device in ("opencv", "cpu"):
        results = Executor(device).run([ToolCall("flip", path, {}), ToolCall("flip", RGB, {})])
        assert not results[0].ok and "limit" in results[0].error, results[0].error
        assert results[1].ok


def test_lazily_opened_pil_image_is_checked_before_decoding(tmp_path, no_decoding):
    path = _png_declaring(tmp_path / "bomb.png", 9000, 9000)
    pil = Image.open(path)  # 81 MP: under PIL's limits, so PIL opens it lazily
    with pytest.raises(ImageTooLargeError):
        to_array(pil)
    assert no_decoding == []


def test_real_large_compressible_png_rejected_before_decoding(tmp_path, monkeypatch):
    path = tmp_path / "zeros.png"
    Image.new("L", (9000, 9000), 0).save(path, compress_level=1)
    assert path.stat().st_size < 1_000_000  # small on disk, 81 MP decoded
    calls = []
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda self, *a, **k: calls.append(1))
    with pytest.raises(ImageTooLargeError, match="9000x9000"):
        to_array(path)
    assert calls == []


def test_limit_applies_to_arrays_and_tensors():
    max_pixels = 5 * 7 - 1
    for image in (RGB, GRAY, Image.fromarray(RGB), torch.from_numpy(RGB.transpose(2, 0, 1).copy())):
        with pytest.raises(ImageTooLargeError):
            to_array(image, max_pixels=max_pixels)
        to_array(image, max_pixels=5 * 7)  # exactly at the limit is fine


def test_default_limit():
    assert DEFAULT_MAX_PIXELS == 8192 * 8192
    check_pixels(8192, 8192)
    with pytest.raises(ImageTooLargeError):
        check_pixels(8192, 8193)


def test_custom_limit_executor():
    image = demo_image(48, 64)
    for device in ("opencv", "cpu"):
        res = Executor(device, max_pixels=1000).run([ToolCall("flip", image, {})])[0]
        assert not res.ok and "64x48" in res.error, res.error


def test_custom_small_limit_message_names_the_limit():
    image = demo_image(48, 64)
    with pytest.raises(ImageTooLargeError) as info:
        to_array(image, max_pixels=1000)
    text = str(info.value)
    assert "64x48" in text
    assert any(s in text for s in ("1000", "1,000", "0.001")), text


# -- exact quarter turns -------------------------------------------------------------------------------------
QUARTERS = [
    ({"angle": 90}, 1),
    ({"angle": 90, "direction": "clockwise"}, -1),
    ({"angle": -90}, -1),
    ({"angle": 180}, 2),
    ({"angle": 270}, 3),
    ({"angle": 450}, 1),
    ({"angle": -270, "direction": "clockwise"}, -1),
    ({"angle": 3600}, 0),
    ({"angle": 0}, 0),
]
NON_SQUARE = {"rgb": demo_image(37, 53, seed=11), "gray": demo_image(37, 53, seed=12, gray=True)}


@pytest.mark.parametrize("device", ["opencv", "cpu"])
@pytest.mark.parametrize("kind", sorted(NON_SQUARE))
def test_quarter_turns_are_lossless(device, kind):
    image = NON_SQUARE[kind]
    results = Executor(device).run([ToolCall("rotate", image, args) for args, _ in QUARTERS])
    for (args, k), res in zip(QUARTERS, results):
        assert res.ok, res.error
        np.testing.assert_array_equal(res.image, np.rot90(image, k), err_msg=f"{args} on {device}")


@pytest.mark.parametrize("device", ["opencv", "cpu"])
def test_quarter_turn_corners_counterclockwise(device):
    image = NON_SQUARE["rgb"]
    out = Executor(device).run([ToolCall("rotate", image, {"angle": 90})])[0].image
    assert out.shape == (53, 37, 3)
    # counter-clockwise: the top-right corner moves to the top-left, and so on
    np.testing.assert_array_equal(out[0, 0], image[0, -1])
    np.testing.assert_array_equal(out[-1, 0], image[0, 0])
    np.testing.assert_array_equal(out[-1, -1], image[-1, 0])
    np.testing.assert_array_equal(out[0, -1], image[-1, -1])
    # the first row of the result is the last column of the input
    np.testing.assert_array_equal(out[0], image[:, -1])


@pytest.mark.parametrize("device", ["opencv", "cpu"])
@pytest.mark.parametrize("direction", ["counterclockwise", "clockwise"])
def test_four_quarter_turns_give_the_original(device, direction):
    ex = Executor(device)
    for image in NON_SQUARE.values():
        current = image
        shapes = []
        for _ in range(4):
            res = ex.run([ToolCall("rotate", current, {"angle": 90, "direction": direction})])[0]
            assert res.ok, res.error
            current = res.image
            shapes.append(current.shape[:2])
        assert shapes == [(53, 37), (37, 53), (53, 37), (37, 53)]
        np.testing.assert_array_equal(current, image)


@pytest.mark.parametrize("mode", ["1", "L", "LA", "I", "I;16", "F", "P", "PA", "RGB", "RGBA", "CMYK", "YCbCr"])
def test_the_decoded_size_known_from_the_header_is_the_decoded_size(mode, tmp_path):
    from tools.images import decoded_bytes, open_image

    path = tmp_path / ("x.tiff" if mode in ("I", "F", "CMYK", "YCbCr", "PA", "I;16") else "x.png")
    Image.new(mode, (7, 5)).save(path)
    with open_image(path) as opened:
        assert decoded_bytes(opened) == to_array(path).nbytes, opened.mode
