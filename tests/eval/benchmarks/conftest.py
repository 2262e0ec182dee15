"""The benchmark suites' tests share their sandbox pools, one per configuration (helpers.SharedPools): each
suite's tool box would otherwise start a pool, and its zygote's preload takes seconds, in every test."""

import pytest

from tests.eval.benchmarks import helpers


@pytest.fixture(scope="module", autouse=True)
def shared_sandbox_pools():
    with helpers.shared_sandbox_pools():
        yield
