//! A guest for the host's integration tests of activity handlers (KOPF.md §1.12):
//! a startup handler that needs a second attempt, a cleanup handler, and an event
//! handler that proves nothing runs before startup is done; and a slow event handler, so
//! that a test can stop the operator while a call is in flight: `linger`, for ConfigMaps
//! labelled `kapsel.test/linger`, logs `lingering in <name>`, busy-waits `data.seconds`
//! of wall-clock time, then marks the ConfigMap with the annotation
//! `kapsel.test/lingered: "yes"` (once: a marked ConfigMap is left alone).
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-activities`.

use std::time::{Duration, Instant};

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

/// Busy-waits `data.seconds` (wall-clock), then marks the ConfigMap.
#[kapsel::on::event(
    "v1",
    "configmaps",
    deadline_ms = 60000,
    labels("kapsel.test/linger" = present)
)]
fn linger(cause: &mut Cause) {
    let lingered = &cause.body()["metadata"]["annotations"]["kapsel.test/lingered"];
    if !lingered.is_null() {
        return;
    }
    let seconds = cause.body()["data"]["seconds"]
        .as_str()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(1.0);
    kapsel::info!("lingering in {}", cause.name().unwrap_or_default());
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
    cause
        .patch
        .set_at(&["metadata", "annotations", "kapsel.test/lingered"], "yes");
}
