"""Hugging Face `generate`, the fallback for models vLLM does not serve: what is queued when the harness
polls is generated in left-padded batches of `batch_size` (requests with equal sampling together)."""

from __future__ import annotations

import time
from dataclasses import replace

from eval.backends import Completion, Sampling, pil_images, render_text
from runtime.protocols import Prompt


class HFGenerateBackend:
    name = "hf"

    def __init__(self, model: str, dtype: str = "auto", device: str | None = None, batch_size: int = 8,
                 processor_kwargs: dict | None = None, max_model_len: int = 32768):
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.processor = AutoProcessor.from_pretrained(model, **(processor_kwargs or {}))
        self.processor.tokenizer.padding_side = "left"
        self.model = AutoModelForImageTextToText.from_pretrained(model, dtype=dtype).to(self.device).eval()
        self.batch_size = batch_size
        self.max_model_len = max_model_len  # a reply without a token cap ends there, as in vLLM
        self._queue: list[tuple[str, Prompt, Sampling, float]] = []

    def submit(self, key: str, prompt: Prompt, sampling: Sampling) -> None:
        self._queue.append((key, prompt, sampling, time.perf_counter()))

    def poll(self, timeout: float | None = None) -> list[tuple[str, Completion]]:
        if not self._queue:
            return []
        sampling = self._queue[0][2]
        unseeded = replace(sampling, seed=None)  # one generate call draws for the whole batch
        batch = [r for r in self._queue if replace(r[2], seed=None) == unseeded][:self.batch_size]
        self._queue = [r for r in self._queue if not any(r is b for b in batch)]
        if sampling.regex:
            return [(key, Completion("", error="structured outputs (a reply regex) need a vLLM backend"))
                    for key, *_ in batch]
        if sampling.presence_penalty:
            return [(key, Completion("", error="HF generate has no presence penalty: use the vllm or openai backend, "
                                               "or run with --presence_penalty 0")) for key, *_ in batch]
        try:
            return self._generate(batch, sampling)
        except Exception as err:  # noqa: BLE001 - e.g. out of memory: these requests fail, the run goes on
            return [(key, Completion("", error=f"generate failed: {type(err).__name__}: {err}")) for key, *_ in batch]

    def _generate(self, batch, sampling: Sampling) -> list[tuple[str, Completion]]:
        import torch

        texts = [render_text(self.processor, prompt) for _, prompt, _, _ in batch]
        images = [image for _, prompt, _, _ in batch for image in pil_images(prompt)]
        inputs = self.processor(text=texts, images=images or None, padding=True, return_tensors="pt").to(self.device)
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        stops = sorted({s for _, prompt, _, _ in batch for s in prompt.stop})
        # every sampling field explicit: one left out is taken from the checkpoint's generation_config.json
        # (Qwen2.5-VL's: top_k 1, repetition_penalty 1.05), and top_k would otherwise default to 50
        drawn = dict(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k) \
            if sampling.temperature > 0 else {}
        width = inputs["input_ids"].shape[1]
        limit = sampling.max_tokens or max(self.max_model_len - width, 1)
        with torch.inference_mode():
            output = self.model.generate(
                **inputs, max_new_tokens=limit, do_sample=sampling.temperature > 0, **drawn,
                repetition_penalty=sampling.repetition_penalty, stop_strings=stops or None,
                tokenizer=self.processor.tokenizer)
        pad = self.processor.tokenizer.pad_token_id
        eos = set(_as_list(self.model.generation_config.eos_token_id))
        done = []
        for row, (key, prompt, _, submitted) in enumerate(batch):
            tokens = [t for t in output[row, width:].tolist() if t != pad]
            ended = bool(tokens) and tokens[-1] in eos
            text = self.processor.tokenizer.decode(tokens, skip_special_tokens=True)
            stop = min((s for s in prompt.stop if s in text), key=text.index, default=None)
            if stop is not None:  # servers strip the stop string that ended the reply; so does this backend
                text = text[:text.index(stop)]
            prompt_tokens = int(inputs["attention_mask"][row].sum())
            done.append((key, Completion(text, prompt_tokens, len(tokens),
                                         truncated=not ended and stop is None and len(tokens) >= limit,
                                         stop=stop,
                                         latency_s=time.perf_counter() - submitted)))
        return done

    def in_flight(self) -> int:
        return len(self._queue)

    def close(self) -> None:
        self._queue.clear()


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value] if value is not None else []
