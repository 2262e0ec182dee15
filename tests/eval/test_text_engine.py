"""A text-only model on the vLLM engine backend, as a local judge runs: its processor is its tokenizer and it has
no multimodal configuration. Its prompts go in as token ids, checked against the engine's own tokenizing, and
replies come back."""

from __future__ import annotations

import pytest

from eval.backends import Sampling
from runtime.protocols import Prompt


@pytest.fixture(scope="module")
def text_model(tmp_path_factory):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from runtime.tiny_model import _tokenizer, chat_template

    directory = tmp_path_factory.mktemp("tiny-qwen2")
    tokenizer = _tokenizer()
    tokenizer.chat_template = chat_template("qwen2_5_vl.jinja")  # it renders content given as a list of parts
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    # head_dim 32: the smallest head size vLLM's CPU attention supports
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                         eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"), tie_word_embeddings=True)
    Qwen2ForCausalLM(config).to(torch.float32).save_pretrained(directory)
    return directory


def test_a_text_only_model_answers_on_the_engine_backend(text_model, monkeypatch):
    from eval.backends.vllm_engine import VLLMEngineBackend

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    backend = VLLMEngineBackend(str(text_model), max_model_len=512, dtype="float32", prompt_checks=None)
    try:
        for turn in range(2):
            prompt = Prompt([{"role": "user", "content": [{"type": "text", "text": f"Is the sky blue? ({turn})"}]}],
                            [])
            backend.submit(f"judge-{turn}", prompt, Sampling(max_tokens=4, temperature=0.0))
        done = dict(backend.poll())
        while len(done) < 2:
            done.update(backend.poll())
    finally:
        backend.close()
    assert all(c.error is None and c.completion_tokens >= 1 for c in done.values()), done
    assert backend.prompt_tokens.checked == 2 and backend.prompt_tokens.mismatch is None
