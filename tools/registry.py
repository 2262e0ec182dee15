"""The op registry: every image operation with its parameters and its two implementations.

An `Op` is one operation with
- `opencv(image, **args)`: the reference on one uint8 numpy image (OpenCV semantics are the spec);
- `torch(batch, **args)`: the batched version on a uint8 tensor (N, C, H, W) on any device, or None
  when no practical torch version exists (then `cpu_only` is True and the executor uses `opencv`);
- `params`: typed, ranged parameters that produce the JSON schema and validate arguments.

Images are RGB (3 channels) or gray (1 channel), uint8. Implementations return an image, or a tuple
`(image_or_None, data)` where `data` is a JSON-serializable dict (the torch version returns one dict
per sample).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable


class _Required:
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()  # the default of a parameter the caller must give


class ToolError(ValueError):
    """A tool call that cannot run; the message says what is wrong and what is allowed."""


class ToolArgumentError(ToolError):
    def __init__(self, op: str, param: str | None, message: str):
        self.op, self.param = op, param
        where = f"{op}: parameter '{param}'" if param else op
        super().__init__(f"{where}: {message}")


class UnknownToolError(ToolError):
    pass


_KINDS = ("int", "float", "bool", "str", "ints", "floats", "image")
_SCHEMA_TYPE = {"int": "integer", "float": "number", "bool": "boolean", "str": "string"}


@dataclass(frozen=True)
class Param:
    """One parameter. `kind` is int, float, bool, str, ints or floats (fixed-length lists), or image."""

    name: str
    kind: str
    doc: str
    default: Any = REQUIRED
    low: float | None = None
    high: float | None = None
    choices: tuple = ()
    length: int | None = None

    # validate(op, value): `value` coerced to this parameter's kind, or a ToolArgumentError naming it. Built
    # once from the fields (see `_validator`): it runs for every argument of every tool call.
    validate: Callable[[str, Any], Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"unknown parameter kind {self.kind!r}; use one of {_KINDS}")
        object.__setattr__(self, "validate", _validator(self))

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def schema(self) -> dict:
        if self.kind == "image":
            prop = {"type": "string", "description": self.doc}
        elif self.kind in ("ints", "floats"):
            item = {"type": "integer" if self.kind == "ints" else "number"}
            _add_range(item, self.low, self.high)
            prop = {"type": "array", "items": item, "description": self.doc}
            if self.length is not None:
                prop["minItems"] = prop["maxItems"] = self.length
        else:
            prop = {"type": _SCHEMA_TYPE[self.kind], "description": self.doc}
            _add_range(prop, self.low, self.high)
        if self.choices:
            prop["enum"] = list(self.choices)
        if not self.required and self.default is not None:
            prop["default"] = list(self.default) if isinstance(self.default, tuple) else self.default
        return prop

    def coerce(self, op: str, value: Any) -> Any:
        """Coerce `value` to this parameter's kind or raise a ToolArgumentError naming it: every rule, read
        from the fields on each call. `validate` is the same check, quicker on the usual values."""
        kind = self.kind
        if kind == "image":
            return value
        if kind in ("ints", "floats"):
            if not isinstance(value, (list, tuple)):
                raise ToolArgumentError(op, self.name, f"must be a list of {self._noun()}, got {_show(value)}")
            if self.length is not None and len(value) != self.length:
                raise ToolArgumentError(op, self.name, f"must have exactly {self.length} numbers, got {len(value)}")
            return tuple(self._scalar(op, v, "int" if kind == "ints" else "float") for v in value)
        if kind == "bool":
            if not isinstance(value, bool):
                raise ToolArgumentError(op, self.name, f"must be true or false, got {_show(value)}")
            return value
        if kind == "str":
            if not isinstance(value, str):
                raise ToolArgumentError(op, self.name, f"must be a string, got {_show(value)}")
            if self.choices and value not in self.choices:
                allowed = ", ".join(repr(c) for c in self.choices)
                raise ToolArgumentError(op, self.name, f"must be one of {allowed}, got {value!r}")
            return value
        value = self._scalar(op, value, kind)
        if self.choices and value not in self.choices:
            raise ToolArgumentError(op, self.name, f"must be one of {list(self.choices)}, got {value}")
        return value

    def _scalar(self, op: str, value: Any, kind: str):
        # bool is an int subclass in Python but never a number in a tool call.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ToolArgumentError(op, self.name, f"must be {self._noun()}, got {_show(value)}")
        if not math.isfinite(value):
            raise ToolArgumentError(op, self.name, f"must be a finite number, got {value}")
        if kind == "int":
            if value != int(value):
                raise ToolArgumentError(op, self.name, f"must be an integer, got {value}")
            value = int(value)
        else:
            value = float(value)
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ToolArgumentError(op, self.name, f"must be in {self._range()}, got {value:g}")
        return value

    def _noun(self) -> str:
        return {"int": "an integer", "float": "a number", "ints": "integers", "floats": "numbers"}[self.kind]

    def _range(self) -> str:
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"[{low}, {high}]"


_EXACT = 2**53  # integers up to this size convert to float and back exactly


def _validator(p: Param) -> Callable[[str, Any], Any]:
    """`p.coerce` with the usual valid values (an exact bool, str, int or float in range and among the
    choices; a list of numbers) accepted by a few inline tests made from the fields once. Anything else,
    every error included, goes to `p.coerce`, so what is accepted, the value and the messages are the same.
    Numbers stay on the inline path only within +-2^53: there int -> float is exact, and NaN and the
    infinities fail the range test."""
    kind, coerce, allowed = p.kind, p.coerce, frozenset(p.choices)
    lo = -_EXACT if p.low is None else max(p.low, -_EXACT)
    hi = _EXACT if p.high is None else min(p.high, _EXACT)
    if kind == "image":
        return coerce
    if kind == "bool":
        return lambda op, value: value if value is True or value is False else coerce(op, value)
    if kind == "str":
        if allowed:
            return lambda op, value: value if type(value) is str and value in allowed else coerce(op, value)
        return lambda op, value: value if type(value) is str else coerce(op, value)
    integer = kind in ("int", "ints")
    types = frozenset((int,) if integer else (int, float))  # exact types: no bools, no numpy scalars
    if kind in ("int", "float"):
        def validate_number(op, value):
            if type(value) in types and lo <= value <= hi and (not allowed or value in allowed):
                return value if integer else float(value)
            return coerce(op, value)

        return validate_number
    length = p.length

    def validate_list(op, value):
        if (type(value) is list or type(value) is tuple) and (length is None or len(value) == length):
            for item in value:
                if not (type(item) in types and lo <= item <= hi):
                    break
            else:
                return tuple(value) if integer else tuple(map(float, value))
        return coerce(op, value)

    return validate_list


def _add_range(prop: dict, low, high) -> None:
    if low is not None:
        prop["minimum"] = low
    if high is not None:
        prop["maximum"] = high


def _show(value: Any) -> str:
    text = repr(value)
    return f"{text[:60]}... ({type(value).__name__})" if len(text) > 60 else f"{text} ({type(value).__name__})"


@dataclass(frozen=True)
class Tolerance:
    """How closely the torch version must agree with the OpenCV reference on one image.

    Images agree when the share of pixels differing by more than `pixel` is at most `outliers`, and the
    mean absolute difference is at most `mean`. Exact agreement is Tolerance() (all zeros).
    """

    pixel: int = 0
    outliers: float = 0.0
    mean: float = 0.0
    why: str = "exact"


EXACT = Tolerance()


@dataclass(frozen=True)
class Op:
    name: str
    doc: str
    params: tuple[Param, ...]
    opencv: Callable
    torch: Callable | None = None
    # Parameters that may differ between calls batched into one launch; the torch version receives them
    # as lists (one value per image). All other arguments must be equal within a batch.
    vectorized: tuple[str, ...] = ()
    # Extra grouping key, for outputs whose size depends on arguments: (args, height, width) -> hashable.
    batch_key: Callable | None = None
    # Checks that need the image size, e.g. a box inside the image: (args, height, width) -> None.
    check: Callable | None = None
    # For ops that can grow an image: (args, height, width) -> (out_height, out_width); the executor
    # rejects outputs over its max_pixels before running anything.
    output_size: Callable | None = None
    tolerance: Tolerance = EXACT
    # Argument sets the parity tests run (and the docs show); every one must be valid on a 64x48 image.
    examples: tuple[dict, ...] = ({},)
    category: str = "misc"

    # bind(args): validated arguments with defaults filled in, or a ToolArgumentError naming the problem
    # (`bind_args`, made once for this op by `binder`).
    bind: Callable[[dict], dict] = field(init=False, repr=False, compare=False)
    # The names of the parameters that take an image, which the executor converts like the input image.
    image_params: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "bind", binder(self.name, self.params))
        object.__setattr__(self, "image_params", tuple(p.name for p in self.params if p.kind == "image"))

    @property
    def cpu_only(self) -> bool:
        return self.torch is None

    def schema(self) -> dict:
        """The OpenAI function-calling schema for this op's own parameters."""
        return function_schema(self.name, self.doc, self.params)


def bind_args(name: str, params: tuple[Param, ...], args: dict) -> dict:
    """Check `args` against `params`: unknown, missing, mistyped and out-of-range values are errors.
    An explicit null for an optional parameter means its default (models often write one)."""
    return binder(name, params)(args)


def binder(name: str, params: tuple[Param, ...]) -> Callable[[dict], dict]:
    """`bind_args` for one tool, with the defaults and the per-parameter checks looked up once."""
    defaults = {p.name: p.default for p in params}  # in parameter order, which the bound arguments keep
    validators = {p.name: p.validate for p in params}
    required = tuple(p.name for p in params if p.required)

    def check_in_order(args: dict) -> dict:
        """Parameter by parameter: the first problem reported is the same whatever the order of `args`."""
        if not isinstance(args, dict):
            raise ToolArgumentError(name, None, f"arguments must be a JSON object, got {_show(args)}")
        for key in args:
            if key not in defaults:
                known = ", ".join(defaults) or "none"
                raise ToolArgumentError(name, key, f"is not a parameter of this tool (parameters: {known})")
        bound = {}
        for p in params:
            if args.get(p.name) is not None:
                bound[p.name] = p.validate(name, args[p.name])
            elif p.required:
                raise ToolArgumentError(name, p.name, "is required")
            else:
                bound[p.name] = p.default
        return bound

    def bind(args: dict) -> dict:
        # Only the given arguments are visited; any problem is reported by check_in_order.
        if type(args) is dict:
            bound = defaults.copy()
            try:
                for key, value in args.items():
                    validate = validators[key]  # an unknown name, even with a null value: the ordered check says so
                    if value is not None:
                        bound[key] = validate(name, value)
            except Exception:  # noqa: BLE001 - an unknown name or a bad value: the ordered check says which
                pass
            else:
                for key in required:
                    if bound[key] is REQUIRED:
                        return check_in_order(args)
                return bound
        return check_in_order(args)

    return bind


def function_schema(name: str, doc: str, params) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": doc,
            "parameters": {
                "type": "object",
                "properties": {p.name: p.schema() for p in params},
                "required": [p.name for p in params if p.required],
            },
        },
    }


REGISTRY: dict[str, Op] = {}


def register(op: Op) -> Op:
    if op.name in REGISTRY:
        raise ValueError(f"op {op.name!r} is registered twice")
    unknown = set(op.vectorized) - {p.name for p in op.params}
    if unknown:
        raise ValueError(f"op {op.name!r}: vectorized names unknown parameters {sorted(unknown)}")
    REGISTRY[op.name] = op
    return op


def get_op(name: str) -> Op:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownToolError(f"unknown op {name!r}; known ops: {', '.join(sorted(REGISTRY))}") from None
