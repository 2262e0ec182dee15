"""runtime/tiny_model.py's toy models: built from a size, saved and loaded as any checkpoint, about 0.9M
parameters, a tokenizer that spells each letter of a read word as one token, and 12 image tokens for an
aligned 32 x 96 render. The smoke model keeps its sizes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from data_gen.text import aligned_words, render_aligned
from runtime.tiny_model import ToySize, build_model, build_toy_model, toy_corpus, toy_words


@pytest.fixture(scope="module", params=["qwen2_5_vl", "qwen3_vl"])
def toy(request, tmp_path_factory):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    directory = build_toy_model(request.param, tmp_path_factory.mktemp(request.param))
    return (request.param, AutoProcessor.from_pretrained(directory),
            AutoModelForImageTextToText.from_pretrained(directory), directory)


def test_toy_model_has_the_toy_size(toy):
    kind, processor, model, directory = toy
    config = json.loads((directory / "config.json").read_text())
    text, vision = config["text_config"], config["vision_config"]
    assert (text["hidden_size"], text["num_hidden_layers"], text["num_attention_heads"], text["intermediate_size"]) \
        == (128, 2, 4, 384)
    assert (vision["hidden_size"], vision["depth"], vision["patch_size"], vision["spatial_merge_size"]) == (96, 2, 8, 2)
    # rope fast enough to tell neighbouring image columns apart (ToySize's comment)
    assert text["rope_parameters"]["rope_theta"] == 3.0
    if kind == "qwen2_5_vl":
        assert text["rope_parameters"]["mrope_section"] == [2, 2, 12]
    parameters = sum(p.numel() for p in model.parameters())
    assert 0.8e6 < parameters < (1.0e6 if kind == "qwen2_5_vl" else 1.2e6), parameters
    assert text["vocab_size"] == len(processor.tokenizer) < 600


def test_each_letter_of_a_read_word_is_one_token(toy):
    _, processor, _, _ = toy
    tokenizer = processor.tokenizer
    alphabet = {letter: tokenizer.convert_tokens_to_ids(letter) for letter in "abcdefghijklmnopqrstuvwxyz"}
    assert len(set(alphabet.values())) == 26
    for word in aligned_words(toy_words())[::997]:
        ids = tokenizer(f"<answer>{word}</answer>", add_special_tokens=False)["input_ids"]
        assert [alphabet[letter] for letter in word] == ids[3:3 + len(word)], word
        assert tokenizer.decode(ids) == f"<answer>{word}</answer>"
    # the prompt's own words are whole tokens, and the tool prompt, the same in every agentic sample, is one
    assert len(tokenizer(" function", add_special_tokens=False)["input_ids"]) == 1
    tool_prompt = toy_corpus()[0]
    assert tool_prompt.startswith("# Tools") and "rotate" in tool_prompt
    ids = tokenizer(f"x{tool_prompt}y", add_special_tokens=False)["input_ids"]
    assert len(ids) == 3 and tokenizer.decode(ids) == f"x{tool_prompt}y"
    for token in ("<|im_start|>", "<|image_pad|>", "<tool_call>", "</tool_call>"):
        assert len(tokenizer(token, add_special_tokens=False)["input_ids"]) == 1


def test_an_aligned_render_is_twelve_image_tokens_one_column_per_letter(toy):
    _, processor, _, _ = toy
    upright = render_aligned("quartz")
    grids = processor.image_processor(images=[upright, np.rot90(upright).copy()])["image_grid_thw"].tolist()
    assert grids == [[1, 4, 12], [1, 12, 4]]  # 8-px patches; merged 2 x 2: 2 x 6 = 12 tokens, 6 letter columns
    text = processor.apply_chat_template([{"role": "user", "content": [{"type": "image"}]}], tokenize=False)
    ids = processor(text=[text], images=[upright])["input_ids"][0]
    assert list(ids).count(processor.image_token_id) == 12


def test_toy_model_is_seeded_and_checks_its_size(tmp_path):
    from safetensors.torch import load_file

    a = load_file(build_toy_model("qwen2_5_vl", tmp_path / "a", seed=3) / "model.safetensors")
    b = load_file(build_toy_model("qwen2_5_vl", tmp_path / "b", seed=3) / "model.safetensors")
    c = load_file(build_toy_model("qwen2_5_vl", tmp_path / "c", seed=4) / "model.safetensors")
    assert all((a[k] == b[k]).all() for k in a) and any(not (a[k] == c[k]).all() for k in a)
    with pytest.raises(ValueError, match="heads of at least 32"):
        build_toy_model("qwen2_5_vl", tmp_path / "d", size=ToySize(heads=8))
    with pytest.raises(ValueError, match="kind must be one of"):
        build_toy_model("llava", tmp_path / "e")


def test_the_smoke_model_keeps_its_sizes(tmp_path):
    config = json.loads((build_model("qwen2_5_vl", tmp_path) / "config.json").read_text())
    assert (config["text_config"]["hidden_size"], config["vision_config"]["patch_size"]) == (64, 14)
    assert config["text_config"]["rope_parameters"]["mrope_section"] == [4, 6, 6]
