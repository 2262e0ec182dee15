"""The parent side of the sandbox: SandboxPool (one zygote, many sessions), SandboxSession (one worker
process per episode, variables kept across cells) and the results and errors they return.

Everything a worker sends is untrusted: frames are JSON with a size cap, a malformed frame counts as a
crash, images are found by the parent (lstat, regular files only, never through a symlink), and the
worker is frozen (SIGSTOP) whenever no cell runs, so nothing it left running can swap a collected file
for a symlink before the caller has read it.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runtime.sandbox import isolation
from runtime.sandbox.decode import MODES
from runtime.sandbox.worker import (HEADER, REPLY_HEADER, REQUEST_LIMIT, ProtocolError, decode_body, read_exact,
                                    recv_frame, send_frame, send_raw)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")
LAYERS = ("seccomp", "landlock", "netns", "tmpfs")  # what SandboxConfig.disable may switch off
MAX_CODE_CHARS = 1_000_000
MAX_IMAGES_PER_CELL = 64
MAX_IMAGE_BYTES_PER_CELL = 256 << 20
SCAN_LIMIT = 10_000  # entries looked at under output_dir per cell (a million empty files must not stall us)
SCAN_DEPTH = 8
# As root, each session's worker runs as a uid of its own from this range (no passwd entry needed):
# far above system and subuid ranges (100000+), below 2**31.
UID_BASE = 1_500_000_000
UID_SPAN = 1 << 24
# Frames a worker sends for no request of the parent's (its code may write on the channel) are dropped unread,
# up to these per request; past them the worker counts as sending garbage and is ended, like a malformed frame
MAX_STRAY_FRAMES = 16
MAX_STRAY_BYTES = 1 << 20


class SandboxUnavailable(RuntimeError):
    """An isolation layer the configuration requires is missing here; the pool refuses to run code."""


class SandboxError(RuntimeError):
    """Misuse (a closed session or pool, bad inputs) or a failure of the sandbox itself, never of the code."""


class ImageRefused(ValueError):
    """An image of the session's that is not handed over: over a budget, malformed, or too slow to decode."""


@dataclass(frozen=True)
class SandboxConfig:
    cell_timeout_s: float = 10.0      # wall clock per cell (Thyme uses 10 s)
    memory_mb: int = 2048             # a session's memory, all of it: disk_mb for its files (a tmpfs, in RAM,
    #                                   as root), the rest address space its process may add on top of the
    #                                   preloaded interpreter (RLIMIT_AS)
    cpu_s: int = 300                  # CPU seconds per worker lifetime (RLIMIT_CPU)
    file_size_mb: int = 64            # one file (RLIMIT_FSIZE)
    disk_mb: int = 256                # everything the session's work dir holds, in total
    disk_files: int = 4096            # files, directories and links its work dir may hold
    max_open_files: int = 256
    max_tasks: int = 256              # threads a worker may run at once (RLIMIT_NPROC on a uid of its own)
    max_output_chars: int = 8192      # stdout and stderr each, per cell; the rest is dropped with a note
    allow_network: bool = False       # True = run even where network isolation is unavailable (explicit opt-out)
    allow_unrestricted_filesystem: bool = False  # True = run even without Landlock (the code can then read
    #                                   and write whatever the user running the pool can)
    kill_grace_s: float = 1.0         # after the soft TimeoutError, how long the code has before a hard kill
    max_image_mb: int = 64            # larger files under output_dir are not collected as images
    decode_timeout_s: float = 2.0     # SandboxSession.decode: the parent waits this long for one image's pixels
    start_timeout_s: float = 120.0    # zygote start (imports) and a worker's lock-down, on a loaded machine
    preload: tuple[str, ...] = ("numpy", "cv2", "PIL.Image", "tools")  # imported once in the zygote
    disable: tuple[str, ...] = ()     # layers to switch off on purpose (tests, diagnosis): "seccomp",
    #                                   "landlock", "netns" (the pool still refuses unless the opt-out is set),
    #                                   "tmpfs" (the disk quota is then counted after each cell)


@dataclass(frozen=True)
class CellResult:
    ok: bool                 # no exception, no timeout, no crash
    stdout: str              # truncated to max_output_chars with a "[... N characters dropped]" note
    stderr: str
    error: str | None        # e.g. "ZeroDivisionError: division by zero" plus the traceback lines in the user's code
    timed_out: bool
    restarted: bool          # the worker died or was killed; the NEXT run() gets a fresh worker and variables are lost
    # Images the cell created or modified under output_dir, in name order: `images` are the parent's own
    # copies (read while the worker was frozen, never through a symlink), `image_names` their paths
    # relative to output_dir, as the code wrote them.
    images: tuple[Path, ...] = ()
    duration_s: float = 0.0
    image_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Layer:
    name: str
    active: bool
    detail: str  # one line: what it does here, or why it is missing


@dataclass(frozen=True)
class IsolationReport:
    """Which isolation layers are active in this pool's workers, each with a one-line reason. Filled in
    at pool start from the zygote, a probe worker's own report of its lock-down, and probes that try
    to break out (connect to a listener, read a file outside the work dir, signal the zygote)."""

    layers: tuple[Layer, ...]
    arch: str
    kernel: str

    def __getitem__(self, name: str) -> Layer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"no layer {name!r}; layers: {', '.join(layer.name for layer in self.layers)}")

    def active(self, name: str) -> bool:
        return self[name].active

    def missing(self) -> tuple[str, ...]:
        return tuple(layer.name for layer in self.layers if not layer.active)

    def markdown(self) -> str:
        rows = [f"| {layer.name} | {'yes' if layer.active else 'NO'} | {layer.detail} |" for layer in self.layers]
        return "\n".join(["| layer | active | detail |", "|---|---|---|", *rows])

    def __str__(self) -> str:
        width = max(len(layer.name) for layer in self.layers)
        lines = [f"sandbox isolation on {self.kernel} ({self.arch}):"]
        lines += [f"  {layer.name:<{width}}  {'yes' if layer.active else 'NO '}  {layer.detail}"
                  for layer in self.layers]
        return "\n".join(lines)


# --- the zygote and the workers, seen from the parent ---------------------------------------------------
def _scrubbed_env(home: Path) -> dict[str, str]:
    """The zygote's whole environment: nothing comes from the parent's (no tokens, keys, proxies)."""
    single = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                     "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS",
                                     "OPENCV_FOR_THREADS_NUM")}
    # No background threads from libraries either (a cell that leaves a thread running ends its worker):
    # OpenCV's pool is off above; pyarrow's jemalloc (imported by pandas) would start one
    single["JE_ARROW_MALLOC_CONF"] = "background_thread:false"
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": str(home),
            "TMPDIR": str(home), "MPLBACKEND": "Agg", "CUDA_VISIBLE_DEVICES": "", **single}


_BOOT = ("import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
         "from runtime.sandbox.worker import zygote_main; zygote_main(sys.argv[2:])")


class _Zygote:
    """The fork server process. Started from a thread that lives as long as it does, because
    PR_SET_PDEATHSIG fires when the *thread* that started a process ends, not the process."""

    def __init__(self, root: Path, config: SandboxConfig):
        home = root / "zygote"
        home.mkdir(mode=0o700, exist_ok=True)
        self.log_path = root / "zygote.log"
        ours, theirs = socket.socketpair()
        sys_path = [os.path.abspath(p or os.getcwd()) for p in sys.path]
        sys_path = list(dict.fromkeys(p for p in sys_path if os.path.exists(p)))
        options = {"preload": list(config.preload), "netns": "netns" not in config.disable}
        command = [sys.executable, "-I", "-B", "-c", _BOOT, json.dumps(sys_path), str(theirs.fileno()),
                   str(os.getpid()), json.dumps(options)]
        self.proc: subprocess.Popen | None = None
        error: list[BaseException] = []
        started = threading.Event()

        def keeper():
            try:
                with open(self.log_path, "ab") as log:
                    self.proc = subprocess.Popen(command, env=_scrubbed_env(home), cwd=home, stdin=subprocess.DEVNULL,
                                                 stdout=log, stderr=log, pass_fds=[theirs.fileno()],
                                                 start_new_session=True)
            except BaseException as err:  # noqa: BLE001 - handed to the starting thread
                error.append(err)
            finally:
                started.set()
            if self.proc is not None:
                self.proc.wait()  # also reaps it

        threading.Thread(target=keeper, name="sandbox-zygote", daemon=True).start()
        started.wait()
        theirs.close()
        if error:
            ours.close()
            raise SandboxError(f"could not start the sandbox's zygote ({sys.executable}): {error[0]}")
        self.sock = ours
        self.lock = threading.Lock()
        try:
            self.hello = recv_frame(ours, REQUEST_LIMIT, time.monotonic() + config.start_timeout_s)
        except (EOFError, TimeoutError, OSError, ProtocolError) as err:
            self.kill()
            raise SandboxError(f"the sandbox's zygote did not start ({err}); its log says:\n"
                               f"{self.log_tail()}") from None
        self.pid = self.hello["pid"]

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:] or "(empty)"
        except OSError:
            return "(no log)"

    def alive(self) -> bool:
        """Asked of the kernel without reaping: while the keeper thread waits on the process, `poll()` answers
        None even after it died, until that thread gets to run."""
        if self.proc is None or self.proc.returncode is not None:
            return False
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        except ChildProcessError:  # the keeper has reaped it
            return False

    def request(self, message: dict, timeout: float) -> tuple[dict, list[int]]:
        """One request and its answer (with any fds passed along); SandboxError if the zygote is gone."""
        with self.lock:
            try:
                self.sock.settimeout(timeout)
                send_frame(self.sock, message)
                return _recv_frame_fds(self.sock, REQUEST_LIMIT, time.monotonic() + timeout)
            except (EOFError, TimeoutError, OSError, ProtocolError) as err:
                raise SandboxError(f"the sandbox's zygote stopped answering ({err}); its log says:\n"
                                   f"{self.log_tail()}") from None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.kill()  # its workers follow (PR_SET_PDEATHSIG)
            except OSError:
                pass
        if hasattr(self, "sock"):
            self.sock.close()


def _recv_frame_fds(sock: socket.socket, limit: int, deadline: float) -> tuple[dict, list[int]]:
    data, fds = b"", []
    while len(data) < HEADER.size or len(data) < HEADER.size + HEADER.unpack(data[:HEADER.size])[0]:
        if len(data) >= HEADER.size and HEADER.unpack(data[:HEADER.size])[0] > limit:
            raise ProtocolError("oversized frame")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no answer in time")
        sock.settimeout(remaining)
        chunk, ancillary, _, _ = sock.recvmsg(65536, socket.CMSG_SPACE(4 * array("i").itemsize),
                                              socket.MSG_CMSG_CLOEXEC)
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(array("i", payload[:len(payload) - len(payload) % array("i").itemsize]))
        if not chunk:
            for fd in fds:
                os.close(fd)
            raise EOFError("the zygote closed its channel")
        data += chunk
    return decode_body(data[HEADER.size:]), fds


def _reply_body(chan: socket.socket, request_id: int, limit: int, deadline: float) -> bytes:
    """The body of the worker's frame that answers `request_id`. Frames with another id are skipped unread
    (within MAX_STRAY_FRAMES and MAX_STRAY_BYTES); ProtocolError for garbage: too many of them, or an answer
    over `limit` bytes."""
    frames = stray = 0
    while True:
        size, frame_id = REPLY_HEADER.unpack(read_exact(chan, REPLY_HEADER.size, deadline))
        if frame_id == request_id:
            if size > limit:
                raise ProtocolError(f"a {size}-byte frame (the limit is {limit})")
            return read_exact(chan, size, deadline)
        frames, stray = frames + 1, stray + size
        if frames > MAX_STRAY_FRAMES or stray > MAX_STRAY_BYTES:
            raise ProtocolError(f"frames for no request of the sandbox's: more than {MAX_STRAY_FRAMES} or "
                                f"{MAX_STRAY_BYTES >> 20} MiB in one cell")
        _skip(chan, size, deadline)


def _skip(chan: socket.socket, size: int, deadline: float) -> None:
    """Read `size` bytes and drop them, 64 KiB at a time."""
    scratch = memoryview(bytearray(min(size, 1 << 16)))
    while size:
        step = min(size, len(scratch))
        _recv_into(chan, scratch[:step], deadline)
        size -= step


def _recv_into(chan: socket.socket, target: memoryview, deadline: float) -> None:
    done = 0
    while done < len(target):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no answer in time")
        chan.settimeout(remaining)
        got = chan.recv_into(target[done:])
        if not got:
            raise EOFError("the other end closed the channel")
        done += got


class _Worker:
    """One session's process: its channel, and a pidfd to signal it without racing pid reuse."""

    def __init__(self, zygote: _Zygote, pid: int, chan: socket.socket, pidfd: int | None):
        self.zygote, self.pid, self.chan, self.pidfd = zygote, pid, chan, pidfd
        self.layers: dict = {}
        self.dead = False

    def signal(self, number: int) -> None:
        if self.dead:
            return
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, number)
            else:  # kernels before 5.3: the zygote signals it, only while it has not reaped it
                self.zygote.request({"op": "signal", "pid": self.pid, "signal": int(number)}, 5.0)
        except (ProcessLookupError, SandboxError, OSError):
            pass

    def freeze(self, timeout: float = 2.0) -> bool:
        """SIGSTOP, then wait until every thread has actually stopped (a signal is delivered
        asynchronously: a thread on another core can run on for a moment). False if they did not."""
        self.signal(signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while True:
            state = _all_stopped(self.pid)
            if state is not False:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0002)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.dead = True
        for close in (self.chan.close, lambda: self.pidfd is not None and os.close(self.pidfd)):
            try:
                close()
            except OSError:
                pass
        self.pidfd = None

    def exit_status(self) -> tuple[str | None, float | None]:
        """How the process ended ('killed by SIGKILL', 'exited with code 1') and the CPU seconds it used,
        waiting up to a second for the zygote to reap it (so a restarted worker with the same uid does not
        share its task count)."""
        try:
            answer, _ = self.zygote.request({"op": "status", "pid": self.pid, "wait": 1.0}, 5.0)
        except SandboxError:
            return None, None
        return answer.get("status"), answer.get("cpu_s")


def _thread_states(pid: int) -> list[bytes] | None:
    """The state letter of each thread of `pid` (R, S, T, Z, ...): [] when it is gone, None without /proc."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    except OSError:
        return None
    states = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        states.append(data[data.rindex(b")") + 2:][:1])
    return states


def _all_stopped(pid: int) -> bool | None:
    """True when every thread of `pid` is stopped (or gone), False if one still runs, None without /proc."""
    states = _thread_states(pid)
    return None if states is None else all(state in (b"T", b"t", b"Z", b"X") for state in states)


def _extra_threads(pid: int) -> int:
    """Threads of `pid` besides its main one that have not exited; 0 without /proc (nothing to go by)."""
    states = _thread_states(pid)
    return max(0, sum(state not in (b"Z", b"X") for state in states) - 1) if states else 0


# --- image collection -----------------------------------------------------------------------------------
def _scan(directory: Path) -> dict[str, tuple]:
    """{relative path: (inode, mtime, ctime, size)} of the regular files under `directory`, walked
    through directory fds opened with O_NOFOLLOW, so no symlink (not even `directory` itself swapped
    for one) is ever followed. At most SCAN_LIMIT entries, SCAN_DEPTH levels."""
    found: dict[str, tuple] = {}
    budget = [SCAN_LIMIT]
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

    def walk(fd: int, prefix: str, depth: int):
        with os.scandir(fd) as entries:
            for entry in entries:
                budget[0] -= 1
                if budget[0] < 0:
                    return
                try:
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode):
                        found[prefix + entry.name] = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
                    elif stat.S_ISDIR(st.st_mode) and depth < SCAN_DEPTH:
                        sub = os.open(entry.name, flags, dir_fd=fd)
                        try:
                            walk(sub, f"{prefix}{entry.name}/", depth + 1)
                        finally:
                            os.close(sub)
                except OSError:
                    continue

    try:
        top = os.open(directory, flags)
    except OSError:
        return found
    try:
        walk(top, "", 0)
    finally:
        os.close(top)
    return found


def _collect(directory: Path, before: dict[str, tuple], max_bytes: int, destination: Path,
             room: tuple[int, int]) -> tuple[tuple[Path, ...], tuple[str, ...], int]:
    """Copy the images new or changed under `directory` into `destination` (the parent's own folder):
    callers read the copies, so nothing the code does after the cell can swap what they read. `room` is
    the (bytes, files) the session's copies may still take; the third value counts images left out for it."""
    after = _scan(directory)
    names = [rel for rel in sorted(after) if rel.lower().endswith(IMAGE_SUFFIXES) and after[rel][3] <= max_bytes
             and before.get(rel) != after[rel] and _plain_name(rel)][:MAX_IMAGES_PER_CELL]
    copies, kept, total, left_out = [], [], 0, 0
    for rel in names:
        data = _read_nofollow(directory, rel, max_bytes)
        if data is None:
            continue
        if total + len(data) > MAX_IMAGE_BYTES_PER_CELL:
            break
        if total + len(data) > room[0] or len(copies) >= room[1]:
            left_out += 1
            continue
        total += len(data)
        target = destination / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        copies.append(target)
        kept.append(rel)
    return tuple(copies), tuple(kept), left_out


def _usage(directory: Path, stop_at: int) -> tuple[int, int]:
    """(bytes allocated, entries) under `directory`, never through a symlink; stops once `stop_at` entries
    are counted. The worker is frozen or dead while this runs, so nothing changes under it. Iterative:
    the code may nest directories thousands deep."""
    used, entries, pending = 0, 0, [str(directory)]
    while pending and entries <= stop_at:
        try:
            with os.scandir(pending.pop()) as listing:
                for entry in listing:
                    entries += 1
                    st = entry.stat(follow_symlinks=False)
                    used += st.st_blocks * 512
                    if stat.S_ISDIR(st.st_mode):
                        pending.append(entry.path)
        except OSError:  # unreadable (the code's own chmod) or too deep a path: not counted
            continue
    return used, entries


def _plain_name(rel: str) -> bool:
    """UTF-8 encodable and free of control characters: names a caller can print, log and store."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not any(ord(c) < 32 or ord(c) == 127 for c in rel)


def _read_nofollow(directory: Path, rel: str, max_bytes: int) -> bytes | None:
    """A regular file's bytes, every path component opened with O_NOFOLLOW; None if anything differs."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fds = []
    try:
        fds.append(os.open(directory, flags | os.O_DIRECTORY))
        *parents, name = rel.split("/")
        for part in parents:
            fds.append(os.open(part, flags | os.O_DIRECTORY, dir_fd=fds[-1]))
        fds.append(os.open(name, flags | os.O_NONBLOCK, dir_fd=fds[-1]))
        st = os.fstat(fds[-1])
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        with os.fdopen(os.dup(fds[-1]), "rb") as f:
            data = f.read(max_bytes + 1)
        return data if len(data) <= max_bytes else None
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


def _clean(text):
    """Text from a worker as valid UTF-8 (a forged frame may carry lone surrogates)."""
    return text.encode("utf-8", "replace").decode("utf-8") if isinstance(text, str) else text


# --- sessions -------------------------------------------------------------------------------------------
class SandboxSession:
    """One episode's Python process. Variables persist across run() calls; after a crash or hard
    timeout the next run() transparently starts a fresh process (and re-runs the prelude)."""

    def __init__(self, pool: SandboxPool, directory: Path, env: dict[str, str], prelude: str | None,
                 enforce: bool = True):
        self.pool, self.directory, self.prelude = pool, directory, prelude
        self.inputs_dir = directory / "inputs"   # read-only to the code
        self.work_dir = directory / "work"       # cwd of the code, writable; HOME and TMPDIR point inside it
        self.output_dir = self.work_dir / "outputs"
        self._env, self._enforce = env, enforce
        self._uid: int | None = None
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._closed = False
        self._cells = 0
        self._requests = 0  # ids of the requests to the worker (cells and decodes), never reused in a session
        self._needs_prelude = False  # a worker started to decode an image has not run the prelude yet
        self._dropped: _Worker | None = None  # ended by decode() without waiting for its exit status
        self._mounted = False  # work_dir is a tmpfs of the disk quota's size (a pool running as root)
        self._copied = [0, 0]  # bytes and files of the parent's copies of its images (they have a quota too)

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, code: str, timeout_s: float | None = None) -> CellResult:
        """Run one cell. Never raises for anything the code does: exceptions, timeouts, crashes and
        hostile behaviour all come back as a CellResult. Raises SandboxError for misuse (a closed
        session), or when the sandbox itself cannot start a fresh worker (its zygote cannot restart)."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        timeout = self.pool.config.cell_timeout_s if timeout_s is None else float(timeout_s)
        if not timeout > 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        with self._lock:
            if self._closed:
                raise SandboxError("run() on a closed sandbox session; open a new one with pool.session()")
            start = time.perf_counter()
            if len(code) > MAX_CODE_CHARS:
                return CellResult(False, "", "", f"the code is {len(code):,} characters long; the sandbox runs at "
                                  f"most {MAX_CODE_CHARS:,} per cell", False, False, (), 0.0)
            if self._worker is None or self._needs_prelude:
                failure = self._start_worker()
                if failure is not None:
                    return CellResult(False, "", "", failure, False, True, (), time.perf_counter() - start)
            return self._run(code, timeout, start)

    def _run(self, code: str, timeout: float, start: float) -> CellResult:
        worker, config = self._worker, self.pool.config
        self._cells += 1
        self._requests += 1
        before = _scan(self.output_dir)
        worker.resume()
        try:
            worker.chan.settimeout(timeout + config.kill_grace_s)  # reads leave their own timeouts behind
            send_frame(worker.chan, {"op": "run", "id": self._requests, "code": code, "timeout": timeout})
            deadline = time.monotonic() + timeout + config.kill_grace_s
            limit = 12 * (3 * config.max_output_chars + 1024) + 65536  # ASCII JSON: <= 12 bytes a character
            reply = decode_body(_reply_body(worker.chan, self._requests, limit, deadline))
            fields = tuple(reply.get(name) for name in ("ok", "stdout", "stderr", "error", "timed_out"))
            if not (isinstance(fields[0], bool) and isinstance(fields[1], str) and isinstance(fields[2], str)
                    and (fields[3] is None or isinstance(fields[3], str)) and isinstance(fields[4], bool)):
                raise ProtocolError("a result with missing fields or fields of the wrong types")
        except TimeoutError:
            self._lose_worker()
            return self._result(start, False, "", "", (
                f"TimeoutError: the cell did not finish within {timeout:g} s and did not stop at the TimeoutError "
                "raised in it (it caught it, or was stuck in C code); its Python process was killed. Variables "
                "from earlier cells are lost; the next run starts a fresh process.\n"), True, True)
        except (EOFError, OSError, ProtocolError, KeyError, TypeError, ValueError, RecursionError, MemoryError) as err:
            status, cpu_s = self._lose_worker()
            return self._result(start, False, "", "", _crash_message(err, status, cpu_s, config), False, True)
        ok, stdout, stderr, error, timed_out = (_clean(field) for field in fields)
        if not worker.freeze():
            self._lose_worker()
            return self._result(start, False, stdout, stderr, (error or "") + (
                "the cell's process could not be paused after the cell (a thread stuck in the kernel?); it was "
                "killed and its images were not collected. The next run starts a fresh process.\n"), timed_out, True)
        threads = _extra_threads(worker.pid)
        if threads:  # a thread the code joined may still be on its way out of the kernel: look again, 5 ms on
            worker.resume()
            time.sleep(0.005)
            threads = _extra_threads(worker.pid) if worker.freeze() else threads
        restarted = bool(threads)
        if restarted:  # killed before its images are collected: nothing can change them any more
            self._lose_worker()
            ok, error = False, (error or "") + (
                f"the cell left {threads} thread{'s' if threads > 1 else ''} running, so its Python process was "
                "ended: a thread may not outlive its cell (it would print into, write files during and use the CPU "
                "of later cells). Join the threads a cell starts before it ends. Variables from earlier cells are "
                "lost; the next run starts a fresh process.\n")
        room = ((config.disk_mb << 20) - self._copied[0], config.disk_files - self._copied[1])
        images, names, left_out = _collect(self.output_dir, before, config.max_image_mb << 20,
                                           self.directory / "collected" / f"cell-{self._cells}", room)
        self._copied[0] += sum(path.stat().st_size for path in images)
        self._copied[1] += len(images)
        if left_out:
            which = "1 image of this cell was" if left_out == 1 else f"{left_out} images of this cell were"
            ok, error = False, (error or "") + (
                f"DiskQuotaError: {which} not collected: the sandbox's copies of a session's images may take "
                f"{config.disk_mb} MB and {config.disk_files} files in all, and this session's have reached that.\n")
        return self._result(start, ok, stdout, stderr, error, timed_out, restarted, images, names)

    def decode(self, image: Path, *, max_pixels: int, max_bytes: int, mode: str = "tirlab") -> np.ndarray:
        """One of this session's collected images (a `CellResult.images` copy) as uint8 pixels, (H, W, 3) or
        (H, W). The session's own worker decodes it (runtime.sandbox.decode: its structure checked first, then
        decoded under a timer and the worker's limits); this process only receives pixels whose shape is within
        `max_pixels` and `max_bytes`, or raises ImageRefused saying why. The decode takes at most
        decode_timeout_s, the file's sending included: a worker that has not answered by then is ended
        (variables from earlier cells are lost, as after a crash). Where the session has no worker (its last
        one was ended), one is started first; SandboxError if that fails, as run() would raise."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
        for name, value in (("max_pixels", max_pixels), ("max_bytes", max_bytes)):
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        with self._lock:
            if self._closed:
                raise SandboxError("decode() on a closed sandbox session")
            collected = self.directory / "collected"
            path = Path(image)
            if not path.is_relative_to(collected) or ".." in path.parts or path.is_symlink() or not path.is_file():
                raise SandboxError(f"{image} is not an image this session collected (see CellResult.images)")
            if self._worker is None:  # ended after its cell: a fresh one decodes, the prelude runs before the next cell
                self._worker, self._needs_prelude = self._spawn(), True
            worker, timeout = self._worker, self.pool.config.decode_timeout_s
            deadline = time.monotonic() + 0.95 * timeout  # the rest: ending a worker that overran it
            self._requests += 1
            worker.resume()
            try:
                worker.chan.settimeout(max(1e-3, deadline - time.monotonic()))  # sendall's whole duration
                # the worker's own timer answers first, so that a slow image costs it the image, not the process
                send_frame(worker.chan, {"op": "decode", "id": self._requests, "mode": mode, "max_pixels": max_pixels,
                                         "max_bytes": max_bytes, "timer_s": 0.7 * timeout, "limit_s": timeout})
                send_raw(worker.chan, None, path.read_bytes())
                reply = decode_body(_reply_body(worker.chan, self._requests, 65536, deadline))
                if not reply.get("ok"):
                    error = reply.get("error")
                    raise ImageRefused(_clean(error)[:2000] if isinstance(error, str) else "the decoder failed")
                shape = reply.get("shape")
                if not (isinstance(shape, list) and len(shape) in (2, 3) and (len(shape) == 2 or shape[2] == 3)
                        and all(type(n) is int and n > 0 for n in shape)):
                    raise ProtocolError(f"pixels of the shape {str(shape)[:100]}")
                size = int(np.prod(shape))
                if shape[0] * shape[1] > max_pixels or size > max_bytes:  # the worker checks both before it answers
                    raise ProtocolError(f"pixels of the shape {shape}, over the budget it was given")
                frame, frame_id = REPLY_HEADER.unpack(read_exact(worker.chan, REPLY_HEADER.size, deadline))
                if (frame, frame_id) != (size, self._requests):
                    raise ProtocolError("pixels that do not match their shape")
                pixels = np.empty(shape, np.uint8)
                _recv_into(worker.chan, memoryview(pixels).cast("B"), deadline)
            except ImageRefused as refused:
                if worker.freeze():  # refused with the worker's answer read whole: it goes on
                    raise
                self._drop_worker()
                raise ImageRefused(f"{refused}; the session's process could not be paused afterwards and was ended "
                                   "(variables from earlier cells are lost)") from None
            except TimeoutError:
                self._drop_worker()
                raise ImageRefused(f"decoding it took longer than {timeout:g} s; the Python process of the session "
                                   "was ended (variables from earlier cells are lost)") from None
            except (EOFError, OSError, ProtocolError, ValueError, RecursionError, MemoryError) as err:
                self._drop_worker()
                raise ImageRefused(f"the session's process failed while decoding it ({type(err).__name__}: {err}) "
                                   "and was ended (variables from earlier cells are lost)") from None
            if not worker.freeze():
                self._drop_worker()
            return pixels

    def _drop_worker(self) -> None:
        """End the worker now, within decode's deadline; the zygote's word on how it ended is awaited before the
        session's next worker starts (it shares the uid, and with it the task count)."""
        self._dropped, self._worker = self._worker, None
        self._dropped.kill()

    def _spawn(self) -> _Worker:
        if self._dropped is not None:
            dropped, self._dropped = self._dropped, None
            dropped.exit_status()
        return self.pool._spawn(self, self._enforce)

    def _result(self, start: float, ok: bool, stdout: str, stderr: str, error: str | None, timed_out: bool,
                restarted: bool, images: tuple[Path, ...] = (), names: tuple[str, ...] = ()) -> CellResult:
        """The cell's result, failed with the disk quota's error while the session's files are over it."""
        over = self._disk_quota_error()
        if over:
            ok, error = False, (error or "") + over
        return CellResult(ok, stdout, stderr, error, timed_out, restarted, images, time.perf_counter() - start, names)

    def _disk_quota_error(self) -> str | None:
        """The error text when the work dir is at its quota (a tmpfs: the kernel refuses the write that
        would pass it) or over it (no tmpfs: counted now, the worker frozen or dead), else None."""
        config = self.pool.config
        limit_bytes, limit_files = config.disk_mb << 20, config.disk_files
        if self._mounted:
            fs = os.statvfs(self.work_dir)
            used, files = (fs.f_blocks - fs.f_bfree) * fs.f_frsize, fs.f_files - fs.f_ffree - 1  # - the work dir
            full_bytes, full_files = fs.f_bfree == 0, fs.f_ffree == 0
        else:
            used, files = _usage(self.work_dir, limit_files)
            full_bytes, full_files = used > limit_bytes, files > limit_files
        if not (full_bytes or full_files):
            return None
        parts = []
        if full_bytes:
            parts.append(f"{used / 2**20:.1f} MB of its {config.disk_mb} MB" + (
                f" ({(used - limit_bytes) / 2**20:.1f} MB over)" if used > limit_bytes else ""))
        if full_files:
            parts.append(f"{files} of its {limit_files} files and directories" + (
                f" ({files - limit_files} over)" if files > limit_files else ""))
        until = ("writes fail with 'No space left on device'" if self._mounted
                 else "every cell ends with this error")
        return (f"DiskQuotaError: the session's disk quota is used up: its files take {' and '.join(parts)}; "
                f"{until} until files in its work dir are deleted.\n")

    def _lose_worker(self) -> tuple[str | None, float | None]:
        worker, self._worker = self._worker, None
        worker.kill()
        return worker.exit_status()

    def _start_worker(self) -> str | None:
        """A fresh worker (unless one started for decoding waits) and the prelude in it. Returns the prelude's
        error, if it failed."""
        if self._worker is None:
            self._worker = self._spawn()
        self._needs_prelude = False
        if self.prelude:
            result = self._run(self.prelude, self.pool.config.cell_timeout_s, time.perf_counter())
            if not result.ok:
                if self._worker is not None:
                    self._lose_worker()
                return ("the session's prelude failed, so the code was not run:\n"
                        + (result.error or "") + result.stderr)
        return None

    def close(self) -> None:
        """Kill the worker and delete the session's directory. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._worker is not None:
                self._worker.kill()
                self._worker = None
            if self._mounted:
                try:
                    isolation.unmount(str(self.work_dir))
                except OSError:
                    pass  # then only the tmpfs's files are deleted below, not its mount point
                self._mounted = False
        self.pool._forget(self)
        _rmtree(self.directory)


def _crash_message(err: Exception, status: str | None, cpu_s: float | None, config: SandboxConfig) -> str:
    if isinstance(err, ProtocolError):
        how = f"sent garbage on its channel to the sandbox ({err})"
    elif status is None:
        how = "died"
    elif ("SIGKILL" in status or "SIGXCPU" in status) and cpu_s is not None and cpu_s >= config.cpu_s - 0.1:
        how = f"was {status}: it used up its CPU time limit ({config.cpu_s} s per process)"
    elif "SIGKILL" in status:
        how = f"was {status} (the machine running out of memory, or the code itself)"
    elif status.startswith("killed by SIGSEGV"):
        how = f"was {status} (a crash in C code, e.g. a bad pointer through ctypes)"
    elif status.startswith("killed by SIGBUS"):
        how = (f"was {status} (a crash in C code, or a write through a memory map of a file in its work dir "
               "once the disk quota was used up)")
    else:
        how = f"was {status}" if status.startswith("killed") else status
    return (f"the Python process running the cell {how}. Variables from earlier cells are lost; the next run "
            "starts a fresh process.\n")


def _rmtree(path: Path) -> None:
    """Delete a session directory: without recursion (the code may nest directories thousands deep),
    never following a symlink out of it, and even where the code removed its own permissions on parts of
    it. What cannot be deleted is left, never raised: closing must go on."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        top = os.open(path, flags)
    except OSError:
        return
    stack = [(top, None, None)]  # (dir fd, parent fd, name in parent)
    while stack:
        fd, parent, name = stack[-1]
        descended = False
        try:
            os.fchmod(fd, 0o700)
            with os.scandir(fd) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append((os.open(entry.name, flags, dir_fd=fd), fd, entry.name))
                            descended = True
                            break
                        os.unlink(entry.name, dir_fd=fd)
                    except OSError:
                        continue
        except OSError:
            pass
        if descended:
            continue
        stack.pop()
        os.close(fd)
        try:
            if parent is None:
                os.rmdir(path)
            else:
                os.rmdir(name, dir_fd=parent)
        except OSError:
            pass


# --- the pool -------------------------------------------------------------------------------------------
_POOLS: set = set()  # strong references: a pool nobody closed is still closed (dirs deleted) at exit


@atexit.register
def _close_all() -> None:
    for pool in list(_POOLS):
        pool.close()


class SandboxPool:
    """Runs untrusted Python in isolated worker processes forked from one preloaded zygote.

    Thread-safe: any number of threads may open sessions and run cells concurrently. Starting the pool
    starts the zygote (a few seconds: it imports torch) and probes the isolation; it raises
    SandboxUnavailable, naming the missing layer and the opt-out, if isolation is incomplete."""

    def __init__(self, config: SandboxConfig = SandboxConfig(), root: str | Path | None = None):
        _check_config(config)
        self.config = config
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="tirlab-sandbox-")) if root is None else Path(root).resolve()
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._sessions: set[SandboxSession] = set()
        self._closed = False
        self._counter = 0
        self._zygote: _Zygote | None = None
        self._report: IsolationReport | None = None
        self._as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        self._uids: set[int] = set()
        self._expected: set[str] = set()  # layers the probe worker had: every later worker must have them too
        self._netns = os.stat("/proc/self/ns/net").st_ino if os.path.exists("/proc/self/ns/net") else None
        self._tmpfs, self._no_tmpfs_because = False, ""
        if self._as_root and self._own_root:
            os.chmod(self.root, 0o711)  # workers run as other uids: they may pass through, not list
        _POOLS.add(self)
        try:
            self._zygote = self._start_zygote()
            hello = self._zygote.hello
            _check_root(self.root, hello["read_dirs"])
            self._tmpfs, self._no_tmpfs_because = self._try_tmpfs()
            self._report = self._probe()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def isolation(self) -> IsolationReport:
        """Which layers are active, each with a one-line reason."""
        return self._report

    def session(self, inputs: dict[str, str | Path | bytes] | None = None, env: dict[str, str] | None = None,
                prelude: str | None = None) -> SandboxSession:
        """A new session. `inputs`: file name -> source path or bytes, copied into the read-only inputs
        dir. `env`: extra environment for the code (nothing is inherited from this process); the
        placeholders {inputs_dir}, {work_dir} and {output_dir} in values become the session's paths.
        `prelude`: code run at session start (and again after a restart); its failure is an error."""
        return self._open(inputs, env, prelude, enforce=True)

    def _open(self, inputs, env, prelude, enforce: bool) -> SandboxSession:
        with self._lock:
            if self._closed:
                raise SandboxError("session() on a closed SandboxPool")
            self._counter += 1
            number = self._counter
        directory = self.root / f"session-{number:05d}-{os.urandom(4).hex()}"
        directory.mkdir(mode=0o700)
        session = SandboxSession(self, directory, {}, prelude, enforce)
        try:
            _copy_inputs(inputs or {}, session.inputs_dir)
            session.work_dir.mkdir(mode=0o700)
            if self._as_root:  # a uid of its own for the session (the inputs stay the pool's, read-only)
                uid = session._uid = self._allocate_uid()
                # the pool's, not the worker's: the code cannot chmod it or hang extended attributes on it
                # (those are outside the disk quota); its group may pass through to inputs/ and work/
                os.chown(directory, 0, uid)
                os.chmod(directory, 0o710)
                # The work dir itself is the pool's, sticky and writable for the session's group: the code may
                # make and delete files of its own there, but cannot remove, rename, replace or change what the
                # pool puts there (aliases of its inputs), which it does not own
                if self._tmpfs:
                    try:
                        isolation.mount_tmpfs(str(session.work_dir), self.config.disk_mb << 20,
                                              self.config.disk_files + 1, 0, uid, 0o1770)  # + 1: the work dir
                    except OSError as err:
                        raise SandboxError(f"could not mount the session's tmpfs (its disk quota): {err}") from None
                    session._mounted = True
                else:
                    os.chown(session.work_dir, 0, uid)
                    os.chmod(session.work_dir, 0o1770)
            for path in (session.work_dir / ".tmp", session.output_dir):
                path.mkdir(mode=0o700)
                if session._uid is not None:
                    os.chown(path, session._uid, session._uid)
            session._env = self._session_env(session, env or {})
            with self._lock:
                self._sessions.add(session)
            failure = session._start_worker()
            if failure is not None:
                raise SandboxError(failure)
            return session
        except BaseException:
            session.close()
            raise

    def _session_env(self, session: SandboxSession, extra: dict[str, str]) -> dict[str, str]:
        env = _scrubbed_env(session.work_dir)
        env.update(TMPDIR=str(session.work_dir / ".tmp"), USER="sandbox", LOGNAME="sandbox",
                   INPUTS_DIR=str(session.inputs_dir),
                   WORK_DIR=str(session.work_dir), OUTPUT_DIR=str(session.output_dir), PYTHONDONTWRITEBYTECODE="1")
        for key, value in extra.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key or "=" in key or "\0" in key + value:
                raise SandboxError(f"bad environment entry {key!r}={value!r}: names and values must be strings, "
                                   "names non-empty without '=' or NUL")
            for name in ("inputs_dir", "work_dir", "output_dir"):
                value = value.replace("{" + name + "}", str(getattr(session, name)))
            env[key] = value
        return env

    def _spawn(self, session: SandboxSession, enforce: bool) -> _Worker:
        config = self.config
        require = [] if not enforce else [name for name, opted_out in (
            ("seccomp", config.allow_network), ("landlock", config.allow_unrestricted_filesystem)) if not opted_out]
        spec = {"work_dir": str(session.work_dir), "inputs_dir": str(session.inputs_dir), "env": session._env,
                "address_space_mb": config.memory_mb - config.disk_mb, "cpu_s": config.cpu_s,
                "file_size_mb": config.file_size_mb,
                "max_open_files": config.max_open_files, "max_output_chars": config.max_output_chars,
                "seccomp": "seccomp" not in config.disable, "landlock": "landlock" not in config.disable,
                "require": require, "uid": session._uid, "max_tasks": config.max_tasks,
                "pool_root": str(self.root), "session_dir": str(session.directory)}
        zygote = self._live_zygote()
        answer, fds = zygote.request({"op": "spawn", "spec": spec}, config.start_timeout_s)
        if not fds:
            raise SandboxError(f"the sandbox's zygote could not start a worker: {answer.get('error', answer)}")
        chan = socket.socket(fileno=fds[0])
        worker = _Worker(zygote, answer["pid"], chan, fds[1] if answer.get("pidfd") and len(fds) > 1 else None)
        try:
            ready = decode_body(_reply_body(chan, 0, REQUEST_LIMIT, time.monotonic() + config.start_timeout_s))
        except (EOFError, TimeoutError, OSError, ProtocolError) as err:
            worker.kill()
            status, _ = worker.exit_status()
            raise SandboxError(f"a sandbox worker did not start ({err}; {status or 'still running'})") from None
        if not ready.get("ready"):
            worker.kill()
            raise SandboxUnavailable(f"a sandbox worker refused to run code: {ready.get('error')}. "
                                     + _OPT_OUTS)
        worker.checks = ready.get("checks", {})  # what the worker found about itself after its lock-down
        worker.layers = _judge_layers(ready["layers"], worker.checks, self._plan(session))
        missing = [name for name in require if not _layer_active(worker.layers, name)]
        if enforce:
            missing += [name for name in sorted(self._expected) if not _layer_active(worker.layers, name)]
        if missing:
            worker.kill()
            raise SandboxUnavailable(f"a sandbox worker came up without {', '.join(missing)}. " + _OPT_OUTS)
        if not worker.freeze():
            worker.kill()
            raise SandboxError("a fresh sandbox worker could not be paused (SIGSTOP); not using it")
        return worker

    def _plan(self, session: SandboxSession) -> dict:
        """What a worker of `session` must find when it checks itself after its lock-down."""
        config = self.config
        return {"uid": session._uid if session._uid is not None else os.getuid(), "own_uid": session._uid is not None,
                "netns": self._netns, "session_dir": session.directory.name, "cpu_s": config.cpu_s,
                "file_size": config.file_size_mb << 20, "open_files": config.max_open_files,
                "tasks": config.max_tasks, "address_space": (config.memory_mb - config.disk_mb) << 20,
                "netns_because": self._zygote.hello["netns"][1] if self._zygote else ""}

    def _live_zygote(self) -> _Zygote:
        with self._lock:
            if self._closed:
                raise SandboxError("the SandboxPool was closed")
            if self._zygote is None or not self._zygote.alive():
                if self._zygote is not None:  # it died (killed, out of memory): its workers died with it
                    self._zygote.kill()
                self._zygote = self._start_zygote()
            return self._zygote

    def _start_zygote(self) -> _Zygote:
        zygote = _Zygote(self.root, self.config)
        hello = zygote.hello
        if hello["preload_errors"]:
            zygote.kill()
            raise SandboxError("the sandbox's zygote could not preload " + "; ".join(hello["preload_errors"])
                               + ". Fix the import, or leave the module out of SandboxConfig.preload.")
        if len(hello["threads"]) != 1:
            zygote.kill()
            raise SandboxError(f"after preloading {list(self.config.preload)} the zygote runs {len(hello['threads'])} "
                               f"threads ({', '.join(hello['threads'])}); forking it would be unsafe. Leave out the "
                               "module that starts them, or make it single-threaded through its environment.")
        return zygote

    def _allocate_uid(self) -> int:
        """A uid no live session of this pool uses, offset by our pid so that pools in other processes
        on the machine are unlikely to pick the same ones."""
        with self._lock:
            start = (os.getpid() % 4096) * 4096
            for n in range(self._counter, self._counter + UID_SPAN):
                uid = UID_BASE + (start + n) % UID_SPAN
                if uid not in self._uids:
                    self._uids.add(uid)
                    return uid
        raise SandboxError("no free sandbox uid")

    def _forget(self, session: SandboxSession) -> None:
        with self._lock:
            self._sessions.discard(session)
            self._uids.discard(session._uid)

    def _try_tmpfs(self) -> tuple[bool, str]:
        """Whether session work dirs can be tmpfs mounts, so that the kernel enforces the disk quota;
        if not, why."""
        if "tmpfs" in self.config.disable:
            return False, "switched off by SandboxConfig(disable=('tmpfs',))"
        if not self._as_root:
            return False, "the pool does not run as root, so it cannot mount a tmpfs"
        probe = self.root / "tmpfs-probe"
        probe.mkdir(mode=0o700)
        try:
            isolation.mount_tmpfs(str(probe), 1 << 20, 16, 0, 0, 0o700)
            isolation.unmount(str(probe))
            return True, ""
        except OSError as err:
            return False, f"mounting a tmpfs failed: {err}"
        finally:
            try:
                probe.rmdir()
            except OSError:
                pass

    def _probe(self) -> IsolationReport:
        """Start a worker with every layer this machine has and try to break out of it; decide from what
        actually happened, not from what should have."""
        config, hello = self.config, self._zygote.hello
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        try:
            session = self._open(None, None, None, enforce=False)
            try:
                # beside the work dir, in the session's own dir: the private mounts show it, file modes let
                # anyone read it, so only Landlock can refuse it
                secret = session.directory / "probe-secret.txt"
                secret.write_text("tirlab-sandbox-probe")
                secret.chmod(0o444)
                code = _PROBE_CODE.format(port=listener.getsockname()[1], secret=str(secret), zygote=self._zygote.pid)
                result = session.run(code, timeout_s=max(10.0, config.cell_timeout_s))
                layers = dict(session._worker.layers) if session._worker else {}
                sees_threads = session._worker is not None and _thread_states(session._worker.pid) is not None
            finally:
                session.close()
            try:
                connection, _ = listener.accept()
                connection.close()
                accepted = True
            except BlockingIOError:
                accepted = False
        finally:
            listener.close()
        try:
            probes = json.loads(result.stdout)
        except ValueError:
            raise SandboxError(f"the sandbox's probe worker failed: {result.error or result.stdout!r}") from None
        facts = {"tmpfs": self._tmpfs, "no_tmpfs_because": self._no_tmpfs_because, "as_root": self._as_root,
                 "sees_threads": sees_threads}
        report = _build_report(config, hello, layers, probes, accepted, facts)
        self._expected = {name for name in CHECKED_LAYERS if _layer_active(layers, name)}
        _refuse_if_incomplete(config, report)
        return report

    def close(self) -> None:
        """Kill every worker and the zygote, delete the session dirs (and the root, if the pool made it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sessions = list(self._sessions)
        try:
            for session in sessions:
                try:
                    session.close()
                except Exception:  # noqa: BLE001 - every other session and the zygote must still go
                    pass
        finally:
            if self._zygote is not None:
                self._zygote.kill()
        if self._own_root:
            _rmtree(self.root)
        else:  # a root the caller gave: only what the pool made in it
            _rmtree(self.root / "zygote")
            (self.root / "zygote.log").unlink(missing_ok=True)
        _POOLS.discard(self)


_OPT_OUTS = ("To run anyway without network isolation pass SandboxConfig(allow_network=True); without "
             "filesystem isolation, SandboxConfig(allow_unrestricted_filesystem=True).")

_PROBE_CODE = """
import json, os, signal, socket
probes = {{}}
def attempt(name, action):
    try:
        action()
        probes[name] = "NOT BLOCKED"
    except Exception as err:
        probes[name] = f"{{type(err).__name__}}: {{err.strerror if isinstance(err, OSError) and err.strerror else err}}"
attempt("connect", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3))
attempt("read", lambda: open({secret!r}).read())
attempt("signal", lambda: os.kill({zygote}, 0))
print(json.dumps(probes))
"""


# the layers a worker checks itself (ready frame's "checks"); a worker without one the probe worker had is refused
CHECKED_LAYERS = ("seccomp", "landlock_fs", "network_namespace", "identity", "rlimits", "sessions_apart")
CAPABILITY_SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def _errno_name(number) -> str:
    return "it worked" if number == 0 else errno.errorcode.get(number, str(number))


def _judge_layers(claimed: dict, checks: dict, plan: dict) -> dict:
    """The worker's layers, decided by the parent from what the worker observed about itself after its
    lock-down (`checks`), not from what it says it applied: a layer it claims is not active where its check
    fails, and the network namespace and the sessions' separation are decided from the checks alone."""
    layers = {name: [bool(value[0]), str(value[1])] for name, value in claimed.items()
              if isinstance(value, list) and len(value) == 2}

    def refute(name: str, why: str) -> None:
        if layers.get(name, [False])[0]:
            layers[name] = [False, f"applied, but the worker's own check found {why}"]

    calls = checks.get("syscalls") or {}
    through = [f"{name} ({_errno_name(result)})" for name, result in calls.items() if result != errno.EPERM]
    if not calls or through:
        refute("seccomp", "these calls not refused with EPERM: " + (", ".join(through) or "none tried"))
    landlock = checks.get("landlock") or {}
    if not landlock or any(result != errno.EACCES for result in landlock.values()):
        refute("landlock_fs", "outside the work dir: " + (", ".join(
            f"{what}: {_errno_name(result)}" for what, result in landlock.items()) or "nothing tried"))
    netns, interfaces = checks.get("netns"), checks.get("interfaces")
    if isinstance(netns, int) and plan["netns"] is not None and netns != plan["netns"] and interfaces == ["lo"]:
        layers["network_namespace"] = [True, f"{plan['netns_because']}; checked in the worker: its namespace is not "
                                             "the pool's and holds only lo"]
    elif netns == plan["netns"]:
        layers["network_namespace"] = [False, f"the worker is in the pool's own network namespace "
                                              f"({plan['netns_because']})"]
    else:
        layers["network_namespace"] = [False, f"the worker's network namespace could not be confirmed empty "
                                              f"(namespace {netns!r}, interfaces {interfaces!r})"]
    caps = checks.get("capabilities")
    wanted = CAPABILITY_SETS if plan["own_uid"] else ("CapInh", "CapPrm", "CapEff", "CapAmb")  # no CAP_SETPCAP
    held = [name for name in wanted if not isinstance(caps, dict) or caps.get(name, 1)]
    ids = checks.get("ids") or [[], [], [None]]
    uid_ok = all(i == plan["uid"] for i in ids[0]) and len(ids[0]) == 3
    if plan["own_uid"]:
        uid_ok = uid_ok and ids[1] == [plan["uid"]] * 3 and ids[2] == []
    if held or not uid_ok:
        refute("identity", f"capability sets {held} not empty" if held else f"uids/gids/groups {ids}")
    limits = checks.get("rlimits") or []
    problems = []
    if len(limits) != 16 or any(soft != hard for soft, hard in limits):
        problems.append("a soft limit below its hard one")
    else:
        want = {resource.RLIMIT_CPU: plan["cpu_s"], resource.RLIMIT_FSIZE: plan["file_size"],
                resource.RLIMIT_NOFILE: plan["open_files"], resource.RLIMIT_CORE: 0,
                resource.RLIMIT_NPROC: plan["tasks"] if plan["own_uid"] else checks.get("tasks")}
        problems += [f"limit {which} is {limits[which][0]}, not {value}" for which, value in want.items()
                     if limits[which][0] != value]
        address_space = limits[resource.RLIMIT_AS][0]
        if address_space == resource.RLIM_INFINITY or address_space < plan["address_space"]:
            problems.append(f"an address-space limit of {address_space}")
    if problems:
        refute("rlimits", "; ".join(problems))
    confirmed = {"landlock_fs": "listing / and making a file in /tmp (both open to anyone by file modes) refused",
                 "identity": f"uid {plan['uid']}, capability sets {'/'.join(wanted)} empty",
                 "rlimits": "getrlimit gives the configured limits, soft = hard"}
    for name, what in confirmed.items():
        if layers.get(name, [False])[0]:
            layers[name][1] += f"; checked in the worker: {what}"
    listing = checks.get("pool_root_lists")
    if "sessions_apart" not in layers:
        layers["sessions_apart"] = [False, "not checked by the worker"]
    elif listing != [plan["session_dir"]]:
        refute("sessions_apart", f"the pool root shows {listing!r}")
    elif layers["sessions_apart"][0]:
        layers["sessions_apart"][1] += "; checked in the worker: the pool root shows only its own session"
    return layers


def _layer_active(layers: dict, name: str) -> bool:
    if name == "landlock":
        return bool(layers.get("landlock_fs", [False])[0])
    return bool(layers.get(name, [False])[0])


def _build_report(config: SandboxConfig, hello: dict, layers: dict, probes: dict, accepted: bool,
                  facts: dict) -> IsolationReport:
    def layer(name: str, fallback: str) -> Layer:
        active, detail = layers.get(name, [False, fallback])
        return Layer(name, bool(active), detail)

    seccomp, landlock = _layer_active(layers, "seccomp"), _layer_active(layers, "landlock")
    if seccomp and landlock:
        files = f"{config.disk_mb} MB for its files" + (" (a tmpfs: in RAM)" if facts["tmpfs"] else "")
        memory = Layer("memory", True, f"{config.memory_mb} MB per session: {files}, the other "
                                       f"{config.memory_mb - config.disk_mb} MB its address space (RLIMIT_AS); "
                                       "memfd_create, SysV IPC and POSIX message queues denied, /dev/shm unreachable")
    else:
        memory = Layer("memory", False, "only the address space is limited: " + (
            "without seccomp, memfd_create and SysV shared memory" if landlock else "without Landlock, /dev/shm")
            + " hold memory outside it")
    quota_size = f"{config.disk_mb} MB and {config.disk_files} files and directories"
    if facts["tmpfs"]:
        quota = Layer("disk_quota", True, f"each session's work dir is a tmpfs of {quota_size}: the kernel refuses "
                                          "the write past it (ENOSPC), files deleted while open included")
    else:
        quota = Layer("disk_quota", False, f"no tmpfs ({facts['no_tmpfs_because']}): {quota_size} are counted after "
                                           "each cell, so a cell can go past them until it ends, and files deleted "
                                           "while open are not seen")
    if landlock and facts["as_root"]:
        inputs = Layer("inputs_read_only", True, "read-only under Landlock, and the pool's files (0444) in the pool's "
                                                 "dir; the work dir is the pool's and sticky (1770), so what the pool "
                                                 "puts there (aliases of the inputs) cannot be removed, replaced or "
                                                 "changed either")
    elif landlock:
        inputs = Layer("inputs_read_only", False, "read-only under Landlock, but the worker has the pool's uid: it can "
                                                  "chmod them, and remove or replace aliases the pool puts in its work "
                                                  "dir")
    else:
        inputs = Layer("inputs_read_only", False, "without Landlock only file modes protect the inputs")
    if facts["sees_threads"]:
        threads = Layer("threads_end_with_cell", True, "a cell that leaves threads running ends its process (the "
                                                       "pool counts them in /proc while it is frozen): no thread "
                                                       "outlives its cell")
    else:
        threads = Layer("threads_end_with_cell", False, "/proc/<pid>/task is unreadable: a thread a cell leaves is "
                                                        "frozen between cells but runs on in later ones")
    connect, read, kill = (probes.get(k, "not run") for k in ("connect", "read", "signal"))
    network_closed = not accepted and connect != "NOT BLOCKED"
    rows = [
        layer("seccomp", "not applied"),
        layer("landlock_fs", "not applied"),
        layer("landlock_net", "not applied"),
        layer("landlock_scope", "not applied"),
        layer("network_namespace", hello["netns"][1]),
        layer("identity", "not applied"),
        layer("sessions_apart", "not applied"),
        layer("rlimits", "not applied"),
        memory,
        quota,
        inputs,
        Layer("frozen_between_cells", True, "SIGSTOP while no cell runs: nothing the code leaves running "
                                            "can act (or swap a collected image) until the next run()"),
        threads,
        Layer("network_probe", network_closed,
              f"connecting to a TCP listener on 127.0.0.1 failed ({connect})" if network_closed
              else "a worker CONNECTED to a TCP listener the pool opened on 127.0.0.1"),
        Layer("filesystem_probe", read != "NOT BLOCKED",
              f"reading a file outside the work dir failed ({read})" if read != "NOT BLOCKED"
              else "a worker READ a file the pool placed outside its work dir"),
        Layer("signal_probe", kill != "NOT BLOCKED",
              f"signalling the zygote failed ({kill})" if kill != "NOT BLOCKED"
              else "a worker could signal the zygote"),
    ]
    kernel = f"Linux {os.uname().release}" if hasattr(os, "uname") else sys.platform
    return IsolationReport(tuple(rows), hello["arch"], kernel)


def _refuse_if_incomplete(config: SandboxConfig, report: IsolationReport) -> None:
    problems = []
    if not config.allow_network:
        for name, what in (("seccomp", "without it the code can open sockets, fork and exec"),
                           ("network_probe", "the code can reach the network")):
            if not report.active(name):
                problems.append(f"- {name}: {report[name].detail}; {what}. To run anyway, without network "
                                "isolation: SandboxConfig(allow_network=True).")
    if not config.allow_unrestricted_filesystem:
        for name in ("landlock_fs", "filesystem_probe"):
            if not report.active(name):
                problems.append(f"- {name}: {report[name].detail}; the code could read and write every file this "
                                "user can. To run anyway, without filesystem isolation: "
                                "SandboxConfig(allow_unrestricted_filesystem=True).")
    if problems:
        raise SandboxUnavailable("the sandbox cannot isolate model code on this machine, so it refuses to run any:\n"
                                 + "\n".join(problems) + f"\n{report}")


def _check_root(root: Path, read_dirs: list[str]) -> None:
    """Session dirs must not lie where the sandboxed code may read (Python's installation, the system
    dirs): every session could then read every other session's files."""
    real = os.path.realpath(root)
    for directory in read_dirs:
        if real == directory or real.startswith(directory.rstrip(os.sep) + os.sep):
            raise SandboxError(f"the sandbox root {root} is inside {directory}, which sandboxed code may read, so "
                               "sessions could read each other's files; pass another root (the default is a "
                               "fresh temporary directory)")


def _check_config(config: SandboxConfig) -> None:
    if not isinstance(config, SandboxConfig):
        raise TypeError(f"config must be a SandboxConfig, not {type(config).__name__}")
    for name in ("cell_timeout_s", "kill_grace_s", "start_timeout_s", "decode_timeout_s", "memory_mb", "cpu_s",
                 "file_size_mb", "disk_mb", "disk_files", "max_open_files", "max_tasks", "max_output_chars",
                 "max_image_mb"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"SandboxConfig.{name} must be a positive number, got {value!r}")
    unknown = set(config.disable) - set(LAYERS)
    if unknown:
        raise ValueError(f"SandboxConfig.disable: unknown layer(s) {sorted(unknown)}; choose from {list(LAYERS)}")
    if config.max_open_files < 16:
        raise ValueError("SandboxConfig.max_open_files must be at least 16 (Python itself needs a few)")
    if config.disk_mb >= config.memory_mb:
        raise ValueError(f"SandboxConfig.disk_mb ({config.disk_mb}) must be less than memory_mb ({config.memory_mb}): "
                         "a session's files come out of its memory (as root they are a tmpfs, in RAM)")
    if config.file_size_mb > config.disk_mb:
        raise ValueError(f"SandboxConfig.file_size_mb ({config.file_size_mb}) must not exceed disk_mb "
                         f"({config.disk_mb}), the quota of all the session's files together")


def _copy_inputs(inputs: dict, directory: Path) -> None:
    directory.mkdir(mode=0o700)
    for name, source in inputs.items():
        if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name
                or "\0" in name):
            raise SandboxError(f"bad input file name {name!r}: use a plain file name such as 'image_0.png'")
        target = directory / name
        if isinstance(source, (bytes, bytearray, memoryview)):
            target.write_bytes(bytes(source))
        elif isinstance(source, (str, Path)):
            if not Path(source).is_file():
                raise SandboxError(f"input {name!r}: {source} is not a readable file")
            shutil.copyfile(source, target)
        else:
            raise SandboxError(f"input {name!r}: give a path or bytes, not {type(source).__name__}")
        os.chmod(target, 0o444)
    os.chmod(directory, 0o555)
