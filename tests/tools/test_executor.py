"""The batching executor: call order, batched == one-by-one, grouping, error isolation, output formats and
the device policy."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import torch

from tools import REGISTRY, Executor, ToolCall, ToolResult
from tools.executor import resolve_device
from tools.images import demo_image, to_array
from tools.registry import Op, Param, ToolError, register

from tests.tools.helpers import registered

TORCH_OPS = sorted(name for name, op in REGISTRY.items() if not op.cpu_only)


def _reference(call: ToolCall) -> ToolResult:
    """The OpenCV reference for one call, computed without the executor."""
    op = REGISTRY[call.op]
    args = op.bind(call.args)
    image = to_array(call.image)
    for p in op.params:
        if p.kind == "image":
            args[p.name] = to_array(args[p.name])
    if op.check is not None:
        op.check(args, image.shape[0], image.shape[1])
    out = op.opencv(image, **args)
    return ToolResult(*out) if isinstance(out, tuple) else ToolResult(out)


def _assert_same(a: ToolResult, b: ToolResult, label: str):
    assert a.ok and b.ok, f"{label}: {a.error} / {b.error}"
    if a.image is None or b.image is None:
        assert a.image is None and b.image is None, label
    else:
        assert a.image.shape == b.image.shape, f"{label}: {a.image.shape} != {b.image.shape}"
        np.testing.assert_array_equal(a.image, b.image, err_msg=label)
    assert a.data == b.data, f"{label}: {a.data} != {b.data}"


def _mixed_calls(seed: int = 0) -> list[ToolCall]:
    images = [
        demo_image(48, 64, seed=1), demo_image(48, 64, seed=2), demo_image(48, 64, seed=3, gray=True),
        demo_image(37, 53, seed=4), demo_image(37, 53, seed=5, gray=True), demo_image(20, 30, seed=6),
    ]
    arg_sets = [
        ("flip", {"direction": "horizontal"}), ("flip", {"direction": "both"}),
        ("rotate", {"angle": 90}), ("rotate", {"angle": 30}), ("rotate", {"angle": -30}), ("rotate", {"angle": 180, "expand": False}),
        ("crop", {"box": [2, 3, 17, 19]}), ("crop", {"box": [0, 0, 10, 12]}),
        ("resize", {"width": 16, "height": 12, "interpolation": "nearest"}),
        ("translate", {"dx": 3, "dy": -2}), ("translate", {"dx": -4, "border": "replicate"}),
        ("pyramid", {"direction": "down"}),
    ]
    calls = [ToolCall(name, img, args) for img in images for name, args in arg_sets]
    random.Random(seed).shuffle(calls)
    return calls


def test_opencv_results_in_call_order():
    calls = _mixed_calls(seed=1)
    results = Executor("opencv").run(calls)
    assert len(results) == len(calls)
    for k, (call, res) in enumerate(zip(calls, results)):
        _assert_same(res, _reference(call), f"call {k}: {call.op}({call.args}) on {to_array(call.image).shape}")


def test_torch_results_in_call_order_and_equal_to_one_by_one():
    calls = _mixed_calls(seed=2)
    ex = Executor("cpu")
    together = ex.run(calls)
    assert len(together) == len(calls)
    for k, call in enumerate(calls):
        alone = ex.run([call])[0]
        _assert_same(together[k], alone, f"call {k}: {call.op}({call.args}) on {to_array(call.image).shape}")
        # and exact ops agree exactly with the reference, which also pins the order
        if call.op in ("flip", "crop", "translate") or (call.op == "rotate" and call.args["angle"] % 90 == 0):
            _assert_same(together[k], _reference(call), f"reference {k}")


@pytest.mark.parametrize("name", TORCH_OPS)
def test_batched_equals_per_call_for_every_torch_op(name):
    """Same example on three different images: one launch vs three launches give identical results."""
    op = REGISTRY[name]
    images = [demo_image(48, 64, seed=s) for s in (21, 22, 23)]
    ex = Executor("cpu")
    example = op.examples[0]
    calls = [ToolCall(name, img, example) for img in images]
    together = ex.run(calls)
    for k, call in enumerate(calls):
        _assert_same(together[k], ex.run([call])[0], f"{name}({example}) image {k}")


def test_batched_crop_zoom_with_different_boxes_equals_per_call():
    image = demo_image(48, 64, seed=1)
    calls = [ToolCall("crop", image, {"box": b, "scale": 2.0}) for b in ([0, 0, 20, 20], [5, 5, 25, 25], [10, 3, 30, 23])]
    ex = Executor("cpu")
    together = ex.run(calls)
    for k, call in enumerate(calls):
        _assert_same(together[k], ex.run([call])[0], f"box {call.args['box']}")


# -- grouping and fallback, observed through a test-only op wrapping rotate -----------------------------------
@pytest.fixture
def rotate_spy():
    base = REGISTRY["rotate"]
    state = {"launches": [], "fail_on": set(), "out_of_memory": None}

    def torch_fn(batch, **kwargs):
        state["launches"].append((batch.shape[0], tuple(kwargs["angle"])))
        if state["fail_on"] & set(kwargs["angle"]):
            raise RuntimeError("spy: this angle is cursed")
        if state["out_of_memory"]:
            raise state["out_of_memory"]
        return base.torch(batch, **kwargs)

    op = register(dataclasses.replace(base, name="_test_rotate_spy", torch=torch_fn))
    try:
        yield state
    finally:
        REGISTRY.pop(op.name, None)


def test_same_output_size_rotations_are_one_launch(rotate_spy):
    image = demo_image(48, 64, seed=7)
    angles = [30, -30, 150, 210]  # all give the same expanded canvas
    calls = [ToolCall("_test_rotate_spy", image, {"angle": a}) for a in angles]
    results = Executor("cpu").run(calls)
    assert rotate_spy["launches"] == [(4, (30.0, -30.0, 150.0, 210.0))]
    for a, res in zip(angles, results):
        _assert_same(res, Executor("cpu").run([ToolCall("rotate", image, {"angle": a})])[0], f"angle {a}")


def test_groups_split_by_size_shape_and_fixed_args(rotate_spy):
    a, b = demo_image(48, 64, seed=8), demo_image(37, 53, seed=9)
    calls = [
        ToolCall("_test_rotate_spy", a, {"angle": 30}),
        ToolCall("_test_rotate_spy", a, {"angle": 45}),                            # other output size
        ToolCall("_test_rotate_spy", a, {"angle": 90}),                            # exact quarter turn
        ToolCall("_test_rotate_spy", b, {"angle": 30}),                            # other input shape
        ToolCall("_test_rotate_spy", a, {"angle": -30, "interpolation": "cubic"}),  # other fixed argument
        ToolCall("_test_rotate_spy", a, {"angle": 150}),                           # joins the first group
        ToolCall("_test_rotate_spy", a, {"angle": 270}),                           # joins the quarter turn
    ]
    results = Executor("cpu").run(calls)
    assert all(r.ok for r in results)
    assert sorted(rotate_spy["launches"]) == sorted([
        (2, (30.0, 150.0)), (1, (45.0,)), (2, (90.0, 270.0)), (1, (30.0,)), (1, (-30.0,)),
    ])
    assert results[2].image.shape == (64, 48, 3) and results[6].image.shape == (64, 48, 3)
    np.testing.assert_array_equal(results[6].image, np.rot90(a, 3))


def test_failing_launch_falls_back_to_one_by_one(rotate_spy):
    image = demo_image(48, 64, seed=10)
    angles = [30, -30, 150, 210]
    rotate_spy["fail_on"].add(150.0)
    results = Executor("cpu").run([ToolCall("_test_rotate_spy", image, {"angle": a}) for a in angles])
    assert rotate_spy["launches"][0] == (4, (30.0, -30.0, 150.0, 210.0))
    assert sorted(rotate_spy["launches"][1:]) == [(1, (-30.0,)), (1, (30.0,)), (1, (150.0,)), (1, (210.0,))]
    assert [r.ok for r in results] == [True, True, False, True]
    assert "_test_rotate_spy" in results[2].error and "RuntimeError" in results[2].error and "cursed" in results[2].error
    assert results[2].image is None
    for k in (0, 1, 3):
        _assert_same(results[k], Executor("cpu").run([ToolCall("rotate", image, {"angle": angles[k]})])[0], f"angle {angles[k]}")


@pytest.mark.parametrize("error", [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                                   RuntimeError("CUDA error: out of memory"),
                                   RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED")], ids=["torch", "cuda", "cudnn"])
@pytest.mark.parametrize("cursed", [set(), {150.0}])
def test_out_of_device_memory_runs_the_calls_on_the_host_not_as_tool_errors(rotate_spy, cursed, error):
    """The GPU is shared with the model's engine in evaluation: a launch it has no memory for runs through the
    OpenCV reference, so the model gets the tool's result, and the executor counts and warns. With a bad call in
    the group, the calls are launched one by one and each that runs out of memory goes to the host."""
    image = demo_image(48, 64, seed=11)
    angles = [30, -30, 150, 210]
    rotate_spy["out_of_memory"], rotate_spy["fail_on"] = error, cursed
    executor = Executor("cpu")
    with pytest.warns(RuntimeWarning, match="ran out of memory on cpu and ran through OpenCV on the host"):
        results = executor.run([ToolCall("_test_rotate_spy", image, {"angle": a}) for a in angles])
    reference = Executor("opencv").run([ToolCall("rotate", image, {"angle": a}) for a in angles])
    on_host = [k for k, angle in enumerate(angles) if angle not in cursed]
    assert executor.host_fallbacks == len(on_host)
    assert [r.ok for r in results] == [k in on_host for k in range(len(angles))]
    for k in on_host:
        np.testing.assert_array_equal(results[k].image, reference[k].image)


def test_bad_calls_do_not_fail_the_batch():
    image = demo_image(48, 64, seed=11)
    calls = [
        ToolCall("flip", image, {}),
        ToolCall("flip", image, {"direction": "sideways"}),
        ToolCall("crop", image, {"box": [0, 0, 100, 100]}),
        ToolCall("flip", np.zeros((4, 4), np.int32), {}),
        ToolCall("nope", image, {}),
        ToolCall("flip", image, {"direction": "vertical"}),
    ]
    for device in ("opencv", "cpu"):
        results = Executor(device).run(calls)
        assert [r.ok for r in results] == [True, False, False, False, False, True], device
        assert "sideways" in results[1].error and "box" in results[2].error and "dtype" in results[3].error
        assert "nope" in results[4].error
        np.testing.assert_array_equal(results[0].image, image[:, ::-1])
        np.testing.assert_array_equal(results[5].image, image[::-1])


# -- test-only ops: data results, image parameters, cpu-only fallback -----------------------------------------
def _stats_cv(image, offset):
    return None, {"sum": int(image.astype(np.int64).sum()) + offset, "shape": list(image.shape)}


def _stats_torch(batch, offset):
    return None, [{"sum": int(img.long().sum()) + offset, "shape": [img.shape[1], img.shape[2]] + ([3] if img.shape[0] == 3 else [])}
                  for img in batch]


def _max_cv(image, other):
    return np.maximum(image, other)


def _max_torch(batch, other):
    return torch.maximum(batch, torch.stack(list(other)))


@pytest.fixture
def fake_ops():
    ops = [
        Op("_test_stats", "Sum of pixel values.", (Param("offset", "int", "added", 0, -10, 10),), _stats_cv, _stats_torch),
        Op("_test_stats_cpu", "Sum of pixel values (OpenCV only).", (Param("offset", "int", "added", 0, -10, 10),), _stats_cv),
        Op("_test_max", "Pixelwise max with another image.", (Param("other", "image", "the other image"),), _max_cv, _max_torch,
           vectorized=("other",)),
        Op("_test_max_cpu", "Pixelwise max with another image (OpenCV only).", (Param("other", "image", "the other image"),), _max_cv),
    ]
    with registered(*ops):
        yield


@pytest.mark.parametrize("device", ["opencv", "cpu"])
def test_data_results(fake_ops, device):
    imgs = [demo_image(16, 20, seed=s) for s in range(3)] + [demo_image(16, 20, seed=9, gray=True)]
    for name in ("_test_stats", "_test_stats_cpu"):
        results = Executor(device).run([ToolCall(name, img, {"offset": k}) for k, img in enumerate(imgs)])
        for k, (img, res) in enumerate(zip(imgs, results, strict=True)):
            assert res.ok and res.image is None, res.error
            assert res.data == {"sum": int(img.astype(np.int64).sum()) + k, "shape": list(img.shape)}


@pytest.mark.parametrize("device", ["opencv", "cpu"])
def test_image_parameters(fake_ops, device):
    imgs = [demo_image(16, 20, seed=s) for s in range(3)]
    others = [demo_image(16, 20, seed=10 + s) for s in range(3)]
    for name in ("_test_max", "_test_max_cpu"):
        calls = [ToolCall(name, img, {"other": other}) for img, other in zip(imgs, others)]
        calls.append(ToolCall(name, imgs[0], {"other": torch.from_numpy(others[1].transpose(2, 0, 1).copy())}))
        results = Executor(device).run(calls)
        expected = [np.maximum(a, b) for a, b in zip(imgs, others)] + [np.maximum(imgs[0], others[1])]
        for res, exp in zip(results, expected, strict=True):
            assert res.ok, res.error
            np.testing.assert_array_equal(res.image, exp)


# -- output format -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["opencv", "cpu"])
def test_tensor_output(fake_ops, device):
    rgb, gray = demo_image(48, 64, seed=12), demo_image(48, 64, seed=13, gray=True)
    calls = [
        ToolCall("flip", rgb, {}), ToolCall("flip", gray, {}),
        ToolCall("crop", rgb, {"box": [1, 2, 11, 22]}), ToolCall("crop", rgb, {"box": [3, 4, 13, 24]}),
        ToolCall("_test_max_cpu", gray, {"other": np.ascontiguousarray(gray[::-1])}),
        ToolCall("_test_stats", rgb, {}),
    ]
    results = Executor(device, output="tensor").run(calls)
    numpy_results = Executor(device).run(calls)
    for k, (res, ref) in enumerate(zip(results, numpy_results)):
        assert res.ok, res.error
        if ref.image is None:
            assert res.image is None and res.data == ref.data
            continue
        assert isinstance(res.image, torch.Tensor), (k, type(res.image))
        assert res.image.dtype == torch.uint8 and res.image.device.type == "cpu"
        expected = ref.image[None] if ref.image.ndim == 2 else ref.image.transpose(2, 0, 1)
        assert tuple(res.image.shape) == expected.shape, (k, res.image.shape)
        np.testing.assert_array_equal(res.image.numpy(), expected)


@pytest.mark.parametrize("device", ["opencv", "cpu"])
def test_negative_stride_numpy_views_are_accepted(fake_ops, device):
    """np.flipud / [::-1] views are ordinary numpy images: as the image and as an image parameter."""
    rgb, gray = demo_image(20, 30, seed=16), demo_image(20, 30, seed=17, gray=True)
    for image in (rgb, gray):
        view = image[::-1, ::-1]
        results = Executor(device).run([
            ToolCall("flip", view, {"direction": "both"}),
            ToolCall("_test_max", image, {"other": view}),
            ToolCall("_test_max_cpu", image, {"other": view}),
        ])
        assert [r.error for r in results] == [None, None, None], (image.ndim, [r.error for r in results])
        np.testing.assert_array_equal(results[0].image, image)
        np.testing.assert_array_equal(results[1].image, np.maximum(image, view))
        np.testing.assert_array_equal(results[2].image, np.maximum(image, view))


def test_bad_output_rejected():
    with pytest.raises(ValueError, match="output"):
        Executor("opencv", output="pil")


def test_tensor_inputs_on_torch_path():
    rgb = demo_image(20, 30, seed=14)
    chw = torch.from_numpy(rgb.transpose(2, 0, 1).copy())
    calls = [ToolCall("flip", chw, {}), ToolCall("flip", chw.float() / 255, {}), ToolCall("flip", chw[:1], {})]
    results = Executor("cpu").run(calls)
    np.testing.assert_array_equal(results[0].image, rgb[:, ::-1])
    np.testing.assert_array_equal(results[1].image, rgb[:, ::-1])
    np.testing.assert_array_equal(results[2].image, rgb[:, ::-1, 0])
    too_big = Executor("cpu", max_pixels=100).run([ToolCall("flip", chw, {})])[0]
    assert not too_big.ok and "limit" in too_big.error


def test_auto_resolves_to_opencv_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "opencv"
    assert Executor().device == "opencv" and Executor("auto").device == "opencv"


def test_auto_resolves_to_cuda_with_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"
    assert Executor("auto").device == "cuda"


def test_auto_on_this_machine_as_it_is():
    assert Executor().device == ("cuda" if torch.cuda.is_available() else "opencv")


def test_explicit_devices():
    assert resolve_device("opencv") == "opencv"
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(Exception, match="gpu0|device"):
        resolve_device("gpu0")


def test_device_strings_are_checked_up_front(monkeypatch):
    for bad in ("mps", "gpu", "cuda:x"):
        with pytest.raises(ToolError, match="device"):
            Executor(device=bad)
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ToolError, match="1 CUDA device"):
        Executor(device="cuda:3")


@pytest.mark.parametrize("device", ["opencv", "cpu"])
def test_outputs_that_grow_respect_the_executors_max_pixels(device):
    image = demo_image(48, 64)
    executor = Executor(device=device, max_pixels=50_000)
    calls = [ToolCall("resize", image, {"scale": 5}), ToolCall("pyramid", image, {"direction": "up", "levels": 3}),
             ToolCall("crop", image, {"box": [0, 0, 64, 48], "scale": 5}), ToolCall("resize", image, {"scale": 2})]
    results = executor.run(calls)
    assert [r.ok for r in results] == [False, False, False, True]
    assert all("50,000 pixels" in r.error for r in results[:3])
    big = Executor(device=device, max_pixels=10**8).run([ToolCall("resize", image, {"scale": 16})])[0]
    assert big.ok and big.image.shape == (768, 1024, 3)


def test_area_interpolation_is_for_shrinking():
    (res,) = Executor("opencv").run([ToolCall("resize", demo_image(48, 64), {"scale": 2, "interpolation": "area"})])
    assert "interpolation" in res.error and "shrinking" in res.error

