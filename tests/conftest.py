"""Hypothesis settings for the whole suite: no per-example deadline (a loaded machine makes any example slow),
and the same examples every run (a fixed sequence and no example database), so a failure is one that any run
reproduces; the failing example's blob is printed to replay it with @reproduce_failure."""

import pytest
from hypothesis import settings

settings.register_profile("tirlab", deadline=None, derandomize=True, database=None, print_blob=True)
settings.load_profile("tirlab")


def pytest_collection_modifyitems(items):
    """A test's own @settings may not bring a deadline back."""
    timed = [item.nodeid for item in items
             if getattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings", None) is not None
             and item.obj._hypothesis_internal_use_settings.deadline is not None]
    if timed:
        raise pytest.UsageError(f"Hypothesis tests with a deadline (set deadline=None: a loaded machine makes any "
                                f"example slow): {', '.join(timed)}")
