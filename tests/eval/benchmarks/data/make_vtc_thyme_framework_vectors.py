"""Writes vtc_thyme_framework_vectors.json: VTC-Bench's Thyme framework (VLMEvalKit's ThymeAPI.generate_inner with
ThymePromptMixin's VTCBench prompt and vlm/thyme/sandbox.py) run unmodified on scripted model replies.

Run it outside the repository, in a scratch environment holding the reference's files as the package `vlmeval`
(cs-w0r1d/VTC-Bench@93a33a4: eval/eval/VLMEvalKit/vlmeval/api/thyme_api.py and vlm/thyme/{sandbox,utils,prompt,
conversation_saver}.py, unmodified) with two stand-ins for what they import from the rest of VLMEvalKit:
`vlmeval.smp.listinstr`, `vlmeval.dataset.DATASET_TYPE` (imported, not used for VTCBench), and
`vlmeval.api.gpt.GPT4V` (OpenAIWrapper's attributes, and its prepare_itlist with an image kept as
{"type": "image_url", "path": ...} instead of base64 JPEG), plus numpy, pillow, opencv-python-headless, autopep8,
timeout_decorator, requests, pandas:

    PYTHONPATH=/tmp/ref-thyme venv/bin/python make_vtc_thyme_framework_vectors.py OUT.json

`call_api_direct` (the HTTP request) is replaced by the scripted replies, as a vLLM server returns them: the
stop string cut off. Every request's messages are recorded with the sandbox's folder written `{temp}`, the input
image's path `{input}` and each image part `<image>`.
"""

import json
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from vlmeval.api.thyme_api import ThymeAPI

QUESTION = "Which shape is red?"
OPTIONS = {"A": "circle", "B": "square", "C": "triangle", "D": float("nan")}
SAVE = ("<think>I crop it.</think>\n<code>\n```python\nimport cv2\nimg = cv2.imread(image_path)\n"
        "crop = img[0:40, 0:60]\npath = 'eval/VLMEvalKit/logs/tmp_img/crop.png'\ncv2.imwrite(path, crop)\n"
        "print(path)\nprint('mean', round(float(crop.mean()), 2))\n```\n")
PRINT = ("<code>\n```python\nimg = cv2.imread(image_path)\nprint('height', img.shape[0])\n"
         "print('width', img.shape[1])\n```\n")
NAME_ERROR = "<code>\n```python\ncolors = set([1, 2, 2])\nprint(len(colors))\n```\n"
SYNTAX = "<code>\n```python\nprint('open'\n```\n"
DANGEROUS = "<code>\n```python\nimport os\nos.remove(image_path)\nprint('gone')\n```\n"
SILENT = "<code>\n```python\nx = 1 + 1\n```\n"
BARE = "Let me measure.\n<code>\nimg = cv2.imread(image_path)\nprint('channels', img.shape[2])\n"
CLAMP = ("<code>\n```python\nx1, y1, x2, y2 = (-10, -5, 20, 10)\nimg = cv.imread(image_path)\n"
         "print(x1, y1, x2, y2, img.shape[0])\n```\n")
SCENARIOS = {
    "answer_first": ["<think>The red one is round.</think>\n<answer>A"],
    "image_then_boxed_answer": [SAVE, "<think>Seen.</think>\n<answer>\\boxed{B}"],
    "printed_text_result": [PRINT, "<answer>C"],
    "code_errors_then_alt_answer": [NAME_ERROR, SYNTAX, DANGEROUS, SILENT, "<|answer|>B<|/answer|>"],
    "bare_code_and_clamping": [BARE, CLAMP, "<think>done</think><answer>A"],
    "no_code_no_answer_then_fallback": ["I am not sure yet."] * 5 + ["The square."],
    "iteration_cap_then_fallback": [PRINT] * 25 + ["<answer>B"],
    "alt_answer_pair_raises": ["<|answer|>A<|answer|>"],
}


def image(path: Path) -> str:
    pixels = np.zeros((90, 120, 3), np.uint8)
    pixels[10:50, 20:70] = (255, 0, 0)
    pixels[50:80, 70:110] = (0, 0, 255)
    Image.fromarray(pixels).save(path)
    return str(path)


def run(replies: list[str], folder: Path) -> dict:
    input_path = image(folder / "input.png")
    temp = folder / "sandbox"
    model = ThymeAPI(model="Thyme", key="EMPTY", api_base="http://unused", temp_img_dir=str(temp))
    model.set_dump_image(lambda line: input_path)
    line = pd.Series({"index": 0, "question": QUESTION, **OPTIONS})
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


def main(out: str) -> None:
    vectors = {}
    for name, replies in SCENARIOS.items():
        with tempfile.TemporaryDirectory() as folder:
            vectors[name] = run(replies, Path(folder))
    header = {
        "reference": {"repo": "https://github.com/cs-w0r1d/VTC-Bench",
                      "commit": "93a33a446c1a867b67dd76940a65b91b5b7d500d",
                      "files": ["eval/eval/VLMEvalKit/vlmeval/api/thyme_api.py",
                                "eval/eval/VLMEvalKit/vlmeval/vlm/thyme/sandbox.py",
                                "eval/eval/VLMEvalKit/vlmeval/vlm/thyme/utils.py",
                                "eval/eval/VLMEvalKit/vlmeval/vlm/thyme/prompt.py"]},
        "generator": "tests/eval/benchmarks/data/make_vtc_thyme_framework_vectors.py",
        "versions": {"python": sys.version.split()[0], **{p: version(p) for p in
                     ("numpy", "pillow", "opencv-python-headless", "autopep8", "pandas")}},
        "question": QUESTION, "options": {k: v for k, v in OPTIONS.items() if isinstance(v, str)},
        "image": "120x90 black, (20..70, 10..50) red, (70..110, 50..80) blue, saved as PNG",
    }
    Path(out).write_text(json.dumps({"header": header, "scenarios": vectors}, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
