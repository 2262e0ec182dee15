"""Test helpers shared by several test modules."""

from contextlib import contextmanager

from tools.registry import REGISTRY, register


@contextmanager
def registered(*ops):
    """Register test-only ops for the duration of a test, then remove them from the registry."""
    for op in ops:
        register(op)
    try:
        yield
    finally:
        for op in ops:
            REGISTRY.pop(op.name, None)
