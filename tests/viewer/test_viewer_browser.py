"""The viewer in headless chromium, opened from the file system: a fixture run's episodes, images, calls and the
regions they named; filters, search, links, the side-by-side view; a 10,000-episode run within 2 seconds; a GRPO
rollout folder and a data_gen export. Screenshots go to test-artifacts/screenshots/."""

import functools
import http.server
import json
import shutil
import threading

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from data_gen.make import main as make_data
from tests.viewer.browser import TIMEOUT_S, console_errors, external_requests, open_file
from tests.viewer.runs import HOSTILE, make_large_run, make_run
from viewer import view

OPEN_LIMIT_MS = 2000  # the viewer's target: a 10,000-episode run opens (and filters) within 2 s


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("viewer-run")
    return path, make_run(path)


def _rows(browser):
    return browser.find_elements(By.CSS_SELECTOR, "#rows-body tr")


def _count(browser) -> str:
    return browser.find_element(By.ID, "count").text


def _select(browser, element_id: str, value: str) -> None:
    Select(browser.find_element(By.ID, element_id)).select_by_value(value)


def _wait_episodes(browser, count: int = 1):
    WebDriverWait(browser, TIMEOUT_S).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#detail .episode")) >= count,
        message="the episode did not load")
    return browser.find_elements(By.CSS_SELECTOR, "#detail .episode")


def _first_pair(browser, a: str, b: str):
    """Groups `a` and `b` side by side; the first task's two episodes, once loaded."""
    _select(browser, "f-a", a)
    _select(browser, "f-b", b)
    _rows(browser)[0].click()
    return _wait_episodes(browser, 2)


def _images_loaded(browser, scope: str) -> list[int]:
    """naturalWidth of every image under `scope` once each has loaded (0: failed)."""
    script = (f"const images = [...document.querySelectorAll({json.dumps(scope + ' img')})];"
              "images.forEach(i => i.loading = 'eager');"
              "return images.every(i => i.complete) ? images.map(i => i.naturalWidth) : null;")
    return WebDriverWait(browser, TIMEOUT_S).until(lambda d: d.execute_script(script), message="images did not load")


def test_an_episode_shows_its_turns_images_calls_and_regions(browser, run, screenshot):
    path, records = run
    open_file(browser, path / "report.html")
    assert _count(browser) == f"{len(records)} of {len(records)} episodes"
    assert len(_rows(browser)) == len(records)
    assert all(width > 0 for width in _images_loaded(browser, "#rows-body"))  # the thumbnails
    _rows(browser)[0].click()  # task-0, tools: think, crop, the crop's image, the answer
    episode = _wait_episodes(browser)[0]
    assert episode.find_element(By.TAG_NAME, "h2").text.startswith("task-0")
    roles = [e.text.split("\n")[0] for e in episode.find_elements(By.CSS_SELECTOR, ".msg .role")]
    assert roles == ["USER", "ASSISTANT", "TOOL · CROP", "ASSISTANT"]
    think = episode.find_element(By.CSS_SELECTOR, "details.think")
    assert think.get_attribute("open") is None and "thinking" in think.text
    call = episode.find_element(By.CSS_SELECTOR, ".call")
    assert call.find_element(By.CLASS_NAME, "name").text == "crop" and '"box"' in call.text
    box = call.find_element(By.CSS_SELECTOR, ".box")  # [8, 16, 72, 56] on the 80x96 input
    style = box.get_attribute("style").replace(" ", "")
    assert "left:10%" in style and "top:16.667%" in style and "width:80%" in style, style
    widths = _images_loaded(browser, "#detail")
    assert len(widths) == 3 and all(w > 0 for w in widths)  # the input, the region's picture, the crop
    answer = episode.find_element(By.CSS_SELECTOR, "dl.answer").text
    assert "STOP" in answer and "truth" in answer
    facts = episode.find_element(By.CLASS_NAME, "facts").text
    assert "official score 1" in facts and "strict score 0" in facts and "latency (s) 0.500" in facts
    screenshot("viewer_episode")
    assert external_requests(browser) == [] and console_errors(browser) == []


def test_model_text_is_shown_as_text_never_run(browser, run, screenshot):
    path, _ = run
    open_file(browser, path / "report.html")
    browser.execute_script("location.hash = 'id=task-3&og=tools'")
    episode = _wait_episodes(browser)[0]
    assert HOSTILE in episode.find_element(By.CSS_SELECTOR, "dl.answer").text
    assert browser.title == "viewer-fixture · scripted"  # the injected script did not run
    assert not episode.find_elements(By.CSS_SELECTOR, "dl.answer b, dl.answer img")
    assert "TOOL · TELEPORT · ERROR" in episode.text  # the unknown tool's error went back to the model
    screenshot("viewer_hostile_text")
    assert external_requests(browser) == [] and console_errors(browser) == []


def test_filters_search_sort_and_a_shared_link(browser, run, screenshot):
    path, records = run
    open_file(browser, path / "report.html")
    _select(browser, "f-cat", "zoom")
    assert len(_rows(browser)) == 4 and _count(browser) == f"4 of {len(records)} episodes"
    _select(browser, "f-group", "tools")
    _select(browser, "f-status", "correct")
    assert len(_rows(browser)) == 2
    browser.find_element(By.ID, "f-reset").click()
    _select(browser, "f-tool", "rotate")
    assert {r.find_element(By.CSS_SELECTOR, ".ident").text for r in _rows(browser)} == {"task-2", "task-5"}
    _select(browser, "f-tool", "")
    browser.find_element(By.ID, "f-cmin").send_keys("2")
    browser.execute_script("document.getElementById('f-cmin').dispatchEvent(new Event('change'))")
    assert [r.find_element(By.CSS_SELECTOR, ".ident").text for r in _rows(browser)] == ["task-5"]
    browser.find_element(By.ID, "f-reset").click()
    _select(browser, "f-stop", "answer")
    browser.find_element(By.ID, "f-search").send_keys("3 APPLES")  # case-insensitive, over answers too
    assert [r.find_element(By.CSS_SELECTOR, ".ident").text for r in _rows(browser)] == ["task-5", "task-5"]
    browser.find_element(By.ID, "f-reset").click()
    _select(browser, "f-sort", "lat")
    _select(browser, "f-dir", "desc")
    latencies = [float(r.find_elements(By.TAG_NAME, "td")[-2].text) for r in _rows(browser)]
    assert latencies == sorted(latencies, reverse=True)
    _select(browser, "f-status", "unscored")
    _rows(browser)[0].click()
    link = _wait_episodes(browser)[0].find_element(By.CSS_SELECTOR, "a.link").get_attribute("href")
    assert link.endswith("#id=task-4&og=tools")
    screenshot("viewer_filtered")
    open_file(browser, path / "report.html")  # the link, opened afresh, shows the same episode
    browser.get(link)
    assert _wait_episodes(browser)[0].find_element(By.TAG_NAME, "h2").text.startswith("task-4")
    assert external_requests(browser) == [] and console_errors(browser) == []


def test_two_modes_side_by_side(browser, run, screenshot):
    path, _ = run
    open_file(browser, path / "report.html")
    _select(browser, "f-a", "tools")
    _select(browser, "f-b", "no_tools")
    assert _count(browser) == "6 of 6 tasks"
    _select(browser, "f-agree", "differ")  # task-4: unscored vs wrong; task-5: partial vs wrong
    assert [r.find_element(By.CSS_SELECTOR, ".ident").text for r in _rows(browser)] == ["task-4", "task-5"]
    _select(browser, "f-agree", "a")
    assert [r.find_element(By.CSS_SELECTOR, ".ident").text for r in _rows(browser)] == ["task-5"]
    _rows(browser)[0].click()
    left, right = _wait_episodes(browser, 2)
    assert "partial" in left.find_element(By.CLASS_NAME, "facts").text
    assert "wrong" in right.find_element(By.CLASS_NAME, "facts").text
    assert len(left.find_elements(By.CSS_SELECTOR, ".call")) == 2 and not right.find_elements(By.CSS_SELECTOR, ".call")
    assert [s.text for s in browser.find_elements(By.CSS_SELECTOR, "#detail .side")] == ["A: tools", "B: no_tools"]
    screenshot("viewer_side_by_side")
    assert external_requests(browser) == [] and console_errors(browser) == []


def test_two_runs_side_by_side(browser, run, tmp_path):
    path, _ = run
    other = tmp_path / "other"
    make_run(other, modes=("tools",))
    page = view([path, other], out=tmp_path / "compare.html")
    open_file(browser, page)
    groups = [o.get_attribute("value") for o in Select(browser.find_element(By.ID, "f-a")).options][1:]
    assert groups == [f"{other.name}: tools", f"{path.name}: no_tools", f"{path.name}: tools"]
    _select(browser, "f-a", f"{path.name}: tools")
    _select(browser, "f-b", f"{other.name}: tools")
    _select(browser, "f-agree", "differ")
    assert _rows(browser) == []  # the same scripted episodes: nothing differs
    _select(browser, "f-agree", "all")
    _rows(browser)[0].click()
    assert len(_images_loaded(browser, "#detail")) == 6  # each side's images, from its own run's folder
    assert all(w > 0 for w in _images_loaded(browser, "#detail"))
    assert external_requests(browser) == [] and console_errors(browser) == []


def test_a_10000_episode_run_opens_and_filters_within_2_seconds(browser, run, tmp_path, screenshot):
    path, records = run
    large = tmp_path / "large"
    make_large_run(large, 10_000, [r for r in records if r["mode"] == "tools"])
    shutil.copytree(path / "images", large / "images")
    page = view([large])
    assert page.stat().st_size < 8_000_000 and b"data:image" not in page.read_bytes()  # no image inside the page
    opened, filtered = [], []
    for _ in range(3):  # the best of three: a machine busy with other work must not decide it
        open_file(browser, page)
        opened.append(browser.execute_script("return tirlabViewer.timing.ready"))
        filtered.append(browser.execute_script(
            "const box = document.getElementById('f-search'); box.value = 'large-09'; "
            "box.dispatchEvent(new Event('input')); return tirlabViewer.timing.render"))
        if min(opened) < OPEN_LIMIT_MS and min(filtered) < OPEN_LIMIT_MS:
            break
    assert min(opened) < OPEN_LIMIT_MS, opened
    assert min(filtered) < OPEN_LIMIT_MS, filtered
    assert _count(browser) == "1000 of 10000 episodes"
    assert len(_rows(browser)) == 100  # paged: the list holds one page
    assert len(browser.find_elements(By.TAG_NAME, "img")) <= 100
    browser.find_element(By.XPATH, "//button[contains(., 'next')]").click()
    assert "page 2 of 10" in browser.find_element(By.ID, "pager").text
    _rows(browser)[-1].click()
    assert _wait_episodes(browser)[0].find_element(By.TAG_NAME, "h2").text.startswith("large-09199")
    assert not browser.find_element(By.ID, "compare-controls").is_displayed()  # one group: nothing to set beside
    screenshot("viewer_10000")
    browser.execute_script("location.hash = 'id=large-05432&og=tools'")  # a link opens the list at its page
    WebDriverWait(browser, TIMEOUT_S).until(lambda d: "page 55 of 100" in d.find_element(By.ID, "pager").text)
    assert browser.find_element(By.CSS_SELECTOR, "#rows-body tr.open .ident").text == "large-05432"
    assert external_requests(browser) == [] and console_errors(browser) == []


def test_rollouts_per_step_with_rewards(browser, run, tmp_path, screenshot):
    path, records = run
    rollouts = tmp_path / "rollouts"
    for step in (1, 2):
        folder = rollouts / f"step-{step:06d}"
        shutil.copytree(path / "images", folder / "images")
        lines = [json.dumps({**r, "id": f"{r['id']}#1", "task": r["id"], "step": step, "reward": step / 2,
                             "rewards": {"accuracy": r["score"] or 0.0, "format": 0.0}}) + "\n"
                 for r in records if r["mode"] == "tools"]
        (folder / "records.jsonl").write_text("".join(lines))
    open_file(browser, view([rollouts]))
    assert _count(browser) == "12 of 12 episodes"
    left, right = _first_pair(browser, "step 1", "step 2")
    assert "reward 0.500" in left.text and "reward 1" in right.text and "accuracy 1" in left.text
    screenshot("viewer_rollouts")
    assert external_requests(browser) == [] and console_errors(browser) == []


def test_a_data_gen_export_shows_its_reference_trajectories(browser, tmp_path, screenshot):
    out = tmp_path / "pilot"
    make_data(["pilot", "--render", "aligned", "--n", "4", "--n-test", "1", "--out", str(out), "--workers", "1"])
    assert (out / "agentic" / "viewer.html").is_file() and (out / "direct" / "viewer.html").is_file()
    open_file(browser, view([out]))
    assert _count(browser) == "10 of 10 episodes"
    agentic, direct = _first_pair(browser, "agentic train", "direct train")
    assert agentic.find_element(By.CSS_SELECTOR, ".call .name").text == "rotate"
    assert not direct.find_elements(By.CSS_SELECTOR, ".call")
    assert all(w > 0 for w in _images_loaded(browser, "#detail"))
    screenshot("viewer_dataset")
    assert external_requests(browser) == [] and console_errors(browser) == []


def test_a_missing_chunk_is_said_in_each_pane_and_a_served_page_works(browser, run, tmp_path):
    path, _ = run
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    (copy / "report_files" / "chunks" / "00000.js").unlink()
    open_file(browser, copy / "report.html")
    browser.execute_script("location.hash = 'a=tools&b=no_tools&id=task-0'")
    WebDriverWait(browser, TIMEOUT_S).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#detail .failed")) == 2,
                                            message="both panes should say the chunk could not load")
    assert "keep the report_files folder beside this page" in browser.find_element(By.ID, "detail").text
    # served over HTTP (a remote machine's run folder, through a tunnel): the page's own server is allowed
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    console_errors(browser)  # the missing chunk's message, read and gone
    try:
        browser.get(f"http://127.0.0.1:{server.server_address[1]}/report.html#id=task-0&og=tools")
        _wait_episodes(browser)
        assert all(width > 0 for width in _images_loaded(browser, "#detail"))
        assert [e for e in console_errors(browser) if "favicon" not in e] == []
    finally:
        server.shutdown()
        server.server_close()
