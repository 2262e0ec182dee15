"""Tool-use rollouts for GRPO: the episodes of evaluation (runtime.episode: the profile's protocol, its tool set
run by our batched executor), generated as token sequences the trainer can score.

    rollouts = ToolRollouts(processor, profile, toolbox, budgets, max_completion_length, generator=generator)
    out = rollouts(prompts)   # TRL rollout_func output: prompt_ids, completion_ids, env_mask, logprobs, ...

Each round renders every waiting episode's prompt with `eval.backends.render_text` (what the evaluation's engines
see), but the model generates from the token sequence it built so far: its own sampled tokens, then the tokens of
what came back (the tool's reply and images, the next turn's header), which `env_mask` marks 0, out of the loss.
What came back is the difference between the new rendering and the last one, so the template must render earlier
turns the same way in a later prompt (Qwen's do); a protocol that rewrites history is an error, not a silent
mismatch. Images stay in sequence order, the prompt's then each tool's, as `images` beside the tokens: the
trainer puts every one of them in the training forward pass (train/grpo.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch
from PIL import Image

from eval.backends import render_text
from runtime.episode import Episode, State, Stop, run_episodes
from runtime.protocols import Prompt

ANSWERED = (Stop.ANSWER, Stop.FINAL_MESSAGE)


class RolloutError(RuntimeError):
    pass


@dataclass
class TokenRecord:
    """One episode as the trainer sees it: prompt tokens, then completion tokens (model: mask 1, environment: 0)."""

    prompt_ids: list[int]
    prompt_images: int  # images shown in the prompt
    text: str  # the last rendered prompt (its reply is generated after it, as tokens, not text)
    images: list[np.ndarray] = field(default_factory=list)  # every image in the sequence, in order
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    model_end: int = 0  # completion length after the model's last token
    sampled: bool = True  # the generator reported the sampler's logprobs of every model token
    images_at_model_end: int = 0

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


class Tokens:
    """The model's tokenization of rendered prompts (text plus images, image tokens expanded)."""

    def __init__(self, processor):
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.end_of_turn = self.tokenizer.eos_token
        self.end_of_turn_id = self.tokenizer.convert_tokens_to_ids(self.end_of_turn)
        self.image_token_id = getattr(processor, "image_token_id", None)
        # placeholders the processor expands into an image's (video's) tokens: a model that wrote one would put a
        # token in the sequence with no picture behind it, so generation never samples them
        self.media_token_ids = [i for i in (self.image_token_id, getattr(processor, "video_token_id", None))
                                if i is not None]

    def encode(self, pieces: list[tuple[str, list[np.ndarray]]]) -> list[list[int]]:
        """The token ids of each (text, its images) piece, in one processor call: a call's fixed cost (checking
        its arguments, starting an image batch) is most of what one short piece costs."""
        # the call hands the images to the texts in order: a text with a placeholder too many or too few would
        # shift every later text's images
        placeholder = getattr(self.processor, "image_token", None)
        if placeholder and any(text.count(placeholder) != len(images) for text, images in pieces):
            raise RolloutError("a rendered prompt holds a different number of image placeholders than images")
        images = [pil(image) for _, row in pieces for image in row]
        inputs = self.processor(text=[text for text, _ in pieces], images=images or None, add_special_tokens=False)
        return [list(ids) for ids in inputs["input_ids"]]

    def start(self, prompts: list[Prompt]) -> list[TokenRecord]:
        if not prompts:
            return []
        texts = [render_text(self.processor, prompt) for prompt in prompts]
        encoded = self.encode([(text, prompt.images) for text, prompt in zip(texts, prompts)])
        return [TokenRecord(ids, len(prompt.images), text, images=list(prompt.images),
                            images_at_model_end=len(prompt.images))
                for ids, text, prompt in zip(encoded, texts, prompts, strict=True)]

    def extend(self, records: list[TokenRecord], prompts: list[Prompt]) -> None:
        """Append to each record what came back since the model's last reply (masked out of the loss)."""
        if not records:
            return
        texts = [render_text(self.processor, prompt) for prompt in prompts]
        pieces = [self._came_back(record, text, prompt) for record, text, prompt in zip(records, texts, prompts)]
        for record, text, (_, new_images), ids in zip(records, texts, pieces, self.encode(pieces), strict=True):
            record.completion_ids += ids
            record.env_mask += [0] * len(ids)
            record.logprobs += [0.0] * len(ids)
            record.images += new_images
            record.text = text

    def _came_back(self, record: TokenRecord, text: str, prompt: Prompt) -> tuple[str, list[np.ndarray]]:
        """The text and images a later rendering `text` of the episode adds after the model's last reply."""
        if not text.startswith(record.text):
            raise RolloutError("the chat template renders earlier turns differently in a later prompt, so one token "
                               "sequence cannot hold the episode; use a prefix-preserving template "
                               "(--chat_template_path)")
        rest = text[len(record.text):]
        end = rest.find(self.end_of_turn)
        if end < 0:
            raise RolloutError(f"the rendered reply does not end with {self.end_of_turn!r}")
        delta = rest[end + len(self.end_of_turn):]
        if not record.completion_ids or record.completion_ids[-1] != self.end_of_turn_id:
            delta = self.end_of_turn + delta  # the reply ended on another end token: the template closes the turn
        shown = len(record.images)
        if len(prompt.images) < shown or any(a is not b and not np.array_equal(a, b)
                                             for a, b in zip(prompt.images, record.images)):
            raise RolloutError("a later prompt dropped or reordered earlier images; training needs the images in "
                               "sequence order")
        return delta, list(prompt.images[shown:])

    def generated(self, record: TokenRecord, ids: list[int], logprobs: list[float] | None) -> None:
        if any(token in self.media_token_ids for token in ids):
            raise RolloutError("the model generated an image placeholder token, which would leave the training "
                               "forward pass with more image tokens than images; the generator must suppress "
                               f"tokens {self.media_token_ids}")
        record.completion_ids += ids
        record.env_mask += [1] * len(ids)
        record.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)
        record.sampled = record.sampled and logprobs is not None
        record.model_end, record.images_at_model_end = len(record.completion_ids), len(record.images)

    def image_tokens(self, ids: list[int]) -> int:
        return sum(token == self.image_token_id for token in ids)


def pil(image) -> Image.Image:
    return image if isinstance(image, Image.Image) else Image.fromarray(np.asarray(image))


@dataclass
class Generated:
    ids: list[int]
    ended: bool  # at an end-of-sequence token; otherwise cut off (token limit, context length)
    logprobs: list[float] | None = None  # the sampler's, where the generator reports them


class HFGenerator:
    """Sampling with transformers' `generate` on the policy itself: for a single process without vLLM (a CPU
    toy run, a test). Rows are left-padded into one batch; every image of every row goes in once."""

    def __init__(self, trainer, suppressed: list[int]):
        self.trainer, self.suppressed = trainer, suppressed

    def __call__(self, contexts: list[tuple[list[int], list[np.ndarray]]], limits: list[int],
                 logits_processor: list | None = None) -> list[Generated]:
        """`logits_processor`: transformers LogitsProcessors added to this call's sampling (train/bench_grpo.py
        forces reply lengths with one); rows are left-padded to the longest context."""
        from trl.models.utils import unwrap_model_for_generation

        trainer, args = self.trainer, self.trainer.args
        processor = trainer.processing_class
        pad = processor.tokenizer.pad_token_id
        width = max(len(ids) for ids, _ in contexts)
        input_ids = torch.full((len(contexts), width), pad, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for row, (ids, _) in enumerate(contexts):
            input_ids[row, width - len(ids):] = torch.tensor(ids)
            attention_mask[row, width - len(ids):] = 1
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        images = [pil(image) for _, row_images in contexts for image in row_images]
        if images:
            inputs.update(processor.image_processor(images=images, return_tensors="pt"))
            inputs["mm_token_type_ids"] = (input_ids == processor.image_token_id).long()
        inputs = {k: v.to(trainer.accelerator.device) for k, v in inputs.items()}
        with torch.no_grad(), unwrap_model_for_generation(
                trainer.model_wrapped, trainer.accelerator,
                gather_deepspeed3_params=args.ds3_gather_for_generation) as model:
            output = model.generate(
                **inputs, max_new_tokens=max(limits), do_sample=args.temperature > 0,
                temperature=args.temperature, top_p=args.top_p, top_k=max(args.top_k or 0, 0), min_p=args.min_p,
                repetition_penalty=args.repetition_penalty, pad_token_id=pad,  # top_k 0: off, as in vLLM
                suppress_tokens=self.suppressed or None, logits_processor=logits_processor)
        eos = set(trainer.eos_token_ids)
        done = []
        for row, limit in enumerate(limits):
            tokens = output[row, width:].tolist()[:limit]
            ends = [i for i, token in enumerate(tokens) if token in eos]
            done.append(Generated(tokens[:ends[0] + 1], True) if ends else Generated(tokens, False))
        return done

    def finish(self) -> None:
        """Nothing to wait for: one process generates alone."""


class VLLMGenerator:
    """Sampling with TRL's vLLM (colocated or a server), weights synced by the trainer at each step. Server mode
    gathers every process's prompts and hands each its slice back by position, and colocated tensor parallelism
    does the same within each tensor-parallel group: there every process takes part in every round with as many
    prompts as the busiest one (padding with one-token fillers) and the same token limit; so with sleep mode,
    whose every generate call re-syncs the weights from all processes. Colocated with tensor parallel 1 and
    without sleep mode, each process's engine is its own and generation is no collective: a process generates
    its own prompts only, and one that is done is done."""

    def __init__(self, trainer, suppressed: list[int]):
        self.trainer = trainer
        vllm = trainer.vllm_generation
        vllm.generation_kwargs = {**(vllm.generation_kwargs or {}),
                                  "logit_bias": {token: -100.0 for token in suppressed}}
        self.filler = ([trainer.processing_class.tokenizer.eos_token_id], [])
        args = trainer.args
        # sleep mode re-syncs the weights (a gather across processes under ZeRO-3 and FSDP) at every generate call
        self.collective = trainer.accelerator.num_processes > 1 and (
            args.vllm_mode == "server" or args.vllm_tensor_parallel_size > 1 or args.vllm_enable_sleep_mode)

    def __call__(self, contexts, limits) -> list[Generated]:
        count, limit = self._round(len(contexts), max(limits, default=1))
        generated = self._generate(contexts + [self.filler] * (count - len(contexts)), limit)
        eos = set(self.trainer.eos_token_ids)
        return [Generated(ids[:cap], bool(ids[:cap]) and ids[:cap][-1] in eos, lps[:cap] if lps else None)
                for (ids, lps), cap in zip(generated[:len(contexts)], limits, strict=True)]

    def finish(self) -> None:
        """Keep joining rounds until no process has an episode waiting."""
        while True:
            count, limit = self._round(0, 1)
            if count == 0:
                return
            self._generate([self.filler] * count, limit)

    def _generate(self, contexts, limit: int) -> list[tuple[list[int], list[float] | None]]:
        vllm = self.trainer.vllm_generation
        vllm.max_completion_length = limit
        images = [[pil(i) for i in row_images] or None for _, row_images in contexts]
        _, completion_ids, logprobs, _ = vllm.generate(
            prompts=[ids for ids, _ in contexts], images=images if any(images) else None, num_generations=1)
        logprobs = logprobs or [None] * len(completion_ids)
        return [(list(ids), [lp[0] for lp in token_logprobs] if token_logprobs else None)
                for ids, token_logprobs in zip(completion_ids, logprobs, strict=True)]

    def _round(self, waiting: int, limit: int) -> tuple[int, int]:
        """The most prompts and the longest token limit of any process this round."""
        if not self.collective:
            return waiting, limit
        accelerator = self.trainer.accelerator
        both = accelerator.reduce(torch.tensor([waiting, limit], device=accelerator.device), reduction="max")
        return int(both[0]), int(both[1])


def task_from_prompt(prompt: list[dict]) -> tuple[str, list]:
    """A dataset prompt (one user message: images, then the question) -> the question and its images. The
    profile writes the system prompt and the tool schemas, as in evaluation."""
    if len(prompt) != 1 or prompt[0].get("role") != "user":
        raise ValueError(f"a GRPO prompt is one user message (images and the question), as data_gen/make.py rl "
                         f"writes it; got roles {[m.get('role') for m in prompt]}. The model profile adds the "
                         f"system prompt and tools")
    content = prompt[0]["content"]
    if isinstance(content, str):
        return content, []
    question = "".join(part.get("text") or "" for part in content if part.get("type") == "text")
    images = [part["image"] for part in content if part.get("type") == "image"]
    return question, images


class ToolRollouts:
    """TRL's `rollout_func`: one episode per prompt (the sampler already repeats each prompt num_generations
    times), all episodes of a call generated together round by round and their tools run together."""

    def __init__(self, processor, profile, toolbox, budgets, max_completion_length: int,
                 max_tokens_per_turn: int | None = None, generator=None):
        """`generator(contexts, limits)`: samples a reply for each (token ids, images) context, at most `limits`
        tokens each (HFGenerator, VLLMGenerator; ToolGRPOTrainer sets the one its config asks for)."""
        self.tokens = Tokens(processor)
        self.profile, self.toolbox, self.budgets = profile, toolbox, budgets
        self.generator = generator
        self.max_completion_length = max_completion_length
        self.max_tokens_per_turn = max_tokens_per_turn or max_completion_length
        self.last: list[tuple[Episode, TokenRecord]] = []  # the latest call's episodes, for logs and tests

    def __call__(self, prompts: list[list[dict]], trainer=None) -> dict:
        episodes = [self.toolbox.start(self.profile, *task_from_prompt(prompt), budgets=self.budgets)
                    for prompt in prompts]
        records: dict[int, TokenRecord] = {}
        failure: list[BaseException] = []

        def generate(batch: list[Prompt]) -> list[dict]:
            waiting = [e for e in episodes if e.state is State.GENERATING]
            try:
                return self._round(waiting, batch, records)
            except BaseException as err:
                failure.append(err)  # run_episodes would fail the episodes and go on: a training run must stop
                raise

        run_episodes(episodes, generate, self.toolbox)
        if failure:
            raise failure[0]
        self.generator.finish()
        self.last = [(episode, records[id(episode)]) for episode in episodes]
        return self.output(self.last)

    def _round(self, waiting: list[Episode], prompts: list[Prompt], records: dict) -> list[dict]:
        new, continuing = [], []  # tokenized together, one processor call each
        for episode, prompt in zip(waiting, prompts, strict=True):
            (continuing if id(episode) in records else new).append((episode, prompt))
        self.tokens.extend([records[id(episode)] for episode, _ in continuing], [prompt for _, prompt in continuing])
        for (episode, _), record in zip(new, self.tokens.start([prompt for _, prompt in new]), strict=True):
            records[id(episode)] = record
        contexts, limits = [], []
        for episode in waiting:
            record = records[id(episode)]
            contexts.append((record.ids, record.images))
            limits.append(min(self.max_tokens_per_turn, self.max_completion_length - len(record.completion_ids)))
        outputs: list[dict | None] = [None] * len(waiting)
        live = [i for i, limit in enumerate(limits) if limit > 0]
        for i in set(range(len(waiting))) - set(live):  # no tokens left for a reply
            outputs[i] = {"completion": "", "truncated": True}
        generated = self.generator([contexts[i] for i in live], [limits[i] for i in live]) if live else []
        for i, sample in zip(live, generated, strict=True):
            record = records[id(waiting[i])]
            self.tokens.generated(record, sample.ids, sample.logprobs)
            text = self.tokens.tokenizer.decode(sample.ids, skip_special_tokens=True)
            stop = min((s for s in prompts[i].stop if s in text), key=text.index, default=None)
            outputs[i] = {"completion": text[:text.index(stop)] if stop else text,
                          "prompt_tokens": len(contexts[i][0]), "completion_tokens": len(sample.ids),
                          "truncated": not sample.ended and stop is None, "stop": stop}
        return outputs

    def output(self, pairs: list[tuple[Episode, TokenRecord]]) -> dict:
        """TRL's rollout_func dict; `episode` (a summary per rollout) reaches the reward functions, `images`
        (every image of each sequence) the trainer's forward pass."""
        prompt_ids, completion_ids, env_mask, logprobs, images, summaries = [], [], [], [], [], []
        for episode, record in pairs:
            end = record.model_end
            completion = record.completion_ids[:end] or [self.tokens.end_of_turn_id]  # never empty
            mask = record.env_mask[:end] or [0]
            prompt_ids.append(record.prompt_ids)
            completion_ids.append(completion)
            env_mask.append(mask)
            logprobs.append(record.logprobs[:end] or [0.0] if record.sampled else None)
            images.append(record.images[:record.images_at_model_end])
            summaries.append(summary(episode, record, sum(mask)))
        if any(lps is None for lps in logprobs):
            logprobs = None  # not the sampler's own: TRL computes what it needs from the model
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "env_mask": env_mask,
                "logprobs": logprobs, "images": images, "episode": summaries}


def summary(episode: Episode, record: TokenRecord, response_tokens: int) -> dict:
    """What the rewards and the tool-use watch read from one finished episode. A call counts whether it ran or
    came back as an error; a malformed one (unparseable) is also counted as such."""
    results = [message for message in episode.trajectory.messages if message["role"] == "tool"]
    return {"answer": episode.answer or "", "stop_reason": episode.stop_reason.value if episode.stop_reason else None,
            "answered": episode.stop_reason in ANSWERED, "turns": episode.turns, "tool_calls": len(results),
            "tool_errors": sum(bool(message.get("error")) for message in results),
            "malformed": sum(message.get("tool_call_id") is None for message in results),
            "tool_images": record.images_at_model_end - record.prompt_images, "response_tokens": response_tokens,
            "error": episode.trajectory.meta.get("error")}


def tool_use_stats(summaries: list[dict]) -> dict[str, float]:
    """Per-step tool-use metrics over a batch of episode summaries."""
    n = max(len(summaries), 1)
    calls = sum(s["tool_calls"] for s in summaries)
    errors = sum(s["tool_errors"] for s in summaries)
    stats = {"tools/call_rate": sum(s["tool_calls"] > 0 for s in summaries) / n,
             "tools/calls_per_episode": calls / n,
             "tools/success_rate": (calls - errors) / calls if calls else float("nan"),
             "episodes/answer_rate": sum(s["answered"] for s in summaries) / n,
             "episodes/turns": sum(s["turns"] for s in summaries) / n,
             "episodes/response_tokens": sum(s["response_tokens"] for s in summaries) / n}
    reasons = Counter(s["stop_reason"] for s in summaries)
    for reason in Stop:  # every reason every step, so a logging window averages zeros in too
        stats[f"stop/{reason.value}"] = reasons[reason.value] / n
    return stats
