"""A small Agentic-MME dataset in the published layout (`json/`, `images/`, `image_cause/`, `search_url/`), made by
tirlab for tests and smoke runs: every level, every golden-answer match type the verifier knows (and one it does
not, and an empty answer), S checkpoints on google_search and google_lens_search, V checkpoints with a tool check,
a visual check or both, a task with two images, tasks with and without search; plus rows the loader must skip or
flag (an image no task file's number picks; a task_id whose number is not its file's). `image_cause/` holds each
task's ground-truth crop of its block where it has a V checkpoint (the oracle-guidance ablation's cue), by the
naming rule data.py assumes, and the lens cue where it searches.
`web_replay.jsonl` answers the search calls a forced smoke run makes (`--force_tool_calls`: the tools' required
arguments drawn from the schemas), so such a run needs no network.

    python -m eval.benchmarks.agentic_mme.fixture DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from runtime.trajectory import json_line

STRINGS = ("red", "the left part", "north", "a b c")  # every string eval.forcing draws (the runs test checks it)


def _image(seed: int, size=(64, 48)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    width, height = size
    picture = np.full((height, width, 3), 235, np.uint8)
    x, y = rng.integers(4, width // 2), rng.integers(4, height // 2)
    picture[y:y + height // 3, x:x + width // 3] = rng.integers(0, 255, 3)
    return picture


def _task(number: int, level: int, prompt: str, golden: dict, checkpoints: list, reference_calls: int) -> dict:
    """A task with the fields the reference's runners and evaluator read (task_id, input.prompt, golden_answer,
    meta.level, process_evaluation); the published files may hold more, which nothing of theirs reads."""
    return {"task_id": f"fixture_{number:04d}", "input": {"prompt": prompt}, "golden_answer": golden,
            "meta": {"level": level},
            "process_evaluation": {"checkpoints": checkpoints, "efficiency": {"reference_tool_calls": reference_calls}}}


def _crop_check(cid: str, question: str | None = None, expected: str | None = None, verifier="verify_crop_ast"):
    checkpoint = {"id": cid, "axis": "V", "tools": ["crop"], "description": "Crop the coloured block",
                  "code_check": {"verifier": verifier}}
    if question:
        checkpoint["visual_check"] = {"question": question, "expected_answer": expected}
    return checkpoint


TASKS = {
    1: _task(1, 1, "What colour is the block? Answer with one word.",
             {"value": "red", "match_type": "contains", "tolerance": None},
             [_crop_check("V1", "Does the image show a coloured block? Answer Yes or No.", "Yes")], 1),
    2: _task(2, 1, "How many blocks are there?", {"value": "1", "match_type": "exact", "tolerance": 0},
             [{"id": "V1", "axis": "V", "tools": ["rotate"], "description": "Rotate the image upright",
               "visual_check": {"question": "Is the block in the upper half?", "expected_answer": "Yes"}}], 1),
    3: _task(3, 2, "Compare the two images: how wide is the block in pixels?",
             {"value": "21", "match_type": "numeric", "tolerance": 2},
             [_crop_check("V1"), {"id": "S1", "axis": "S", "tools": ["google_search"],
                                  "description": "Search the block's maker (expected to find: Acme)"}], 3),
    4: _task(4, 2, "Which landmark is this?", {"value": "Eiffel Tower", "match_type": "fuzzy"},
             [{"id": "S1", "axis": "S", "tools": ["google_lens_search"], "description": "Reverse-search the image"},
              _crop_check("V1", "Is there a tower?", "No", verifier="require_op:crop")], 2),
    5: _task(5, 3, "Find the year the company in the image was founded.",
             {"value": "1999", "match_type": "contains", "tolerance": 0},
             [{"id": "S1", "axis": "S", "tools": ["google_lens_search"], "description": "Identify the logo"},
              {"id": "S2", "axis": "S", "tools": ["google_search"],
               "description": "Search the founding year (Expected: 1999)"},
              _crop_check("V1", "Is a logo visible?", "yes")], 4),
    6: _task(6, 3, "Describe the scene.", {"value": "", "match_type": "contains"},
             [], 2),
}
IMAGES = {1: [_image(1)], 2: [_image(2)], 3: [_image(3), _image(33, (40, 40))], 4: [_image(4)], 5: [_image(5)],
          6: [_image(6)]}


def write_fixture(folder: str | Path) -> Path:
    """Write the dataset and its web replay into `folder`; returns it."""
    folder = Path(folder)
    for name in ("json", "images", "image_cause", "search_url"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    for number, config in TASKS.items():
        (folder / "json" / f"{number:04d}.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
        pictures = IMAGES[number]
        for k, picture in enumerate(pictures, 1):
            name = f"image_{number:04d}.png" if len(pictures) == 1 else f"image_{number:04d}_{k}.png"
            Image.fromarray(picture).save(folder / "images" / name)
        axes = {c["axis"] for c in config["process_evaluation"]["checkpoints"]}
        if "S" in axes:
            (folder / "search_url" / f"{number:04d}.json").write_text(
                json.dumps({"task_id": config["task_id"], "urls": [f"https://example.org/fixture/{number}"]}),
                encoding="utf-8")
        if axes:  # the ground-truth crop: the block's quarter of the first image
            height, width = pictures[0].shape[:2]
            Image.fromarray(pictures[0][:height // 2, :width // 2]).save(folder / "image_cause" /
                                                                         f"image_{number:04d}.png")
    # rows the loader skips, with their reasons: no image, not JSON, no number in the name, an image that is no PNG
    (folder / "json" / "0097.json").write_text(json.dumps(_task(97, 1, "Where is my image?", {"value": "x"}, [], 1)),
                                               encoding="utf-8")
    (folder / "json" / "0098.json").write_text("{not json", encoding="utf-8")
    (folder / "json" / "extra.json").write_text(json.dumps(TASKS[1]), encoding="utf-8")
    (folder / "json" / "0099.json").write_text(json.dumps(TASKS[2]), encoding="utf-8")
    (folder / "images" / "image_0099.png").write_bytes(b"not a png")
    Image.fromarray(_image(100)).save(folder / "images" / "image_0100.png")  # no task file numbered 100 takes it
    (folder / "web_replay.jsonl").write_text("".join(json_line(line) + "\n" for line in replay_lines()),
                                             encoding="utf-8")
    return folder


def replay_lines() -> list[dict]:
    """Answers for every search call a forced run of the fixture can make: google_search and fetch_webpage with
    any string eval.forcing draws (gl and hl at the runner's defaults), google_lens_search on each task's first
    image (a forced call names no image: the original)."""
    from eval.benchmarks.agentic_mme import DEFAULT_GL, DEFAULT_HL, image_sha256

    lines = [{"tool": "google_search", "arguments": {"query": q, "gl": DEFAULT_GL, "hl": DEFAULT_HL},
              "reply": f"[Organic]\n1. {q.title()} - Fixture Encyclopedia\n"
                       f"   https://example.org/{q.replace(' ', '_')}\n   Acme founded in 1999; a page about {q}."}
             for q in STRINGS]
    lines += [{"tool": "fetch_webpage", "arguments": {"url": url},
               "reply": f"Title: {url}\n\nThis fixture page says the answer is 1999."} for url in STRINGS]
    lines += [{"tool": "google_lens_search", "arguments": {"image_sha256": image_sha256(pictures[0])},
               "reply": f"[Lens Organic]\n1. Fixture image {number} [example.org]\n"
                        f"   https://example.org/lens/{number}\n   thumbnailUrl: https://example.org/lens/{number}.jpg"}
              for number, pictures in IMAGES.items()]
    return lines


if __name__ == "__main__":
    print(write_fixture(sys.argv[1] if len(sys.argv) > 1 else "agentic_mme_fixture"))
