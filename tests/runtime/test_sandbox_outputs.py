"""What a session hands the evaluation process: images decoded in the sandbox within the parent's budgets, and a
channel on which frames sent for no request are dropped unread and garbage ends the worker."""

import io
import os
import socket
import struct
import threading
import time
import zlib

import numpy as np
import pytest
from PIL import Image

from runtime.sandbox import ImageRefused, SandboxConfig, SandboxPool
from runtime.sandbox.decode import (MAX_JPEG_SCANS, MAX_PNG_ANCILLARY_CHUNKS, MAX_PNG_CHUNKS, MAX_TIFF_STRIPS,
                                    Refused, check_structure, decode)
from runtime.sandbox.pool import MAX_STRAY_FRAMES, _skip
from tools.images import to_array

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the sandbox needs Linux")
BIG = dict(max_pixels=1 << 26, max_bytes=1 << 30)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with SandboxPool(SandboxConfig(cell_timeout_s=10), root=tmp_path_factory.mktemp("sandbox")) as pool:
        yield pool


def _png(array, mode=None, **params) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array, mode).save(buffer, format="PNG", **params)
    return buffer.getvalue()


def _chunk(kind: bytes, data: bytes = b"") -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_with_chunks(count: int, kind: bytes = b"tEXt") -> bytes:
    header = _chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    body = _chunk(b"IDAT", zlib.compress(b"\x00\x00"))
    return b"\x89PNG\r\n\x1a\n" + header + _chunk(kind, b"k\x00v") * count + body + _chunk(b"IEND")


def _tiff_with_strips(count: int, order: str = "<") -> bytes:
    mark = b"II*\x00" if order == "<" else b"MM\x00*"
    entries = [(256, 4, 1, 1), (257, 4, 1, 1), (273, 4, count, 8), (279, 4, count, 8)]
    ifd = struct.pack(order + "H", len(entries)) + b"".join(struct.pack(order + "HHII", *e) for e in entries)
    return mark + struct.pack(order + "I", 8) + ifd + struct.pack(order + "I", 0)


def _jpeg(progressive: bool) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
        buffer, format="JPEG", progressive=progressive)
    return buffer.getvalue()


def test_the_structure_caps_refuse_crafted_files_before_any_pixel_is_decoded():
    check_structure(_png_with_chunks(MAX_PNG_ANCILLARY_CHUNKS))
    with pytest.raises(Refused, match="ancillary"):
        check_structure(_png_with_chunks(MAX_PNG_ANCILLARY_CHUNKS + 1))
    with pytest.raises(Refused, match="chunks"):
        check_structure(_png_with_chunks(MAX_PNG_CHUNKS, kind=b"IDAT"))
    for order in "<>":
        assert check_structure(_tiff_with_strips(MAX_TIFF_STRIPS, order)) == "TIFF"
        with pytest.raises(Refused, match="strips"):
            check_structure(_tiff_with_strips(MAX_TIFF_STRIPS + 1, order))
    progressive = _jpeg(True)
    assert check_structure(progressive) == "JPEG" and progressive.count(b"\xff\xda") > 1
    sos, scans = progressive.index(b"\xff\xda"), progressive.count(b"\xff\xda")
    many = progressive[:sos] + progressive[sos:-2] * (MAX_JPEG_SCANS // scans + 1) + b"\xff\xd9"
    with pytest.raises(Refused, match="scans"):
        check_structure(many)
    with pytest.raises(Refused, match="BigTIFF"):
        check_structure(b"II+\x00" + bytes(16))
    assert check_structure(b"BM" + bytes(60)) == "other"


@pytest.mark.parametrize("make", [
    lambda: _png(np.arange(48 * 64 * 4, dtype=np.uint32).astype(np.uint8).reshape(48, 64, 4)),  # RGBA: over white
    lambda: _png(np.arange(48 * 64, dtype=np.uint32).astype(np.uint8).reshape(48, 64)),  # gray stays 2-D
    lambda: _png(np.arange(48 * 64, dtype=np.uint32).astype(np.uint8).reshape(48, 64) % 7, "P", transparency=3),
    lambda: _jpeg(True),
])
def test_decoding_in_the_worker_reads_what_to_array_reads(pool, make, tmp_path):
    data = make()
    (tmp_path / "x.png").write_bytes(data)
    with pool.session(inputs={"x.png": data}) as session:
        result = session.run("import os, shutil\nshutil.copy(os.environ['INPUTS_DIR'] + '/x.png', 'outputs/x.png')")
        pixels = session.decode(result.images[0], **BIG)
        assert pixels.dtype == np.uint8 and np.array_equal(pixels, to_array(tmp_path / "x.png"))
        rgb = session.decode(result.images[0], **BIG, mode="rgb")
        with Image.open(tmp_path / "x.png") as opened:
            assert np.array_equal(rgb, np.asarray(opened.convert("RGB")))
    assert np.array_equal(decode(data, "tirlab", 1 << 26, 1 << 30), pixels)


def test_a_16_bit_png_keeps_both_bytes(pool):
    array = (np.arange(16 * 16 * 3, dtype=np.uint16).reshape(16, 16, 3) * 211)
    import cv2

    with pool.session(inputs={"x.png": cv2.imencode(".png", array[..., ::-1])[1].tobytes()}) as session:
        result = session.run("import os, shutil\nshutil.copy(os.environ['INPUTS_DIR'] + '/x.png', 'outputs/x.png')")
        pixels = session.decode(result.images[0], **BIG)
    assert np.array_equal(pixels, np.round(array / 257).astype(np.uint8))


def test_images_over_the_budgets_are_refused_and_the_session_goes_on(pool):
    with pool.session() as session:
        result = session.run("from PIL import Image\nImage.new('RGB', (400, 300), 'red').save('outputs/a.png')\n"
                             "open('outputs/b.png', 'wb').write(b'not an image')\nkept = 7")
        a, b = result.images
        with pytest.raises(ImageRefused, match="pixels, over the limit of 100,000"):
            session.decode(a, max_pixels=100_000, max_bytes=1 << 30)
        with pytest.raises(ImageRefused, match=r"0.3 MB of pixels are over the 0.1 MB"):
            session.decode(a, max_pixels=1 << 26, max_bytes=100_000)
        with pytest.raises(ImageRefused, match="cannot read the image data: cannot identify image file$"):
            session.decode(b, **BIG)
        assert session.decode(a, **BIG).shape == (300, 400, 3)
        assert session.run("print(kept)").stdout == "7\n"  # refusals cost the image, not the process
        with pytest.raises(Exception, match="not an image this session collected"):
            session.decode(session.inputs_dir / ".." / "collected" / "x.png", **BIG)


def test_a_decoder_past_its_deadline_ends_the_worker_and_the_next_cell_starts_fresh(tmp_path):
    config = SandboxConfig(decode_timeout_s=0.2)
    noise = np.random.default_rng(1).integers(0, 256, (1500, 1500, 3), dtype=np.uint8)
    with SandboxPool(config, root=tmp_path) as pool, pool.session(inputs={"n.png": _png(noise)}) as session:
        code = ("import os, shutil\nkept = 1\nshutil.copy(os.environ['INPUTS_DIR'] + '/n.png', 'outputs/n.png')\n"
                "import runtime.sandbox.decode as d, time\n"
                "import signal\n"
                "def stuck(*args):  # a decoder that never answers, not even to its own timer\n"
                "    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
                "    time.sleep(30)\n"
                "d.decode = stuck")
        result = session.run(code)
        start = time.monotonic()
        with pytest.raises(ImageRefused, match="took longer than 0.2 s"):
            session.decode(result.images[0], **BIG)
        assert time.monotonic() - start < 5  # the deadline, not the decoder, decides (generous: a loaded machine)
        after = session.run("print('kept' in globals())")
        assert after.ok and after.stdout == "False\n"


def test_frames_sent_for_no_request_are_dropped_and_a_flood_ends_the_worker(pool):
    find = ("import os, stat, struct\n"
            "def socks():\n    out = []\n    for fd in range(3, 64):\n        try:\n"
            "            if stat.S_ISSOCK(os.fstat(fd).st_mode): out.append(fd)\n"
            "        except OSError: pass\n    return out\n")
    with pool.session() as session:
        few = session.run(find + f"for fd in socks():\n    for i in range({MAX_STRAY_FRAMES}):\n"
                          "        os.write(fd, struct.pack('>II', 4, 999) + b'[[]]')\nkept = 3\nprint('after')")
        assert few.ok and few.stdout == "after\n" and not few.restarted
        flood = session.run(find + "for fd in socks():\n    for i in range(100000):\n"
                            "        os.write(fd, struct.pack('>II', 2, 12345) + b'[]')\nprint('never read')")
        assert not flood.ok and flood.restarted and "sent garbage on its channel" in flood.error
        assert "frames for no request" in flood.error
        assert session.run("print(1 + 1)").stdout == "2\n"
        huge = session.run(find + "for fd in socks():\n    os.write(fd, struct.pack('>II', 1 << 31, 99999) + b'x')")
        assert huge.restarted and "sent garbage on its channel" in huge.error
        assert session.run("print(2 + 2)").stdout == "4\n"


def test_the_decode_timer_holds_against_a_cells_own_alarm_handler_and_the_worker_goes_on(tmp_path):
    with SandboxPool(SandboxConfig(decode_timeout_s=0.5), root=tmp_path) as pool, pool.session() as session:
        code = ("from PIL import Image\nImage.new('RGB', (8, 8)).save('outputs/a.png')\nkept = 1\n"
                "import signal, time, runtime.sandbox.decode as d\n"
                "signal.signal(signal.SIGALRM, lambda *a: None)  # would swallow the decoder's timer\n"
                "def slow(*args):\n    for _ in range(600):\n        time.sleep(0.01)\n"
                "d.decode = slow")
        result = session.run(code)
        with pytest.raises(ImageRefused, match="took longer than the 0.5 s the sandbox allows$"):
            session.decode(result.images[0], **BIG)
        assert session.run("print(kept)").stdout == "1\n"  # the worker's own timer answered: nothing was ended


def test_a_decode_waiting_for_a_running_cell_is_not_charged_for_the_wait(tmp_path):
    with SandboxPool(SandboxConfig(decode_timeout_s=0.5), root=tmp_path) as pool, pool.session() as session:
        image = session.run("from PIL import Image\nImage.new('RGB', (8, 8)).save('outputs/a.png')").images[0]
        # the cell runs until the test writes `go` into its folder, a second after the decode is asked
        cell = threading.Thread(target=session.run, args=(
            "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.01)\nkept = 2",))
        cell.start()
        deadline = time.monotonic() + 60
        while not session._lock.locked():  # until the cell holds the session
            assert cell.is_alive() and time.monotonic() < deadline, "the cell did not start within 60 s"
            time.sleep(0.001)
        threading.Timer(1.0, (session.directory / "work" / "go").touch).start()
        asked = time.monotonic()
        assert session.decode(image, **BIG).shape == (8, 8, 3)
        assert time.monotonic() - asked >= 1.0  # it waited for the cell, twice its own 0.5 s, and was not charged
        cell.join()
        assert session.run("print(kept)").stdout == "2\n"


def test_skipping_a_stray_frame_keeps_to_the_deadline():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(b"x" * 10)  # 10 of the 1,000 bytes promised, then nothing
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            _skip(ours, 1000, start + 0.2)
        assert time.monotonic() - start < 5  # generous: a loaded machine


def test_a_decode_timeout_must_be_positive():
    with pytest.raises(ValueError, match="decode_timeout_s must be a positive number"):
        SandboxPool(SandboxConfig(decode_timeout_s=0))
