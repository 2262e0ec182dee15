"""Session fixtures shared by the eval tests: one tiny random-weight Qwen2.5-VL checkpoint and one vLLM
CPU engine serving it (starting an engine takes 30-90 s on two cores, so every test shares it)."""

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from runtime.tiny_model import build_model

    return build_model("qwen2_5_vl", tmp_path_factory.mktemp("tiny-qwen2_5_vl"))


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir):
    from eval.backends.vllm_engine import VLLMEngineBackend

    backend = VLLMEngineBackend(str(tiny_model_dir), max_model_len=4096, limit_images=4, dtype="float32")
    yield backend
    backend.close()
