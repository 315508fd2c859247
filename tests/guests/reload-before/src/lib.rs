//! A guest for the host's hot-reload tests, on `kopfexamples`: the version before a
//! reload. `reload-after` is the version after, under the same file name (`app.wasm`),
//! so that the host sees one guest replaced:
//!
//! | handler | here (version 1) | after (version 2) |
//! |---|---|---|
//! | `stamp` (on create) | returns `{"version": 1}` | returns `{"version": 2}` (changed) |
//! | `slow` (on create, label `reload.test/slow`) | logs `slow 1 started for <name>`, waits until the ConfigMap `release` exists in the object's namespace, returns `{"version": 1}` | the same with 2 |
//! | `watcher` (daemon, label `reload.test/daemon`) | logs `daemon 1 started for <name>`, sleeps until stopped, logs `daemon 1 stopped for <name>` | removed |
//! | `keeper` (daemon, label `reload.test/daemon`) | — | added: as `watcher`, with 2 |
//! | `goodbye` (on delete: the finalizer) | logs `goodbye 1 from <name>` | removed |
//! | `pod_seen` (on event, pods) | logs `pod event 1 for <name>` | removed (its stream closes) |
//! | `configmap_seen` (on event, configmaps) | — | added (a stream opens): logs `configmap event 2 for <name>` |
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-reload-before`.

use kapsel::api::Api;
use kapsel::{Cause, Value, json};

kapsel::permit!("v1", "configmaps", verbs = ["get"]);

/// This version's number, in results and log lines.
const VERSION: u64 = 1;

fn name(cause: &Cause) -> String {
    cause.name().unwrap_or_default().to_owned()
}

#[kapsel::on::create("kopfexamples")]
fn stamp() -> Value {
    json!({"version": VERSION})
}

/// Stays in flight until the test creates the ConfigMap `release` (each look is a call to
/// the API server, so the wait is for that event, not for time).
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

#[kapsel::on::daemon("kopfexamples", labels("reload.test/daemon" = present))]
fn watcher(cause: &Cause) {
    kapsel::info!("daemon {VERSION} started for {}", name(cause));
    while cause.sleep_unless_stopped(60.0) {}
    kapsel::info!("daemon {VERSION} stopped for {}", name(cause));
}

#[kapsel::on::delete("kopfexamples")]
fn goodbye(cause: &Cause) {
    kapsel::info!("goodbye {VERSION} from {}", name(cause));
}

#[kapsel::on::event("v1", "pods")]
fn pod_seen(cause: &Cause) {
    kapsel::info!("pod event {VERSION} for {}", name(cause));
}
