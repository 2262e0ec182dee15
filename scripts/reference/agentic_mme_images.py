"""Agentic-MME's images as its runners send them: tests/eval/benchmarks/data/agentic_mme_image_vectors.json.

Covers common_utils.py's image_to_data_url (kept as a file or recompressed to JPEG, by pixels and size, through
the quality ladder and the shrinking scales) and get_adaptive_image_params, on inputs made from the specs in the
vector file (gradients or seeded noise in several modes, saved as PNG or JPEG). `call` cases run
image_to_data_url on the input file with the case's `params`; `original` cases copy the file to PNG as the runners
do (Image.open(f).save(orig.png, "PNG")) and run image_to_data_url with the first message's limits, read from
atomic/run_atomic_tools_openai.py (its defaults and the keyword of its first-message call).

The driver execs common_utils.py from the reference tree unmodified; its `openai` import fails in the scratch
venv, which the module tolerates (OpenAI = None) and these functions never use.

`server_rgb_sha256` is the payload as vLLM's OpenAI server decodes an image data URL
(vllm.multimodal.media.image.ImageMediaIO.load_bytes: RGB, transparency composited on white). vLLM is not in the
scratch venv, so the driver hands the payloads to this script's `--server-decode` step, run with the python that
started the generator (tirlab's .venv, which holds vLLM).

    .venv/bin/python scripts/reference/agentic_mme_images.py \\
        --source PATH/TO/Agentic-MME [--check]
"""

import ast
import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

REPO_URL = "https://github.com/ChoS3nE11ven/Agentic-MME"
COMMIT = "5e5dfbdc7b40b53dea17d5ce754c14034acb185b"
REQUIREMENTS = ["pillow==13.0.0", "numpy==2.3.5"]
VECTORS = "tests/eval/benchmarks/data/agentic_mme_image_vectors.json"
OUTPUTS = [VECTORS]
SERVER_PYTHON = "TIRLAB_REFERENCE_SERVER_PYTHON"  # the orchestrator's python, which has vLLM


def make_picture(spec: dict):
    """An input as the spec describes it: a gradient or seeded noise in the spec's mode."""
    import numpy as np
    from PIL import Image

    width, height = spec["size"]
    if spec["kind"] == "noise":
        rgba = np.random.default_rng(spec["seed"]).integers(0, 256, (height, width, 4), dtype=np.uint8)
    else:
        y, x = np.mgrid[0:height, 0:width]
        rgba = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) // 3 % 256,
                         (x * 7 + y * 3) % 256], -1).astype(np.uint8)
    mode = spec["mode"]
    if mode in ("RGB", "CMYK"):
        picture = Image.fromarray(np.ascontiguousarray(rgba[..., :3]))
        return picture if mode == "RGB" else picture.convert("CMYK")
    if mode == "RGBA":
        return Image.fromarray(rgba)
    if mode == "LA":
        return Image.fromarray(np.ascontiguousarray(rgba[..., [0, 3]]))
    if mode == "L":
        return Image.fromarray(np.ascontiguousarray(rgba[..., 0]))
    if mode == "I;16":
        return Image.fromarray(rgba[..., 0].astype(np.uint16) * 257)
    picture = Image.fromarray(np.ascontiguousarray(rgba[..., :3])).quantize(32)
    if mode == "P+transparency":
        picture.info["transparency"] = 0
    return picture


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def first_message_limits(runner_source: str) -> dict:
    """The limits the atomic runner's first message is sent with: `image_to_data_url(oc, max_image_pixels,
    image_quality, max_size_mb=...)` inside a function whose defaults give the first two."""
    for function in ast.walk(ast.parse(runner_source)):
        if not isinstance(function, ast.FunctionDef):
            continue
        positional = function.args.args[len(function.args.args) - len(function.args.defaults):]
        named = zip([*positional, *function.args.kwonlyargs], [*function.args.defaults, *function.args.kw_defaults])
        defaults = {arg.arg: eval(compile(ast.Expression(value), "<default>", "eval"), {})
                    for arg, value in named if value is not None}
        for call in ast.walk(function):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "image_to_data_url" \
                    and len(call.args) == 3:
                pixels, quality = (defaults[name.id] for name in call.args[1:])
                size = next(ast.literal_eval(k.value) for k in call.keywords if k.arg == "max_size_mb")
                return {"max_pixels": pixels, "quality": quality, "max_size_mb": size}
    raise LookupError("the runner's first-message call of image_to_data_url was not found")


def sent(common_utils, path: Path, limits: dict) -> dict:
    """What image_to_data_url sends for the file at `path`, as the vectors record it (less the server decode)."""
    import base64

    import numpy as np
    from PIL import Image

    url = common_utils.image_to_data_url(path, limits["max_pixels"], limits["quality"], limits["max_size_mb"])
    head, _, b64 = url.partition(",")
    payload = base64.b64decode(b64)
    decoded = Image.open(io.BytesIO(payload))
    pixels = np.asarray(decoded)
    return {"mime": head.removeprefix("data:").removesuffix(";base64"), "sent_as_file": payload == path.read_bytes(),
            "payload_bytes": len(payload), "payload_sha256": sha(payload), "mode": decoded.mode,
            "size": list(decoded.size), "pixels_shape": list(pixels.shape), "pixels_sha256": sha(pixels.tobytes()),
            "payload": payload}


def run_case(common_utils, case: dict, first_message: dict, scratch: Path) -> dict:
    from PIL import Image

    spec = case["input"]
    buffer = io.BytesIO()
    if spec["format"] == "JPEG":
        make_picture(spec).save(buffer, "JPEG", quality=spec["jpeg_quality"])
    else:
        make_picture(spec).save(buffer, "PNG")
    folder = scratch / case["name"]
    folder.mkdir()
    path = folder / ("input.jpg" if spec["format"] == "JPEG" else "input.png")
    path.write_bytes(buffer.getvalue())
    reference = {"input_sha256": sha(buffer.getvalue())}
    limits = case.get("params")
    if case["flow"] == "original":
        limits = first_message
        copy = folder / "orig.png"
        try:
            Image.open(path).save(copy, "PNG")
        except OSError as error:
            return {**reference, "error": f"{type(error).__name__}: {error}"}
        path = copy
    reference["file_bytes"] = path.stat().st_size
    try:
        return {**reference, **sent(common_utils, path, limits)}
    except ValueError as error:
        return {**reference, "error": f"{type(error).__name__}: {error}"}


def server_decode(folder: str) -> None:
    """Prints, as JSON, the SHA-256 of each payload file's pixels as vLLM's server decodes it, and vLLM's
    version."""
    import numpy as np
    import vllm
    from vllm.multimodal.media.image import ImageMediaIO

    decoder = ImageMediaIO()
    hashes = {path.name: sha(np.asarray(decoder.load_bytes(path.read_bytes()).media).tobytes())
              for path in sorted(Path(folder).iterdir())}
    print(json.dumps({"vllm": vllm.__version__, "hashes": hashes}))


def drive(tree: str, out_dir: str) -> None:
    import tempfile
    import types

    import numpy as np
    import PIL
    from PIL import features

    source = (Path(tree) / "common_utils.py").read_text(encoding="utf-8")
    common_utils = types.ModuleType("common_utils")
    common_utils.__file__ = str(Path(tree) / "common_utils.py")
    exec(compile(source, common_utils.__file__, "exec"), common_utils.__dict__)

    vectors = json.loads((common.ROOT / VECTORS).read_text(encoding="utf-8"))
    first_message = first_message_limits((Path(tree) / "atomic/run_atomic_tools_openai.py").read_text("utf-8"))
    adaptive = {str(count): common_utils.get_adaptive_image_params(count) for count in map(int, vectors["adaptive"])}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        payloads = scratch / "payloads"
        payloads.mkdir()
        references = []
        for number, case in enumerate(vectors["cases"]):
            reference = run_case(common_utils, case, first_message, scratch)
            if "payload" in reference:
                (payloads / f"{number:03d}").write_bytes(reference.pop("payload"))
            references.append(reference)
        decoded = json.loads(subprocess.run([os.environ[SERVER_PYTHON], __file__, "--server-decode", str(payloads)],
                                            check=True, capture_output=True, text=True).stdout.splitlines()[-1])
    for number, (case, reference) in enumerate(zip(vectors["cases"], references)):
        if "error" not in reference:
            reference["server_rgb_sha256"] = decoded["hashes"][f"{number:03d}"]
        case["reference"] = reference

    vectors.pop("generator", None)
    vectors = {"generator": common.header(__file__, REPO_URL, COMMIT, ["pillow", "numpy"]), **vectors}
    vectors["generator"]["versions"]["vllm (server decode, tirlab's venv)"] = decoded["vllm"]
    vectors["versions"] = {"python": sys.version.split()[0], "pillow": PIL.__version__, "numpy": np.__version__,
                           "libjpeg_turbo": features.version("libjpeg_turbo"), "zlib": features.version("zlib"),
                           "vllm_server_decode": decoded["vllm"]}
    vectors["first_message"] = first_message
    vectors["adaptive"] = adaptive
    common.write_json(out_dir, VECTORS, vectors)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--server-decode"]:
        server_decode(sys.argv[2])
    elif sys.argv[1:2] == ["--driver"]:
        import common  # before the reference tree joins sys.path

        drive(sys.argv[2], sys.argv[3])
    else:
        import common

        os.environ[SERVER_PYTHON] = sys.executable
        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)
