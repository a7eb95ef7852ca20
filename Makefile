# Tessera: `make demo` runs the main job on the default device (the XLA CPU PJRT plugin),
# `make test` runs every test. Both install what is missing first (Debian packages, a
# project-local Python venv with the plugin's wheel, the plugin in the cache folder).

SHELL := /bin/bash
ROOT := $(CURDIR)
VENV := $(ROOT)/.venv
PY := $(VENV)/bin/python
export TESSERA_CACHE_DIR ?= $(ROOT)/.cache/tessera
export TESSERA_PYTHON ?= $(PY)
# jaxlib's MLIR bindings verify Mosaic text and lower Pallas kernels for comparison (tools/).
export TESSERA_JAX_PYTHON ?= $(PY)
# libtpu and the XLA plugins log through absl; keep the output readable.
export TF_CPP_MIN_LOG_LEVEL ?= 3
CARGO ?= cargo
# pip's wheel cache would keep a second copy of torch and its CUDA packages (~3 GB) on disk.
export PIP_NO_CACHE_DIR ?= 1

# PyTorch (the ATen ops' oracle) from PyPI: its x86_64 wheels are CUDA builds (~3 GB with the
# nvidia packages); installed once into the venv and kept.
TORCH := torch==2.15.0
# Real model code for python/tests/test_models.py (small configs, random weights, no downloads);
# torchvision 0.29.2 is the newest on PyPI and runs its models' Python code on torch 2.15.
MODEL_PACKAGES := torchvision==0.29.2 transformers==5.23.0
# The zoo's timm models (python/zoo/catalog.py lists which); not needed by `make test`.
ZOO_PACKAGES := timm==1.0.31
SWEEP_JSON := $(TESSERA_CACHE_DIR)/ops-sweep.json

.PHONY: setup sysdeps venv torch python python-release plugin build demo test test-rust test-python ops-coverage models zoo bench bench-python soak clean-cache

setup: sysdeps venv

# bindgen needs libclang.
sysdeps:
	@if ! ldconfig -p | grep -q 'libclang\(-[0-9.]*\)\?\.so'; then \
	  echo "installing libclang-dev (for bindgen)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev >/dev/null; \
	fi

# The venv carries xla-cpu-pjrt, whose pjrt_c_api.h the runtime's build.rs reads, and jax,
# whose MLIR bindings check Mosaic text (tools/check_mosaic.py, tools/pallas_structure.py).
venv: $(VENV)/.ready
$(VENV)/.ready:
	python3 -m venv $(VENV)
	$(PY) -m pip install -q xla-cpu-pjrt==0.0.1 jax==0.10.2 jaxlib==0.10.2
	touch $@

# torch, pytest and maturin, for the PyTorch bridge (python/) and the ATen op sweep; ninja and
# g++ build kernel ops' C++ CPU implementation (python/tessera/csrc) with torch's cpp_extension.
torch: $(VENV)/.torch3
$(VENV)/.torch3: $(VENV)/.ready
	@command -v g++ >/dev/null || { echo "installing g++ (kernel ops' C++ implementation)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ >/dev/null; }
	$(PY) -m pip install -q $(TORCH) pytest==9.2.0 expecttest hypothesis maturin==1.16.0 ninja==1.13.2 $(MODEL_PACKAGES)
	touch $@

# The bridge: python/ (PyO3) built by maturin into the venv as the package `tessera`.
python: torch
	cd python && VIRTUAL_ENV=$(VENV) PATH=$(VENV)/bin:$$PATH maturin develop -q

# The plugins, installed the way users install them: `tessera plugin install <kind>`.
# CPU runs everything; libtpu compiles for TPU generations without a TPU (AOT).
plugin: setup
	$(CARGO) run -q --bin tessera -- plugin install cpu
	$(CARGO) run -q --bin tessera -- plugin install tpu

build: setup
	$(CARGO) build --workspace --all-targets

demo: setup
	$(CARGO) run --release -q --bin tessera -- plugin install cpu
	$(CARGO) run --release -q --bin tessera -- demo

# Rust tests, then the Python tests (bridge, errors, overrides, the OpInfo sweep), both always.
test: plugin python
	@rc=0; $(MAKE) --no-print-directory test-rust || rc=1; \
	$(MAKE) --no-print-directory test-python || rc=1; exit $$rc

test-rust:
	$(CARGO) test --workspace --no-fail-fast

test-python:
	TESSERA_SWEEP_JSON=$(SWEEP_JSON) $(PY) -m pytest -q python/tests

# The sweep alone; its results go to ops/coverage/sweep.json, merged with the table by
# `tessera ops coverage`.
ops-coverage: plugin python
	time $(PY) python/tools/check_ops.py --all --quiet --out ops/coverage/sweep.json
	$(CARGO) run -q --bin tessera -- ops coverage

# Every model of python/tools/model_routing.py through Tessera's lowerings, with a report.
models: plugin python
	$(PY) python/tools/model_routing.py

# The model zoo (python/zoo): every architecture's forward on torch CPU vs Tessera per mode,
# each model in a restartable worker; writes python/zoo/report/zoo_report.{json,md}. Hours on
# 2 cores (ZOO_ARGS="--models timm/ --modes compiled" narrows it).
ZOO_ARGS ?=
zoo: plugin python $(VENV)/.zoo
	cd python && $(PY) -m zoo.run $(ZOO_ARGS)
$(VENV)/.zoo: $(VENV)/.torch3
	$(PY) -m pip install -q $(ZOO_PACKAGES)
	touch $@

bench: plugin
	$(CARGO) bench --bench runtime --bench kernels

# The bridge built with optimizations, as `pip install ./python` builds it for users (`make
# python` builds it unoptimized for the tests: the device's per-op time is ~5x higher there).
# Unpacked into RELEASE_PY, which the Python benches put first on PYTHONPATH.
RELEASE_PY := $(TESSERA_CACHE_DIR)/python-release
python-release: torch
	cd python && VIRTUAL_ENV=$(VENV) PATH=$(VENV)/bin:$$PATH CARGO_TARGET_DIR=$(ROOT)/target/release-bridge \
	  maturin build --release -q -o $(RELEASE_PY)/wheel
	rm -rf $(RELEASE_PY)/tessera && $(PY) -m zipfile -e $$(ls -t $(RELEASE_PY)/wheel/tessera-*.whl | head -1) $(RELEASE_PY)

# Per-op costs of the tpu device, kernel ops and torch.compile, side by side with torch and JAX.
bench-python: plugin python-release
	PYTHONPATH=$(RELEASE_PY):$(ROOT)/python $(PY) python/tools/bench_device.py
	PYTHONPATH=$(RELEASE_PY):$(ROOT)/python $(PY) python/tools/bench_custom_op.py
	PYTHONPATH=$(RELEASE_PY):$(ROOT)/python $(PY) python/tools/bench_compile.py

# Resident memory over 10,000 distinct shapes (~18 min of compiles; make test runs 520).
soak: plugin
	TESSERA_SOAK_SHAPES=10000 $(CARGO) test -p tessera-runtime --test cache_memory_tests -- --nocapture

clean-cache:
	rm -rf $(TESSERA_CACHE_DIR)
