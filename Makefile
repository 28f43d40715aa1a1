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
# Bytecode is compiled when a module is first imported and cached under build/pycache, outside
# the source tree (no __pycache__ beside lambdas/, whose files are the functions' asset), even
# where the environment sets PYTHONDONTWRITEBYTECODE: every test process and synth imports
# aws-cdk-lib, and compiling its __init__ alone takes most of a second each time.
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(CURDIR)/build/pycache
TEMPLATE := cdk.out/RenewalSagaIndex.template.json
# The Powertools layer and the runtime's boto3, as directories (devkit/layer.py): the deploy
# rehearsal (tests/rehearsal) starts every function with its asset plus exactly these.
LAMBDA_DEPS := build/.lambda-deps
PYTEST_ARGS ?=
# `make test` runs pytest on both cores of a CI machine. --dist loadfile keeps each test file
# (and all of tests/infra, all of tests/rehearsal: tests/conftest.py) on one worker.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile
# Each step of `make test` appends "<step> <milliseconds>" here (wall time); tests/conftest.py
# prints the table again at the end of pytest's summary, above its closing line.
STEP_TIMES := build/.test-steps
TS_CLIENT := clients/typescript
TIMED = timed() { local step=$$1 rc=0 start end; shift; start=$$(date +%s%N); "$$@" || rc=$$?; \
	end=$$(date +%s%N); echo "$$step $$(( (end - start) / 1000000 ))" >> $(STEP_TIMES); \
	return $$rc; }; timed
SHOW_STEPS = awk '$$1 != "start" { printf "  %-28s %7.1f s\n", $$1, $$2 / 1000 }' $(STEP_TIMES)

.PHONY: help deps demo local simulate test static-checks ts-client ts-deps ts-suite ts-package ts-build lint typecheck importlint synth cfn-lint unit component infra conformance rehearsal layer bench lock clean

help:
	@echo "make demo   start a local DynamoDB-compatible server and show the migration end to end"
	@echo "make test   lint, type-check, synth + cdk-nag + cfn-lint, then every test layer"
	@echo "make local  a local table seeded like the demo's, to rehearse the runbook (Ctrl-C stops it)"
	@echo "make synth  synthesise the stack offline into cdk.out/"
	@echo "make bench  run the benchmarks in bench/"

# pip installs uv (requirements-bootstrap.txt), uv everything else, from constraints.txt's pins:
# ~10 s where pip took ~100 s (it resolved twice and compiled all of aws-cdk-lib's 428 MB to
# bytecode). uv reads no pip.conf: a pip index or certificate set in the environment is passed on.
UV_ENV := $(if $(PIP_INDEX_URL),UV_DEFAULT_INDEX=$(PIP_INDEX_URL)) $(if $(PIP_CERT),SSL_CERT_FILE=$(PIP_CERT))
$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-bootstrap.txt constraints.txt pyproject.toml
	@test -x "$(PYTHON)" || { echo "Python 3.11 is required (python3.11 or python3 on PATH)"; exit 1; }
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] >= (3, 11), "Python >= 3.11 required"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements-bootstrap.txt
	$(UV_ENV) $(VENV)/bin/uv pip install --python $(PY) --quiet -c constraints.txt \
		-r requirements-dev.txt -e '.[cli,demo]'
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

# The steps in order, each timed. The installs run side by side (-j3). The TypeScript package's
# install test (ts-package, ~70 s of CPU and as long again waiting on npm and its scratch
# projects) then starts in the background and runs beside everything else; its output goes to
# build/ts-package.log, shown at the end (all of it when it failed). The static checks run two at
# a time (make -j2, longest first: mypy, synth + cdk-nag + cfn-lint, the TypeScript package's
# build, type-check and node:test suites, the layer, ruff, the import contracts), then pytest on
# both cores. make test fails when any of them failed.
TS_PACKAGE_LOG := build/ts-package.log
test:
	@mkdir -p build && echo "start $$(date +%s%3N)" > $(STEP_TIMES)
	@$(TIMED) install $(MAKE) --no-print-directory -j3 --output-sync=target deps ts-deps
	@$(TIMED) ts-package $(MAKE) --no-print-directory ts-package > $(TS_PACKAGE_LOG) 2>&1 & \
	package=$$!; status=0; \
	$(TIMED) static-checks/2-lanes $(MAKE) --no-print-directory -j2 --output-sync=target \
		static-checks || status=$$?; \
	if [ $$status -eq 0 ]; then \
		echo "make test, wall time per step:" && $(SHOW_STEPS); \
		MAKE_TEST_STEPS=$(STEP_TIMES) $(VENV)/bin/pytest $(PYTEST_PARALLEL) \
			-m "not simulation_long and not long" $(PYTEST_ARGS) || status=$$?; \
	fi; \
	package_status=0; wait $$package || package_status=$$?; \
	if [ $$package_status -eq 0 ]; then \
		grep -E '^(✔|ℹ (tests|pass|fail) )' $(TS_PACKAGE_LOG) || true; \
	else \
		cat $(TS_PACKAGE_LOG); \
		echo "the TypeScript package-install test (make ts-package) failed: its output above"; \
	fi; \
	awk '$$1 == "ts-package" { printf "ts-package (in the background) %.1f s\n", $$2 / 1000 }' \
		$(STEP_TIMES); \
	[ $$status -eq 0 ] && [ $$package_status -eq 0 ]

# make starts them left to right as a slot frees, longest first, so no long step starts when the
# other lane is about to run out of work.
static-checks: step-typecheck step-cfn-lint step-ts-suite step-layer step-lint step-importlint

step-%: deps
	@$(TIMED) $(if $(filter cfn-lint,$*),synth+nag+cfn-lint,$*) $(MAKE) --no-print-directory $*

unit component infra conformance: deps
	$(VENV)/bin/pytest tests/$@ $(PYTEST_ARGS)

# The TypeScript client package (clients/typescript): its own locked install (the build tools;
# it has no install scripts), then ts-suite: the build (dist/, which
# tests/conformance/test_typescript_client.py imports) and the strict type-check of sources and
# tests (`npm test`'s pretest: the build, then `tsc -p tsconfig.test.json`, the project `npm run
# typecheck` checks with --noEmit: a type error fails it the same way, so the check is not run a
# second time) and its node:test suite; and ts-package, the package-install test (a clean copy
# packed, the tarball checked with publint and @arethetypeswrong/cli, the README's install lines
# run in scratch projects on Node 20 and on the Node 22 and 24 builds its package-test/
# node-versions lock pins, the README's TypeScript and a consumer compiled and run with an empty
# stderr; ~70 s of CPU, its installs read the npm cache first and reach only the npm registry).
# ts-client is both. `make test` runs ts-suite among the static checks, so dist/ exists before
# pytest, and ts-package beside everything (it packs its own copy, never this folder's dist/).
$(TS_CLIENT)/node_modules/.installed: $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	@command -v node >/dev/null || { echo "Node.js 20 is required on PATH"; exit 1; }
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

ts-deps: $(TS_CLIENT)/node_modules/.installed

ts-suite: ts-deps
	cd $(TS_CLIENT) && npm test --silent

ts-package: ts-deps
	cd $(TS_CLIENT) && npm run --silent test:package

ts-client: ts-suite ts-package

conformance: ts-client

rehearsal: deps $(LAMBDA_DEPS)
	$(VENV)/bin/pytest tests/rehearsal $(PYTEST_ARGS)

# The demo synthesises the stack itself when cdk.out is stale (quietly: it says synthesis's notes
# once, as its first lines, instead of synth's own report breaking into the steps).
demo: deps
	$(PY) -m devkit.demo $(DEMO_ARGS)

# A local table to follow docs/runbook.md by hand: prints what to export, serves until Ctrl-C.
local: deps
	$(PY) -m devkit.local $(LOCAL_ARGS)

# The TypeScript package built from its sources (bench.ts_vs_python runs it beside Python).
ts-build: ts-deps
	cd $(TS_CLIENT) && npm run --silent build

bench: deps synth ts-build
	$(PY) -m bench

# More seeds of the protocol simulator (tests/sim) than `make test` runs, its long scenario and
# the tests at production-like size (-m long): make simulate SEEDS=50
SEEDS ?= 20
simulate: deps
	PYTHONPATH=lambdas:. $(PY) -m tests.sim --seeds $(SEEDS)
	$(VENV)/bin/pytest tests/sim tests/component/test_backfill_cli_contended.py \
		-m "simulation_long or long" $(PYTEST_ARGS)

lock: deps
	{ echo "# Every transitive dependency, pinned (pip freeze of requirements-dev.txt on Python 3.11)."; \
	  echo "# Regenerate: make lock"; $(PY) -m pip freeze --exclude-editable | grep -v '^-e'; } > constraints.txt

clean:
	rm -rf cdk.out build .pytest_cache .mypy_cache .ruff_cache .import_linter_cache results
