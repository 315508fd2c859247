# syntax=docker/dockerfile:1
# The kapsel image: the `kapsel` binary alone, run as a non-root user. Guests are not in
# it: they come from ConfigMaps (deploy/). `make image` builds it.

# The toolchain the workspace pins (rust-version in Cargo.toml).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The binary the tests run (kapsel-cli's `kapsel`), optimised, with the locked dependencies.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p kapsel-cli --bin kapsel \
    && cp target/release/kapsel /kapsel

# glibc and libgcc, nothing else (no shell); `nonroot` is uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /kapsel /kapsel
USER 65532:65532
# The Deployment's args follow: `run ... /guests`.
ENTRYPOINT ["/kapsel"]
