# Every target bootstraps .venv on first use: a fresh machine needs only Python >= 3.11 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev
PYTEST_ARGS ?=

.PHONY: help venv upstream preview test lint typecheck check bench clean e2e-tools cluster e2e

help:
	@echo "make preview [STACK=dev]  offline preview of a stack under Pulumi mocks (writes build/<stack>/)"
	@echo "make upstream             fetch the pinned Kueue/JobSet reference data the tests read (upstream.lock.json)"
	@echo "make test                 lint, type-check and the offline test suite (fetches the reference data on first use)"
	@echo "make cluster [STACK=dev]  the platform on fake TPU v6e nodes on 127.0.0.1, until Ctrl-C (docs/playground.md)"
	@echo "make cluster STACK=       a bare local control plane (Kubernetes only) from upstream sources"
	@echo "make e2e                  build (or reuse) it and run the suite against the real servers (build/e2e/report.json)"
	@echo "make bench                hotswap simulator and planner scaling benchmark (writes build/bench/)"
	@echo "make clean                remove build output and the virtualenv"

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

venv: $(BIN)/.installed

# checkov's pins conflict with the kubernetes client, so it gets a virtualenv of its own.
CHECKOV := .venv-checkov/bin/checkov
$(CHECKOV):
	$(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/pip install --quiet --upgrade pip
	.venv-checkov/bin/pip install --quiet 'checkov>=3.3,<4'

# The tests read the real Kueue/JobSet CRDs, charts and webhook sources at the pinned tags, verified by sha256.
# Offline machines point GKE_TPU_UPSTREAM_DIR at a directory of the same layout instead.
upstream: venv
	$(BIN)/python -m tools.upstream fetch

preview: venv
	$(BIN)/python -m tools.preview --stack $(STACK)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy cannot follow setuptools' editable import hook, so it reads the package through a tree of links laid out as
# the wheel installs it (build/typecheck/gke_tpu_priority/{components,hotswap,policies}).
TYPECHECK_TREE := build/typecheck/gke_tpu_priority
typecheck: venv
	@mkdir -p $(TYPECHECK_TREE)
	@for p in components hotswap policies; do ln -sfn ../../../$$p $(TYPECHECK_TREE)/$$p; done
	MYPYPATH=build/typecheck $(BIN)/mypy -p gke_tpu_priority -p sim -p testkit -p tools -p e2e

test: lint typecheck $(CHECKOV)
	@$(BIN)/python -m tools.upstream ensure
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: venv
	$(BIN)/python -m sim bench --out build/bench

clean:
	rm -rf build $(VENV) .venv-checkov .venv-e2e-pulumi .cache/upstream

# The real control plane: Kubernetes, etcd, kwok, Helm, JobSet and Kueue built from their upstream Go modules
# (e2e/go/*/go.mod), cached outside the tree ($GKE_TPU_E2E_CACHE, default ~/.cache/gke-tpu-priority/e2e).
e2e-tools: venv
	$(BIN)/python -m tools.toolchain build --record build/e2e/builds.json

# STACK= (empty) gives the bare control plane; the playground builds only the six tools it runs, not the Pulumi engine.
cluster: venv
	$(BIN)/python -m e2e.cluster $(if $(STACK),--stack $(STACK))

# The real `pulumi up` runs the package in a virtualenv of its own: pulumi-kubernetes pinned to the provider release
# e2e-tools builds (the package itself accepts any 4.x from 4.25).
E2E_PULUMI_VENV := .venv-e2e-pulumi
$(E2E_PULUMI_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(E2E_PULUMI_VENV)
	$(E2E_PULUMI_VENV)/bin/pip install --quiet --upgrade pip
	$(E2E_PULUMI_VENV)/bin/pip install --quiet -e '.[policy]' 'pulumi-kubernetes==4.25.0'
	@touch $@

e2e: e2e-tools $(E2E_PULUMI_VENV)/.installed
	$(BIN)/python -m pytest e2e -o timeout=900 $(E2E_ARGS)
