"""The executor's fast paths agree with the full checks: `Param.validate` with `Param.coerce`, `Op.bind`
with the parameter-by-parameter check, and `to_array`'s pass-through with the general conversion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tools import REGISTRY, Executor, ToolCall
from tools.images import DEFAULT_MAX_PIXELS, _from_numpy, to_array
from tools.registry import Param, ToolArgumentError

PARAMS = {(p.kind, p.low, p.high, p.choices, p.length): p for op in REGISTRY.values() for p in op.params}
EDGES = [
    0, 1, -1, 3, 5, 4.0, 4.5, -0.0, 1e300, -1e300, 2**53, 2**53 + 1, -(2**53) - 1, 10**400, float("nan"),
    float("inf"), float("-inf"), True, False, None, np.int64(3), np.float64(2.5), np.float32(2.5), np.bool_(True),
    "3", "linear", "gaussian", "binary", "", [], (), [1, 2, 3, 4], (1.5, 2, 3, 4), [1, 2, 3], [0, 0, 0],
    [255, 255, 255], [1, 2, float("nan"), 4], [float("nan"), 2, 3, 4], [1, 2, 10**400, 4], [True, 1, 2, 3],
    [1, "2", 3, 4], [np.int64(1), 2, 3, 4], [1.0, 2.0, 3.0, 4.0, 5.0], [-1, 256, 3], {"a": 1},
]


def _outcome(fn, *args):
    try:
        value = fn(*args)
    except Exception as err:  # noqa: BLE001 - the kind and the words of the error are what is compared
        return "error", type(err), str(err)
    return "value", type(value), repr(value), [type(v) for v in value] if isinstance(value, tuple) else None


def test_validate_agrees_with_coerce_on_edge_values():
    for p in PARAMS.values():
        for value in EDGES + list(p.choices):
            assert _outcome(p.validate, "t", value) == _outcome(p.coerce, "t", value), (p, value)


def test_validate_bounds_at_the_fast_path_limit():
    p = Param("x", "float", "doc", low=-(2**60), high=2**60)
    for value in (2**53, 2**53 + 1, 2**60, 2**60 + 1, -(2**53) - 1, 2.0**54):
        assert _outcome(p.validate, "t", value) == _outcome(p.coerce, "t", value), value


def test_bind_reports_the_first_problem_in_parameter_order():
    op = REGISTRY["rotate"]
    for args in ({"direction": "up"}, {"interpolation": "x", "angle": "y"}, {"fill": 3, "angle": True},
                 {"nope": 1, "angle": "x"}, {"angle": 30, "expand": 1, "direction": 2}, {"angle": 30, "nope": None}):
        with pytest.raises(ToolArgumentError) as reversed_order:
            op.bind(dict(reversed(list(args.items()))))
        with pytest.raises(ToolArgumentError) as given_order:
            op.bind(args)
        assert str(reversed_order.value) == str(given_order.value)
        if args == {"angle": 30, "nope": None}:  # null stands for a default, not for an unknown name
            assert "'nope': is not a parameter of this tool" in str(given_order.value)
    with pytest.raises(ToolArgumentError, match="must be a string, got 2"):
        op.bind({"angle": 30, "expand": 1, "direction": 2})
    assert list(op.bind({"fill": [1, 2, 3], "angle": 30})) == [p.name for p in op.params]


def test_uint8_arrays_pass_through_and_the_rest_convert_as_before():
    rgb = np.zeros((4, 5, 3), np.uint8)
    assert to_array(rgb) is rgb and to_array(rgb[:, :, 0]).base is rgb
    for image in (np.zeros((4, 5, 1), np.uint8), np.zeros((4, 5, 4), np.uint8), np.ones((4, 5), np.float32),
                  np.zeros((4, 5, 3), np.uint8).astype(np.dtype(np.uint8, metadata={"a": 1}))):
        np.testing.assert_array_equal(to_array(image), _from_numpy(image, DEFAULT_MAX_PIXELS))
    with pytest.raises(Exception, match="over the limit"):
        to_array(rgb, max_pixels=19)


def test_a_bad_call_does_not_stop_the_valid_ones():
    image = np.full((8, 8, 3), 200, np.uint8)
    calls = [ToolCall("threshold", image, {"value": 100}), ToolCall("threshold", image, {"value": math.nan}),
             ToolCall("nope", image), ToolCall("crop", image, {"box": [0, 0, 4, 4], "scale": 2.0})]
    results = Executor(device="opencv").run(calls)
    assert [r.ok for r in results] == [True, False, False, True]
    assert "finite" in results[1].error and "unknown op" in results[2].error
    assert results[0].data["nonzero_ratio"] == 1.0 and results[3].image.shape == (8, 8, 3)


def test_results_keep_call_order_when_the_check_ahead_fills(monkeypatch):
    import tools.executor

    images = [np.full((6, 5, 3), 40 * k, np.uint8) for k in range(5)]
    calls = [ToolCall("threshold", im, {"value": 100}) for im in images]
    calls.insert(2, ToolCall("threshold", images[0], {"value": -1}))
    expected = Executor(device="opencv").run(calls)
    monkeypatch.setattr(tools.executor, "CHECK_AHEAD_BYTES", 1)  # run after every call
    got = Executor(device="opencv").run(calls)
    assert [(r.error, r.data) for r in got] == [(r.error, r.data) for r in expected]
    assert [r.data["nonzero_ratio"] for r in got if r.ok] == [0.0, 0.0, 0.0, 1.0, 1.0]
