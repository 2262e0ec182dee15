"""Agentic-MME's images as the runners send them: image_to_data_url and get_adaptive_image_params against the
reference's own code (data/agentic_mme_image_vectors.json, made from seeds by scripts/reference/agentic_mme_images.py;
the inputs are made again here and their SHA-256 checked), and rendered prompts that carry each image compressed by
its message's place (Atm's tool images one message each, Gen's images of a cell in one message)."""

import hashlib
import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, features

from eval.benchmarks.agentic_mme import AgenticMme
from eval.benchmarks.agentic_mme import data as amme_data
from eval.benchmarks.agentic_mme.fixture import write_fixture
from eval.benchmarks.agentic_mme.images import (FIRST_MESSAGE, Limits, adaptive_limits, compressed, message_limits,
                                                png_bytes, runner_copy, sent_made, sent_original, server_rgb)
from runtime.profiles import ModelProfile
from runtime.protocols import HermesProtocol
from runtime.web import Web

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "reference"))
from agentic_mme_images import make_picture  # noqa: E402 - the inputs, made as their generator makes them

VECTORS = json.loads((Path(__file__).parent / "data" / "agentic_mme_image_vectors.json").read_text())
CASES = {case["name"]: case for case in VECTORS["cases"]}
LIBRARIES = f"vectors made with {VECTORS['versions']}; here pillow {Image.__version__}, " \
            f"libjpeg-turbo {features.version('libjpeg_turbo')}"


def file_of(spec: dict) -> bytes:
    buffer = io.BytesIO()
    if spec["format"] == "JPEG":
        make_picture(spec).save(buffer, "JPEG", quality=spec["jpeg_quality"])
    else:
        make_picture(spec).save(buffer, "PNG")
    return buffer.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_limits_are_the_runners():
    assert VECTORS["first_message"] == vars(FIRST_MESSAGE)
    for count, limits in VECTORS["adaptive"].items():
        assert vars(adaptive_limits(int(count))) == limits, count


@pytest.mark.parametrize("name", CASES)
def test_image_to_data_url_matches_the_reference(name, tmp_path):
    case = CASES[name]
    expected = case["reference"]
    data = file_of(case["input"])
    assert sha(data) == expected["input_sha256"], "the input is not the one the vectors were made from"
    path = tmp_path / ("input.jpg" if case["input"]["format"] == "JPEG" else "input.png")
    path.write_bytes(data)
    if case["flow"] == "original":
        limits = FIRST_MESSAGE
        if "error" in expected:  # the runner's copy to PNG fails: the task cannot run
            with pytest.raises(ValueError, match=expected["error"].partition(": ")[2]):
                runner_copy(path)
            return
        data = runner_copy(path)
    else:
        limits = Limits(**case["params"])
    assert len(data) == expected["file_bytes"]
    picture = Image.open(io.BytesIO(data))
    if "error" in expected:  # the last resize reaches a zero side
        with pytest.raises(ValueError, match=expected["error"].partition(": ")[2]):
            compressed(picture, lambda: len(data), limits)
        return
    jpeg = compressed(picture, lambda: len(data), limits)
    assert (jpeg is None) == expected["sent_as_file"]
    payload = data if jpeg is None else jpeg
    assert (len(payload), sha(payload)) == (expected["payload_bytes"], expected["payload_sha256"]), LIBRARIES
    decoded = Image.open(io.BytesIO(payload))
    pixels = np.asarray(decoded)
    assert (decoded.mode, list(decoded.size), list(pixels.shape)) == \
        (expected["mode"], expected["size"], expected["pixels_shape"])
    assert sha(pixels.tobytes()) == expected["pixels_sha256"]
    assert sha(server_rgb(decoded).tobytes()) == expected["server_rgb_sha256"]  # what vLLM's server hands the model
    if case["flow"] == "original":
        assert sha(sent_original(path, limits).tobytes()) == expected["server_rgb_sha256"]
    elif case["input"]["format"] == "PNG" and case["input"]["mode"] in ("RGB", "L"):
        # a workspace array whose file is the PNG PIL writes for it (an atomic tool's output, a Gen image)
        image = np.asarray(make_picture(case["input"]))
        assert png_bytes(Image.fromarray(image)) == data
        sent = sent_made(image, limits)
        assert (sent is image) == expected["sent_as_file"]
        assert sha(server_rgb(Image.fromarray(sent)).tobytes()) == expected["server_rgb_sha256"]


def test_a_message_counts_once_however_many_images_it_holds():
    image, words = {"type": "image", "image": 0}, {"type": "text", "text": "x"}
    messages = [{"role": "system", "content": [words]}, {"role": "user", "content": [image, image, words]}]
    messages += [{"role": "tool", "content": [words]}, {"role": "user", "content": [image, words]}] * 14
    limits = message_limits(messages)
    assert limits[:3] == [None, FIRST_MESSAGE, None]
    assert [limits[k] for k in range(3, len(messages), 2)] == [adaptive_limits(n) for n in range(1, 15)]
    assert limits[-1] == Limits(800 * 800, 55, 1.0)


def _dataset(tmp_path: Path, case: str) -> list:
    """The fixture's tasks, task 0001's image replaced by a vector's input file."""
    folder = write_fixture(tmp_path / "amme")
    spec = CASES[case]["input"]
    (folder / "images" / "image_0001.png").unlink()
    (folder / "images" / f"image_0001.{'jpg' if spec['format'] == 'JPEG' else 'png'}").write_bytes(file_of(spec))
    tasks, _, _, _ = amme_data.load(str(folder))
    return folder, next(t for t in tasks if t.id == "0001")


def _episode(folder: Path, task, track: str):
    amme = AgenticMme([task], [], "fixture", "official", None, track, Web("replay", [folder / "web_replay.jsonl"]))
    profile = amme.profile(ModelProfile("qwen", HermesProtocol(stop=("<|im_end|>",))))
    toolbox = amme.toolboxes(profile)(None, "tools")
    return toolbox, amme.start(toolbox, profile, task, "tools", profile.budgets)


def _reply(episode, toolbox, text: str) -> None:
    episode.prompt()
    episode.submit(text)
    if episode.pending:
        toolbox.run([episode])


def test_atm_prompt_carries_the_images_compressed_by_their_place(tmp_path):
    folder, task = _dataset(tmp_path, "original_2100x2050_resized")
    toolbox, episode = _episode(folder, task, "atm")
    crop = '<tool_call>\n{"name": "crop", "arguments": {"image_index": 0, "bbox_2d": [0, 0, 800, 800]}}\n</tool_call>'
    _reply(episode, toolbox, "\n".join([crop] * 3))
    prompt = episode.protocol.render(episode.trajectory)
    episode.close()
    workspace = episode.trajectory.images
    assert [a.shape for a in workspace] == [(2050, 2100, 3)] + [(1640, 1680, 3)] * 3
    first, one, two, three = prompt.images
    # the task's image: its orig.png through the first message's limits (2048*2048 pixels), as the reference sends it
    assert sha(first.tobytes()) == CASES["original_2100x2050_resized"]["reference"]["server_rgb_sha256"]
    # crops 1 and 2 come when 1 and 2 messages hold images (2048*2048: sent as their PNG), crop 3 at 3 (1536*1536)
    assert one is workspace[1] and two is workspace[2]
    scale = math.sqrt(1536 * 1536 / (1680 * 1640))
    assert three.shape == (int(1640 * scale), int(1680 * scale), 3)
    assert np.abs(three.astype(int) - workspace[3][:three.shape[0], :three.shape[1]]).mean() > 0  # re-encoded
    assert episode.protocol.render(episode.trajectory).images[3] is three  # kept, not compressed again


def test_gen_prompt_counts_a_cells_images_as_one_message(tmp_path):
    spec = CASES["1600x1500_tier2_resized"]["input"]
    folder, task = _dataset(tmp_path, "small_png_as_file")
    toolbox, episode = _episode(folder, task, "gen")
    gradient = ("import numpy as np, os\nfrom PIL import Image\n"
                f"w, h = {spec['size'][0]}, {spec['size'][1]}\ny, x = np.mgrid[0:h, 0:w]\n"
                "rgb = np.stack([x * 255 // (w - 1), y * 255 // (h - 1), (x + y) // 3 % 256], -1).astype(np.uint8)\n"
                "out = os.environ['PROCESSED_IMAGE_SAVE_PATH']\n")
    try:
        _reply(episode, toolbox, "<code>" + gradient + "for n in (1, 2):\n"
               "    Image.fromarray(rgb[:8, :8]).save(os.path.join(out, f'transformed_image_{n}.png'))\n</code>")
        for n in (3, 4):
            _reply(episode, toolbox, "<code>" + gradient
                   + f"Image.fromarray(rgb).save(os.path.join(out, 'transformed_image_{n}.png'))\n</code>")
        wire = episode.protocol.wire_messages(episode.trajectory.messages)
        prompt = episode.protocol.render(episode.trajectory)
    finally:
        episode.close()
        toolbox.sandbox.close()
    holding = [limits for limits in message_limits(wire) if limits is not None]
    assert holding == [FIRST_MESSAGE, adaptive_limits(1), adaptive_limits(2), adaptive_limits(3)]
    workspace = episode.trajectory.images
    assert len(prompt.images) == len(workspace) == 5
    # the first cell's two images went in one message, so the second cell's image came when 2 messages held images
    # (2048*2048 pixels: sent as its PNG), the third cell's at 3 (1536*1536, quality 85: as the reference sends it)
    assert all(prompt.images[k] is workspace[k] for k in (1, 2, 3))
    reference = CASES["1600x1500_tier2_resized"]["reference"]
    assert sha(png_bytes(Image.fromarray(workspace[4]))) == reference["input_sha256"]  # the vector's very input
    assert sha(prompt.images[4].tobytes()) == reference["server_rgb_sha256"]


def test_the_visual_judge_sees_the_image_as_image_to_data_url_sends_it_by_default(tmp_path):
    """eval_runs_search.py's judge call: image_to_data_url(path) (2048*2048 pixels, quality 95, 15 MB) on the run's
    PNG, or on orig.png for the task's image."""
    from eval.benchmarks.agentic_mme import INPUT_FILES, process
    from eval.benchmarks.agentic_mme.images import JUDGE
    from runtime.trajectory import save_image

    folder, task = _dataset(tmp_path, "original_2100x2050_resized")
    made = np.asarray(make_picture({"kind": "gradient", "mode": "RGB", "size": [2100, 2050]}))
    keys = [save_image(task.images[0], tmp_path / "images"), save_image(made, tmp_path / "images")]
    record = {"trajectory": {"images": keys, "meta": {INPUT_FILES: [str(p) for p in task.images.sources]}}}
    amme = AgenticMme([task], [], "fixture", "official", "judge", "atm", images_dir=tmp_path / "images")
    original, tool = (amme._judge_prompt(process.Request("k", "V", question="?", image=k), record)[0].images[0]
                      for k in (0, 1))
    # the vector's limits differ from the judge's only in bytes (8 MB, not 15), which its 0.3 MB JPEG meets either way
    assert (JUDGE.max_pixels, JUDGE.quality) == (FIRST_MESSAGE.max_pixels, FIRST_MESSAGE.quality)
    assert sha(original.tobytes()) == CASES["original_2100x2050_resized"]["reference"]["server_rgb_sha256"]
    assert tool.shape == original.shape == (2023, 2072, 3)
    assert np.array_equal(tool, sent_made(made, JUDGE))
