"""`vtc_bench`: VTC-Bench's 35 `opencv_*` interface tools, reproducing the benchmark's own tool code
(github.com/cs-w0r1d/VTC-Bench at 93a33a4: eval/qwen_agent/tools/opencv_tools.py, opencv_interface.py,
base.py and agent.py's `_call_tool`).

Reproduced: the published schemas word for word (`schemas.json`) and their validation with jsonschema
(a call the schema rejects, e.g. a `param` given as a JSON string or a missing required key, gets
qwen-agent's "An error occurred when calling tool ..." text with jsonschema's own message); every
operation's OpenCV calls, value conversions, lower-cased options, clamps, resets, fallbacks and error
texts (`kernels.py`); images loaded as the tools load them (PIL -> np.array -> cv2 RGB2BGR, `read_image`);
results saved as they save them (BGR2RGB of the array, so HSV / LAB arrays show channels reversed); the
reply "<message>\n\nEdited Image Path: <path>", the failure text "Failed to run OpenCV operation ..."
with its path hint, and 'Tool <name> does not exists.' for unknown names. Calls run on CPU one at a
time on every device: pixel identity is the contract (GPU batching lives in the `default` set).
Checked against the reference's own outputs in tests/tools/test_vtc_bench_reference.py.

Where we differ, and why:
- Hough lines: the reference unpacks OpenCV 4's (N, 1, 4) array and fails on OpenCV 5's (N, 4); we do
  what it does under OpenCV 4 (a library-version break, not a behaviour).
- Shi-Tomasi features: `np.int0` is gone in numpy 2; we truncate with np.intp, numpy 1's meaning.
- CLAHE with a zero side in `tile_grid_size` kills the reference's process (SIGFPE inside OpenCV); we
  answer that call with the tool's failure text instead.
- OpenCV's per-thread RNG (SIFT's keypoint colors, GrabCut's k-means) carries over between calls in the
  reference's process, so its pixels depend on what ran before; every call here starts from a fresh
  process's state (cv2.setRNGSeed(0)), and the recorded vectors were made that way.
- Tracebacks: the agent appends a Python traceback of files on the benchmark's machine; we keep its
  header, the `Type: message` line and the `Traceback:` line, without the frames.
- Image paths: the reference opens any path on its machine (relative ones against its working
  directory and home), fetches http(s) URLs and decodes inline base64 / data URIs; we read only the
  episode's image files (a `file://` prefix is stripped as there), anything else gets its
  "Unable to load image from input" failure. A `work_dir` argument (where it saves) is ignored.
- Argument strings: qwen-agent tries json5 before its repairs of broken JSON; json5 is not a dependency
  here, so syntax only json5 reads (single quotes, comments, hexadecimal, ...) is rejected as invalid JSON.
  (In an episode the protocol parses a call's JSON first; arguments it cannot parse get the runtime's
  error before any tool runs.)
- An episode holds one array per image, what the tools see (`read_image`): for palette and CMYK files
  the model is shown that too (palette indices as gray, C, M, Y as R, G, B) where the reference's model
  is shown the decoded colors. Files it cannot hold as 8-bit BGR (16-bit gray, 32-bit, float, bilevel,
  gray + alpha) are refused by `read_image` rather than loaded into an episode.
- cv2.inpaint on a one-pixel-wide image reads outside the image: its result there varies from run to
  run, in the reference as here. OpenCV runs with its default threads here (the reference's harness sets
  one); no recorded result depends on it.
- SURF and BRIEF answer the reference's "requires xfeatures2d (contrib) build" error: neither the
  pinned build nor ours has opencv-contrib.
"""

import json
from pathlib import Path

from tools.toolset import ToolSet
from tools.toolsets.vtc_bench.interface import make_tool, read_image, unknown_tool

SCHEMAS = Path(__file__).with_name("schemas.json")
PUBLISHED = json.loads(SCHEMAS.read_text(encoding="utf-8"))

TOOLSET = ToolSet(
    "vtc_bench",
    "VTC-Bench's OpenCV interface tools, reproducing the benchmark's own code: "
    '{"image": <path>, "param": {...}}, BGR colors, clockwise rotation.',
    tuple(make_tool(entry) for entry in PUBLISHED["tools"]),
    unknown=unknown_tool,
)

__all__ = ["PUBLISHED", "SCHEMAS", "TOOLSET", "read_image"]
