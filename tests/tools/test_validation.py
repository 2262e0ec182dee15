"""Argument validation and schemas, for every op in the registry (ops added later are covered too) and
every tool set.

Negative cases are derived from each op's `Param`s: each must raise a ToolArgumentError whose message
names the op and the parameter, and the allowed range / choices where relevant.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from tools import REGISTRY, Executor, ToolCall
from tools.images import demo_image
from tools.registry import REQUIRED, Op, Param, ToolArgumentError, bind_args
from tools.toolsets import TOOLSETS

OPS = sorted(REGISTRY)
IMAGE_PLACEHOLDER = "image.png"  # what a JSON caller passes for an image parameter


def _params_schema(op: Op) -> dict:
    return op.schema()["function"]["parameters"]


def _base_args(op: Op) -> dict:
    """A valid argument set containing every required parameter: the op's first example."""
    assert op.examples, f"{op.name} has no examples"
    return dict(op.examples[0])


def _fmt_variants(x: float) -> set[str]:
    out = {str(x), format(x, "g")}
    if float(x).is_integer():
        out.add(str(int(x)))
    return out


def _valid_scalar(p: Param, kind: str):
    """An in-range value of a scalar kind ("int" or "float") for `p`, preferring its default."""
    default = p.default
    if p.kind in ("ints", "floats") and isinstance(default, (list, tuple)) and default:
        default = default[0]
    if p.choices:
        return p.choices[0]
    if isinstance(default, (int, float)) and not isinstance(default, bool) and default is not REQUIRED:
        return int(default) if kind == "int" else float(default)
    value = 3
    if p.low is not None:
        value = max(value, math.ceil(p.low))
    if p.high is not None:
        value = min(value, math.floor(p.high))
    return value if kind == "int" else float(value)


def _scalar_kind(p: Param) -> str | None:
    return {"int": "int", "float": "float", "ints": "int", "floats": "float"}.get(p.kind)


def _with_value(p: Param, scalar):
    """`scalar` placed as the value of `p` (as one element of a list for list kinds)."""
    if p.kind in ("ints", "floats"):
        kind = _scalar_kind(p)
        filler = _valid_scalar(p, kind)
        return [scalar] + [filler] * ((p.length or 1) - 1)
    return scalar


# -- negative cases, derived from the Params -------------------------------------------------------------
def _param_cases(op: Op, p: Param):
    """(label, args, substrings the message must contain) for one parameter of `op`."""
    base = _base_args(op)

    def case(label, value, *expect):
        return label, {**base, p.name: value}, expect

    kind = p.kind
    if kind in ("int", "float"):
        noun = "integer" if kind == "int" else "number"
        yield case("string", "5", noun)
        yield case("list", [1], noun)
        if p.required:
            yield case("none", None)
    elif kind == "str":
        yield case("number", 5, "string")
        yield case("list", ["a"], "string")
        if p.choices:
            yield case("bad-choice", "definitely-not-a-choice", *p.choices)
    elif kind == "bool":
        yield case("string", "true", "true or false")
        yield case("int", 1, "true or false")
    elif kind in ("ints", "floats"):
        yield case("scalar", 5, "list")
        yield case("string", "1,2,3,4", "list")
        n = p.length
        if n is not None:
            filler = _valid_scalar(p, _scalar_kind(p))
            yield case("too-long", [filler] * (n + 1), str(n))
            if n > 1:
                yield case("too-short", [filler] * (n - 1), str(n))
        yield case("string-item", _with_value(p, "x"))
    sk = _scalar_kind(p)
    if sk is None:
        return
    yield case("bool-true", _with_value(p, True))
    yield case("bool-false", _with_value(p, False))
    yield case("nan", _with_value(p, float("nan")), "finite")
    yield case("inf", _with_value(p, float("inf")), "finite")
    yield case("-inf", _with_value(p, float("-inf")), "finite")
    if p.low is not None:
        yield case("below-low", _with_value(p, (p.low - 1) if sk == "float" else math.ceil(p.low) - 1), ("range", p.low, p.high))
    if p.high is not None:
        yield case("above-high", _with_value(p, (p.high + 1) if sk == "float" else math.floor(p.high) + 1), ("range", p.low, p.high))
    if sk == "int":
        v = _valid_scalar(p, "int")
        frac = v + 0.5 if p.high is None or v + 0.5 <= p.high else v - 0.5
        if (p.low is None or frac >= p.low) and not p.choices:
            yield case("fraction", _with_value(p, frac), "integer")


PARAMS = [pytest.param(n, p.name, id=f"{n}-{p.name}") for n in OPS for p in REGISTRY[n].params if p.kind != "image"]


def _check_message(err: ToolArgumentError, op_name: str, param: str, expect=()):
    text = str(err)
    assert err.op == op_name and err.param == param, (err.op, err.param, text)
    assert op_name in text, text
    assert f"'{param}'" in text, text
    for item in expect:
        if isinstance(item, tuple) and item and item[0] == "range":
            _, low, high = item
            for bound in (low, high):
                if bound is not None:
                    assert any(v in text for v in _fmt_variants(bound)), f"range bound {bound} not named: {text}"
        else:
            assert str(item) in text, f"{item!r} not named: {text}"


@pytest.mark.parametrize("name, param", PARAMS)
def test_bad_argument_is_rejected_naming_op_and_param(name, param):
    """Wrong types, wrong lengths, bools, NaN/inf, out-of-range and non-integral values for one parameter."""
    op = REGISTRY[name]
    p = next(q for q in op.params if q.name == param)
    cases = list(_param_cases(op, p))
    assert cases
    failures = []
    for label, args, expect in cases:
        try:
            op.bind(args)
        except ToolArgumentError as err:
            try:
                _check_message(err, name, param, expect)
            except AssertionError as bad:
                failures.append(f"{label}: {bad}")
        else:
            failures.append(f"{label}: {args[param]!r} was accepted")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", OPS)
def test_unknown_parameter_is_rejected(name):
    op = REGISTRY[name]
    with pytest.raises(ToolArgumentError) as info:
        op.bind({**_base_args(op), "no_such_param": 1})
    _check_message(info.value, name, "no_such_param")
    for p in op.params:  # the message lists the real parameters
        assert p.name in str(info.value)


@pytest.mark.parametrize("name", OPS)
def test_missing_required_parameter_is_rejected(name):
    op = REGISTRY[name]
    required = [p for p in op.params if p.required]
    if not required:
        assert op.bind({}) == {p.name: p.default for p in op.params}
        return
    for p in required:
        args = {k: v for k, v in _base_args(op).items() if k != p.name}
        with pytest.raises(ToolArgumentError) as info:
            op.bind(args)
        _check_message(info.value, name, p.name, ["required"])


@pytest.mark.parametrize("name", OPS)
def test_arguments_must_be_an_object(name):
    for bad in ([], "angle=3", None, 5):
        with pytest.raises(ToolArgumentError) as info:
            REGISTRY[name].bind(bad)
        assert name in str(info.value) and "object" in str(info.value)


INT_PARAMS = [pytest.param(n, p.name, id=f"{n}-{p.name}") for n in OPS for p in REGISTRY[n].params if p.kind in ("int", "ints")]


@pytest.mark.parametrize("name, param", INT_PARAMS)
def test_integral_float_is_accepted_for_int(name, param):
    op = REGISTRY[name]
    p = next(q for q in op.params if q.name == param)
    v = _valid_scalar(p, "int")
    bound = op.bind({**_base_args(op), param: _with_value(p, float(v))})
    got = bound[param][0] if p.kind == "ints" else bound[param]
    assert got == v and type(got) is int, (got, type(got))


FLOAT_PARAMS = [pytest.param(n, p.name, id=f"{n}-{p.name}") for n in OPS for p in REGISTRY[n].params if p.kind in ("float", "floats")]


@pytest.mark.parametrize("name, param", FLOAT_PARAMS)
def test_int_is_accepted_for_float(name, param):
    op = REGISTRY[name]
    p = next(q for q in op.params if q.name == param)
    v = _valid_scalar(p, "float")
    given = int(v) if float(v).is_integer() else v  # an int where one is in range
    bound = op.bind({**_base_args(op), param: _with_value(p, given)})
    got = bound[param][0] if p.kind == "floats" else bound[param]
    assert got == v and type(got) is float


# -- schemas, docs and examples --------------------------------------------------------------------------
@pytest.mark.parametrize("name", OPS)
def test_op_schema_is_valid_json_schema(name):
    op = REGISTRY[name]
    schema = op.schema()
    assert schema["type"] == "function"
    assert schema["function"]["name"] == name
    params = schema["function"]["parameters"]
    Draft202012Validator.check_schema(params)
    assert params["type"] == "object"
    assert set(params["properties"]) == {p.name for p in op.params}
    assert set(params["required"]) == {p.name for p in op.params if p.required}
    json.dumps(schema)  # serializable as the model will see it


@pytest.mark.parametrize("name", OPS)
def test_op_description_and_param_docs_are_non_empty(name):
    op = REGISTRY[name]
    assert isinstance(op.doc, str) and op.doc.strip(), f"{name}: empty description"
    assert op.schema()["function"]["description"] == op.doc
    for p in op.params:
        assert p.doc.strip(), f"{name}.{p.name}: empty doc"


def _as_json(op: Op, example: dict) -> dict:
    """The example as a JSON caller sends it: image arguments become a reference string."""
    shown = {k: (IMAGE_PLACEHOLDER if any(p.name == k and p.kind == "image" for p in op.params) and not isinstance(v, str) else v)
             for k, v in example.items()}
    return json.loads(json.dumps(shown))


@pytest.mark.parametrize("name", OPS)
def test_examples_match_schema_and_bind(name):
    op = REGISTRY[name]
    validator = Draft202012Validator(_params_schema(op))
    assert op.examples
    for example in op.examples:
        errors = [e.message for e in validator.iter_errors(_as_json(op, example))]
        assert not errors, f"{name} example {example}: {errors}"
        bound = op.bind(example)
        assert set(bound) == {p.name for p in op.params}


# Only parameters that have a default: a None default means "not given", and required ones have none.
DEFAULTED = [(name, p) for name in OPS for p in REGISTRY[name].params
             if not p.required and p.default is not None]


@pytest.mark.parametrize(("name", "p"), DEFAULTED, ids=[f"{name}.{p.name}" for name, p in DEFAULTED])
def test_defaults_are_valid_values(name, p):
    """A parameter's default must itself pass validation and its own schema (else the docs lie)."""
    p.validate(name, p.default)
    value = list(p.default) if isinstance(p.default, tuple) else p.default
    errors = [e.message for e in Draft202012Validator(p.schema()).iter_errors(value)]
    assert not errors, f"{name}.{p.name} default {p.default!r}: {errors}"


@pytest.mark.parametrize("name", OPS)
def test_bad_json_values_rejected_by_schema(name):
    """The schema and bind agree on rejecting a wrong-typed value (one per parameter)."""
    op = REGISTRY[name]
    validator = Draft202012Validator(_params_schema(op))
    base = _as_json(op, _base_args(op))
    for p in op.params:
        bad = {"int": "5", "float": "5", "str": 5, "bool": "true", "ints": 5, "floats": 5, "image": 5}[p.kind]
        assert list(validator.iter_errors({**base, p.name: bad})), f"{name}.{p.name}: schema accepts {bad!r}"
        if p.kind != "image":
            with pytest.raises(ToolArgumentError):
                op.bind({**_base_args(op), p.name: bad})


@pytest.mark.parametrize("name", OPS)
def test_examples_run_on_a_64x48_image(name):
    """The registry promises every example is valid on a 64x48 image (the OpenCV reference runs it)."""
    op = REGISTRY[name]
    image = demo_image(48, 64, seed=3)
    results = Executor("opencv").run([ToolCall(name, image, ex) for ex in op.examples])
    for ex, res in zip(op.examples, results):
        assert res.ok, f"{name}({ex}): {res.error}"
        assert res.image is not None or res.data is not None


# -- specific cases ----------------------------------------------------------------------------------------
IMG = demo_image(48, 64, seed=5)


def test_crop_box_outside_image_with_bounds_error():
    for box in ([0, 0, 65, 10], [-1, 0, 10, 10], [0, 0, 10, 49], [100, 100, 200, 200]):
        res = Executor("opencv").run([ToolCall("crop", IMG, {"box": box, "bounds": "error"})])[0]
        assert not res.ok
        assert "crop" in res.error and "'box'" in res.error and "outside" in res.error
        assert "64x48" in res.error and "x in [0, 64], y in [0, 48]" in res.error, res.error


def test_crop_box_outside_image_direct_check():
    op = REGISTRY["crop"]
    args = op.bind({"box": [0, 0, 65, 10]})
    with pytest.raises(ToolArgumentError) as info:
        op.output_size(args, 48, 64)
    assert info.value.op == "crop" and info.value.param == "box"


@pytest.mark.parametrize("box, bounds", [
    ([10, 10, 10, 20], "error"),       # zero width
    ([10, 10, 20, 10], "error"),       # zero height
    ([10.2, 5, 10.9, 30], "error"),    # zero width after truncation
    ([-20, -20, -5, -5], "clamp"),     # entirely left/above: zero area after clamping
    ([70, 0, 90, 10], "clamp"),        # entirely right of the image
    ([0, 50, 10, 60], "clamp"),        # entirely below
])
@pytest.mark.parametrize("device", ["opencv", "cpu"])
def test_zero_area_crop_is_rejected(box, bounds, device):
    res = Executor(device).run([ToolCall("crop", IMG, {"box": box, "bounds": bounds})])[0]
    assert not res.ok, res.image.shape
    assert "crop" in res.error and "'box'" in res.error and "zero area" in res.error, res.error


def test_clamped_crop_is_clipped_to_the_image():
    res = Executor("opencv").run([ToolCall("crop", IMG, {"box": [-10, -5, 20, 100], "bounds": "clamp"})])[0]
    assert res.ok, res.error
    np.testing.assert_array_equal(res.image, IMG[0:48, 0:20])


@pytest.mark.parametrize("device", ["opencv", "cpu"])
def test_unknown_op_through_executor_names_it(device):
    results = Executor(device).run([ToolCall("no_such_op_xyz", IMG, {}), ToolCall("flip", IMG, {})])
    assert not results[0].ok and "no_such_op_xyz" in results[0].error
    assert "flip" in results[0].error  # the known ops are listed
    assert results[1].ok
    np.testing.assert_array_equal(results[1].image, IMG[:, ::-1])


def test_bool_for_int_param_rejected_specific():
    with pytest.raises(ToolArgumentError, match=r"translate: parameter 'dx'.*integer"):
        REGISTRY["translate"].bind({"dx": True})
    with pytest.raises(ToolArgumentError, match=r"rotate: parameter 'angle'"):
        REGISTRY["rotate"].bind({"angle": False})


def test_integral_float_accepted_specific():
    bound = REGISTRY["translate"].bind({"dx": 3.0, "dy": -2.0})
    assert bound["dx"] == 3 and type(bound["dx"]) is int and bound["dy"] == -2
    with pytest.raises(ToolArgumentError, match="integer"):
        REGISTRY["translate"].bind({"dx": 3.5})


def test_range_message_names_the_range():
    with pytest.raises(ToolArgumentError) as info:
        REGISTRY["rotate"].bind({"angle": 3601})
    assert "[-3600, 3600]" in str(info.value) and "3601" in str(info.value)


def test_choices_message_lists_choices():
    with pytest.raises(ToolArgumentError) as info:
        REGISTRY["flip"].bind({"direction": "diagonal"})
    text = str(info.value)
    assert "'horizontal'" in text and "'vertical'" in text and "'both'" in text and "'diagonal'" in text


def test_bind_fills_defaults_and_coerces_lists():
    bound = REGISTRY["crop"].bind({"box": [1, 2, 3, 4]})
    assert bound["box"] == (1.0, 2.0, 3.0, 4.0) and all(type(v) is float for v in bound["box"])
    assert bound["units"] == "pixels" and bound["bounds"] == "error" and bound["scale"] == 1.0


def test_bind_args_standalone():
    params = (Param("n", "int", "a number", low=0, high=10), Param("s", "str", "a word", "a", choices=("a", "b")))
    assert bind_args("t", params, {"n": 10}) == {"n": 10, "s": "a"}
    with pytest.raises(ToolArgumentError, match=r"t: parameter 'n': must be in \[0, 10\], got 11"):
        bind_args("t", params, {"n": 11})


def test_param_rejects_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        Param("x", "complex", "doc")


# -- tool sets ---------------------------------------------------------------------------------------------
TOOLS = [pytest.param(ts, t.name, id=f"{ts}-{t.name}") for ts in sorted(TOOLSETS) for t in TOOLSETS[ts].tools]


@pytest.mark.parametrize("toolset, tool", TOOLS)
def test_toolset_schema_is_valid(toolset, tool):
    t = TOOLSETS[toolset].tool(tool)
    schema = t.schema
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["name"] == tool and isinstance(fn["name"], str) and fn["name"]
    assert isinstance(fn["description"], str) and fn["description"].strip()
    Draft202012Validator.check_schema(fn["parameters"])
    assert fn["parameters"]["type"] == "object"
    json.dumps(schema)


@pytest.mark.parametrize("toolset", sorted(TOOLSETS))
def test_toolset_names_unique(toolset):
    ts = TOOLSETS[toolset]
    names = ts.names()
    assert names and len(names) == len(set(names)), names
    assert ts.name == toolset and ts.doc.strip()
    assert ts.schemas() == [t.schema for t in ts.tools]


def test_null_for_an_optional_parameter_means_its_default():
    op = REGISTRY["rotate"]
    assert op.bind({"angle": 30, "direction": None, "fill": None}) == op.bind({"angle": 30})
    with pytest.raises(ToolArgumentError, match="'angle': is required"):
        op.bind({"angle": None})
