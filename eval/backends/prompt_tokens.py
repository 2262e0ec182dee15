"""Prompt token ids without tokenizing the whole conversation again every turn.

Every turn of an episode renders the whole conversation again (the chat template decides what earlier turns
look like), and tokenizing that text was a quarter of the harness's own work per turn in the vLLM engine
backend (docs/benchmarks.md). A fast tokenizer cuts its input at its added tokens (`<|im_start|>`,
`<|image_pad|>`, ...) before anything else and tokenizes the text between them piece by piece, so the ids of a
prompt are the ids of its pieces in order: each piece is tokenized once and remembered, and a new turn only
tokenizes what it adds (the reply, the tool's result). The rendered text is still the chat template's, so a
template that rewrites earlier turns (Qwen3 drops earlier think blocks) is followed exactly.

That the pieces give the engine's own ids is checked, not assumed: the first `checks` prompts are also
tokenized whole, as the engine would; on any difference (a tokenizer that marks the start of every piece, or
adds tokens around the text) the rest are tokenized whole, with a warning.
"""

from __future__ import annotations

import re
import warnings
from typing import Callable

CHECKS = 32  # prompts compared with the engine's own tokenization before the pieces are trusted


class PromptTokens:
    """`PromptTokens(tokenizer, whole)(text)` -> the token ids `whole(text)` gives, from remembered pieces.
    `whole` is the engine's own tokenization of a text prompt; `checks` prompts are compared with it
    (None: every prompt, for tests)."""

    def __init__(self, tokenizer, whole: Callable[[str], list[int]], checks: int | None = CHECKS,
                 capacity: int = 16_384):
        self.whole = whole
        self.checks_left = checks
        self.capacity = capacity
        # the added tokens the tokenizer splits the text at before tokenizing what lies between (those it
        # matches after normalizing come later, inside the pieces); one that strips the text around it or
        # matches only whole words would move the splits, so such a tokenizer's prompts are tokenized whole
        added = {token_id: token for token_id, token in tokenizer.added_tokens_decoder.items() if not token.normalized}
        self.added = {token.content: token_id for token_id, token in added.items()}
        contents = sorted(self.added, key=len, reverse=True)  # the longest first, as the tokenizer matches
        plain = not any(token.lstrip or token.rstrip or token.single_word for token in added.values())
        self.split = re.compile("(" + "|".join(map(re.escape, contents)) + ")").split if contents and plain else None
        self.encode = lambda pieces: tokenizer(pieces, add_special_tokens=False)["input_ids"]
        self.pieces: dict[str, list[int]] = {}
        self.checked = 0
        self.mismatch: str | None = None  # why the pieces were given up, once they were

    def __call__(self, text: str) -> list[int]:
        if self.mismatch is not None or self.split is None:
            return self.whole(text)
        ids = self._from_pieces(text)
        if self.checks_left is None or self.checks_left > 0:
            expected = self.whole(text)
            self.checked += 1
            if self.checks_left is not None:
                self.checks_left -= 1
            if ids != expected:
                at = next((i for i, (a, b) in enumerate(zip(ids, expected)) if a != b), min(len(ids), len(expected)))
                self.mismatch = (f"the prompt's pieces give other token ids than the whole text from position {at} "
                                 f"({len(ids)} vs {len(expected)} ids)")
                warnings.warn(f"{self.mismatch}: this tokenizer's prompts are tokenized whole from now on",
                              stacklevel=2)
                return expected
        return ids

    def _from_pieces(self, text: str) -> list[int]:
        parts = self.split(text)  # text, added token, text, added token, ..., text
        texts = parts[0::2]
        missing = list(dict.fromkeys(t for t in texts if t and t not in self.pieces))
        if len(self.pieces) + len(missing) > self.capacity:  # forget the pieces of episodes long finished
            self.pieces.clear()
            missing = list(dict.fromkeys(t for t in texts if t))
        if missing:
            self.pieces.update(zip(missing, self.encode(missing)))
        ids: list[int] = []
        for position, part in enumerate(parts):
            if position % 2:
                ids.append(self.added[part])
            elif part:
                ids.extend(self.pieces[part])
        return ids
