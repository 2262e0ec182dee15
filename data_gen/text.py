"""Fonts and words for rendered text. Both come from installed packages, not hard-coded lists: the
fonts are the TrueType families matplotlib ships (DejaVu Sans/Serif/Mono and STIX, in several weights
and slants), the words the `web2` list of the `english-words` package (235k entries, filtered here).

`render_aligned` draws one word on the token grid of a tiny vision model (one letter per 16-px column) for
models trained from scratch; `render_lines` is the realistic rendering."""

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


ALIGNED_FONT = "DejaVuSansMono.ttf"
ALIGNED_CELL = 16  # pixels per letter: a patch of 8 merged 2 x 2, one image token column per letter
ALIGNED_CELLS = 6  # letters per canvas
ALIGNED_HEIGHT = 32  # two image tokens
ALIGNED_SIZE = 25  # DejaVu Sans Mono at 25 px: every lower-case glyph is at most 16 px wide, ink 24 px tall
ALIGNED_BASELINE = 23  # ink from 4 px to 28 px


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


def aligned_font() -> Path:
    (font,) = [path for path in fonts() if path.name == ALIGNED_FONT] or [None]
    if font is None:
        raise FileNotFoundError(f"{ALIGNED_FONT} is not among matplotlib's fonts: reinstall matplotlib (make install)")
    return font


@functools.cache
def aligned_words(exclude: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The words `render_aligned` draws: lower-case, 3 to ALIGNED_CELLS letters, less `exclude`."""
    return tuple(w for w in words(3, ALIGNED_CELLS) if w not in exclude)


def render_aligned(word: str, color=(20, 20, 20), background=(255, 255, 255)) -> np.ndarray:
    """`word` in a monospace font, letter k centred in the 16-px column k of a 32 x 96 canvas (left-aligned,
    on a common baseline): uint8 RGB (32, 96, 3)."""
    if not 1 <= len(word) <= ALIGNED_CELLS:
        raise ValueError(f"an aligned render holds 1 to {ALIGNED_CELLS} letters, got {word!r}")
    face = ImageFont.truetype(str(aligned_font()), ALIGNED_SIZE)
    canvas = Image.new("RGB", (ALIGNED_CELL * ALIGNED_CELLS, ALIGNED_HEIGHT), background)
    draw = ImageDraw.Draw(canvas)
    for k, letter in enumerate(word):
        left, _, right, _ = face.getbbox(letter, anchor="ls")
        x = k * ALIGNED_CELL + (ALIGNED_CELL - (right - left)) / 2 - left
        draw.text((x, ALIGNED_BASELINE), letter, font=face, fill=color, anchor="ls")
    return np.asarray(canvas).copy()
