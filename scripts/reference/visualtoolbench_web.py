"""VisualToolBench's web tools against a fake provider server:
tests/eval/benchmarks/data/visualtoolbench_web_vectors.json, from the designed cases of
tests/eval/benchmarks/data/web_provider_cases.json (those with "benchmark": "visualtoolbench";
scripts/reference/agentic_mme_web.py makes the other benchmark's).

For each case the driver serves the case's responses from tests/web_fakes.py (loaded by path), sets the case's keys
as the tools read them (SERP_API_KEY, OPENWEATHER_API_KEY; a null key is unset), and makes the call through the
benchmark's own agent loop, `FunC_with_tools` of scripts/model_inference.py, with the scripted model and stubs of
scripts/reference/visualtoolbench_tools.py (litellm, simpy, tabulate, yfinance, sklearn, dotenv; here also pandas,
scipy and cv2, which scripts/tools.py imports at the top but the web tools never use). `result` is the observation
the loop records, `expected` the content of the tool message it sends back to the model (`str(observation)`).
"{BASE}" in a case's URL arguments is the fake's base URL.

Stand-in, in scripts/tools.py only: its `requests` is web_fakes.Redirect, which sends the hard-coded SerpAPI and
OpenWeather URLs to the fake (pages the model names are fetched as they are) and clamps the hard-coded timeouts
(15 s, 10 s) to the case's `timeout_s`, so that the hang cases run fast: a timeout message names the clamped
value. Each request record holds the timeout the reference passed (`timeout`) and the one used (`timeout_used`).

Outputs are written as scripts/reference/agentic_mme_web.py writes them: {BASE}, {HOST} and {PORT} for the fake's
address (a 22-character base), key values as the reference wrote them, the requests that reached the fake.

    .venv/bin/python scripts/reference/visualtoolbench_web.py --source PATH/TO/VisualToolBench [--check]
"""

import json
import os
import sys
import tempfile
import types
from pathlib import Path

import common

REPO_URL = "https://github.com/xi1ngang/VisualToolBench"
COMMIT = "d4f200a0a44790349667bed09334ac88623074b2"
PINS = {"requests": "2.34.2", "urllib3": "2.8.0", "charset-normalizer": "3.5.3", "idna": "3.20",
        "certifi": "2026.10.19.post1", "beautifulsoup4": "4.15.0", "soupsieve": "4.1.3", "pillow": "13.0.0",
        "numpy": "2.4.6"}
LIBRARIES = list(PINS)
REQUIREMENTS = [f"{name}=={pinned}" for name, pinned in PINS.items()]
CASES = "tests/eval/benchmarks/data/web_provider_cases.json"
VECTORS = "tests/eval/benchmarks/data/visualtoolbench_web_vectors.json"
OUTPUTS = [VECTORS]
SOURCE_FILES = ["scripts/tools.py", "scripts/model_inference.py"]
KEY_VARIABLES = {"serpapi": "SERP_API_KEY", "openweather": "OPENWEATHER_API_KEY"}


def with_base(value, base: str):
    if isinstance(value, str):
        return value.replace("{BASE}", base)
    if isinstance(value, dict):
        return {k: with_base(v, base) for k, v in value.items()}
    if isinstance(value, list):
        return [with_base(v, base) for v in value]
    return value


def drive(tree: str, out_dir: str) -> None:
    import agentic_mme_web as shared
    import visualtoolbench_tools as vtb

    fakes = shared.load_fakes()
    cases = [c for c in json.loads((common.ROOT / CASES).read_text(encoding="utf-8"))["cases"]
             if c["benchmark"] == "visualtoolbench"]
    model = vtb.ScriptedModel()
    vtb.install_stubs(model)
    for name in ("pandas", "scipy", "cv2"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["scipy"].stats = types.ModuleType("scipy.stats")
    sys.path.insert(0, str(Path(tree, "scripts")))
    import model_inference
    import requests
    import tools

    made = []
    with fakes.FakeProviders() as fake, tempfile.TemporaryDirectory() as work:
        for case in cases:
            fake.reset()
            for name, responses in case["responses"].items():
                fake.serve(name, *responses)
            for key, variable in KEY_VARIABLES.items():
                if case["keys"].get(key):
                    os.environ[variable] = case["keys"][key]
                else:
                    os.environ.pop(variable, None)
            redirect = fakes.Redirect(requests, fake, max_timeout_s=case["timeout_s"])
            tools.requests = redirect
            try:
                result, reply = vtb.call_tool(model_inference, model, case["tool"],
                                              with_base(case["arguments"], fake.base), Path(work))
            finally:
                tools.requests = requests
            made.append(shared.portable({"id": case["id"], "expected": reply, "result": result,
                                         "requests": shared.recorded(fake, redirect.calls, clamped=True)},
                                        fake))
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
