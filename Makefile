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
	$(VENV)/bin/ruff check operator tests
	$(VENV)/bin/ruff format --check operator tests
	$(VENV)/bin/lint-imports

.PHONY: typecheck
typecheck: install ## mypy --strict with the pydantic plugin
	$(VENV)/bin/mypy

.PHONY: verify
verify: generate lint typecheck ## Regenerate and fail if anything changed; lint; typecheck
	@git diff --exit-code -- crds charts || (echo "Generated files are stale: run make generate and commit." && exit 1)

.PHONY: unit
unit: install ## Unit tests only (pure, seconds)
	$(VENV)/bin/pytest tests/unit -q

.PHONY: test
test: install ## The full test suite: unit, integration (real control plane), e2e
	$(VENV)/bin/pytest tests -q
