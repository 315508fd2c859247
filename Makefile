# Kapsel: `make demo` runs the example operator on the embedded cluster; `make test` runs every check;
# `make bench` measures Kapsel beside Kopf and `make deny` checks the dependencies' licenses
# (neither is part of `make test`).
CARGO ?= cargo
WASM_TARGET := wasm32-wasip2
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
# Every guest (each cdylib under examples/ and tests/guests/) is built by
# scripts/build-guests into a target dir of its own, so that tests can build them too
# (from inside `cargo test`) without waiting on the outer cargo's lock.
GUEST_DIR := $(abspath $(TARGET_DIR))/guests/$(WASM_TARGET)/release

.PHONY: all setup guests build test test-real fmt clippy doc unit cases deny demo bench deploy-manifests image clean kopf-venv

all: build guests

# What a fresh machine needs: the wasm target of the pinned toolchain.
setup:
	@rustup target list --installed 2>/dev/null | grep -qx '$(WASM_TARGET)' || rustup target add $(WASM_TARGET)

guests: setup
	scripts/build-guests

build:
	$(CARGO) build -p kapsel-cli

fmt:
	$(CARGO) fmt --all --check

clippy: setup
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --target $(WASM_TARGET) -p kapsel-sdk -- -D warnings

# Every crate's documentation, warnings (a broken intra-doc link, ...) as errors; the
# SDK's also as a guest's build sees it (without `kapsel::testing`, say).
doc: setup
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --target $(WASM_TARGET) -p kapsel-sdk --no-deps

# Kopf 1.45 from PyPI in a virtual environment, for the tests that run Kopf itself (its
# admission example against the dev cluster): made once, kept in the target dir.
KOPF_VENV := $(abspath $(TARGET_DIR))/kopf-venv
kopf-venv:
	@[ -x $(KOPF_VENV)/bin/kopf ] || { python3 -m venv $(KOPF_VENV) && \
	    $(KOPF_VENV)/bin/pip install --quiet --disable-pip-version-check 'kopf==1.45.*'; }

unit: setup guests kopf-venv
	KAPSEL_GUEST_DIR=$(GUEST_DIR) KAPSEL_KOPF_VENV=$(KOPF_VENV) $(CARGO) test --workspace --no-fail-fast

# `kapsel test` over every example's case files (each example must have some).
# The binary is the one `cargo test --workspace` builds (the CLI's tests need it):
# a plain `cargo build -p kapsel-cli` resolves other features and would rebuild the
# dependencies, minutes on a cold CI machine; after `unit` this step builds nothing.
cases: setup guests
	$(CARGO) test --workspace --no-run --quiet
	@for dir in examples/*/; do \
	    grep -qs cdylib "$$dir/Cargo.toml" || continue; \
	    name=$$(basename "$$dir"); \
	    [ -d "$$dir/tests/cases" ] || { echo "$$dir has no tests/cases" >&2; exit 1; }; \
	    $(TARGET_DIR)/debug/kapsel test -q $(GUEST_DIR)/$$name.wasm "$$dir/tests/cases" || exit 1; \
	done

test: fmt clippy doc unit cases

# cargo deny (deny.toml): the dependencies' licenses, sources and duplicate versions.
# Not part of `make test`: cargo-deny is installed by compiling it (5 CPU-minutes; 11.5
# minutes on a busy 2-core machine), more than a check is worth at every CI run; once
# installed, a check takes seconds. Advisories need the RustSec database, fetched from
# GitHub, which this project's machines cannot reach: `make deny DENY_CHECKS=all` where
# it can.
DENY_CHECKS ?= licenses bans sources
deny:
	@command -v cargo-deny >/dev/null || $(CARGO) install --locked cargo-deny@0.20.2
	$(CARGO) deny check $(DENY_CHECKS)

# The examples alone (the test guests are not needed, and one shares a name with an
# example: tests/guests/admission), built as `make deploy-manifests` builds them.
demo: setup build
	KAPSEL=$(TARGET_DIR)/debug/kapsel \
	GUEST_DIR=$$(GUEST_PROFILE=deploy GUEST_FOLDERS=examples scripts/build-guests) scripts/demo.sh

# What deploy/ generates: the example guests (the small `deploy` profile) in each
# kustomization's guests/, and its rbac.yaml from `kapsel rbac`. A test fails when a
# committed rbac.yaml is stale.
deploy-manifests: setup build
	KAPSEL=$(TARGET_DIR)/debug/kapsel scripts/deploy-manifests

# The image: the kapsel binary alone (Dockerfile). Needs Docker (or IMAGE_TOOL=podman).
IMAGE ?= kapsel:dev
IMAGE_TOOL ?= docker
image:
	$(IMAGE_TOOL) build -t $(IMAGE) .

# Kapsel side by side with Kopf 1.45 (installed from PyPI into $(TARGET_DIR)/bench/venv)
# and a bare kube-rs watcher, on fresh in-memory clusters, and admission reviews sent over
# HTTPS to Kapsel's webhook server and to Kopf's: a table, and
# $(TARGET_DIR)/bench/results.json. `make bench BENCH_ARGS=--quick` for a fast sanity run;
# `BENCH_ARGS="--n 1000 --repeat 5"` to choose; `--help` for the rest. It measures the
# binary the image ships, built with a profile by scripts/pgo-build (about 15 minutes
# on 2 cores the first time; `PGO=no` measures the plain release build instead).
PGO ?= yes
bench: setup guests
	$(CARGO) build --release --locked -p kapsel-cli -p kapsel-bench
	kapsel=$(TARGET_DIR)/release/kapsel; \
	if [ "$(PGO)" != no ]; then kapsel=$$(scripts/pgo-build) || exit 1; fi; \
	$(TARGET_DIR)/release/kapsel-bench --kapsel "$$kapsel" $(BENCH_ARGS)

# The dev cluster measured against a real kube-apiserver (apiserver/tests/differential):
# scripts/real-apiserver builds kube-apiserver v1.37.2 and etcd from the Go module proxy
# once, into ~/.cache/kapsel/real-apiserver (README says what that costs), and starts them
# afresh in the target dir for the run, stopping them after it whatever the outcome. Not
# part of `make test`; .ci/run runs it when the binaries are cached.
REAL_DIR := $(abspath $(TARGET_DIR))/real-apiserver
test-real:
	scripts/real-apiserver build
	$(CARGO) test -p kapsel-apiserver --test differential --no-run --quiet
	scripts/real-apiserver with $(REAL_DIR) \
	    $(CARGO) test -p kapsel-apiserver --test differential -- --ignored --nocapture

clean:
	$(CARGO) clean
