"""Every op with a torch version agrees with its OpenCV reference within the op's stated tolerance,
run through the batching executor (so grouping and per-sample arguments are exercised too)."""

import math

import numpy as np
import pytest
import torch

from tools import REGISTRY, Executor, ToolCall
from tools.images import demo_image
from tools.registry import ToolError

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
IMAGES = {
    "rgb": [demo_image(48, 64, seed=s) for s in (1, 2, 3)],
    "gray": [demo_image(48, 64, seed=s, gray=True) for s in (4, 5, 6)],
    "odd": [demo_image(37, 53, seed=s) for s in (7, 8, 9)],
}
TORCH_OPS = sorted(name for name, op in REGISTRY.items() if not op.cpu_only)


def assert_images_close(ref: np.ndarray, got: np.ndarray, tol, label: str):
    assert ref.shape == got.shape, f"{label}: shape {got.shape} != reference {ref.shape}"
    diff = np.abs(ref.astype(np.int32) - got.astype(np.int32))
    outliers = float((diff > tol.pixel).mean()) if diff.size else 0.0
    mean = float(diff.mean()) if diff.size else 0.0
    assert outliers <= tol.outliers and mean <= tol.mean + 1e-9, (
        f"{label}: {outliers:.4f} of pixels differ by more than {tol.pixel} (allowed {tol.outliers}), "
        f"mean abs diff {mean:.3f} (allowed {tol.mean}); tolerance reason: {tol.why}"
    )


def assert_data_close(ref, got, label: str):
    if isinstance(ref, dict):
        assert isinstance(got, dict) and set(ref) == set(got), f"{label}: keys {sorted(got)} != {sorted(ref)}"
        for key in ref:
            assert_data_close(ref[key], got[key], f"{label}.{key}")
    elif isinstance(ref, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(ref) == len(got), f"{label}: length {len(got)} != {len(ref)}"
        for k, (a, b) in enumerate(zip(ref, got)):
            assert_data_close(a, b, f"{label}[{k}]")
    elif isinstance(ref, float) or isinstance(got, float):
        assert math.isclose(ref, got, rel_tol=1e-4, abs_tol=1e-3), f"{label}: {got} != {ref}"
    else:
        assert ref == got, f"{label}: {got!r} != {ref!r}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", TORCH_OPS)
def test_torch_matches_opencv(name, device):
    op = REGISTRY[name]
    executor = Executor(device=device)
    checked = 0
    for kind, images in IMAGES.items():
        for example in op.examples:
            try:
                references = [op.opencv(img, **_prepared(op, example, img)) for img in images]
            except ToolError:
                assert kind == "odd", f"{name} example {example} must be valid on a 64x48 image"
                continue
            results = executor.run([ToolCall(name, img, example) for img in images])
            for k, (ref, res) in enumerate(zip(references, results)):
                label = f"{name}({example}) on {kind}[{k}] via {device}"
                assert res.ok, f"{label}: {res.error}"
                ref_image, ref_data = ref if isinstance(ref, tuple) else (ref, None)
                if ref_image is not None:
                    assert_images_close(ref_image, res.image, op.tolerance, label)
                if ref_data is not None:
                    assert_data_close(ref_data, res.data, label)
                checked += 1
    assert checked, f"{name}: no example ran"


def _prepared(op, example, image):
    args = op.bind(example)
    for p in op.params:
        if p.kind == "image":
            from tools.images import to_array

            args[p.name] = to_array(args[p.name])
    if op.check is not None:
        op.check(args, image.shape[0], image.shape[1])
    return args


def test_mixed_batch_keeps_call_order_and_isolates_errors():
    rgb, gray = IMAGES["rgb"][0], IMAGES["gray"][0]
    calls = [
        ToolCall("rotate", rgb, {"angle": 30}),
        ToolCall("flip", gray, {"direction": "vertical"}),
        ToolCall("rotate", rgb, {"angle": "thirty"}),
        ToolCall("no_such_op", rgb, {}),
        ToolCall("rotate", demo_image(20, 30), {"angle": -30}),
        ToolCall("crop", rgb, {"box": [0, 0, 500, 10]}),
        ToolCall("rotate", rgb, {"angle": -30}),
    ]
    for device in DEVICES + ["opencv"]:
        results = Executor(device=device).run(calls)
        assert [r.ok for r in results] == [True, True, False, False, True, False, True], device
        assert "angle" in results[2].error and "number" in results[2].error
        assert "no_such_op" in results[3].error
        assert "outside" in results[5].error
        assert results[0].image.shape == results[6].image.shape == REGISTRY["rotate"].opencv(rgb, **REGISTRY["rotate"].bind({"angle": 30})).shape
        assert results[4].image.shape[:2] != results[0].image.shape[:2]
        np.testing.assert_array_equal(results[1].image, np.flipud(gray))
