"""The live web tools reply byte for byte as the benchmarks' runners do. The reference vectors (generators:
scripts/reference/agentic_mme_web.py and visualtoolbench_web.py) hold what each runner handed its model for a
designed call against the fake providers; here the suites' own tools, live, meet the same fake responses, and must
write the same text and send the same requests. Two deliberate differences are applied to the expected side: a key
in a reply reads "***", and a request the runner did not retry (VisualToolBench, a 429) may be sent again."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from eval.benchmarks import agentic_mme, visualtoolbench
from eval.benchmarks.agentic_mme import LENS_IMAGE, gen_lens_image, search_tools
from eval.benchmarks.visualtoolbench import tool_schemas, web_tools
from runtime.web import Web
from runtime.web_http import REDACTED, WebPolicy
from tests.web_fakes import FakeProviders
from tools.toolsets.agentic_mme.kernels import pixel_box

DATA = Path(__file__).parent / "data"
CASES = json.loads((DATA / "web_provider_cases.json").read_text(encoding="utf-8"))["cases"]
EXPECTED = {v["id"]: v for name in ("agentic_mme_web_vectors.json", "visualtoolbench_web_vectors.json")
            for v in json.loads((DATA / name).read_text(encoding="utf-8"))["vectors"]}
ENVIRONMENT = {"serper": "SERPER_API_KEY", "imgbb": "IMGBB_API_KEY", "jina": "JINA_API_KEY",
               "serpapi": "SERP_API_KEY", "openweather": "OPENWEATHER_API_KEY"}
PROVIDERS = {"agentic_mme": agentic_mme.PROVIDER, "visualtoolbench": visualtoolbench.PROVIDER}


def _runs_live(case) -> bool:
    """A case whose required keys are set (without them --web live refuses to start, where the runner answers
    every call with its "key not configured" error)."""
    keys = {ENVIRONMENT[name] for name, value in case["keys"].items() if value}
    return set(PROVIDERS[case["benchmark"]].keys) <= keys


LIVE = [case for case in CASES if _runs_live(case)]


def test_the_vectors_cover_every_tool_and_the_refused_cases_are_only_missing_keys():
    assert {case["id"] for case in CASES} == set(EXPECTED)
    assert {(c["benchmark"], c.get("track"), c["tool"]) for c in LIVE} == {
        (b, t, tool) for b, t, tools in (("agentic_mme", "atm", agentic_mme.SEARCH_TOOLS),
                                         ("agentic_mme", "gen", agentic_mme.SEARCH_TOOLS),
                                         ("visualtoolbench", None, visualtoolbench.WEB_TOOLS)) for tool in tools}
    assert len(LIVE) >= 200 and all(not _runs_live(c) for c in CASES if c not in LIVE)


class Workspace:
    """The episode's images as the tools read them: image_N.png beside the original."""

    def __init__(self, images: list[np.ndarray]):
        self.images, self.original = images, "/workspace/image_0.png"

    def read(self, path: str) -> np.ndarray:
        name = Path(path).name
        index = int(name[len("image_"):-len(".png")]) if name.startswith("image_") else -1
        if not 0 <= index < len(self.images):
            raise FileNotFoundError(path)
        return self.images[index]


def _filled(text: str, fake) -> str:
    host, port = fake.base[len("http://"):].split(":")
    return text.replace("{BASE}", fake.base).replace("{HOST}", host).replace("{PORT}", port)


def _workspace(case) -> Workspace:
    images = [np.asarray(Image.open(io.BytesIO(base64.b64decode(case["image"]))).convert("RGB"))] \
        if case.get("image") else [np.zeros((6, 8, 3), np.uint8)]
    for earlier in case.get("before") or []:  # Atm's image tools before the call (crop)
        assert earlier["tool"] == "crop"
        source = images[earlier["arguments"]["image_index"]]
        x1, y1, x2, y2 = pixel_box(earlier["arguments"]["bbox_2d"], source.shape[1], source.shape[0])
        images.append(source[y1:y2, x1:x2])
    return Workspace(images)


def _signature(request: dict) -> tuple:
    """What identifies a request: the uploaded image by its pixels, other bodies as sent."""
    body = request.get("json")
    form = {k: v for k, v in (request.get("form") or {}).items() if k != "image"}
    headers = {k: v for k, v in request["headers"].items() if k in ("X-API-KEY", "Authorization")}
    return (request["endpoint"], request["method"], request["target"], json.dumps(body, sort_keys=True),
            json.dumps(form, sort_keys=True), json.dumps(headers, sort_keys=True))


def _sent(request: dict) -> dict:
    """A request the fake logged, in the vectors' terms."""
    out = {**request, "target": request["target"].split(f"/{request['endpoint']}", 1)[-1]}
    body = request["body"]
    if request["headers"].get("Content-Type", "").startswith("application/json") and body:
        out["json"] = json.loads(body)
    elif body:
        from urllib.parse import parse_qs

        out["form"] = {k: v[0] for k, v in parse_qs(body.decode()).items()}
    return out


@pytest.mark.parametrize("case", LIVE, ids=lambda case: case["id"])
def test_a_live_call_replies_and_asks_as_the_runner_does(case):
    vector = EXPECTED[case["id"]]
    with FakeProviders() as fake:
        for endpoint, responses in case["responses"].items():
            fake.serve(endpoint, *json.loads(_filled(json.dumps(responses), fake)))
        environ = {ENVIRONMENT[name]: value for name, value in case["keys"].items() if value}
        policy = WebPolicy(endpoints=fake.endpoints, timeout_s=case["timeout_s"], backoff_s=0, max_wait_s=0,
                           allow_private=True)
        web = Web("live", provider=PROVIDERS[case["benchmark"]], policy=policy, environ=environ)
        arguments = json.loads(_filled(json.dumps(case["arguments"]), fake))
        if case["benchmark"] == "agentic_mme":
            tool = {t.name: t for t in search_tools(web, case["track"])}[case["tool"]]
            if case["tool"] == "google_lens_search" and case["track"] == "gen":  # the toolbox's image lookup
                arguments = {**arguments, LENS_IMAGE: gen_lens_image(SimpleNamespace(
                    trajectory=SimpleNamespace(messages=[])), arguments)}
        else:
            tool = {t.name: t for t in web_tools(web, tool_schemas())}[case["tool"]]
        reply = tool.run(arguments, _workspace(case))
        sent = [_sent(r) for r in fake.requests]
    expected = _filled(vector["expected"], fake)
    for value in case["keys"].values():
        expected = expected.replace(value, REDACTED) if value else expected
    assert reply.text == expected
    reference = [_signature(r) for r in vector["requests"]]
    assert {_signature(r) for r in sent} == set(reference)
    assert len(sent) >= len(reference)  # WebHttp retries what the runner did not (429; VisualToolBench's 5xx)
    for request, summary in ((s, r["form"]["image"]) for s, r in zip(sent, vector["requests"])
                             if r.get("form", {}).get("image", {}).get("case_image") and not case.get("before")):
        assert request["endpoint"] == "imgbb_upload"
        uploaded = Image.open(io.BytesIO(base64.b64decode(request["form"]["image"])))
        assert list(uploaded.size) == summary["size"] and uploaded.tobytes() == _workspace(case).images[0].tobytes()
