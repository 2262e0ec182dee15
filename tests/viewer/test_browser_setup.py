"""The browser setup works from the file system, as the viewer will: a page opened from disk loads a sibling script
inserted at run time (how the viewer loads episode chunks on demand) and a sibling image, fetches nothing from any
server and logs no error; and the helpers that check those do see an external fetch and a script error."""

from PIL import Image
from selenium.webdriver.support.ui import WebDriverWait

from tests.viewer.browser import TIMEOUT_S, console_errors, external_requests, open_file

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>browser setup</title></head>
<body style="font: 24px sans-serif">
<h1>tirlab viewer browser check</h1>
<p id="status">waiting for data/part.js</p>
<img id="pic" src="img/a.png" width="160" height="120" style="image-rendering: pixelated">
<script>
  const script = document.createElement("script");
  script.src = "data/%(script)s";
  document.head.appendChild(script);
</script>
%(extra)s
</body></html>
"""
PART = 'document.getElementById("status").textContent = "part.js loaded: " + [1, 2, 3].map(x => x * x).join(",");\n'


def _site(root, script="part.js", extra=""):
    (root / "data").mkdir(parents=True)
    (root / "img").mkdir()
    (root / "index.html").write_text(PAGE % {"script": script, "extra": extra})
    (root / "data" / "part.js").write_text(PART)
    image = Image.new("RGB", (4, 3), (200, 30, 30))
    image.putpixel((0, 0), (30, 30, 200))
    image.save(root / "img" / "a.png")
    return root / "index.html"


def _status(driver):
    return driver.execute_script("return document.getElementById('status').textContent")


def test_page_from_disk_loads_its_script_and_image_and_nothing_else(browser, screenshot, tmp_path):
    print(f"\nchromium session started in {browser.tirlab_start_seconds:.2f} s")
    assert browser.tirlab_start_seconds > 0
    open_file(browser, _site(tmp_path))
    WebDriverWait(browser, TIMEOUT_S).until(lambda d: _status(d).startswith("part.js loaded"),
                                            message="data/part.js did not run")
    assert _status(browser) == "part.js loaded: 1,4,9"
    assert browser.execute_script("const img = document.getElementById('pic'); "
                                  "return img.complete && img.naturalWidth") == 4
    assert external_requests(browser) == []
    assert console_errors(browser) == []
    path = screenshot("browser_setup")
    with Image.open(path) as shot:
        # --window-size=1400,1000 is the window; headless chromium keeps part of its height for its own frame
        assert shot.width == 1400 and 600 < shot.height <= 1000, shot.size
        pixels = shot.convert("RGB")
        colours = {pixels.getpixel((x, y)) for x in range(0, 400, 2) for y in range(0, 400, 2)}
    # the image, scaled up 40 times, shows both its colours; the heading's text is drawn in black
    assert {(200, 30, 30), (30, 30, 200), (0, 0, 0)} <= colours


def test_helpers_see_an_external_fetch_a_failed_load_and_a_script_error(browser, tmp_path):
    extra = ('<img src="http://127.0.0.1:9/remote.png">\n'
             '<script>throw new Error("deliberate failure");</script>')
    open_file(browser, _site(tmp_path, script="missing.js", extra=extra))
    WebDriverWait(browser, TIMEOUT_S).until(lambda d: external_requests(d), message="the external fetch was not seen")
    assert external_requests(browser) == ["http://127.0.0.1:9/remote.png"]
    errors = console_errors(browser)
    assert any("deliberate failure" in error for error in errors), errors
    assert any("missing.js" in error for error in errors), errors
    assert _status(browser) == "waiting for data/part.js"
