"""Headless Debian chromium for the viewer's tests, driven by selenium through Debian's chromedriver.

Both binaries come from apt (`make browser`); both paths are given to selenium, which then never runs Selenium
Manager (it would try to download a browser and a driver). The page helpers read what the browser itself saw:
every URL the page fetched and every severe console message."""

import os
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common import selenium_manager
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALL_HINT = "run `make browser` (as root: apt-get install chromium chromium-driver)"
TIMEOUT_S = 60
# Schemes a page opened from disk may load without reaching any server.
LOCAL_SCHEMES = ("file:", "data:", "blob:")
# Run before any page script: the default resource-timing buffer keeps 250 entries, fewer than a page loading its
# chunks one by one may fetch, and external_requests must see every one.
_BIG_TIMING_BUFFER = "performance.setResourceTimingBufferSize(1000000);"


def missing_binaries() -> list[str]:
    return [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]


def chrome_options(user_data_dir: Path) -> webdriver.ChromeOptions:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                     "--no-first-run", "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--disable-extensions", f"--user-data-dir={user_data_dir}",
                     "--window-size=1400,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return options


def _no_selenium_manager(*args, **kwargs):
    raise AssertionError("selenium tried to run Selenium Manager (a download); the tests name both binaries")


def start_chrome(user_data_dir: Path) -> tuple[webdriver.Chrome, float]:
    """The driver and the seconds it took to start. Selenium Manager is made to raise while the driver starts, so a
    selenium release that called it despite the given paths would fail here instead of downloading."""
    original = selenium_manager.SeleniumManager.binary_paths
    selenium_manager.SeleniumManager.binary_paths = _no_selenium_manager
    started = time.monotonic()
    try:
        driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)),
                                  options=chrome_options(user_data_dir))
    finally:
        selenium_manager.SeleniumManager.binary_paths = original
    try:
        driver.set_page_load_timeout(TIMEOUT_S)
        driver.set_script_timeout(TIMEOUT_S)
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _BIG_TIMING_BUFFER})
    except BaseException:
        driver.quit()
        raise
    return driver, time.monotonic() - started


def open_file(driver: webdriver.Chrome, path) -> None:
    """Navigate to a file on disk and wait until it has loaded. The console log is emptied first, so console_errors
    afterwards holds this page's messages only."""
    driver.get_log("browser")
    driver.get(Path(path).resolve().as_uri())
    WebDriverWait(driver, TIMEOUT_S).until(
        lambda d: d.execute_script("return document.readyState") == "complete",
        message=f"{path} did not finish loading within {TIMEOUT_S} s")


def external_requests(driver: webdriver.Chrome) -> list[str]:
    """Every URL the current page fetched (the document and each resource) that is not file:, data: or blob:."""
    urls = driver.execute_script(
        "return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))"
        ".map(entry => entry.name)")
    return [url for url in urls if not url.startswith(LOCAL_SCHEMES)]


def console_errors(driver: webdriver.Chrome) -> list[str]:
    """The severe console messages (uncaught exceptions, console.error, failed loads) since the last call or the
    last open_file; reading them empties the browser's log."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
