"""The hostile-code suite: programs that try to break out of the sandbox, each with a check that FAILS
if the attack worked, verified from the parent's side where possible (the sentinel file outside the
work dir is unchanged, the listeners got nothing, the zygote is the same live process, the inputs and
their aliases are intact, no SysV IPC object appeared, the work dir is within its quota). After every
program a new session must run `print(1+1)` and get 2: the pool recovers.

The last programs aim at the evaluation process instead: images crafted to cost their decoder, garbage on
the worker's channel, spying on another session, extended attributes outside the quota. Their checks
measure what the parent spends (CPU, wall clock, resident memory) and fail past the parent-side budgets
in docs/security.md.

    python -m runtime.sandbox.hostile              # run it: one line per attack, then the isolation report
    python -m runtime.sandbox.hostile --markdown   # the table in docs/security.md (deterministic, no timings)

The suite re-executes itself once with a secret in its environment, so reading the parent's
/proc/<pid>/environ would really find one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import stat
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Callable

from runtime.sandbox import image_bombs, isolation
from runtime.sandbox.pool import CellResult, ImageRefused, SandboxConfig, SandboxPool, SandboxSession, _usage

SECRET_ENV = "TIRLAB_HOSTILE_SECRET"
# What the evaluation spends on a session's outputs, at most. The pixel cap is tools.images.DEFAULT_MAX_PIXELS
# (not imported: importing tools pulls in torch, 1.5 s and hundreds of MB in this process); the images a code tool
# shows the model may hold EPISODE_IMAGE_BYTES of pixels per episode (runtime.toolbox's default budget).
MAX_PIXELS = image_bombs.CAP_SIDE ** 2
EPISODE_IMAGE_BYTES = 256 << 20
DECODE_LIMIT_S = 2.0  # one image, parent CPU and the decode call's wall clock (decode_timeout_s, 2 s by default)
# more wall clock for an image whose worker overran: ended at the deadline, its successor started for the next
# image (slack for a loaded machine)
DECODE_KILL_S = 1.5
CPU_FLOOR_S = 0.05  # a cell's parent CPU may exceed twice an idle cell's by this much (scheduler noise)
ROOT = Path(__file__).resolve().parents[2]
PNG_8x8 = bytes.fromhex(  # an 8x8 black RGB PNG
    "89504e470d0a1a0a0000000d49484452000000080000000808020000004b6d29dc0000000c4944415478da6360181e000000c8"
    "000193bda58e0000000049454e44ae426082")

HELPER = '''
import ctypes as _ctypes, errno as _errno
def attempt(label, action):
    try:
        value = action()
    except BaseException as err:
        detail = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        kind = f"{type(err).__name__}: {detail}" if detail else type(err).__name__
        print(f"{label}: blocked ({kind})")
    else:
        print(f"{label}: NOT BLOCKED ({str(value)[:60]!r})")
def attempt_rc(label, action):
    value = action()
    code = _ctypes.get_errno()
    print(f"{label}: returned {value}" + (f" ({_errno.errorcode.get(code, code)})" if value == -1 else ""))
'''


class Breach(Exception):
    """The attack worked (or the sandbox misbehaved)."""


@dataclass(frozen=True)
class Attack:
    name: str
    tries: str  # what the code tries, for the table
    code: str  # a string.Template over Suite.values()
    check: Callable  # (suite, session, result) -> outcome text; raises Breach if the attack worked
    timeout_s: float | None = None
    setup: str | None = None  # run first, in the same session
    arches: tuple[str, ...] = ()  # only on these architectures (empty: all)
    prepare: Callable | None = None  # (suite, session): what the parent does before the code runs


@dataclass(frozen=True)
class Outcome:
    name: str
    tries: str
    outcome: str
    contained: bool
    seconds: float
    measured: dict = field(default_factory=dict)  # the parent's costs, where the check measures them


class Suite:
    """The parent's side of the attacks: a sentinel outside any session, listeners, a second session."""

    def __init__(self, pool: SandboxPool, scratch: Path):
        self.pool, self.scratch = pool, scratch
        self.sentinel = scratch / "sentinel.txt"
        self.sentinel_text = f"sentinel-{os.urandom(8).hex()}"
        self.sentinel.write_text(self.sentinel_text)
        self.sentinel.chmod(0o600)
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.tcp.setblocking(False)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)
        self.unix_name = f"tirlab-hostile-{os.urandom(4).hex()}"
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.unix_name)
        self.unix.listen(4)
        self.unix.setblocking(False)
        self.secret = os.environ.get(SECRET_ENV, "")
        self.zygote_pid = pool._zygote.pid
        self.other: SandboxSession | None = None
        self.other_pid = 0
        self.other_secret = f"other-session-secret-{os.urandom(8).hex()}"
        self.sysv = _sysv_objects()
        self.cell_cpu = self.cell_wall = 0.0  # the parent's CPU and wall clock during the attack's run()
        self.measured: dict = {}  # what the current attack's check measured, for its Outcome
        self._idle: tuple[float, float] | None = None

    def values(self, session: SandboxSession) -> dict:
        table = isolation.syscall_table() or {}
        other = self.other
        return {
            "port": self.tcp.getsockname()[1], "udp_port": self.udp.getsockname()[1], "unix_name": self.unix_name,
            "sentinel": str(self.sentinel), "scratch": str(self.scratch), "root": str(self.pool.root),
            "repo": str(ROOT), "parent_pid": os.getpid(), "zygote_pid": self.zygote_pid,
            "other_work": str(other.work_dir) if other else "", "other_pid": self.other_pid,
            "other_secret": str(other.work_dir / "secret.txt") if other else "", "work": str(session.work_dir),
            "secret_name": SECRET_ENV, "disk_mb": self.pool.config.disk_mb,
            "disk_files": self.pool.config.disk_files, **{f"nr_{name}": nr for name, nr in table.items()},
        }

    def open_other(self) -> None:
        """A second session, with a secret file in its work dir and a variable to check afterwards."""
        self.other = self.pool.session()
        (self.other.work_dir / "secret.txt").write_text(self.other_secret)
        result = self.other.run("import os\nkept = 7\nprint(os.getpid())")
        self.other_pid = int(result.stdout)

    def idle(self) -> tuple[float, float]:
        """(parent CPU, wall clock) of a cell that only sleeps 1 s, measured once per suite run: the baseline
        for the channel attacks (the parent's cost of waiting for a cell)."""
        if self._idle is None:
            with self.pool.session() as session:
                cpu, wall = _cpu_s(), time.perf_counter()
                session.run("import time\ntime.sleep(1.0)")
                self._idle = (_cpu_s() - cpu, time.perf_counter() - wall)
        return self._idle

    def invariants(self) -> None:
        """What no attack may change, checked after every one of them."""
        if not self.sentinel.exists() or self.sentinel.read_text() != self.sentinel_text:
            raise Breach("the sentinel file outside the work dir was changed")
        if sorted(p.name for p in self.scratch.iterdir()) != ["sentinel.txt"]:
            raise Breach(f"files appeared beside the sentinel: {sorted(p.name for p in self.scratch.iterdir())}")
        for name, listener in (("TCP", self.tcp), ("unix", self.unix)):
            try:
                connection, _ = listener.accept()
                connection.close()
                raise Breach(f"the {name} listener got a connection")
            except BlockingIOError:
                pass
        try:
            self.udp.recvfrom(64)
            raise Breach("the UDP listener got a datagram")
        except BlockingIOError:
            pass
        if not self.pool._zygote.alive() or self.pool._zygote.pid != self.zygote_pid:
            raise Breach("the zygote died or was replaced")
        if _sysv_objects() != self.sysv:  # they would outlive the worker, shared by every session
            raise Breach("a SysV shared memory segment, message queue or semaphore set appeared")

    def close(self) -> None:
        for s in (self.tcp, self.udp, self.unix):
            s.close()
        if self.other:
            self.other.close()


def _cpu_s() -> float:
    """This process's CPU time so far, user and system, all threads (in ns steps; os.times counts 10 ms ticks)."""
    return time.process_time()


def _rss() -> int:
    """This process's resident memory now, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _sysv_objects() -> list[str]:
    """The machine's SysV IPC objects (/proc/sysvipc), one line each."""
    lines = []
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                lines += [f"{kind} {line.strip()}" for line in f.readlines()[1:]]
        except OSError:
            pass
    return lines


# --- checks ---------------------------------------------------------------------------------------------
def _lines(result: CellResult) -> list[str]:
    return [line for line in result.stdout.splitlines() if ": blocked (" in line or ": NOT BLOCKED" in line
            or ": returned " in line]


def _blocked(result: CellResult, allowed: tuple[str, ...] = ()) -> str:
    """'all N blocked (kinds)'; Breach if an attempt not in `allowed` got through."""
    lines = _lines(result)
    if not lines:
        raise Breach(f"the attack did not report its attempts: {result.error or result.stdout[:300]!r}")
    through = [line for line in lines if "NOT BLOCKED" in line and not line.startswith(allowed)]
    if through:
        raise Breach("; ".join(through))
    blocked = [line for line in lines if ": blocked (" in line]
    kinds = list(dict.fromkeys(line.split(": blocked (", 1)[1].rstrip(")") for line in blocked))
    return f"{len(blocked)} of {len(lines)} blocked ({'; '.join(kinds)})"


def _not_in_output(result: CellResult, *secrets: str) -> None:
    text = result.stdout + result.stderr + (result.error or "")
    for secret in secrets:
        if secret and secret in text:
            raise Breach("the code's output contains a secret it should not have read")


def _needs(result: CellResult, **expected) -> None:
    for name, value in expected.items():
        if getattr(result, name) != value:
            raise Breach(f"expected {name}={value}, got {getattr(result, name)} ({(result.error or '')[-200:]!r})")


def check_network(suite, session, result):
    return _blocked(result) + "; no listener got anything"


def check_write_outside(suite, session, result):
    outcome = _blocked(result)
    if Path("/tmp/tirlab-hostile-pwned").exists():
        raise Breach("/tmp/tirlab-hostile-pwned was written")
    if sorted(p.name for p in session.directory.iterdir()) != ["inputs", "work"]:
        raise Breach(f"the session dir changed: {sorted(p.name for p in session.directory.iterdir())}")
    return outcome + "; sentinel unchanged"


def check_read_other(suite, session, result):
    _not_in_output(result, suite.other_secret)
    return _blocked(result)


def check_read_host(suite, session, result):
    _not_in_output(result, suite.sentinel_text, "root:x:0:0", "[project]")
    return _blocked(result)


def check_environment(suite, session, result):
    if not suite.secret:
        raise Breach(f"run through `python -m runtime.sandbox.hostile` so that {SECRET_ENV} is set")
    _not_in_output(result, suite.secret)
    if "secret in os.environ: False" not in result.stdout:
        raise Breach("the parent's secret is in the code's os.environ")
    return _blocked(result) + "; os.environ has only the session's variables"


def check_fork(suite, session, result):
    outcome = _blocked(result)
    pid = int(result.stdout.split("pid ", 1)[1].split()[0])
    children = [p for p in os.listdir("/proc") if p.isdigit() and _ppid(p) == pid]
    if children:
        raise Breach(f"the worker has child processes: {children}")
    return outcome + "; no child process exists"


def _ppid(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data[data.rindex(b")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def check_exec(suite, session, result):
    made = sorted(p.name for p in session.work_dir.iterdir() if p.name.startswith("pwned"))
    if made:
        raise Breach(f"a command ran: {made}")
    system = next((line.split("'")[1] for line in _lines(result) if line.startswith("os.system: NOT")), None)
    outcome = _blocked(result, allowed=("os.system",))
    if system is not None:
        outcome += f"; os.system returns exit code {system} (its shell never starts)"
    return outcome + "; no command ran"


def check_ctypes(suite, session, result):
    lines = _lines(result)
    expect = {"libc fork()": "returned -1 (EPERM)", "raw socket()": "returned -1 (EPERM)",
              "raw execve()": "returned -1 (EPERM)"}
    for label, text in expect.items():
        if f"{label}: {text}" not in lines:
            raise Breach(f"{label} did not fail: {lines}")
    if any(p.name.startswith("pwned") for p in session.work_dir.iterdir()):
        raise Breach("libc system() ran a command")
    return "fork(), socket() and execve() return -1 (EPERM); system() cannot start a shell; no command ran"


def check_kill(suite, session, result):
    return _blocked(result) + "; the pool process and the zygote live on"


def check_kill_other(suite, session, result):
    outcome = _blocked(result)
    after = suite.other.run("print(kept)")
    if after.stdout != "7\n" or after.restarted:
        raise Breach(f"the other session lost its worker: {after}")
    return outcome + "; the other session keeps its variables"


def check_soft_timeout(suite, session, result):
    _needs(result, timed_out=True, restarted=False)
    after = session.run("print(kept + 1)")
    if after.stdout != "42\n":
        raise Breach(f"variables were lost: {after}")
    return "TimeoutError raised in the code after 1 s; the session and its variables survive"


def check_hard_timeout(suite, session, result):
    _needs(result, timed_out=True, restarted=True)
    after = session.run("print(kept)")
    if "NameError" not in (after.error or "") or after.restarted:
        raise Breach(f"the next cell did not get a fresh process: {after}")
    return "killed at 1 s + 1 s grace (restarted=True); the next cell runs in a fresh process"


def check_memory(suite, session, result):
    outcome = _blocked(result)
    if "MemoryError" not in outcome:
        raise Breach(f"no MemoryError: {outcome}")
    config = suite.pool.config
    return (f"MemoryError at the {config.memory_mb - config.disk_mb} MB address-space limit (memory_mb less the "
            "files' disk_mb); the process survives")


def check_output(suite, session, result):
    cap = suite.pool.config.max_output_chars
    for name in ("stdout", "stderr"):
        text = getattr(result, name)
        if len(text) > cap + 64 or "characters dropped]" not in text:
            raise Breach(f"{name} was not capped: {len(text)} characters")
    return (f"stdout and stderr cut to {cap} characters each, with a '[... N characters dropped]' note; "
            "fd writes go to /dev/null")


def check_file_size(suite, session, result):
    outcome = _blocked(result)
    size = (session.work_dir / "big.bin").lstat().st_size
    if size > suite.pool.config.file_size_mb << 20:
        raise Breach(f"a {size}-byte file was written")
    return outcome + f"; the file stops at {suite.pool.config.file_size_mb} MB"


def check_threads(suite, session, result):
    outcome = _blocked(result)
    started = int(result.stdout.split("started ", 1)[1].split()[0])
    limit = suite.pool.config.max_tasks
    if not 10 < started < limit:
        raise Breach(f"{started} threads started (the limit is {limit} tasks)")
    _threads_ended(session, result)
    return (outcome + f" below the {limit}-task limit of its uid (RLIMIT_NPROC); the threads end with the cell "
            "(its process is ended), the next cell gets a fresh one")


def _threads_ended(session, result) -> None:
    """The cell left threads running, so run() ended its process and said why; the next cell is fresh."""
    _needs(result, restarted=True)
    if "thread" not in (result.error or "") or "running, so its Python process was ended" not in result.error:
        raise Breach(f"no word of the threads it left: {result.error!r}")
    after = session.run("print('next')")
    if after.stdout != "next\n" or not after.ok:
        raise Breach(f"the next cell did not run cleanly in a fresh process: {after}")


def check_thread_outlives_cell(suite, session, result):
    _threads_ended(session, result)
    pid = int(result.stdout.split("pid ", 1)[1].split()[0])
    late = session.work_dir / "late.txt"
    size = late.stat().st_size
    time.sleep(0.3)  # the threads append to late.txt every 10 ms while they live
    if late.stat().st_size != size:
        raise Breach("late.txt grew after the cell")
    if Path(f"/proc/{pid}").exists():
        raise Breach("the cell's process still exists")
    threads = result.error.split("the cell left ", 1)[1].split(" thread", 1)[0]
    return (f"run() ends the cell's process when the cell ends, with an error saying it left {threads} threads "
            "running (restarted=True): late.txt stops growing, the next cell prints only its own output, the old "
            "process is gone")


def check_aliases(suite, session, result):
    path = session.inputs_dir / "input.png"
    if not path.is_file() or path.read_bytes() != PNG_8x8:
        raise Breach("the input file was changed or removed")
    if not suite.pool._as_root:  # no uid of its own: the work dir's entries are the worker's to remove
        outcome = _blocked(result, allowed=("symlink alias", "copy alias"))
        return outcome + "; the input is intact, but a pool not running as root cannot protect the aliases"
    outcome = _blocked(result)
    link, copy = session.work_dir / "image_0.png", session.work_dir / "copy_0.png"
    if not link.is_symlink() or os.readlink(link) != str(path) or link.lstat().st_uid != 0:
        raise Breach("the symlink alias was removed or replaced")
    if copy.is_symlink() or copy.read_bytes() != PNG_8x8 or copy.stat().st_uid != 0 or copy.stat().st_mode & 0o222:
        raise Breach("the copy alias was changed, removed or replaced")
    return outcome + "; the input, the symlink and the copy are intact"


def prepare_aliases(suite, session):
    """Aliases of the input in the work dir, as runtime.toolbox makes for VisualToolBench (a symlink) and a
    copy, both the pool's."""
    (session.work_dir / "image_0.png").symlink_to(session.inputs_dir / "input.png")
    shutil.copyfile(session.inputs_dir / "input.png", session.work_dir / "copy_0.png")
    (session.work_dir / "copy_0.png").chmod(0o444)


def _work_dir_usage(session) -> tuple[int, int]:
    """(bytes, files and directories) in the session's work dir, as the parent measures them."""
    if session._mounted:
        fs = os.statvfs(session.work_dir)
        return (fs.f_blocks - fs.f_bfree) * fs.f_frsize, fs.f_files - fs.f_ffree - 1
    return _usage(session.work_dir, 1 << 30)


def check_disk_quota(suite, session, result):
    config = suite.pool.config
    used, files = _work_dir_usage(session)
    if "DiskQuotaError: the session's disk quota is used up" not in (result.error or ""):
        raise Breach(f"the cell did not end with the quota's error: {result.error!r}")
    if not session._mounted:  # counted after the cell: it went over, and says so
        return (f"no tmpfs: the cell wrote {used / 2**20:.0f} MB, past the {config.disk_mb} MB quota, and ends with "
                "a DiskQuotaError saying by how much")
    if used > config.disk_mb << 20 or files > config.disk_files:
        raise Breach(f"the work dir holds {used} bytes in {files} entries")
    return (_blocked(result) + f" at {config.disk_mb} MB and {config.disk_files} files and directories (a tmpfs); the "
            "cell ends with a DiskQuotaError saying which quota it used up and how much it holds")


def check_mmap_files(suite, session, result):
    config = suite.pool.config
    used, _ = _work_dir_usage(session)
    if not session._mounted:
        if "DiskQuotaError" not in (result.error or ""):
            raise Breach(f"the cell did not end with the quota's error: {result.error!r}")
        return f"no tmpfs: the maps filled {used / 2**20:.0f} MB of files, and the cell ends with a DiskQuotaError"
    _needs(result, restarted=True)
    if "SIGBUS" not in (result.error or "") or "DiskQuotaError" not in result.error:
        raise Breach(f"expected a SIGBUS and the quota's error: {result.error!r}")
    if used > config.disk_mb << 20:
        raise Breach(f"the work dir holds {used} bytes")
    return (f"killed by SIGBUS at the first page past the {config.disk_mb} MB quota (restarted=True), with the "
            "DiskQuotaError; the maps count in the address space too; the next cell gets a fresh process")


def check_memory_outside(suite, session, result):
    lines = _lines(result)
    through = [line for line in lines if "NOT BLOCKED" in line or (": returned " in line and "returned -1" not in line)]
    if not lines or through:
        raise Breach("; ".join(through) or f"the attack did not report: {result.error or result.stdout[:300]!r}")
    kinds = list(dict.fromkeys(line.split(": blocked (", 1)[1].rstrip(")") if ": blocked (" in line
                               else line.split(" (", 1)[1].rstrip(")") for line in lines))
    return (f"{len(lines)} of {len(lines)} fail ({'; '.join(kinds)}); no SysV IPC object exists afterwards; what "
            f"is left is its address space and its files, {suite.pool.config.memory_mb} MB in all")


def check_limits(suite, session, result):
    limits = [line.split(": ", 1)[1].split() for line in result.stdout.splitlines() if line.startswith("limit ")]
    if len(limits) != 16 or any(fields[1] != fields[3] for fields in limits):
        raise Breach(f"a soft limit differs from its hard one: {limits}")
    afters = [line for line in result.stdout.splitlines() if line.startswith("changed ")]
    if afters:
        raise Breach("; ".join(afters))
    outcome = _blocked(result, allowed=("no gain:",))
    above = sum(1 for line in _lines(result) if line.startswith("above the hard limit"))
    return (f"soft = hard for all 16 limits, so raising a soft one to its hard gains nothing; raising the hard one "
            f"fails for all {above} finite ones" + outcome.split(" blocked", 1)[1])


def check_inputs(suite, session, result):
    path = session.inputs_dir / "input.png"
    if not path.is_file() or path.read_bytes() != PNG_8x8:
        raise Breach("the input file was changed or removed")
    outcome = _blocked(result, allowed=("chmod",))
    if "chmod: NOT BLOCKED" in result.stdout:  # a pool not running as root: the worker owns nothing there either
        return outcome + "; chmod works (Landlock does not cover metadata) but the file stays read-only and intact"
    return outcome + "; the input is intact"


def check_symlinks(suite, session, result):
    if result.images:
        raise Breach(f"collected {result.images}")
    _not_in_output(result, suite.sentinel_text)
    hard_link = _blocked(result, allowed=("symlink", "replace outputs")).split(" blocked ", 1)[1]
    return ("the symlinks (and outputs swapped for one) are made but never followed: no image is collected; "
            f"the hard link is refused {hard_link}")


def check_swap(suite, session, result):
    if [p.name for p in result.images] != ["z.png"]:
        raise Breach(f"expected z.png to be collected, got {result.images}")
    time.sleep(0.5)  # the code's thread swaps z.png for a symlink 0.2 s after the cell, if it still lives
    for _ in range(50):
        if not stat.S_ISREG(result.images[0].lstat().st_mode):
            raise Breach("the collected image became a symlink after the cell")
    if not stat.S_ISREG((session.output_dir / "z.png").lstat().st_mode):
        raise Breach("outputs/z.png was swapped after the cell")
    _threads_ended(session, result)
    return ("the collected image stays a regular file: the process was frozen (SIGSTOP) when the cell ended, then "
            "ended for the thread it left (restarted=True), before the images were collected")


def check_timer_wake(suite, session, result):
    if [p.name for p in result.images] != ["z.png"]:
        raise Breach(f"expected z.png to be collected, got {result.images}")
    blocked = _ctypes_all_failed(result)
    time.sleep(0.6)  # a SIGCONT timer would wake the frozen process 0.3 s after the cell and swap z.png
    data = result.images[0].read_bytes()
    if not data.startswith(b"\x89PNG") or suite.sentinel_text.encode() in data:
        raise Breach("the collected image changed after the cell")
    _threads_ended(session, result)
    return (f"{blocked}; the thread it left ends with its process when the cell ends, and the caller reads the "
            "sandbox's own copy of z.png anyway")


def check_deep_frame(suite, session, result):
    _channel_crash(result)
    return "run() returns: the frame counts as a crash, the process is killed, the next cell gets a fresh one"


def check_deep_dirs(suite, session, result):
    if not result.ok:
        raise Breach(f"the setup failed: {result.error}")
    directory = session.directory
    session.close()
    if directory.exists():
        raise Breach("closing the session left its directory")
    return "closing the session deletes all of it (an iterative delete: no recursion limit to hit)"


def check_forge(suite, session, result):
    _channel_crash(result)
    return "the oversized frame counts as a crash: the process is killed, the next cell gets a fresh one"


def _channel_crash(result: CellResult) -> None:
    """The worker was killed for what it sent on its channel, and run() said so."""
    _needs(result, restarted=True)
    if "garbage on its channel" not in (result.error or ""):
        raise Breach(f"unexpected error: {result.error}")


def check_sigsys(suite, session, result):
    _needs(result, restarted=True)
    if "SIGSYS" not in (result.error or ""):
        raise Breach(f"not killed by seccomp: {result.error}")
    return "killed by SIGSYS (the filter accepts only the native ABI); the next cell gets a fresh process"


# --- outputs that would hurt the parent -------------------------------------------------------------------
def _place(**files: Callable[[], bytes]) -> Callable:
    """A `prepare` that puts crafted files (name -> maker) in the work dir, for the code to copy into outputs."""
    def prepare(suite, session):
        for name, make in files.items():
            path = session.work_dir / name
            path.write_bytes(make())
            path.chmod(0o444)
    return prepare


# An image that decodes if its worker finishes within decode_timeout_s and is refused at the deadline otherwise:
# which one depends on the machine (an RGBA image at the cap takes a few seconds here)
DEADLINE = "longer than"


def _image_check(expected: dict[str, str | tuple | None], summary: str | None = None) -> Callable:
    """A check that decodes every collected image as the toolbox does (session.decode, within what a 256 MB
    per-episode budget has left) and requires: each one decoded or refused as `expected` (None: decoded; text:
    refused with ImageRefused saying that; DEADLINE: either; a tuple: any of these), no image costing the parent
    more than DECODE_LIMIT_S of CPU or of wall clock (DECODE_KILL_S more for one the worker overran), the
    parent's memory growing by no more than the episode's budget, and the session running a cell afterwards.
    `summary` stands for the list of outcomes in the table where they depend on the machine's speed."""
    def check(suite, session, result):
        if list(result.image_names) != list(expected):
            raise Breach(f"collected {list(result.image_names)}, not {list(expected)}: {result.error!r}")
        left, held, notes = EPISODE_IMAGE_BYTES, [], []
        base = _rss()
        slowest = cpu_most = growth = 0.0
        for copy, name in zip(result.images, result.image_names):
            cpu, wall = _cpu_s(), time.perf_counter()
            try:
                pixels = session.decode(copy, max_pixels=MAX_PIXELS, max_bytes=left)
                reason = None
            except ImageRefused as err:
                reason = str(err)
            except Exception as err:  # noqa: BLE001 - anything else reaches the caller: a failure of its own
                raise Breach(f"{name}: decode raised {type(err).__name__}: {err}") from None
            wall, cpu = time.perf_counter() - wall, _cpu_s() - cpu
            slowest, cpu_most = max(slowest, wall), max(cpu_most, cpu)
            if cpu > DECODE_LIMIT_S or wall > DECODE_LIMIT_S + (DECODE_KILL_S if reason else 0):
                raise Breach(f"{name} cost the parent {wall:.2f} s ({cpu:.2f} s CPU)")
            if reason is None:
                if (pixels.dtype != "uint8" or pixels.ndim not in (2, 3) or pixels.nbytes > left
                        or pixels.shape[0] * pixels.shape[1] > MAX_PIXELS):
                    raise Breach(f"{name}: decode returned {pixels.dtype} {pixels.shape} with {left} bytes left")
                left -= pixels.nbytes
                held.append(pixels)  # the episode keeps what the model is shown
                shape = "x".join(str(n) for n in pixels.shape)
                notes.append(f"{name} decoded ({shape}, {pixels.nbytes / 2**20:.0f} MB)")
            else:
                wants = [w for w in _allowed(expected[name]) if w is not None]
                if not any(want in reason for want in wants):
                    raise Breach(f"{name} was refused ({reason!r}), expected " + (
                        f"a refusal naming one of {wants}" if wants else "it decoded"))
                notes.append(f"{name} refused ({reason.rstrip('.')})")
            if reason is None and None not in _allowed(expected[name]) and expected[name] != DEADLINE:
                raise Breach(f"{name} was decoded; expected a refusal naming {expected[name]!r}")
            if expected[name] == DEADLINE:  # the same words either way, for a table that does not depend on speed
                suite.measured[name] = notes[-1]
                notes[-1] = (f"{name} decoded if the worker finishes within decode_timeout_s, refused at it "
                             "otherwise (the worker is ended)")
            growth = max(growth, (_rss() - base) / 2**20)
            if growth > EPISODE_IMAGE_BYTES >> 20:
                raise Breach(f"the parent's memory grew by {growth:.0f} MB, past the episode's "
                             f"{EPISODE_IMAGE_BYTES >> 20} MB of images")
        del held
        after = session.run("print(1+1)")
        if after.stdout != "2\n":
            raise Breach(f"the session did not run a cell after its images were decoded: {after}")
        suite.measured.update(slowest_image_s=round(slowest, 3), most_image_cpu_s=round(cpu_most, 3),
                              memory_growth_mb=round(growth, 1))
        outcomes = _merge(notes)
        if summary is not None:
            suite.measured["outcomes"] = outcomes
            outcomes = [summary]
        return ("decoded in the sandbox: " + "; ".join(outcomes) + f"; no image cost the parent over "
                f"{DECODE_LIMIT_S:g} s, its memory grew by less than the episode's {EPISODE_IMAGE_BYTES >> 20} MB; "
                "the session runs on")
    return check


def _allowed(want) -> tuple:
    return want if isinstance(want, tuple) else (want,)


def _merge(notes: list[str]) -> list[str]:
    """'a.png refused (x)', 'b.png refused (x)' -> 'a.png and b.png refused (x)', keeping order."""
    merged: dict[str, list[str]] = {}
    for note in notes:
        name, what = note.split(" ", 1)
        merged.setdefault(what, []).append(name)
    out = []
    for what, names in merged.items():
        who = names[0] if len(names) == 1 else f"{names[0]} to {names[-1]} ({len(names)} images)"
        out.append(f"{who} {what}")
    return out


def check_channel(suite, session, result):
    """The worker was ended for what it sent, run() said so, and the parent spent no more CPU on the cell
    than on an idle one of the same length (twice as much, and CPU_FLOOR_S)."""
    _channel_crash(result)
    idle_cpu, idle_wall = suite.idle()
    allowed = 2 * idle_cpu * suite.cell_wall / idle_wall + CPU_FLOOR_S
    suite.measured.update(parent_cpu_s=round(suite.cell_cpu, 4), cell_wall_s=round(suite.cell_wall, 3),
                          idle_cpu_s=round(idle_cpu, 4), idle_wall_s=round(idle_wall, 3),
                          allowed_cpu_s=round(allowed, 4))
    if suite.cell_cpu > allowed:
        raise Breach(f"the cell cost the parent {suite.cell_cpu:.3f} s of CPU in {suite.cell_wall:.2f} s; an idle "
                     f"cell costs {idle_cpu:.3f} s in {idle_wall:.2f} s")
    return ("the worker is ended and the cell says it sent garbage on its channel (restarted=True); the parent's "
            "CPU for the cell stays within twice an idle cell's")


def check_channel_bad_frames(second: str) -> Callable:
    """check_channel, then the same for a second cell in the same session (`second`: code after CHANNEL)."""
    def check(suite, session, result):
        outcome = check_channel(suite, session, result)
        cpu, wall = _cpu_s(), time.perf_counter()
        again = session.run(HELPER + CHANNEL + second)
        suite.cell_cpu, suite.cell_wall = _cpu_s() - cpu, time.perf_counter() - wall
        first = dict(suite.measured)
        try:
            check_channel(suite, session, again)
        except Breach as breach:
            raise Breach(f"the second cell: {breach}") from None
        suite.measured = {"first": first, "second": dict(suite.measured)}
        return "both: " + outcome
    return check


def check_sessions_apart(suite, session, result):
    _not_in_output(result, suite.other_secret, "secret.txt")
    lines = _lines(result)
    through = [line for line in lines if "NOT BLOCKED" in line or (": returned " in line and "returned -1" not in line)]
    if not lines or through:
        raise Breach("; ".join(through) or f"the attack did not report: {result.error or result.stdout[:300]!r}")
    caps = [line for line in result.stdout.splitlines() if line.startswith("capabilities ")]
    if caps != ["capabilities effective 0x0 permitted 0x0 inheritable 0x0 ambient 0x0"]:
        raise Breach(f"the worker holds capabilities: {caps or result.error}")
    seen = [line.split()[2:] for line in result.stdout.splitlines() if line.startswith("root seen ")]
    real = os.stat(suite.pool.root)
    if seen and seen[0] == [str(real.st_dev), str(real.st_ino)]:
        raise Breach("the code sees the pool root itself (its link count and times tell of other sessions)")
    kinds = list(dict.fromkeys(line.split(": blocked (", 1)[1].rstrip(")") if ": blocked (" in line
                               else line.split(" (", 1)[1].rstrip(")") for line in lines))
    return (f"{len(lines)} of {len(lines)} fail ({'; '.join(kinds)}); no capability (capget: effective, permitted, "
            "inheritable and ambient all empty); the pool root it sees is not the pool's, and holds only its own "
            "session")


def prepare_xattrs(suite, session):
    """What the parent compares after the cell: the pool root's filesystem, where it is one of its own."""
    root = suite.pool.root
    suite.measured["root_is_mount"] = os.stat(root).st_dev != os.stat(root.parent).st_dev
    fs = os.statvfs(root)
    suite.measured["root_free"] = [fs.f_bfree, fs.f_ffree]


def check_xattrs(suite, session, result):
    outcome = _blocked(result)
    targets = [session.directory, session.work_dir, session.work_dir / "victim.txt", session.output_dir,
               session.inputs_dir, session.inputs_dir / "input.png"]
    for path in targets:
        if path.exists() and os.listxattr(path, follow_symlinks=False):
            raise Breach(f"{path} has extended attributes: {os.listxattr(path, follow_symlinks=False)[:5]}")
    if suite.measured.pop("root_is_mount"):  # a shared filesystem changes under other users' files
        fs = os.statvfs(suite.pool.root)
        if [fs.f_bfree, fs.f_ffree] != suite.measured["root_free"]:
            raise Breach(f"the pool root's filesystem changed: {suite.measured['root_free']} -> "
                         f"{[fs.f_bfree, fs.f_ffree]} free blocks and inodes")
    suite.measured.pop("root_free")
    return outcome + ("; no extended attribute is set on the session dir, the work dir, its files, outputs or "
                      "the inputs (listxattr from the parent)")


CHANNEL = '''
import os, stat, struct, sys, threading, time
def _channel():
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
        except OSError:
            pass
def _request_id():  # the id of the request this cell answers: the worker's loop holds it
    frame = sys._getframe()
    while frame is not None:
        request = frame.f_locals.get("request")
        if isinstance(request, dict) and isinstance(request.get("id"), int):
            return request["id"]
        frame = frame.f_back
    return 1
chan, rid = _channel(), _request_id()
def frame(frame_id, body):
    return struct.pack(">II", len(body), frame_id & 0xFFFFFFFF) + body
def containers(size):  # JSON of small containers: the costliest kind to parse, and to collect garbage after
    return b"[" + b"[]," * (size // 3) + b"[]]"
'''



def _bomb(name: str, tries: str, file: str, refusal: str, make: Callable) -> Attack:
    """An attack that saves one crafted file, made by the parent, which decoding must refuse naming `refusal`."""
    return Attack(name, tries, f"import shutil\nshutil.copyfile({file!r}, 'outputs/{file}')\n",
                  _image_check({file: refusal}), prepare=_place(**{file: make}))

ATTACKS = (
    Attack("tcp_connect", "connect to a TCP listener the suite opened on 127.0.0.1, and to 1.1.1.1:443", '''
import socket
attempt("127.0.0.1", lambda: socket.create_connection(("127.0.0.1", $port), timeout=2))
attempt("1.1.1.1:443", lambda: socket.create_connection(("1.1.1.1", 443), timeout=2))
''', check_network),
    Attack("udp_dns", "send a UDP datagram to the suite's listener; resolve a host name (DNS)", '''
import socket
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    return s.sendto(b"x", ("127.0.0.1", $udp_port))
attempt("udp", udp)
attempt("dns", lambda: socket.getaddrinfo("example.com", 80))
''', check_network),
    Attack("unix_socket", "connect to an abstract unix socket the suite listens on; socketpair()", '''
import socket
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    return s.connect("\\0$unix_name")
attempt("abstract unix", unix)
attempt("socketpair", socket.socketpair)
''', check_network),
    Attack("write_outside", "overwrite a sentinel file outside the work dir; write beside it, in /tmp, in the "
           "session dir; rename the work dir", '''
import os
attempt("overwrite the sentinel", lambda: open("$sentinel", "w").write("pwned"))
attempt("new file beside it", lambda: open("$scratch/new.txt", "w").write("pwned"))
attempt("/tmp", lambda: open("/tmp/tirlab-hostile-pwned", "w").write("pwned"))
attempt("the session dir", lambda: open("../pwned", "w").write("pwned"))
attempt("rename the work dir", lambda: os.rename("$work", "$work-moved"))
''', check_write_outside),
    Attack("read_other_session", "read a secret planted in another session's work dir; list the sandbox root", '''
import os
attempt("the other session's secret", lambda: open("$other_secret").read())
attempt("list the other session", lambda: os.listdir("$other_work"))
attempt("list the sandbox root", lambda: os.listdir("$root"))
''', check_read_other),
    Attack("read_host_files", "read /etc/shadow, /etc/passwd, the repository's pyproject.toml, /root, the sentinel", '''
import os
attempt("/etc/shadow", lambda: open("/etc/shadow").read())
attempt("/etc/passwd", lambda: open("/etc/passwd").read())
attempt("pyproject.toml", lambda: open("$repo/pyproject.toml").read())
attempt("/root", lambda: os.listdir("/root"))
attempt("the sentinel", lambda: open("$sentinel").read())
''', check_read_host),
    Attack("parent_environment", "find the parent's secret env var: os.environ, /proc/<pool>/environ, "
           "/proc/<zygote>/environ, /proc/1/environ", '''
import os
print("secret in os.environ:", "$secret_name" in os.environ)
attempt("/proc/<pool>/environ", lambda: open("/proc/$parent_pid/environ", "rb").read())
attempt("/proc/<zygote>/environ", lambda: open("/proc/$zygote_pid/environ", "rb").read())
attempt("/proc/1/environ", lambda: open("/proc/1/environ", "rb").read())
attempt("/proc/self/environ", lambda: open("/proc/self/environ", "rb").read())
''', check_environment),
    Attack("fork_bomb", "os.fork() in a loop (each child would fork forever), multiprocessing, posix_spawn", '''
import os, multiprocessing
print("pid", os.getpid())
def bomb():
    for _ in range(64):
        if os.fork() == 0:
            while True:
                os.fork()
attempt("fork loop", bomb)
attempt("multiprocessing", lambda: multiprocessing.Process(target=print).start())
attempt("posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))
''', check_fork),
    Attack("subprocess_shell", "subprocess.run, os.system, os.popen, os.execv (each would touch a file)", '''
import os, subprocess
attempt("subprocess.run", lambda: subprocess.run(["/usr/bin/touch", "pwned-subprocess"]))
attempt("os.system", lambda: os.waitstatus_to_exitcode(os.system("touch pwned-system")))
attempt("os.popen", lambda: os.popen("touch pwned-popen").read())
attempt("os.execv", lambda: os.execv("/bin/sh", ["sh", "-c", "touch pwned-exec"]))
''', check_exec),
    Attack("ctypes_libc", "call libc system() and fork() through ctypes; raw syscall() of socket and execve", '''
libc = _ctypes.CDLL(None, use_errno=True)
attempt_rc("libc system()", lambda: libc.system(b"touch pwned-libc"))
def fork():
    pid = libc.fork()
    if pid == 0:
        libc._exit(0)
    return pid
attempt_rc("libc fork()", fork)
attempt_rc("raw socket()", lambda: libc.syscall($nr_socket, 2, 1, 0))
attempt_rc("raw execve()", lambda: libc.syscall($nr_execve, b"/bin/sh", None, None))
''', check_ctypes),
    Attack("kill_parent", "SIGKILL the pool process, the zygote and its process group; kill(-1) (every "
           "process; signal 0, the permission check alone); pidfd_open the pool process", '''
import os, signal
attempt("kill the pool process", lambda: os.kill($parent_pid, signal.SIGKILL))
attempt("kill the zygote", lambda: os.kill($zygote_pid, signal.SIGKILL))
attempt("killpg the zygote", lambda: os.killpg($zygote_pid, signal.SIGKILL))
attempt("kill -1", lambda: os.kill(-1, 0))
attempt("pidfd_open", lambda: os.pidfd_open($parent_pid))
''', check_kill),
    Attack("kill_other_session", "SIGKILL and SIGSTOP another session's worker", '''
import os, signal
attempt("SIGKILL", lambda: os.kill($other_pid, signal.SIGKILL))
attempt("SIGSTOP", lambda: os.kill($other_pid, signal.SIGSTOP))
''', check_kill_other),
    Attack("ptrace_memory", "PTRACE_ATTACH the zygote; process_vm_readv the pool process; open /proc/<zygote>/mem "
           "and /proc/self/mem", '''
libc = _ctypes.CDLL(None, use_errno=True)
def check(value):
    if value == -1:
        raise OSError(_ctypes.get_errno(), __import__("os").strerror(_ctypes.get_errno()))
    return value
attempt("ptrace attach", lambda: check(libc.ptrace(16, $zygote_pid, None, None)))
attempt("process_vm_readv", lambda: check(libc.syscall($nr_process_vm_readv, $parent_pid, None, 0, None, 0, 0)))
attempt("/proc/<zygote>/mem", lambda: open("/proc/$zygote_pid/mem", "rb"))
attempt("/proc/self/mem", lambda: open("/proc/self/mem", "r+b"))
''', check_kill),
    Attack("infinite_loop", "while True: pass", "while True:\n    pass\n", check_soft_timeout, 1.0, "kept = 41"),
    Attack("sleep_forever", "time.sleep forever, swallowing every exception (the soft TimeoutError too)", '''
import time
while True:
    try:
        time.sleep(3600)
    except BaseException:
        pass
''', check_hard_timeout, 1.0, "kept = 41"),
    Attack("block_alarm", "block SIGALRM (the soft timeout) and spin", '''
import signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
while True:
    pass
''', check_hard_timeout, 1.0, "kept = 41"),
    Attack("stop_self", "SIGSTOP itself", "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n",
           check_hard_timeout, 1.0, "kept = 41"),
    Attack("memory_bomb", "allocate 100 GB at once, then grow a list by 100 MB blocks", '''
blocks = []
def grow():
    while True:
        blocks.append(b"x" * (100 << 20))
attempt("100 GB at once", lambda: bytearray(100 << 30))
attempt("100 MB blocks", grow)
del blocks
''', check_memory),
    Attack("memory_outside", "hold memory outside the address-space limit: memfd_create, SysV shared memory, "
           "message queues and semaphores, a POSIX message queue, /dev/shm, a pipe grown to 1 MiB, a 3 GB shared map",
           '''
import fcntl, mmap, os
libc = _ctypes.CDLL(None, use_errno=True)
attempt("memfd_create", lambda: os.memfd_create("hold"))
attempt_rc("SysV shmget(1 GB)", lambda: libc.syscall($nr_shmget, 0, 1 << 30, 0o1600))
attempt_rc("SysV msgget", lambda: libc.syscall($nr_msgget, 0, 0o1600))
attempt_rc("SysV semget", lambda: libc.syscall($nr_semget, 0, 1, 0o1600))
attempt_rc("POSIX mq_open", lambda: libc.syscall($nr_mq_open, b"hold", 0o102, 0o600, None))
attempt("/dev/shm", lambda: open("/dev/shm/hold", "wb").write(bytes(1 << 20)))
attempt("F_SETPIPE_SZ 1 MiB", lambda: fcntl.fcntl(os.pipe()[1], 1031, 1 << 20))
attempt("3 GB shared map", lambda: mmap.mmap(-1, 3 << 30))
''', check_memory_outside),
    Attack("huge_output", "print 50 M characters to stdout and stderr, 1000 more lines, 10 MB to fd 1", '''
import os, sys
print("x" * 50_000_000)
sys.stderr.write("y" * 50_000_000)
for _ in range(1000):
    print("z" * 1000)
os.write(1, b"w" * 10_000_000)
''', check_output),
    Attack("file_size_bomb", "write a 1 GB file in the work dir; extend a file to 1 TB", '''
import os
def big():
    with open("big.bin", "wb") as f:
        for _ in range(1024):
            f.write(bytes(1 << 20))
attempt("1 GB file", big)
open("sparse.bin", "wb").close()
attempt("truncate to 1 TB", lambda: os.truncate("sparse.bin", 1 << 40))
''', check_file_size),
    Attack("disk_quota", "fill the disk past the session's quota: empty files until the inodes run out, files deleted "
           "while still open, O_TMPFILE files, then 60 MB files (each under the file-size limit)", '''
import glob, os
def empty_files():
    for n in range(2 * $disk_files):  # bounded: without a kernel quota the loop ends (NOT BLOCKED)
        open(f"empty-{n}", "w").close()
def hidden(deleted):  # no name to find them by: deleted while open, or never named (O_TMPFILE)
    held = []
    for n in range(2 * $disk_mb // 60 + 1):
        if deleted:
            held.append(open(f"hidden-{n}", "wb"))
            os.remove(f"hidden-{n}")
        else:
            held.append(os.fdopen(os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600), "wb"))
        held[-1].write(bytes(60 << 20))
def big_files():
    for n in range(2 * $disk_mb // 60 + 1):
        with open(f"big-{n}", "wb") as f:
            f.write(bytes(60 << 20))
attempt("empty files", empty_files)
for path in glob.glob("empty-*"):
    os.remove(path)
attempt("files deleted while open", lambda: hidden(True))
attempt("O_TMPFILE files", lambda: hidden(False))
attempt("60 MB files", big_files)
''', check_disk_quota),
    Attack("mmap_files", "map 60 MB files of the work dir into memory and fill them through the maps, past the disk "
           "quota", '''
import mmap, os
maps = []
for n in range($disk_mb // 60 + 2):
    with open(f"mapped-{n}", "w+b") as f:
        f.truncate(60 << 20)
        maps.append(mmap.mmap(f.fileno(), 60 << 20))
    maps[-1][:] = bytes(60 << 20)
''', check_mmap_files),
    Attack("thread_bomb", "start sleeping threads with 32 KiB stacks until it fails (under the address-space "
           "limit alone that would be ~60,000 threads, more than this machine's pid_max)", '''
import threading, time
threading.stack_size(32 << 10)
threads = []
def bomb():
    while True:
        t = threading.Thread(target=time.sleep, args=(3600,), daemon=True)
        t.start()
        threads.append(t)
attempt("threads", bomb)
print("started", len(threads))
''', check_threads),
    Attack("thread_outlives_cell", "start two threads (threading and _thread) that print and append to a file every "
           "10 ms, and end the cell", '''
import _thread, os, threading, time
def busy(tag):
    while True:
        print(tag, "still running")  # would land in a later cell's output
        with open("late.txt", "a") as f:
            f.write(tag)
        time.sleep(0.01)
threading.Thread(target=busy, args=("thread",), daemon=True).start()
_thread.start_new_thread(busy, ("raw",))
time.sleep(0.05)
print("pid", os.getpid())
''', check_thread_outlives_cell),
    Attack("raise_limits", "raise each of its 16 rlimits: the soft one up to the hard one, and the hard one", '''
import resource
names = {getattr(resource, name): name for name in dir(resource) if name.startswith("RLIMIT_")}
for which in range(16):
    name = names.get(which, "RLIMIT_LOCKS")
    soft, hard = before = resource.getrlimit(which)
    print(f"limit {name}: soft {soft} hard {hard}")
    attempt(f"no gain: {name} soft up to hard", lambda: resource.setrlimit(which, (hard, hard)))
    if hard != resource.RLIM_INFINITY:
        attempt(f"above the hard limit: {name}", lambda: resource.setrlimit(which, (hard + 1, hard + 1)))
    if resource.getrlimit(which) != before:
        print(f"changed {name}: {before} -> {resource.getrlimit(which)}")
''', check_limits),
    Attack("delete_inputs", "delete, overwrite, truncate, chmod and rename the input image; rmtree the inputs dir", '''
import os, shutil
path = os.path.join(os.environ["INPUTS_DIR"], "input.png")
attempt("remove", lambda: os.remove(path))
attempt("overwrite", lambda: open(path, "wb").write(b"pwned"))
attempt("truncate", lambda: os.truncate(path, 0))
attempt("chmod", lambda: os.chmod(path, 0o666))
attempt("overwrite after chmod", lambda: open(path, "wb").write(b"pwned"))
attempt("rename", lambda: os.rename(path, "stolen.png"))
attempt("rmtree", lambda: shutil.rmtree(os.environ["INPUTS_DIR"]))
''', check_inputs),
    Attack("alias_inputs", "through its path and through two aliases the pool put in the work dir (a symlink, as for "
           "VisualToolBench, and a copy): overwrite, truncate, remove, rename, replace with its own file, chmod, "
           "hard-link then truncate the link", '''
import os
open("mine.png", "wb").write(b"pwned")
names = {"input path": os.path.join(os.environ["INPUTS_DIR"], "input.png"), "symlink alias": "image_0.png",
         "copy alias": "copy_0.png"}
for label, name in names.items():
    attempt(f"{label}: overwrite", lambda: open(name, "wb").write(b"pwned"))
    attempt(f"{label}: truncate", lambda: os.truncate(name, 0))
    attempt(f"{label}: remove", lambda: os.remove(name))
    attempt(f"{label}: rename", lambda: os.rename(name, "moved.png"))
    attempt(f"{label}: replace", lambda: os.replace("mine.png", name))
    attempt(f"{label}: chmod", lambda: os.chmod(name, 0o666))
    attempt(f"{label}: hard link", lambda: (os.link(name, "hard.png"), os.truncate("hard.png", 0)))
''', check_aliases, prepare=prepare_aliases),
    Attack("symlink_outputs", "plant outputs/x.png -> /etc/shadow and -> the sentinel; hard-link the sentinel "
           "into outputs; replace outputs with a symlink to /etc", '''
import os
attempt("symlink to /etc/shadow", lambda: os.symlink("/etc/shadow", "outputs/shadow.png"))
attempt("symlink to the sentinel", lambda: os.symlink("$sentinel", "outputs/sentinel.png"))
attempt("hard link the sentinel", lambda: os.link("$sentinel", "outputs/hard.png"))
attempt("replace outputs", lambda: (os.rename("outputs", "outputs-old"), os.symlink("/etc", "outputs")))
''', check_symlinks),
    Attack("swap_after_cell", "save outputs/z.png, and leave a thread that swaps it for a symlink to the sentinel "
           "0.2 s after the cell ends", '''
import os, threading, time
from PIL import Image
Image.new("RGB", (8, 8)).save("outputs/z.png")
def swap():
    time.sleep(0.2)
    os.symlink("$sentinel", "outputs/z.tmp")
    os.replace("outputs/z.tmp", "outputs/z.png")
threading.Thread(target=swap, daemon=True).start()
''', check_swap),
    Attack("forge_frames", "write a forged result and an oversized frame on its channel to the parent", '''
import json, os, stat, struct
fds = []
for fd in range(3, 256):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            fds.append(fd)
    except OSError:
        pass
forged = json.dumps({"id": 999, "ok": True, "stdout": "forged", "stderr": "", "error": None,
                     "timed_out": False}).encode()
for fd in fds:
    os.write(fd, struct.pack(">I", len(forged)) + forged)
    os.write(fd, struct.pack(">I", 1 << 31) + b"garbage")
''', check_forge),
    Attack("timer_wake", "arm a POSIX timer (and an F_SETSIG I/O signal) to send SIGCONT after the cell, waking the "
           "frozen process to swap a collected image for a symlink", '''
import fcntl, os, threading, time
from PIL import Image
libc = _ctypes.CDLL(None, use_errno=True)
Image.new("RGB", (8, 8)).save("outputs/z.png")
event = (_ctypes.c_int * 16)(0, 18, 0)  # sigevent: SIGEV_SIGNAL, SIGCONT
timer = _ctypes.c_int()
attempt_rc("timer_create(SIGCONT)", lambda: libc.syscall($nr_timer_create, 1, event, _ctypes.byref(timer)))
r, w = os.pipe()
attempt("fcntl(F_SETSIG, SIGCONT)", lambda: fcntl.fcntl(r, 10, 18))
def swap():
    time.sleep(0.3)
    os.symlink("$sentinel", "outputs/z.tmp")
    os.replace("outputs/z.tmp", "outputs/z.png")
threading.Thread(target=swap, daemon=True).start()
''', check_timer_wake),
    Attack("deep_frame", "send the parent a frame of JSON nested 100,000 deep (under the size cap)", '''
import os, stat, struct
body = b'{"id": 1, "x": ' + b"[" * 100000 + b"]" * 100000 + b"}"
for fd in range(3, 256):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.write(fd, struct.pack(">I", len(body)) + body)
    except OSError:
        pass
''', check_deep_frame),
    Attack("deep_dirs", "nest 1,500 directories in the work dir, so that a recursive delete at close fails", '''
import os
fd = os.open(".", os.O_RDONLY)
for _ in range(1500):
    os.mkdir("d", dir_fd=fd)
    deeper = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = deeper
''', check_deep_dirs),
    Attack("outlive_parent", "clear its parent-death signal and become dumpable, to outlive a killed evaluation", '''
libc = _ctypes.CDLL(None, use_errno=True)
attempt_rc("prctl(PR_SET_PDEATHSIG, 0)", lambda: libc.prctl(1, 0, 0, 0, 0))
attempt_rc("prctl(PR_SET_DUMPABLE, 1)", lambda: libc.prctl(4, 1, 0, 0, 0))
attempt_rc("prctl(PR_SET_CHILD_SUBREAPER, 1)", lambda: libc.prctl(36, 1, 0, 0, 0))
''', lambda suite, session, result: _ctypes_all_failed(result)),
    Attack("namespaces_mounts", "unshare a user namespace, mount a tmpfs, chroot, make a block device node for "
           "the disk", '''
import os, stat
libc = _ctypes.CDLL(None, use_errno=True)
attempt_rc("unshare(CLONE_NEWUSER)", lambda: libc.unshare(0x10000000))
os.mkdir("mnt")
attempt_rc("mount", lambda: libc.mount(b"none", b"mnt", b"tmpfs", 0, None))
attempt_rc("chroot", lambda: libc.chroot(b"."))
attempt("mknod", lambda: os.mknod("disk", 0o600 | stat.S_IFBLK, os.makedev(8, 0)))
''', lambda suite, session, result: _ctypes_all_failed(result)),
    Attack("kernel_interfaces", "bpf(), io_uring_setup(), perf_event_open(), keyctl(), userfaultfd()", '''
libc = _ctypes.CDLL(None, use_errno=True)
buf = _ctypes.create_string_buffer(256)
attempt_rc("bpf", lambda: libc.syscall($nr_bpf, 0, buf, 128))
attempt_rc("io_uring_setup", lambda: libc.syscall($nr_io_uring_setup, 1, buf))
attempt_rc("perf_event_open", lambda: libc.syscall($nr_perf_event_open, buf, 0, -1, -1, 0))
attempt_rc("keyctl", lambda: libc.syscall($nr_keyctl, 0, 0, 0, 0, 0))
attempt_rc("userfaultfd", lambda: libc.syscall($nr_userfaultfd, 0))
''', lambda suite, session, result: _ctypes_all_failed(result)),
    Attack("legacy_abi", "make a 32-bit syscall (int 0x80) from machine code mapped executable", '''
import mmap
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(bytes.fromhex("b814000000cd80c3"))  # mov eax, 20 (getpid); int 0x80; ret
function = _ctypes.CFUNCTYPE(_ctypes.c_int)(_ctypes.addressof(_ctypes.c_char.from_buffer(page)))
print("returned", function())
''', check_sigsys, arches=("x86_64",)),
    Attack("image_png_rgba", "save an all-zero RGBA PNG at the pixel cap (8192x8192, 255 KB; decoded in the parent "
           "it took 12 s of CPU and 3.5 GB) and one a row over the cap", '''
import shutil
shutil.copyfile("rgba.png", "outputs/a-rgba.png")
shutil.copyfile("over.png", "outputs/b-over.png")
''', _image_check({"a-rgba.png": DEADLINE, "b-over.png": "pixels"}),
           prepare=_place(**{"rgba.png": image_bombs.png_at_cap,
                             "over.png": lambda: image_bombs.png_at_cap(image_bombs.CAP_SIDE,
                                                                        image_bombs.CAP_SIDE + 1, 1)})),
    _bomb("image_png_chunks", "save an 8x8 PNG behind 2,000,000 empty private ancillary chunks (24 MB; Pillow "
          "checks and keeps every one: 6 s of CPU in the parent)", "chunks.png", "ancillary chunks",
          lambda: image_bombs.png_chunks(2_000_000)),
    _bomb("image_tiff_strips", "save a 1-pixel-wide TIFF whose strip table lists 2,000,000 strips (16 MB; 12 s of "
          "CPU and 1 GB in the parent)", "strips.tif", "strips", lambda: image_bombs.tiff_strips(2_000_000)),
    _bomb("image_jpeg_scans", "save an 8192x8192 progressive JPEG of 5,000 empty scans (49 KB; over 20 s of CPU "
          "in the parent)", "scans.jpg", "scans", lambda: image_bombs.jpeg_scans(5000)),
    Attack("image_nine_at_cap", "save nine all-zero RGB PNGs at the pixel cap in one cell (191 KB each; 192 MB of "
           "pixels each, 1.7 GB for the nine)", '''
import shutil
for n in range(1, 10):
    shutil.copyfile("cap.png", f"outputs/cap-{n}.png")
''', _image_check({f"cap-{n}.png": (None, "may still hold", DEADLINE) for n in range(1, 10)},
                    "at most one of the nine decoded (192 MB; the first, unless a loaded machine makes it miss the "
                    "decode deadline), each other one refused by the episode's budget or the deadline"),
           prepare=_place(**{"cap.png": lambda: image_bombs.png_at_cap(channels=3)})),
    Attack("channel_stray_flood", "flood its channel with frames for no request of the parent's (other ids, "
           "64 KB bodies of small-container JSON, [[],[],...]): 100,000 of them, 6.4 GB", CHANNEL + '''
body = containers(64 << 10)
for n in range(100_000):
    os.write(chan, frame((rid - 1, rid + 1, 0, 0xFFFFFFFF)[n % 4], body))
''', check_channel, timeout_s=5.0),
    Attack("channel_slow_flood", "sleep 3 s while a thread sends a small frame of another id (1 KB of "
           "[[],[],...]) every 5 ms", CHANNEL + '''
def drip():
    body = containers(1 << 10)
    while True:
        os.write(chan, frame(rid + 1, body))
        time.sleep(0.005)
threading.Thread(target=drip, daemon=True).start()
time.sleep(3)
''', check_channel, timeout_s=5.0),
    Attack("channel_huge_length", "send a frame with its own request's id and a length field of 4 GiB - 1; then "
           "(a second cell) one with another id", CHANNEL + '''
os.write(chan, struct.pack(">II", 0xFFFFFFFF, rid) + b"{")
time.sleep(3)
''', check_channel_bad_frames('''
os.write(chan, struct.pack(">II", 0xFFFFFFFF, rid + 1) + b"{")
time.sleep(3)
'''), timeout_s=5.0),
    Attack("channel_garbage_body", "send a frame with its own request's id and a body that is not JSON; then (a "
           "second cell) one that is a JSON object without a result's fields", CHANNEL + '''
os.write(chan, frame(rid, bytes(range(256)) * 4))
time.sleep(3)
''', check_channel_bad_frames('''
os.write(chan, frame(rid, b'{"ok": "yes", "stdout": 7}'))
time.sleep(3)
'''), timeout_s=5.0),
    Attack("spy_other_session", "learn another session's file names, sizes or activity: inotify on the pool root and "
           "on its work dir, fanotify, stat and lstat of its dir and files, list the pool root; show a capability "
           "(capget)", '''
import os
libc = _ctypes.CDLL(None, use_errno=True)
watch = libc.syscall($nr_inotify_init1, 0)
attempt_rc("inotify_init1", lambda: watch)
attempt_rc("inotify watch the pool root", lambda: libc.syscall($nr_inotify_add_watch, watch, b"$root", 0xFFF))
attempt_rc("inotify watch its work dir", lambda: libc.syscall($nr_inotify_add_watch, watch, b"$other_work", 0xFFF))
attempt_rc("fanotify_init", lambda: libc.syscall($nr_fanotify_init, 0, 0))
other = os.path.dirname("$other_work")
attempt("stat its session dir", lambda: os.stat(other))
attempt("stat its work dir", lambda: os.stat("$other_work"))
attempt("lstat its file", lambda: os.lstat("$other_secret"))
attempt("stat its file", lambda: os.stat("$other_secret"))
attempt("list the pool root", lambda: os.listdir("$root"))
seen = os.stat("$root")
print("root seen", seen.st_dev, seen.st_ino)
header = (_ctypes.c_uint32 * 2)(0x20080522, 0)
data = (_ctypes.c_uint32 * 6)()
libc.capget(header, data)
ambient = sum(1 << n for n in range(64) if libc.prctl(47, 1, n, 0, 0) == 1)
print(f"capabilities effective {data[0] | data[3] << 32:#x} permitted {data[1] | data[4] << 32:#x} "
      f"inheritable {data[2] | data[5] << 32:#x} ambient {ambient:#x}")
''', check_sessions_apart),
    Attack("xattrs", "set user.* extended attributes (4 KB each, up to 2,000 per target) on the session dir, the work "
           "dir, a file, outputs, the inputs, through a path, a link and an fd; remove one", '''
import os
def fill(target, follow=True):
    n = 0
    while n < 2000:  # bounded: 8 MB per target if nothing refuses
        os.setxattr(target, f"user.x{n}", b"x" * 4000, follow_symlinks=follow)
        n += 1
    return n
open("victim.txt", "w").close()
os.symlink("victim.txt", "link.txt")
attempt("setxattr: the session dir", lambda: fill(".."))
attempt("setxattr: the work dir", lambda: fill("."))
attempt("setxattr: a file", lambda: fill("victim.txt"))
attempt("lsetxattr: a symlink", lambda: fill("link.txt", follow=False))
attempt("fsetxattr: an open file", lambda: fill(os.open("victim.txt", os.O_RDONLY)))
attempt("setxattr: outputs", lambda: fill("outputs"))
attempt("setxattr: the inputs", lambda: fill(os.path.join(os.environ["INPUTS_DIR"], "input.png")))
attempt("removexattr", lambda: os.removexattr("victim.txt", "user.x0"))
''', check_xattrs, prepare=prepare_xattrs),
)


def _ctypes_all_failed(result: CellResult) -> str:
    lines = _lines(result)
    if not lines:
        raise Breach(f"the attack did not report: {result.error or result.stdout[:300]!r}")
    through = [line for line in lines if ": returned " in line and "returned -1" not in line]
    through += [line for line in lines if "NOT BLOCKED" in line]
    if through:
        raise Breach("; ".join(through))
    kinds = list(dict.fromkeys(line.split(" (", 1)[1].rstrip(")") for line in lines))
    return f"{len(lines)} of {len(lines)} fail ({'; '.join(kinds)})"


# --- running it -----------------------------------------------------------------------------------------
def run_attack(suite: Suite, attack: Attack) -> Outcome:
    start = time.perf_counter()
    pool = suite.pool
    suite.measured = {}
    if "$other" in attack.code:
        suite.open_other()
    try:
        with pool.session(inputs={"input.png": PNG_8x8}) as session:
            if attack.prepare:
                attack.prepare(suite, session)
            if attack.setup:
                session.run(attack.setup)
            code = HELPER + Template(attack.code).substitute(suite.values(session))
            cpu, wall = _cpu_s(), time.perf_counter()
            result = session.run(code, attack.timeout_s)
            suite.cell_cpu, suite.cell_wall = _cpu_s() - cpu, time.perf_counter() - wall
            outcome = attack.check(suite, session, result)
        suite.invariants()
        contained = True
    except Breach as breach:
        outcome, contained = f"BREACH: {breach}", False
    finally:
        if suite.other:
            suite.other.close()
            suite.other = None
    with pool.session() as fresh:
        after = fresh.run("print(1+1)")
    if after.stdout != "2\n":
        outcome, contained = outcome + f"; the next session FAILED: {after}", False
    return Outcome(attack.name, attack.tries, outcome, contained, time.perf_counter() - start, suite.measured)


def run_suite(names: list[str] | None = None, progress: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    attacks = [a for a in ATTACKS if not a.arches or isolation.machine() in a.arches]
    if names:
        unknown = set(names) - {a.name for a in attacks}
        if unknown:
            raise SystemExit(f"unknown attack(s) {sorted(unknown)}; choose from {[a.name for a in attacks]}")
        attacks = [a for a in attacks if a.name in names]
    if not os.environ.get(SECRET_ENV):
        raise SystemExit(f"the suite needs {SECRET_ENV} in its initial environment (for the /proc/<pid>/environ "
                         "attack); run it as `python -m runtime.sandbox.hostile`, which sets it")
    Path("/tmp/tirlab-hostile-pwned").unlink(missing_ok=True)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="tirlab-hostile-") as scratch, SandboxPool(SandboxConfig()) as pool:
        suite = Suite(pool, Path(scratch))
        try:
            for attack in attacks:
                outcomes.append(run_attack(suite, attack))
                if progress:
                    progress(outcomes[-1])
        finally:
            suite.close()
        report = pool.isolation()
    run_suite.report = report
    return outcomes


def markdown(outcomes: list[Outcome]) -> str:
    rows = [f"| {o.name} | {o.tries} | {' '.join(o.outcome.split())} |" for o in outcomes]  # one line a row
    return "\n".join(["| attempt | what the code tries | outcome |", "|---|---|---|", *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime.sandbox.hostile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print only the table for docs/security.md")
    parser.add_argument("--json", metavar="PATH", help="also write the outcomes as JSON")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these attacks")
    args = parser.parse_args(argv)
    if SECRET_ENV not in os.environ:  # a secret in our own initial environment, where /proc/<pid>/environ shows it
        env = {**os.environ, SECRET_ENV: f"hostile-secret-{os.urandom(12).hex()}"}
        os.execve(sys.executable, [sys.executable, "-m", "runtime.sandbox.hostile", *sys.argv[1:]], env)

    def progress(o: Outcome):
        if not args.markdown:
            print(f"{'ok    ' if o.contained else 'BREACH'} {o.name:<20} {o.seconds:5.2f} s  {o.outcome}", flush=True)
            if o.measured:
                print(f"{'':27}measured: {json.dumps(o.measured)}", flush=True)

    outcomes = run_suite(args.only, progress)
    if args.json:
        Path(args.json).write_text(json.dumps([o.__dict__ for o in outcomes], indent=1))
    if args.markdown:
        print(markdown(outcomes))
    else:
        print(f"\n{sum(o.contained for o in outcomes)} of {len(outcomes)} contained; after each, a new session "
              f"ran print(1+1) -> 2\n\n{run_suite.report}")
    return 0 if all(o.contained for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
