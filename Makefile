# Every target that runs project code depends on the install stamp, so `make generate`
# and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# JAX and folx, for bench/taylor_speed.py's comparison columns (bench only).
JAX_VENV := .venv-jax
PYTEST_ARGS ?= -n auto
# The device the suite runs on (tests/devices.py): `make test DEVICE=cuda` where a
# GPU exists; a device torch cannot use stops the run before it starts.
DEVICE ?= cpu

.PHONY: install generate build check-generated check-wheel test test-models validate lint format bench fuzz clean

install: $(STAMP)

# setuptools tells every editable install of a package mapped from another
# directory (dualgen from runtime/) to beware of folders named like the package: a
# notice, not a problem here (there is no dualgen/ folder), silenced by its text.
# pip at -qq prints errors only: machines whose pip config names package folders
# they lack get one warning per package otherwise.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -qq --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" \
		$(PY) -m pip install -qq -c constraints.txt -e '.[dev]'
	$(VENV)/bin/dualgen build
	touch $(STAMP)

# The C++ kernels (extension dualgen_cpp): ninja recompiles changed sources only.
build: $(STAMP)
	$(VENV)/bin/dualgen build

generate: $(STAMP)
	$(VENV)/bin/dualgen generate
	$(VENV)/bin/dualgen build

check-generated: $(STAMP)
	$(VENV)/bin/dualgen generate --check

# The wheel as users install it: built, installed into a fresh environment with the
# pinned torch, and run from outside the checkout (tests/packaging/check_wheel.py).
check-wheel: build
	$(PY) tests/packaging/check_wheel.py

# Everything with the C++ kernels (the default once built), then the runtime's
# tests again with the Python kernels: both backends stay correct. The second pass
# leaves out the tests that already ran each backend in turn (`backend` fixture).
RUNTIME_TESTS := tests/runtime tests/harness tests/fuzz/test_regressions.py tests/distributed

test: build
	DUALGEN_TEST_DEVICE=$(DEVICE) $(PY) -m pytest $(PYTEST_ARGS) --ignore=tests/models
	DUALGEN_TEST_DEVICE=$(DEVICE) DUALGEN_KERNELS=python \
		$(PY) -m pytest $(PYTEST_ARGS) --without-backend-pairs $(RUNTIME_TESTS)

# The real-model suite (tests/models): transformers families and torch.nn staples,
# with the `models` extra (transformers) installed first.
MODELS_STAMP := $(VENV)/.installed-models

$(MODELS_STAMP): $(STAMP)
	PYTHONWARNINGS="ignore:Editable installation" \
		$(PY) -m pip install -qq -c constraints.txt -e '.[dev,models]'
	touch $(MODELS_STAMP)

test-models: build $(MODELS_STAMP)
	DUALGEN_TEST_DEVICE=$(DEVICE) $(PY) -m pytest $(PYTEST_ARGS) tests/models

# Every kernel of the spec through gradcheck (slow, fast, adjoint), float64 and
# complex128; the report lands in reports/validate.{md,html}. Device-only ops
# (the CUDA attention kernels) run through the tests' reference CPU kernels.
validate: $(STAMP)
	$(VENV)/bin/dualgen validate --import tests.device_references --report reports/validate

# Differential fuzzing against native forward AD (and, nested, torch.func) for
# FUZZ_SECONDS (default 300) or FUZZ_EXAMPLES programs (both given: whichever
# ends first); the summary by cause lands in reports/fuzz.md.
FUZZ_SECONDS ?=
FUZZ_EXAMPLES ?=

fuzz: $(STAMP)
	$(PY) -m tests.fuzz.run $(if $(FUZZ_SECONDS),--seconds $(FUZZ_SECONDS)) \
		$(if $(FUZZ_EXAMPLES),--examples $(FUZZ_EXAMPLES)) --report reports/fuzz.md

lint: $(STAMP)
	$(PY) -m ruff check tools runtime tests bench examples/forward_gradient examples/distributed
	$(PY) -m black --check --quiet tools runtime tests bench examples/forward_gradient examples/distributed

format: $(STAMP)
	$(PY) -m ruff check --fix tools runtime tests bench examples/forward_gradient examples/distributed
	$(PY) -m black --quiet tools runtime tests bench examples/forward_gradient examples/distributed

bench: $(STAMP) $(MODELS_STAMP) $(JAX_VENV)/bin/python
	$(PY) bench/generate_speed.py
	$(PY) bench/contributor_loop.py
	$(PY) bench/startup.py
	$(PY) bench/runtime_speed.py --per-op
	$(PY) bench/forward_gradient.py
	$(PY) bench/memory.py
	$(PY) bench/functional_speed.py
	$(PY) bench/taylor_speed.py --jax-python $(JAX_VENV)/bin/python
	$(PY) bench/fx_speed.py --compile
	$(PY) bench/distributed_speed.py
	$(PY) bench/distributed_native.py
	$(PY) -m tests.models.table
	$(PY) bench/cpp_build.py
	$(PY) bench/gradcheck_speed.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache build

$(JAX_VENV)/bin/python:
	$(PYTHON) -m venv $(JAX_VENV)
	$(JAX_VENV)/bin/pip install -q jax==0.10.2 jaxlib==0.10.2 folx==0.2.30 numpy
