"""Tool sets: what a model sees. A tool set exposes published tool names and parameters, and each tool
runs in one of two ways.

- `translate`: the call becomes steps on the shared ops. `ToolSet.translate(name, arguments)` validates
  a model's call against the published parameters and returns an `Invocation`: the op steps to run and
  which image(s) they read, as workspace indices (0 = the original, each tool image appends, negative
  counts from the end) that the agent runtime resolves. `execute` runs many invocations together,
  batching step k of every invocation into one executor call: on a GPU this is where batching lives.
- `run`: the tool reproduces a benchmark's own tool code, whose pixels, accept/reject verdicts and
  reply text are the contract (VTC-Bench). `Tool.run(arguments, files)` runs the reference's OpenCV
  calls on CPU, one call at a time, reading and writing images through `ImageFiles`, and returns the
  `Reply` the benchmark's tool would give.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from tools.executor import Executor, ToolCall, ToolResult
from tools.registry import Param, ToolArgumentError, ToolError, UnknownToolError, bind_args, function_schema, get_op

ORIGINAL = 0
LATEST = -1


@dataclass(frozen=True)
class Step:
    op: str
    args: dict


@dataclass(frozen=True)
class Invocation:
    tool: str
    steps: tuple[Step, ...]
    image: Any = LATEST  # what the first step reads
    # op parameter of kind "image" -> image reference, e.g. {"template": 2}
    extra_images: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """A tool's reply exactly as the benchmark's tool writes it. `error` marks a failed call for our
    metrics only; the text is all the model sees."""

    text: str
    error: bool = False


class ImageFiles(Protocol):
    """The episode's images as the files a path-passing tool reads and writes."""

    original: str  # absolute path of the task's first image (error hints name it)

    def read(self, path: str) -> np.ndarray:
        """The image at `path`, as the file decodes: RGB uint8 (H, W, 3), or (H, W) where the workspace
        holds a gray image. FileNotFoundError for anything the episode does not have as a file."""

    def save(self, image: np.ndarray) -> str:
        """Add an RGB uint8 image to the episode; its absolute path."""


@dataclass(frozen=True)
class Tool:
    """A published tool: exactly one of `translate` (op steps) and `run` (the benchmark's code)."""

    name: str
    schema: dict  # OpenAI function format, exactly as the model sees it
    translate: Callable[[dict], Invocation] | None = None
    run: Callable[[dict | str, ImageFiles], Reply] | None = None

    def __post_init__(self):
        if (self.translate is None) == (self.run is None):
            raise ValueError(f"tool {self.name!r} needs exactly one of translate and run")


@dataclass(frozen=True)
class ToolSet:
    name: str
    doc: str
    tools: tuple[Tool, ...]
    # The benchmark's own reply to a tool name it does not define; None: an UnknownToolError.
    unknown: Callable[[str], Reply] | None = None

    def schemas(self) -> list[dict]:
        return [tool.schema for tool in self.tools]

    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    def tool(self, name: str) -> Tool:
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise UnknownToolError(f"unknown tool {name!r} in tool set {self.name!r}; available: {', '.join(self.names())}")

    def translate(self, name: str, arguments: dict | str) -> Invocation:
        """A model's call (arguments as a dict or a JSON string) as op steps, or a ToolError naming the problem."""
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as err:
                raise ToolArgumentError(name, None, f"arguments are not valid JSON ({err.msg} at position {err.pos})") from None
        tool = self.tool(name)
        if tool.translate is None:
            raise ToolError(f"{name} runs the benchmark's own code: call it with ToolSet.run")
        return tool.translate(arguments)

    def runs(self, name: str) -> bool:
        """Whether a call of `name` goes through `run`: a tool with its own code, or a name this set
        answers itself because the benchmark has a reply for unknown tools."""
        if name not in self.names():
            return self.unknown is not None
        return self.tool(name).run is not None

    def run(self, name: str, arguments: dict | str, files: ImageFiles) -> Reply:
        """A call of a tool that runs the benchmark's code (arguments as a dict or a JSON string), or of
        a name the set does not define where the benchmark answers those itself: the reply the model sees."""
        if name not in self.names() and self.unknown is not None:
            return self.unknown(name)
        tool = self.tool(name)
        if tool.run is None:
            raise ToolError(f"{name} is made of op steps: call it with ToolSet.translate")
        return tool.run(arguments, files)


def flat_tool(
    name: str,
    doc: str,
    params: tuple[Param, ...],
    steps: Callable[[dict], list[Step]],
    image: Callable[[dict], Any] = lambda args: LATEST,
    schema: dict | None = None,
) -> Tool:
    """A tool whose arguments are a flat JSON object (OpenAI function style). `schema` replaces the one
    generated from `params` where a published schema must be shown word for word."""

    def translate(arguments: dict) -> Invocation:
        bound = bind_args(name, params, arguments)
        return Invocation(name, tuple(steps(bound)), image(bound))

    return Tool(name, schema or function_schema(name, doc, params), translate=translate)


def op_step(op: str, /, **args) -> Step:
    """A step on a registered op; arguments are validated when the step runs."""
    get_op(op)  # fail at import time if a tool set names an op that does not exist
    return Step(op, args)


def execute(executor: Executor, jobs: Sequence[tuple[Invocation, Any]], resolve: Callable[[Any], Any] | None = None) -> list[ToolResult]:
    """Run `(invocation, image)` jobs; `resolve` turns extra image references into images.

    Each step reads the previous step's image; data dicts of all steps are merged. A failing step ends
    its invocation with that error; the other invocations go on.
    """
    current = [image for _, image in jobs]
    produced: list[Any] = [None] * len(jobs)  # the latest image a step made, per job
    # An invocation without steps (e.g. a zero rotation) gives its input back unchanged.
    results = [ToolResult() if inv.steps else _unchanged(executor, image) for inv, image in jobs]
    pending = [i for i, (inv, _) in enumerate(jobs) if inv.steps]
    depth = 0
    while pending:
        calls = []
        for i in pending:
            invocation = jobs[i][0]
            step = invocation.steps[depth]
            args = dict(step.args)
            for param, ref in invocation.extra_images.items():
                if param in {p.name for p in get_op(step.op).params}:
                    args[param] = resolve(ref) if resolve else ref
            calls.append(ToolCall(step.op, current[i], args))
        outs = executor.run(calls)
        still = []
        for i, out in zip(pending, outs):
            merged = {**(results[i].data or {}), **(out.data or {})} or None
            if not out.ok:
                results[i] = ToolResult(error=out.error)
                continue
            if out.image is not None:
                current[i] = produced[i] = out.image
            results[i] = ToolResult(image=produced[i], data=merged)
            if depth + 1 < len(jobs[i][0].steps):
                still.append(i)
        pending, depth = still, depth + 1
    return results


def _unchanged(executor: Executor, image) -> ToolResult:
    try:
        return ToolResult(image=executor.load(image))
    except Exception as err:  # noqa: BLE001 - an unreadable image is that job's error, not the batch's
        return ToolResult(error=str(err))
