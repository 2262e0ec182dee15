"""The benchmark suites' tests share their sandbox pools, one per configuration (helpers.SharedPools): each
suite's tool box would otherwise start a pool, and its zygote's preload takes seconds, in every test."""

import pytest

from tests.eval.benchmarks.helpers import SharedPools


@pytest.fixture(scope="module", autouse=True)
def shared_sandbox_pools():
    shared = SharedPools()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("runtime.sandbox.SandboxPool", shared.pool)
        yield
    shared.close()
