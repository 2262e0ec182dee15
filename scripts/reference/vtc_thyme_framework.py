"""Writes tests/eval/benchmarks/data/vtc_thyme_framework_vectors.json: VTC-Bench's Thyme framework (VLMEvalKit's
ThymeAPI.generate_inner with ThymePromptMixin's VTCBench prompt and vlm/thyme/sandbox.py) run on scripted model
replies, one scenario per path through the loop (answer at once, images and text from the sandbox, code errors,
bare code, no code, the iteration cap, the simple-prompt fallback, an answer tag pair that raises).

The reference's files run unmodified from the checkout: eval/eval/VLMEvalKit/vlmeval/api/thyme_api.py and
vlm/thyme/{sandbox,utils,prompt,conversation_saver}.py. Their packages are registered as empty modules pointing at
the checkout's folders, so VLMEvalKit's __init__ files (which import every model, torch included) never run, and
three stand-ins take the place of what they import from the rest of VLMEvalKit:

- `vlmeval.smp.listinstr`, copied from smp/misc.py;
- `vlmeval.dataset.DATASET_TYPE`, imported by ThymePromptMixin.build_prompt but not used for VTCBench;
- `vlmeval.api.gpt.GPT4V`: OpenAIWrapper's attributes with their defaults, and its prepare_itlist with an image
  part kept as {"type": "image_url", "path": ...} instead of a base64 JPEG (the vectors record image parts as
  `<image>`).

`call_api_direct` (the HTTP request) is replaced by the scripted replies, as a vLLM server returns them: the stop
string cut off. Every request's messages are recorded with the sandbox's folder written `{temp}`, the input image's
path `{input}` and each image part `<image>`.

    .venv/bin/python scripts/reference/vtc_thyme_framework.py --source PATH/TO/VTC-Bench [--check]
"""

import json
import sys
import tempfile
import types
from pathlib import Path

REPO_URL = "https://github.com/cs-w0r1d/VTC-Bench"
COMMIT = "93a33a446c1a867b67dd76940a65b91b5b7d500d"
REQUIREMENTS = ["numpy==2.4.6", "pillow==13.0.0", "opencv-python-headless==5.0.0.93", "autopep8==2.3.2",
                "pandas==3.1.1", "timeout-decorator==0.5.0", "requests==2.34.2"]
LIBRARIES = ["numpy", "pillow", "opencv-python-headless", "autopep8", "pandas"]
VECTORS = "tests/eval/benchmarks/data/vtc_thyme_framework_vectors.json"
OUTPUTS = [VECTORS]
VLMEVAL = "eval/eval/VLMEvalKit/vlmeval"

# The header's options and an empty option D (a NaN cell, as pandas reads it) that the prompt must leave out.
EMPTY_OPTION = {"D": float("nan")}


def register_reference(tree: Path) -> None:
    """Makes `vlmeval.api.thyme_api` and `vlmeval.vlm.thyme.*` importable from the checkout, with the stand-ins."""
    import numpy as np

    for name in ("vlmeval", "vlmeval.api", "vlmeval.vlm", "vlmeval.vlm.thyme"):
        package = types.ModuleType(name)
        package.__path__ = [str(tree / VLMEVAL / name.removeprefix("vlmeval").lstrip(".").replace(".", "/"))]
        sys.modules[name] = package

    def listinstr(lst, s):
        assert isinstance(lst, list)
        return any(item in s for item in lst)

    def dataset_type(dataset, default=None):
        raise AssertionError(f"DATASET_TYPE is not used for {dataset}")

    class GPT4V:
        """OpenAIWrapper and BaseAPI's attributes as `GPT4V(model=..., key=..., api_base=...)` sets them."""

        def __init__(self, model="gpt-3.5-turbo-0613", retry=5, key=None, verbose=False, system_prompt=None,
                     temperature=0, timeout=300, api_base=None, max_tokens=2048, img_size=-1, img_detail="low",
                     use_azure=False, wait=1, fail_msg="Failed to obtain answer via API.", **kwargs):
            self.model, self.key, self.api_base, self.key_rotator = model, key, api_base, None
            self.cur_idx, self.max_tokens, self.temperature, self.use_azure = 0, max_tokens, temperature, use_azure
            self.img_size, self.img_detail, self.timeout = img_size, img_detail, timeout
            self.o1_model = ("o1" in model) or ("o3" in model) or ("o4" in model)
            self.retry, self.wait, self.system_prompt, self.verbose = retry, wait, system_prompt, verbose
            self.fail_msg, self.default_kwargs = fail_msg, kwargs

        def prepare_itlist(self, inputs):
            assert np.all([isinstance(x, dict) for x in inputs])
            if np.sum([x["type"] == "image" for x in inputs]):
                return [dict(type="text", text=x["value"]) if x["type"] == "text" else
                        dict(type="image_url", path=x["value"]) for x in inputs if x["type"] in ("text", "image")]
            assert all([x["type"] == "text" for x in inputs])
            return [dict(type="text", text="\n".join([x["value"] for x in inputs]))]

    for name, attributes in (("vlmeval.smp", {"listinstr": listinstr}),
                             ("vlmeval.dataset", {"DATASET_TYPE": dataset_type}),
                             ("vlmeval.api.gpt", {"GPT4V": GPT4V})):
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        sys.modules[name] = module


def image(path: Path) -> str:
    import numpy as np
    from PIL import Image

    pixels = np.zeros((90, 120, 3), np.uint8)
    pixels[10:50, 20:70] = (255, 0, 0)
    pixels[50:80, 70:110] = (0, 0, 255)
    Image.fromarray(pixels).save(path)
    return str(path)


def run(replies: list[str], question: str, options: dict, folder: Path) -> dict:
    import pandas as pd
    from vlmeval.api.thyme_api import ThymeAPI

    input_path = image(folder / "input.png")
    temp = folder / "sandbox"
    model = ThymeAPI(model="Thyme", key="EMPTY", api_base="http://unused", temp_img_dir=str(temp))
    model.set_dump_image(lambda line: input_path)
    line = pd.Series({"index": 0, "question": question, **options, **EMPTY_OPTION})
    inputs = model.build_prompt(line, "VTCBench_680")
    queue, sent = list(replies), []

    def normal(text: str) -> str:
        return text.replace(str(temp), "{temp}").replace(input_path, "{input}")

    def call_api_direct(messages, **kwargs):
        sent.append({"stop": kwargs.get("stop"), "messages": [
            {"role": m["role"], "content": normal(m["content"]) if isinstance(m["content"], str) else
             [normal(p["text"]) if p["type"] == "text" else "<image>" for p in m["content"]]} for m in messages]})
        return 0, queue.pop(0).strip(), None

    model.call_api_direct = call_api_direct
    try:
        outcome = {"prediction": model.generate_inner(inputs, dataset_name="VTCBench_680")[1]}
    except Exception as err:  # noqa: BLE001 - recorded: BaseAPI.generate would run the item again
        outcome = {"raises": type(err).__name__}
    assert not queue, "every scripted reply is used"
    return {"replies": replies, "requests": sent, **outcome}


def driver(tree: Path, out_dir: str) -> None:
    import common

    register_reference(tree)
    committed = json.loads((common.ROOT / VECTORS).read_text(encoding="utf-8"))
    # The old generator's name and versions now live in the "generator" entry.
    header = {k: v for k, v in committed["header"].items() if k not in ("generator", "versions")}
    vectors = {}
    for name, scenario in committed["scenarios"].items():
        with tempfile.TemporaryDirectory() as folder:
            vectors[name] = run(scenario["replies"], header["question"], header["options"], Path(folder))
    common.write_json(out_dir, VECTORS, {"generator": common.header(__file__, REPO_URL, COMMIT, LIBRARIES),
                                         "header": header, "scenarios": vectors})


if __name__ == "__main__":
    if sys.argv[1:2] == ["--driver"]:
        driver(Path(sys.argv[2]), sys.argv[3])
    else:
        import common

        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)
