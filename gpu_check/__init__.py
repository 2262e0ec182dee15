"""`make gpu-check`: one prepared acceptance run of tirlab on a bare GPU machine, and its rehearsal on a CPU.

    make gpu-wheels    # here: download the wheels that machine lacks into gpu_check/wheels/ (wheels.txt pins them)
    make gpu-check     # there (python3 with CUDA torch): the acceptance run; here (no CUDA): the rehearsal

The GPU machine has no network and its own Python 3.12 with a CUDA torch (machine_packages.txt lists what it
holds). What tirlab needs beyond that travels as wheels and is installed into a temporary folder that PYTHONPATH
puts first, for every step and every process a step starts. Each step runs in its own subprocess with its own
timeout (steps.py); the runner (runner.py) writes gpu_check/report.md and gpu_check/report.json and exits non-zero
when a step crashed, a check failed or a target was missed. docs/gpu.md says how to run it and read the report.

Modules: check.py (the plan: steps and settings, GPU or rehearsal), runner.py (subprocesses, timeouts, the report),
steps.py (what each step does), wheelset.py (the wheel list, its completeness and the size of what travels),
rehearsal_site.py (a site folder with only the GPU machine's packages, for the rehearsal), trace/sitecustomize.py
(which modules every process imported, and its peak GPU memory).
"""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parent
