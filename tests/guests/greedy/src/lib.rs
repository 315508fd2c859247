//! A guest that grants itself an hour per call, for the containment tests: a host whose
//! maximum deadline is lower refuses to load it.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-greedy`
//! (the component is `target/wasm32-wasip2/release/greedy.wasm`).

use kapsel::Cause;

#[kapsel::on::event("v1", "configmaps", deadline_ms = 3600000)]
fn take_an_hour(cause: &Cause) {
    kapsel::info!("an hour for {}", cause.name().unwrap_or_default());
}
