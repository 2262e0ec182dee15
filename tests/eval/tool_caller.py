"""A tiny Qwen2.5-VL that honestly calls tools: the random-weight checkpoint of `runtime.tiny_model`, briefly
fine-tuned on reference trajectories of the `rotated_ocr` task, rendered by the `qwen2_5_vl` profile's hermes
protocol through the real chat template, with the loss on the assistant tokens only.

Greedy decoding then writes `<tool_call>\\n{"name": "rotate", "arguments": {"degree": 180}}\\n</tool_call>` on
the first turn and `<answer>...</answer>` after the tool response. It cannot read (the vision tower stays
random and frozen; 64 hidden units could not learn OCR in seconds anyway): its calls parse and run, its
answers are letters it memorised. It exists to test servers and harnesses on real multi-turn tool use on a
CPU. On held-out seeds 3000-3063 every episode called `rotate` and answered.
"""

from __future__ import annotations

from pathlib import Path

import torch

from data_gen.sample import reference_episode
from data_gen.tasks import rotated_ocr
from eval.backends import pil_images
from runtime.profiles import PROFILES
from runtime.tiny_model import build_model

PROFILE = "qwen2_5_vl"
TRAINING_SEEDS = range(96)  # fewer images leave the call format sensitive to the image (broken calls on ~1 in 30)
STEPS = 300
LEARNING_RATE = 1e-2
IGNORE = -100  # the label of tokens outside the assistant turns


def training_examples(processor) -> list[dict]:
    """Model inputs of each reference episode, labelled only on the assistant turns (their `<|im_end|>`
    included, so that the model learns to stop)."""
    protocol = PROFILES[PROFILE].protocol
    header = processor.tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    end = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    examples = []
    for seed in TRAINING_SEEDS:
        episode = reference_episode(rotated_ocr.generate(seed, difficulty="easy"))
        try:
            prompt = protocol.render(episode.trajectory)
        finally:
            episode.close()
        text = processor.apply_chat_template(prompt.messages, tokenize=False)
        inputs = processor(text=[text], images=pil_images(prompt), return_tensors="pt")
        ids = inputs["input_ids"][0].tolist()
        labels = [IGNORE] * len(ids)
        for start in range(len(ids) - len(header)):
            if ids[start:start + len(header)] == header:
                reply = start + len(header)
                stop = ids.index(end, reply)
                labels[reply:stop + 1] = ids[reply:stop + 1]
        inputs["labels"] = torch.tensor([labels])
        examples.append(dict(inputs))
    return examples


def train_tool_caller(directory, steps: int = STEPS, seed: int = 0) -> Path:
    """Build the tiny Qwen2.5-VL in `directory`, fine-tune it to call `rotate` and then answer, and save the
    weights back there. About 15 s on two CPU cores."""
    import transformers

    directory = Path(directory)
    build_model(PROFILE, directory, seed=seed)
    processor = transformers.AutoProcessor.from_pretrained(directory, local_files_only=True)
    model = transformers.Qwen2_5_VLForConditionalGeneration.from_pretrained(directory, local_files_only=True)
    examples = training_examples(processor)
    model.model.visual.requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LEARNING_RATE,
                                  weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / steps)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is as fast, and two spin-wait 20x slower on busy cores
    try:
        model.train()
        for step in range(steps):
            loss = model(**examples[step % len(examples)]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
    finally:
        torch.set_num_threads(threads)
    model.eval()
    model.save_pretrained(directory)
    return directory
