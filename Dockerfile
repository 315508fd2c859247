# syntax=docker/dockerfile:1
# The kapsel image: the `kapsel` binary alone, run as a non-root user. Guests are not in
# it: they come from ConfigMaps (deploy/). `make image` builds it.

# The toolchain the workspace pins (rust-version in Cargo.toml).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The binary the tests run (kapsel-cli's `kapsel`), optimised with a profile of an
# operator's work (scripts/pgo-build: an instrumented build, a training run of the bench's
# operator on a local API server, the final build), with the locked dependencies. The
# training needs the bench's guest and the bench.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    rustup target add wasm32-wasip2 \
    && GUEST_FOLDERS=bench scripts/build-guests >/dev/null \
    && cargo build --release --locked -p kapsel-bench \
    && cp "$(scripts/pgo-build)" /kapsel

# glibc and libgcc, nothing else (no shell); `nonroot` is uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /kapsel /kapsel
USER 65532:65532
# The Deployment's args follow: `run ... /guests`.
ENTRYPOINT ["/kapsel"]
