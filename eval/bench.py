"""How fast the harness keeps the engine busy, against the two baselines of issue 5, in one run:

1. the harness: 64 episodes of 3 turns (two tool calls, then an answer) through `EvalLoop`;
2. one `LLM.chat` batch of the same 64 first-turn prompts generating about as many tokens without tools
   (the engine's own batch speed: the ceiling), under the same kind of grammar as the harness;
3. the benchmarks' own pattern: one episode at a time, one turn at a time (`EvalLoop` with max_active=1),
   on the first `--sequential` episodes.

    python eval/bench.py            # vLLM CPU engine, the tiny random-weight model

All share one engine; its prefix cache is emptied before each. A random-weight model calls no tools by
itself, so the harness's replies are constrained by structured outputs (eval/grammar.py): a think block,
then a tool call, or the answer. Grammar-constrained decoding is slower than free decoding on vLLM's CPU
backend (xgrammar's masks cost about a third of the tiny model's speed), so the target compares the harness
with a batch decoding under the same kind of grammar; the unconstrained batch is printed too.
Targets: harness >= 0.7x the batch and >= 5x the sequential loop, in generated tokens per second.
"""

from __future__ import annotations

import argparse
import math
import platform
import tempfile
import time
from datetime import date


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--sequential", type=int, default=16, help="episodes the one-at-a-time loop runs")
    parser.add_argument("--think", default="300,500", help="characters of each reply's <think> block: min,max")
    parser.add_argument("--max-tokens", type=int, default=512, help="tokens per reply (a bound, not a target)")
    args = parser.parse_args()

    from eval.backends import Sampling, pil_images
    from eval.backends.vllm_engine import VLLMEngineBackend
    from eval.grammar import ForcedReplies
    from eval.loop import EvalLoop, toolboxes
    from eval.presets import get_preset
    from eval.suites.synthetic import synthetic_suite
    from runtime.tiny_model import build_model

    tasks = list(synthetic_suite(("rotated_ocr", "rotation_game"), per_task=math.ceil(args.episodes / 2)))
    tasks = tasks[:args.episodes]
    model = build_model("qwen2_5_vl", tempfile.mkdtemp(prefix="tirlab-bench-"))
    backend = VLLMEngineBackend(str(model), max_model_len=4096, limit_images=4, dtype="float32", max_num_seqs=256)
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

    harness(tasks[:4], 4)  # warm-up: first requests pay one-off costs
    tokens, seconds, finished = harness(tasks, len(tasks))
    turns = sum(f.turns for f in finished) / len(finished)
    calls_ran = sum(1 for f in finished for m in f.trajectory.messages if m["role"] == "tool" and not m.get("error"))

    # the batch: the same first-turn prompts, no tools, about as many tokens in total: once unconstrained
    # (exactly as many tokens), once under the same kind of grammar the harness decodes with (a think block
    # three turns long, then an answer), which separates the harness's cost from xgrammar's
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    toolbox_for = toolboxes(profile)
    conversations = []
    for task in tasks:
        episode = toolbox_for(task, "tools").start(profile, task.question, task.images)
        prompt = episode.prompt()
        conversations.append(_with_images(prompt.messages, pil_images(prompt)))
        episode.close()
    per_prompt = math.ceil(tokens / len(tasks))
    low, high = forced.think
    batch_grammar = ForcedReplies(0, think=(3 * low, 3 * high)).regex([], 0)
    batches = {"plain": SamplingParams(max_tokens=per_prompt, min_tokens=per_prompt, ignore_eos=True, temperature=1.0),
               "grammar": SamplingParams(max_tokens=3 * args.max_tokens, temperature=1.0,
                                         structured_outputs=StructuredOutputsParams(regex=batch_grammar))}
    batch = {}
    for name, params in batches.items():
        backend.llm.reset_prefix_cache()
        start = time.perf_counter()
        outputs = backend.llm.chat(conversations, params, use_tqdm=False)
        batch[name] = (sum(len(o.outputs[0].token_ids) for o in outputs), time.perf_counter() - start)

    seq_tokens, seq_seconds, _ = harness(tasks[:args.sequential], 1)
    backend.close()

    rate, seq_rate = tokens / seconds, seq_tokens / seq_seconds
    print(f"machine: {platform.node()} ({platform.processor() or platform.machine()}); date {date.today()}")
    print(f"harness:          {len(finished)} episodes, {turns:.2f} turns/episode, {calls_ran} tool calls ran, "
          f"{tokens} tokens in {seconds:.2f} s = {rate:.1f} tokens/s")
    for name, (count, elapsed) in batch.items():
        print(f"batch ({name}):{' ' * (8 - len(name))}one LLM.chat of {len(conversations)} prompts, {count} tokens in "
              f"{elapsed:.2f} s = {count / elapsed:.1f} tokens/s")
    print(f"sequential:       {args.sequential} episodes one at a time, {seq_tokens} tokens in {seq_seconds:.2f} s = "
          f"{seq_rate:.1f} tokens/s")
    ratios = {name: rate / (count / elapsed) for name, (count, elapsed) in batch.items()}
    vs_sequential = rate / seq_rate
    print(f"harness / batch (plain)   = {ratios['plain']:.2f}x (decoding unconstrained on the batch side only)")
    print(f"harness / batch (grammar) = {ratios['grammar']:.2f}x (target >= 0.70) "
          f"{'PASS' if ratios['grammar'] >= 0.7 else 'FAIL'}")
    print(f"harness / sequential      = {vs_sequential:.2f}x (target >= 5.00) "
          f"{'PASS' if vs_sequential >= 5 else 'FAIL'}")
    return 0 if ratios["grammar"] >= 0.7 and vs_sequential >= 5 else 1


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
