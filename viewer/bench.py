"""How fast the viewer is at scale, in headless chromium from the file system, against its target (2 s):

1. build: write the page of an N-episode run (real episodes through the runtime, repeated with new ids);
2. open: from navigation to the first list drawn (the page's own clock, `tirlabViewer.timing.ready`);
3. filter: a search typed into the list (`timing.render`);
4. episode: from a click on the last row of a page to its turns drawn (its chunk loaded on demand).

    python -m viewer.bench                    # 10,000 episodes, 3 rounds (the median is reported)
    python -m viewer.bench --episodes 50000

Needs Debian's chromium and chromedriver (`make browser`); uses the browser tests' driver and fixture runs.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.viewer.browser import TIMEOUT_S, open_file, start_chrome
from tests.viewer.runs import make_large_run, make_run
from viewer import view

TARGET_MS = 2000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tirlab-viewer-bench-") as scratch:
        scratch = Path(scratch)
        base = make_run(scratch / "base", modes=("tools",))
        large = scratch / "large"
        make_large_run(large, args.episodes, base)
        shutil.copytree(scratch / "base" / "images", large / "images")
        started = time.perf_counter()
        page = view([large])
        build_s = time.perf_counter() - started
        size_mb = page.stat().st_size / 1e6
        driver, _ = start_chrome(scratch / "profile")
        try:
            results = [_round(driver, page) for _ in range(args.rounds)]
        finally:
            driver.quit()
    print(f"{args.episodes:,} episodes: page built in {build_s:.1f} s, report.html {size_mb:.1f} MB (the index)")
    print(f"{'step':<10}{'median ms':>10}{'rounds (ms)':>28}{'target / median':>18}")
    for name in ("open", "filter", "episode"):
        values = [r[name] for r in results]
        median = statistics.median(values)
        print(f"{name:<10}{median:>10.0f}{', '.join(f'{v:.0f}' for v in values):>28}{TARGET_MS / median:>17.1f}x")


def _round(driver, page: Path) -> dict:
    open_file(driver, page)
    opened = driver.execute_script("return tirlabViewer.timing.ready")
    filtered = driver.execute_script(
        "const box = document.getElementById('f-search'); box.value = 'large-0'; "
        "box.dispatchEvent(new Event('input')); return tirlabViewer.timing.render")
    rows = driver.find_elements(By.CSS_SELECTOR, "#rows-body tr")
    clicked = driver.execute_script("return performance.now()")
    rows[-1].click()
    WebDriverWait(driver, TIMEOUT_S).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#detail .episode"))
    shown = driver.execute_script("return performance.now()")
    return {"open": opened, "filter": filtered, "episode": shown - clicked}


if __name__ == "__main__":
    main()
