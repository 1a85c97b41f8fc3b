# The template's own commands. Quick start: `make demo`, then `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements-dev.txt requirements-tf.txt 2>/dev/null | sha256sum | cut -c1-12)

# tests/test_docs.py parses the mermaid diagrams of docs/ and of a bake's docs/ with pinned npm packages (tests/docs-check/package-lock.json).
DOCS_CHECK := tests/docs-check/node_modules/.installed

.PHONY: help venv demo test test-fast lint format clean

help:  ## List the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(STAMP): requirements-dev.txt requirements-tf.txt
	@echo "==> creating $(VENV) and installing pinned dependencies"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@rm -f $(VENV)/.installed-* && touch $@

venv: $(STAMP)  ## Create .venv with the pinned dependencies

demo: $(STAMP)  ## Bake a sample project under build/, run it on the emulator, print a transcript
	@$(BIN)/python tests/demo.py

.PHONY: bench proofs
bench: $(STAMP)  ## Benchmark a default bake against the seed's sample; writes docs/performance.md
	@rm -rf build/bench && $(BIN)/cookiecutter --no-input -o build/bench $(CURDIR) >/dev/null
	@cd build/bench/* && LOAD_JSON=$(CURDIR)/build/bench/load.json $(CURDIR)/$(BIN)/python $(CURDIR)/tests/proofs/prove.py . \
		tests/test_load.py && ../../../$(BIN)/python $(CURDIR)/benchmarks/run.py --runs 200 --import-runs 15 \
		--load-json ../load.json --write ../../../docs/performance.md

proofs: $(STAMP)  ## Run the template's proofs of the protocol (faults, outages, load...) on a bake: make proofs BAKE=<dir>
	@test -n "$(BAKE)" || { echo "usage: make proofs BAKE=<a baked project's directory>"; exit 2; }
	@$(BIN)/python tests/proofs/prove.py $(BAKE)

$(DOCS_CHECK): tests/docs-check/package-lock.json
	@echo "==> installing the pinned mermaid parser for the docs test (npm ci in tests/docs-check)"
	@npm ci --prefix tests/docs-check --no-fund --no-audit --loglevel=error
	@touch $@

test: $(STAMP) $(DOCS_CHECK)  ## Run the template's whole test suite (bakes, baked suites, hooks, Terraform)
	@$(BIN)/python -m pytest

test-fast: $(STAMP) $(DOCS_CHECK) lint  ## The fast loop, under 3 minutes: lint, the template's unit tests, one default bake's suite
	@$(BIN)/python -m pytest -q -m fast

lint: $(STAMP)  ## Lint the template's own Python
	@$(BIN)/ruff check hooks tests benchmarks terraform packages && $(BIN)/ruff format --check hooks tests benchmarks terraform packages

format: $(STAMP)  ## Format the template's own Python
	@$(BIN)/ruff check --fix hooks tests benchmarks terraform packages && $(BIN)/ruff format hooks tests benchmarks terraform packages

.PHONY: tfdoc
tfdoc: $(STAMP)  ## Rewrite the inputs and outputs tables of each module's README from its variables and outputs
	@$(BIN)/python terraform/tfdoc.py

clean:  ## Remove build output and venvs
	rm -rf build $(VENV) .venv-checkov .venv-standin .pytest_cache
