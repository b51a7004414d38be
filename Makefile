# Two commands for a newcomer: `make run` and `make test`. Both set up .venv when needed.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
# A machine with an NVIDIA driver gets torch's CUDA build; others the CPU build.
HAS_NVIDIA := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
CONSTRAINTS := constraints/$(if $(HAS_NVIDIA),cuda,cpu).txt
STAMP := $(VENV)/.installed-$(if $(HAS_NVIDIA),cuda,cpu)
PYTEST_ARGS ?=
# Test processes (pytest-xdist): the suite took 13 min on 2 cores with 2 of them, 18-20 min in one.
PYTEST_WORKERS ?= 2

.PHONY: setup run test test-gpu clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints/cpu.txt constraints/cuda.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing aka into $(VENV) with $(CONSTRAINTS) (first time: a few minutes)"
	$(PY) -m pip install -q --disable-pip-version-check -c $(CONSTRAINTS) -e '.[dev,kb,llm,report,baselines,e2e]'
	@rm -f $(VENV)/.installed-*
	@touch $@

run: setup
	$(VENV)/bin/aka optimize --op rms_norm --shape-set hot --iterations 3

test: setup
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# On a GPU machine (the H200 through the device tool): only the gpu-marked tests.
test-gpu: setup
	$(PY) -m pytest -q -m gpu $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
