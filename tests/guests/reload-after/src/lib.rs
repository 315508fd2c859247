//! A guest for the host's hot-reload tests, on `kopfexamples`: the version after a
//! reload (see `reload-before`, the version before, for the table of what changes).
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-reload-after`.

use kapsel::api::Api;
use kapsel::{Cause, Value, json};

kapsel::permit!("v1", "configmaps", verbs = ["get"]);

/// This version's number, in results and log lines.
const VERSION: u64 = 2;

fn name(cause: &Cause) -> String {
    cause.name().unwrap_or_default().to_owned()
}

#[kapsel::on::create("kopfexamples")]
fn stamp() -> Value {
    json!({"version": VERSION})
}

/// As in the version before: waits for the ConfigMap `release`.
#[kapsel::on::create(
    "kopfexamples",
    labels("reload.test/slow" = present),
    deadline_ms = 60000
)]
fn slow(cause: &Cause) -> kapsel::Result<Value> {
    kapsel::info!("slow {VERSION} started for {}", name(cause));
    let configmaps = Api::new("v1", "configmaps");
    loop {
        match configmaps.get("release") {
            Ok(_) => return Ok(json!({"version": VERSION})),
            Err(error) if error.code == 404 => continue,
            Err(error) => return Err(error.into()),
        }
    }
}

/// Replaces the daemon `watcher` of the version before.
#[kapsel::on::daemon("kopfexamples", labels("reload.test/daemon" = present))]
fn keeper(cause: &Cause) {
    kapsel::info!("daemon {VERSION} started for {}", name(cause));
    while cause.sleep_unless_stopped(60.0) {}
    kapsel::info!("daemon {VERSION} stopped for {}", name(cause));
}

#[kapsel::on::event("v1", "configmaps")]
fn configmap_seen(cause: &Cause) {
    kapsel::info!("configmap event {VERSION} for {}", name(cause));
}
