# Anchorage — every target sets itself up: a virtualenv in .venv, the package and its dev tools,
# and (as root, where apt-get exists) the system packages the sandbox and the tests use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml devcluster/pyproject.toml constraints.txt | sha1sum | cut -c1-12)
SYSTEM_PACKAGES := bubblewrap prometheus poppler-utils iproute2 chromium buildah debootstrap

.PHONY: demo test lint unit system venv agents kube s3 images lock clean

## demo: run the demo campaign on the embedded default and print the leaderboard
demo: venv system
	$(BIN)/anchorage run examples/demo.yaml

## test: lint (ruff, mypy strict, import-linter, CRD drift) and the whole test suite (the real-cluster tests
## run against the control plane `make kube` builds once into the cache)
test: venv system kube s3
	@status=0; \
	$(MAKE) --no-print-directory lint || { status=1; echo "lint FAILED (the tests run anyway)"; }; \
	$(MAKE) --no-print-directory unit || status=1; \
	exit $$status

lint: venv
	$(BIN)/ruff check operator devcluster tests bench tools
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: venv system agents
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## s3: build (once, cached by version) the pinned S3 server the store's tests run against: versitygw (needs Go)
s3:
	@bash tools/s3/build.sh

## images: build the agent, verifier and operator images with buildah (no Docker engine) and run their smoke commands
images: venv
	$(BIN)/python tools/images.py build agent-base verifier operator --smoke

## agents: the pinned agent CLIs (codex, claude-code, opencode) from npm into the cache, once (reused after)
agents: venv
	@command -v npm >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing system packages: nodejs npm"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; \
	  else echo "note: npm is missing (the real agent CLI tests say so and skip)"; fi; }
	@if command -v npm >/dev/null; then $(BIN)/anchorage agents install all \
	  || echo "agents install failed: the real agent CLI tests will fail with the reason"; fi

venv: $(STAMP)

$(STAMP): pyproject.toml devcluster/pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,inspect]'
	# Harbor's own pydantic models read the Harbor export in the tests (Harbor pins Python >= 3.12; its models
	# load on 3.11 with typing shims, see tests/interop/harbor_check.py)
	$(BIN)/python -m pip install --quiet --no-deps --ignore-requires-python harbor==0.25.0
	$(BIN)/python -m pip install --quiet toml shortuuid dirhash
	$(BIN)/python -m pip install --quiet -e ./devcluster
	$(BIN)/python -m pip install --quiet --ignore-requires-python helm-sdkpy
	touch $@

## system: Debian packages for the sandbox (bubblewrap), Prometheus, figure rendering (poppler), the viewer's
## browser tests (chromium, driven by Playwright; no browser download) and image builds without a Docker engine
## (buildah, debootstrap: `make images`, tests/images and tests/agents build the images once, cached by content)
system:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing system packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "note: missing system packages:$$missing (install them as root; tests that need them say so and skip)"; fi; \
	fi

## kube: build (once, cached by version) the pinned Kubernetes control plane the real-cluster tests and
## `anchorage dev cluster` run: kube-apiserver, controller manager, scheduler, kubectl, etcd (needs Go)
kube:
	@bash tools/kube/build.sh

## lock: the images' locked requirements (every dependency pinned, with hashes; Python 3.12, linux/amd64); the
## operator image's at the versions this virtualenv tests with (its pip freeze as constraints)
LOCK := $(BIN)/uv pip compile --generate-hashes --python-version 3.12 --python-platform x86_64-manylinux_2_28 \
	--quiet --custom-compile-command "make lock"
lock: venv
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/python -m pip freeze --exclude-editable > $(VENV)/tested-versions.txt
	$(LOCK) images/verifier/requirements.in -o images/verifier/requirements.txt
	$(LOCK) pyproject.toml -c $(VENV)/tested-versions.txt -o images/operator/requirements.txt

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache runs
