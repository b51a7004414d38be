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

# The GPU machine's Triton (the device tool's image), for the CPU's Hopper build checks (tests that compile
# kernels for sm_90 through tests/benchmarks/hopper_compile.py): its ptxas can allocate registers differently
# (2026-12-06: triton 3.6 built top_k_top_p_filter's search on 8 warps with a stack, 3.7 without).
DEVICE_TRITON ?= 3.6.0
DEVICE_VENV := .venv-device-triton

.PHONY: setup run test test-gpu device-triton test-device-triton clean

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

# A side venv with the GPU's Triton alone; torch and the rest come from .venv (a .pth file after its own).
device-triton: setup
	@test -x $(DEVICE_VENV)/bin/python || $(PYTHON) -m venv $(DEVICE_VENV)
	$(DEVICE_VENV)/bin/python -m pip install -q --disable-pip-version-check --no-deps triton==$(DEVICE_TRITON)
	$(PY) -c "import site; print(site.getsitepackages()[0])" > "$$($(DEVICE_VENV)/bin/python -c \
	  "import site; print(site.getsitepackages()[0])")/zz_aka_venv.pth"

# The Hopper build checks compiled with the GPU's Triton (AKA_DEVICE_TRITON_PYTHON, hopper_compile.py), and its
# interpreter under this NumPy (sandbox/interpreter_compat.py).
test-device-triton: device-triton
	AKA_DEVICE_TRITON_PYTHON=$(DEVICE_VENV)/bin/python $(PY) -m pytest -q -n $(PYTEST_WORKERS) \
	  -k "hopper or build or pdl" tests/benchmarks $(PYTEST_ARGS)
	AKA_DEVICE_TRITON_PYTHON=$(DEVICE_VENV)/bin/python $(PY) -m pytest -q tests/sandbox/test_interpreter_compat.py

clean:
	rm -rf $(VENV) $(DEVICE_VENV) .pytest_cache build *.egg-info
