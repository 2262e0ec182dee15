"""How fast the harness keeps the engine busy, against two baselines, in one run:

1. the harness: 64 episodes of 3 turns (two tool calls, then an answer) through `EvalLoop`;
2. one `LLM.chat` batch of the same 64 first-turn prompts without tools, each generating exactly as many
   tokens as its episode did (the target's baseline), and once more with every prompt generating the mean
   (no tail of long episodes: the engine's ceiling);
3. the benchmarks' own pattern: one episode at a time, one turn at a time (`EvalLoop` with max_active=1),
   on the first `--sequential` episodes.

    python eval/bench.py            # vLLM CPU engine, the tiny random-weight model

All share one engine; its prefix cache is emptied before each. The harness and the batches run in
`--rounds` rounds, each ratio taken within a round (the machine's speed drifts between rounds on a shared
host) and reported as the median over rounds. A random-weight model calls no tools by itself, so the
harness scripts its replies (eval/forcing.py): a think block of the model's own tokens, then a tool call
drawn from the tool's schema, or an answer.
Targets: harness >= 0.7x the batch and >= 5x the sequential loop, in generated tokens per second.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import tempfile
import time
from datetime import date


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--sequential", type=int, default=16, help="episodes the one-at-a-time loop runs")
    parser.add_argument("--think", default="120,200", help="free tokens of each reply's <think> block: min,max")
    parser.add_argument("--max-tokens", type=int, default=512, help="tokens per reply (a bound, not a target)")
    parser.add_argument("--rounds", type=int, default=3, help="harness-then-batches rounds; ratios are medians")
    args = parser.parse_args()

    from eval.backends import Sampling, pil_images
    from eval.backends.vllm_engine import VLLMEngineBackend
    from eval.forcing import ForcedReplies
    from eval.loop import EvalLoop, toolboxes
    from eval.presets import get_preset
    from eval.suites.synthetic import synthetic_suite
    from runtime.tiny_model import build_model

    tasks = list(synthetic_suite(("rotated_ocr", "rotation_game"), per_task=math.ceil(args.episodes / 2)))
    tasks = tasks[:args.episodes]
    model = build_model("qwen2_5_vl", tempfile.mkdtemp(prefix="tirlab-bench-"))
    backend = VLLMEngineBackend(str(model), max_model_len=4096, limit_images=4, dtype="float32", max_num_seqs=256,
                                forced_replies=True)
    profile = get_preset("qwen2.5-vl").profile
    sampling = Sampling(max_tokens=args.max_tokens, temperature=1.0)
    forced = ForcedReplies(2, think=tuple(int(x) for x in args.think.split(",")))

    def harness(subset, max_active):
        backend.llm.reset_prefix_cache()
        loop = EvalLoop(backend, profile, sampling, toolboxes(profile), max_active=max_active, forced=forced)
        start = time.perf_counter()
        finished = list(loop.run([(task, "tools") for task in subset]))
        seconds = time.perf_counter() - start
        return sum(f.completion_tokens for f in finished), seconds, finished

    # the batch: the same first-turn prompts, no tools, each making exactly as many tokens as its episode did
    # (its lengths vary as the episodes' do, so the last prompts finish late in both); and once with every
    # prompt making the mean, which no evaluation gets: the engine's ceiling
    from vllm import SamplingParams

    toolbox_for = toolboxes(profile)
    conversations = []
    for task in tasks:
        episode = toolbox_for(task, "tools").start(profile, task.question, task.images)
        prompt = episode.prompt()
        conversations.append(_with_images(prompt.messages, pil_images(prompt)))
        episode.close()

    def batch(lengths):
        params = [SamplingParams(max_tokens=n, min_tokens=n, ignore_eos=True, temperature=1.0) for n in lengths]
        backend.llm.reset_prefix_cache()
        start = time.perf_counter()
        outputs = backend.llm.chat(conversations, params, use_tqdm=False)
        return sum(len(o.outputs[0].token_ids) for o in outputs), time.perf_counter() - start

    print(f"machine: {platform.node()} ({platform.processor() or platform.machine()}); date {date.today()}")
    harness(tasks[:4], 4)  # warm-up: first requests pay one-off costs
    ratios = {"matched": [], "equal": []}
    for round_ in range(1, args.rounds + 1):  # adjacent measurements, so the machine's drift cancels in a ratio
        tokens, seconds, finished = harness(tasks, len(tasks))
        made = {f.task.id: f.completion_tokens for f in finished}
        runs = {"matched": batch([made[task.id] for task in tasks]),
                "equal": batch([math.ceil(tokens / len(tasks))] * len(tasks))}
        turns = sum(f.turns for f in finished) / len(finished)
        calls_ran = sum(1 for f in finished for m in f.trajectory.messages
                        if m["role"] == "tool" and not m.get("error"))
        rate = tokens / seconds
        print(f"round {round_}:\n  harness:          {len(finished)} episodes, {turns:.2f} turns/episode, {calls_ran} "
              f"tool calls ran, {tokens} tokens in {seconds:.2f} s = {rate:.1f} tokens/s")
        for name, what in (("matched", "each as many tokens as its episode"), ("equal", "each the mean")):
            count, elapsed = runs[name]
            ratios[name].append(rate / (count / elapsed))
            print(f"  batch ({name}):{' ' * (8 - len(name))}one LLM.chat of {len(conversations)} prompts, {what}: "
                  f"{count} tokens in {elapsed:.2f} s = {count / elapsed:.1f} tokens/s")

    seq_tokens, seq_seconds, _ = harness(tasks[:args.sequential], 1)
    backend.close()
    seq_rate = seq_tokens / seq_seconds
    print(f"sequential:         {args.sequential} episodes one at a time, {seq_tokens} tokens in {seq_seconds:.2f} s "
          f"= {seq_rate:.1f} tokens/s")
    vs_batch = {name: statistics.median(values) for name, values in ratios.items()}
    vs_sequential = rate / seq_rate  # the last round's harness, measured next to it
    listed = {name: ", ".join(f"{v:.2f}" for v in values) for name, values in ratios.items()}
    print(f"harness / batch (matched) = {vs_batch['matched']:.2f}x, the median of {listed['matched']} "
          f"(target >= 0.70) {'PASS' if vs_batch['matched'] >= 0.7 else 'FAIL'}")
    print(f"harness / batch (equal)   = {vs_batch['equal']:.2f}x, the median of {listed['equal']} "
          f"(the ceiling: no tail of long episodes)")
    print(f"harness / sequential      = {vs_sequential:.2f}x (target >= 5.00) "
          f"{'PASS' if vs_sequential >= 5 else 'FAIL'}")
    return 0 if vs_batch["matched"] >= 0.7 and vs_sequential >= 5 else 1


def _with_images(messages: list[dict], images: list) -> list[dict]:
    """Prompt messages with their `{"type": "image"}` placeholders filled, as `LLM.chat` takes them."""
    images = iter(images)
    filled = []
    for message in messages:
        content = [{"type": "image_pil", "image_pil": next(images)} if part["type"] == "image" else part
                   for part in message["content"]]
        filled.append({**message, "content": content})
    return filled


if __name__ == "__main__":
    raise SystemExit(main())
