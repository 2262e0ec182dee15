"""How fast the harness keeps the engine busy, against batch baselines, in one run:

1. the harness: 64 episodes of 3 turns (two tool calls, then an answer) through `EvalLoop`;
2. one `LLM.chat` batch of the same 64 first-turn prompts without tools, each generating exactly as many
   tokens as its episode did (`matched`, the target's baseline), and once more with every prompt generating
   the mean (`equal`: no tail of long episodes, the engine's ceiling);
3. the matched batch once more with each episode's tool images added to its prompt (`matched + tool images`):
   the engine then also encodes and prefills the images the harness's later turns showed it, work that no
   harness can avoid. The harness against it is the harness's own cost;
4. the benchmarks' own pattern: one episode at a time, one turn at a time (`EvalLoop` with max_active=1),
   on the first `--sequential` episodes.

    python eval/bench.py                    # vLLM CPU engine, the tiny random-weight model, the tasks' images
    python eval/bench.py --image-mp 1 --episodes 32 --rounds 2 --sequential 0   # tool images of 1-5.6 MP

All share one engine; its prefix, multimodal and encoder caches are emptied before each. The harness and
the batches run in `--rounds` rounds, each ratio taken within a round (the machine's speed drifts between
rounds on a shared host) and reported as the median over rounds. A random-weight model calls no tools by itself, so the
harness scripts its replies (eval/forcing.py): a think block of the model's own tokens, then a tool call
drawn from the tool's schema, or an answer.

The harness's own CPU time per turn is read around its parts (thread CPU time, in the thread that runs each),
and against the whole process's CPU time: what the harness does between a reply and the next request.
Targets: harness >= 0.9x the matched batch and >= 5x the sequential loop, in generated tokens per second.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from datetime import date

BATCH_TARGET, SEQUENTIAL_TARGET = 0.9, 5.0


class CpuParts:
    """CPU seconds spent in named methods, each read with the thread CPU clock of the thread that calls it.
    `measure(owner, attribute, part)` wraps a method until `restore()`."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self._wrapped: list[tuple[object, str, object]] = []

    def measure(self, owner, attribute: str, part: str) -> None:
        method = getattr(owner, attribute)
        seconds = self.seconds

        def timed(*args, **kwargs):
            start = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                seconds[part] += time.thread_time() - start

        self._wrapped.append((owner, attribute, owner.__dict__.get(attribute)))
        setattr(owner, attribute, timed)

    def restore(self) -> None:
        for owner, attribute, original in reversed(self._wrapped):
            if original is None:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, original)
        self._wrapped.clear()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--sequential", type=int, default=16, help="episodes the one-at-a-time loop runs (0: none)")
    parser.add_argument("--think", default="120,200", help="free tokens of each reply's <think> block: min,max")
    parser.add_argument("--max-tokens", type=int, default=512, help="tokens per reply (a bound, not a target)")
    parser.add_argument("--rounds", type=int, default=3, help="harness-then-batches rounds; ratios are medians")
    parser.add_argument("--image-mp", type=float, help="scale each task's image to about this many megapixels "
                        "(its tools' outputs are then of that size or larger); default: the tasks' own images")
    args = parser.parse_args()

    import cv2
    import numpy as np

    from eval.backends import Sampling, pil_images
    from eval.backends import vllm_engine
    from eval.forcing import ForcedReplies
    from eval.loop import EvalLoop, toolboxes
    from eval.presets import get_preset
    from eval.suites.synthetic import synthetic_suite
    from runtime.episode import Episode
    from runtime.tiny_model import build_model
    from runtime.toolbox import ToolBox

    tasks = list(synthetic_suite(("rotated_ocr", "rotation_game"), per_task=math.ceil(args.episodes / 2)))
    tasks = tasks[:args.episodes]
    if args.image_mp:
        def scaled(image: np.ndarray) -> np.ndarray:
            factor = math.sqrt(args.image_mp * 1e6 / (image.shape[0] * image.shape[1]))
            return cv2.resize(image, None, fx=factor, fy=factor, interpolation=cv2.INTER_LINEAR)

        tasks = [replace(task, images=tuple(scaled(image) for image in task.images)) for task in tasks]
    preset = get_preset("qwen2.5-vl")
    model = build_model("qwen2_5_vl", tempfile.mkdtemp(prefix="tirlab-bench-"))
    # the tasks' own images are shown as the tiny processor caps them (64 image tokens at most); scaled ones as the
    # preset shows a real Qwen2.5-VL's (up to 1280 tokens each)
    backend = vllm_engine.VLLMEngineBackend(
        str(model), max_model_len=16384 if args.image_mp else 4096, limit_images=4, dtype="float32",
        max_num_seqs=256, forced_replies=True, mm_processor_kwargs=preset.processor_kwargs if args.image_mp else None)
    profile = preset.profile
    sampling = Sampling(max_tokens=args.max_tokens, temperature=1.0)
    forced = ForcedReplies(2, think=tuple(int(x) for x in args.think.split(",")))
    engine = backend.engine

    cpu = CpuParts()
    parts = {  # what the harness process does per turn, by who does it
        "build the prompt (episode state -> messages)": (Episode, "prompt"),
        "parse the reply (episode state machine)": (Episode, "submit"),
        "run the tools (tool thread)": (ToolBox, "run"),
        "chat template": (vllm_engine, "render_text"),
        "prompt token ids (remembered pieces)": (vllm_engine.PromptTokens, "__call__"),
        "image content keys": (backend._image_ids, "key"),
        "vLLM input processing (image preprocessing, requests)": (engine.input_processor, "process_inputs"),
        "vLLM hand-off to the engine core": (engine.engine_core, "add_request"),
        "vLLM output processing (detokenize)": (engine.output_processor, "process_outputs"),
    }

    def fresh_caches():
        # every measurement starts cold: the same images come back every round (the forced calls are seeded),
        # and a warm multimodal cache would skip the image preprocessing and the vision tower a run pays once
        backend.llm.reset_prefix_cache()
        backend.llm.reset_mm_cache()
        engine.reset_encoder_cache()

    def harness(subset, max_active, measure_cpu=False):
        fresh_caches()
        loop = EvalLoop(backend, profile, sampling, toolboxes(profile), max_active=max_active, forced=forced)
        if measure_cpu:
            for name, (owner, attribute) in parts.items():
                cpu.measure(owner, attribute, name)
        process_cpu, start = time.process_time(), time.perf_counter()
        try:
            finished = list(loop.run([(task, "tools") for task in subset]))
        finally:
            cpu.restore()
        seconds = time.perf_counter() - start
        if measure_cpu:
            cpu.seconds["the whole process"] += time.process_time() - process_cpu
        return sum(f.completion_tokens for f in finished), seconds, finished

    # the batch: the same first-turn prompts, no tools, each making exactly as many tokens as its episode did
    # (its lengths vary as the episodes' do, so the last prompts finish late in both); and once with every
    # prompt making the mean, which no evaluation gets: the engine's ceiling
    from vllm import SamplingParams

    toolbox_for = toolboxes(profile)
    first_turns = []
    for task in tasks:
        episode = toolbox_for(task, "tools").start(profile, task.question, task.images)
        prompt = episode.prompt()
        first_turns.append((prompt.messages, pil_images(prompt)))
        episode.close()

    def batch(conversations, lengths):
        params = [SamplingParams(max_tokens=n, min_tokens=n, ignore_eos=True, temperature=1.0) for n in lengths]
        fresh_caches()
        start = time.perf_counter()
        outputs = backend.llm.chat(conversations, params, use_tqdm=False)
        return sum(len(o.outputs[0].token_ids) for o in outputs), time.perf_counter() - start

    print(f"machine: {platform.node()} ({platform.processor() or platform.machine()}); date {date.today()}")
    if args.image_mp:
        sizes = [image.shape[0] * image.shape[1] / 1e6 for task in tasks for image in task.images]
        print(f"task images scaled to {min(sizes):.2f}-{max(sizes):.2f} MP")
    # warm-up at full size, every measurement once: one-off costs of the first batches of that size are not
    # what a long evaluation sees
    def per_task(finished):  # (tokens each episode made, its first prompt with its tool images), in task order
        by_id = {f.task.id: f for f in finished}
        return ([by_id[task.id].completion_tokens for task in tasks],
                [_with_images(messages, images, more=_tool_images(by_id[task.id]))
                 for (messages, images), task in zip(first_turns, tasks)])

    plain = [_with_images(messages, images) for messages, images in first_turns]
    made, with_tool_images = per_task(harness(tasks, len(tasks))[2])
    batch(plain, made)
    batch(with_tool_images, made)
    names = {"matched": "each as many tokens as its episode", "equal": "each the mean",
             "matched + tool images": "as matched, each prompt also showing its episode's tool images"}
    ratios = {name: [] for name in names}
    turns_measured = 0
    for round_ in range(1, args.rounds + 1):  # adjacent measurements, so the machine's drift cancels in a ratio
        tokens, seconds, finished = harness(tasks, len(tasks), measure_cpu=True)
        made, with_tool_images = per_task(finished)
        runs = {"matched": batch(plain, made), "equal": batch(plain, [math.ceil(tokens / len(tasks))] * len(tasks)),
                "matched + tool images": batch(with_tool_images, made)}
        turns = sum(f.turns for f in finished)
        turns_measured += turns
        calls_ran = sum(1 for f in finished for m in f.trajectory.messages
                        if m["role"] == "tool" and not m.get("error"))
        tool_pixels = [image.shape[0] * image.shape[1] / 1e6 for f in finished for image in f.trajectory.images[1:]]
        rate = tokens / seconds
        print(f"round {round_}:\n  harness:          {len(finished)} episodes, {turns / len(finished):.2f} "
              f"turns/episode, {calls_ran} tool calls ran (their images {min(tool_pixels, default=0):.2f}-"
              f"{max(tool_pixels, default=0):.2f} MP), {tokens} tokens in {seconds:.2f} s = {rate:.1f} tokens/s")
        for name, what in names.items():
            count, elapsed = runs[name]
            ratios[name].append(rate / (count / elapsed))
            print(f"  batch ({name}): one LLM.chat of {len(plain)} prompts, {what}: "
                  f"{count} tokens in {elapsed:.2f} s = {count / elapsed:.1f} tokens/s")

    print(f"harness CPU per turn, the mean over {args.rounds} rounds ({turns_measured} turns), in ms:")
    whole = cpu.seconds.pop("the whole process")
    for name, seconds in sorted(cpu.seconds.items(), key=lambda item: -item[1]):
        print(f"  {1e3 * seconds / turns_measured:6.2f}  {name}")
    rest = whole - sum(cpu.seconds.values())
    print(f"  {1e3 * rest / turns_measured:6.2f}  the rest (the loop, vLLM's output thread, other threads)")
    print(f"  {1e3 * whole / turns_measured:6.2f}  the whole harness process")

    verdicts = []
    if args.sequential:
        seq_tokens, seq_seconds, _ = harness(tasks[:args.sequential], 1)
        seq_rate = seq_tokens / seq_seconds
        print(f"sequential:         {args.sequential} episodes one at a time, {seq_tokens} tokens in "
              f"{seq_seconds:.2f} s = {seq_rate:.1f} tokens/s")
        vs_sequential = rate / seq_rate  # the last round's harness, measured next to it
    backend.close()
    for name, values in ratios.items():
        median = statistics.median(values)
        listed = ", ".join(f"{v:.2f}" for v in values)
        if name == "matched":
            verdicts.append(median >= BATCH_TARGET)
            note = f"(target >= {BATCH_TARGET:.2f}) {'PASS' if verdicts[-1] else 'FAIL'}"
        elif name == "equal":
            note = "(the ceiling: no tail of long episodes)"
        else:
            note = "(the same engine work: what the harness itself costs)"
        print(f"harness / batch ({name}) = {median:.2f}x, the median of {listed} {note}")
    if args.sequential:
        verdicts.append(vs_sequential >= SEQUENTIAL_TARGET)
        print(f"harness / sequential = {vs_sequential:.2f}x (target >= {SEQUENTIAL_TARGET:.2f}) "
              f"{'PASS' if verdicts[-1] else 'FAIL'}")
    return 0 if all(verdicts) else 1


def _tool_images(finished) -> list:
    from PIL import Image

    return [Image.fromarray(image) for image in finished.trajectory.images[1:]]


def _with_images(messages: list[dict], images: list, more: list = ()) -> list[dict]:
    """Prompt messages with their `{"type": "image"}` placeholders filled, as `LLM.chat` takes them; `more`
    images go after the last message's own."""
    images = iter(images)
    filled = []
    for message in messages:
        content = [{"type": "image_pil", "image_pil": next(images)} if part["type"] == "image" else part
                   for part in message["content"]]
        filled.append({**message, "content": content})
    filled[-1]["content"] = filled[-1]["content"] + [{"type": "image_pil", "image_pil": image} for image in more]
    return filled


if __name__ == "__main__":
    raise SystemExit(main())
