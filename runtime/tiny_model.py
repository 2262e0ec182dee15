"""Tiny local Qwen2.5-VL and Qwen3-VL checkpoints, built offline in about a second.

The real chat templates (TRL's copies of Qwen's official ones, read from the installed `trl` package), a
byte-level BPE tokenizer trained here on a small corpus with Qwen's special tokens, and the real image and
video processor classes with small image sizes. No downloads: everything is saved to a directory and loaded
back with `AutoProcessor.from_pretrained` / `from_pretrained`, as a real checkpoint would be. Two kinds:

- `build_processor` / `build_model`: the smoke model. Qwen's pre-tokenizer, random weights, 14/16-px patches;
  it answers noise and exists to run pipelines end to end.
- `build_toy_model`: a model to train from scratch on a CPU (`train/sft.py --model_name_or_path
  toy:qwen2_5_vl`), about 0.9M parameters (Qwen2.5-VL) at the default `ToySize`. Its tokenizer spells every
  letter outside the prompt's own words as one token and the tool prompt as one (`toy_tokenizer`); its 8-px
  patches, merged 2 x 2, see a 32 x 96 image as 2 x 6 = 12 image tokens: one token column per letter of
  data_gen's aligned rendering.

    processor = build_processor("qwen3_vl", tmp_dir)
    processor.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    build_toy_model("qwen2_5_vl", "runs/init", seed=0)

No pytest dependency: tests/runtime/conftest.py wraps it in session fixtures.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

KINDS = ("qwen2_5_vl", "qwen3_vl")

# Qwen's control tokens (special: skipped by decode(skip_special_tokens=True)) in Qwen's id order, and the
# tool/think markers, which Qwen's tokenizers add as normal (non-special) added tokens.
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>")
ADDED_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")

# kind -> (processor class, video processor class, TRL template, ViT patch size, image mean/std)
_SPECS = {
    "qwen2_5_vl": ("Qwen2_5_VLProcessor", "Qwen2VLVideoProcessor", "qwen2_5_vl.jinja", 14,
                   ([0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711])),
    "qwen3_vl": ("Qwen3VLProcessor", "Qwen3VLVideoProcessor", "qwen3_vl.jinja", 16,
                 ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])),
}

_CORPUS = [
    "You are a helpful assistant. Answer the question about the image.",
    "Think first, call **image_zoom_in_tool** if needed, then answer.",
    '<tool_call>\n{"name": "image_zoom_in_tool", "arguments": {"bbox_2d": [10, 20, 100, 200], "label": "cat"}}\n'
    "</tool_call>",
    '{"type": "function", "function": {"name": "crop", "description": "Crop the image.", "parameters": '
    '{"type": "object", "properties": {"box": {"type": "array", "items": {"type": "number"}}}, "required": ["box"]}}}',
    "<code>\n```python\nfrom PIL import Image\nimg = Image.open(path)\nprint(img.size)\n```\n</code>",
    "<sandbox_output>(640, 480)</sandbox_output> <interpreter>\nText Result:\n</interpreter>",
    "<answer>There are 3 cats on the sofa.</answer> <think>The cat is left of the dog.</think>",
    "How many people are in the picture? What color is the car? Read the text on the sign.",
    "Zählen Sie die Katzen. 猫は何匹いますか？ Сколько кошек? 🐱🐶 — “quoted” ½ ≥ ≤ é à ü ß",
    "Error: the tool call is not valid JSON (Expecting value at position 0)",
    "0123456789 0.5 -1e10 [1, 2, 3] {} () <> == != += -= */ \\n \\t",
]


def chat_template(name: str) -> str:
    """An official chat template as TRL ships it (`trl/chat_templates/<name>`)."""
    return resources.files("trl").joinpath("chat_templates", name).read_text(encoding="utf-8")


def _train_tokenizer(vocab_size: int = 600):
    """vocab and merges of a byte-level BPE with Qwen2's pre-tokenizer, trained on `_CORPUS`."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, show_progress=False,
                                  special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_CORPUS * 4, trainer=trainer)
    model = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model["merges"]]
    return model["vocab"], merges


def _tokenizer():
    return _qwen_tokenizer(*_train_tokenizer())


def _qwen_tokenizer(vocab, merges):
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=merges, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                               unk_token=None, model_max_length=32768)
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS], special_tokens=True)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    return tokenizer


# The fixed text a toy model reads and writes on rotated OCR, in both SFT forms: the Hermes tool prompt (built
# from the tool set below), the question, the answer and tool-response markup and Qwen's default system prompt.
# Its words become whole tokens, so a prompt costs a few hundred tokens instead of one per letter.
TOY_TOOLSET = "tir_rotate"
_TOY_TEXT = ("You are a helpful assistant.", "What is the text in the image? Answer with the text only.",
             "<answer>", "</answer>", "<tool_response>\n", "\n</tool_response>",
             '<tool_call>\n{"name": "rotate", "arguments": {"degree": 90}}\n</tool_call>')
TOY_VOCAB_SIZE = 1024  # a cap above what the corpus yields (about 520): every corpus word ends as one token
_NOT_WORD = r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"  # Qwen's pre-tokenizer, less its words


def toy_corpus() -> list[str]:
    from runtime.protocols.hermes import tools_section
    from tools.toolsets import TOOLSETS

    return [tools_section(TOOLSETS[TOY_TOOLSET].schemas()), *_TOY_TEXT]


@functools.cache
def toy_words() -> frozenset[str]:
    """The words of the toy corpus: the only letter runs the toy tokenizer keeps together."""
    return frozenset(w for text in toy_corpus() for w in re.findall(r"[^\W\d_]+", text) if len(w) > 1)


def _toy_pre_tokenizer():
    """A corpus word (whole, not inside a longer word, with the space before it) is one piece; any other letter
    is a piece of its own, so no merge can join two letters of a word the model reads from an image."""
    from tokenizers import Regex, pre_tokenizers

    words = "|".join(sorted(map(re.escape, toy_words()), key=len, reverse=True))
    pattern = rf"(?: |(?<!\p{{L}}))(?:{words})(?!\p{{L}})|\p{{L}}|{_NOT_WORD}"
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


def toy_tokenizer():
    """A byte-level BPE of about 540 tokens with Qwen's special and added tokens: the toy tool prompt is one
    token, each of the toy corpus's words (with the space before it) and punctuation runs is one token, every
    other letter is one token."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = _toy_pre_tokenizer()
    trainer = trainers.BpeTrainer(vocab_size=TOY_VOCAB_SIZE, min_frequency=1, show_progress=False,
                                  special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(toy_corpus() * 4, trainer=trainer)
    model = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model["merges"]]
    qwen = _qwen_tokenizer(model["vocab"], merges)
    # the tool prompt, identical in every agentic sample, as one token: the fixed text then costs the toy what
    # a cached prefix costs a served model, and training and compute go to what differs between samples
    qwen.add_tokens([AddedToken(toy_corpus()[0], special=False, normalized=False)])
    backend = qwen.backend_tokenizer
    backend.pre_tokenizer = _toy_pre_tokenizer()
    # saved as a plain tokenizers backend: loaded as a Qwen2Tokenizer it would get Qwen's pre-tokenizer back
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   model_max_length=32768)


def build_processor(kind: str, directory):
    """Build the tiny `kind` processor ("qwen2_5_vl" or "qwen3_vl"), save it to `directory` and return it
    as `AutoProcessor.from_pretrained(directory)` loads it (offline)."""
    _check_kind(kind)
    patch = _SPECS[kind][3]
    factor = 2 * patch  # patch * merge_size: image sides are multiples of it
    return _save_processor(kind, directory, _tokenizer(), patch, 4 * factor**2, 64 * factor**2)


def _check_kind(kind: str) -> None:
    if kind not in _SPECS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _save_processor(kind: str, directory, tokenizer, patch: int, min_pixels: int, max_pixels: int):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers
    from transformers import AutoProcessor, Qwen2VLImageProcessor

    processor_class, video_class, template, _, (mean, std) = _SPECS[kind]
    size = {"shortest_edge": min_pixels, "longest_edge": max_pixels}
    common = dict(patch_size=patch, temporal_patch_size=2, merge_size=2, image_mean=mean, image_std=std)
    image_processor = Qwen2VLImageProcessor(size=size, **common)
    video_processor = getattr(transformers, video_class)(size=size, **common)
    processor = getattr(transformers, processor_class)(image_processor=image_processor, tokenizer=tokenizer,
                                                       video_processor=video_processor,
                                                       chat_template=chat_template(template))
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    processor.save_pretrained(directory)
    return AutoProcessor.from_pretrained(directory, local_files_only=True)


def build_model(kind: str, directory, seed: int = 0) -> Path:
    """A complete tiny `kind` checkpoint in `directory`: the processor above plus a random-weight model
    (seeded, float32, about 1-2 MB) that vLLM, transformers and TRL load like any Qwen-VL checkpoint. It
    answers noise: use it to exercise pipelines, never to measure a model."""
    processor = build_processor(kind, directory)
    # head_dim 32: the smallest head size vLLM's CPU attention supports
    text = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1)
    if kind == "qwen2_5_vl":
        vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=14,
                      fullatt_block_indexes=[1], window_size=112)
    else:
        vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=16,
                      num_position_embeddings=64, deepstack_visual_indexes=[0])
    readme = (f"# tiny random-weight {kind} (tirlab smoke model)\n\nBuilt by `runtime.tiny_model.build_model` with "
              f"seed {seed}. Random weights: its outputs are noise. It exists to run tirlab's pipelines end to end on "
              "a CPU.\n")
    return _save_model(kind, directory, processor, text, vision, seed, readme)


@dataclass(frozen=True)
class ToySize:
    """The sizes of a toy model. The defaults (about 0.9M parameters) learn rotated-word OCR on aligned
    renders (data_gen's `render="aligned"`) from scratch in about 1,000 steps of batch 32."""

    patch: int = 8  # merged 2 x 2: one image token per 16 x 16 pixels, one letter's column
    vision_hidden: int = 96
    vision_depth: int = 2
    vision_heads: int = 3
    vision_mlp: int = 192
    hidden: int = 128
    layers: int = 2
    heads: int = 4  # of 32 each: the smallest head size vLLM's CPU attention supports
    mlp: int = 384
    max_image_tokens: int = 12  # the image processor's max_pixels, in merged tokens: 32 x 96 is 2 x 6
    # Reading a word means attending from the k-th answer letter to image column k, and image tokens differ
    # only in their mrope (t, h, w) positions (Qwen2.5-VL's vision tower has no absolute positions). Qwen's
    # rope_theta of 10,000 gives the h and w sections rotations of under 0.1 rad per token, too little to tell
    # neighbouring columns apart: at 10,000, 1,000 steps learned the rotation and not one letter. At 10 the
    # w section turns 0.12-0.56 rad per column and reading set in after about 450 steps; at 3 (0.36-0.76 rad)
    # after 150-250 (seed 0, batch 32, lr 3e-3).
    rope_theta: float = 3.0
    # (t, h, w) frequency pairs, head_dim / 2 in all. Qwen2.5-VL's sections are contiguous, highest frequencies
    # first, so w gets the most pairs to reach fast ones; Qwen3-VL interleaves them (None: Qwen's 4, 6, 6).
    mrope_section: tuple[int, int, int] | None = None

    def sections(self, kind: str) -> tuple[int, int, int] | None:
        pairs = self.hidden // self.heads // 2
        if self.mrope_section and sum(self.mrope_section) != pairs:
            raise ValueError(f"toy size: mrope_section {self.mrope_section} must sum to head_dim / 2 = {pairs}")
        return self.mrope_section or ((2, 2, pairs - 4) if kind == "qwen2_5_vl" else None)


def build_toy_model(kind: str, directory, seed: int = 0, size: ToySize = ToySize()) -> Path:
    """A randomly initialised (seeded) toy `kind` model with the toy tokenizer, saved as a checkpoint in
    `directory`: the starting point of training from scratch. vLLM serves it like any Qwen-VL checkpoint."""
    _check_kind(kind)
    if size.hidden % size.heads or size.hidden // size.heads < 32 or size.vision_hidden % size.vision_heads:
        raise ValueError(f"toy size {size}: hidden must split into heads of at least 32 (vLLM's CPU attention), "
                         "vision_hidden into vision_heads")
    merged = (2 * size.patch) ** 2  # pixels per merged image token
    processor = _save_processor(kind, directory, toy_tokenizer(), size.patch, min(4, size.max_image_tokens) * merged,
                                size.max_image_tokens * merged)
    text = dict(hidden_size=size.hidden, intermediate_size=size.mlp, num_hidden_layers=size.layers,
                num_attention_heads=size.heads, num_key_value_heads=size.heads)
    vision = dict(depth=size.vision_depth, hidden_size=size.vision_hidden, intermediate_size=size.vision_mlp,
                  num_heads=size.vision_heads, out_hidden_size=size.hidden, patch_size=size.patch, spatial_merge_size=2)
    if kind == "qwen2_5_vl":
        # window attention in the first block over 4 x 4 merged tokens, full attention in the last
        vision.update(fullatt_block_indexes=[size.vision_depth - 1], window_size=4 * 2 * size.patch)
    else:
        vision.update(num_position_embeddings=64, deepstack_visual_indexes=[0])
    readme = (f"# toy {kind} (tirlab), trained from scratch\n\nInitialised by `runtime.tiny_model.build_toy_model` "
              f"with seed {seed} and sizes {asdict(size)}: {len(processor.tokenizer)} tokens, every letter outside "
              "the prompt's own words one token; a 32 x 96 image is 12 image tokens.\n")
    return _save_model(kind, directory, processor, text, vision, seed, readme, size.rope_theta, size.sections(kind))


def _save_model(kind: str, directory, processor, text: dict, vision: dict, seed: int, readme: str,
                rope_theta: float = 10000.0, mrope_section: tuple[int, int, int] | None = None) -> Path:
    import torch
    import transformers

    directory = Path(directory)
    tokenizer = processor.tokenizer
    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in (
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"))}
    eos, pad = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    head_dim = text["hidden_size"] // text["num_attention_heads"]
    # mrope (t, h, w) frequency pairs, summing to head_dim / 2
    sections = list(mrope_section or (head_dim // 8, 3 * head_dim // 16, 3 * head_dim // 16))
    text = dict(text, vocab_size=len(tokenizer), max_position_embeddings=32768, eos_token_id=eos, bos_token_id=None,
                pad_token_id=pad, tie_word_embeddings=True,
                rope_parameters={"rope_type": "default", "rope_theta": rope_theta, "mrope_section": sections})
    if kind == "qwen2_5_vl":
        config = transformers.Qwen2_5_VLConfig(text_config=text, vision_config=vision, **ids)
        model_class = transformers.Qwen2_5_VLForConditionalGeneration
    else:
        text["head_dim"] = head_dim
        text["rope_parameters"]["mrope_interleaved"] = True
        config = transformers.Qwen3VLConfig(text_config=text, vision_config=vision, **ids)
        model_class = transformers.Qwen3VLForConditionalGeneration
    config.tie_word_embeddings = True
    torch.manual_seed(seed)
    model = model_class(config).to(torch.float32).eval()
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    model.save_pretrained(directory)
    (directory / "README.md").write_text(readme)
    return directory
