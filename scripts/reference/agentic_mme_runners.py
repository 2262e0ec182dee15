"""Agentic-MME's local-model runners (Thyme and DeepEyes, atomic and general mode):
tests/eval/benchmarks/data/agentic_mme_runner_vectors.json.

Covers parse_tool_log (both atomic runners), parse_model_output, _normalize_tool_request, _expand_placeholders,
_clean_thyme_code / _clean_deepeyes_code on designed inputs, and whole episodes (run_one / run_one_rollout): every
request's messages as the wrapper hands them to the chat template (images as their size, each system prompt once
under its SHA-256), its generation settings, the stored answer and the tool-use list. The designed inputs (reply
texts, model scripts, task prompts and image sizes) are in this script.

The driver imports the runners from the reference tree unmodified. They load a transformers checkpoint at import
and call it in `chat_completions_create`: `torch` and `transformers` are stubbed, and each wrapper is built without
its __init__ around a fake processor and model, so that the runners' own message conversion runs and the "model"
answers from a script. Search goes through the runners' own SearchTools with the network functions of
search_tools.py (google_search, google_lens_search, jina_read) replaced by canned answers. The general runners run
the model's code with the scratch venv's python, which has OpenCV.

    .venv/bin/python scripts/reference/agentic_mme_runners.py --source PATH/TO/Agentic-MME \
        [--check]
"""

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import types
from pathlib import Path

REPO_URL = "https://github.com/ChoS3nE11ven/Agentic-MME"
COMMIT = "5e5dfbdc7b40b53dea17d5ce754c14034acb185b"
LIBRARIES = ["pillow", "numpy", "opencv-python-headless", "requests"]
REQUIREMENTS = ["pillow==13.0.0", "numpy==2.4.6", "opencv-python-headless==5.0.0.93", "requests==2.34.2"]
VECTORS = "tests/eval/benchmarks/data/agentic_mme_runner_vectors.json"
OUTPUTS = [VECTORS]
SOURCE_FILES = ["atomic/run_atomic_tools_thyme.py", "atomic/run_atomic_tools_deepeyes.py",
                "general/run_general_script_thyme.py", "general/run_general_script_deepeyes.py",
                "general/run_general_script_openai.py", "search_tools.py", "common_utils.py"]


class _NoGrad:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def load_reference(tree: str) -> types.SimpleNamespace:
    """The runner modules of the reference tree, torch and transformers stubbed and the web replaced."""
    torch = types.ModuleType("torch")
    torch.no_grad, torch.bfloat16 = _NoGrad, "bfloat16"
    transformers = types.ModuleType("transformers")
    transformers.AutoProcessor = transformers.Qwen2_5_VLForConditionalGeneration = object
    sys.modules.update(torch=torch, transformers=transformers)
    sys.path.insert(0, tree)

    import search_tools
    from atomic import run_atomic_tools_deepeyes, run_atomic_tools_thyme
    from general import run_general_script_deepeyes, run_general_script_openai, run_general_script_thyme

    search_tools.google_search = lambda query, **kw: ({}, f"Search results for: {query}")
    search_tools.google_lens_search = lambda image_path=None, **kw: ({}, f"Lens results for {Path(image_path).name}",
                                                                      "https://i.ibb.co/lens.png")
    search_tools.jina_read = lambda url, **kw: f"Page text of {url} " + "x" * 40
    os.environ["SERPER_API_KEY"] = "unused"  # SearchConfig requires one; no request is made
    return types.SimpleNamespace(atm_thyme=run_atomic_tools_thyme, atm_deepeyes=run_atomic_tools_deepeyes,
                                 gen_thyme=run_general_script_thyme, gen_deepeyes=run_general_script_deepeyes,
                                 gen_openai=run_general_script_openai)


class Script:
    """The model: replies from a script; records what each request handed the chat template."""

    def __init__(self, replies):
        self.replies, self.requests = list(replies), []

    def wrapper(self, cls):
        model = object.__new__(cls)
        script = self

        class Inputs(dict):
            def to(self, device):
                return self

        class Ids:
            shape = (1, 0)

        class Processor:
            tokenizer = types.SimpleNamespace(pad_token_id=0, eos_token_id=1)

            def apply_chat_template(self, messages, tokenize, add_generation_prompt):
                script.requests.append({"messages": [_shown(m) for m in messages]})
                return ""

            def __call__(self, text, images=None, return_tensors=None, padding=None):
                return Inputs(input_ids=Ids())

            def batch_decode(self, outputs, skip_special_tokens):
                return [script.replies.pop(0)]

        class Model:
            device = "cpu"

            def generate(self, **kwargs):
                script.requests[-1]["generate"] = {k: kwargs[k] for k in ("max_new_tokens", "temperature", "do_sample",
                                                                          "stop_strings") if k in kwargs}
                return _Out()

        model.processor, model.model, model.device = Processor(), Model(), "cpu"
        return model


class _Out:
    def __getitem__(self, key):
        return self


def _shown(message):
    content = message["content"]
    if isinstance(content, list):
        content = [{"type": "image", "size": list(p["image"].size)} if p["type"] == "image" else p for p in content]
    return {"role": message["role"], "content": content}


def _task(root: Path, prompt: str, sizes) -> Path:
    import numpy as np
    from PIL import Image

    (root / "json").mkdir(parents=True)
    (root / "images").mkdir()
    for k, (width, height) in enumerate(sizes):
        picture = np.zeros((height, width, 3), np.uint8)
        picture[: height // 2] = (200, 30, 30)
        picture[height // 2:, : width // 3] = (20, 160, 40)
        name = "image_0001.png" if len(sizes) == 1 else f"image_0001_{k + 1}.png"
        Image.fromarray(picture).save(root / "images" / name)
    path = root / "json" / "0001.json"
    path.write_text(json.dumps({"task_id": "t1", "input": {"prompt": prompt}}))
    return path


def _paths(value, root: Path):
    """Paths made portable: {RUN_DIR} for the task's run folder, {PYTHON} for the interpreter that runs the code
    (the general runners record it in their tool-use list)."""
    text = json.dumps(value, ensure_ascii=False)
    return json.loads(text.replace(str(root.resolve() / "out" / "0001"), "{RUN_DIR}")
                      .replace(str(root / "out" / "0001"), "{RUN_DIR}").replace(sys.executable, "{PYTHON}"))


def episode(ref, runner: str, track: str, replies, prompt="What colour is the top half?", sizes=((64, 48),)):
    module = {("thyme", "atm"): ref.atm_thyme, ("deepeyes", "atm"): ref.atm_deepeyes, ("thyme", "gen"): ref.gen_thyme,
              ("deepeyes", "gen"): ref.gen_deepeyes}[runner, track]
    script = Script(replies)
    wrapper_cls = getattr(module, "ThymeModelWrapper" if runner == "thyme" else "DeepEyesModelWrapper")
    client_cls = getattr(module, "ThymeClient" if runner == "thyme" else "DeepEyesClient")
    client = client_cls(script.wrapper(wrapper_cls))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        task = _task(root, prompt, sizes)
        settings = dict(client=client, task_json=task, dataset_root=root, images_dir=root / "images",
                        out_dir=root / "out", model=runner, temperature=0.0, max_rounds=15, max_tool_calls=15,
                        enable_search=True, search_cfg_path=None)
        if track == "atm":
            meta = module.run_one(**settings)
        else:
            meta = module.run_one_rollout(python_exe=sys.executable, **settings)
        run_dir = root / "out" / "0001"
        answer = (run_dir / "model_answer.txt").read_text(encoding="utf-8")
        tool_use = json.loads((run_dir / "tool_use_list.json").read_text())
        for use in tool_use:
            use.pop("timestamp", None)
        return _paths({"runner": runner, "track": track, "prompt": prompt, "sizes": [list(s) for s in sizes],
                       "replies": list(replies), "requests": script.requests, "answer": answer,
                       "api_calls": meta["usage"]["api_calls"], "tool_use_list": tool_use}, root)


CROP = '{"tool_name": "crop", "arguments": {"image_index": 0, "bbox_2d": [0, 0, 500, 500], "label": "top left"}}'
SEARCH = '{"tool_name": "google_search", "arguments": {"query": "red flag"}}'


def atm_episodes(ref, runner):
    many = f"<think>look</think>\n<tool_log>\n[{CROP}, {SEARCH}]\n</tool_log>"
    return [
        # no tool_log in the first turn: the reminder; calls of every kind; the answer as the raw reply
        episode(ref, runner, "atm", [
            "I think it is red.",
            f"<tool_log>[{CROP}, {SEARCH}, "
            '{"tool_name": "image_zoom_in_tool", "arguments": {"bbox_2d": [1, 2, 3, 4]}}, '
            '{"tool_name": "rotate", "arguments": {"image_index": 7, "angle": 90}}, '
            '{"tool_name": "google_lens_search", "arguments": {"image_index": 1}}, '
            '{"tool_name": "fetch_webpage", "arguments": {"url": "https://example.com/a", "max_chars": 30}}, '
            '{"tool_name": "grayscale", "arguments": {"image_index": 1}}]</tool_log>',
            "<think>done</think>\n<answer>red</answer>"]),
        # the budget (15 calls) spent in the eighth round; rounds run out; the final request
        episode(ref, runner, "atm", [many] * 15 + ["The answer is red."]),
        # two images; an empty tool_log in the first turn; [[...]] flattened; JSON that does not parse ends it
        episode(ref, runner, "atm", [
            "<tool_log>[]</tool_log>",
            '<tool_log>[[{"tool_name": "flip", "arguments": {"image_index": 1, "direction": "vertical"}}, 5]]'
            "</tool_log>",
            "<tool_log>[{'tool_name': 'crop'}]</tool_log> <answer>green</answer>"],
            prompt="Which image is larger?", sizes=((64, 48), (40, 30))),
    ]


def gen_episodes(ref, runner):
    save = ("<think>crop</think>\n<code>\n```python\nfrom PIL import Image\nimg = Image.open(\"image_0.png\")\n"
            "img.crop((0, 0, 32, 24)).save(\"/mnt/data/image_1.png\")\nprint(img.size)\n```\n</code>")
    tools = ('<tool_log>\n[{"tool_name": "google_search", "arguments": {"query": "red flag"}}, '
             '{"tool_name": "google_lens_search", "arguments": {"image_path": "image_1.png"}}, '
             '{"tool": "fetch_webpage", "url": "https://example.com/b"}, '
             '{"arguments": {"query": "no name"}}, '
             '{"tool_name": "google_lens_search", "arguments": {"image_ref": "original"}}]\n</tool_log>')
    many = ('<tool_log>[{"tool_name": "google_search", "arguments": {"query": "a"}}, '
            '{"tool_name": "fetch_webpage", "arguments": {}}]</tool_log>')
    return [
        # code that saves (the save redirected), the search tools, then code with an answer in the same reply
        episode(ref, runner, "gen", [
            save, tools,
            "<code>\nimport cv2\nimg = cv2.imread('image_0.png')\nprint(img.shape)\n"
            "cv2.imwrite('transformed_image_2.png', img)\n</code>\n<answer>red</answer>"]),
        # tool_log wins over code in the same reply; code that fails; a reply with only a think block
        episode(ref, runner, "gen", [
            tools.replace("image_1.png", "image_9.png") + "\n<code>\nprint('not run')\n</code>",
            "<code>\nprint('tool_name google_search')\nraise ValueError('boom')\n</code>",
            "<think>I am not sure.</think>"]),
        # the budget spent; rounds run out; the final request
        episode(ref, runner, "gen", [many] * 15 + ["It is red."]),
        # a reply without any tag is the answer
        episode(ref, runner, "gen", ["red"]),
    ]


def vectors(ref) -> dict:
    parse_inputs = [
        "", "no tags", "<tool_log></tool_log>", "<tool_log> [] </tool_log>", f"<TOOL_LOG>[{CROP}]</tool_log>",
        f"<tool_log>[[{CROP}, {SEARCH}]]</tool_log>", f"<tool_log>[[{CROP}], [{SEARCH}]]</tool_log>",
        f"<tool_log>[{CROP}, 3, \"x\"]</tool_log>", f"<tool_log>{CROP}</tool_log>", "<tool_log>[{bad json]</tool_log>",
        f"<tool_log>[{CROP}]</tool_log> then <tool_log>[{SEARCH}]</tool_log>", f"<tool_log>[{CROP}]",
        f"<think>a</think><code>print(1)</code><tool_log>[{SEARCH}]</tool_log><answer> x </answer>",
        "<answer>open ended", "<thinking>t</thinking> text", "<code>\n```python\nprint(2)\n```\n</code>",
        "<code>```\nprint(3)```</code>", "<code>   </code> plain", "<Answer>A</ANSWER><answer>B</answer>",
    ]
    found = {
        "parse_tool_log": [{"text": t, "out": list(ref.atm_thyme.parse_tool_log(t))} for t in parse_inputs],
        "parse_tool_log_deepeyes": [{"text": t, "out": list(ref.atm_deepeyes.parse_tool_log(t))} for t in parse_inputs],
        "parse_model_output": [{"text": t, "out": list(ref.gen_openai.parse_model_output(t))} for t in parse_inputs],
        "normalize_tool_request": [
            {"entry": e, "out": list(ref.gen_openai._normalize_tool_request(e))} for e in (
                {"tool_name": "google_search", "arguments": {"query": "q"}}, {"tool": " fetch_webpage ", "url": "u"},
                {"name": "google_lens_search", "arguments": "x", "image_ref": "current"}, {"arguments": {"query": "q"}},
                {"tool_name": "", "tool": "google_search", "query": "q"}, {"tool_name": 7, "arguments": [1]},
                {"tool_name": None, "name": "x", "arguments": None})],
        "expand_placeholders": [
            {"value": v, "out": ref.gen_openai._expand_placeholders(v, {
                "LOCAL_INPUT_IMAGE_PATH": "/run/cur.png", "PROCESSED_IMAGE_SAVE_PATH": "/run/tool_images"})}
            for v in ("${LOCAL_INPUT_IMAGE_PATH}", "a ${PROCESSED_IMAGE_SAVE_PATH}/x ${OTHER} $HOME",
                      {"k": ["${LOCAL_INPUT_IMAGE_PATH}", 3, {"n": "${PROCESSED_IMAGE_SAVE_PATH}"}]}, 5, None)],
    }
    code_inputs = [
        "print(1)", "```python\nimport os\nprint(2)\n```", "x = '/mnt/data/temp_processed_images/a.png'\n"
        "y = '/mnt/data/b.png'\nz = '/d/data/temp_processed_images/c.png'\nw = '/d/data/d.png'\nv = '/tmp/e.png'",
        "```\nprint(3)\n```\n```python\nprint(4)\n```",
        "print('tool_name')\n[{'a': 1}]\n  [{'b': 2}]\nx = 'google_search'\n"
        "print(5)", "no import here", "",
    ]
    for runner, clean in (("thyme", ref.gen_thyme._clean_thyme_code),
                          ("deepeyes", ref.gen_deepeyes._clean_deepeyes_code)):
        found[f"clean_{runner}_code"] = [{"code": c, "turn": t, "out": clean(c, Path("/unused"), turn=t)}
                                         for c in code_inputs for t in (0, 4)][:10] + \
            [{"code": c, "turn": 0, "out": clean(c, Path("/unused"), turn=0)} for c in code_inputs[5:]]
    found["episodes"] = atm_episodes(ref, "thyme") + atm_episodes(ref, "deepeyes") + gen_episodes(ref, "thyme") + \
        gen_episodes(ref, "deepeyes")
    return found


def drive(tree: str, out_dir: str) -> None:
    ref = load_reference(tree)
    with contextlib.redirect_stdout(sys.stderr):  # the general runners print debug lines of their own
        found = vectors(ref)
    systems = {}
    for case in found["episodes"]:  # each distinct system prompt once, requests name it by its SHA-256
        for request in case["requests"]:
            for message in request["messages"]:
                if message["role"] == "system":
                    digest = hashlib.sha256(message["content"].encode()).hexdigest()
                    systems[digest] = message["content"]
                    message["content"] = {"sha256": digest}
    common.write_json(out_dir, VECTORS, {
        "generator": common.header(__file__, REPO_URL, COMMIT, LIBRARIES),
        "_header": {"source": {"repo": REPO_URL, "commit": COMMIT, "files": SOURCE_FILES}},
        "system_prompts": systems, **found}, indent=None)


if __name__ == "__main__":
    import common  # before the reference tree joins sys.path

    if sys.argv[1:2] == ["--driver"]:
        drive(sys.argv[2], sys.argv[3])
    else:
        common.main(__file__, REPO_URL, COMMIT, REQUIREMENTS, OUTPUTS)
