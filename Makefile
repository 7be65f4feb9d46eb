# sluice — developer entry points. `make test` is the README's test command and what CI runs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_WORKERS ?= 2

.PHONY: install lint test test-unit test-e2e bench binaries cluster-up cluster-down dev-up dev-down demo demo-down chaos clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

lint: install
	$(VENV)/bin/ruff check sluice tests bench hack/chaos
	$(VENV)/bin/ruff format --check sluice tests bench hack/chaos
	$(VENV)/bin/mypy
	MYPYPATH=hack $(VENV)/bin/mypy --strict --follow-imports=silent hack/chaos
	$(VENV)/bin/lint-imports

## The README's test command: lint, then unit + integration tests in parallel, then the
## end-to-end suite on the living local cluster (built once, cached under ~/.cache/sluice).
## Last, a short fault soak (2 minutes, the fixed seed) on a cluster of its own.
test: lint binaries
	$(PY) -m pytest -n $(PYTEST_WORKERS) tests/unit tests/integration
	$(PY) -m pytest tests/e2e
	$(MAKE) chaos CHAOS_MINUTES=2 CHAOS_SEED=25 CHAOS_SEEDS= CHAOS_FAULTS=1

test-unit: install
	$(PY) -m pytest -n $(PYTEST_WORKERS) tests/unit tests/integration

test-e2e: install binaries
	$(PY) -m pytest tests/e2e

binaries:
	hack/build-binaries

cluster-up: install binaries
	$(PY) hack/cluster-up

cluster-down:
	$(PY) hack/cluster-down

## The whole system locally: the living cluster + CRDs + webhooks + operator (logs in .cluster/).
dev-up: install binaries
	$(PY) hack/dev-up

dev-down:
	$(PY) hack/dev-down

## From `helm install` to a reclaim on the local cluster's fake nodes; `make demo-down` removes it.
demo: install binaries
	$(PY) hack/demo

demo-down: dev-down

## Benchmarks print their numbers; the targets are in each script's docstring.
bench: install
	$(PY) -m bench.bench_scheduler
	$(PY) -m bench.bench_scheduler --devices
	$(PY) -m bench.bench_scheduler --flavors
	$(PY) -m bench.bench_scheduler --resizable
	$(PY) -m bench.bench_decision_pass
	$(PY) -m bench.bench_reading
	$(PY) -m bench.bench_reading --devices
	$(PY) -m bench.bench_topology
	$(PY) -m bench.bench_webhooks
	$(PY) -m bench.bench_operator
	$(PY) -m bench.bench_dashboard
	$(PY) -m bench.bench_operator_scale
	$(PY) -m bench.bench_failover
	$(PY) -m bench.bench_pods

## A fault soak on the living cluster (hack/chaos/README.md): CHAOS_MINUTES (10), CHAOS_SEED,
## CHAOS_SEEDS="25 4242 7" for several soaks in turn (a cluster each; fails if any has
## violations), CHAOS_FAULTS=0 for the same soak without faults (the baseline of its decisions
## per minute).
CHAOS_MINUTES ?= 10
CHAOS_SEED ?= 25
CHAOS_SEEDS ?=
CHAOS_FAULTS ?= 1
chaos: install binaries
	CHAOS_MINUTES=$(CHAOS_MINUTES) CHAOS_SEED=$(CHAOS_SEED) CHAOS_SEEDS="$(CHAOS_SEEDS)" \
		CHAOS_FAULTS=$(CHAOS_FAULTS) $(PY) hack/chaos

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
