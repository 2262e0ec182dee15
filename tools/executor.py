"""Run many tool calls at once: batched torch launches on a GPU, the OpenCV reference on a CPU.

Device policy (`Executor(device=...)`):
- "auto" (default): the batched torch/kornia path on CUDA when a GPU is present; otherwise the OpenCV
  path, because on a CPU OpenCV is 7-100x faster than the batched torch versions (docs/benchmarks.md).
- "opencv": always the OpenCV reference, one image at a time.
- "cpu", "cuda", "cuda:1": the batched torch path on that device ("cpu" is for testing that path).
On a torch path, ops without a torch version (`cpu_only`) run through OpenCV on the host.

Calls are grouped by op, image shape and the arguments that must agree within a launch (see
`Op.vectorized`); each group is one launch. Results come back in call order, and a bad call becomes a
`ToolResult` with `error` set, never an exception that fails the other calls.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tools.images import DEFAULT_MAX_PIXELS, check_pixels, to_array
from tools.registry import Op, ToolError, get_op

CHECK_AHEAD_BYTES = 16 << 20  # input images the OpenCV path holds between checking calls and running them


@dataclass
class ToolCall:
    op: str
    image: Any
    args: dict = field(default_factory=dict)


@dataclass
class ToolResult:
    image: Any = None  # numpy uint8 (H, W[, 3]), or a (C, H, W) tensor with output="tensor"
    data: dict | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def resolve_device(device: str = "auto") -> str:
    """The backend a device policy means: "opencv" or a torch device string ("cpu", "cuda", "cuda:N")."""
    if device == "opencv":
        return "opencv"
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "opencv"
    try:
        parsed = torch.device(device)
    except RuntimeError as err:
        raise ToolError(f"unknown device {device!r} ({err}); use 'auto', 'opencv', 'cpu' or 'cuda[:N]'") from None
    if parsed.type not in ("cpu", "cuda"):
        raise ToolError(f"device {device!r} is not supported (some torch ops compute in float64); use 'auto', 'opencv', 'cpu' or 'cuda[:N]'")
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ToolError(f"device {device!r} was asked for but CUDA is not available; use device='auto'")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ToolError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


class Executor:
    def __init__(self, device: str = "auto", max_pixels: int = DEFAULT_MAX_PIXELS, output: str = "numpy"):
        if output not in ("numpy", "tensor"):
            raise ValueError(f"output must be 'numpy' or 'tensor', got {output!r}")
        self.device = resolve_device(device)
        self.max_pixels = max_pixels
        self.output = output
        self.host_fallbacks = 0  # calls run on the host because the device ran out of memory

    def run(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        if self.device == "opencv":
            return self._run_opencv(calls)
        return self._run_batched(calls)

    def load(self, image):
        """`image` converted as tool inputs are, in this executor's output format (numpy, or a tensor)."""
        array = to_array(image, self.max_pixels)
        return _array_to_tensor(array, "cpu" if self.device == "opencv" else self.device) if self.output == "tensor" else array

    # -- OpenCV path: one image at a time, minimal overhead -------------------------------------------
    def _run_opencv(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Calls are checked ahead, then the valid ones run (`_run_checked`): two tight loops instead of one
        alternating between Python and OpenCV, which on small images costs about 0.5 us more per call. At
        most CHECK_AHEAD_BYTES of input images wait, so converted inputs (files, PIL images) never pile up.
        The steps of `_prepare` and `_finish_opencv` are written out for host images, for the same reason."""
        max_pixels = self.max_pixels
        results: list[ToolResult | None] = [None] * len(calls)
        checked, held = [], 0
        for i, call in enumerate(calls):
            try:
                op = get_op(call.op)
                args = op.bind(call.args)
                image = to_array(call.image, max_pixels)
                for name in op.image_params:
                    args[name] = to_array(args[name], max_pixels)
                height, width = image.shape[:2]
                if op.check is not None:
                    op.check(args, height, width)
                if op.output_size is not None:
                    out_h, out_w = op.output_size(args, height, width)
                    check_pixels(out_w, out_h, max_pixels)
                checked.append((i, op, args, image))
                held += image.nbytes
            except Exception as err:  # noqa: BLE001 - one bad call must not fail the batch
                results[i] = ToolResult(error=_describe(call.op, err))
            if held >= CHECK_AHEAD_BYTES:
                self._run_checked(checked, results)
                checked, held = [], 0
        self._run_checked(checked, results)
        return results  # type: ignore[return-value]

    def _run_checked(self, checked: list, results: list) -> None:
        tensors = self.output == "tensor"
        for i, op, args, image in checked:
            try:
                out = op.opencv(image, **args)
                result = ToolResult(*out) if isinstance(out, tuple) else ToolResult(out)
                if tensors and result.image is not None:
                    result.image = _array_to_tensor(result.image, "cpu")
            except Exception as err:  # noqa: BLE001
                result = ToolResult(error=_describe(op.name, err))
            results[i] = result

    def _prepare(self, call: ToolCall):
        """Validated (op, args, image, (height, width)) for the torch path, where images stay on the device."""
        op = get_op(call.op)
        args = op.bind(call.args)
        image = self._host_or_device(call.image)
        for name in op.image_params:
            args[name] = _as_device_chw(self._host_or_device(args[name]), self.device)
        _, height, width = _chw_shape(image)
        if op.check is not None:
            op.check(args, height, width)
        if op.output_size is not None:
            out_h, out_w = op.output_size(args, height, width)
            check_pixels(out_w, out_h, self.max_pixels)
        return op, args, image, (height, width)

    def _finish_opencv(self, op: Op, args: dict, image: np.ndarray) -> ToolResult:
        out = op.opencv(image, **args)
        result = ToolResult(*out) if isinstance(out, tuple) else ToolResult(out)
        if self.output == "tensor" and result.image is not None:
            result.image = _array_to_tensor(result.image, self.device if self.device != "opencv" else "cpu")
        return result

    # -- torch path: group compatible calls, one launch per group ----------------------------------------
    def _run_batched(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        results: list[ToolResult | None] = [None] * len(calls)
        groups: dict[tuple, list[tuple[int, dict, Any]]] = {}
        for i, call in enumerate(calls):
            try:
                op, args, image, (height, width) = self._prepare(call)
            except Exception as err:  # noqa: BLE001
                results[i] = ToolResult(error=_describe(call.op, err))
                continue
            if op.cpu_only:
                results[i] = self._cpu_fallback(op, args, image)
                continue
            fixed = tuple(sorted((k, _key(v)) for k, v in args.items() if k not in op.vectorized))
            extra = op.batch_key(args, height, width) if op.batch_key else None
            key = (op.name, _chw_shape(image), isinstance(image, np.ndarray), fixed, extra)
            groups.setdefault(key, []).append((i, args, image))

        for (name, *_), members in groups.items():
            op = get_op(name)
            try:
                outs = self._launch_or_host(op, members)
            except Exception:  # noqa: BLE001 - isolate the failing call(s) by running them one by one
                outs = []
                for member in members:
                    try:
                        outs.extend(self._launch_or_host(op, [member]))
                    except Exception as err:  # noqa: BLE001
                        outs.append(ToolResult(error=_describe(name, err)))
            for (i, _, _), out in zip(members, outs):
                results[i] = out
        return results  # type: ignore[return-value]

    def _launch_or_host(self, op: Op, members) -> list[ToolResult]:
        """One launch; one the device has no memory for runs on the host instead (`_out_of_memory`)."""
        try:
            return self._launch(op, members)
        except Exception as err:  # noqa: BLE001
            if not _out_of_memory_error(err):
                raise
        # out of the except block: the traceback no longer holds the launch's tensors when the cache is freed
        return self._out_of_memory(op, members)

    def _out_of_memory(self, op: Op, members) -> list[ToolResult]:
        """A launch the device had no memory for (in evaluation the GPU is shared with the model's engine):
        the calls run through the OpenCV reference on the host instead, counted in `host_fallbacks`, and the
        device's cached blocks go back. The model gets the tool's result, not an error it did not cause."""
        import torch

        torch.cuda.empty_cache()
        if not self.host_fallbacks:
            warnings.warn(f"tool op {op.name!r}: {len(members)} call(s) ran out of memory on {self.device} and ran "
                          "through OpenCV on the host instead (same results, slower); so will any later launch that "
                          "runs out. The GPU is shared: leave the tools more of it (a lower vLLM "
                          "--gpu_memory_utilization)", RuntimeWarning, stacklevel=5)
        self.host_fallbacks += len(members)
        return [self._cpu_fallback(op, args, image) for _, args, image in members]

    def _launch(self, op: Op, members) -> list[ToolResult]:
        batch = self._stack([image for _, _, image in members])
        first = members[0][1]
        kwargs = {k: ([args[k] for _, args, _ in members] if k in op.vectorized else v) for k, v in first.items()}
        out = op.torch(batch, **kwargs)
        images, data = out if isinstance(out, tuple) else (out, None)
        if images is not None and not isinstance(images, (list, tuple)):
            images = self._export(images) if self.output == "numpy" else list(images)
        elif images is not None:
            images = [self._export(img[None])[0] if self.output == "numpy" else img for img in images]
        return [ToolResult(images[k] if images is not None else None, data[k] if data is not None else None) for k in range(len(members))]

    def _stack(self, images):
        """One (N, C, H, W) uint8 batch on the device; host images cross in a single transfer."""
        import torch

        if isinstance(images[0], np.ndarray):
            host = torch.from_numpy(np.stack(images))
            host = host[..., None] if host.ndim == 3 else host
            return host.to(self.device, non_blocking=True).permute(0, 3, 1, 2).contiguous()
        return torch.stack(images)

    def _cpu_fallback(self, op: Op, args: dict, image) -> ToolResult:
        host = {k: (_to_array(v) if p.kind == "image" else v) for (k, v), p in zip(args.items(), op.params)}
        try:
            return self._finish_opencv(op, host, _to_array(image))
        except Exception as err:  # noqa: BLE001
            return ToolResult(error=_describe(op.name, err))

    def _host_or_device(self, image):
        """A (C, H, W) uint8 tensor on the device stays as it is; anything else becomes a host numpy image."""
        import torch

        if isinstance(image, torch.Tensor) and image.dtype == torch.uint8 and image.ndim == 3 and image.shape[0] in (1, 3):
            check_pixels(image.shape[-1], image.shape[-2], self.max_pixels)
            return image.to(self.device, non_blocking=True)
        return to_array(image, self.max_pixels)

    @staticmethod
    def _export(batch) -> list[np.ndarray]:
        """(N, C, H, W) tensor to N numpy images, with one device-to-host copy."""
        host = batch.permute(0, 2, 3, 1).contiguous().cpu().numpy()
        return [img[:, :, 0] if img.shape[2] == 1 else img for img in host]


def _out_of_memory_error(err: Exception) -> bool:
    """The device ran out of memory: torch's own error, or one a CUDA library raised as a RuntimeError
    ("CUDA error: out of memory", cuBLAS / cuDNN allocation failures)."""
    import torch

    text = str(err).lower()
    return isinstance(err, torch.OutOfMemoryError) or isinstance(err, RuntimeError) and (
        "out of memory" in text or "alloc_failed" in text)


def _array_to_tensor(image: np.ndarray, device: str):
    import torch

    chw = torch.from_numpy(np.ascontiguousarray(image[None] if image.ndim == 2 else image.transpose(2, 0, 1)))
    return chw.to(device, non_blocking=True)


def _as_device_chw(image, device: str):
    return _array_to_tensor(image, device) if isinstance(image, np.ndarray) else image


def _to_array(image) -> np.ndarray:
    if isinstance(image, np.ndarray):
        return image
    host = image.detach().cpu().numpy()
    return host[0] if host.shape[0] == 1 else np.ascontiguousarray(host.transpose(1, 2, 0))


def _chw_shape(image) -> tuple[int, int, int]:
    if isinstance(image, np.ndarray):
        return (1 if image.ndim == 2 else image.shape[2], image.shape[0], image.shape[1])
    return tuple(image.shape)


def _key(value):
    if isinstance(value, (int, float, str, bool, tuple, type(None))):
        return value
    return id(value)  # images and other unhashable values: only the same object batches together


def _describe(op: str, err: Exception) -> str:
    if isinstance(err, ToolError):
        return str(err)
    return f"{op} failed: {type(err).__name__}: {err}"
