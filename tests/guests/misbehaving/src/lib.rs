//! A guest for the host's integration tests: each misbehaviour is triggered
//! separately by a label on a ConfigMap, and one well-behaved handler shows that
//! the host goes on.
//!
//! - `kapsel.test/behaviour=spin`: `spin` loops forever (the deadline must stop it);
//! - `kapsel.test/behaviour=hog`: `hog` allocates without bound (the memory cap must stop it);
//! - `kapsel.test/behaviour=crash`: `crash` panics with `crash requested for <name>`;
//! - every ConfigMap event: `ok` logs `ok <name>`.
//!
//! Every handler but `spin` declares a deadline of its own (30 s), so that a test's
//! short deadline for the operator (its default for handlers that declare none) stops
//! the spinning handler, and never the others, however loaded the machine.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-misbehaving`
//! (the component is `target/wasm32-wasip2/release/misbehaving.wasm`).

use std::hint::black_box;

use kapsel::Cause;

/// Logs `ok <name>` for every ConfigMap event.
#[kapsel::on::event("v1", "configmaps", deadline_ms = 30000)]
fn ok(cause: &Cause) {
    kapsel::info!("ok {}", cause.name().unwrap_or_default());
}

/// Never returns.
#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/behaviour" = "spin"))]
fn spin(cause: &Cause) {
    kapsel::info!("spinning for {}", cause.name().unwrap_or_default());
    let mut counter: u64 = 0;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

/// Allocates (and touches) 1 MiB after 1 MiB until the host's cap stops it.
#[kapsel::on::event(
    "v1",
    "configmaps",
    deadline_ms = 30000,
    labels("kapsel.test/behaviour" = "hog")
)]
fn hog(cause: &Cause) {
    kapsel::info!("hogging for {}", cause.name().unwrap_or_default());
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        chunks.push(vec![1; 1 << 20]);
        black_box(&chunks);
    }
}

/// Fails with a one-minute `TemporaryError` on its first attempt, then succeeds and
/// records its attempts in an annotation: `kapsel test` advances time instead of waiting.
#[kapsel::on::create(
    "v1",
    "configmaps",
    deadline_ms = 30000,
    labels("kapsel.test/behaviour" = "slow-retry")
)]
fn slow_retry(cause: &mut Cause) -> kapsel::Result<()> {
    if cause.retry() == 0 {
        return Err(kapsel::TemporaryError::new("come back in a minute")
            .with_delay(60.0)
            .into());
    }
    let attempts = (cause.retry() + 1).to_string();
    cause.patch.set_at(
        &["metadata", "annotations", "kapsel.test/attempts"],
        attempts,
    );
    Ok(())
}

/// Panics; the message reaches the guest's stderr (which the host logs).
#[kapsel::on::event(
    "v1",
    "configmaps",
    deadline_ms = 30000,
    labels("kapsel.test/behaviour" = "crash")
)]
fn crash(cause: &Cause) {
    panic!("crash requested for {}", cause.name().unwrap_or_default());
}
