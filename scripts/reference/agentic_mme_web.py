"""Agentic-MME's web tools against a fake provider server: tests/eval/benchmarks/data/agentic_mme_web_vectors.json,
from the designed cases of tests/eval/benchmarks/data/web_provider_cases.json (those with "benchmark":
"agentic_mme"; scripts/reference/visualtoolbench_web.py makes the other benchmark's).

For each case the driver serves the case's responses from tests/web_fakes.py (loaded by path), then runs one whole
episode of the runner of the case's track, the OpenAI runners' own loops: Atm is `run_one` of
atomic/run_atomic_tools_openai.py (its search branch is inline in the loop, lines 501-595), Gen is
`run_one_rollout` of general/run_general_script_openai.py (`_execute_tool`, then lines 929-936). The model is a
scripted client: its first reply asks for the case's `before` calls and then the case's call (function calling,
arguments as JSON), its second answers. The `expected` text is the content of the tool message the runner sends
back for the case's call. The runners get the case's keys and timeout through a search config file
(load_search_config: serper_api_key, imgbb_api_key, jina_api_key, request_timeout_s); as in a real run, they set
the search cache to the run folder and the task id "t1" (each case runs in a fresh folder, so nothing is read back
from the cache). The task's image is the case's PNG, saved as images/image_0001.png (the runners copy it to
orig.png; Atm's crops go to tool_images/transformed_image_N.png).

Stand-ins, in search_tools.py only: SERPER_SEARCH_ENDPOINT, SERPER_LENS_ENDPOINT and IMGBB_UPLOAD_ENDPOINT point
at the fake; its `requests` is web_fakes.Redirect (Jina's hard-coded https://r.jina.ai/ prefix goes to the fake,
nothing else changes); its `time.sleep` (the retry waits) returns at once and is recorded in `sleeps`.

In the outputs the fake's base URL is written {BASE}, and its host and port, where urllib3 names them
(`host='127.0.0.1', port=NNNNN`), {HOST} and {PORT}.
The base is 22 characters (127.0.0.1 and a five-digit port), so texts truncated after it keep their length when a
test writes its own base back. Key values stay as the reference wrote them. `requests` lists what reached the
fake: endpoint, method, `target` (the raw request target after the endpoint's name: "/" and the page URL for
Jina, "?key=..." for ImgBB), the query parsed, the headers the reference set (not requests' defaults), the JSON or
form body, the timeout the reference passed; ImgBB's
base64 `image` field is replaced by the image it holds (size, mode, SHA-256 of the RGB(A) pixels, and whether
those are the case image's pixels).

    .venv/bin/python scripts/reference/agentic_mme_web.py --source PATH/TO/Agentic-MME [--check]
"""

import base64
import contextlib
import hashlib
import importlib.util
import io
import json
import sys
import tempfile
import types
from pathlib import Path
from urllib.parse import parse_qs

import common

REPO_URL = "https://github.com/ChoS3nE11ven/Agentic-MME"
COMMIT = "5e5dfbdc7b40b53dea17d5ce754c14034acb185b"
PINS = {"requests": "2.34.2", "urllib3": "2.8.0", "charset-normalizer": "3.5.3", "idna": "3.20",
        "certifi": "2026.10.19.post1", "pillow": "13.0.0", "numpy": "2.4.6"}
LIBRARIES = list(PINS)
REQUIREMENTS = [f"{name}=={pinned}" for name, pinned in PINS.items()]
CASES = "tests/eval/benchmarks/data/web_provider_cases.json"
VECTORS = "tests/eval/benchmarks/data/agentic_mme_web_vectors.json"
OUTPUTS = [VECTORS]
FAKES = "tests/web_fakes.py"
SOURCE_FILES = ["search_tools.py", "atomic/run_atomic_tools_openai.py", "general/run_general_script_openai.py"]
DEFAULT_HEADERS = {"host", "content-length", "accept-encoding", "accept", "connection"}


def load_fakes():
    spec = importlib.util.spec_from_file_location("web_fakes", common.ROOT / FAKES)
    module = importlib.util.module_from_spec(spec)
    sys.modules["web_fakes"] = module
    spec.loader.exec_module(module)
    return module


class Sleeps:
    """Stands in for the `time` module: sleep records its argument and returns at once."""

    def __init__(self, real):
        self._real, self.slept = real, []

    def __getattr__(self, name):
        return getattr(self._real, name)

    def sleep(self, seconds):
        self.slept.append(seconds)


class ScriptedClient:
    """An OpenAI client whose model first calls the given tools, then answers; it keeps the tool messages."""

    def __init__(self, calls):
        self.calls, self.tool_messages = calls, None
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self.create))

    def create(self, messages, **_):
        if self.tool_messages is None and self.calls:
            calls, self.calls = self.calls, None
            tool_calls = [types.SimpleNamespace(id=f"call_{k}", type="function", function=types.SimpleNamespace(
                name=call["tool"], arguments=json.dumps(call["arguments"], ensure_ascii=False)))
                for k, call in enumerate(calls)]
            return self._response(None, tool_calls)
        if self.tool_messages is None:
            self.tool_messages = [dict(m) for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
        return self._response("<answer>done</answer>", None)

    @staticmethod
    def _response(content, tool_calls):
        def dump():
            calls = [{"id": tc.id, "type": "function", "function": {"name": tc.function.name,
                                                                    "arguments": tc.function.arguments}}
                     for tc in tool_calls or []]
            return {"role": "assistant", "content": content, "tool_calls": calls or None}

        message = types.SimpleNamespace(content=content, tool_calls=tool_calls, model_dump=dump)
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)], usage=None)


def image_summary(data: bytes, case_pixels: bytes) -> dict:
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    image.load()
    pixels = image.tobytes()
    return {"size": list(image.size), "mode": image.mode, "pixels_sha256": hashlib.sha256(pixels).hexdigest(),
            "case_image": pixels == case_pixels}


def recorded(fake, calls: list[dict], case_pixels: bytes = b"", clamped: bool = False) -> list[dict]:
    """What reached the fake, as the vectors hold it (see the docstring)."""
    arrived = fake.requests
    calls = [call for call in calls if call["url_used"].startswith(fake.base + "/")]  # not those refused before
    if len(arrived) != len(calls):
        sys.exit(f"{len(calls)} calls made but {len(arrived)} reached the fake")
    found = []
    for request, call in zip(arrived, calls):
        headers = {k: v for k, v in request["headers"].items() if k.lower() not in DEFAULT_HEADERS
                   and not (k.lower() == "user-agent" and v.startswith("python-requests/"))}
        entry = {"endpoint": request["endpoint"], "method": request["method"],
                 "target": request["target"][len(request["endpoint"]) + 1:], "query": request["query"],
                 "headers": headers, "timeout": call["timeout"]}
        if clamped:
            entry["timeout_used"] = call["timeout_used"]
        kind = headers.get("Content-Type", "")
        if kind.startswith("application/json"):
            entry["json"] = json.loads(request["body"])
        elif kind.startswith("application/x-www-form-urlencoded"):
            form = {k: v[0] if len(v) == 1 else v for k, v in parse_qs(request["body"].decode("ascii")).items()}
            if "image" in form:
                form["image"] = image_summary(base64.b64decode(form["image"]), case_pixels)
            entry["form"] = form
        elif request["body"]:
            entry["body"] = request["body"].decode("utf-8")
        found.append(entry)
    return found


def portable(value, fake):
    """The fake's base URL written {BASE}, its host {HOST} and port {PORT} where urllib3's messages name them
    (host='127.0.0.1', port=NNNNN); nothing else of the fake may remain."""
    port = fake.base.rsplit(":", 1)[1]
    if len(fake.base) != 22:  # truncated texts are only portable between bases of one length
        sys.exit(f"the fake's base {fake.base} is not 22 characters long")
    text = (json.dumps(value, ensure_ascii=False).replace(fake.base, "{BASE}")
            .replace(f"host='127.0.0.1', port={port}", "host='{HOST}', port={PORT}"))
    if "127.0.0.1" in text or f":{port}" in text:
        sys.exit(f"the fake's address is left in an output: {text[:300]}")
    return json.loads(text)


def run_case(ref, fakes, fake, case: dict, work: Path) -> dict:
    from PIL import Image

    root = Path(tempfile.mkdtemp(dir=work))
    (root / "json").mkdir()
    (root / "images").mkdir()
    png = base64.b64decode(case["image"]) if case["image"] else None
    if png is None:  # the runners need an input image in any case
        buffer = io.BytesIO()
        Image.new("RGB", (8, 6), (90, 120, 200)).save(buffer, "PNG")
        png = buffer.getvalue()
    (root / "images" / "image_0001.png").write_bytes(png)
    case_pixels = Image.open(io.BytesIO(png)).tobytes()
    task = root / "json" / "0001.json"
    task.write_text(json.dumps({"task_id": "t1", "input": {"prompt": "What is shown?"}}))
    config = root / "search_config.json"
    keys = case["keys"]
    config.write_text(json.dumps({"serper_api_key": keys["serper"], "imgbb_api_key": keys.get("imgbb"),
                                  "jina_api_key": keys.get("jina"), "request_timeout_s": case["timeout_s"]}))

    fake.reset()
    for name, responses in case["responses"].items():
        fake.serve(name, *responses)
    redirect = fakes.Redirect(ref.requests, fake)
    sleeps = Sleeps(ref.time)
    ref.search_tools.requests, ref.search_tools.time = redirect, sleeps
    client = ScriptedClient([*case.get("before", []), {"tool": case["tool"], "arguments": case["arguments"]}])
    settings = dict(client=client, task_json=task, dataset_root=root, images_dir=root / "images",
                    out_dir=root / "out", model="scripted", temperature=0.0, max_rounds=15, max_tool_calls=15,
                    enable_search=True, search_cfg_path=config)
    try:
        if case["track"] == "atm":
            ref.atm.run_one(**settings)
        else:
            ref.gen.run_one_rollout(python_exe=sys.executable, **settings)
    finally:
        ref.search_tools.requests, ref.search_tools.time = ref.requests, ref.time
    if client.tool_messages is None or len(client.tool_messages) < 1 + len(case.get("before", [])):
        sys.exit(f"{case['id']}: the runner sent back no tool message for the call")
    return portable({"id": case["id"], "expected": client.tool_messages[-1]["content"],
                     "requests": recorded(fake, redirect.calls, case_pixels), "sleeps": sleeps.slept}, fake)


def drive(tree: str, out_dir: str) -> None:
    fakes = load_fakes()
    cases = [c for c in json.loads((common.ROOT / CASES).read_text(encoding="utf-8"))["cases"]
             if c["benchmark"] == "agentic_mme"]
    sys.path.insert(0, tree)
    import time

    import requests
    import search_tools
    from atomic import run_atomic_tools_openai
    from general import run_general_script_openai

    ref = types.SimpleNamespace(search_tools=search_tools, atm=run_atomic_tools_openai, gen=run_general_script_openai,
                                requests=requests, time=time)
    made = []
    with fakes.FakeProviders() as fake, tempfile.TemporaryDirectory() as work:
        search_tools.SERPER_SEARCH_ENDPOINT = fake.endpoints["serper_search"]
        search_tools.SERPER_LENS_ENDPOINT = fake.endpoints["serper_lens"]
        search_tools.IMGBB_UPLOAD_ENDPOINT = fake.endpoints["imgbb_upload"]
        with contextlib.redirect_stdout(sys.stderr):  # the runners print progress lines
            for case in cases:
                made.append(run_case(ref, fakes, fake, case, Path(work)))
    common.write_json(out_dir, VECTORS, {
        "generator": common.header(__file__, REPO_URL, COMMIT, LIBRARIES),
        "_header": {"source": {"repo": REPO_URL, "commit": COMMIT, "files": SOURCE_FILES}, "cases": CASES,
                    "placeholders": {"{BASE}": "the fake server's base URL, http://127.0.0.1:NNNNN (22 characters)",
                                     "{HOST}": "its host, where urllib3's messages name it (host='{HOST}')",
                                     "{PORT}": "its port, where urllib3's messages name it (port={PORT})"}},
        "vectors": made})


if __name__ == "__main__":
    if sys.argv[1:2] == ["--driver"]:
        drive(*sys.argv[2:4])
    else:
        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)