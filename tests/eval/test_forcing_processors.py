"""The forcing logits processor (scripted replies of smoke runs) for both of vLLM 0.32's model runners.

On CUDA vLLM selects its V2 model runner, which accepts only V2-interface processors; this CPU build runs the
V1 runner. Each class is checked through the validator vLLM itself builds for its runner, the runner is
chosen from the engine's own configuration, and the V2 class is driven as the V2 sampler drives it (slots,
staged writes, output lengths read from the request state), step by step, against the V1 class on the same
logits."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from vllm import SamplingParams
from vllm.engine.arg_utils import EngineArgs
from vllm.exceptions import VLLMValidationError
from vllm.v1.sample.logits_processor import BatchUpdate, validate_logits_processors_parameters
from vllm.v1.worker.gpu.sample.logits_processor import (
    LogitsContext,
    LogitsProcRequestState,
    build_custom_logits_processors_params_validator,
)

from eval.backends.vllm_engine import (
    FREE,
    ForcedReplyProcessor,
    ForcedReplyProcessorV2,
    VLLMEngineBackend,
    forced_reply_processor,
    free_token_bias,
)

GOOD = SamplingParams(max_tokens=8, extra_args={"forced_reply": [[5, 6], 3, [7]]})
BAD = SamplingParams(max_tokens=8, extra_args={"forced_reply": [[5], 0]})
PLAIN = SamplingParams(max_tokens=8)


def test_the_v2_runner_refuses_the_v1_processor_and_accepts_the_v2_one():
    with pytest.raises(ValueError, match="not a subclass of vllm.v1.worker.gpu.sample.logits_processor"):
        build_custom_logits_processors_params_validator((ForcedReplyProcessor,))
    validate = build_custom_logits_processors_params_validator((ForcedReplyProcessorV2,))
    validate(GOOD)
    validate(PLAIN)
    with pytest.raises(VLLMValidationError, match="forced_reply must hold"):
        validate(BAD)


def test_the_v1_runner_validates_the_v1_processor():
    validate_logits_processors_parameters((ForcedReplyProcessor,), GOOD)
    validate_logits_processors_parameters((ForcedReplyProcessor,), PLAIN)
    with pytest.raises(VLLMValidationError, match="forced_reply must hold"):
        validate_logits_processors_parameters((ForcedReplyProcessor,), BAD)


@pytest.mark.parametrize("triton,setting,expected", [
    (False, None, ForcedReplyProcessor),  # this CPU build: no Triton, the V1 runner
    (True, None, ForcedReplyProcessorV2),  # a CUDA machine: Triton present, V2 by default
    (True, "0", ForcedReplyProcessor),  # VLLM_USE_V2_MODEL_RUNNER=0 asks for V1
])
def test_the_processor_follows_the_runner_the_engine_configuration_selects(tiny_model_dir, monkeypatch, triton,
                                                                           setting, expected):
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    config = EngineArgs(model=str(tiny_model_dir), max_model_len=2048, dtype="float32").create_engine_config()
    monkeypatch.setattr("vllm.config.vllm.HAS_TRITON", triton)  # the property reads it when asked
    if setting is not None:
        monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", setting)
    assert config.use_v2_model_runner is (expected is ForcedReplyProcessorV2)
    assert forced_reply_processor(config) is expected


class Started(Exception):
    pass


@pytest.mark.parametrize("forced", [False, True])
def test_the_engine_registers_the_processor_only_for_forced_replies(tiny_model_dir, monkeypatch, forced):
    seen = {}

    def fake_llm(**kwargs):
        seen.update(kwargs)
        raise Started

    monkeypatch.setattr("vllm.LLM", fake_llm)
    with pytest.raises(Started):
        VLLMEngineBackend(str(tiny_model_dir), max_model_len=2048, dtype="float32", forced_replies=forced)
    assert seen["model"] == str(tiny_model_dir) and seen["enable_prefix_caching"] is True
    assert seen["logits_processors"] == ([ForcedReplyProcessor] if forced else None)
    # what LLM fills itself stays LLM's: its batch sizes for offline use, stats logging off
    assert not {"max_num_batched_tokens", "max_num_seqs", "disable_log_stats"} & set(seen)


# -- the V2 processor as the V2 sampler drives it ----------------------------------------------------------------

def _v2(tiny_model_dir, slots: int):
    model_config = EngineArgs(model=str(tiny_model_dir), max_model_len=2048,
                              dtype="float32").create_model_config()
    vocab = model_config.get_vocab_size()
    state = LogitsProcRequestState(
        device=torch.device("cpu"), max_num_reqs=slots, vocab_size=vocab, all_token_ids=None,
        prompt_len=SimpleNamespace(gpu=torch.zeros(slots, dtype=torch.int32)), prefill_len=None,
        total_len=SimpleNamespace(gpu=torch.zeros(slots, dtype=torch.int32)))
    return ForcedReplyProcessorV2(SimpleNamespace(model_config=model_config), state), model_config


def _context(slot_of_row: list[int]) -> LogitsContext:
    mapping = torch.tensor(slot_of_row, dtype=torch.int32)
    return LogitsContext(expanded_idx_mapping=mapping, idx_mapping=mapping, idx_mapping_np=mapping.numpy(),
                         expanded_local_pos=torch.zeros(len(slot_of_row), dtype=torch.int64),
                         input_ids=torch.zeros(len(slot_of_row), dtype=torch.int64),
                         pos=torch.zeros(len(slot_of_row), dtype=torch.int64), seq_lens_upper_bound_np=None)


def test_v2_generates_the_script_in_recycled_slots_and_leaves_other_rows_alone(tiny_model_dir):
    processor, model_config = _v2(tiny_model_dir, slots=4)
    free_bias, end = free_token_bias(model_config, torch.device("cpu"))
    free_ids = set(torch.nonzero(free_bias == 0).flatten().tolist())
    vocab = free_bias.numel()
    scripts = {1: [[11, 12], 2, [13]], 3: [[21], 3]}  # slot -> script; slot 0 is a plain request
    prompts = {0: 7, 1: 5, 3: 9}
    # slot 3 had a scripted occupant before: its state must be overwritten, and slot 2 once held a script
    processor.add_request(3, SamplingParams(extra_args={"forced_reply": [[99] * 40]}))
    processor.add_request(2, SamplingParams(extra_args={"forced_reply": [[98]]}))
    assert processor.add_request(2, PLAIN) is False
    assert processor.add_request(0, PLAIN) is False
    for slot, script in scripts.items():
        assert processor.add_request(slot, SamplingParams(extra_args={"forced_reply": script})) is True
    for slot, length in prompts.items():
        processor.req_states.prompt_len.gpu[slot] = length
        processor.req_states.total_len.gpu[slot] = length
    outputs = {slot: [] for slot in prompts}
    generator = torch.Generator().manual_seed(0)
    rows = [3, 0, 1, 2]  # rows are not slots, and slot 2 (no plan) is in the batch
    for _ in range(8):
        processor.apply_staged_writes()
        logits = torch.randn(len(rows), vocab, generator=generator)
        before = logits.clone()
        after = processor.apply(logits.clone(), _context(rows))
        for row, slot in enumerate(rows):
            if slot in (0, 2):  # no plan: untouched
                assert torch.equal(after[row], before[row])
                continue
            token = int(after[row].argmax())
            outputs[slot].append(token)
            processor.req_states.total_len.gpu[slot] += 1
        rows = rows[1:] + rows[:1]  # the runner reorders rows every step
    assert outputs[1][:2] == [11, 12] and set(outputs[1][2:4]) <= free_ids and outputs[1][4:6] == [13, end]
    assert outputs[3][0] == 21 and set(outputs[3][1:4]) <= free_ids and outputs[3][4] == end
    assert outputs[1][6:] == [end, end] and outputs[3][5:] == [end] * 3  # the end token once the plan is done


def test_v2_forced_rows_allow_one_token_and_free_rows_only_whole_words(tiny_model_dir):
    processor, model_config = _v2(tiny_model_dir, slots=2)
    free_bias, _ = free_token_bias(model_config, torch.device("cpu"))
    processor.add_request(0, SamplingParams(extra_args={"forced_reply": [[42], 1]}))
    processor.apply_staged_writes()
    logits = processor.apply(torch.zeros(1, free_bias.numel()), _context([0]))
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [42]
    processor.req_states.total_len.gpu[0] += 1
    logits = processor.apply(torch.zeros(1, free_bias.numel()), _context([0]))
    assert torch.equal(torch.isfinite(logits[0]), torch.isfinite(free_bias))
    assert FREE == -1 and (free_bias == 0).sum() >= 16


def test_v1_and_v2_force_the_same_tokens_from_the_same_logits(tiny_model_dir):
    """The same script and the same model logits give the same reply through either runner's processor."""
    v2, model_config = _v2(tiny_model_dir, slots=2)
    v1 = ForcedReplyProcessor(SimpleNamespace(model_config=model_config), torch.device("cpu"), False)
    script = [[17, 18], 4, [19, 20], 2]
    params = SamplingParams(extra_args={"forced_reply": script})
    v1_ids: list[int] = []
    v1.update_state(BatchUpdate(batch_size=1, removed=[], added=[(0, params, None, v1_ids)], moved=[]))
    v2.add_request(1, params)
    v2.apply_staged_writes()
    v2.req_states.prompt_len.gpu[1] = v2.req_states.total_len.gpu[1] = 3
    generator = torch.Generator().manual_seed(1)
    v2_ids = []
    for _ in range(len(script) + 8):
        logits = torch.randn(1, v1.model_config.get_vocab_size(), generator=generator)
        v1_ids.append(int(v1.apply(logits.clone())[0].argmax()))
        v2_ids.append(int(v2.apply(logits.clone(), _context([1]))[0].argmax()))
        v2.req_states.total_len.gpu[1] += 1
    assert v1_ids == v2_ids
    assert v1_ids[:2] == [17, 18] and v1_ids[6:8] == [19, 20] and v1_ids[10] == v1.end
    assert np.all(np.array(v1_ids[11:]) == v1.end)


def test_v2_rows_of_draft_tokens_force_the_plan_positions_they_stand_for(tiny_model_dir):
    """Under speculative decoding a request owns one row per draft token: row k is the plan's next-but-k entry."""
    processor, model_config = _v2(tiny_model_dir, slots=2)
    processor.add_request(1, SamplingParams(extra_args={"forced_reply": [[31, 32, 33, 34]]}))
    processor.apply_staged_writes()
    processor.req_states.prompt_len.gpu[1] = 4
    processor.req_states.total_len.gpu[1] = 5  # one token (31) already generated
    context = _context([1, 1, 1])
    context = LogitsContext(**{**context.__dict__, "expanded_local_pos": torch.tensor([0, 1, 2])})
    logits = processor.apply(torch.zeros(3, model_config.get_vocab_size()), context)
    assert logits.argmax(dim=1).tolist() == [32, 33, 34]
