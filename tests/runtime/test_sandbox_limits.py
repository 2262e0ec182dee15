"""The promises the sandbox keeps inside a session (docs/security.md): its inputs and their aliases in the
work dir cannot be changed, its files have a disk quota (bytes and files) that ends a cell with a clear
error, its memory has one limit with no way around the address space, a thread cannot outlive its cell,
and no rlimit can be raised. Small limits keep every test to about a second."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from runtime.sandbox import SandboxConfig, SandboxPool

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the sandbox needs Linux")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="a pool that does not run as root has no tmpfs nor uid")

GONE_S = 60  # how long an ended process may take to disappear on a loaded machine
SMALL = SandboxConfig(preload=("numpy",), memory_mb=512, disk_mb=16, disk_files=64, file_size_mb=8,
                      cell_timeout_s=5, kill_grace_s=0.5)


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(SMALL) as pool:
        yield pool


# --- inputs ---------------------------------------------------------------------------------------------
@as_root
def test_inputs_and_their_aliases_in_the_work_dir_cannot_be_changed(pool):
    with pool.session(inputs={"image_0.png": b"original"}) as session:
        (session.work_dir / "image_0.png").symlink_to(session.inputs_dir / "image_0.png")  # as runtime.toolbox does
        (session.work_dir / "copy_0.png").write_bytes(b"original")
        (session.work_dir / "copy_0.png").chmod(0o444)
        code = ("import os\nopen('mine.png', 'wb').write(b'x')\nfailed = []\n"
                f"for name in ({str(session.inputs_dir / 'image_0.png')!r}, 'image_0.png', 'copy_0.png'):\n"
                "    for action in (lambda: open(name, 'wb'), lambda: os.truncate(name, 0), lambda: os.remove(name),\n"
                "                   lambda: os.rename(name, 'moved.png'), lambda: os.replace('mine.png', name),\n"
                "                   lambda: os.chmod(name, 0o666), lambda: os.link(name, 'hard.png')):\n"
                "        try:\n            action()\n        except OSError:\n            failed.append(1)\n"
                "print(len(failed))")
        assert session.run(code).stdout == "21\n"
        assert (session.inputs_dir / "image_0.png").read_bytes() == b"original"
        assert os.readlink(session.work_dir / "image_0.png") == str(session.inputs_dir / "image_0.png")
        assert (session.work_dir / "copy_0.png").read_bytes() == b"original"
        # the code still owns what it makes there
        assert session.run("os.remove('mine.png')\nos.mkdir('d')\nos.rename('d', 'e')\nos.rmdir('e')").ok


# --- the disk quota -------------------------------------------------------------------------------------
@as_root
def test_disk_quota_ends_the_cell_with_a_clear_error_and_the_pool_goes_on(pool):
    assert pool.isolation().active("disk_quota")
    with pool.session() as session, pool.session() as neighbour:
        result = session.run("for n in range(4):\n    open(f'big-{n}', 'wb').write(bytes(6 << 20))")
        assert not result.ok and "No space left on device" in result.error
        assert re.search(r"DiskQuotaError: the session's disk quota is used up: its files take 16\.0 MB of its 16 MB;"
                         r" writes fail with 'No space left on device'", result.error)
        assert neighbour.run("open('x', 'wb').write(bytes(1 << 20))\nprint('fine')").stdout == "fine\n"
        assert "DiskQuotaError" in session.run("print(1)").error  # until it deletes files
        assert session.run("import glob, os\nfor path in glob.glob('big-*'):\n    os.remove(path)").ok
        result = session.run("for n in range(100):\n    open(f'empty-{n}', 'w').close()")
        assert "DiskQuotaError" in result.error and "64 of its 64 files and directories" in result.error
        # a file deleted while open counts too: the kernel sees it, a walk of the directory would not
        result = session.run("import glob\nfor path in glob.glob('empty-*'):\n    os.remove(path)\n"
                             "held = []\nfor n in range(3):\n    held.append(open(f'hidden-{n}', 'wb'))\n"
                             "    os.remove(f'hidden-{n}')\n    held[-1].write(bytes(6 << 20))")
        assert "No space left on device" in result.error and "16.0 MB of its 16 MB" in result.error


def test_without_a_tmpfs_the_quota_is_counted_after_each_cell():
    config = SandboxConfig(preload=("numpy",), memory_mb=512, disk_mb=16, disk_files=64, file_size_mb=8,
                           disable=("tmpfs",))
    with SandboxPool(config) as pool, pool.session() as session:
        layer = pool.isolation()["disk_quota"]
        assert not layer.active and "switched off by SandboxConfig(disable=('tmpfs',))" in layer.detail
        result = session.run("for n in range(3):\n    open(f'big-{n}', 'wb').write(bytes(6 << 20))")
        assert not result.ok and re.search(r"its files take 18\.\d MB of its 16 MB \(2\.\d MB over\); every cell ends "
                                           r"with this error until files in its work dir are deleted", result.error)
        result = session.run("import os\nos.remove('big-0')\nfor n in range(70):\n    os.mkdir(f'd{n}')")
        assert re.search(r"\d+ of its 64 files and directories \(\d+ over\)", result.error)
        assert session.run("for n in range(70):\n    os.rmdir(f'd{n}')").ok


def test_collected_images_have_a_quota_too(pool):
    with pool.session() as session:
        cell = "for old in os.listdir('outputs'):\n    os.remove(f'outputs/{old}')\n" \
               "open(f'outputs/{n}.png', 'wb').write(os.urandom(6 << 20))"  # the work dir stays within its quota
        results = [session.run(f"import os\nn = {n}\n{cell}") for n in range(3)]
        assert [len(r.images) for r in results] == [1, 1, 0]
        assert "1 image of this cell was not collected" in results[2].error and "16 MB" in results[2].error


# --- memory ---------------------------------------------------------------------------------------------
def test_memory_has_one_limit_and_nothing_outside_the_address_space(pool):
    assert pool.isolation().active("memory")
    with pool.session() as session:
        # 512 MB in all, 16 of them for files: the process gets the other 496 MB
        assert session.run("block = bytearray(400 << 20)\ndel block").ok
        assert "MemoryError" in session.run("block = bytearray(500 << 20)").error
        code = ("import ctypes, fcntl, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "print(libc.syscall(29, 0, 1 << 20, 0o1600), libc.syscall(68, 0, 0o1600),\n"
                "      libc.syscall(240, b'q', 0o102, 0o600, None))\n"
                "for action in (lambda: os.memfd_create('x'), lambda: open('/dev/shm/x', 'wb'),\n"
                "               lambda: fcntl.fcntl(os.pipe()[1], 1031, 1 << 20)):\n"
                "    try:\n        action()\n    except OSError as err:\n        print(type(err).__name__)")
        if os.uname().machine == "x86_64":  # shmget, msgget, mq_open by their x86_64 numbers
            assert session.run(code).stdout == "-1 -1 -1\nPermissionError\nPermissionError\nPermissionError\n"


# --- threads --------------------------------------------------------------------------------------------
def test_a_thread_cannot_outlive_its_cell(pool):
    with pool.session() as session:
        result = session.run("import os, threading, time\nkept = 1\n"
                             "def busy():\n    while True:\n        print('late')\n"
                             "        open('late.txt', 'a').write('x')\n        time.sleep(0.01)\n"
                             "threading.Thread(target=busy, daemon=True).start()\ntime.sleep(0.05)\n"
                             "print(os.getpid())")
        pid = int(result.stdout.split()[-1])
        assert result.restarted and not result.ok and "the cell left 1 thread running" in result.error
        size = (session.work_dir / "late.txt").stat().st_size
        deadline = time.monotonic() + GONE_S
        while Path(f"/proc/{pid}").exists():
            assert time.monotonic() < deadline, f"the cell's process {pid} still there {GONE_S} s on"
            time.sleep(0.01)
        assert (session.work_dir / "late.txt").stat().st_size == size  # nothing written since the cell ended
        after = session.run("print('next')")
        assert after.stdout == "next\n" and after.ok and not after.restarted
        assert "NameError" in session.run("kept").error


def test_threads_that_end_with_their_cell_are_fine(pool):
    with pool.session() as session:
        assert session.run("x = 1").ok
        result = session.run(
            "import threading\nfrom concurrent.futures import ThreadPoolExecutor\n"
            "with ThreadPoolExecutor(4) as pool:\n    total = sum(pool.map(abs, range(-10, 0)))\n"
            "threads = [threading.Thread(target=abs, args=(-1,)) for _ in range(8)]\n"
            "for t in threads:\n    t.start()\nfor t in threads:\n    t.join()\n"
            "import cv2, numpy as np\ncv2.GaussianBlur(np.zeros((1000, 1000), np.uint8), (9, 9), 0)\nprint(total, x)")
        assert (result.ok, result.restarted, result.stdout) == (True, False, "55 1\n")


# --- rlimits --------------------------------------------------------------------------------------------
def test_no_rlimit_can_be_raised(pool):
    with pool.session() as session:
        code = ("import resource\nlimits = [resource.getrlimit(n) for n in range(16)]\n"
                "print(all(soft == hard for soft, hard in limits))\nraised = 0\n"
                "for n, (soft, hard) in enumerate(limits):\n    if hard != resource.RLIM_INFINITY:\n"
                "        try:\n            resource.setrlimit(n, (hard + 1, hard + 1))\n            raised += 1\n"
                "        except ValueError:\n            pass\n"
                "print(raised, [resource.getrlimit(n) for n in range(16)] == limits)")
        assert session.run(code).stdout == "True\n0 True\n"


def test_config_mistakes_are_clear():
    with pytest.raises(ValueError, match=r"disk_mb \(4096\) must be less than memory_mb \(2048\)"):
        SandboxPool(SandboxConfig(disk_mb=4096))
    with pytest.raises(ValueError, match=r"file_size_mb \(64\) must not exceed disk_mb \(32\)"):
        SandboxPool(SandboxConfig(disk_mb=32))
    with pytest.raises(ValueError, match="disk_files must be a positive number"):
        SandboxPool(SandboxConfig(disk_files=0))
