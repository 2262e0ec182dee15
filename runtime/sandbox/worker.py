"""The subprocess side of the sandbox: the zygote (fork server) and the per-session worker.

The zygote is started once per pool with a scrubbed environment. It enters an empty network namespace,
preloads numpy, cv2, PIL and `tools` (torch), checks it is still single-threaded (forking a process
with threads can deadlock the child), freezes the GC (so forked children share the preloaded heap
instead of copying it page by page) and then only forks. For each session it makes a socketpair,
forks, and hands the parent its end plus a pidfd of the child over SCM_RIGHTS, so the parent can
signal the worker race-free even though the worker is not its child.

The worker locks itself down before it reads any model code (order matters: each step needs what the
next one takes away): as root a private mount namespace (other sessions hidden, Python reachable without
a capability), chdir, a fresh environment, rlimits, every fd closed but its channel, stdin, stdout and
stderr on /dev/null, no-new-privs, its own uid and no capabilities, Landlock, seccomp last; along the
way it records what it can observe of each layer on itself, for the parent to judge. It then runs
cells (`exec` in one namespace that persists across cells, stdout/stderr in capped in-memory buffers, a
soft per-cell timer that raises TimeoutError in the code) and decodes the images the parent sends it
(runtime.sandbox.decode), so that no decoder ever runs on them in the parent.

Frames are a big-endian length and a UTF-8 JSON object (or raw bytes: an image file, pixels); a worker's
frames also carry the id of the request they answer, so that the parent can drop one sent for no request
unread. The parent never unpickles anything a worker sends, and treats an oversized or malformed frame as
a worker sending garbage, which it ends.
"""

from __future__ import annotations

import builtins
import ctypes
import gc
import importlib
import io
import json
import linecache
import os
import resource
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback

from runtime.sandbox import isolation

HEADER = struct.Struct(">I")
REQUEST_LIMIT = 16 << 20  # parent -> worker / zygote (code, session spec)
# worker -> parent: the body's length and the id of the request it answers, so that the parent can drop a frame
# sent for no request of its own without parsing it
REPLY_HEADER = struct.Struct(">II")


class ProtocolError(Exception):
    """A frame that is too long or not a JSON object."""


def encode_frame(message: dict) -> bytes:
    data = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode()
    return HEADER.pack(len(data)) + data


def send_frame(sock: socket.socket, message: dict) -> None:
    sock.sendall(encode_frame(message))


def read_exact(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    chunks, need = [], size
    while need:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no answer in time")
            sock.settimeout(remaining)
        chunk = sock.recv(min(need, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the channel")
        chunks.append(chunk)
        need -= len(chunk)
    return b"".join(chunks)


def decode_body(body: bytes) -> dict:
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as err:
        raise ProtocolError(f"a frame that is not JSON ({type(err).__name__})") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a frame that is not a JSON object ({type(message).__name__})")
    return message


def send_reply(sock: socket.socket, request_id: int, message: dict) -> None:
    data = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode()
    sock.sendall(REPLY_HEADER.pack(len(data), request_id) + data)


def send_raw(sock: socket.socket, request_id: int | None, data) -> None:
    """Bytes as they are (pixels, an image file), framed like a reply (an id) or a request (none)."""
    view = memoryview(data).cast("B")
    header = HEADER.pack(len(view)) if request_id is None else REPLY_HEADER.pack(len(view), request_id)
    sock.sendall(header)
    sock.sendall(view)


def recv_frame(sock: socket.socket, limit: int, deadline: float | None = None) -> dict:
    """One frame. EOFError when the other end is gone, TimeoutError past `deadline` (time.monotonic),
    ProtocolError for a frame over `limit` bytes or one that is not a JSON object."""
    (size,) = HEADER.unpack(read_exact(sock, HEADER.size, deadline))
    if size > limit:
        raise ProtocolError(f"a {size}-byte frame (the limit is {limit})")
    return decode_body(read_exact(sock, size, deadline))


# --- the zygote -----------------------------------------------------------------------------------------
def zygote_main(argv: list[str]) -> None:
    """argv: [channel fd, parent pid, options JSON]. Runs until the parent closes the channel."""
    fd, parent_pid, options = int(argv[0]), int(argv[1]), json.loads(argv[2])
    os.umask(0o077)
    isolation.die_with_parent(parent_pid)
    sock = socket.socket(fileno=fd)
    netns = (isolation.enter_network_namespace() if options["netns"]
             else (False, "switched off by SandboxConfig(disable=('netns',))"))
    start, errors = time.perf_counter(), []
    for name in options["preload"]:
        try:
            importlib.import_module(name)
        except Exception as err:  # noqa: BLE001 - reported to the parent, which refuses to start
            errors.append(f"{name}: {type(err).__name__}: {err}")
    preload_s = time.perf_counter() - start
    read_dirs, read_files = isolation.python_read_paths()  # once here, not in every worker
    gc.collect()
    gc.freeze()
    threads = sorted(_thread_names())
    send_frame(sock, {
        "pid": os.getpid(), "arch": isolation.machine(), "netns": list(netns), "preload_s": preload_s,
        "preload_errors": errors, "threads": threads, "vm_size": isolation.vm_size(),
        "python": sys.version.split()[0], "pidfd": hasattr(os, "pidfd_open"),
        "read_dirs": [*read_dirs, *(d for d in isolation.SYSTEM_READ_DIRS if os.path.isdir(d))],
        "read_files": [*read_files, *(f for f in isolation.SYSTEM_READ_FILES if os.path.exists(f))],
    })
    if errors or len(threads) != 1:
        os._exit(2)
    _serve(sock)


def _thread_names() -> list[str]:
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return [t.name for t in threading.enumerate()]
    names = []
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            names.append(tid)
    return names


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    return f"wait status {status}"


def _serve(sock: socket.socket) -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so SIGCHLD wakes select via the wakeup fd
    live: set[int] = set()
    reaped: dict[int, tuple[str, float]] = {}  # pid -> (how it ended, CPU seconds it used)

    def reap():
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            live.discard(pid)
            reaped[pid] = (_describe_status(status), usage.ru_utime + usage.ru_stime)
            if len(reaped) > 4096:
                reaped.pop(next(iter(reaped)))

    while True:
        try:
            ready, _, _ = select.select([sock, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            os.read(wake_r, 4096)
        reap()
        if sock not in ready:
            continue
        try:
            request = recv_frame(sock, REQUEST_LIMIT)
        except (EOFError, OSError, ProtocolError):
            os._exit(0)  # the parent is gone: our workers die with us (PR_SET_PDEATHSIG)
        op = request.get("op")
        if op == "spawn":
            parent_end, child_end = socket.socketpair()
            try:
                pid = os.fork()
            except OSError as err:  # EAGAIN, ENOMEM: the parent reports it; we stay up
                parent_end.close()
                child_end.close()
                send_frame(sock, {"error": f"fork failed: {err}"})
                continue
            if pid == 0:
                try:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    sock.close()
                    parent_end.close()
                    _worker_main(child_end, request["spec"], os.getppid())
                finally:
                    os._exit(70)
            child_end.close()
            live.add(pid)
            fds = [parent_end.detach()]
            try:  # the child cannot be reaped before we wait for it, so this pid is still the child's
                fds.append(os.pidfd_open(pid))
            except (AttributeError, OSError):
                pass
            socket.send_fds(sock, [encode_frame({"pid": pid, "pidfd": len(fds) == 2})], fds)
            for passed in fds:
                os.close(passed)
        elif op == "status":  # how a worker ended, waiting up to `wait` seconds for it to end
            pid, deadline = request["pid"], time.monotonic() + float(request.get("wait", 0))
            while pid in live and time.monotonic() < deadline:
                time.sleep(0.005)
                reap()
            status, cpu_s = reaped.get(pid, (None, None))
            send_frame(sock, {"status": status, "cpu_s": cpu_s})
        elif op == "signal":  # the fallback without pidfds: only our own, not yet reaped, children
            pid = request["pid"]
            ok = pid in live
            if ok:
                try:
                    os.kill(pid, int(request["signal"]))
                except ProcessLookupError:
                    ok = False
            send_frame(sock, {"ok": ok})
        else:
            send_frame(sock, {"error": f"unknown op {op!r}"})


# --- the worker -----------------------------------------------------------------------------------------
class RefusedLayer(Exception):
    """A required isolation layer could not be applied: the worker must not run code."""


def _lock_down(chan: socket.socket, spec: dict, zygote_pid: int) -> tuple[dict, dict]:
    """Apply every layer, in order; returns ({layer: [active, detail]}, checks): the checks are facts
    the worker observed about itself once the layers were on, for the parent to judge."""
    layers, checks = {}, {}
    require = set(spec["require"])
    uid = spec["uid"]  # as root: the session's own uid; otherwise None (stay the pool's user)
    kept_capabilities = 0  # none, unless Python would be unreadable without one
    if uid is not None:  # while still root: the mounts need CAP_SYS_ADMIN, the listing the pool root's owner
        read_paths = [*isolation.SYSTEM_READ_DIRS, *isolation.SYSTEM_READ_FILES]
        read_paths = [p for p in read_paths + [p for group in isolation.python_read_paths() for p in group]
                      if os.path.exists(p)]
        try:
            layers["sessions_apart"] = [True, isolation.private_mounts(spec["pool_root"], spec["session_dir"],
                                                                       read_paths)]
        except isolation.MountsFailed as err:
            raise RefusedLayer(f"sessions apart: {err}") from None
        except OSError as err:  # no mount namespace here (a container without CAP_SYS_ADMIN)
            layers["sessions_apart"] = [False, f"no private mount namespace: {err}"]
            if any(isolation.closed_ancestor(p) for p in read_paths):  # Python under /root, say: read it as before
                kept_capabilities = 1 << isolation.CAP_DAC_READ_SEARCH
        checks["pool_root_lists"] = _listing(spec["pool_root"])
    else:
        layers["sessions_apart"] = [False, "the pool does not run as root: no private mount namespace, so the "
                                           "code can learn other sessions' file names with stat (Landlock still "
                                           "denies reading them, seccomp denies watching them)"]
    os.chdir(spec["work_dir"])
    os.environ.clear()
    os.environ.update(spec["env"])
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None  # re-read TMPDIR
    old_nofile = os.sysconf("SC_OPEN_MAX")
    # RLIMIT_NPROC counts every task of the uid: a uid of its own gets the whole budget, a shared one
    # gets what it has now plus the budget
    tasks = spec["max_tasks"] if uid is not None else isolation.count_tasks(os.getuid()) + spec["max_tasks"]
    layers["rlimits"] = [True, isolation.set_limits(
        isolation.vm_size() + (spec["address_space_mb"] << 20), spec["cpu_s"], spec["file_size_mb"] << 20,
        spec["max_open_files"], tasks)]
    checks["rlimits"] = [list(resource.getrlimit(n)) for n in range(16)]
    checks["tasks"] = tasks
    keep = chan.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, max(1024, min(old_nofile, 1 << 16)))
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):  # C-level writes are discarded; Python's go to the per-cell buffers
        os.dup2(null, target)
    os.close(null)
    isolation.prctl(isolation.PR_SET_NO_NEW_PRIVS, 1)
    try:
        if uid is not None:
            layers["identity"] = [True, isolation.become(uid, kept_capabilities)]
            isolation.die_with_parent(zygote_pid)  # a credential change clears PR_SET_PDEATHSIG
        else:
            held = isolation.capabilities()
            isolation.drop_capabilities()
            layers["identity"] = [True, f"runs as the pool's uid {os.getuid()}; "
                                        + (f"dropped capabilities 0x{held:x}" if held else "holds no capabilities")]
    except OSError as err:
        try:  # at least no capabilities, even where the uid could not change
            isolation.drop_capabilities()
        except OSError:
            pass
        layers["identity"] = [False, f"could not drop privileges: {err}"]
    isolation.prctl(isolation.PR_SET_DUMPABLE, 0)  # no ptrace / /proc/<pid>/mem by same-uid processes
    # now, while /proc is readable (Landlock hides it) and netlink sockets work (seccomp refuses them)
    checks["ids"] = [list(os.getresuid()), list(os.getresgid()), os.getgroups()]
    checks["capabilities"] = _observe(isolation.capability_sets)
    checks["netns"] = _observe(lambda: os.stat("/proc/self/ns/net").st_ino)
    checks["interfaces"] = _observe(lambda: sorted(name for _, name in socket.if_nameindex()))
    layers.update(_landlock(spec, "landlock" in require))
    # what only Landlock refuses: DAC lets anyone list / and make a file in /tmp (1777)
    checks["landlock"] = {
        "list /": _errno_of(lambda: os.close(os.open("/", os.O_RDONLY | os.O_DIRECTORY))),
        "make a file in /tmp": _errno_of(lambda: os.close(os.open("/tmp", os.O_TMPFILE | os.O_WRONLY, 0o600))),
    }
    if spec["seccomp"]:
        try:
            layers["seccomp"] = [True, isolation.install_seccomp(os.getpid())]
        except OSError as err:
            if "seccomp" in require:
                raise RefusedLayer(f"seccomp: {err}") from None
            layers["seccomp"] = [False, f"unavailable: {err}"]
    else:
        layers["seccomp"] = [False, "switched off by SandboxConfig(disable=('seccomp',))"]
    checks["syscalls"] = _refused_calls()
    return layers, checks


def _observe(read):
    """What `read()` returns, or the error it raised as text (a check that could not look)."""
    try:
        return read()
    except OSError as err:
        return f"{type(err).__name__}: {err}"


def _errno_of(action) -> int:
    """0 if `action()` worked, else its errno."""
    try:
        action()
        return 0
    except OSError as err:
        return err.errno or -1


def _listing(path: str):
    try:
        return sorted(os.listdir(path))
    except OSError as err:
        return f"{type(err).__name__}: {err}"


# socket families whose socket() seccomp must refuse (AF_PACKET also needs CAP_NET_RAW), with a type each
SOCKET_FAMILIES = {"AF_INET": "SOCK_STREAM", "AF_INET6": "SOCK_STREAM", "AF_UNIX": "SOCK_STREAM",
                   "AF_NETLINK": "SOCK_RAW", "AF_PACKET": "SOCK_RAW", "AF_VSOCK": "SOCK_STREAM",
                   "AF_ALG": "SOCK_SEQPACKET"}
# calls that reach other sessions or hold memory outside the limits, with arguments the kernel would reject
# (EFAULT, EBADF, EINVAL), so a call that gets through does nothing; seccomp answers EPERM first
REFUSED_CALLS = {"inotify_init": (), "inotify_init1": (0x7FFF0000,), "inotify_add_watch": (-1, None, 0),
                 "fanotify_mark": (-1, 0, 0, -1, None), "setxattr": (None, None, None, 0, 0),
                 "lsetxattr": (None, None, None, 0, 0), "fsetxattr": (-1, None, None, 0, 0),
                 "removexattr": (None, None), "lremovexattr": (None, None), "fremovexattr": (-1, None),
                 "setxattrat": (-1, None, 0, None, None, 0), "removexattrat": (-1, None, 0, None)}


def _refused_calls() -> dict[str, int]:
    """The errno of each call seccomp must refuse (0: it worked)."""
    results = {}
    for family, kind in SOCKET_FAMILIES.items():
        if hasattr(socket, family):
            number, kind = getattr(socket, family), getattr(socket, kind)
            results[f"socket({family})"] = _errno_of(lambda: socket.socket(number, kind).close())
    results["socketpair"] = _errno_of(lambda: [end.close() for end in socket.socketpair()])
    table = isolation.syscall_table() or {}
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    for name, args in REFUSED_CALLS.items():
        if name in table:
            ctypes.set_errno(0)
            value = libc.syscall(ctypes.c_long(table[name]), *(ctypes.c_long(a) if isinstance(a, int) else a
                                                               for a in args))
            results[name] = ctypes.get_errno() if value == -1 else 0
            if value >= 0 and name in ("inotify_init", "inotify_init1"):
                os.close(value)
    return results


def _landlock(spec: dict, required: bool) -> dict:
    names = ("landlock_fs", "landlock_net", "landlock_scope")
    if not spec["landlock"]:
        return {n: [False, "switched off by SandboxConfig(disable=('landlock',))"] for n in names}
    abi, why = isolation.landlock_abi()
    try:
        if not abi:
            raise OSError(why)
        applied = isolation.apply_landlock(abi, isolation.landlock_rules(spec["inputs_dir"], spec["work_dir"]))
    except OSError as err:
        if required:
            raise RefusedLayer(f"Landlock: {err}") from None
        return {n: [False, f"unavailable: {err}"] for n in names}
    paths = len(applied["paths"])
    return {
        "landlock_fs": [True, f"ABI {abi}: read-only Python, its import paths and system libraries ({paths} "
                              "rules); inputs read-only; the work dir read-write; nothing else"],
        "landlock_net": [applied["net"], "TCP bind and connect denied" if applied["net"]
                         else f"ABI {abi} < 4: no TCP rules"],
        "landlock_scope": [applied["scoped"], "signals and abstract unix sockets only within the worker"
                           if applied["scoped"] else f"ABI {abi} < 6: no signal / abstract socket scoping"],
    }


def _worker_main(chan: socket.socket, spec: dict, zygote_pid: int) -> None:
    os.setsid()  # alone in a process group: kill(0) and kill(-pid) can reach only itself
    isolation.die_with_parent(zygote_pid)
    try:
        layers, checks = _lock_down(chan, spec, zygote_pid)
    except (RefusedLayer, OSError) as err:
        send_reply(chan, 0, {"ready": False, "error": str(err)})
        os._exit(1)
    sys.dont_write_bytecode = True
    send_reply(chan, 0, {"ready": True, "pid": os.getpid(), "layers": layers, "checks": checks})
    _serve_cells(chan, spec["max_output_chars"])


class CappedText(io.TextIOBase):
    """A text stream that keeps the first `limit` characters and counts the rest."""

    def __init__(self, limit: int):
        self.limit, self.parts, self.size, self.dropped = limit, [], 0, 0
        self.lock = threading.Lock()
        self.buffer = _BytesInto(self)  # for code that writes bytes to sys.stdout.buffer

    def write(self, text) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self.lock:
            room = self.limit - self.size
            if room > 0:
                self.parts.append(text[:room])
                self.size += min(room, len(text))
            self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return "utf-8"

    def value(self) -> str:
        return capped("".join(self.parts), self.dropped)


class _BytesInto(io.RawIOBase):
    def __init__(self, text: CappedText):
        self.text = text

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.text.write(bytes(data).decode("utf-8", "replace"))
        return len(data)


def capped(text: str, dropped: int) -> str:
    """`text` with the note the sandbox adds when output was cut; lone surrogates become '?'."""
    text = text.encode("utf-8", "replace").decode("utf-8")
    if dropped:
        text += ("" if not text or text.endswith("\n") else "\n") + f"[... {dropped} characters dropped]\n"
    return text


class _Timer:
    running = False
    fired = False
    limit = 0.0


def _on_alarm(signum, frame):
    if _Timer.running:
        _Timer.fired = True
        raise TimeoutError(f"the cell ran past its {_Timer.limit:g} s time limit (variables are kept)")


def format_error(exc: BaseException) -> str:
    """The exception as Python prints it, keeping only the traceback frames in the user's cells."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<cell ")]
    lines = (["Traceback (most recent call last):\n", *traceback.format_list(frames)] if frames else [])
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


def _serve_cells(chan: socket.socket, limit: int) -> None:
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    signal.signal(signal.SIGALRM, _on_alarm)
    count = 0
    while True:
        try:
            request = recv_frame(chan, REQUEST_LIMIT)
            if request.get("op") == "run":
                count += 1
                reply = _run_cell(namespace, request["code"], f"<cell {count}>", float(request["timeout"]), limit)
                send_reply(chan, request["id"], reply)
            elif request.get("op") == "decode":
                (size,) = HEADER.unpack(read_exact(chan, HEADER.size, None))
                _decode_image(chan, request, read_exact(chan, size, None))
            else:
                os._exit(0)
        except (EOFError, OSError, ProtocolError):
            os._exit(0)


def _decode_image(chan: socket.socket, request: dict, data: bytes) -> None:
    """Decode one image file under a timer and send its pixels: a reply with their shape, then the raw bytes.
    The timer stops the decoder between two of its steps; the parent's deadline, a little later, ends the
    process where one step alone runs past it."""
    import numpy as np

    from runtime.sandbox.decode import decode

    signal.signal(signal.SIGALRM, _on_alarm)  # the cells' code may have installed a handler of its own
    _Timer.fired, _Timer.limit, _Timer.running = False, float(request["timer_s"]), True
    signal.setitimer(signal.ITIMER_REAL, _Timer.limit)
    pixels, error = None, None
    try:
        pixels = decode(data, request["mode"], int(request["max_pixels"]), int(request["max_bytes"]))
    except BaseException as exc:  # noqa: BLE001 - whatever the file does to the decoder is the parent's answer
        if _Timer.fired:
            error = f"decoding it took longer than the {request['limit_s']:g} s the sandbox allows"
        elif isinstance(exc, ValueError):  # the caps' and tools.images' own refusals say what is wrong
            error = str(exc)[:2000]
        else:
            error = f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        _Timer.running = False
        signal.setitimer(signal.ITIMER_REAL, 0)
    if error is not None:
        send_reply(chan, request["id"], {"ok": False, "error": error})
        return
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    send_reply(chan, request["id"], {"ok": True, "shape": list(pixels.shape)})
    send_raw(chan, request["id"], pixels)


def _run_cell(namespace: dict, code: str, filename: str, timeout: float, limit: int) -> dict:
    out, err = CappedText(limit), CappedText(limit)
    sys.stdout, sys.stderr = out, err
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)  # tracebacks show source
    error = None
    _Timer.fired, _Timer.limit = False, timeout
    try:
        try:
            compiled = compile(code, filename, "exec")
            _Timer.running = True
            signal.setitimer(signal.ITIMER_REAL, timeout)
            exec(compiled, namespace)
        finally:
            _Timer.running = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    except SystemExit as exc:  # exit() / sys.exit() ends the cell; only a failure code is an error
        if exc.code not in (None, 0):
            error = format_error(exc)
    except BaseException as exc:  # noqa: BLE001 - everything the code raises is reported, nothing escapes
        error = format_error(exc)
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    if error is None and _Timer.fired:
        error = (f"TimeoutError: the cell ran past its {timeout:g} s time limit; the code caught the "
                 "TimeoutError and went on, so its results may be incomplete\n")
    if error is not None and len(error) > limit:
        error = error[:limit // 2] + f"\n[... {len(error) - limit} characters dropped]\n" + error[-limit // 2:]
    return {"ok": error is None and not _Timer.fired, "stdout": out.value(), "stderr": err.value(),
            "error": None if error is None else capped(error, 0), "timed_out": _Timer.fired}
