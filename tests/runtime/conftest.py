"""Session fixtures: tiny local Qwen-VL processors (real chat templates, no weights; see runtime/tiny_model.py)."""

import pytest

from runtime.tiny_model import build_processor


@pytest.fixture(scope="session")
def qwen2_5_vl_processor(tmp_path_factory):
    return build_processor("qwen2_5_vl", tmp_path_factory.mktemp("qwen2_5_vl"))


@pytest.fixture(scope="session")
def qwen3_vl_processor(tmp_path_factory):
    return build_processor("qwen3_vl", tmp_path_factory.mktemp("qwen3_vl"))
