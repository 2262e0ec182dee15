"""A second vLLM engine in one process (a judge after the evaluated model) gets the GPU memory share it can have:
the first engine's worker frees its memory only as it exits and this process's own cached blocks (the tools'
kernels) are released first; vLLM would refuse to start with less free than its share."""

from __future__ import annotations

import pytest

from eval.backends import vllm_engine
from eval.backends.vllm_engine import available_memory_share

GIB = 2**30


@pytest.fixture
def gpu(monkeypatch):
    """Two fake 80 GiB cards; the first one's free memory follows `state["free"]` (one value per reading, the
    last repeats), the second has room to spare."""
    state = {"free": [80 * GIB], "emptied": 0, "clock": 0.0}

    def mem_get_info(device):
        if device == 1:  # a second GPU with room to spare: the first one decides
            return 79 * GIB, 80 * GIB
        free = state["free"].pop(0) if len(state["free"]) > 1 else state["free"][0]
        return free, 80 * GIB

    def sleep(seconds):
        state["clock"] += seconds

    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 2)
    monkeypatch.setattr("torch.cuda.mem_get_info", mem_get_info)
    monkeypatch.setattr("torch.cuda.empty_cache", lambda: state.__setitem__("emptied", state["emptied"] + 1))
    monkeypatch.setattr(vllm_engine.time, "sleep", sleep)
    monkeypatch.setattr(vllm_engine.time, "monotonic", lambda: state["clock"])
    return state


def test_the_share_is_granted_once_the_first_engine_has_released_its_memory(gpu, capsys):
    gpu["free"] = [6 * GIB, 30 * GIB, 75 * GIB]  # the first engine's worker exits while we wait
    assert available_memory_share(0.9) == 0.9
    assert gpu["emptied"] == 1 and capsys.readouterr().out == ""


def test_a_smaller_share_when_memory_stays_taken_with_a_note(gpu, capsys):
    gpu["free"] = [60 * GIB]  # 75%: e.g. the tools' kernels hold memory this process cannot release
    assert available_memory_share(0.9, wait_s=5) == 0.73
    assert gpu["clock"] >= 5  # it waited for the memory before settling
    assert "gets a 0.73 share instead of 0.90" in capsys.readouterr().out


def test_no_engine_fits_in_a_card_another_process_holds(gpu):
    gpu["free"] = [2 * GIB]
    with pytest.raises(RuntimeError, match="only 2.0 of 80.0 GiB of GPU memory is free.*nvidia-smi"):
        available_memory_share(0.9, wait_s=1)


def test_without_cuda_the_share_is_the_one_asked_for(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert available_memory_share(0.6) == 0.6
