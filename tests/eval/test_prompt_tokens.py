"""Prompt token ids from remembered pieces (eval/backends/prompt_tokens.py): the same ids as tokenizing the whole
text, on the tiny models' tokenizer and on conversations of every preset, each new turn tokenizing only what it
adds; a tokenizer where pieces differ from the whole is caught by the check and tokenized whole. On the engine,
every prompt of the test session is checked (tests/eval/conftest.py)."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from eval.backends import render_text
from eval.backends.prompt_tokens import PromptTokens
from eval.forcing import ForcedReplies
from eval.loop import toolboxes
from eval.presets import PRESETS
from eval.suites.synthetic import synthetic_suite
from runtime.episode import State
from runtime.tiny_model import build_processor


@pytest.fixture(scope="module")
def processors(tmp_path_factory):
    return {kind: build_processor(kind, tmp_path_factory.mktemp(kind)) for kind in ("qwen2_5_vl", "qwen3_vl")}


@pytest.fixture(params=["qwen2_5_vl", "qwen3_vl"])
def processor(request, processors):
    return processors[request.param]


def whole_of(tokenizer):
    return lambda text: tokenizer(text, add_special_tokens=True)["input_ids"]


class Counting:
    """A tokenizer that counts the characters it is asked to tokenize."""

    def __init__(self, tokenizer):
        self.tokenizer, self.characters = tokenizer, 0

    def __call__(self, texts, **kwargs):
        self.characters += sum(map(len, texts))
        return self.tokenizer(texts, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def test_edge_texts_give_the_ids_of_the_whole_text(processor):
    tokenizer = processor.tokenizer
    tokens = PromptTokens(tokenizer, whole_of(tokenizer), checks=None)
    specials = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|image_pad|>", "<|vision_end|>"]
    rng = random.Random(0)
    words = ["", " ", "\n", "\n\n", "user", "assistant", " é ü 漢字", "<think>", "</tool_call>", "{\"a\": 1}",
             "<|im_", "end|>", "  x  ", "\t"]
    texts = ["", "<|im_start|>", "plain text only", "<|im_start|><|im_end|>", " <|im_end|> ", "<|im_end|>\n" * 3]
    texts += ["".join(rng.choice(specials + words) for _ in range(rng.randint(1, 30))) for _ in range(300)]
    for text in texts:
        assert tokens(text) == whole_of(tokenizer)(text), repr(text)
    assert tokens.mismatch is None and tokens.checked == len(texts)


@pytest.mark.parametrize("preset", ["qwen2.5-vl", "qwen3-vl", "deepeyes", "thyme", "generic"])
def test_every_presets_conversations_give_the_ids_of_the_whole_text_and_turns_tokenize_what_they_add(processors,
                                                                                                   preset):
    processor = processors["qwen3_vl" if preset == "qwen3-vl" else "qwen2_5_vl"]  # its own chat template
    profile = PRESETS[preset].profile
    counting = Counting(processor.tokenizer)
    tokens = PromptTokens(counting, whole_of(processor.tokenizer), checks=None)
    forced = ForcedReplies(2, think=(3, 6))
    rng = random.Random(1)
    toolbox_for = toolboxes(profile)
    added, rendered = 0, 0
    try:
        for task in synthetic_suite(per_task=1):
            episode = toolbox_for(task, "tools").start(profile, task.question, task.images)
            previous = ""
            while episode.state is not State.DONE:
                text = render_text(processor, episode.prompt())
                before = counting.characters
                assert tokens(text) == whole_of(processor.tokenizer)(text)
                if previous:  # a later turn tokenizes about what it adds, not the conversation again
                    added += counting.characters - before
                    rendered += len(text)
                previous = text
                script = forced.script(episode.trajectory.tools, episode.turns, rng.randrange(2**32))
                reply = "".join(part if isinstance(part, str) else " word" * part for part in script)
                if episode.submit(reply):
                    toolbox_for(task, "tools").run([episode])
            episode.close()
    finally:
        toolbox_for.close()
    assert tokens.mismatch is None and tokens.checked > 0
    if preset != "thyme":  # Thyme's calls are code cells, which the forced replies do not write: one turn each
        assert rendered and added < 0.5 * rendered


def _metaspace_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer that marks the start of the text it is given, as SentencePiece tokenizers do
    (Metaspace, prepend_scheme "first"): a piece after an added token, tokenized alone, starts with the mark;
    the same text inside the whole does not."""
    vocab = {"<unk>": 0, "<sep>": 1, "▁a": 2, "a": 3, "▁b": 4, "b": 5}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    backend.decoder = decoders.Metaspace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<sep>"]})
    return tokenizer


def test_a_tokenizer_whose_pieces_differ_is_caught_and_tokenized_whole():
    tokenizer = _metaspace_tokenizer()
    whole = whole_of(tokenizer)
    tokens = PromptTokens(tokenizer, whole, checks=2)
    assert tokens("a a") == whole("a a")  # no added token: one piece, the same ids
    with pytest.warns(UserWarning, match="tokenized whole from now on"):
        assert tokens("a<sep>b") == whole("a<sep>b")
    assert tokens.mismatch is not None
    assert tokens("b<sep>a") == whole("b<sep>a")  # from now on the whole text, unchecked


def test_pieces_are_forgotten_past_the_capacity_and_the_ids_stay_exact(processor):
    tokenizer = processor.tokenizer
    tokens = PromptTokens(tokenizer, whole_of(tokenizer), checks=0, capacity=4)
    for k in range(20):
        text = "".join(f"<|im_start|>turn {k} piece {j}<|im_end|>" for j in range(3))
        assert tokens(text) == whole_of(tokenizer)(text)
        assert len(tokens.pieces) <= 4
