"""Nothing a run starts outlives it: not its vLLM engines (EngineCore and its workers, a judge's engine), not a
helper process, not a process that detached itself, whatever ends the run: `kill -9`, the OOM killer, SIGTERM
from a scheduler, Ctrl-C.

A program calls `supervise()` first thing, before its heavy imports, then goes on with its work:

    if __name__ == "__main__":
        from runtime.lifecycle import supervise

        supervise()

The call splits the process in three. The caller, the process a user or a scheduler sees and signals, only
waits, passes stop signals on, and exits as the run exits. A watcher, its child, is a subreaper: every process
the run starts, however deep, and even one whose parent died, stays below it. The run is the watcher's child:
the call returns in it. When the run ends, the watcher stops whatever the run left behind. When the caller dies
first (no handler runs on `kill -9`), the kernel tells the watcher (PR_SET_PDEATHSIG); it gives the run a few
seconds to close its engines on SIGTERM, then stops all that is left: SIGTERM, then SIGKILL.

In the run, SIGTERM and SIGHUP raise `Interrupted` (a KeyboardInterrupt) in the main thread, as SIGINT raises
KeyboardInterrupt, so `finally` blocks close engines and files. A stop signal often arrives more than once (a
terminal or a scheduler signals every process, and the caller passes it on as well): a repeat within a second
is the same request, and is ignored.

Linux only, as vLLM is; elsewhere `supervise()` does nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
CALLER_DIED = signal.SIGUSR1  # what the kernel sends the watcher when the caller dies
RUN_GRACE_S = 4.0  # the caller died: how long the run has to close its engines itself
LEFTOVER_GRACE_S = 2.0  # how long what is left has between SIGTERM and SIGKILL
REPEAT_S = 1.0  # a stop signal this soon after the last one is the same request, come by another path
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


class Interrupted(KeyboardInterrupt):
    """A SIGTERM or SIGHUP, raised in the run's main thread; `signum` says which."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def supervise() -> None:
    """Returns in the run's process; the caller and the watcher exit as the run does (see the module's text)."""
    if not sys.platform.startswith("linux"):
        return
    # signals the user's shell ignores (nohup, a background job) stay ignored
    stops = {s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    caller = os.getpid()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, CALLER_DIED, *stops})
    watcher = os.fork()
    if watcher:
        _wait_as_caller(watcher, stops)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, CALLER_DIED)
    run = os.fork() if os.getppid() == caller else None  # None: the caller is already gone
    if run == 0:
        _stop_on(stops)
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # were the watcher killed, the run would still stop cleanly
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    _watch(caller, run, stops)


def _wait_as_caller(watcher: int, stops: set[int]) -> None:
    while True:
        signum = signal.sigwaitinfo({signal.SIGCHLD, *stops}).si_signo
        if signum != signal.SIGCHLD:
            os.kill(watcher, signum)  # the watcher passes it to the run
            continue
        code = _reap().get(watcher)
        if code is not None:
            _exit_as(code)


def _watch(caller: int, run: int | None, stops: set[int]) -> None:
    code = None
    while run is not None and code is None:
        signum = signal.sigwaitinfo({signal.SIGCHLD, CALLER_DIED, *stops}).si_signo
        if signum == signal.SIGCHLD:
            code = _reap().get(run)
        elif signum != CALLER_DIED:
            os.kill(run, signum)  # the run stops itself, closing what it opened
        elif os.getppid() != caller:  # the caller was killed
            os.kill(run, signal.SIGTERM)
            code = _wait_for(run, RUN_GRACE_S)
            break
    _stop_descendants()
    _exit_as(-signal.SIGKILL if code is None else code)  # None: the run had to be killed


def _stop_on(stops: set[int]) -> None:
    """The run's handlers for stop signals (see the module's text)."""
    run = os.getpid()
    last = float("-inf")

    def stop(signum, frame):
        nonlocal last
        if os.getpid() != run:  # a child forked with this handler: what the signal would do without it
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if time.monotonic() - last < REPEAT_S:
            return
        last = time.monotonic()
        raise KeyboardInterrupt if signum == signal.SIGINT else Interrupted(signum)

    for signum in stops:
        signal.signal(signum, stop)


def _reap() -> dict[int, int]:
    """Collect every child that ended (a subreaper's children include the orphans it adopted): pid -> exit code,
    negative for a signal."""
    ended = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if not pid:
            return ended
        ended[pid] = os.waitstatus_to_exitcode(status)


def _wait_for(pid: int, timeout_s: float) -> int | None:
    deadline = time.monotonic() + timeout_s
    while True:
        code = _reap().get(pid)
        left = deadline - time.monotonic()
        if code is not None or left <= 0:
            return code
        signal.sigtimedwait({signal.SIGCHLD}, left)


def _stop_descendants() -> None:
    """SIGTERM to every process below this one, SIGKILL to those still there after a grace period."""
    import psutil

    me = psutil.Process()
    for signum, grace_s in ((signal.SIGTERM, LEFTOVER_GRACE_S), (signal.SIGKILL, 10.0)):
        signalled: set[int] = set()
        deadline = time.monotonic() + grace_s
        while True:
            # listed again every round: a process being stopped may still start one (an engine its worker)
            for process in me.children(recursive=True):
                if process.pid not in signalled:
                    signalled.add(process.pid)
                    try:
                        process.send_signal(signum)
                    except psutil.Error:  # ended meanwhile
                        pass
            if not _running(me) or time.monotonic() >= deadline:
                break
            signal.sigtimedwait({signal.SIGCHLD}, 0.05)
            _reap()
    _reap()


def _running(me) -> bool:
    import psutil

    for process in me.children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            pass
    return False


def _exit_as(code: int) -> None:
    """Exit with the run's code, or die of the stop signal that ended it: a shell stops a script whose command
    died of SIGINT, not one whose command exited with 130."""
    signum = -code
    if signum in (*STOP_SIGNALS, signal.SIGKILL):
        if signum != signal.SIGKILL:
            signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        os.kill(os.getpid(), signum)
    os._exit(128 + signum if code < 0 else code)


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(ctypes.c_int(option), *(ctypes.c_ulong(v) for v in (value, 0, 0, 0))) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value}) failed")
