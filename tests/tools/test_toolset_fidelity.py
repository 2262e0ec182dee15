"""Every tool of every published tool set runs end to end, and the semantics each benchmark's reference
implementation defines (rotation direction, color order, box units, bounds) hold. VTC-Bench's and Agentic-MME's
tools are checked case by case against the benchmark's own code in test_vtc_bench_reference.py and
test_agentic_mme_reference.py."""

import json

import cv2
import numpy as np
import pytest

from tests.tools.helpers import MemoryFiles
from tools import Executor
from tools.images import demo_image, to_array
from tools.toolset import execute
from tools.toolsets import TOOLSETS

IMAGE = demo_image(48, 64, seed=11)
PATH, TEMPLATE_PATH = "/task/image.png", "/task/template.png"
VTC_EXAMPLES = {
    "opencv_resize": {"width": 40, "height": 30}, "opencv_rotate": {"angle": 30}, "opencv_translate": {"direction": "left", "distance": 5},
    "opencv_flip": {"direction": "vertical"}, "opencv_crop": {"x": 5, "y": 5, "width": 20, "height": 10},
    "opencv_zoom_in": {"x": 5, "y": 5, "width": 20, "height": 10, "scale": 2}, "opencv_pyramid": {"mode": "pyr_down"},
    "opencv_colorspace_gray": {}, "opencv_colorspace_hsv": {}, "opencv_colorspace_lab": {},
    "opencv_inrange_color": {"lower": [0, 50, 50], "upper": [10, 255, 255]}, "opencv_blur": {"method": "median", "ksize": 4},
    "opencv_denoise": {"h": 80, "template_window": 40}, "opencv_threshold": {"mode": "adaptive_mean", "adaptive_block_size": 12},
    "opencv_morphology": {"op": "close", "kernel_size": 4}, "opencv_histogram": {"mode": "clahe", "color_mode": "hsv"},
    "opencv_convertscaleabs": {"alpha": 1.5, "beta": -20}, "opencv_inpaint": {"preset": "threshold", "threshold_value": 200},
    "opencv_gradients": {"mode": "laplacian"}, "opencv_canny": {"threshold_low": 200, "threshold_high": 50},
    "opencv_contours": {"mode": "list"}, "opencv_contour_area": {"rank": 2}, "opencv_arc_length": {},
    "opencv_approx_poly": {"epsilon_ratio": 0.05}, "opencv_connected_components_with_stats": {"threshold_mode": "binary"},
    "opencv_hough_lines": {"threshold": 10, "minLineLength": 5}, "opencv_hough_circles": {"minRadius": 3, "param2": 10},
    "opencv_watershed": {}, "opencv_grabcut": {"preset": "tight"}, "opencv_floodfill": {"x": 3, "y": 3, "newVal": [0, 0, 255]},
    "opencv_features": {"method": "fast"}, "opencv_template_match": {"template_path": TEMPLATE_PATH}, "opencv_dft": {},
    "opencv_draw_line": {"x1": 0, "y1": 10, "x2": 63, "y2": 10, "color": [255, 0, 0]},
    "opencv_draw_circle": {"x": 30, "y": 20, "radius": 8, "thickness": -1},
}
AGENTIC_EXAMPLES = {
    "crop": {"bbox_2d": [250, 250, 750, 750], "zoom_scale": 2}, "rotate": {"angle": 30}, "flip": {"direction": "tb"},
    "resize": {"scale": 0.5}, "grayscale": {}, "autocontrast": {"cutoff": 2}, "invert": {}, "equalize": {},
    "threshold": {"value": 100, "mode": "tozero"}, "blur": {"radius": 3}, "sharpen": {}, "denoise": {"strength": 5},
    "edge_detect": {"method": "sobel"}, "enhance": {"brightness": 1.2, "contrast": 0.8, "sharpness": 2.0},
}
AGENTIC_ORIGINAL = "/episode/image_0.png"
VTB_EXAMPLES = {
    "crop_image": {"box": [10, 10, 40, 30]}, "rotate_image": {"angle": 15}, "adjust_brightness": {"factor": 1.5},
    "adjust_contrast": {"factor": 0.5}, "adjust_saturation": {"factor": 0}, "adjust_sharpness": {"factor": 2},
    "resize_image": {"width": 32}, "flip_image": {"direction": "vertical"}, "convert_to_grayscale": {},
    "apply_filter": {"filter": "emboss"},
}


def run(toolset, name, arguments, image=IMAGE):
    invocation = TOOLSETS[toolset].translate(name, arguments)
    (result,) = execute(Executor("opencv"), [(invocation, image)], resolve=to_array)
    return invocation, result


def agentic(name, arguments):
    """An Agentic-MME call on a one-image episode holding IMAGE: the reply and the image it added, if any."""
    files = MemoryFiles({AGENTIC_ORIGINAL: IMAGE}, original=AGENTIC_ORIGINAL)
    reply = TOOLSETS["agentic_mme"].run(name, arguments, files)
    return reply, files.saved[0] if files.saved else None


def vtc(name, param):
    """A VTC-Bench call on IMAGE (at PATH): the reply and the image it saved, if any."""
    files = MemoryFiles({PATH: IMAGE, TEMPLATE_PATH: IMAGE[10:20, 15:30]}, original=PATH)
    reply = TOOLSETS["vtc_bench"].run(name, {"image": PATH, "param": param}, files)
    return reply, files.saved[0] if files.saved else None


@pytest.mark.parametrize("toolset,examples", [("visualtoolbench", VTB_EXAMPLES)])
def test_every_tool_runs(toolset, examples):
    assert sorted(examples) == sorted(TOOLSETS[toolset].names()), "every tool needs an example here"
    for name, param in examples.items():
        invocation, result = run(toolset, name, {"image_index": 0, **param})
        assert result.ok, f"{toolset}.{name}: {result.error}"
        assert result.image is not None or result.data, f"{toolset}.{name} produced nothing"


def test_every_vtc_tool_runs_and_replies_with_the_saved_path():
    assert sorted(VTC_EXAMPLES) == sorted(TOOLSETS["vtc_bench"].names()), "every tool needs an example here"
    for name, param in VTC_EXAMPLES.items():
        reply, image = vtc(name, param)
        assert not reply.error, f"{name}: {reply.text}"
        assert image is not None and image.dtype == np.uint8 and image.shape[2] == 3, name
        assert reply.text.endswith("\n\nEdited Image Path: /episode/image_2.png"), reply.text


def test_vtc_rotate_is_clockwise_about_w2_h2_with_integer_angle():
    _, rotated = vtc("opencv_rotate", {"angle": 90.9})
    quarter = np.rot90(IMAGE, -1)  # clockwise; the pivot (w/2, h/2) moves it one pixel right
    assert rotated.shape == quarter.shape
    np.testing.assert_array_equal(rotated[:, 1:], quarter[:, :-1])
    assert not rotated[:, 0].any()
    reply, same = vtc("opencv_rotate", {"angle": 0.5})
    assert reply.text.startswith("No rotation applied (angle=0).")  # int(0.5) == 0: the input, saved again
    np.testing.assert_array_equal(same, IMAGE)


def test_vtc_colors_are_bgr():
    _, drawn = vtc("opencv_draw_line", {"x1": 0, "y1": 10, "x2": 63, "y2": 10, "color": [255, 0, 0], "thickness": 1})
    assert tuple(drawn[10, 30]) == (0, 0, 255)  # BGR blue is RGB (0, 0, 255)


def test_vtc_crop_rejects_regions_outside_the_image():
    reply, nothing = vtc("opencv_crop", {"x": 50, "y": 0, "width": 20, "height": 10})
    assert reply.error and nothing is None
    assert reply.text.startswith("Failed to run OpenCV operation 'crop':\nCrop region exceeds image bounds. Image size: 64x48")
    _, cropped = vtc("opencv_crop", {"x": 50, "y": 0, "width": 14, "height": 10})
    np.testing.assert_array_equal(cropped, IMAGE[0:10, 50:64])


def test_every_agentic_tool_runs_and_replies_with_the_reference_fields():
    assert sorted(AGENTIC_EXAMPLES) == sorted(TOOLSETS["agentic_mme"].names()), "every tool needs an example here"
    for name, param in AGENTIC_EXAMPLES.items():
        reply, image = agentic(name, {"image_index": 0, **param})
        assert not reply.error, f"{name}: {reply.text}"
        out = json.loads(reply.text)
        assert image is not None and image.dtype == np.uint8 and image.shape[2] == 3, name
        assert (out["ok"], out["op"], out["source_image_index"], out["new_image_index"]) == ("true", name, 0, 1), out
        assert out["output_path"] == "/episode/tool_images/transformed_image_1.png" and out["label"] == ""
        assert out["size"] == [image.shape[1], image.shape[0]], name


def test_agentic_rotate_is_counterclockwise_and_nearest():
    _, turned = agentic("rotate", {"image_index": 0, "angle": 90})
    np.testing.assert_array_equal(turned, np.rot90(IMAGE, 1))
    _, turned30 = agentic("rotate", {"image_index": 0, "angle": 30, "expand": False})
    assert turned30.shape == IMAGE.shape
    assert set(np.unique(turned30)) <= set(np.unique(IMAGE)) | {0}  # nearest neighbour invents no new values
    reply, _ = agentic("rotate", {"image_index": 0, "angle": 30, "expand": "false"})
    assert json.loads(reply.text)["expand"] is True  # bool() of any non-empty string


def test_agentic_crop_clamps():
    reply, clamped = agentic("crop", {"image_index": 0, "bbox_2d": [750, 750, 1500, -20]})
    np.testing.assert_array_equal(clamped, IMAGE[0:36, 48:64])  # swapped, truncated, clamped
    assert json.loads(reply.text)["bbox_absolute"] == [48, 0, 64, 36]


def test_agentic_crop_is_normalized_and_zoom_only_above_one():
    _, cropped = agentic("crop", {"image_index": 0, "bbox_2d": [250, 250, 750, 750], "zoom_scale": 0.5})
    np.testing.assert_array_equal(cropped, IMAGE[12:36, 16:48])
    _, zoomed = agentic("crop", {"image_index": 0, "bbox_2d": [250, 250, 750, 750], "zoom_scale": 2})
    assert zoomed.shape == (48, 64, 3)
    _, whole = agentic("crop", {"image_index": 0})  # no box: the whole image
    np.testing.assert_array_equal(whole, IMAGE)


def test_agentic_enhance_without_factors_returns_the_image_unchanged():
    reply, same = agentic("enhance", {"image_index": 0})
    assert not reply.error
    np.testing.assert_array_equal(same, IMAGE)


def test_vtc_hsv_is_shown_as_its_file_shows_it():
    _, shown = vtc("opencv_colorspace_hsv", {})
    np.testing.assert_array_equal(shown, cv2.cvtColor(IMAGE, cv2.COLOR_RGB2HSV)[:, :, ::-1])  # saved as if it were BGR


def test_vtc_template_path_is_read_from_the_episode_files():
    reply, boxed = vtc("opencv_template_match", {"template_path": TEMPLATE_PATH, "method": "ccoeff"})
    assert '"top_left": {"x": 15, "y": 10}' in reply.text and boxed is not None
    reply, _ = vtc("opencv_template_match", {"template_path": "/elsewhere/t.png"})
    assert reply.error and "Unable to load image from input: /elsewhere/t.png..." in reply.text
    assert reply.text.endswith(f"Set the 'image' parameter to: {PATH}")


def test_published_argument_errors_name_the_parameter():
    reply, _ = vtc("opencv_resize", {"width": 9, "height": 9, "preset": "triple"})
    assert reply.error and "resize preset must be one of: half, double." in reply.text
    reply = TOOLSETS["vtc_bench"].run("opencv_flip", {"param": {}}, MemoryFiles({}))
    assert reply.error and reply.text.startswith("An error occurred when calling tool `opencv_flip`:\n"
                                                 "ValidationError: 'image' is a required property")
    reply, nothing = agentic("invert", {"image_index": -1})
    assert reply.error and nothing is None
    assert reply.text == '{"ok": "false", "error": "Invalid image_index -1. Valid range: 0-0"}'
