"""The torchvision hook (compat/tirlab_torchvision_cpu.py): with the CPU torch, PyPI's torchvision imports and
its image decoding and v2 transforms work. Runs in a fresh interpreter, where the .pth hook is active."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

SCRIPT = textwrap.dedent(
    r"""
    import json, sys
    hooked_at_start = "tirlab_torchvision_cpu" in sys.modules
    import torch
    import torchvision
    from torchvision.io import ImageReadMode, decode_image, read_image
    from torchvision.transforms.v2 import functional as F

    folder = sys.argv[1]
    out = {"hooked_at_start": hooked_at_start, "version": torchvision.__version__, "cpu_torch": torch.version.cuda is None}

    def show(t):
        return {"type": type(t).__name__, "dtype": str(t.dtype), "shape": list(t.shape), "values": t.tolist()}

    data = open(f"{folder}/rgb.png", "rb").read()
    out["bytes_rgb"] = show(decode_image(torch.frombuffer(bytearray(data), dtype=torch.uint8)))
    out["path_rgb"] = show(decode_image(f"{folder}/rgb.png"))
    out["read_rgb"] = show(read_image(f"{folder}/rgb.png"))
    out["path_gray"] = show(decode_image(f"{folder}/gray.png"))
    out["path_rgba"] = show(decode_image(f"{folder}/rgba.png"))
    out["gray_as_rgb"] = show(decode_image(f"{folder}/gray.png", mode=ImageReadMode.RGB))
    out["rgb_as_gray"] = show(decode_image(f"{folder}/rgb.png", mode=ImageReadMode.GRAY))
    out["rgba_as_rgb"] = show(decode_image(f"{folder}/rgba.png", mode=ImageReadMode.RGB))
    image = decode_image(f"{folder}/rgb.png")
    out["resize"] = show(F.resize(image, [6, 8]))
    const = torch.full((3, 5, 7), 77, dtype=torch.uint8)
    out["resize_const"] = show(F.resize(const, [10, 3]))
    out["resize_float"] = show(F.resize(const.float() / 255, [2, 2]))
    print(json.dumps(out))
    """
)

RGB = np.random.default_rng(1).integers(0, 256, (3, 4, 3), dtype=np.uint8)
GRAY = np.random.default_rng(2).integers(0, 256, (3, 4), dtype=np.uint8)
RGBA = np.random.default_rng(3).integers(0, 256, (2, 5, 4), dtype=np.uint8)


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shim")
    Image.fromarray(RGB).save(folder / "rgb.png")
    Image.fromarray(GRAY).save(folder / "gray.png")
    Image.fromarray(RGBA, "RGBA").save(folder / "rgba.png")
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(folder)], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"torchvision check failed:\n{result.stderr[-4000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def _chw(array: np.ndarray) -> list:
    return (array[None] if array.ndim == 2 else array.transpose(2, 0, 1)).tolist()


def _assert_tensor(got: dict, expected: np.ndarray):
    assert got["type"] == "Tensor" and got["dtype"] == "torch.uint8"
    chw = np.asarray(_chw(expected))
    assert got["shape"] == list(chw.shape)
    np.testing.assert_array_equal(np.asarray(got["values"]), chw)


def test_import_torchvision(shim):
    assert shim["version"].startswith("0.")
    if shim["cpu_torch"]:
        assert shim["hooked_at_start"], "the .pth hook did not load at interpreter start"


def test_decode_png_bytes(shim):
    _assert_tensor(shim["bytes_rgb"], RGB)


def test_decode_and_read_file_path(shim):
    _assert_tensor(shim["path_rgb"], RGB)
    _assert_tensor(shim["read_rgb"], RGB)


def test_decode_gray_and_alpha_unchanged(shim):
    _assert_tensor(shim["path_gray"], GRAY)
    _assert_tensor(shim["path_rgba"], RGBA)


def test_decode_with_mode(shim):
    _assert_tensor(shim["gray_as_rgb"], np.stack([GRAY] * 3, axis=-1))
    gray = shim["rgb_as_gray"]
    assert gray["dtype"] == "torch.uint8" and gray["shape"] == [1, 3, 4]
    expected = np.asarray(Image.fromarray(RGB).convert("L"), np.int32)[None]
    tolerance = 0 if shim["cpu_torch"] else 2  # a CUDA torch uses torchvision's own decoder
    assert np.abs(np.asarray(gray["values"]) - expected).max() <= tolerance
    assert shim["rgba_as_rgb"]["shape"] == [3, 2, 5]
    np.testing.assert_array_equal(np.asarray(shim["rgba_as_rgb"]["values"]), _chw(RGBA[..., :3]))


def test_v2_functional_resize(shim):
    r = shim["resize"]
    assert r["type"] == "Tensor" and r["dtype"] == "torch.uint8" and r["shape"] == [3, 6, 8]
    values = np.asarray(r["values"])
    assert values.min() >= RGB.min() and values.max() <= RGB.max()
    const = shim["resize_const"]
    assert const["shape"] == [3, 10, 3] and (np.asarray(const["values"]) == 77).all()
    flt = shim["resize_float"]
    assert flt["dtype"] == "torch.float32" and flt["shape"] == [3, 2, 2]
    np.testing.assert_allclose(np.asarray(flt["values"]), 77 / 255, rtol=1e-5)


def test_a_probe_before_the_import_still_gets_the_patched_decoder():
    """transformers probes torchvision with importlib.util.find_spec before importing it; the hook must
    still patch the import that follows (else `transformers serve` fails on every image)."""
    script = ("import importlib.util; assert importlib.util.find_spec('torchvision') is not None\n"
              "import transformers.image_utils as image_utils\nprint(image_utils.decode_image.__module__)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "tirlab_torchvision_cpu"
