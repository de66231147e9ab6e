# gpufleet: `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(VENV)/.installed: pyproject.toml constraints.txt
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	@touch $@

.PHONY: install
install: $(VENV)/.installed ## Create .venv and install gpufleet with its dev tools

.PHONY: generate
generate: install ## Regenerate the CRD (crds/ and the chart's copy) from the models
	$(PY) -m gpufleet.api.generate

.PHONY: lint
lint: install ## ruff lint and format check, import-linter contracts
	$(VENV)/bin/ruff check operator tests tools
	$(VENV)/bin/ruff format --check operator tests tools
	$(VENV)/bin/lint-imports

.PHONY: typecheck
typecheck: install ## mypy --strict with the pydantic plugin
	$(VENV)/bin/mypy

.PHONY: verify
verify: generate lint typecheck ## Regenerate and fail if anything changed; lint; typecheck
	$(PY) tools/derive_profiles.py --check --quiet
	@git diff --exit-code -- crds charts docs || (echo "Generated files are stale: run make generate and commit." && exit 1)

.PHONY: tools
tools: install ## Build (or reuse the cached) control plane, helm, Prometheus 3 and actionlint; install Prometheus 2 and kubectl
	bash tests/cluster/build.sh >/dev/null
	bash tests/prometheus3/build.sh >/dev/null
	$(PY) -c 'from gpufleet.dev import tools; tools.ensure_prometheus(); print("kubectl", tools.kubectl()); print("helm", tools.helm()); print("actionlint", tools.actionlint())'

.PHONY: unit
unit: install ## Unit tests only (pure, seconds)
	$(VENV)/bin/pytest tests/unit -q

PYTEST_ARGS ?=
.PHONY: test
test: tools ## The full test suite: unit, integration (real control plane, Prometheus), e2e
	$(VENV)/bin/pytest tests $(PYTEST_ARGS)

.PHONY: cluster
cluster: tools ## Start a local control plane with GPU nodes (Ctrl-C stops it)
	$(VENV)/bin/gpufleet dev cluster up

.PHONY: run
run: install ## Run the operator against the current kubeconfig (PROMETHEUS_URL=... for metrics)
	$(VENV)/bin/gpufleet run --no-leader-election --bind-address 127.0.0.1 \
		$(if $(PROMETHEUS_URL),--prometheus-url $(PROMETHEUS_URL),)

# helm v4 from the local control plane's Go build (built once, then cached).
HELM ?= $(shell $(PY) -c 'from gpufleet.dev import tools; print(tools.helm())')
IMAGE ?= gpufleet:$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)

.PHONY: helm-lint
helm-lint: install ## helm lint --strict the chart, then its unit tests (golden files, schema, RBAC)
	$(HELM) lint --strict charts/gpufleet
	GPUFLEET_HELM=$(HELM) $(VENV)/bin/pytest tests/unit/chart -q

.PHONY: image
image: ## Build the operator image (needs a Docker engine): make image IMAGE=registry/gpufleet:tag
	@command -v docker >/dev/null 2>&1 || { echo "make image: docker is not installed; install Docker (with BuildKit) to build $(IMAGE)." >&2; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "make image: no Docker engine is reachable (docker info failed), so $(IMAGE) cannot be built on this machine. Start dockerd or point DOCKER_HOST at an engine." >&2; exit 1; }
	DOCKER_BUILDKIT=1 docker build --tag $(IMAGE) .

.PHONY: bench-sim
bench-sim: install ## Simulator: the trace suite (Azure, synthetic), gpufleet vs baselines and oracle; PASS/MISS per target; writes BENCHMARKS.md
	$(PY) tools/bench_sim.py

.PHONY: bench-hedging
bench-hedging: install ## Simulator: gpufleet with and without hedgePreemptible, preemptible 4090s, Azure trace; writes BENCHMARKS.md
	$(PY) tools/bench_hedging.py

.PHONY: profiles
profiles: install ## Re-derive the built-in performance profiles from the io.net runs
	$(PY) tools/derive_profiles.py

.PHONY: bench-pools
bench-pools: install ## Simulator: gpufleet vs static-split and the oracle on other pool shapes (one tier, three, loose objectives); writes BENCHMARKS.md
	$(PY) tools/bench_pools.py

.PHONY: bench-daily
bench-daily: install ## Simulator: a 09:00 step every day, day one against the days after (the daily pattern); writes BENCHMARKS.md
	$(PY) tools/bench_daily.py

.PHONY: bench-planner
bench-planner: install ## Planner: median plan time (4 tiers x 4 classes), 1,000 pools
	$(PY) tools/bench_planner.py

.PHONY: bench-model
bench-model: install ## GPU performance model vs all 130 io.net runs, cross-validated, Vidur; writes BENCHMARKS.md
	$(PY) tools/bench_model.py

.PHONY: bench-profiles
bench-profiles: install ## Built-in profiles vs the first-principles engine; the derived GPU types; writes BENCHMARKS.md
	$(PY) tools/bench_profiles.py

.PHONY: bench-operator
bench-operator: tools ## Operator: 1,000 pools on one process, 2,000 on 4 sharded replicas, one killed (~30 min)
	$(PY) tools/bench_operator.py --pools 1000 --sharded-pools 2000 --replicas 4 --shards 8

.PHONY: bench
bench: bench-planner bench-model bench-profiles bench-sim bench-pools bench-daily bench-hedging bench-operator ## Every benchmark, ratios side by side (BENCHMARKS.md)

.PHONY: demo
demo: tools ## The closed loop: plane, Prometheus, fleet twin and operator under a load story (~6 min)
	$(VENV)/bin/gpufleet dev demo --config examples/demo/demo.yaml --output-dir out/demo
