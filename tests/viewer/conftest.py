"""Fixtures for the viewer's browser tests: one headless chromium for the session (tests/viewer/browser.py) and
screenshots under test-artifacts/screenshots/. Without chromium or chromedriver the tests skip, and fail under CI
(CI=true), where a missing browser is a broken setup rather than a machine that differs."""

import os
import tempfile
from pathlib import Path

import pytest

from tests.viewer.browser import INSTALL_HINT, missing_binaries, start_chrome

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def browser():
    missing = missing_binaries()
    if missing:
        message = f"no {' or '.join(missing)} for the browser tests: {INSTALL_HINT}"
        if _under_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    with tempfile.TemporaryDirectory(prefix="tirlab-chromium-") as profile:
        driver, start_s = start_chrome(Path(profile))
        driver.tirlab_start_seconds = start_s
        try:
            yield driver
        finally:
            driver.quit()


@pytest.fixture
def screenshot(browser):
    """screenshot(name) saves the current page to test-artifacts/screenshots/<name>.png and returns its path."""
    def take(name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        if not browser.save_screenshot(str(path)):
            raise AssertionError(f"chromium saved no screenshot to {path}")
        return path
    return take
