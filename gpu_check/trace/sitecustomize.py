"""Loaded at the start of every Python process of a GPU-check step (its folder is first on PYTHONPATH).

- GPU_CHECK_TRACE_DIR: at exit, write which top-level modules this process imported (and from which file), and
  its peak GPU memory when it used CUDA, to a JSON file there. The report lists the packages behind the modules
  with their versions; the SFT and GRPO steps read their training process's peak memory from it.
- GPU_CHECK_HIDE_SITE / GPU_CHECK_MACHINE_SITE (the rehearsal only): drop this interpreter's own site-packages
  from sys.path and add a site folder holding only the GPU machine's packages (gpu_check/rehearsal_site.py), so
  an import of a package the machine lacks fails here as it would there.

An interpreter runs one sitecustomize: the one this file shadows, if any, runs at the end.
"""

import atexit
import json
import os
import sys


def _dump(directory):
    modules = {}
    for name, module in list(sys.modules.items()):
        if "." in name or module is None or getattr(module, "__name__", name) != name:
            continue  # submodules, and aliases such as pandas' `_cyutility`
        modules[name] = getattr(module, "__file__", None) or None
    record = {"pid": os.getpid(), "step": os.environ.get("GPU_CHECK_STEP"), "argv": sys.argv,
              "executable": sys.executable, "modules": modules}
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            record["cuda_peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
            record["cuda_peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    except Exception as err:  # noqa: BLE001 - a trace must never fail the process it watches
        record["cuda_error"] = repr(err)
    try:
        with open(os.path.join(directory, f"{os.getpid()}.json"), "w", encoding="utf-8") as out:
            json.dump(record, out)
    except OSError:
        pass


def _machine_like_site(hide, machine_site):
    import site

    hidden = os.path.realpath(hide)
    sys.path[:] = [entry for entry in sys.path if os.path.realpath(entry or ".") != hidden]
    site.addsitedir(machine_site)  # appended after PYTHONPATH and the standard library; runs its .pth files


def _run_shadowed():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        candidate = os.path.join(entry or ".", "sitecustomize.py")
        if os.path.realpath(os.path.dirname(candidate)) != os.path.realpath(here) and os.path.isfile(candidate):
            with open(candidate, encoding="utf-8") as source:
                exec(compile(source.read(), candidate, "exec"), {"__name__": "sitecustomize", "__file__": candidate})
            return


if os.environ.get("GPU_CHECK_TRACE_DIR"):
    atexit.register(_dump, os.environ["GPU_CHECK_TRACE_DIR"])
if os.environ.get("GPU_CHECK_HIDE_SITE") and os.environ.get("GPU_CHECK_MACHINE_SITE"):
    _machine_like_site(os.environ["GPU_CHECK_HIDE_SITE"], os.environ["GPU_CHECK_MACHINE_SITE"])
_run_shadowed()
