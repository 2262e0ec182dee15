"""tirlab's code sandbox: runs model-written Python (Thyme, PyVision, VisualToolBench, Agentic-MME Gen)
in isolated subprocesses. Model code is untrusted and may be hostile; see docs/security.md.

    from runtime.sandbox import SandboxPool
    with SandboxPool() as pool, pool.session(inputs={"image_0.png": png_bytes}) as session:
        result = session.run("from PIL import Image\\nImage.open(...).crop(...).save('outputs/crop.png')")
        result.ok, result.stdout, result.error, result.images

Design, in one paragraph: a pool starts one fork server (the zygote, `worker.py`) with a scrubbed
environment, in an empty network namespace, that preloads numpy, cv2, PIL and `tools` (torch) once; each
session is a process forked from it in milliseconds. Before it runs any model code the worker locks
itself down (`isolation.py`): rlimits, all fds closed but its channel, capabilities dropped, Landlock
(read-only Python and libraries, read-only inputs, a read-write work dir, no TCP, no signals out) and a
seccomp filter (no sockets, fork, exec, ptrace, mount, bpf, ...). The parent (`pool.py`) talks to each
worker in size-capped JSON frames, enforces a soft then hard per-cell timeout, freezes the worker
between cells (and ends it when a cell leaves threads running), gives each session's work dir a tmpfs of
its disk quota (as root), collects images itself without following symlinks, has the worker decode them
(`decode.py`: the parent receives only pixels within its budgets), and refuses to start (fail
closed, `SandboxUnavailable`) when a required layer is missing, naming it and the opt-out.
`python -m runtime.sandbox.hostile` runs the hostile-code suite; `python -m runtime.sandbox.bench` times it.
"""

from runtime.sandbox.pool import (
    CellResult,
    ImageRefused,
    IsolationReport,
    Layer,
    SandboxConfig,
    SandboxError,
    SandboxPool,
    SandboxSession,
    SandboxUnavailable,
)

__all__ = ["CellResult", "ImageRefused", "IsolationReport", "Layer", "SandboxConfig", "SandboxError", "SandboxPool",
           "SandboxSession", "SandboxUnavailable"]
