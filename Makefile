# sluice — developer entry points. `make test` is the README's test command and what CI runs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_WORKERS ?= 2

.PHONY: install lint test test-unit test-e2e bench binaries cluster-up cluster-down dev-up dev-down demo demo-down clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

lint: install
	$(VENV)/bin/ruff check sluice tests bench
	$(VENV)/bin/ruff format --check sluice tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

## The README's test command: lint, then unit + integration tests in parallel, then the
## end-to-end suite on the living local cluster (built once, cached under ~/.cache/sluice).
test: lint binaries
	$(PY) -m pytest -n $(PYTEST_WORKERS) tests/unit tests/integration
	$(PY) -m pytest tests/e2e

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
	$(PY) -m bench.bench_fast_path
	$(PY) -m bench.bench_topology
	$(PY) -m bench.bench_webhooks
	$(PY) -m bench.bench_operator
	$(PY) -m bench.bench_dashboard
	$(PY) -m bench.bench_operator_scale
	$(PY) -m bench.bench_failover
	$(PY) -m bench.bench_pods

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
