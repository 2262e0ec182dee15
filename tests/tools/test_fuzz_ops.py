"""Property tests: any in-range arguments to any op either run or give a clear ToolError (never an
unexpected exception), and the torch path agrees with the OpenCV reference within the op's tolerance;
any JSON arguments to any published tool become an invocation or a clear error (VTC-Bench's tools: the
benchmark's reply text), never a crash."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tools.helpers import MemoryFiles
from tools import REGISTRY, Executor, ToolCall
from tools.images import demo_image, to_array
from tools.registry import REQUIRED, ToolError
from tools.toolset import execute
from tools.toolsets import TOOLSETS

IMAGES = {"rgb": demo_image(24, 32, seed=5), "gray": demo_image(24, 32, seed=6, gray=True)}
TEMPLATE = demo_image(24, 32, seed=5)[4:12, 6:18]


def _bounded(p, default_low, default_high):
    low = p.low if p.low is not None else default_low
    high = p.high if p.high is not None else default_high
    return max(low, default_low), min(high, default_high)


def value(p):
    if p.choices:
        return st.sampled_from(p.choices)
    if p.kind == "bool":
        return st.booleans()
    if p.kind == "str":
        return st.text(max_size=12)
    if p.kind == "image":
        return st.just(TEMPLATE)
    # Keep magnitudes modest: huge-but-valid values are covered by the size limits, not by speed.
    low, high = _bounded(p, -300, 300)
    element = (st.integers(int(np.ceil(low)), int(np.floor(high))) if p.kind in ("int", "ints")
               else st.floats(low, high, allow_nan=False, allow_infinity=False))
    if p.kind in ("ints", "floats"):
        size = p.length if p.length is not None else None
        return st.lists(element, min_size=size or 2, max_size=size or 8)
    return element


def arguments(op):
    fields = {}
    for p in op.params:
        strategy = value(p)
        fields[p.name] = strategy if p.default is REQUIRED else st.one_of(st.none(), strategy)
    return st.fixed_dictionaries(fields).map(lambda d: {k: v for k, v in d.items() if v is not None})


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_any_arguments_run_or_fail_clearly(name):
    op = REGISTRY[name]
    reference, batched = Executor("opencv"), Executor("cpu")

    @settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(args=arguments(op), kind=st.sampled_from(sorted(IMAGES)))
    def check(args, kind):
        call = ToolCall(name, IMAGES[kind], args)
        (ref,) = reference.run([call])
        assert ref.ok or not ref.error.startswith(f"{name} failed:"), ref.error
        if ref.ok:
            json.dumps(ref.data)
        if op.cpu_only:
            return
        (got,) = batched.run([call])
        assert got.ok == ref.ok, (ref.error, got.error)
        if ref.ok and ref.image is not None:
            assert got.image.shape == ref.image.shape
            diff = np.abs(got.image.astype(int) - ref.image.astype(int))
            tol = op.tolerance
            assert (diff > tol.pixel).mean() <= max(tol.outliers, 0.0) + 1e-9 or diff.mean() <= tol.mean, (args, tol)

    check()


JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2000, 2000), st.floats(-2000, 2000, allow_nan=False),
    st.text(max_size=8), st.lists(st.integers(-50, 1200), max_size=5), st.lists(st.floats(-50, 1200), max_size=5),
)


def typed(prop: dict):
    """Values of the JSON type a published schema property declares (integers often small: image indices)."""
    if "enum" in prop:
        return st.sampled_from(prop["enum"])
    kind = prop.get("type")
    if kind == "integer":
        return st.integers(0, 3) | st.integers(-20, 1200)
    if kind == "number":
        return st.floats(-20, 1200, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        size = prop.get("minItems", 2)
        return st.lists(st.floats(-20, 1200, allow_nan=False) | st.integers(0, 255), min_size=size, max_size=prop.get("maxItems", size + 3))
    return st.text(max_size=8)


@pytest.mark.parametrize("toolset_name", sorted(TOOLSETS))
def test_any_json_arguments_to_a_published_tool_fail_clearly(toolset_name):
    toolset = TOOLSETS[toolset_name]
    path = "/fuzz/image.png"
    executor = Executor("opencv")

    def properties(tool):
        props = dict(tool.schema["function"]["parameters"]["properties"])
        props.update(props.pop("param", {}).get("properties", {}))  # VTC-Bench nests its arguments in `param`
        props.pop("image", None)
        return props

    @settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def check(data):
        tool = data.draw(st.sampled_from(toolset.tools))
        # Mostly well-typed values (so calls get past validation and run), sometimes anything at all.
        args = {name: data.draw(st.one_of(typed(prop), typed(prop), typed(prop), JSON_VALUES))
                for name, prop in properties(tool).items() if name in ("image_index", "bbox_2d") or data.draw(st.booleans())}
        if data.draw(st.booleans()):
            args["junk"] = data.draw(JSON_VALUES)
        if tool.run is not None:  # VTC-Bench: its own code answers every call with text, never an exception
            files = MemoryFiles({path: IMAGES["rgb"]}, original=path)
            reply = toolset.run(tool.name, {"image": path, "param": args}, files)
            assert reply.text and len(files.saved) == (0 if reply.error else 1), reply.text
            return
        try:
            invocation = toolset.translate(tool.name, args)
        except ToolError:
            return
        (result,) = execute(executor, [(invocation, IMAGES["rgb"])], resolve=to_array)
        assert result.ok or " failed: " not in result.error, result.error

    check()
