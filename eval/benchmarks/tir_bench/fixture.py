"""A small TIR-Bench in the published layout, so tests and CPU smoke runs load it through the same code path as
the hub data (HF `Agents-X/TIR-Bench`): `TIR-Bench.json`, a JSON list of rows

    {"meta_data": {}, "task": "maze", "answer": "D", "prompt": "...", "image_1": "data/maze/1.png",
     "image_2": null, "id": 10}

and `data.zip`, which extracts to `data/<task>/<file>`. All 13 task keys appear, `per_task` rows each. Images come
from the `data_gen` generators where a task maps onto one and are drawn here otherwise (color: a colour-blindness
plate; math: a right triangle); prompts follow TIR-Bench's wording and option styles ("A. x" lines, "A: x%"
lines, inline "(A) x"). Answers are strings, as in the published file, except the first math row's, a JSON
integer, so a loader meets both. `meta_data` is `{}` except jigsaw's `{"difficulty": n}` (an n x n grid), which
the official scorer reads. OCR images are PNG: the official scorer special-cases image names containing
"60.jpg" and "62.jpg".

    python -m eval.benchmarks.tir_bench.fixture OUT_DIR [--per_task N]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import string
import zipfile
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from data_gen.tasks import (
    color_proportion,
    instrument,
    jigsaw,
    low_light,
    maze,
    rotated_ocr,
    rotation_game,
    spot_difference,
    symbolic,
    visual_search,
    word_search,
)
from data_gen.text import fonts

TASKS = ("ocr", "maze", "color", "math", "word_search", "jigsaw", "rotation_game", "refcoco", "spot_difference",
         "visual_search", "symbolic", "contrast", "instrument")
JSON_NAME, ZIP_NAME = "TIR-Bench.json", "data.zip"
ZIP_DATE = (2025, 11, 1, 0, 0, 0)  # a fixed timestamp, so the archive's bytes depend on the seed only
JIGSAW_PROMPT = (
    "Instructions: Please complete the jigsaw puzzle shown in the image. The original image has been divided into "
    "{n}\u00d7{n} pieces and scrambled. In the image, each piece is numbered from 1 to {count}. Your task is to "
    "determine the correct arrangement to restore the original image.\n\nQuestion: In what order should the numbered "
    "pieces be arranged to reconstruct the original image?\n\nPlease provide your answer as a sequence indicating "
    "where each numbered piece should be placed in the final arrangement (reading from left to right, top to "
    "bottom).\nFor example, 1, 16, 15, 2, 14, 8, 13, 5, 6, 7, 3, 9, 10, 11, 4, 12."
)
ROTATION_PROMPT = "How many degrees should you rotate this image CLOCKWISE to restore it to its original orientation?"
REFCOCO_PROMPT = "Which of the following values is the closest to the proportion of the image occupied by {name}?"
PLATE_PROMPT = "What is the number in the center of this image? Select from the following choices. {options}"
TRIANGLE_PROMPT = ("As shown in the figure, in right triangle ABC, \u2220C = 90\u00b0, AC = {a} and BC = {b}. "
                   "What is the length of AB?")
TRIPLES = ((3, 4, 5), (6, 8, 10), (5, 12, 13), (8, 15, 17), (9, 12, 15), (7, 24, 25))


def write_fixture(out_dir: Path, per_task: int = 1, seed: int = 0, zipped: bool = True) -> Path:
    """Write `TIR-Bench.json` and the images under `out_dir` (packed into `data.zip`, the extracted `data/`
    removed, when `zipped`, so a loader's unzip path runs); returns `out_dir`."""
    if per_task < 1:
        raise ValueError(f"per_task must be at least 1, got {per_task}")
    out_dir = Path(out_dir)
    data_dir = out_dir / "data"
    if any((out_dir / name).exists() for name in ("data", JSON_NAME, ZIP_NAME)):
        raise FileExistsError(f"{out_dir} already holds a TIR-Bench copy; write the fixture into a new folder")
    rows = []
    for task in TASKS:
        for k in range(per_task):
            row_seed = seed * 1000 + k
            item = BUILDERS[task](row_seed, k)
            images = item.pop("images")
            paths = []
            for number, (suffix, array) in enumerate(images, 1):
                name = f"{k + 1}{f'_{number}' if len(images) > 1 else ''}.{suffix}"
                path = data_dir / task / name
                path.parent.mkdir(parents=True, exist_ok=True)
                _save(array, path)
                paths.append(f"data/{task}/{name}")
            rows.append({"meta_data": item.get("meta_data", {}), "task": task, "answer": item["answer"],
                         "prompt": item["prompt"], "image_1": paths[0], "image_2": paths[1] if len(paths) > 1 else None,
                         "id": len(rows)})
    (out_dir / JSON_NAME).write_text(json.dumps(rows, ensure_ascii=False, indent=4), encoding="utf-8")
    if zipped:
        _zip(data_dir, out_dir / ZIP_NAME)
        shutil.rmtree(data_dir)
    return out_dir


def _save(array: np.ndarray, path: Path) -> None:
    image = Image.fromarray(array)
    if path.suffix == ".jpg":
        image.save(path, quality=90)
    else:
        image.save(path)


def _zip(data_dir: Path, target: Path) -> None:
    """`data/` as `zip -r data.zip data` packs it: folder entries first, paths relative to the archive root."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted([data_dir, *data_dir.rglob("*")]):
            name = path.relative_to(data_dir.parent).as_posix()
            if path.is_dir():
                archive.writestr(zipfile.ZipInfo(name + "/", ZIP_DATE), b"")
            else:
                info = zipfile.ZipInfo(name, ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())


def _letters(count: int) -> str:
    return string.ascii_uppercase[:count]


def _option_lines(values, separator: str = ". ") -> str:
    return "\n".join(f"{letter}{separator}{value}" for letter, value in zip(string.ascii_uppercase, values))


def _choices(rng: random.Random, truth, distractors) -> tuple[list, str]:
    """The truth among distractors in a seeded order, and its letter."""
    options = [truth, *distractors]
    rng.shuffle(options)
    return options, _letters(len(options))[options.index(truth)]


def _difficulty(k: int) -> str:
    return ("easy", "medium")[k % 2]


# == tasks with a generator ===========================================================================================
def _ocr(seed: int, k: int) -> dict:
    sample = rotated_ocr.generate(seed, _difficulty(k))
    return {"images": [("png", sample.image)], "prompt": sample.question, "answer": sample.answer}


def _maze(seed: int, k: int) -> dict:
    sample = maze.generate(seed, _difficulty(k))
    return {"images": [("png", sample.image)], "prompt": sample.question, "answer": sample.answer}


def _word_search(seed: int, k: int) -> dict:
    sample = word_search.generate(seed, _difficulty(k), kind=("position", "count")[k % 2])
    return {"images": [("png", sample.image)], "prompt": sample.question, "answer": sample.answer}


def _jigsaw(seed: int, k: int) -> dict:
    """TIR-Bench's pieces carry their number (1..n*n, row-major in the shuffled image) printed on them."""
    sample = jigsaw.generate(seed, ("easy", "medium", "hard")[k % 3], base=1)
    n, (tw, th) = sample.meta["grid"], sample.meta["tile"]
    image = sample.image.copy()
    for slot in range(n * n):
        row, col = divmod(slot, n)
        origin = (col * tw + 6, row * th + 26)
        cv2.putText(image, str(slot + 1), origin, cv2.FONT_HERSHEY_SIMPLEX, 0.8, (255, 255, 255), 4, cv2.LINE_AA)
        cv2.putText(image, str(slot + 1), origin, cv2.FONT_HERSHEY_SIMPLEX, 0.8, (20, 20, 20), 2, cv2.LINE_AA)
    return {"images": [("jpg", image)], "prompt": JIGSAW_PROMPT.format(n=n, count=n * n),
            "answer": sample.answer, "meta_data": {"difficulty": n}}


def _rotation_game(seed: int, k: int) -> dict:
    sample = rotation_game.generate(seed, _difficulty(k))
    options = _option_lines(f"{degrees}\u00b0" for degrees in sample.meta["options"])
    return {"images": [("jpg", sample.image)], "prompt": f"{ROTATION_PROMPT}\n\n{options}", "answer": sample.answer}


def _refcoco(seed: int, k: int) -> dict:
    """A proportion question with six options 8 points apart, as TIR-Bench builds them from RefCOCO masks."""
    sample = color_proportion.generate(seed, _difficulty(k))
    rng = random.Random(f"refcoco:{seed}")
    truth = round(sample.meta["truth_pct"])
    below = rng.randint(max(0, 5 - (100 - truth) // 8), min(5, truth // 8))  # options below the truth, all in 0-100
    options = [truth + 8 * (i - below) for i in range(6)]
    rng.shuffle(options)
    prompt = REFCOCO_PROMPT.format(name=f"the {sample.meta['color']} region") + "\n" + _option_lines(
        (f"{v}%" for v in options), ": ")
    return {"images": [("jpg", sample.image)], "prompt": prompt, "answer": _letters(6)[options.index(truth)]}


def _spot_difference(seed: int, k: int) -> dict:
    """TIR-Bench shows the two scenes as two images; the generator's side-by-side image is cut in its halves."""
    sample = spot_difference.generate(seed, _difficulty(k))
    (w, _), gap = sample.meta["half"], sample.meta["gap"]
    left, right = sample.image[:, :w], sample.image[:, w + gap:w + gap + w]
    answer = ", ".join(str(patch) for patch in json.loads(sample.answer))
    return {"images": [("png", np.ascontiguousarray(left)), ("png", np.ascontiguousarray(right))],
            "prompt": sample.question, "answer": answer}


def _visual_search(seed: int, k: int) -> dict:
    sample = visual_search.generate(seed, "easy", kind="color")
    question = sample.question.split("\n")[0]
    options = _option_lines(name.capitalize() for name in sample.meta["options"])
    return {"images": [("jpg", sample.image)], "prompt": f"{question}\n{options}", "answer": sample.answer}


def _symbolic(seed: int, k: int) -> dict:
    sample = symbolic.generate(seed, _difficulty(k), form="integer")
    return {"images": [("png", sample.image)], "prompt": sample.question, "answer": sample.answer}


def _contrast(seed: int, k: int) -> dict:
    sample = low_light.generate(seed, _difficulty(k), question="count")
    return {"images": [("jpg", sample.image)], "prompt": sample.question, "answer": sample.answer}


def _instrument(seed: int, k: int) -> dict:
    sample = instrument.generate(seed, _difficulty(k), answer_format="numeric")
    return {"images": [("jpg", sample.image)], "prompt": sample.question, "answer": sample.answer}


# == tasks drawn here ================================================================================================
def _color(seed: int, k: int) -> dict:
    """A colour-blindness plate (ColorBench's kind of item): a two-digit number in dots of one hue among dots of
    another."""
    rng = random.Random(f"color:{seed}")
    number = rng.randint(10, 99)
    size, radius = 360, 170
    mask = Image.new("L", (size, size), 0)
    font = ImageFont.truetype(str(next(f for f in fonts() if f.name == "DejaVuSans-Bold.ttf")), 170)
    ImageDraw.Draw(mask).text((size / 2, size / 2), str(number), fill=255, font=font, anchor="mm")
    figure = np.asarray(mask) > 0
    plate = Image.new("RGB", (size, size), (255, 255, 255))
    draw = ImageDraw.Draw(plate)
    for _ in range(2200):
        x, y, r = rng.uniform(0, size), rng.uniform(0, size), rng.uniform(3, 8)
        if (x - size / 2) ** 2 + (y - size / 2) ** 2 > (radius - r) ** 2:
            continue
        inside = figure[int(y), int(x)]
        hue = (rng.randint(200, 240), rng.randint(80, 140), rng.randint(40, 90)) if inside else \
              (rng.randint(110, 160), rng.randint(160, 200), rng.randint(60, 110))
        draw.ellipse([x - r, y - r, x + r, y + r], fill=hue)
    near = (int(str(number)[::-1]), number + 1, number - 1, number + 10, number - 10, number + 2, number - 2)
    distractors = list(dict.fromkeys(v for v in near if v != number and 10 <= v <= 99))[:3]
    options, answer = _choices(rng, number, distractors)
    inline = " ".join(f"({letter}) {value}" for letter, value in zip(string.ascii_uppercase, options))
    return {"images": [("jpg", np.asarray(plate).copy())], "prompt": PLATE_PROMPT.format(options=inline),
            "answer": answer}


def _math(seed: int, k: int) -> dict:
    """A right triangle with its legs labelled; the first row asks for a number (its answer a JSON integer), the
    others are multiple choice."""
    rng = random.Random(f"math:{seed}")
    a, b, c = rng.choice(TRIPLES)
    unit = min(260 / a, 400 / b)
    canvas = np.full((360, 520, 3), 255, np.uint8)
    C = (60, 320)
    A, B = (C[0], int(C[1] - a * unit)), (int(C[0] + b * unit), C[1])
    cv2.polylines(canvas, [np.array([A, B, C], np.int32)], True, (30, 30, 30), 2, cv2.LINE_AA)
    cv2.polylines(canvas, [np.array([(C[0], C[1] - 16), (C[0] + 16, C[1] - 16), (C[0] + 16, C[1])], np.int32)],
                  False, (30, 30, 30), 1, cv2.LINE_AA)
    for label, (x, y) in (("A", (A[0] - 28, A[1] + 8)), ("B", (B[0] + 8, B[1] + 8)), ("C", (C[0] - 28, C[1] + 24))):
        cv2.putText(canvas, label, (x, y), cv2.FONT_HERSHEY_SIMPLEX, 0.9, (30, 30, 30), 2, cv2.LINE_AA)
    for length, at in ((a, (C[0] - 34, (A[1] + C[1]) // 2)), (b, ((C[0] + B[0]) // 2, C[1] + 30))):
        cv2.putText(canvas, str(length), at, cv2.FONT_HERSHEY_SIMPLEX, 0.8, (200, 30, 30), 2, cv2.LINE_AA)
    question = TRIANGLE_PROMPT.format(a=a, b=b)
    if k == 0:
        return {"images": [("png", canvas)], "prompt": question + " Answer with a single number, such as 1, 2, 3.",
                "answer": c}
    options, answer = _choices(rng, c, [c - 1, c + 1, a + b])
    return {"images": [("png", canvas)], "prompt": question + "\n" + _option_lines(options), "answer": answer}


BUILDERS = {
    "ocr": _ocr, "maze": _maze, "color": _color, "math": _math, "word_search": _word_search, "jigsaw": _jigsaw,
    "rotation_game": _rotation_game, "refcoco": _refcoco, "spot_difference": _spot_difference,
    "visual_search": _visual_search, "symbolic": _symbolic, "contrast": _contrast, "instrument": _instrument,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a small TIR-Bench in the published layout.")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--per_task", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unzipped", action="store_true", help="leave data/ extracted instead of writing data.zip")
    args = parser.parse_args(argv)
    out = write_fixture(args.out_dir, args.per_task, args.seed, zipped=not args.unzipped)
    print(f"wrote {len(TASKS) * args.per_task} TIR-Bench rows to {out / JSON_NAME} "
          f"(images in {out / (ZIP_NAME if not args.unzipped else 'data')})")


if __name__ == "__main__":
    main()
