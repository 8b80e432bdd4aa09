# flashgnn: two commands on a fresh machine — `make demo` and `make test`.
# Everything else here is what those two call, plus `make bench*`.

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
CARGO ?= cargo
DATA ?= data
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup develop demo test test-rust test-python test-slow bench bench-build clean fmt

$(VENV)/.stamp: pyproject.toml requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

setup: $(VENV)/.stamp

# Release build of the extension into the venv (maturin develop).
develop: setup
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VENV)/bin/maturin develop --release --quiet

demo: develop
	$(PY) -m flashgnn.demo --data $(DATA)

test: develop test-rust test-python

test-rust:
	$(CARGO) test --workspace --exclude flashgnn-python --quiet

test-python: develop
	$(PY) -m pytest -q

test-slow: develop
	$(PY) -m pytest -q -m slow

bench: develop bench-build

# Out-of-core build benchmark: raw input >= 4x --memory-budget (see docs/benchmarks.md).
bench-build: develop
	$(PY) -m flashgnn.bench.build_ooc --data $(DATA)/bench --budget $${BUDGET:-2GiB} --factor $${FACTOR:-4} $${JSON:+--json $$JSON}

fmt:
	$(CARGO) fmt --all

clean:
	rm -rf target $(VENV) $(DATA)
