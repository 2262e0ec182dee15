"""Tool sets: the default set mirrors the registry, translate() parses and validates model calls, tools
that run a benchmark's own code go through run(), the DeepEyes and TIR-Bench reconstructions keep their
published semantics, and execute() runs multi-step invocations with per-job error isolation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.tools.helpers import MemoryFiles, registered
from tools import REGISTRY, Executor
from tools.images import demo_image
from tools.registry import Op, Param, ToolArgumentError, ToolError, UnknownToolError
from tools.toolset import LATEST, ORIGINAL, Invocation, Reply, Step, Tool, execute
from tools.toolsets import TOOLSETS, get_toolset

DEFAULT = TOOLSETS["default"]
DEEPEYES = TOOLSETS["deepeyes"]
TIR = TOOLSETS["tir_rotate"]
IMG = demo_image(48, 64, seed=31)          # 64 wide, 48 high
BIG = demo_image(160, 200, seed=32)        # 200 wide, 160 high
DEVICES = ["opencv", "cpu"]


def run_one(toolset, name, arguments, image, device="opencv"):
    invocation = toolset.translate(name, arguments)
    (result,) = execute(Executor(device), [(invocation, image)])
    return invocation, result


# -- default ---------------------------------------------------------------------------------------------------
def test_default_covers_every_registry_op():
    registry_ops = {name for name in REGISTRY if not name.startswith("_test")}
    assert set(DEFAULT.names()) == registry_ops


@pytest.mark.parametrize("name", sorted(n for n in REGISTRY if not n.startswith("_test")))
def test_default_tool_mirrors_op(name):
    op = REGISTRY[name]
    fn = DEFAULT.tool(name).schema["function"]
    assert fn["name"] == name and fn["description"] == op.doc
    props = fn["parameters"]["properties"]
    index = props["image_index"]
    assert index["type"] == "integer" and index["default"] == -1 and index["minimum"] <= -1 and index["maximum"] >= 1
    assert "image_index" not in fn["parameters"]["required"]
    for p in op.params:
        if p.kind == "image":
            assert props[f"{p.name}_index"]["type"] == "integer" and p.name not in props
            assert f"{p.name}_index" in fn["parameters"]["required"]
        else:
            assert props[p.name] == p.schema()
            assert (p.name in fn["parameters"]["required"]) == p.required


@pytest.mark.parametrize("name", sorted(n for n in REGISTRY if not n.startswith("_test")))
def test_default_translates_every_example(name):
    op = REGISTRY[name]
    image_params = [p.name for p in op.params if p.kind == "image"]
    assert op.examples, f"{name} has no examples to translate"
    for example in op.examples:
        arguments = {k: v for k, v in example.items() if k not in image_params}
        arguments.update({f"{p}_index": 1 for p in image_params})
        inv = DEFAULT.translate(name, json.dumps(arguments))
        assert inv.tool == name and inv.image == LATEST
        assert inv.extra_images == {p: 1 for p in image_params}
        (step,) = inv.steps
        assert step.op == name
        expected = {k: v for k, v in op.bind(example).items() if k not in image_params and v is not None}
        assert {k: v for k, v in op.bind({**step.args, **{p: example[p] for p in image_params}}).items()
                if k not in image_params and v is not None} == expected
        assert DEFAULT.translate(name, {**arguments, "image_index": 0}).image == ORIGINAL


def test_translate_dict_and_json_string_agree():
    args = {"angle": 30, "direction": "clockwise", "image_index": 2}
    a = DEFAULT.translate("rotate", args)
    b = DEFAULT.translate("rotate", json.dumps(args))
    assert a == b
    assert a.image == 2 and a.steps[0].op == "rotate" and a.steps[0].args["angle"] == 30.0
    assert a.steps[0].args["direction"] == "clockwise"
    # whitespace-only JSON means "no arguments"
    assert DEFAULT.translate("flip", "  ") == DEFAULT.translate("flip", {})


@pytest.mark.parametrize("text", ['{"angle": 30', "angle=30", "{'angle': 30}", '{"angle": 30,}'])
def test_bad_json_is_an_argument_error(text):
    with pytest.raises(ToolArgumentError) as info:
        DEFAULT.translate("rotate", text)
    assert "JSON" in str(info.value) and "rotate" in str(info.value)


@pytest.mark.parametrize("text", ["[30]", "30", '"angle"', "null"])
def test_json_that_is_not_an_object_is_rejected(text):
    with pytest.raises(ToolArgumentError, match="object"):
        DEFAULT.translate("rotate", text)


def test_translate_validates_arguments():
    with pytest.raises(ToolArgumentError, match=r"rotate: parameter 'angle'.*number"):
        DEFAULT.translate("rotate", {"angle": "thirty"})
    with pytest.raises(ToolArgumentError, match=r"rotate: parameter 'angle'.*required"):
        DEFAULT.translate("rotate", {})
    with pytest.raises(ToolArgumentError, match=r"'image_index'.*\[-1000, 1000\]"):
        DEFAULT.translate("rotate", {"angle": 3, "image_index": 5000})


@pytest.mark.parametrize("toolset", sorted(TOOLSETS))
def test_unknown_tool_lists_available_tools(toolset):
    ts = TOOLSETS[toolset]
    with pytest.raises(UnknownToolError) as info:
        ts.translate("no_such_tool", {})
    text = str(info.value)
    assert "no_such_tool" in text and toolset in text
    for name in ts.names():
        assert name in text


def test_unknown_toolset():
    with pytest.raises(UnknownToolError) as info:
        get_toolset("nope")
    for name in TOOLSETS:
        assert name in str(info.value)


# -- tools that run a benchmark's own code ------------------------------------------------------------------------
VTC = TOOLSETS["vtc_bench"]


def test_a_tool_runs_one_way():
    with pytest.raises(ValueError, match="exactly one"):
        Tool("neither", {})
    with pytest.raises(ValueError, match="exactly one"):
        Tool("both", {}, translate=lambda arguments: None, run=lambda arguments, files: Reply(""))


def test_run_and_translate_each_take_their_own_tools():
    assert VTC.runs("opencv_flip") and not DEFAULT.runs("flip")
    with pytest.raises(ToolError, match="ToolSet.run"):
        VTC.translate("opencv_flip", {"image": "x"})
    with pytest.raises(ToolError, match="ToolSet.translate"):
        DEFAULT.run("flip", {}, MemoryFiles({}))


def test_unknown_names_get_the_benchmarks_own_reply_where_it_has_one():
    assert VTC.runs("no_such_tool") and not DEFAULT.runs("no_such_tool")
    assert VTC.run("no_such_tool", {}, MemoryFiles({})) == Reply("Tool no_such_tool does not exists.", error=True)
    with pytest.raises(UnknownToolError, match="no_such_tool"):
        DEFAULT.run("no_such_tool", {}, MemoryFiles({}))


def test_agentic_mme_runs_its_own_code_and_leaves_unknown_names_to_its_suite():
    """Agentic-MME's runner answers unknown names in its search branch, which the benchmark's suite provides."""
    amme = TOOLSETS["agentic_mme"]
    assert all(amme.runs(name) for name in amme.names()) and not amme.runs("no_such_tool")
    with pytest.raises(ToolError, match="ToolSet.run"):
        amme.translate("crop", {"image_index": 0, "bbox_2d": [0, 0, 1000, 1000]})
    with pytest.raises(UnknownToolError, match="no_such_tool"):
        amme.run("no_such_tool", {}, MemoryFiles({}))


# -- deepeyes: image_zoom_in_tool ------------------------------------------------------------------------------
def test_deepeyes_schema_is_the_published_one():
    (schema,) = DEEPEYES.schemas()
    fn = schema["function"]
    assert fn["name"] == "image_zoom_in_tool"
    assert set(fn["parameters"]["properties"]) == {"bbox_2d", "label"}
    assert fn["parameters"]["required"] == ["bbox"]  # DeepEyes' own typo, kept on purpose


def test_deepeyes_reads_the_original_image():
    inv = DEEPEYES.translate("image_zoom_in_tool", {"bbox_2d": [5, 6, 40, 40]})
    assert inv.image == ORIGINAL == 0
    (step,) = inv.steps
    assert step.op == "crop" and step.args["units"] == "pixels" and step.args["bounds"] == "clamp"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bbox, rows, cols", [
    ([5, 6, 40, 40], (6, 40), (5, 40)),          # inside: exact slice
    ([40, 40, 5, 6], (6, 40), (5, 40)),          # corners in any order
    ([-10, -10, 40, 30], (0, 30), (0, 40)),      # clamped at the top-left
    ([30, 20, 100, 100], (20, 48), (30, 64)),    # clamped at the bottom-right
    ([5.7, 6.2, 40.9, 40.1], (6, 40), (5, 40)),  # fractions truncate
    ([-50, -50, 500, 500], (0, 48), (0, 64)),    # bigger than the image: the whole image
])
def test_deepeyes_crop_pixels(device, bbox, rows, cols):
    inv, res = run_one(DEEPEYES, "image_zoom_in_tool", {"bbox_2d": bbox}, IMG, device)
    assert res.ok, res.error
    np.testing.assert_array_equal(res.image, IMG[rows[0]:rows[1], cols[0]:cols[1]])


@pytest.mark.parametrize("device", DEVICES)
def test_deepeyes_tiny_box_grows_keeping_aspect(device):
    # a 10x5 box centred at (105, 102.5) becomes 56x28 (shorter side 28, aspect 2 kept), same centre
    inv, res = run_one(DEEPEYES, "image_zoom_in_tool", {"bbox_2d": [100, 100, 110, 105]}, BIG, device)
    assert res.ok, res.error
    assert res.image.shape == (28, 56, 3)
    np.testing.assert_array_equal(res.image, BIG[88:116, 77:133])
    # a 2x2 box becomes 28x28 around its centre
    inv, res = run_one(DEEPEYES, "image_zoom_in_tool", {"bbox_2d": [50, 50, 52, 52]}, BIG, device)
    np.testing.assert_array_equal(res.image, BIG[37:65, 37:65])


@pytest.mark.parametrize("device", DEVICES)
def test_deepeyes_tiny_box_at_the_edge_stays_inside(device):
    inv, res = run_one(DEEPEYES, "image_zoom_in_tool", {"bbox_2d": [0, 0, 5, 5]}, BIG, device)
    np.testing.assert_array_equal(res.image, BIG[0:28, 0:28])
    inv, res = run_one(DEEPEYES, "image_zoom_in_tool", {"bbox_2d": [195, 155, 200, 160]}, BIG, device)
    np.testing.assert_array_equal(res.image, BIG[132:160, 172:200])


def test_deepeyes_rejects_elongated_boxes():
    with pytest.raises(ToolArgumentError) as info:
        DEEPEYES.translate("image_zoom_in_tool", {"bbox_2d": [0, 0, 505, 5]})  # aspect 101
    text = str(info.value)
    assert "image_zoom_in_tool" in text and "'bbox_2d'" in text and "aspect" in text and "100" in text
    with pytest.raises(ToolArgumentError, match="aspect"):
        DEEPEYES.translate("image_zoom_in_tool", {"bbox_2d": [0, 0, 3, 400]})  # tall
    DEEPEYES.translate("image_zoom_in_tool", {"bbox_2d": [0, 0, 500, 5]})  # exactly 100 is allowed


def test_deepeyes_label_is_accepted_and_ignored():
    a = DEEPEYES.translate("image_zoom_in_tool", {"bbox_2d": [1, 2, 40, 41], "label": "the cat"})
    b = DEEPEYES.translate("image_zoom_in_tool", '{"bbox_2d": [1, 2, 40, 41]}')
    assert a.steps == b.steps and a.image == b.image


@pytest.mark.parametrize("arguments, param", [
    ({}, "bbox_2d"),
    ({"bbox": [1, 2, 3, 4]}, "bbox"),
    ({"bbox_2d": [1, 2, 3]}, "bbox_2d"),
    ({"bbox_2d": "1,2,3,4"}, "bbox_2d"),
    ({"bbox_2d": [1, 2, 3, 4], "label": 7}, "label"),
])
def test_deepeyes_bad_arguments(arguments, param):
    with pytest.raises(ToolArgumentError) as info:
        DEEPEYES.translate("image_zoom_in_tool", arguments)
    assert info.value.param == param and "image_zoom_in_tool" in str(info.value)


def test_deepeyes_box_outside_is_an_error_result():
    inv, res = run_one(DEEPEYES, "image_zoom_in_tool", {"bbox_2d": [100, 100, 200, 200]}, IMG)
    assert not res.ok and "zero area" in res.error


# -- tir_rotate ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("degree, k", [(90, -1), (-90, 1), (180, 2), (270, 1), (360, 0), (0, 0)])
def test_tir_rotate_is_clockwise_on_the_original(device, degree, k):
    inv, res = run_one(TIR, "rotate", {"degree": degree}, IMG, device)
    assert inv.image == ORIGINAL
    assert res.ok, res.error
    np.testing.assert_array_equal(res.image, np.rot90(IMG, k))


def test_tir_rotate_90_moves_the_top_left_corner_to_the_top_right():
    inv, res = run_one(TIR, "rotate", '{"degree": 90}', IMG)
    assert res.image.shape == (64, 48, 3)
    np.testing.assert_array_equal(res.image[0, -1], IMG[0, 0])
    np.testing.assert_array_equal(res.image[0, 0], IMG[-1, 0])


def test_tir_rotate_expands_the_canvas():
    inv, res = run_one(TIR, "rotate", {"degree": 30}, IMG)
    h, w = IMG.shape[:2]
    assert res.image.shape[0] > h and res.image.shape[1] > w
    ref = REGISTRY["rotate"]
    np.testing.assert_array_equal(res.image, ref.opencv(IMG, **ref.bind({"angle": 30, "direction": "clockwise"})))


@pytest.mark.parametrize("arguments", [{"degree": 361}, {"degree": "90"}, {}, {"angle": 90}])
def test_tir_rotate_bad_arguments(arguments):
    with pytest.raises(ToolArgumentError, match="rotate"):
        TIR.translate("rotate", arguments)


# -- execute: multi-step invocations -----------------------------------------------------------------------------
class CountingExecutor(Executor):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches = []

    def run(self, calls):
        self.batches.append([c.op for c in calls])
        return super().run(calls)


def _stats(image):
    return None, {"mean": float(image.mean()), "shape": list(image.shape)}


def _maximum(image, other):
    return np.maximum(image, other)


@pytest.fixture
def helper_ops():
    ops = [Op("_test_ts_stats", "Mean of the image.", (), _stats),
           Op("_test_ts_max", "Pixelwise max.", (Param("other", "image", "the other image"),), _maximum)]
    with registered(*ops):
        yield


CROP_FLIP = Invocation("crop_flip", (Step("crop", {"box": [4, 5, 30, 25]}), Step("flip", {"direction": "horizontal"})))


@pytest.mark.parametrize("device", DEVICES)
def test_execute_runs_steps_in_order(device):
    (res,) = execute(Executor(device), [(CROP_FLIP, IMG)])
    assert res.ok, res.error
    np.testing.assert_array_equal(res.image, IMG[5:25, 4:30][:, ::-1])


@pytest.mark.parametrize("device", DEVICES)
def test_execute_isolates_errors_per_job(device):
    other = demo_image(30, 40, seed=33, gray=True)
    jobs = [
        (CROP_FLIP, IMG),
        (Invocation("bad_first", (Step("crop", {"box": [0, 0, 500, 500]}), Step("flip", {}))), IMG),
        (Invocation("bad_second", (Step("crop", {"box": [0, 0, 10, 10]}), Step("flip", {"direction": "sideways"}))), IMG),
        (Invocation("one", (Step("flip", {"direction": "vertical"}),)), other),
        (Invocation("none", ()), other),
        (Invocation("three", (Step("crop", {"box": [1, 1, 21, 29]}), Step("rotate", {"angle": 90}), Step("flip", {"direction": "both"}))), other),
        (CROP_FLIP, other),
    ]
    ex = CountingExecutor(device)
    results = execute(ex, jobs)
    assert [r.ok for r in results] == [True, False, False, True, True, True, True]
    assert "crop" in results[1].error and "box" in results[1].error
    assert "flip" in results[2].error and "sideways" in results[2].error
    assert results[1].image is None and results[2].image is None
    np.testing.assert_array_equal(results[0].image, IMG[5:25, 4:30][:, ::-1])
    np.testing.assert_array_equal(results[3].image, other[::-1])
    np.testing.assert_array_equal(results[4].image, other)  # no steps: the image unchanged
    np.testing.assert_array_equal(results[5].image, np.rot90(other[1:29, 1:21], 1)[::-1, ::-1])
    np.testing.assert_array_equal(results[6].image, other[5:25, 4:30][:, ::-1])
    # step k of every pending invocation runs in one executor call; a failed job stops early
    assert ex.batches == [
        ["crop", "crop", "crop", "flip", "crop", "crop"],
        ["flip", "flip", "rotate", "flip"],
        ["flip"],
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_execute_merges_data_and_keeps_the_last_image(helper_ops, device):
    inv = Invocation("crop_stats", (Step("crop", {"box": [0, 0, 10, 8]}), Step("_test_ts_stats", {})))
    (res,) = execute(Executor(device), [(inv, IMG)])
    assert res.ok, res.error
    np.testing.assert_array_equal(res.image, IMG[0:8, 0:10])  # the data-only step keeps the crop
    assert res.data == {"mean": float(IMG[0:8, 0:10].mean()), "shape": [8, 10, 3]}
    only = Invocation("stats", (Step("_test_ts_stats", {}),))
    (res,) = execute(Executor(device), [(only, IMG)])
    assert res.image is None and res.data["shape"] == [48, 64, 3]


@pytest.mark.parametrize("device", DEVICES)
def test_execute_resolves_extra_images(helper_ops, device):
    workspace = [IMG, IMG[::-1].copy(), np.zeros_like(IMG)]
    inv = Invocation("max", (Step("_test_ts_max", {}),), ORIGINAL, {"other": 1})
    resolved = []

    def resolve(ref):
        resolved.append(ref)
        return workspace[ref]

    (res,) = execute(Executor(device), [(inv, workspace[0])], resolve=resolve)
    assert res.ok, res.error
    assert resolved == [1]
    np.testing.assert_array_equal(res.image, np.maximum(IMG, IMG[::-1]))


def test_execute_errors_are_tool_errors_not_exceptions():
    inv = Invocation("nope", (Step("no_such_op", {}),))
    (res,) = execute(Executor("opencv"), [(inv, IMG)])
    assert not res.ok and "no_such_op" in res.error
    with pytest.raises(ToolError):
        DEFAULT.translate("rotate", "{")
