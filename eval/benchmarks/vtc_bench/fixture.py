"""A small VTC-Bench in the published formats, so tests and CPU smoke runs load it through the same code path as
the real data:

- `VTC-Bench.tsv`, columns `index id category image question answer A B C D`, written as the GitHub file is
  (Python's csv writer: tab-separated, CRLF rows, a cell quoted only when it holds a double quote), rows listed
  by id prefix. `index` is not the row number: the published files leave gaps and list rows in another order.
- `VTC-Bench_GTToolChain.tsv`, the same columns and `model_tools_gt` (a JSON-like list of tool labels), written
  as that file is: every cell holding a comma or a double quote quoted, CRLF rows, no newline after the last,
  rows in index order. One chain has the curly quotes the real annotations have (`["Flip", “Zoom in”, ...]`),
  which is not JSON.
- `images="paths"`: `image` is a relative path, `images/<folder>/<id>.jpg`, the folder the id prefix in lower
  case as published (`perceptual_Restoration_3` lives in `images/perceptual_restoration/`);
  `images="base64"` (the hub dataset `zzzhu/VTC-Bench`, VLMEvalKit style): `image` holds the JPEG's base64
  in both TSVs and no image file is written.
- `reference_calls.json`, a tirlab extension and not part of the published data: per id, VTC-Bench interface
  calls (`opencv_*` with `{"image": path, "param": {...}}`) a reference policy replays, each reading the
  previous call's output. Paths are `{workspace}/image_N.png`, N the workspace image (0 the original, each
  call adds one), `{workspace}` filled in by the replaying backend. Spatial rows have none, so a replay meets
  a row without a reference.

Multiple choice rows fill A-D (or A-B, A-C) and answer a letter; open rows leave the options empty. Images come
from the `data_gen` generators where a category maps onto one; charts and spatial scenes are drawn here.

    python -m eval.benchmarks.vtc_bench.fixture OUT_DIR [--per_category N] [--images paths|base64]
"""

from __future__ import annotations

import argparse
import base64
import csv
import io
import json
import random
import string
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from data_gen.tasks import color_proportion, counting, low_light, measurement, rotated_ocr, symbolic, visual_search

COLUMNS = ("index", "id", "category", "image", "question", "answer", "A", "B", "C", "D")
GT_COLUMN = "model_tools_gt"
TSV_NAME, GT_TSV_NAME, CALLS_NAME = "VTC-Bench.tsv", "VTC-Bench_GTToolChain.tsv", "reference_calls.json"
# category -> id prefix, in the order the GT-chain file first lists them (index order)
PREFIXES = {"attention": "attention_focusing", "color": "color", "counting": "counting", "math": "math",
            "measure": "measure", "ocr": "ocr", "perceptual": "perceptual_Restoration", "spatial": "spatial",
            "chart": "chart"}
WORKSPACE = "{{workspace}}/image_{}.png"  # format(N) leaves the {workspace} placeholder
CURLY_CHAIN = '["Flip", \u201cZoom in\u201d, "Histogram Eq"]'  # as the real annotations type some labels
JPEG_QUALITY = 90


def write_fixture(out_dir: Path, per_category: int = 1, seed: int = 0, images: str = "paths") -> Path:
    """Write both TSVs, `reference_calls.json` and (images="paths") the image files under `out_dir`; returns it."""
    if images not in ("paths", "base64"):
        raise ValueError(f"images must be 'paths' or 'base64', got {images!r}")
    if per_category < 1:
        raise ValueError(f"per_category must be at least 1, got {per_category}")
    out_dir = Path(out_dir)
    if (out_dir / TSV_NAME).exists() or (out_dir / "images").exists():
        raise FileExistsError(f"{out_dir} already holds a VTC-Bench copy; write the fixture into a new folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, calls, index = [], {}, 1
    for category, prefix in PREFIXES.items():
        for k in range(per_category):
            item = BUILDERS[category](seed * 1000 + k, k)
            ident = f"{prefix}_{k + 1}"
            jpeg = _jpeg(item["image"])
            if images == "paths":
                cell = f"images/{prefix.lower()}/{ident}.jpg"
                (out_dir / cell).parent.mkdir(parents=True, exist_ok=True)
                (out_dir / cell).write_bytes(jpeg)
            else:
                cell = base64.b64encode(jpeg).decode("ascii")
            options = [*item.get("options", ()), "", "", "", ""][:4]  # open rows: all four empty
            rows.append({"index": str(index), "id": ident, "category": category, "image": cell,
                         "question": item["question"], "answer": item["answer"], **dict(zip("ABCD", options)),
                         GT_COLUMN: item.get("gt_text") or json.dumps(item["gt"], ensure_ascii=False)})
            if item.get("calls"):
                calls[ident] = [{"name": name, "arguments": {"image": WORKSPACE.format(step), "param": param}}
                                for step, (name, param) in enumerate(item["calls"])]
            index += 1
        index += 1  # the published indices have gaps
    by_prefix = sorted(rows, key=lambda r: (r["id"].rsplit("_", 1)[0], int(r["id"].rsplit("_", 1)[1])))
    with open(out_dir / TSV_NAME, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(COLUMNS)
        writer.writerows([row[c] for c in COLUMNS] for row in by_prefix)
    lines = ["\t".join((*COLUMNS, GT_COLUMN))]
    lines += ["\t".join(_gt_cell(row[c]) for c in (*COLUMNS, GT_COLUMN)) for row in rows]
    (out_dir / GT_TSV_NAME).write_bytes("\r\n".join(lines).encode("utf-8"))
    (out_dir / CALLS_NAME).write_text(json.dumps(calls, ensure_ascii=False, indent=1), encoding="utf-8")
    return out_dir


def _gt_cell(value: str) -> str:
    """A cell as the GT-chain file writes it: quoted (quotes doubled) when it holds a comma or a quote."""
    return f'"{value.replace(chr(34), chr(34) * 2)}"' if any(c in value for c in ',"\t\r\n') else value


def _jpeg(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return buffer.getvalue()


def _choices(rng: random.Random, truth: str, distractors) -> tuple[list[str], str]:
    """The truth among distractors in a seeded order, and its letter."""
    options = [truth, *distractors]
    rng.shuffle(options)
    return options, string.ascii_uppercase[options.index(truth)]


def _near(rng: random.Random, truth: int, low: int = 1) -> list[int]:
    """Three distinct wrong counts near the truth, none below `low`."""
    return rng.sample([v for v in (truth - 2, truth - 1, truth + 1, truth + 2, truth + 3) if v >= low], 3)


def _stem(question: str) -> str:
    """A generator's question without its answer-format sentence (VTC-Bench lists options instead)."""
    return question[:question.index("?") + 1]


def _mask(lower: list[int], upper: list[int]) -> dict:
    """opencv_inrange_color's param for a BGR range, answered with the mask."""
    return {"colorspace": "bgr", "lower": lower, "upper": upper, "output_format": "mask"}


def _bgr(rgb, spread: int) -> tuple[list[int], list[int]]:
    """Published in-range bounds (BGR) around an RGB colour."""
    bgr = list(reversed(rgb))
    return [max(0, v - spread) for v in bgr], [min(255, v + spread) for v in bgr]


# == categories with a generator ======================================================================================
def _ocr(seed: int, k: int) -> dict:
    """Rotated text under noise and blur (robust OCR's synthetic degradation); open answer."""
    sample = rotated_ocr.generate(seed, "medium")
    noise = np.random.default_rng(seed).normal(0, 14, sample.image.shape)
    image = cv2.GaussianBlur(np.clip(sample.image + noise, 0, 255).astype(np.uint8), (3, 3), 0)
    return {"image": image, "question": "What is the text in the image? Answer with the text only.",
            "answer": sample.answer, "gt": ["Rotate", "Denoise", "Convert Color", "Binarize"],
            "calls": [("opencv_rotate", {"angle": (360 - sample.meta["angle"]) % 360}),
                      ("opencv_denoise", {"mode": "fast_means_color", "h": 12}),
                      ("opencv_colorspace_gray", {}),
                      ("opencv_threshold", {"mode": "otsu"})]}


def _perceptual(seed: int, k: int) -> dict:
    sample = low_light.generate(seed, "medium", question="count")
    rng = random.Random(f"perceptual:{seed}")
    options, answer = _choices(rng, sample.answer, [str(v) for v in _near(rng, int(sample.answer), 0)])
    return {"image": sample.image, "question": _stem(sample.question), "answer": answer, "options": options,
            "gt": ["Adjust Brightness", "Blur", "Draw Contours"],
            "calls": [("opencv_convertscaleabs", {"alpha": 5.0, "beta": 10}),
                      ("opencv_blur", {"method": "gaussian", "ksize": 5}),
                      ("opencv_contours", {"mode": "external"})]}


def _attention(seed: int, k: int) -> dict:
    """A mirrored high-resolution scene with one small sign: open (read the word) or choice (its frame colour)."""
    sample = visual_search.generate(seed, "easy", kind=("word", "color")[k % 2])
    image = np.ascontiguousarray(sample.image[:, ::-1])
    width = image.shape[1]
    x1, y1, x2, y2 = sample.meta["target"]["box"]
    x1, x2 = width - x2, width - x1  # the box in the mirrored image
    box = {"x": max(0, x1 - 20), "y": max(0, y1 - 20), "width": x2 - x1 + 40, "height": y2 - y1 + 40}
    calls = [("opencv_flip", {"direction": "horizontal"}),
             ("opencv_zoom_in", {**box, "scale": 4}),
             ("opencv_histogram", {"mode": "clahe", "color_mode": "hsv", "clip_limit": 2.0})]
    question = "The image is mirrored. " + _stem(sample.question)
    if k % 2 == 0:
        return {"image": image, "question": question, "answer": sample.answer, "calls": calls,
                "gt": ["Flip", "Zoom in", "Histogram Eq"], "gt_text": CURLY_CHAIN if k == 0 else None}
    options = [name.capitalize() for name in sample.meta["options"]]
    return {"image": image, "question": question, "answer": sample.answer, "options": options, "calls": calls,
            "gt": ["Flip", "Crop", "Histogram Eq"]}


def _measure(seed: int, k: int) -> dict:
    sample = measurement.generate(seed, "easy")
    meta = sample.meta
    rng = random.Random(f"measure:{seed}")
    decimals = len(sample.answer.partition(".")[2])
    values = [meta["answer_value"] + d * meta["step"] for d in (-2, -1, 1, 2, 3)]
    wrong = rng.sample([v for v in values if v > 0], 3)
    options, answer = _choices(rng, f"{meta['answer_value']:.{decimals}f} {meta['unit']}",
                               [f"{v:.{decimals}f} {meta['unit']}" for v in wrong])
    lower, upper = _bgr(meta["rgb"], 40)
    x1, y1, x2, y2 = meta["points"]
    return {"image": sample.image, "question": _stem(sample.question), "answer": answer, "options": options,
            "gt": ["Color Filter", "Line Detect", "Draw Line"],
            "calls": [("opencv_inrange_color", _mask(lower, upper)),
                      ("opencv_hough_lines", {"threshold": 30, "minLineLength": 20, "maxLineGap": 5}),
                      ("opencv_draw_line", {"x1": x1, "y1": y1, "x2": x2, "y2": y2, "color": [0, 0, 255], "thickness": 2})]}


def _color(seed: int, k: int) -> dict:
    sample = color_proportion.generate(seed, "easy")
    meta = sample.meta
    options = [f"{meta['options'][letter]}%" for letter in "ABCD"]
    lower, upper = _bgr(meta["rgb"], 10)
    return {"image": sample.image, "question": f"What is the proportion of {meta['color']} in the entire image?",
            "answer": sample.answer, "options": options, "gt": ["Color Filter", "Measure Area"],
            "calls": [("opencv_inrange_color", _mask(lower, upper)),
                      ("opencv_contour_area", {"mode": "external", "max_contours": 50})]}


def _counting(seed: int, k: int) -> dict:
    """Touching coins or cells: choice rows and, every other row, an open count."""
    sample = counting.generate(seed, "easy")
    item = {"image": sample.image, "question": _stem(sample.question), "answer": sample.answer,
            "gt": ["Convert Color", "Binarize", "Morphology", "Watershed"],
            "calls": [("opencv_colorspace_gray", {}),
                      ("opencv_threshold", {"mode": "otsu"}),
                      ("opencv_morphology", {"op": "open", "kernel_size": 5}),
                      ("opencv_watershed", {"max_regions": 40})]}
    if k % 2 == 0:
        rng = random.Random(f"counting:{seed}")
        item["options"], item["answer"] = _choices(rng, sample.answer, [str(v) for v in _near(rng, int(sample.answer))])
    return item


def _math(seed: int, k: int) -> dict:
    """Count a polygon's edges; the reference approximates the outline and draws a diagonal as an auxiliary line."""
    sample = symbolic.generate(seed, "easy", form="integer")
    rng = random.Random(f"math:{seed}")
    options, answer = _choices(rng, sample.answer, [str(v) for v in _near(rng, int(sample.answer), 3)])
    (x1, y1), (x2, y2) = sample.meta["vertices"][0], sample.meta["vertices"][2]
    return {"image": sample.image, "question": _stem(sample.question), "answer": answer, "options": options,
            "gt": ["Convert Color", "Approximate Polygon", "Draw Line"],
            "calls": [("opencv_colorspace_gray", {}),
                      ("opencv_approx_poly", {"mode": "external", "epsilon_ratio": 0.02}),
                      ("opencv_draw_line", {"x1": round(x1), "y1": round(y1), "x2": round(x2), "y2": round(y2),
                                            "color": [0, 0, 255], "thickness": 2})]}


# == categories drawn here ============================================================================================
CHART_SIZE = (520, 400)  # width, height
PLOT = (70, 40, 500, 340)  # x0, y_top, x1, y_bottom of the axes; the y axis runs 0-100
YEARS = ("2019", "2020", "2021", "2022", "2023")


def _chart(seed: int, k: int) -> dict:
    """An upside-down bar chart: open (a bar's value) or choice (the highest bar)."""
    rng = random.Random(f"chart:{seed}")
    values = rng.sample(range(10, 95, 5), len(YEARS))
    width, height = CHART_SIZE
    x0, top, x1, bottom = PLOT
    canvas = np.full((height, width, 3), 255, np.uint8)
    for tick in range(0, 101, 20):
        y = bottom - (bottom - top) * tick // 100
        cv2.line(canvas, (x0, y), (x1, y), (225, 225, 225), 1)
        cv2.putText(canvas, str(tick), (x0 - 40, y + 5), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (60, 60, 60), 1, cv2.LINE_AA)
    cv2.line(canvas, (x0, top), (x0, bottom), (40, 40, 40), 2)
    cv2.line(canvas, (x0, bottom), (x1, bottom), (40, 40, 40), 2)
    centers = []
    for i, (year, value) in enumerate(zip(YEARS, values)):
        cx = x0 + 50 + i * 85
        centers.append(cx)
        cv2.rectangle(canvas, (cx - 25, bottom - (bottom - top) * value // 100), (cx + 25, bottom - 1), (70, 110, 200), -1)
        cv2.putText(canvas, year, (cx - 22, bottom + 22), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (40, 40, 40), 1, cv2.LINE_AA)
    cv2.putText(canvas, "Units sold (thousands)", (x0 + 100, 25), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (20, 20, 20), 1,
                cv2.LINE_AA)
    asked = rng.randrange(len(YEARS))
    level = bottom - (bottom - top) * values[asked] // 100
    item = {"image": np.ascontiguousarray(canvas[::-1, ::-1]), "gt": ["Rotate", "Draw Line", "Crop"],
            "calls": [("opencv_rotate", {"angle": 180}),
                      ("opencv_draw_line", {"x1": x0, "y1": level, "x2": centers[asked], "y2": level,
                                            "color": [0, 0, 255], "thickness": 2}),
                      ("opencv_crop", {"x": 10, "y": 20, "width": 500, "height": 360})]}
    if k % 2 == 0:
        return {**item, "question": f'According to the chart, how many thousand units were sold in "{YEARS[asked]}"?',
                "answer": str(values[asked])}
    best = YEARS[values.index(max(values))]
    options, answer = _choices(rng, best, rng.sample([y for y in YEARS if y != best], 3))
    return {**item, "question": "According to the chart, in which year were the most units sold?",
            "answer": answer, "options": options}


SHAPES = {"red circle": (220, 40, 40), "blue square": (40, 70, 210), "green triangle": (40, 160, 60)}


def _spatial(seed: int, k: int) -> dict:
    """Three shapes in an overexposed, blurred photo; two-option (left/right) or three-option (topmost) rows."""
    rng = random.Random(f"spatial:{seed}")
    canvas = np.full((360, 480, 3), 150, np.uint8)
    xs, ys = rng.sample(range(70, 420, 110), 3), rng.sample(range(70, 300, 55), 3)  # no ties either way
    centers = {}
    for (name, color), x, y in zip(SHAPES.items(), xs, ys):
        centers[name] = (x, y)
        if name == "red circle":
            cv2.circle(canvas, (x, y), 40, color, -1, cv2.LINE_AA)
        elif name == "blue square":
            cv2.rectangle(canvas, (x - 38, y - 38), (x + 38, y + 38), color, -1)
        else:
            cv2.fillPoly(canvas, [np.array([(x, y - 44), (x - 44, y + 34), (x + 44, y + 34)], np.int32)], color, cv2.LINE_AA)
    image = cv2.GaussianBlur((canvas * 0.45 + 140).astype(np.uint8), (9, 9), 0)
    item = {"image": image, "gt": ["Adjust Brightness", "Color Filter", "Draw Contours"]}
    if k % 2 == 0:
        side = "Left" if centers["red circle"][0] < centers["blue square"][0] else "Right"
        return {**item, "question": "Is the red circle to the left or to the right of the blue square?",
                "options": ["Left", "Right"], "answer": "A" if side == "Left" else "B"}
    topmost = min(SHAPES, key=lambda name: centers[name][1]).capitalize()
    options, answer = _choices(rng, topmost, [name.capitalize() for name in SHAPES if name.capitalize() != topmost])
    return {**item, "question": "Which shape is closest to the top edge of the image?", "options": options,
            "answer": answer}


BUILDERS = {"attention": _attention, "color": _color, "counting": _counting, "math": _math, "measure": _measure,
            "ocr": _ocr, "perceptual": _perceptual, "spatial": _spatial, "chart": _chart}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a small VTC-Bench in the published formats.")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--per_category", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--images", choices=("paths", "base64"), default="paths")
    args = parser.parse_args(argv)
    out = write_fixture(args.out_dir, args.per_category, args.seed, args.images)
    print(f"wrote {len(PREFIXES) * args.per_category} VTC-Bench rows to {out / TSV_NAME} and {out / GT_TSV_NAME} "
          f"(images: {args.images}; reference calls in {out / CALLS_NAME})")


if __name__ == "__main__":
    main()
