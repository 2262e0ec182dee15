"""Semantics of the analysis ops: hand-checked cases on synthetic images, exact agreement of the torch
helpers with OpenCV on adversarial inputs, and validation errors that name the parameter."""

import json
import math

import cv2
import numpy as np
import pytest
import torch

from tools import REGISTRY, Executor, ToolCall
from tools.images import demo_image
from tools.ops import analysis as A

ANALYSIS_OPS = ["contours", "connected_components", "hough_lines", "hough_circles", "watershed", "grabcut",
                "flood_fill", "template_match", "keypoints", "inpaint", "measure"]


def run(op, image, device="opencv", **args):
    result = Executor(device=device).run([ToolCall(op, image, args)])[0]
    assert result.ok, result.error
    json.dumps(result.data)  # JSON-serializable
    return result


def error(op, image, **args):
    result = Executor(device="opencv").run([ToolCall(op, image, args)])[0]
    assert not result.ok
    return result.error


def chw(image):
    return torch.from_numpy(image[None] if image.ndim == 2 else np.ascontiguousarray(image.transpose(2, 0, 1)))


def shapes_image():
    """Black 120x160 RGB with a white 40x30 rectangle, a gray triangle and a small square."""
    img = np.zeros((120, 160, 3), np.uint8)
    cv2.rectangle(img, (10, 20), (49, 49), (255, 255, 255), -1)  # 40 x 30, inclusive corners
    cv2.fillPoly(img, [np.array([[100, 20], [140, 90], [70, 90]], np.int32)], (180, 180, 180))
    cv2.rectangle(img, (20, 90), (24, 94), (200, 200, 200), -1)  # 5 x 5
    return img


# -- every op: every example runs on RGB and gray, data is JSON, image is uint8 -----------------------------
@pytest.mark.parametrize("name", ANALYSIS_OPS)
def test_examples_run(name):
    op = REGISTRY[name]
    assert op.category == "analysis" and op.examples
    for image in (demo_image(48, 64, seed=1), demo_image(48, 64, seed=2, gray=True)):
        for example in op.examples:
            result = run(name, image, **example)
            assert result.image.dtype == np.uint8 and result.image.shape[:2] == image.shape[:2]
            if name in ("inpaint", "grabcut"):  # image results keep the input's channels
                assert result.image.shape == image.shape
            else:  # annotations are drawn in color
                assert result.image.ndim == 3 and result.image.shape[2] == 3


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("density", [0.2, 0.45, 0.6])
def test_component_labels_match_opencv(connectivity, density):
    """The full label map (OpenCV's numbering included) for a batch of noisy masks of odd sizes."""
    rng = np.random.default_rng(int(density * 100) + connectivity)
    for h, w in ((37, 53), (64, 48), (1, 9), (9, 1), (101, 77)):
        masks = rng.random((3, h, w)) < density
        rank, stats, counts = A._component_table(torch.from_numpy(masks), connectivity)
        starts = np.concatenate([[0], np.cumsum(counts.numpy())[:-1]])
        area = stats[1].numpy()
        for k in range(3):
            n, labels, cv_stats, _ = cv2.connectedComponentsWithStats(masks[k].astype(np.uint8), connectivity=connectivity)
            got = np.where(rank[k].numpy() >= 0, rank[k].numpy() - starts[k] + 1, 0)
            assert counts[k] == n - 1
            assert np.array_equal(got, labels), f"{h}x{w} connectivity {connectivity}"
            assert np.array_equal(area[starts[k]:starts[k] + n - 1], cv_stats[1:, cv2.CC_STAT_AREA])


def test_component_snake_converges():
    """A long one-pixel-wide serpentine is one component (the worst case for label propagation)."""
    mask = np.zeros((41, 41), bool)
    mask[::4, :] = True
    for i, row in enumerate(range(0, 40, 4)):
        mask[row:row + 5, 40 if i % 2 == 0 else 0] = True
    rank, stats, counts = A._component_table(torch.from_numpy(mask)[None], 4)
    assert counts.tolist() == [1] and stats[1].tolist() == [int(mask.sum())]


@pytest.mark.parametrize("fixed_range", [True, False])
@pytest.mark.parametrize("connectivity", [4, 8])
def test_flood_fill_torch_matches_opencv(fixed_range, connectivity):
    rng = np.random.default_rng(connectivity + 10 * fixed_range)
    base = cv2.GaussianBlur(rng.integers(0, 256, (45, 60, 3), dtype=np.uint8), (7, 7), 2)
    for gray in (False, True):
        image = cv2.cvtColor(base, cv2.COLOR_RGB2GRAY) if gray else base
        for lo, up in (((6, 6, 6), (6, 6, 6)), ((2, 9, 4), (7, 3, 4)), ((0, 0, 0), (15, 15, 15))):
            xs, ys = rng.integers(0, 60, 3).tolist(), rng.integers(0, 45, 3).tolist()
            out, data = A.flood_fill_torch(chw(image)[None].expand(3, -1, -1, -1).contiguous(), xs, ys, lo, up,
                                           (1, 2, 3), connectivity, fixed_range)
            for k in range(3):
                ref_img, ref_data = A.flood_fill_cv(image, xs[k], ys[k], lo, up, (1, 2, 3), connectivity, fixed_range)
                assert np.array_equal(out[k].permute(1, 2, 0).numpy(), ref_img)
                assert data[k] == ref_data


def test_template_match_finds_cut_out_patch():
    image = demo_image(80, 100, seed=5)
    template = image[30:47, 52:75].copy()
    for device in ("opencv", "cpu"):
        for method in ("ccoeff_normed", "ccorr_normed", "sqdiff_normed", "sqdiff"):
            data = run("template_match", image, device, template=template, method=method).data
            assert data["box"] == [52, 30, 75, 47] and data["template_size"] == [23, 17]
        assert run("template_match", image, device, template=template).data["score"] == pytest.approx(1.0, abs=1e-4)


def test_template_match_flat_regions_agree():
    """Flat windows (zero variance) and a flat template follow OpenCV's special cases in the torch version
    too. (Exact ties between positions, e.g. a flat template over flat areas with an unnormalised score,
    are broken by OpenCV's float32 rounding noise and cannot be reproduced; those cases are left out.)"""
    image = np.zeros((40, 50, 3), np.uint8)
    image[10:25, 20:40] = (200, 100, 50)
    image[12:16, 25:29] = (10, 240, 30)
    template = np.ascontiguousarray(image[8:20, 18:30])
    flat = np.full((6, 6, 3), 100, np.uint8)
    normed = ("ccoeff_normed", "ccorr_normed", "sqdiff_normed")
    for tpl, methods in ((template, tuple(A._TM)), (cv2.cvtColor(template, cv2.COLOR_RGB2GRAY), normed), (flat, ("ccoeff_normed",))):
        for method in methods:
            ref = run("template_match", image, "opencv", template=tpl, method=method)
            got = run("template_match", image, "cpu", template=tpl, method=method)
            assert got.data["box"] == ref.data["box"], method
            assert got.data["score"] == pytest.approx(ref.data["score"], rel=1e-4, abs=1e-3)
            assert np.array_equal(got.image, ref.image)


def test_difference_finds_the_changed_cells():
    before = demo_image(60, 90, seed=3)
    after = before.copy()
    after[5:9, 70:75] = 255 - after[5:9, 70:75]  # row 1, column 3 of a 2x3 grid -> cell 3
    after[40, 10, 1] ^= 1  # a one-level change in row 2, column 1 -> cell 4
    for device in ("opencv", "cpu"):
        result = run("difference", before, device, other=after, grid=[2, 3])
        assert result.data["cells"] == [3, 4] and result.data["box"] == [10, 5, 75, 41]
        assert result.data["changed_pixels"] == int((before != after).any(axis=2).sum())
        assert np.array_equal(result.image, cv2.absdiff(before, after))
        assert run("difference", before, device, other=after, grid=[2, 3], threshold=1).data["cells"] == [3]
        same = run("difference", before, device, other=before).data
        assert same == {"changed_pixels": 0, "changed_fraction": 0.0, "box": None}
        gray = run("difference", cv2.cvtColor(before, cv2.COLOR_RGB2GRAY), device, other=after)
        assert gray.image.ndim == 2 and gray.ok
    mismatch = Executor(device="opencv").run([ToolCall("difference", before, {"other": after[:, :80]})])[0]
    assert not mismatch.ok and "other" in mismatch.error and "same size" in mismatch.error


# -- hand-checked semantics ---------------------------------------------------------------------------------------
def test_contours_measure_known_shapes():
    data = run("contours", shapes_image(), binarize="otsu", epsilon_ratio=0.02).data
    assert data["total_contours"] == 3 and data["returned_contours"] == 3
    tri, rect, small = data["contours"]  # sorted by area, largest first
    assert rect["bbox"] == [10, 20, 50, 50] and rect["vertices"] == 4
    assert rect["area"] == 39 * 29 and rect["perimeter"] == pytest.approx(2 * (39 + 29))
    assert rect["centroid"] == [29.5, 34.5]
    assert tri["vertices"] == 3 and tri["bbox"] == [70, 20, 141, 91]
    assert tri["area"] == pytest.approx(0.5 * 70 * 70, rel=0.03)
    assert small["area"] == 16 and [c["rank"] for c in data["contours"]] == [1, 2, 3]
    # rank picks one; left_to_right orders by x; min_area filters; an out-of-range rank returns none
    assert run("contours", shapes_image(), binarize="otsu", rank=2).data["contours"][0]["bbox"] == [10, 20, 50, 50]
    order = run("contours", shapes_image(), binarize="otsu", sort_by="left_to_right").data["contours"]
    assert [c["bbox"][0] for c in order] == [10, 20, 70]
    assert run("contours", shapes_image(), binarize="otsu", min_area=100).data["matching_contours"] == 2
    none = run("contours", shapes_image(), binarize="otsu", rank=9).data
    assert none["contours"] == [] and "rank 9" in none["note"]


def test_contours_canny_default_and_drawing():
    result = run("contours", shapes_image(), label="none")
    assert result.data["binarize"] == "canny" and result.data["canny"] == [100, 200]
    assert result.data["total_contours"] >= 3
    drawn = (result.image != shapes_image()).any(axis=2)
    assert drawn.any() and (result.image[drawn] == [0, 255, 0]).all(axis=1).all()
    plain = run("contours", shapes_image(), draw="none", label="none").image
    assert np.array_equal(plain, shapes_image())


def test_connected_components_known_count():
    img = shapes_image()
    for device in ("opencv", "cpu"):
        result = run("connected_components", img, device, binarize="binary", threshold=100)
        data = result.data
        assert data["total_components"] == 3 and data["threshold"] == 100
        areas = [c["area"] for c in data["components"]]
        assert areas[1] == 1200 and areas[2] == 25 and areas == sorted(areas, reverse=True)
        assert data["components"][1]["bbox"] == [10, 20, 50, 50]
        assert data["components"][1]["centroid"] == [29.5, 34.5]
        assert [c["label"] for c in data["components"]] == [2, 1, 3]  # OpenCV numbers by raster order
        # label map: background black, each returned component in its own palette color
        assert (result.image[0, 0] == 0).all()
        assert tuple(result.image[30, 30]) == tuple(A._PALETTE[1])
        assert tuple(result.image[80, 100]) == tuple(A._PALETTE[0])
        assert tuple(result.image[92, 22]) == tuple(A._PALETTE[2])
        limited = run("connected_components", img, device, binarize="binary", threshold=100, max_components=1, min_area=30)
        assert limited.data["matching_components"] == 2 and limited.data["returned_components"] == 1
        assert tuple(limited.image[92, 22]) == (A._OTHER,) * 3  # found but not returned: gray


def test_connected_components_connectivity():
    img = np.zeros((10, 10), np.uint8)
    img[2, 2] = img[3, 3] = 255  # diagonal neighbours
    for device in ("opencv", "cpu"):
        assert run("connected_components", img, device, binarize="nonzero", connectivity=8).data["total_components"] == 1
        assert run("connected_components", img, device, binarize="nonzero", connectivity=4).data["total_components"] == 2


def test_hough_lines_on_opencv5():
    img = np.zeros((100, 120, 3), np.uint8)
    cv2.line(img, (10, 80), (110, 80), (255, 255, 255), 2)  # horizontal
    cv2.line(img, (20, 90), (90, 20), (255, 255, 255), 2)  # up-right at 45 degrees
    data = run("hough_lines", img, threshold=30, min_line_length=40, max_line_gap=5).data
    assert data["returned_lines"] >= 2
    angles = sorted({round(line["angle"]) for line in data["lines"]})
    assert 0 in angles and 45 in angles
    assert data["lines"][0]["length"] >= data["lines"][-1]["length"]
    assert run("hough_lines", np.zeros((50, 50), np.uint8)).data == {"total_lines": 0, "returned_lines": 0, "lines": []}


def test_hough_circles_finds_circle():
    img = np.zeros((120, 120, 3), np.uint8)
    cv2.circle(img, (60, 55), 30, (255, 255, 255), -1)
    data = run("hough_circles", img, param2=20).data
    assert data["total_circles"] >= 1
    circle = data["circles"][0]
    assert math.dist(circle["center"], [60, 55]) < 3 and abs(circle["radius"] - 30) < 3
    assert "blur" in error("hough_circles", img, blur=4)


def test_watershed_separates_touching_discs():
    img = np.zeros((100, 160, 3), np.uint8)
    img = np.zeros((100, 170, 3), np.uint8)
    cv2.circle(img, (55, 50), 30, (255, 255, 255), -1)
    cv2.circle(img, (110, 50), 30, (255, 255, 255), -1)  # overlapping discs
    result = run("watershed", img)
    assert result.data["region_count"] == 2
    a, b = result.data["regions"]
    assert abs(a["area"] - b["area"]) < 0.1 * a["area"]
    assert sorted([a["centroid"][0], b["centroid"][0]]) == pytest.approx([55, 110], abs=2)
    assert (result.image[50, 82:86] == [255, 0, 0]).all(axis=1).any()  # the dividing line between the discs
    dark = run("watershed", 255 - img, objects="dark")
    assert dark.data["region_count"] == 2


def test_grabcut_segments_object_and_is_deterministic():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 40, (80, 100, 3), dtype=np.uint8)
    img[25:55, 30:70] = rng.integers(180, 255, (30, 40, 3), dtype=np.uint8)
    first = run("grabcut", img, box=[20, 15, 80, 65])
    second = run("grabcut", img, box=[20, 15, 80, 65])
    assert np.array_equal(first.image, second.image) and first.data == second.data
    assert first.data["rect"] == [20, 15, 80, 65]
    assert abs(first.data["foreground_pixels"] - 1200) < 150
    assert first.data["foreground_bbox"] == pytest.approx([30, 25, 70, 55], abs=2)
    assert (first.image[5, 5] == 0).all() and (first.image[40, 50] == img[40, 50]).all()
    assert run("grabcut", img).data["rect"] == [10, 8, 90, 72]  # 'center' preset: 10% margins
    assert "box" in error("grabcut", img, box=[0, 0, 100, 80])
    assert "box" in error("grabcut", img, box=[10, 10, 200, 20])


def test_flood_fill_semantics():
    img = np.zeros((20, 30, 3), np.uint8)
    img[:, 15:] = 100
    img[5:10, 5:10] = 5  # within lo/up 10 of the seed's 0
    for device in ("opencv", "cpu"):
        result = run("flood_fill", img, device, x=2, y=2, color=[255, 0, 0])
        assert result.data["filled_pixels"] == 20 * 15 and result.data["bbox"] == [0, 0, 15, 20]
        assert (result.image[:, :15] == [255, 0, 0]).all() and (result.image[:, 15:] == 100).all()
    # floating range: a ramp of steps of 3 is crossed with lo=up=3 but not from a fixed seed
    ramp = np.tile(np.arange(0, 90, 3, dtype=np.uint8), (5, 1))
    for device in ("opencv", "cpu"):
        assert run("flood_fill", ramp, device, x=0, y=0, lo_diff=[3, 3, 3], up_diff=[3, 3, 3], fixed_range=False).data["filled_pixels"] == ramp.size
        assert run("flood_fill", ramp, device, x=0, y=0, lo_diff=[3, 3, 3], up_diff=[3, 3, 3]).data["filled_pixels"] == 10
    assert "'x'" in error("flood_fill", img, x=30, y=0)
    assert "'y'" in error("flood_fill", img, x=0, y=20)


def test_keypoints_methods_exist_and_find_corners():
    assert hasattr(cv2, "SIFT_create") and hasattr(cv2, "ORB_create")
    board = np.kron((np.indices((6, 8)).sum(0) % 2).astype(np.uint8) * 255, np.ones((20, 20), np.uint8))
    board = cv2.copyMakeBorder(board, 20, 20, 20, 20, cv2.BORDER_CONSTANT, value=128)
    for method in A._KEYPOINT_METHODS:
        data = run("keypoints", demo_image(120, 160, seed=3), method=method, max_points=10).data
        assert data["method"] == method and 1 <= data["returned_points"] <= 10, method
        responses = [p["response"] for p in data["points"]]
        assert responses == sorted(responses, reverse=True)
    harris = run("keypoints", board, method="harris", max_points=1000).data["points"]
    # interior checkerboard corners lie on the 20-pixel grid
    near_grid = [p for p in harris if min(p["x"] % 20, 20 - p["x"] % 20) <= 1 and min(p["y"] % 20, 20 - p["y"] % 20) <= 1]
    assert len(near_grid) >= 0.9 * len(harris) and len(harris) >= 35


def test_inpaint_box_and_masks():
    img = np.full((40, 40, 3), 120, np.uint8)
    img[15:20, 15:20] = 255
    result = run("inpaint", img, mask="box", box=[14, 14, 21, 21])
    assert result.data["mask_pixels"] == 49
    assert np.abs(result.image.astype(int) - 120).max() <= 2
    assert run("inpaint", img, mask="bright", threshold=200).data["mask_pixels"] == 25
    assert run("inpaint", img, mask="dark", threshold=120).data["mask_pixels"] == 0
    assert run("inpaint", img, mask="dark", threshold=121).data["mask_pixels"] == 40 * 40 - 25
    assert "box" in error("inpaint", img, mask="box")
    assert "box" in error("inpaint", img, mask="canny", box=[0, 0, 5, 5])


def test_measure_distance_angle_and_scale():
    img = np.zeros((100, 100, 3), np.uint8)
    data = run("measure", img, points=[10, 50, 40, 10]).data  # dx 30, dy -40 (up-right)
    assert data["length_px"] == 50.0 and data["dx"] == 30 and data["dy"] == -40
    assert data["angle"] == pytest.approx(math.degrees(math.atan2(40, 30)), abs=0.01)  # 53.13: up and right
    down_left = run("measure", img, points=[50, 50, 40, 60]).data
    assert down_left["angle"] == pytest.approx(-135) and down_left["orientation"] == pytest.approx(45)
    scaled = run("measure", img, points=[0, 0, 0, 60], scale_bar=[10, 90, 30, 90], scale_bar_length=5, unit="mm").data
    assert scaled["pixels_per_unit"] == 4 and scaled["length"] == 15 and scaled["unit"] == "mm"
    assert run("measure", img, points=[0, 0, 30, 40], pixels_per_unit=10).data["length"] == 5
    assert "points" in error("measure", img, points=[0, 0, 500, 10])
    assert "scale_bar_length" in error("measure", img, points=[0, 0, 5, 5], scale_bar=[0, 0, 5, 0])
    assert "pixels_per_unit" in error("measure", img, points=[0, 0, 5, 5], scale_bar=[0, 0, 5, 0], scale_bar_length=1, pixels_per_unit=2)


def test_template_larger_than_image_is_rejected():
    img = demo_image(20, 20)
    assert "template" in error("template_match", img, template=demo_image(30, 10))


def test_validation_names_parameter():
    img = demo_image(48, 64)
    assert "connectivity" in error("connected_components", img, connectivity=6)
    assert "binarize" in error("contours", img, binarize="sobel")
    assert "method" in error("keypoints", img, method="surf")
    assert "max_contours" in error("contours", img, max_contours=0)
