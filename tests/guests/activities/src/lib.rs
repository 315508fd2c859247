//! A guest for the host's integration tests of activity handlers (KOPF.md §1.12):
//! a startup handler that needs a second attempt, a cleanup handler, and an event
//! handler that proves nothing runs before startup is done.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-activities`.

use kapsel::{Cause, TemporaryError};

/// Fails once (asking for a retry in 0.2 s), then succeeds.
#[kapsel::on::startup]
fn warm_up(cause: &Cause) -> kapsel::Result<()> {
    if cause.retry() == 0 {
        return Err(TemporaryError::new("not warm yet").with_delay(0.2).into());
    }
    kapsel::info!("warmed up after {} attempts", cause.retry() + 1);
    Ok(())
}

/// Runs when the operator stops.
#[kapsel::on::cleanup]
fn tidy_up() {
    kapsel::info!("tidied up");
}

/// Logs `saw <name>` for every ConfigMap event.
#[kapsel::on::event("v1", "configmaps")]
fn saw(cause: &Cause) {
    kapsel::info!("saw {}", cause.name().unwrap_or_default());
}
