# The README's two commands are `make demo` and `make test`; each installs what it needs.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1
TEMPLATE := cdk.out/RenewalSagaIndex.template.json
# The Powertools layer and the runtime's boto3, as directories (devkit/layer.py): the deploy
# rehearsal (tests/rehearsal) starts every function with its asset plus exactly these.
LAMBDA_DEPS := build/.lambda-deps
PYTEST_ARGS ?=

.PHONY: help deps demo test lint typecheck importlint synth cfn-lint unit component infra conformance rehearsal layer bench lock clean

help:
	@echo "make demo   start a local DynamoDB-compatible server and show the migration end to end"
	@echo "make test   lint, type-check, synth + cdk-nag + cfn-lint, then every test layer"
	@echo "make synth  synthesise the stack offline into cdk.out/"
	@echo "make bench  run the benchmarks in bench/"

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	@test -x "$(PYTHON)" || { echo "Python 3.11 is required (python3.11 or python3 on PATH)"; exit 1; }
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] >= (3, 11), "Python >= 3.11 required"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet -c constraints.txt -e '.[demo]'
	touch $@

node_modules/.installed: package.json package-lock.json
	@command -v node >/dev/null || { echo "Node.js 20 is required on PATH"; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

deps: $(VENV)/.installed node_modules/.installed

$(LAMBDA_DEPS): requirements.txt constraints.txt devkit/layer.py $(VENV)/.installed
	$(PY) -m devkit.layer
	touch $@

layer: $(LAMBDA_DEPS)

synth: deps
	CDK_OUTDIR=cdk.out $(PY) app.py

lint: deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: deps
	$(VENV)/bin/mypy lambdas infra devkit bench app.py

# The layering as import contracts ([tool.importlinter] in pyproject.toml).
importlint: deps
	PYTHONPATH=lambdas:. $(VENV)/bin/lint-imports

cfn-lint: synth
	$(VENV)/bin/cfn-lint $(TEMPLATE) --ignore-checks W3005

test: lint typecheck importlint cfn-lint $(LAMBDA_DEPS)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

unit component infra conformance: deps
	$(VENV)/bin/pytest tests/$@ $(PYTEST_ARGS)

rehearsal: deps $(LAMBDA_DEPS)
	$(VENV)/bin/pytest tests/rehearsal $(PYTEST_ARGS)

demo: deps synth
	$(PY) -m devkit.demo

bench: deps synth
	$(PY) -m bench

lock: deps
	{ echo "# Every transitive dependency, pinned (pip freeze of requirements-dev.txt on Python 3.11)."; \
	  echo "# Regenerate: make lock"; $(PY) -m pip freeze --exclude-editable | grep -v '^-e'; } > constraints.txt

clean:
	rm -rf cdk.out build .pytest_cache .mypy_cache .ruff_cache .import_linter_cache results
