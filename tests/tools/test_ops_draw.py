"""Semantics of the draw ops: hand-checked pixel sets, units, gray handling, labels, validation, and
exact agreement of the batched torch path (including per-image arguments in one launch)."""

import random

import cv2
import numpy as np
import pytest
import torch

from tools import REGISTRY, Executor, ToolCall
from tools.images import demo_image
from tools.ops import draw
from tools.registry import ToolArgumentError

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
GRAY_BG = 100


def flat(h=48, w=64, value=GRAY_BG, gray=False):
    return np.full((h, w) if gray else (h, w, 3), value, np.uint8)


def call(name, image, **args):
    """The OpenCV reference, with binding and the op's checks, as the executor runs it."""
    op = REGISTRY[name]
    bound = op.bind(args)
    if op.check is not None:
        op.check(bound, image.shape[0], image.shape[1])
    return op.opencv(image, **bound)


def changed(before, after):
    diff = before != after
    return diff.any(axis=2) if diff.ndim == 3 else diff


def run_torch(calls, device="cpu"):
    results = Executor(device=device).run(calls)
    for r in results:
        assert r.ok, r.error
    return [r.image for r in results]


# -- pixel semantics ---------------------------------------------------------------------------------------
def test_thin_horizontal_line_covers_exactly_its_pixels():
    img = flat()
    out = call("draw_line", img, x1=5, y1=10, x2=40, y2=10, thickness=1, color=[255, 0, 0])
    expected = np.zeros((48, 64), bool)
    expected[10, 5:41] = True
    np.testing.assert_array_equal(changed(img, out), expected)
    assert (out[10, 5] == [255, 0, 0]).all() and (out[10, 40] == [255, 0, 0]).all()


def test_diagonal_line_is_8_connected_one_pixel_per_column():
    out = call("draw_line", flat(), x1=0, y1=0, x2=20, y2=10, thickness=1)
    mask = changed(flat(), out)
    assert mask.sum() == 21 and (mask[:, :21].sum(axis=0) == 1).all()
    assert mask[0, 0] and mask[10, 20]


def test_line_outside_image_is_clipped_not_an_error():
    out = call("draw_line", flat(), x1=-500, y1=20, x2=500, y2=20, thickness=1)
    mask = changed(flat(), out)
    assert mask[20].all() and mask.sum() == 64
    untouched = call("draw_line", flat(), x1=-50, y1=-5, x2=-10, y2=-30)
    np.testing.assert_array_equal(untouched, flat())


def test_box_is_exclusive_and_outlines_the_crop_region():
    img = flat()
    out = call("draw_box", img, box=[10, 8, 50, 40], thickness=1)
    expected = np.zeros((48, 64), bool)
    expected[8, 10:50] = expected[39, 10:50] = True
    expected[8:40, 10] = expected[8:40, 49] = True
    np.testing.assert_array_equal(changed(img, out), expected)
    # Corners in any order give the same box.
    np.testing.assert_array_equal(call("draw_box", img, box=[50, 40, 10, 8], thickness=1), out)


def test_filled_box_fills_exactly_the_box_pixels():
    out = call("draw_box", flat(), box=[3, 4, 13, 9], thickness=-1, color=[0, 0, 255])
    expected = np.zeros((48, 64), bool)
    expected[4:9, 3:13] = True
    np.testing.assert_array_equal(changed(flat(), out), expected)
    assert (out[4:9, 3:13] == [0, 0, 255]).all()


def test_norm1000_maps_like_crop():
    img = flat()
    norm = call("draw_box", img, box=[0, 0, 500, 500], units="norm1000", thickness=-1)
    pixels = call("draw_box", img, box=[0, 0, 32, 24], thickness=-1)
    np.testing.assert_array_equal(norm, pixels)
    # Fractions truncate: 33.3 norm1000 of 64 px is 2.13 -> 2.
    a = call("draw_line", img, x1=33.3, y1=0, x2=33.3, y2=999, units="norm1000", thickness=1)
    assert changed(img, a)[:, 2].all() and changed(img, a).sum() == 48


def test_filled_circle_is_the_integer_disk():
    r = 7
    out = call("draw_circle", flat(), x=30, y=20, radius=r, thickness=-1)
    yy, xx = np.mgrid[0:48, 0:64]
    disk = (xx - 30) ** 2 + (yy - 20) ** 2 <= r * r
    np.testing.assert_array_equal(changed(flat(), out), disk)


def test_thin_circle_ring_passes_through_the_axis_points():
    out = call("draw_circle", flat(), x=30, y=20, radius=10, thickness=1)
    mask = changed(flat(), out)
    for x, y in [(40, 20), (20, 20), (30, 10), (30, 30)]:
        assert mask[y, x]
    assert not mask[20, 30] and not mask[20, 41]


def test_gray_images_draw_the_color_luma():
    out = call("draw_line", flat(gray=True), x1=0, y1=5, x2=63, y2=5, thickness=1, color=[255, 0, 0])
    assert out.ndim == 2 and (out[5] == 76).all()  # round(0.299 * 255) = 76, cv2.COLOR_RGB2GRAY
    rgb = call("draw_line", flat(), x1=0, y1=5, x2=63, y2=5, thickness=1, color=[30, 200, 90])
    gray = call("draw_line", flat(gray=True), x1=0, y1=5, x2=63, y2=5, thickness=1, color=[30, 200, 90])
    assert gray[5, 0] == cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)[5, 0]


def test_reference_does_not_modify_its_input():
    img = demo_image(48, 64, seed=1)
    keep = img.copy()
    for name, op in REGISTRY.items():
        if op.category == "draw":
            for example in op.examples:
                call(name, img, **example)
    np.testing.assert_array_equal(img, keep)


def test_thick_line_follows_opencv_round_caps():
    out = call("draw_line", flat(), x1=10, y1=20, x2=40, y2=20, thickness=3)
    ref = flat()
    cv2.line(ref, (10, 20), (40, 20), (255, 0, 0), 3, cv2.LINE_8)
    np.testing.assert_array_equal(out, ref)
    mask = changed(flat(), out)
    assert mask[20, 8] and not mask[20, 7]  # cap radius (3 + 1) // 2 = 2 past the end point


def test_polygon_filled_and_open():
    square = [10, 10, 30, 10, 30, 30, 10, 30]
    filled = call("draw_polygon", flat(), points=square, filled=True)
    expected = np.zeros((48, 64), bool)
    expected[10:31, 10:31] = True
    np.testing.assert_array_equal(changed(flat(), filled), expected)
    closed = changed(flat(), call("draw_polygon", flat(), points=square, thickness=1))
    opened = changed(flat(), call("draw_polygon", flat(), points=square, thickness=1, closed=False))
    assert closed[20, 10] and not opened[20, 10]  # the closing edge x = 10
    assert closed.sum() == 80 and opened.sum() == 61


def test_arrow_head_is_at_the_end_point():
    mask = changed(flat(), call("draw_arrow", flat(), x1=5, y1=24, x2=55, y2=24, thickness=1, tip_length=0.2))
    cols = np.nonzero(mask.any(axis=0))[0]
    assert cols.min() == 5 and cols.max() == 55
    # The head's two barbs make columns just behind the tip taller than the shaft.
    assert mask[:, 50].sum() > 1 and mask[:, 10].sum() == 1


# -- text and labels --------------------------------------------------------------------------------------
def test_text_box_background_is_the_layout_box():
    img = flat(60, 200)
    out = call("draw_text", img, text="Hi 12", x=7, y=9, font_scale=0.5, background=[255, 255, 255], color=[0, 0, 0])
    layout = draw.label_layout("Hi 12", 0.5)
    mask = changed(img, out)
    ys, xs = np.nonzero(mask)
    assert (ys.min(), xs.min()) == (9, 7)
    assert (ys.max(), xs.max()) == (9 + layout["height"] - 1, 7 + layout["width"] - 1)
    inner = out[9:9 + layout["height"], 7:7 + layout["width"]]
    assert (inner == 0).all(axis=2).sum() > 10 and (inner == 255).all(axis=2).sum() > 10  # black text on white


def test_text_without_background_only_blends_glyphs_and_multiline_grows_down():
    img = flat(80, 200)
    one = changed(img, call("draw_text", img, text="Ab", x=5, y=5, font_scale=0.6))
    two = changed(img, call("draw_text", img, text="Ab\nAb", x=5, y=5, font_scale=0.6))
    assert one.any() and one.sum() < 0.5 * draw.label_layout("Ab", 0.6)["width"] * draw.label_layout("Ab", 0.6)["height"]
    assert np.nonzero(two)[0].max() > np.nonzero(one)[0].max() + 10
    assert (two & one).sum() == one.sum()  # the first line is unchanged


def test_unicode_text_renders():
    img = flat(40, 120)
    assert changed(img, call("draw_text", img, text="角度 ∠B", x=2, y=2, font_scale=0.6)).sum() > 30


def test_box_label_sits_above_the_box_or_inside_at_the_top():
    img = flat(100, 120)
    plain = call("draw_box", img, box=[20, 50, 90, 90], thickness=1)
    labeled = call("draw_box", img, box=[20, 50, 90, 90], thickness=1, label="car", font_scale=0.4)
    extra = changed(plain, labeled)
    layout = draw.label_layout("car", 0.4)
    ys, xs = np.nonzero(extra)
    assert ys.max() == 49 and ys.min() == 50 - layout["height"] and xs.min() == 20
    top = call("draw_box", img, box=[20, 2, 90, 90], thickness=1, label="car", font_scale=0.4)
    ys, _ = np.nonzero(changed(call("draw_box", img, box=[20, 2, 90, 90], thickness=1), top))
    assert ys.min() >= 2  # no room above: the tag goes inside, below the top edge


def test_points_are_dots_with_numbers():
    img = flat(60, 120)
    bare = call("draw_points", img, points=[20, 30, 80, 30], radius=3, numbered=False)
    disk = changed(img, call("draw_circle", img, x=20, y=30, radius=3, thickness=-1))
    assert (changed(img, bare) & disk).sum() == disk.sum() and changed(img, bare).sum() == 2 * disk.sum()
    numbered = call("draw_points", img, points=[20, 30, 80, 30], radius=3)
    tags = changed(bare, numbered)
    assert tags[:, 24:50].any() and tags[:, 84:110].any()  # a tag right of each dot
    # A point at the right edge gets its tag on the left.
    edge = changed(call("draw_points", img, points=[118, 30], radius=3, numbered=False),
                   call("draw_points", img, points=[118, 30], radius=3))
    assert np.nonzero(edge)[1].max() < 114


def test_grid_lines_cells_and_spacing():
    img = flat()
    out = call("draw_grid", img, cells=4, labels=False)
    expected = np.zeros((48, 64), bool)
    expected[:, [16, 32, 48]] = True
    expected[[12, 24, 36], :] = True
    np.testing.assert_array_equal(changed(img, out), expected)
    same = call("draw_grid", img, spacing=250, units="norm1000", labels=False)
    np.testing.assert_array_equal(same, out)
    px = changed(img, call("draw_grid", img, spacing=20, labels=False))
    assert px[:, [20, 40, 60]].all() and px[[20, 40], :].all() and px.sum() == 3 * 48 + 2 * 64 - 6


def test_grid_positions_and_labels():
    assert draw._grid_positions(64, "pixels", None, 4) == [(16, "16"), (32, "32"), (48, "48")]
    assert draw._grid_positions(48, "norm1000", None, 3) == [(16, "333.3"), (32, "666.7")]
    assert draw._grid_positions(100, "pixels", 25, 10) == [(25, "25"), (50, "50"), (75, "75")]
    assert draw._grid_positions(1000, "norm1000", 100, 10)[0] == (100, "100")
    img = flat(300, 400)
    pixel_labels = call("draw_grid", img, cells=4)
    norm_labels = call("draw_grid", img, cells=4, units="norm1000")
    bare = call("draw_grid", img, cells=4, labels=False)
    assert changed(bare, pixel_labels).any() and not np.array_equal(pixel_labels, norm_labels)


# -- validation ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, args, param", [
    ("draw_circle", {"x": 1, "y": 1, "radius": 3, "thickness": 0}, "thickness"),
    ("draw_line", {"x1": 1, "y1": 1, "x2": 3, "y2": 3, "thickness": -1}, "thickness"),
    ("draw_line", {"x1": 1e6, "y1": 1, "x2": 3, "y2": 3}, "x1"),
    ("draw_line", {"x1": 1, "y1": 1, "x2": 3}, "y2"),
    ("draw_points", {"points": [1, 2, 3]}, "points"),
    ("draw_points", {"points": []}, "points"),
    ("draw_points", {"points": [1, 2] * 300}, "points"),
    ("draw_polygon", {"points": [1, 2, 30, 40], "filled": True}, "points"),
    ("draw_box", {"box": [5, 5, 5, 20]}, "box"),
    ("draw_box", {"box": [5, 5, 20, 20], "label": "x" * 101}, "label"),
    ("draw_box", {"box": [5, 5, 20]}, "box"),
    ("draw_text", {"text": "  ", "x": 1, "y": 1}, "text"),
    ("draw_text", {"text": "a", "x": 1, "y": 1, "background": [1, 2]}, "background"),
    ("draw_grid", {"spacing": 1, "units": "norm1000"}, "spacing"),
    ("draw_grid", {"cells": 1}, "cells"),
    ("draw_arrow", {"x1": 1, "y1": 1, "x2": 3, "y2": 3, "tip_length": 0}, "tip_length"),
    ("draw_box", {"box": [5, 5, 20, 20], "color": [0, 0, 256]}, "color"),
])
def test_validation_errors_name_the_parameter(name, args, param):
    with pytest.raises(ToolArgumentError) as err:
        call(name, flat(), **args)
    assert f"parameter '{param}'" in str(err.value)
    result = Executor(device="opencv").run([ToolCall(name, flat(), args)])[0]
    assert not result.ok and f"'{param}'" in result.error


# -- torch path ------------------------------------------------------------------------------------------
def _random_call(rng: random.Random, image):
    h, w = image.shape[:2]
    coord = lambda size: rng.randint(-size // 2, size + size // 2)  # noqa: E731
    kind = rng.choice(["draw_line", "draw_arrow", "draw_circle", "draw_box", "draw_polygon", "draw_points"])
    color = [rng.randint(0, 255) for _ in range(3)]
    if kind in ("draw_line", "draw_arrow"):
        args = {"x1": coord(w), "y1": coord(h), "x2": coord(w), "y2": coord(h), "thickness": rng.randint(1, 12)}
    elif kind == "draw_circle":
        args = {"x": coord(w), "y": coord(h), "radius": rng.randint(1, 60), "thickness": rng.choice([-1, 1, 2, 3, 7, 15])}
    elif kind == "draw_box":
        x1, y1 = coord(w), coord(h)
        args = {"box": [x1, y1, x1 + rng.randint(1, w), y1 + rng.randint(1, h)], "thickness": rng.choice([-1, 1, 2, 5])}
    elif kind == "draw_polygon":
        args = {"points": [coord(w if i % 2 == 0 else h) for i in range(2 * rng.randint(3, 7))],
                "filled": rng.random() < 0.5, "thickness": rng.randint(1, 6)}
    else:
        args = {"points": [coord(w if i % 2 == 0 else h) for i in range(2 * rng.randint(1, 5))],
                "radius": rng.randint(1, 8), "numbered": False}
    args["color"] = color
    return kind, args


@pytest.mark.parametrize("device", DEVICES)
def test_torch_shapes_are_exact_for_random_arguments(device):
    rng = random.Random(0)
    images = [demo_image(48, 64, seed=1), demo_image(37, 53, seed=2, gray=True), demo_image(90, 70, seed=3)]
    calls, refs = [], []
    for _ in range(150):
        image = rng.choice(images)
        kind, args = _random_call(rng, image)
        calls.append(ToolCall(kind, image, args))
        refs.append(call(kind, image, **args))
    for ref, got in zip(refs, run_torch(calls, device), strict=True):
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("device", DEVICES)
def test_per_image_arguments_share_one_launch(device, monkeypatch):
    images = [demo_image(48, 64, seed=s) for s in (1, 2, 3, 4)]
    boxes = [[2, 3, 30, 20], [10, 10, 60, 40], [2, 3, 30, 20], [-5, 30, 20, 70]]
    labels = ["a", "bb", "a", None]
    launches = []
    op = REGISTRY["draw_box"]
    original = draw.apply_plans

    def counting(batch, plans, index, palette):
        launches.append((batch.shape[0], len(plans), list(index)))
        return original(batch, plans, index, palette)

    monkeypatch.setattr(draw, "apply_plans", counting)
    calls = [ToolCall("draw_box", img, {"box": b, "font_scale": 0.35, "thickness": 2, **({"label": lab} if lab else {})})
             for img, b, lab in zip(images, boxes, labels)]
    got = run_torch(calls, device)
    assert launches == [(4, 3, [0, 1, 0, 2])]  # one launch; identical arguments share one plan
    tol = op.tolerance
    for img, c, g in zip(images, calls, got):
        ref = call("draw_box", img, **c.args)
        diff = np.abs(ref.astype(int) - g)
        assert diff.max() <= tol.pixel and (diff > 0).mean() <= 0.01


@pytest.mark.parametrize("device", DEVICES)
def test_torch_path_leaves_the_input_batch_alone(device):
    batch = torch.from_numpy(demo_image(48, 64, seed=1)).permute(2, 0, 1)[None].repeat(2, 1, 1, 1).to(device)
    keep = batch.clone()
    op = REGISTRY["draw_grid"]
    out = op.torch(batch, **op.bind({}))
    assert torch.equal(batch, keep) and not torch.equal(out, batch)
    assert out.dtype == torch.uint8 and out.shape == batch.shape and out.device == batch.device


def test_text_torch_path_is_within_one_level():
    img = demo_image(60, 300, seed=5)
    texts = ["ffff fjfj TjTj", "Mixed 12.5 cm", "漢字 ∠ABC = 40°"]
    calls = [ToolCall("draw_text", img, {"text": t, "x": 3, "y": 5, "font_scale": 0.6, "color": [250, 30, 90]}) for t in texts]
    for c, got in zip(calls, run_torch(calls), strict=True):
        ref = call("draw_text", img, **c.args)
        diff = np.abs(ref.astype(int) - got)
        assert diff.max() <= 1 and (diff > 0).sum() <= 10
