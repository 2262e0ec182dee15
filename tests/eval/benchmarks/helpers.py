"""What the benchmark suites' tests share: a backend that answers from a script, and shared sandbox pools."""

from contextlib import contextmanager

import pytest

from eval.backends import Completion


class ScriptedBackend:
    """Answers each request with the next reply of `replies` (None: the request fails), as a plain text or, with
    `as_message`, as the reply message an OpenAI-compatible server returns; records what it was sent."""
    name = "scripted"

    def __init__(self, replies, as_message: bool = False):
        self.replies, self.as_message, self.sent, self.done = list(replies), as_message, [], []

    def submit(self, key, prompt, sampling):
        self.sent.append((prompt, sampling))
        reply = self.replies.pop(0)
        if reply is None:
            completion = Completion("", error="HTTP 503")
        else:
            completion = Completion({"role": "assistant", "content": reply} if self.as_message else reply)
        self.done.append((key, completion))

    def poll(self, timeout=None):
        done, self.done = self.done, []
        return done

    def in_flight(self):
        return len(self.done)

    def close(self):
        pass


@contextmanager
def shared_sandbox_pools():
    """While open, every `runtime.sandbox.SandboxPool` a suite starts is one of these shared pools (SharedPools);
    they end when it closes. A module-scoped fixture wraps it."""
    shared = SharedPools()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("runtime.sandbox.SandboxPool", shared.pool)
        yield
    shared.close()


class SharedPools:
    """Sandbox pools shared by every suite a test module starts (one per configuration): a pool's zygote takes
    seconds to preload its libraries, and tests that only build first prompts need one of each, not one per test."""

    def __init__(self):
        self.pools = {}

    def pool(self, config=None):
        from runtime.sandbox import SandboxConfig
        from runtime.sandbox.pool import SandboxPool

        config = config or SandboxConfig()
        if config not in self.pools:
            self.pools[config] = SandboxPool(config)
        return _Kept(self.pools[config])

    def close(self):
        for pool in self.pools.values():
            pool.close()


class _Kept:
    """A shared pool as its user sees it: every call goes through, but closing it is the owner's job."""

    def __init__(self, pool):
        self._pool = pool

    def __getattr__(self, name):
        return getattr(self._pool, name)

    def close(self):
        pass
