"""A contact sheet: a few audited samples of every task in one PNG, with each sample's answer, for a
person to look at (`python data_gen/make.py sheet --out docs/data_gen_samples.png`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from data_gen.sample import audit
from data_gen.tasks import TASKS
from data_gen.text import fonts

CELL = 220  # each sample is fitted into a CELL x CELL square
CAPTION = 36


def contact_sheet(out: str | Path, per_task: int = 4, difficulty: str = "medium") -> Path:
    rows = []
    for name, task in TASKS.items():
        cells = []
        for seed in range(per_task):
            sample = task.generate(seed, difficulty)
            audit(sample, task.check)  # only audited samples are shown
            cells.append(_cell(sample.image, f"{name} #{seed}", f"answer: {sample.answer}"))
        rows.append(np.concatenate(cells, axis=1))
    width = max(r.shape[1] for r in rows)
    sheet = np.concatenate([np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0)), constant_values=255) for r in rows])
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(sheet).save(out, optimize=True)
    return out


def _cell(image: np.ndarray, title: str, caption: str) -> np.ndarray:
    pil = Image.fromarray(image)
    pil.thumbnail((CELL - 8, CELL - 8))
    canvas = Image.new("RGB", (CELL, CELL + CAPTION), (255, 255, 255))
    canvas.paste(pil, ((CELL - pil.width) // 2, (CELL - pil.height) // 2))
    draw = ImageDraw.Draw(canvas)
    face = ImageFont.truetype(str(fonts()[0]), 11)
    draw.text((4, CELL), title, font=face, fill=(90, 90, 90))
    draw.text((4, CELL + 16), caption.replace("\n", " / ")[:40], font=face, fill=(0, 0, 0))
    draw.rectangle((0, 0, CELL - 1, CELL + CAPTION - 1), outline=(200, 200, 200))
    return np.asarray(canvas)
