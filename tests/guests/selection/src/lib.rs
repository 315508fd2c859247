//! A guest for the host's integration tests of resource selection beyond named resources
//! (KOPF.md §2.1–§2.2): its event handler selects every resource (Kopf's
//! `@kopf.on.event(kopf.EVERYTHING)`) and logs what it is handed, as `<plural> <name>`.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-selection`.

use kapsel::Cause;

/// Kopf: `@kopf.on.event(kopf.EVERYTHING)`.
#[kapsel::on::event(everything)]
fn everything_fn(cause: &Cause) {
    kapsel::info!(
        "{} {}",
        cause.resource().plural,
        cause.name().unwrap_or_default()
    );
}
