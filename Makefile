# Anchorage — every target sets itself up: a virtualenv in .venv, the package and its dev tools,
# and (as root, where apt-get exists) the system packages the sandbox and the tests use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml devcluster/pyproject.toml constraints.txt | sha1sum | cut -c1-12)
SYSTEM_PACKAGES := bubblewrap libseccomp2 prometheus poppler-utils iproute2 chromium buildah debootstrap \
	containerd runc containernetworking-plugins iptables ipset conntrack
#: pytest's workers: four on the machine's two cores — the real-cluster tests in two groups, each on a worker with a
#: session cluster of its own (tests/budget.py), mostly waiting on their pods, and two workers for the rest (measured
#: side by side: three workers kept the cores 84-86 % busy and took 1,105-1,133 s, four 92 % and 994 s)
PYTEST_WORKERS ?= -n 4 --dist loadgroup
#: the installer of the virtualenv (and of `make lock`): uv, pinned
UV_PIN := uv==0.13.9
UV := $(BIN)/uv pip install --quiet --python $(BIN)/python

.PHONY: demo test test-fast lint unit system venv agents kube s3 images images-cached lock clean

## demo: run the demo campaign on the embedded default and print the leaderboard
demo: venv system
	$(BIN)/anchorage run examples/demo.yaml

## test: set up everything, lint (ruff, mypy strict, import-linter) and run the whole test suite — each phase timed
## (tools/testrun.sh prints the table; pytest prints the time per test folder and the 25 slowest tests)
test:
	@bash tools/testrun.sh

## test-fast: one area quickly, for developers (not what CI runs): the tests that need no cluster and are not slow,
## on four workers; narrow it further with PYTEST_ARGS (e.g. PYTEST_ARGS=tests/scoring)
test-fast: venv system
	$(BIN)/python -m pytest $(PYTEST_WORKERS) -m "not slow and not cluster" $(PYTEST_ARGS)

#: mypy's cache beside the other caches: it checks each file's hash, so a clean clone of the same code reuses it
CACHE := $(or $(ANCHORAGE_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/anchorage)
lint: venv
	$(BIN)/ruff check operator devcluster tests bench tools
	MYPY_CACHE_DIR=$(CACHE)/mypy $(BIN)/mypy
	$(BIN)/lint-imports

unit: venv system agents
	$(BIN)/python -m pytest $(PYTEST_WORKERS) --durations=25 $(PYTEST_ARGS)

## s3: build (once, cached by version) the pinned S3 server the store's tests run against: versitygw (needs Go)
s3:
	@bash tools/s3/build.sh

## images: build the agent, verifier and operator images with buildah (no Docker engine) and run their smoke commands
images: venv
	$(BIN)/python tools/images.py build agent-base verifier operator tasks --smoke

## images-cached: the same images, built when their content changed, without the smoke commands (tests/images runs them)
images-cached: venv system
	$(BIN)/python tools/images.py build agent-base verifier operator tasks

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
	# uv installs what pip would (the same constraints), from its cache on a second run: seconds, not minutes
	$(BIN)/python -m pip install --quiet $(UV_PIN)
	$(UV) -c constraints.txt -e '.[dev,inspect,agent-stack]' -e ./devcluster toml shortuuid dirhash
	# Harbor's own pydantic models read the Harbor export in the tests (Harbor pins Python >= 3.12; its models
	# load on 3.11 with typing shims, see tests/interop/harbor_check.py): pip, which can ignore that pin
	$(BIN)/python -m pip install --quiet --no-deps --ignore-requires-python harbor==0.25.0
	$(BIN)/python -m pip install --quiet --ignore-requires-python helm-sdkpy
	# compiled as pip compiles (the sandbox's view of this virtualenv is read-only): the bytecode of the same lock is
	# reused from the cache, only what is missing or stale compiled (tools/bytecode.py)
	$(BIN)/python tools/bytecode.py $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
	  $(CACHE)/bytecode/$(subst .installed-,lock-,$(notdir $(STAMP)))
	touch $@

## system: Debian packages for the sandbox (bubblewrap; libseccomp2, the compiler of its seccomp filter: apt brings it,
## named so it is never missing; setpriv and unshare come with util-linux, an essential package), Prometheus, figure
## rendering (poppler), the viewer's browser tests (chromium, driven by Playwright; no browser download), image
## builds without a Docker engine (buildah, debootstrap: `make images`, cached by content) and the dev cluster's real
## nodes (containerd, runc, the CNI plugins, iptables, ipset, conntrack)
system:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing system packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "note: missing system packages:$$missing (install them as root; tests that need them say so and skip)"; fi; \
	fi

## kube: build (once, cached by version) the pinned Kubernetes binaries the real-cluster tests and `anchorage dev
## cluster` run: control plane, kubelet, kube-proxy, kubectl, etcd, CoreDNS, kube-router, pause, registry (needs Go)
kube:
	@bash tools/kube/build.sh

## lock: the images' locked requirements (every dependency pinned, with hashes; Python 3.12, linux/amd64); the
## operator image's at the versions this virtualenv tests with (its pip freeze as constraints)
LOCK := $(BIN)/uv pip compile --generate-hashes --python-version 3.12 --python-platform x86_64-manylinux_2_28 \
	--quiet --custom-compile-command "make lock"
lock: venv
	$(BIN)/python -m pip freeze --exclude-editable > $(VENV)/tested-versions.txt
	$(LOCK) images/verifier/requirements.in -o images/verifier/requirements.txt
	$(LOCK) pyproject.toml -c $(VENV)/tested-versions.txt -o images/operator/requirements.txt

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache runs
