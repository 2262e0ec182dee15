"""Each isolation layer on its own (docs/security.md): every test here fails when exactly its layer is
removed, even with all the other layers in place (`python -m runtime.sandbox.layer_mutants` checks that by
removing each one in turn). What the parent can see for itself (namespaces, capabilities, owners) it reads
from /proc and the filesystem, not from what the worker says."""

from __future__ import annotations

import os
import stat
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from runtime.sandbox import SandboxConfig, SandboxPool, SandboxUnavailable
from runtime.sandbox import pool as pool_module

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the sandbox needs Linux")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="a pool that does not run as root has no uids nor mounts")

CONFIG = SandboxConfig(preload=("numpy",), memory_mb=512, disk_mb=16, disk_files=64, file_size_mb=8, cpu_s=60,
                       max_tasks=64, cell_timeout_s=5, kill_grace_s=0.5)


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(CONFIG) as pool:
        yield pool


@pytest.fixture(scope="module")
def not_refusing():
    """Every layer, but a pool that would run even where seccomp's own check fails (allow_network): so the
    seccomp tests below fail on their own assertions, not only because the pool refuses to start."""
    with SandboxPool(replace(CONFIG, allow_network=True)) as pool:
        yield pool


@pytest.fixture(scope="module")
def landlock_only():
    """Without seccomp and the network namespace: what is refused here, Landlock (or DAC) refuses. The pool
    would run even without Landlock, so the test fails on its own assertion, not only by a refusal."""
    config = SandboxConfig(preload=("numpy",), disable=("seccomp", "netns"), allow_network=True,
                           allow_unrestricted_filesystem=True)
    with SandboxPool(config) as pool:
        yield pool


def status_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def worker_pid(session) -> int:
    assert session.run("pass").ok
    return session._worker.pid


# --- network namespace ----------------------------------------------------------------------------------
def test_the_worker_has_an_empty_network_namespace_of_its_own(pool):
    with pool.session() as session:
        pid = worker_pid(session)
        try:
            theirs = os.stat(f"/proc/{pid}/ns/net").st_ino
            lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
            interfaces = sorted(line.split(":")[0].strip() for line in lines)
        except PermissionError:  # not root: the worker is not dumpable; take its own check
            theirs, interfaces = session._worker.checks["netns"], session._worker.checks["interfaces"]
        assert theirs != os.stat("/proc/self/ns/net").st_ino
        assert interfaces == ["lo"]
        assert pool.isolation().active("network_namespace")


# --- seccomp --------------------------------------------------------------------------------------------
def test_seccomp_refuses_a_socket_of_every_family(not_refusing):
    # Landlock and the network namespace do not stop socket() itself: only seccomp can make each one fail
    code = ("import socket\nfor family, kind in (('AF_INET', 'SOCK_STREAM'), ('AF_INET', 'SOCK_DGRAM'),\n"
            "        ('AF_INET6', 'SOCK_STREAM'), ('AF_UNIX', 'SOCK_STREAM'), ('AF_UNIX', 'SOCK_DGRAM'),\n"
            "        ('AF_NETLINK', 'SOCK_RAW'), ('AF_PACKET', 'SOCK_RAW')):\n"
            "    try:\n        socket.socket(getattr(socket, family), getattr(socket, kind)).close()\n"
            "        print(family, 'opened')\n    except OSError as err:\n        print(family, err.errno)\n"
            "try:\n    socket.socketpair()\n    print('socketpair opened')\nexcept OSError as err:\n"
            "    print('socketpair', err.errno)")
    with not_refusing.session() as session:
        lines = session.run(code).stdout.splitlines()
    assert len(lines) == 8 and all(line.endswith(" 1") for line in lines), lines  # EPERM


def test_inotify_and_xattr_writes_are_refused(not_refusing):
    code = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nopen('mine', 'w').close()\n"
            "print(libc.inotify_init1(0), ctypes.get_errno())\n"
            "print(libc.syscall(254, 0, b'.', 0x100), ctypes.get_errno())\n"  # inotify_add_watch (x86_64)
            "fd = os.open('mine', os.O_RDONLY)\n"
            "for name, action in (('setxattr', lambda: os.setxattr('mine', 'user.a', b'1')),\n"
            "        ('lsetxattr', lambda: os.setxattr('mine', 'user.a', b'1', follow_symlinks=False)),\n"
            "        ('fsetxattr', lambda: os.setxattr(fd, 'user.a', b'1')),\n"
            "        ('removexattr', lambda: os.removexattr('mine', 'user.a')),\n"
            "        ('fremovexattr', lambda: os.removexattr(fd, 'user.a'))):\n"
            "    try:\n        action()\n        print(name, 'worked')\n    except OSError as err:\n"
            "        print(name, err.errno)\n"
            "print(libc.syscall(463, -100, b'mine', 0, b'user.a', None, 0), ctypes.get_errno())\n"  # setxattrat
            "print(os.listxattr('mine'))")  # reading stays allowed
    with not_refusing.session() as session:
        lines = session.run(code).stdout.splitlines()
    assert lines[:2] == ["-1 1", "-1 1"]
    assert lines[2:7] == [f"{name} 1" for name in ("setxattr", "lsetxattr", "fsetxattr", "removexattr",
                                                   "fremovexattr")]
    if os.uname().machine == "x86_64":
        assert lines[7] == "-1 1"
    assert lines[8] == "[]"


# --- Landlock -------------------------------------------------------------------------------------------
def test_landlock_alone_refuses_reads_and_writes_outside_the_work_dir(landlock_only):
    outside = Path("/tmp") / f"tirlab-layer-{uuid.uuid4().hex}"  # /tmp is 1777: DAC would let anyone write
    code = (f"import os\nfor action in (lambda: open({str(outside)!r}, 'w'), lambda: os.listdir('/'),\n"
            "        lambda: open('/etc/hostname').read(), lambda: os.mkdir('/dev/shm/x')):\n"
            "    try:\n        action()\n        print('worked')\n    except OSError as err:\n"
            "        print(type(err).__name__)\nopen('mine.txt', 'w').write('x')\nprint(open('mine.txt').read())")
    try:
        with landlock_only.session() as session:
            assert session.run(code).stdout == "PermissionError\n" * 4 + "x\n"
    finally:
        for leftover in (outside, Path("/dev/shm/x")):
            if leftover.is_dir():
                leftover.rmdir()
            elif leftover.exists():
                leftover.unlink()
    assert not outside.exists()


# --- identity -------------------------------------------------------------------------------------------
@as_root
def test_each_worker_runs_as_a_uid_of_its_own(pool):
    with pool.session() as a, pool.session() as b:
        ids = [status_of(worker_pid(s)) for s in (a, b)]
        uids = [set(i["Uid"].split()) for i in ids]
        assert all(len(u) == 1 for u in uids) and uids[0] != uids[1] and "0" not in uids[0] | uids[1]
        assert all(set(i["Gid"].split()) == u for i, u in zip(ids, uids)) and all(not i["Groups"].strip() for i in ids)


def test_the_worker_holds_no_capabilities(pool):
    with pool.session() as session:
        fields = status_of(worker_pid(session))
    names = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb") if os.geteuid() == 0 else ("CapPrm", "CapEff")
    assert {name: int(fields[name], 16) for name in names} == dict.fromkeys(names, 0)


# --- sessions apart -------------------------------------------------------------------------------------
@as_root
def test_another_sessions_dir_is_invisible(pool):
    with pool.session() as a, pool.session() as b:
        (b.work_dir / "secret.txt").write_text("b's")
        code = ("import os\nfor path in ({!r}, {!r}, {!r}, {!r}):\n    try:\n        os.stat(path)\n"
                "        print('seen')\n    except OSError as err:\n        print(type(err).__name__)\n"
                "print(os.stat({!r}).st_mode & 0o7777)").format(
            str(b.directory), str(b.work_dir / "secret.txt"), str(pool.root / "zygote"), str(pool.root / "zygote.log"),
            str(a.work_dir))
        assert a.run(code).stdout == "FileNotFoundError\n" * 4 + f"{0o1770}\n"


@as_root
def test_the_session_dir_is_not_the_workers(pool):
    with pool.session() as session:
        info = session.directory.stat()
        uid = int(status_of(worker_pid(session))["Uid"].split()[0])
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, uid, 0o710)
        code = (f"import os\ntry:\n    os.chmod({str(session.directory)!r}, 0o777)\n    print('worked')\n"
                "except OSError as err:\n    print(type(err).__name__)")
        assert session.run(code).stdout == "PermissionError\n"


# --- rlimits and freezing -------------------------------------------------------------------------------
def test_rlimits_are_set_as_configured(pool):
    code = ("import resource as r\nprint(r.getrlimit(r.RLIMIT_CPU), r.getrlimit(r.RLIMIT_FSIZE), "
            "r.getrlimit(r.RLIMIT_NOFILE), r.getrlimit(r.RLIMIT_CORE))\nprint(r.getrlimit(r.RLIMIT_AS)[0] > 0, "
            "r.getrlimit(r.RLIMIT_NPROC))")
    with pool.session() as session:
        first, second = session.run(code).stdout.splitlines()
    assert first == "(60, 60) (8388608, 8388608) (256, 256) (0, 0)"
    if os.geteuid() == 0:
        assert second == "True (64, 64)"


def test_the_worker_is_stopped_between_cells(pool):
    with pool.session() as session:
        pid = worker_pid(session)
        states = {Path(f"/proc/{pid}/task/{tid}/stat").read_bytes().rsplit(b")", 1)[1][1:2]
                  for tid in os.listdir(f"/proc/{pid}/task")}
        assert states and states <= {b"T", b"t"}


# --- the report comes from what the worker checked ------------------------------------------------------
def test_the_report_comes_from_the_workers_checks_not_the_zygotes_word(monkeypatch):
    class LyingZygote(pool_module._Zygote):  # says it made a network namespace, but was told not to
        def __init__(self, root, config):
            super().__init__(root, config)
            self.hello["netns"] = [True, "empty network namespace (unshare CLONE_NEWNET)"]

    monkeypatch.setattr(pool_module, "_Zygote", LyingZygote)
    with SandboxPool(SandboxConfig(preload=("numpy",), disable=("netns",))) as pool:
        layer = pool.isolation()["network_namespace"]
        assert not layer.active and "the pool's own network namespace" in layer.detail


def test_a_layer_a_worker_claims_but_its_check_refutes_is_not_active():
    plan = {"uid": 1, "own_uid": False, "netns": 7, "session_dir": "s", "cpu_s": 1, "file_size": 1,
            "open_files": 16, "tasks": 1, "address_space": 1, "netns_because": "empty"}
    claimed = {name: [True, "applied"] for name in ("seccomp", "landlock_fs", "identity", "rlimits")}
    checks = {"syscalls": {"socket(AF_INET)": 0, "socket(AF_UNIX)": 1}, "landlock": {"list /": 0},
              "netns": 7, "interfaces": ["lo"], "capabilities": {"CapEff": 1 << 21}, "ids": [[1, 1, 1], [], []],
              "rlimits": [[1, 2]] * 16}
    layers = pool_module._judge_layers(claimed, checks, plan)
    assert {name: active for name, (active, _) in layers.items()} == {
        "seccomp": False, "landlock_fs": False, "identity": False, "rlimits": False, "network_namespace": False,
        "sessions_apart": False}
    assert "socket(AF_INET) (it worked)" in layers["seccomp"][1]


@as_root
def test_a_worker_without_a_layer_the_probe_had_is_refused(pool, monkeypatch):
    assert "sessions_apart" in pool._expected and pool.isolation().active("sessions_apart")
    plan = pool._plan
    monkeypatch.setattr(pool, "_plan", lambda session: {**plan(session), "session_dir": "another-session"})
    with pytest.raises(SandboxUnavailable, match="came up without sessions_apart"):
        pool.session()


def test_every_layer_mutant_still_matches_the_source():
    # python -m runtime.sandbox.layer_mutants removes each layer by a text patch; a refactor must not turn
    # one into a no-op (a patch that matches nothing would "survive" for the wrong reason, or be skipped)
    from runtime.sandbox.layer_mutants import mismatched
    assert mismatched() == []
