"""A small VisualToolBench dataset in the layout the benchmark's download_dataset.py writes (`data/single_turn/` and
`data/multi_turn/`, each a `dataset.json` and `images/sample_<k>/`, the hub's columns at data.REVISION), made by
tirlab for tests and smoke runs: three single-turn and three multi-turn tasks (two and three turns, one turn without
an image) in all five domains, rubric weights 1-5 with and without a critical flag, rubrics stored as JSON strings as
the hub stores them. The shipped
`web_replay.jsonl` answers the web calls a forced smoke run makes (`--force_tool_calls`: the tools' required
arguments drawn from the schemas) and those of the scripted runs in the tests, so no run needs the network.

    python -m eval.benchmarks.visualtoolbench.fixture DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

STRINGS = ("red", "the left part", "north", "a b c")  # every string eval.forcing draws


def picture(seed: int, size=(64, 48)) -> np.ndarray:
    """A pale image with two coloured blocks (the tasks ask about them)."""
    rng = np.random.default_rng(seed)
    width, height = size
    image = np.full((height, width, 3), 230, np.uint8)
    image[4:16, 4:20] = rng.integers(0, 255, 3)
    image[height - 16:height - 4, width - 24:width - 6] = rng.integers(0, 255, 3)
    return image


def rubrics(*items) -> str:
    """A turn's rubrics as the hub stores them: a JSON string of {rubric_id: {...}}."""
    return json.dumps({f"rubric_{k}": {"description": description, "weight": weight, "type": kind,
                                       "category": category, **({"critical": critical} if critical else {})}
                       for k, (description, weight, kind, category, critical) in enumerate(items, 1)})


SINGLE = [
    {"id": "vtb_fixture_s0", "prompt_category": "maths", "eval_focus": "region_switch",
     "turn_prompts": ["How many pixels wide is the top-left block?"], "turn_golden_answers": ["16 pixels."],
     "rubrics_by_turn": [rubrics(("The model says the block is 16 pixels wide.", 5, "objective", "accuracy", "Yes"),
                                 ("The model explains how it measured.", 2, "subjective", "reasoning", "No"))],
     "images": [picture(1)]},
    {"id": "vtb_fixture_s1", "prompt_category": "finance", "eval_focus": "hybrid_tool",
     "turn_prompts": ["The price tag shows 12 dollars; what is it with 8% tax?"], "turn_golden_answers": ["$12.96"],
     "rubrics_by_turn": [rubrics(("The model reports $12.96.", 4, "objective", "accuracy", None),
                                 ("The model shows the tax computation.", 3, "subjective", "reasoning", None),
                                 ("The answer is concise.", 1, "subjective", "style", None))],
     "images": [picture(2)]},
    {"id": "vtb_fixture_s2", "prompt_category": "sports", "eval_focus": "region_switch",
     "turn_prompts": ["Which corner holds the darker block?"], "turn_golden_answers": ["The bottom-right corner."],
     "rubrics_by_turn": [rubrics(("The model names the bottom-right corner.", 5, "objective", "accuracy", "Yes"))],
     "images": [picture(3)]},
]
MULTI = [
    {"id": "vtb_fixture_m0", "prompt_category": "medical", "eval_focus": "temporal_reasoning",
     "turn_prompts": ["Describe the first scan.", "Compared with the first scan, what changed?"],
     "turn_golden_answers": ["Two blocks on a pale background.", "The blocks changed colour."],
     "rubrics_by_turn": [rubrics(("The model mentions two blocks.", 4, "objective", "accuracy", "Yes")),
                         rubrics(("The model says the colours changed.", 5, "objective", "accuracy", "Yes"),
                                 ("The model is cautious about a diagnosis.", 2, "subjective", "safety", "No"))],
     "images_by_turn": [[picture(4)], [picture(5)]]},
    {"id": "vtb_fixture_m1", "prompt_category": "generalist", "eval_focus": "progressive_reasoning",
     "turn_prompts": ["What is in the photo?", "Where is the smaller block?", "So which block would you crop first?"],
     "turn_golden_answers": ["Two blocks.", "Top left.", "The top-left one."],
     "rubrics_by_turn": [rubrics(("The model sees two blocks.", 3, "objective", "accuracy", None)),
                         rubrics(("The model says top left.", 5, "objective", "accuracy", None)),
                         rubrics(("The model picks the top-left block.", 4, "objective", "accuracy", None),
                                 ("The model refers to its earlier answer.", 1, "subjective", "reasoning", None))],
     "images_by_turn": [[picture(6)], [picture(7, (80, 40))], []]},
    {"id": "vtb_fixture_m2", "prompt_category": "chemistry", "eval_focus": "follow_up",
     "turn_prompts": ["Read the label.", "It is the flask on the right. What colour is its label?"],
     "turn_golden_answers": ["Which flask do you mean?", "Its label is the bottom-right block's colour."],
     "rubrics_by_turn": [rubrics(("The model asks which flask is meant.", 5, "objective", "instruction", "Yes")),
                         rubrics(("The model names the right label's colour.", 5, "objective", "accuracy", "Yes"))],
     "images_by_turn": [[picture(8)], [picture(9)]]},
]


def write_fixture(folder: str | Path) -> Path:
    """Write the dataset (under `folder`/data) and its web replay into `folder`; returns `folder`. Each row is what
    download_dataset.py writes from a hub row (the columns of the hub's README at data.REVISION, in its order, then
    `image_paths` and `images_by_turn_paths`): the flat `images` saved as image_<k>.png and `images_by_turn` as
    turn_<t>_image_<k>.png, a single-turn row's one turn included."""
    folder = Path(folder)
    for kind, rows in (("single_turn", SINGLE), ("multi_turn", MULTI)):
        out = []
        for sample, row in enumerate(rows):
            images = folder / "data" / kind / "images" / f"sample_{sample}"
            images.mkdir(parents=True, exist_ok=True)
            turns = len(row["turn_prompts"])
            by_turn = row.get("images_by_turn") or [row["images"]]
            flat = [image for turn in by_turn for image in turn]
            written = {"id": row["id"], "turncase": "single-turn" if turns == 1 else "multi-turn", "num_turns": turns,
                       "prompt_category": row["prompt_category"], "eval_focus": row["eval_focus"],
                       "turn_prompts": row["turn_prompts"], "turn_golden_answers": row["turn_golden_answers"],
                       "turn_tool_trajectories": [json.dumps([{"tool": "python_image_processing"}])] * turns,
                       "rubrics_by_turn": row["rubrics_by_turn"], "num_images": len(flat)}
            paths = []
            for k, image in enumerate(flat):
                Image.fromarray(image).save(images / f"image_{k}.png")
                paths.append(f"data/{kind}/images/sample_{sample}/image_{k}.png")
            turn_paths = []
            for turn, listed in enumerate(by_turn):
                names = []
                for k, image in enumerate(listed):
                    Image.fromarray(image).save(images / f"turn_{turn}_image_{k}.png")
                    names.append(f"data/{kind}/images/sample_{sample}/turn_{turn}_image_{k}.png")
                turn_paths.append(names)
            out.append({**written, "image_paths": paths, "images_by_turn_paths": turn_paths})
        (folder / "data" / kind / "dataset.json").write_text(json.dumps(out, indent=2), encoding="utf-8")
    lines = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in replay_lines())
    (folder / "web_replay.jsonl").write_text(lines, encoding="utf-8")
    return folder


def replay_lines() -> list[dict]:
    """Answers (str() of the reference tools' dicts, as a live run records them) for every web call a forced run
    can make (each string eval.forcing draws; google_search with the default num_results) and the scripted ones."""
    lines = []
    for query in (*STRINGS, "sales tax 8 percent"):
        result = {"results": [{"title": f"{query.title()} - Fixture Encyclopedia", "snippet": f"A page about {query}.",
                               "url": f"https://example.org/{query.replace(' ', '_')}",
                               "display_link": "example.org"}], "query": query, "status": "success",
                  "total_results": 1}
        lines.append({"tool": "google_search", "arguments": {"query": query, "num_results": 5}, "reply": str(result)})
    for url in (*STRINGS, "https://example.org/tax"):
        result = {"url": url, "title": "Fixture page", "text": "Sales tax here is 8 percent.", "status": "success",
                  "content_length": 28}
        lines.append({"tool": "browser_get_page_text", "arguments": {"url": url}, "reply": str(result)})
    for location in STRINGS:
        for date in STRINGS:
            result = {"location": location, "date": date, "coordinates": "48.85, 2.35",
                      "temperature": {"current": "12.0°C", "feels_like": "11.0°C", "min": "10.0°C", "max": "14.0°C"},
                      "conditions": "light rain", "humidity": "80%", "wind_speed": "3.1 m/s", "pressure": "1012 hPa",
                      "status": "success", "note": "Current weather data (historical requires paid plan)"}
            lines.append({"tool": "historical_weather", "arguments": {"location": location, "date": date},
                          "reply": str(result)})
    return lines


if __name__ == "__main__":
    print(write_fixture(sys.argv[1] if len(sys.argv) > 1 else "visualtoolbench_fixture"))
