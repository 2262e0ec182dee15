"""Rotated OCR (TIR-Bench's pilot study): read text from an image that was rotated.

The upright text is rendered with a seeded font, size and words; the image is rotated CLOCKWISE by
`angle`. TIR-Bench's rotated-OCR items use 90, 180 and 270 degrees with probabilities .25/.5/.25
(`angles="quarter"`); `angles="any"` draws any angle in [5, 355]; `angles="none"` leaves the text upright
(no reference call): what a pretrained reader has seen, the data the toy pilot's base model learns to read
from. The reference calls TIR-Bench's rotate(degree) on the original with the clockwise degree that restores
it (360 - angle), and the audit checks that the restored image is the upright render: pixel-exact for quarter
turns, and for other angles the text's pixels are back in place within a pixel (two resamplings blur them).

`render="realistic"` (the default, for real models) draws `difficulty`'s words in a seeded font, size and
colours. `render="aligned"` is learnable data for tiny models trained from scratch: one lower-case word of 3
to 6 letters, at every difficulty, in a monospace font with one letter per 16-px column of a 32 x 96 canvas
(data_gen.text.render_aligned), the columns a vision model with 8-px patches merged 2 x 2 turns into image
tokens. Its words leave out the prompt's own words, which the toy tokenizer spells as whole tokens
(runtime.tiny_model.toy_words), so every answer letter is one token.
"""

from __future__ import annotations

import random

import cv2
import numpy as np

from data_gen.sample import AuditError, Sample, require_choice
from data_gen.text import ALIGNED_SIZE, aligned_font, aligned_words, fonts, render_aligned, render_lines, words
from runtime.tiny_model import toy_words
from tools.executor import Executor, ToolCall

NAME = "rotated_ocr"
QUESTION = "What is the text in the image? Answer with the text only."
SCORER = "text_match"  # eval.scorers
QUARTERS = ((90, 0.25), (180, 0.5), (270, 0.25))
WORDS_PER_LINE = {"easy": (1, 1), "medium": (2, 3), "hard": (3, 5)}
LINES = {"easy": 1, "medium": 1, "hard": 2}
RENDERS = ("realistic", "aligned")
ANGLES = ("quarter", "any", "none")
ALIGNED_INK, ALIGNED_PAPER = (20, 20, 20), (255, 255, 255)
MIN_INK_AGREEMENT = 0.9  # share of text pixels back in place (within a pixel) after two resamplings
_EXECUTOR = Executor(device="opencv")


def generate(seed: int, difficulty: str = "medium", angles: str = "quarter", render: str = "realistic") -> Sample:
    require_choice("difficulty", difficulty, WORDS_PER_LINE)
    require_choice("render", render, RENDERS)
    require_choice("angles", angles, ANGLES)
    if render == "aligned":
        rng = random.Random(f"{NAME}:{seed}:{difficulty}:{angles}:{render}")
        lines = [rng.choice(aligned_words(toy_words()))]
        font, size, ink, paper = aligned_font(), ALIGNED_SIZE, ALIGNED_INK, ALIGNED_PAPER
        upright = render_aligned(lines[0], ink, paper)
    else:  # the realistic draws keep their seeds' random stream (and so their samples) from before `render`
        rng = random.Random(f"{NAME}:{seed}:{difficulty}:{angles}")
        low, high = WORDS_PER_LINE[difficulty]
        lines = [" ".join(rng.choice(words()) for _ in range(rng.randint(low, high)))
                 for _ in range(LINES[difficulty])]
        font = rng.choice(fonts())
        size = rng.randint(24, 44)
        ink = tuple(rng.randint(0, 80) for _ in range(3))
        paper = tuple(rng.randint(215, 255) for _ in range(3))
        upright = render_lines(lines, font, size, ink, paper)
    if angles == "none":
        angle, image, calls = 0, upright, ()
    else:
        if angles == "quarter":
            angle = rng.choices([a for a, _ in QUARTERS], weights=[p for _, p in QUARTERS])[0]
        else:
            angle = rng.randint(5, 355)
        (rotated,) = _EXECUTOR.run([ToolCall("rotate", upright, {"angle": angle, "direction": "clockwise",
                                                                  "expand": True, "fill": list(paper)})])
        image, calls = rotated.image, ({"name": "rotate", "arguments": {"degree": 360 - angle}},)
    prefix = NAME if render == "realistic" else f"{NAME}-{render}"
    return Sample(
        task=NAME, id=f"{prefix}-{difficulty}-{angles}-{seed}", image=image, question=QUESTION,
        answer="\n".join(lines), scorer=SCORER, toolset="tir_rotate",
        calls=calls,
        evidence={"upright": upright},
        meta={"seed": seed, "difficulty": difficulty, "angle": angle, "font": font.name, "size": size,
              "render": render},
    )


def check(sample: Sample, workspace: list[np.ndarray], reports: list[dict]) -> None:
    upright, restored = sample.evidence["upright"], workspace[-1]
    if sample.meta["angle"] % 90 == 0:
        if restored.shape != upright.shape or not np.array_equal(restored, upright):
            raise AuditError(f"{sample.id}: the restored image is not the upright render")
        return
    h, w = upright.shape[:2]
    top, left = (restored.shape[0] - h) // 2, (restored.shape[1] - w) // 2
    if top < 1 or left < 1:
        raise AuditError(f"{sample.id}: the restored image {restored.shape} is smaller than the upright "
                         f"{upright.shape}")
    score = max(_ink_agreement(upright, restored[top + dy:top + dy + h, left + dx:left + dx + w])
                for dy in (-1, 0, 1) for dx in (-1, 0, 1))  # the canvases may centre half a pixel apart
    if score < MIN_INK_AGREEMENT:
        raise AuditError(f"{sample.id}: the restored text agrees with the upright render on {score:.0%} of its ink")


def _ink_agreement(upright: np.ndarray, restored: np.ndarray) -> float:
    """How much of each image's ink lies on the other's (within a pixel): text back in place scores near
    1 after two resamplings; text off by a few degrees does not."""
    def ink(image):
        gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
        return gray < (int(gray.min()) + int(gray.max())) // 2
    a, b = ink(upright), ink(restored)
    kernel = np.ones((3, 3), np.uint8)
    near_a, near_b = cv2.dilate(a.astype(np.uint8), kernel) > 0, cv2.dilate(b.astype(np.uint8), kernel) > 0
    return min(float(near_b[a].mean()), float(near_a[b].mean())) if a.any() and b.any() else 0.0
