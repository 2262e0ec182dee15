"""Agentic-MME's atomic image tools, call by call: tests/tools/data/agentic_mme/ (manifest.json, cases.json.gz,
outputs.npz; the inputs in inputs/).

The designed cases stay in cases.json.gz (per task: id, input image, tag, and each call's tool and arguments) and
the designed input images in inputs/ (made once with seeded numpy; they are committed and not regenerated here).
For every call the driver recomputes what the reference does: the verdict, the tool message, the image the call
added (into outputs.npz, keyed by a hash of its pixels) and the image count; and the manifest's counts.

The driver imports atomic_toolbox.py (and through it common_utils.py) from the reference tree unmodified, with
OpenCV installed. dispatch_image_tool and IMAGE_TOOLS, with the import of the tools they call, are taken from
atomic/run_atomic_tools_openai.py with ast rather than by importing it: the module also imports the search tools,
the OpenAI client setup and the dataset helpers, none of which the image tools use. Each task runs as run_one runs
it: the input copied (Image.open(path).save(run_dir/'orig.png', 'PNG')), AtomicState(orig, run_dir/'tool_images'),
then each call's arguments read with json.loads (any failure: {}) and dispatched inside try/except Exception.
run_one's message building around a successful call (the tool-use list, the image sent back) is not run.

    .venv/bin/python scripts/reference/agentic_mme_tools.py --source PATH/TO/Agentic-MME \
        [--check]
"""

import ast
import gzip
import hashlib
import json
import sys
import tempfile
import types
from collections import Counter
from pathlib import Path

REPO_URL = "https://github.com/ChoS3nE11ven/Agentic-MME"
COMMIT = "5e5dfbdc7b40b53dea17d5ce754c14034acb185b"
LIBRARIES = ["pillow", "numpy", "opencv-python-headless"]
REQUIREMENTS = ["pillow==13.0.0", "numpy==2.3.5", "opencv-python-headless==5.0.0.93"]
DATA = "tests/tools/data/agentic_mme"
MANIFEST = "tests/tools/data/agentic_mme/manifest.json"
CASES = "tests/tools/data/agentic_mme/cases.json.gz"
OUTPUT_IMAGES = "tests/tools/data/agentic_mme/outputs.npz"
OUTPUTS = [MANIFEST, CASES, OUTPUT_IMAGES]
SCHEMAS = "tools/toolsets/agentic_mme/schemas.json"  # tirlab's copy of build_atomic_tools_schema(), checked here

HOW = ("scripts/reference/agentic_mme_tools.py imports atomic_toolbox.py from an extracted copy of the commit and "
       "takes dispatch_image_tool and IMAGE_TOOLS from atomic/run_atomic_tools_openai.py with ast (that module also "
       "imports the search tools, the OpenAI client setup and the dataset helpers, which the image tools do not "
       "use). Per case (one task): the input copied as run_one copies it (Image.open(path).save(run_dir/'orig.png', "
       "'PNG')), AtomicState(orig_path, run_dir/'tool_images'), then each call as run_one makes it: "
       "args = json.loads(arguments or '{}') (any failure -> {}), dispatch_image_tool(state, name, args) inside "
       "try/except Exception, the tool message json.dumps(out, ensure_ascii=False) or "
       "json.dumps({'ok': 'false', 'error': str(e)}, ensure_ascii=False). A dict argument was sent as json.dumps "
       "of it.")
INPUTS = ("committed files, designed once with seeded numpy (not regenerated): rgb.png 64x48 (gradients, shapes, "
          "noise), noisy.png 32x24, low.png 20x16 low contrast, odd.png 33x21, one.png 1x1, three_by_two.png 3x2, "
          "rgba.png 17x13 with varying alpha, p.png palette with a transparent index, l.png, la.png, bw.png (mode 1), "
          "i16.png (16-bit gray)")
ENVIRONMENT_NOTE = ("requirements.txt lists pillow>=10.0.0 and numpy>=1.24.0 but not OpenCV; atomic_toolbox.py "
                    "imports cv2 optionally and uses it for denoise and for edge_detect's canny and sobel when "
                    "present. These vectors are with OpenCV installed (HAS_CV2 true), the setup the published canny/"
                    "sobel methods assume. The versions are the generator's pins.")


def reference_dispatch(tree: Path) -> types.SimpleNamespace:
    """atomic_toolbox, and dispatch_image_tool with IMAGE_TOOLS as atomic/run_atomic_tools_openai.py defines them."""
    sys.path.insert(0, str(tree))
    import atomic_toolbox
    import common_utils

    if not atomic_toolbox.HAS_CV2:
        sys.exit("the vectors are made with OpenCV, which atomic_toolbox.py could not import")
    runner = ast.parse((tree / "atomic" / "run_atomic_tools_openai.py").read_text(encoding="utf-8"))
    wanted = [node for node in runner.body
              if isinstance(node, ast.ImportFrom) and node.module in ("__future__", "typing", "atomic_toolbox")
              or isinstance(node, ast.FunctionDef) and node.name == "dispatch_image_tool"
              or isinstance(node, ast.Assign) and [target.id for target in node.targets] == ["IMAGE_TOOLS"]]
    namespace = {}
    exec(compile(ast.Module(wanted, []), str(tree / "atomic" / "run_atomic_tools_openai.py"), "exec"), namespace)
    return types.SimpleNamespace(toolbox=atomic_toolbox, ensure_dir=common_utils.ensure_dir,
                                 dispatch=namespace["dispatch_image_tool"], image_tools=namespace["IMAGE_TOOLS"])


def output_key(pixels) -> str:
    return hashlib.sha256(pixels.tobytes() + str(pixels.shape).encode()).hexdigest()[:16]


def run_task(ref, task: dict, run_dir: Path, images: dict) -> None:
    """Runs the task's calls on a fresh state, filling in each call's verdict, reply, output and image count and
    adding each new image to `images`."""
    import numpy as np
    from PIL import Image

    run_dir = ref.ensure_dir(run_dir)
    orig = run_dir / "orig.png"
    Image.open(common.ROOT / DATA / "inputs" / task["image"]).save(orig, "PNG")
    state = ref.toolbox.AtomicState(orig_path=orig, processed_dir=ref.ensure_dir(run_dir / "tool_images"))
    for call in task["calls"]:
        if call["tool"] not in ref.image_tools:
            sys.exit(f"{task['id']}: {call['tool']} is not one of the reference's image tools")
        arguments = call["arguments"]
        sent = arguments if isinstance(arguments, str) else json.dumps(arguments)
        try:
            args = json.loads(sent or "{}")
        except Exception:
            args = {}
        count = len(state.images)
        try:
            reply, verdict = json.dumps(ref.dispatch(state, call["tool"], args), ensure_ascii=False), "ok"
        except Exception as error:
            reply, verdict = json.dumps({"ok": "false", "error": str(error)}, ensure_ascii=False), "error"
        output = None
        if len(state.images) > count:
            pixels = np.array(Image.open(state.images[-1][0]).convert("RGB"))
            output = output_key(pixels)
            images.setdefault(output, pixels)
        reply = reply.replace(f"{state.processed_dir}/transformed_image_", "<run>/tool_images/transformed_image_")
        call.update(verdict=verdict, reply=reply, output=output, images=len(state.images))


def counts(cases: list, images: dict) -> dict:
    verdicts = Counter((call["tool"], call["verdict"]) for task in cases for call in task["calls"])
    return {"tasks": len(cases), "calls": sum(len(task["calls"]) for task in cases),
            "distinct output images": len(images),
            "per tool": {tool: {"ok": verdicts[tool, "ok"], "error": verdicts[tool, "error"]}
                         for tool in sorted({tool for tool, _ in verdicts})}}


def drive(tree: str, out_dir: str) -> None:
    import platform

    import numpy as np

    ref = reference_dispatch(Path(tree))
    published = json.loads((common.ROOT / SCHEMAS).read_text(encoding="utf-8"))["tools"]
    if ref.toolbox.build_atomic_tools_schema() != published:
        sys.exit(f"{SCHEMAS} differs from build_atomic_tools_schema() of the reference")
    cases = json.loads(gzip.decompress((common.ROOT / CASES).read_bytes()))
    images = {}
    with tempfile.TemporaryDirectory() as scratch:
        for task in cases:
            run_task(ref, task, Path(scratch) / task["id"], images)

    manifest = json.loads((common.ROOT / MANIFEST).read_text(encoding="utf-8"))
    manifest.pop("generator", None)
    versions = common.versions(LIBRARIES)
    manifest = {"generator": common.header(__file__, REPO_URL, COMMIT, LIBRARIES), **manifest, "how": HOW,
                "inputs": INPUTS, "counts": counts(cases, images)}
    manifest["environment"] = {
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        **{name: versions[name] for name in LIBRARIES}, "note": ENVIRONMENT_NOTE}
    common.write_json(out_dir, MANIFEST, manifest, indent=2)
    gzipped = Path(out_dir) / CASES
    gzipped.write_bytes(gzip.compress(json.dumps(cases, indent=0, ensure_ascii=False).encode(), mtime=0))
    np.savez_compressed(Path(out_dir) / OUTPUT_IMAGES, **images)


if __name__ == "__main__":
    import common  # before the reference tree joins sys.path

    if sys.argv[1:2] == ["--driver"]:
        drive(sys.argv[2], sys.argv[3])
    else:
        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)
