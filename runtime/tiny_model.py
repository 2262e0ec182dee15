"""Tiny local Qwen2.5-VL and Qwen3-VL processors, built offline in well under a second.

The real chat templates (TRL's copies of Qwen's official ones, read from the installed `trl` package), a
byte-level BPE tokenizer trained here on a small corpus with Qwen's pre-tokenizer and special tokens, and
the real image and video processor classes with small image sizes. No model weights and no downloads:
the processor is saved to a directory and loaded back with `AutoProcessor.from_pretrained`, as a real
checkpoint would be.

    processor = build_processor("qwen3_vl", tmp_dir)
    processor.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)

No pytest dependency: tests/runtime/conftest.py wraps it in session fixtures.
"""

from __future__ import annotations

import json
import os
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
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    vocab, merges = _train_tokenizer()
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=merges, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                               unk_token=None, model_max_length=32768)
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS], special_tokens=True)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    return tokenizer


def build_processor(kind: str, directory):
    """Build the tiny `kind` processor ("qwen2_5_vl" or "qwen3_vl"), save it to `directory` and return it
    as `AutoProcessor.from_pretrained(directory)` loads it (offline)."""
    if kind not in _SPECS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers
    from transformers import AutoProcessor, Qwen2VLImageProcessor

    processor_class, video_class, template, patch, (mean, std) = _SPECS[kind]
    factor = 2 * patch  # patch * merge_size: image sides are multiples of it
    size = {"shortest_edge": 4 * factor**2, "longest_edge": 64 * factor**2}
    common = dict(patch_size=patch, temporal_patch_size=2, merge_size=2, image_mean=mean, image_std=std)
    image_processor = Qwen2VLImageProcessor(size=size, **common)
    video_processor = getattr(transformers, video_class)(size=size, **common)
    processor = getattr(transformers, processor_class)(image_processor=image_processor, tokenizer=_tokenizer(),
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
    import torch
    import transformers

    directory = Path(directory)
    processor = build_processor(kind, directory)
    tokenizer = processor.tokenizer
    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in (
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"))}
    eos, pad = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    # head_dim 32: the smallest head size vLLM's CPU attention supports; mrope sections sum to head_dim / 2
    text = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32768, eos_token_id=eos,
                bos_token_id=None, pad_token_id=pad, tie_word_embeddings=True,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6]})
    if kind == "qwen2_5_vl":
        vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=14,
                      fullatt_block_indexes=[1], window_size=112)
        config = transformers.Qwen2_5_VLConfig(text_config=text, vision_config=vision, **ids)
        model_class = transformers.Qwen2_5_VLForConditionalGeneration
    else:
        text["head_dim"] = 32
        text["rope_parameters"]["mrope_interleaved"] = True
        vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=16,
                      num_position_embeddings=64, deepstack_visual_indexes=[0])
        config = transformers.Qwen3VLConfig(text_config=text, vision_config=vision, **ids)
        model_class = transformers.Qwen3VLForConditionalGeneration
    config.tie_word_embeddings = True
    torch.manual_seed(seed)
    model = model_class(config).to(torch.float32).eval()
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    model.save_pretrained(directory)
    (directory / "README.md").write_text(
        f"# tiny random-weight {kind} (tirlab smoke model)\n\nBuilt by `runtime.tiny_model.build_model` with seed "
        f"{seed}. Random weights: its outputs are noise. It exists to run tirlab's pipelines end to end on a CPU.\n")
    return directory
