"""The sandbox's behaviour, with real subprocesses and real kernel isolation (no mocks): cells, variables,
errors, timeouts, restarts, output caps, image collection, inputs, environment, the isolation report,
fail-closed refusal, misuse, concurrency and clean-up. The hostile programs are in
test_sandbox_hostile.py, the benchmark's smoke run in test_sandbox_bench.py."""

from __future__ import annotations

import os
import re
import signal
import stat
import threading
import time
from pathlib import Path

import pytest

from runtime.sandbox import (
    CellResult,
    IsolationReport,
    SandboxConfig,
    SandboxError,
    SandboxPool,
    SandboxUnavailable,
)
from runtime.sandbox import isolation

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the sandbox needs Linux")

LIGHT = ("numpy",)  # pools that test configuration start in a fraction of a second without torch
SLOWER = 10  # how much longer than it should a timed step may take on a loaded machine
GONE_S = 60  # how long a process the sandbox ended may take to disappear on a loaded machine


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(SandboxConfig(cell_timeout_s=5, kill_grace_s=0.5)) as pool:
        yield pool


@pytest.fixture
def session(pool):
    with pool.session() as session:
        yield session


def wait_until_gone(*pids: int, zombies_too: bool = True) -> None:
    """Until no process of `pids` is left; with `zombies_too=False`, until none runs (a zombie, dead but not yet
    reaped by its parent, counts as gone)."""
    deadline = time.monotonic() + GONE_S
    while left := [pid for pid in pids if _exists(pid) and (zombies_too or not _zombie(pid))]:
        assert time.monotonic() < deadline, f"processes {left} still there {GONE_S} s on"
        time.sleep(0.01)


def _exists(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _zombie(pid: int) -> bool:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # gone meanwhile
    return stat_line.rsplit(")", 1)[1].split()[0] == "Z"  # the state field follows the parenthesized name


def png_bytes(width=64, height=48) -> bytes:
    import io

    from PIL import Image
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


# --- cells ----------------------------------------------------------------------------------------------
def test_variables_persist_across_runs(session):
    assert session.run("x = 40").ok
    assert session.run("x += 2").ok
    result = session.run("print(x)")
    assert isinstance(result, CellResult)
    assert (result.ok, result.stdout, result.stderr, result.error) == (True, "42\n", "", None)
    assert not result.timed_out and not result.restarted and result.images == () and result.duration_s > 0


def test_exception_gives_error_text_and_the_session_goes_on(session):
    session.run("def divide(a, b):\n    return a / b")
    result = session.run("print('before')\ndivide(1, 0)")
    assert not result.ok and not result.restarted and result.stdout == "before\n"
    assert result.error.startswith("Traceback (most recent call last):\n")
    assert result.error.endswith("ZeroDivisionError: division by zero\n")
    # the frames are the user's cells, with their source lines; none of the sandbox's own code
    assert 'File "<cell 2>", line 2, in <module>' in result.error and "divide(1, 0)" in result.error
    assert 'File "<cell 1>", line 2, in divide' in result.error and "return a / b" in result.error
    assert "runtime/sandbox" not in result.error
    assert session.run("print('after')").stdout == "after\n"


def test_syntax_error_and_exit(session):
    result = session.run("def broken(:\n    pass")
    assert not result.ok and "SyntaxError" in result.error and "<cell" in result.error
    assert session.run("import sys\nprint('a')\nsys.exit(0)\nprint('b')").stdout == "a\n"
    assert session.run("import sys\nsys.exit(0)").ok
    result = session.run("exit(3)")
    assert not result.ok and "SystemExit: 3" in result.error and not result.restarted


def test_stderr_and_warnings_are_captured(session):
    result = session.run("import sys, warnings\nsys.stderr.write('err\\n')\nwarnings.warn('careful')")
    assert result.ok and result.stderr.startswith("err\n") and "UserWarning: careful" in result.stderr


def test_soft_timeout_raises_in_the_code_and_keeps_variables(session):
    session.run("kept = 5")
    start = time.perf_counter()
    result = session.run("while True:\n    pass", timeout_s=0.5)
    assert 0.5 <= time.perf_counter() - start < 0.5 * SLOWER
    assert result.timed_out and not result.ok and not result.restarted
    assert "TimeoutError: the cell ran past its 0.5 s time limit" in result.error
    assert session.run("print(kept)").stdout == "5\n"


def test_caught_soft_timeout_is_still_reported(session):
    result = session.run("import time\ntry:\n    time.sleep(5)\nexcept TimeoutError:\n    print('caught')",
                         timeout_s=0.3)
    assert result.timed_out and not result.ok and not result.restarted and result.stdout == "caught\n"
    assert "caught the TimeoutError" in result.error


@pytest.mark.parametrize("code", [
    # catches every TimeoutError and goes on
    "import time\nwhile True:\n    try:\n        time.sleep(100)\n    except BaseException:\n        pass",
    # time.sleep with the alarm blocked: stuck in C, the soft timeout never reaches Python
    "import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])\ntime.sleep(100)",
], ids=["swallows-timeout", "blocked-in-c"])
def test_hard_timeout_kills_and_the_next_run_restarts(session, code):
    session.run("kept = 5")
    start = time.perf_counter()
    result = session.run(code, timeout_s=0.5)
    assert 0.5 <= time.perf_counter() - start < (0.5 + 0.5) * SLOWER  # the timeout, then the kill grace
    assert result.timed_out and result.restarted and not result.ok
    assert "was killed" in result.error and "next run starts a fresh process" in result.error
    after = session.run("print(kept)")
    assert "NameError" in after.error and not after.restarted and not after.timed_out
    assert session.run("print(1 + 1)").stdout == "2\n"


def test_crash_restarts_with_a_clear_message(session):
    result = session.run("import os\nos._exit(3)")
    assert result.restarted and not result.timed_out and not result.ok
    assert "exited with code 3" in result.error
    result = session.run("import ctypes\nctypes.string_at(0)")
    assert result.restarted and "SIGSEGV" in result.error
    assert session.run("print('alive')").stdout == "alive\n"


def test_memory_limit_gives_memory_error(session):
    result = session.run("block = bytearray(3 << 30)")
    assert not result.ok and not result.restarted and "MemoryError" in result.error
    assert session.run("print(len(bytearray(100 << 20)))").stdout == f"{100 << 20}\n"


def test_stdout_and_stderr_are_truncated_with_a_note(pool, session):
    cap = pool.config.max_output_chars
    result = session.run("import sys\nprint('x' * 20000)\nsys.stderr.write('y' * 9000)")
    assert result.ok
    assert result.stdout == "x" * cap + f"\n[... {20001 - cap} characters dropped]\n"
    assert result.stderr == "y" * cap + f"\n[... {9000 - cap} characters dropped]\n"
    # bytes through sys.stdout.buffer and C-level writes to fd 1 do not break anything
    result = session.run("import os, sys\nsys.stdout.buffer.write(b'raw\\n')\nos.write(1, b'c-level')")
    assert result.ok and result.stdout == "raw\n"


def test_images_are_collected_from_output_dir_only(session):
    code = (
        "import os\nfrom PIL import Image\n"
        "img = Image.new('RGB', (8, 8))\n"
        "img.save('outputs/b.png'); img.save('outputs/a.JPG')\n"
        "os.makedirs('outputs/sub'); img.save('outputs/sub/c.webp')\n"
        "img.save('not_an_output.png')\n"
        "open('outputs/notes.txt', 'w').write('text')\n"
        "os.symlink(os.path.abspath('outputs/b.png'), 'outputs/link.png')\n"
        "os.symlink('/etc/passwd', 'outputs/passwd.png')\n"
    )
    result = session.run(code)
    assert result.ok, result.error
    assert list(result.image_names) == ["a.JPG", "b.png", "sub/c.webp"]
    assert [p.name for p in result.images] == ["a.JPG", "b.png", "c.webp"]  # the sandbox's own copies
    assert not any(session.output_dir in p.parents for p in result.images)
    assert all(p.is_file() and not p.is_symlink() for p in result.images)
    assert session.output_dir == session.work_dir / "outputs"
    # only files new or changed by this cell
    assert session.run("x = 1").images == ()
    result = session.run("import time\ntime.sleep(0.01)\nImage.new('RGB', (9, 9)).save('outputs/b.png')")
    assert [p.name for p in result.images] == ["b.png"]


def test_images_over_the_size_cap_or_through_a_swapped_dir_are_not_collected(session):
    result = session.run("import os\nos.rename('outputs', 'real')\nos.symlink('real', 'outputs')\n"
                         "from PIL import Image\nImage.new('RGB', (8, 8)).save('real/x.png')")
    assert result.ok and result.images == ()


def test_inputs_are_read_only(pool, tmp_path):
    source = tmp_path / "from_path.png"
    source.write_bytes(png_bytes())
    with pool.session(inputs={"from_bytes.png": png_bytes(32, 32), "from_path.png": source}) as session:
        assert sorted(p.name for p in session.inputs_dir.iterdir()) == ["from_bytes.png", "from_path.png"]
        result = session.run("import os\nfrom PIL import Image\n"
                             "print(Image.open(os.path.join(os.environ['INPUTS_DIR'], 'from_path.png')).size)")
        assert result.stdout == "(64, 48)\n"
        result = session.run(f"open({str(session.inputs_dir / 'from_bytes.png')!r}, 'wb').write(b'x')")
        assert "PermissionError" in result.error
        result = session.run(f"import os\nos.remove({str(session.inputs_dir / 'from_path.png')!r})")
        assert "PermissionError" in result.error
        assert (session.inputs_dir / "from_bytes.png").read_bytes() == png_bytes(32, 32)
        assert (session.inputs_dir / "from_path.png").read_bytes() == source.read_bytes()


def test_environment_is_scrubbed_and_the_session_env_is_present(pool, monkeypatch):
    monkeypatch.setenv("TIRLAB_TEST_PARENT_SECRET", "do-not-leak")
    env = {"ORIGINAL_IMAGE_PATH": "{inputs_dir}/image_0.png", "SAVE_TO": "{output_dir}", "PLAIN": "value"}
    with pool.session(inputs={"image_0.png": png_bytes()}, env=env) as session:
        result = session.run("import os, tempfile\nimport json\n"
                             "print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd(), "
                             "'tmp': tempfile.gettempdir()}))")
        import json
        seen = json.loads(result.stdout)
        assert "TIRLAB_TEST_PARENT_SECRET" not in seen["env"]
        assert "do-not-leak" not in result.stdout
        assert seen["env"]["ORIGINAL_IMAGE_PATH"] == str(session.inputs_dir / "image_0.png")
        assert seen["env"]["SAVE_TO"] == str(session.output_dir) and seen["env"]["PLAIN"] == "value"
        assert seen["cwd"] == str(session.work_dir)
        assert seen["env"]["HOME"] == str(session.work_dir)
        assert Path(seen["tmp"]).parent == session.work_dir and seen["env"]["MPLBACKEND"] == "Agg"
        assert session.run("import getpass\nprint(getpass.getuser())").stdout == "sandbox\n"
        # only what the sandbox sets and what the session asked for
        assert set(seen["env"]) <= {
            "PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "USER", "LOGNAME", "MPLBACKEND", "CUDA_VISIBLE_DEVICES",
            "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
            "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS", "OPENCV_FOR_THREADS_NUM", "JE_ARROW_MALLOC_CONF",
            "INPUTS_DIR", "WORK_DIR", "OUTPUT_DIR",
            "PYTHONDONTWRITEBYTECODE", *env}


def test_tools_are_importable_and_an_op_runs(pool):
    with pool.session(inputs={"image_0.png": png_bytes(64, 48)}) as session:
        result = session.run(
            "import os\nfrom PIL import Image\nfrom tools import Executor, ToolCall\n"
            "path = os.path.join(os.environ['INPUTS_DIR'], 'image_0.png')\n"
            "out = Executor().run([ToolCall('crop', path, {'box': [0, 0, 32, 24], 'scale': 2})])[0]\n"
            "print(out.ok, out.error, out.image.shape)\n"
            "Image.fromarray(out.image).save('outputs/crop.png')")
        assert result.ok, result.error
        assert result.stdout == "True None (48, 64, 3)\n"
        assert [p.name for p in result.images] == ["crop.png"]


def test_prelude_runs_first_and_again_after_a_restart(pool):
    with pool.session(prelude="import numpy as np\nmarker = 'prelude'") as session:
        assert session.run("print(np.arange(3).sum(), marker)").stdout == "3 prelude\n"
        assert session.run("import os\nos._exit(1)").restarted
        assert session.run("print(marker)").stdout == "prelude\n"


def test_failing_prelude_is_a_clear_error(pool):
    with pytest.raises(SandboxError, match=r"prelude failed(.|\n)*ModuleNotFoundError: No module named 'not_a_module'"):
        pool.session(prelude="import not_a_module")


def test_session_dirs_are_private_and_deleted_on_close(pool):
    session = pool.session(inputs={"a.png": png_bytes()})
    # as root the session dir is the pool's: the worker's group may only pass through it
    assert stat.S_IMODE(session.directory.stat().st_mode) == (0o710 if os.geteuid() == 0 else 0o700)
    # as root the work dir is the pool's, sticky, and open to the session's group alone
    assert stat.S_IMODE(session.work_dir.stat().st_mode) == (0o1770 if os.geteuid() == 0 else 0o700)
    pid = int(session.run("import os\nprint(os.getpid())").stdout)
    session.close()
    session.close()  # twice is fine
    assert not session.directory.exists()
    wait_until_gone(pid)


def test_misuse_raises(pool):
    session = pool.session()
    session.close()
    with pytest.raises(SandboxError, match="closed sandbox session"):
        session.run("x = 1")
    with pytest.raises(SandboxError, match="bad input file name"):
        pool.session(inputs={"../escape.png": b"x"})
    with pytest.raises(SandboxError, match="not a readable file"):
        pool.session(inputs={"a.png": "/nonexistent/file.png"})
    with pytest.raises(SandboxError, match="bad environment entry"):
        pool.session(env={"A=B": "x"})
    with pytest.raises(TypeError):
        pool.session().run(b"x = 1")
    with pytest.raises(ValueError, match="cell_timeout_s"):
        SandboxPool(SandboxConfig(cell_timeout_s=0))
    with pytest.raises(ValueError, match="unknown layer"):
        SandboxPool(SandboxConfig(disable=("apparmor",)))


def test_sixteen_concurrent_sessions(pool):
    outcomes, errors = [], []
    barrier = threading.Barrier(16)

    def episode(index):
        try:
            barrier.wait()
            with pool.session() as session:
                session.run(f"import numpy as np\nvalue = np.arange({index} + 1).sum()")
                outcomes.append((index, session.run("print(value)").stdout))
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(outcomes) == [(i, f"{i * (i + 1) // 2}\n") for i in range(16)]


def test_worker_is_frozen_between_cells(session):
    pid = int(session.run("import os\nprint(os.getpid())").stdout)
    states = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        data = Path(f"/proc/{pid}/task/{tid}/stat").read_bytes()
        states.append(data[data.rindex(b")") + 2:][:1])
    assert states and set(states) <= {b"T", b"t"}  # (a cell cannot leave threads: test_sandbox_limits.py)


# --- isolation ------------------------------------------------------------------------------------------
def test_isolation_report_lists_the_layers(pool):
    report = pool.isolation()
    assert isinstance(report, IsolationReport)
    names = [layer.name for layer in report.layers]
    assert names == ["seccomp", "landlock_fs", "landlock_net", "landlock_scope", "network_namespace",
                     "identity", "sessions_apart", "rlimits", "memory", "disk_quota", "inputs_read_only",
                     "frozen_between_cells", "threads_end_with_cell", "network_probe", "filesystem_probe",
                     "signal_probe"]
    for name in ("seccomp", "landlock_fs", "rlimits", "memory", "threads_end_with_cell", "network_probe",
                 "filesystem_probe", "signal_probe"):
        assert report.active(name), report[name]
    assert all(layer.detail and "\n" not in layer.detail for layer in report.layers)
    assert "seccomp" in str(report) and report.markdown().startswith("| layer | active | detail |")
    with pytest.raises(KeyError, match="no layer"):
        report["selinux"]


def test_a_switched_off_layer_is_refused_with_its_opt_out():
    with pytest.raises(SandboxUnavailable) as caught:
        SandboxPool(SandboxConfig(preload=LIGHT, disable=("seccomp",)))
    message = str(caught.value)
    assert "- seccomp: switched off by SandboxConfig(disable=('seccomp',))" in message
    assert "SandboxConfig(allow_network=True)" in message and "landlock_fs" not in message.split("sandbox isolation")[0]
    with pytest.raises(SandboxUnavailable) as caught:
        SandboxPool(SandboxConfig(preload=LIGHT, disable=("landlock",)))
    message = str(caught.value)
    assert "- landlock_fs: switched off" in message and "- filesystem_probe: a worker READ a file" in message
    assert "SandboxConfig(allow_unrestricted_filesystem=True)" in message


def test_the_network_probe_catches_an_open_network():
    config = SandboxConfig(preload=LIGHT, disable=("seccomp", "landlock", "netns"), allow_unrestricted_filesystem=True)
    with pytest.raises(SandboxUnavailable, match=r"- network_probe: a worker CONNECTED to a TCP listener"):
        SandboxPool(config)


def test_opting_out_of_seccomp_keeps_the_other_layers():
    with SandboxPool(SandboxConfig(preload=LIGHT, disable=("seccomp",), allow_network=True)) as pool:
        report = pool.isolation()
        assert not report.active("seccomp") and report.active("landlock_net") and report.active("network_probe")
        with pool.session() as session:
            result = session.run("import socket\ntry:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
                                 "except OSError as err:\n    print(type(err).__name__)")
            assert result.stdout == "PermissionError\n"  # Landlock's TCP rule, not seccomp


@pytest.mark.skipif(os.geteuid() != 0, reason="uid switching needs a pool that runs as root")
def test_as_root_each_session_runs_as_a_uid_of_its_own(pool):
    with pool.session() as a, pool.session() as b:
        uids = [int(s.run("import os\nprint(os.getuid(), os.getgid(), os.getgroups())").stdout.split()[0])
                for s in (a, b)]
        assert uids[0] != uids[1] and 0 not in uids
        assert (a.directory.stat().st_uid, a.directory.stat().st_gid) == (0, uids[0])  # the pool's
        assert a.output_dir.stat().st_uid == uids[0]
        assert a.work_dir.stat().st_uid == 0 and a.work_dir.stat().st_gid == uids[0]  # the pool's, sticky
        assert a.inputs_dir.stat().st_uid == 0  # inputs stay the pool's
        assert "CapEff:\t0000000000000000" in b.run(
            "print(open('/proc/self/status').read())").stdout or "PermissionError" in b.run(
            "open('/proc/self/status')").error


def test_threads_are_limited_even_with_tiny_stacks():
    with SandboxPool(SandboxConfig(preload=LIGHT, max_tasks=32)) as pool, pool.session() as session:
        result = session.run("import threading, time\nthreading.stack_size(32 << 10)\nthreads = []\ntry:\n"
                             "    while len(threads) < 1000:\n"
                             "        t = threading.Thread(target=time.sleep, args=(60,), daemon=True)\n"
                             "        t.start()\n        threads.append(t)\n"
                             "except RuntimeError as err:\n    print(len(threads), err)")
        count, message = result.stdout.split(" ", 1)
        assert 0 < int(count) < 32 and message == "can't start new thread\n"
        assert result.restarted and f"left {count} threads running" in result.error  # they end with the cell


def test_cpu_limit_kills_with_a_clear_message():
    with SandboxPool(SandboxConfig(preload=LIGHT, cpu_s=1, cell_timeout_s=20)) as pool, pool.session() as session:
        result = session.run("import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])\n"
                             "while True:\n    pass")
        assert result.restarted and not result.timed_out
        assert re.search(r"SIGXCPU|SIGKILL", result.error) and "CPU time limit" in result.error
        assert session.run("print('fresh')").stdout == "fresh\n"


def test_a_dead_zygote_is_replaced():
    with SandboxPool(SandboxConfig(preload=LIGHT)) as pool, pool.session() as session:
        session.run("kept = 1")
        old, worker = pool._zygote.pid, session._worker.pid
        os.kill(old, signal.SIGKILL)  # its workers die with it (PR_SET_PDEATHSIG)
        wait_until_gone(worker, zombies_too=False)
        wait_until_gone(old, zombies_too=False)  # dead to the kernel; the pool's thread may not have reaped it yet
        result = session.run("print(kept)")
        assert result.restarted
        assert session.run("print('fresh')").stdout == "fresh\n" and pool._zygote.pid != old


def test_pool_close_kills_workers_and_removes_its_root():
    pool = SandboxPool(SandboxConfig(preload=LIGHT))
    session = pool.session()
    pid = int(session.run("import os\nprint(os.getpid())").stdout)
    zygote, root = pool._zygote.pid, pool.root
    pool.close()
    with pytest.raises(SandboxError, match="closed SandboxPool"):
        pool.session()
    assert session.closed and not root.exists()
    wait_until_gone(pid, zygote)


def test_seccomp_program_checks_the_architecture_first():
    program = isolation.seccomp_program("x86_64", 1234)
    assert len(program) % 8 == 0
    code, jt, jf, k = __import__("struct").unpack("<HBBI", program[:8])
    assert (code, k) == (isolation.BPF_LD_W_ABS, 4)  # load seccomp_data.arch
    assert __import__("struct").unpack("<HBBI", program[8:16])[3] == 0xC000003E
    assert len(isolation.seccomp_program("aarch64", 1234)) % 8 == 0
    with pytest.raises(OSError, match="no syscall table for riscv64"):
        isolation.seccomp_program("riscv64", 1)


@pytest.mark.parametrize("arch, header, pattern", [
    ("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h", r"#define __NR_(\w+)\s+(\d+)"),
    ("aarch64", "/usr/include/asm-generic/unistd.h", r"#define __NR(?:3264)?_(\w+)\s+(\d+)"),
])
def test_syscall_tables_match_the_kernel_headers(arch, header, pattern):
    if not os.path.exists(header):
        pytest.skip(f"{header} is not installed")
    numbers = {m.group(1): int(m.group(2)) for m in re.finditer(pattern, Path(header).read_text())}
    table = isolation.ARCHES[arch][1]
    assert {name: numbers.get(name) for name in table} == table


def test_python_read_paths_do_not_include_the_whole_checkout():
    directories, files = isolation.python_read_paths()
    repo = str(Path(__file__).resolve().parents[2])
    assert repo not in directories and os.path.dirname(repo) not in directories
    sandbox_code = os.path.join(repo, "runtime", "sandbox")
    assert any(sandbox_code == d or sandbox_code.startswith(d + os.sep) for d in directories)


def test_a_root_where_sandboxed_code_may_read_is_refused():
    import sys
    inside = Path(sys.prefix) / "tirlab-sandbox-test-root"
    try:
        with pytest.raises(SandboxError, match="which sandboxed code may read"):
            SandboxPool(SandboxConfig(preload=LIGHT), root=inside)
        assert not inside.exists() or not any(inside.iterdir())  # the pool cleans up what it made
    finally:
        if inside.exists():
            inside.rmdir()


def test_a_root_under_a_private_directory_works(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with SandboxPool(SandboxConfig(preload=LIGHT), root=private / "sandbox") as pool:
        with pool.session(inputs={"a.txt": b"hello"}) as session:
            result = session.run("import os\nprint(open(os.path.join(os.environ['INPUTS_DIR'], 'a.txt')).read())\n"
                                 "open('outputs/b.txt', 'w').write('x')")
            assert result.stdout == "hello\n", result.error
    assert sorted(p.name for p in (private / "sandbox").iterdir()) == []  # sessions and the zygote's files gone
