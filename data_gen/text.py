"""Fonts and words for rendered text. Both come from installed packages, not hard-coded lists: the
fonts are the TrueType families matplotlib ships (DejaVu Sans/Serif/Mono and STIX, in several weights
and slants), the words the `web2` list of the `english-words` package (235k entries, filtered here)."""

from __future__ import annotations

import functools
from pathlib import Path

import matplotlib
import numpy as np
from english_words import get_english_words_set
from PIL import Image, ImageDraw, ImageFont

FONT_FILES = (
    "DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf",
    "DejaVuSerif-Italic.ttf", "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "STIXGeneral.ttf",
    "STIXGeneralBol.ttf", "STIXGeneralItalic.ttf",
)


@functools.cache
def fonts() -> tuple[Path, ...]:
    directory = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    found = tuple(directory / name for name in FONT_FILES if (directory / name).is_file())
    if not found:
        raise FileNotFoundError(f"no fonts in {directory}: reinstall matplotlib (make install)")
    return found


@functools.cache
def words(min_length: int = 3, max_length: int = 10) -> tuple[str, ...]:
    """Lower-case alphabetic words, sorted, so a seeded choice is the same on every machine."""
    return tuple(sorted(w for w in get_english_words_set(["web2"], lower=True, alpha=True)
                        if min_length <= len(w) <= max_length))


def render_lines(lines: list[str], font: Path, size: int, color=(20, 20, 20), background=(255, 255, 255),
                 padding: int = 16) -> np.ndarray:
    """Lines of text, left-aligned, on a canvas that fits them: uint8 RGB (H, W, 3)."""
    face = ImageFont.truetype(str(font), size)
    boxes = [face.getbbox(line) for line in lines]
    line_height = max(b[3] - min(0, b[1]) for b in boxes) + size // 4
    width = max(b[2] for b in boxes) + 2 * padding
    height = line_height * len(lines) + 2 * padding
    canvas = Image.new("RGB", (width, height), background)
    draw = ImageDraw.Draw(canvas)
    for k, line in enumerate(lines):
        draw.text((padding, padding + k * line_height), line, font=face, fill=color)
    return np.asarray(canvas).copy()
