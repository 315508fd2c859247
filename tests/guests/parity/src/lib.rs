//! A guest for the host's integration tests of Kopf options that no other test guest
//! uses end to end (issue 32): `param` (returned as the result of `with_param`, on
//! kopfexamples labelled `kapsel.test/param`), and `on.resume(deleted=True)` (on
//! kopfexamples labelled `kapsel.test/resume`: `resumed` and `resumed_deleted` log
//! `resumed <name>` and `resumed-deleted <name>`, `farewell` logs `deleted <name>` and is
//! why the objects carry the finalizer); and `-ofDRS`: `replicaset_created`, a creation
//! handler of ReplicaSets labelled `kapsel.test/drs`, logs `created <name>`; and
//! `fails_once` (kopfexamples labelled `kapsel.test/backoff`), an arbitrary error on its
//! first attempt, with no `backoff` of its own (the operator's default backoff applies);
//! and `described`, an event handler of kopfexamples labelled `kapsel.test/resource` that
//! logs `resource <JSON>`: the full description of its resource (Kopf's `resource` kwarg).
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-parity`.

use kapsel::{Cause, Value, json};

/// Returns its `param` (KOPF.md §1.13: every call gets it).
#[kapsel::on::create(
    "kopfexamples",
    labels("kapsel.test/param" = present),
    param = json!({"answer": 42})
)]
fn with_param(cause: &Cause) -> Value {
    cause.param().cloned().unwrap_or_default()
}

/// A resume handler: not called for an object being deleted.
#[kapsel::on::resume("kopfexamples", labels("kapsel.test/resume" = present))]
fn resumed(cause: &Cause) {
    kapsel::info!("resumed {}", cause.name().unwrap_or_default());
}

/// A resume handler that is also called for an object being deleted (`deleted=True`).
#[kapsel::on::resume("kopfexamples", labels("kapsel.test/resume" = present), deleted)]
fn resumed_deleted(cause: &Cause) {
    kapsel::info!("resumed-deleted {}", cause.name().unwrap_or_default());
}

/// The deletion handler (the objects carry the finalizer for it).
#[kapsel::on::delete("kopfexamples", labels("kapsel.test/resume" = present))]
fn farewell(cause: &Cause) {
    kapsel::info!("deleted {}", cause.name().unwrap_or_default());
}

#[kapsel::on::create("apps", "v1", "replicasets", labels("kapsel.test/drs" = present))]
fn replicaset_created(cause: &Cause) {
    kapsel::info!("created {}", cause.name().unwrap_or_default());
}

#[kapsel::on::create("kopfexamples", labels("kapsel.test/backoff" = present))]
fn fails_once(cause: &Cause) -> kapsel::Result<()> {
    if cause.retry() == 0 {
        return Err(kapsel::Error::msg("not yet"));
    }
    Ok(())
}

/// Logs what the host says of the object's resource (Kopf's `resource` kwarg).
#[kapsel::on::event("kopfexamples", labels("kapsel.test/resource" = present))]
fn described(cause: &Cause) {
    let text = match cause.resource_info() {
        Some(info) => json!({
            "group": info.group, "version": info.version, "plural": info.plural,
            "kind": info.kind, "singular": info.singular, "shortcuts": info.shortcuts,
            "categories": info.categories, "subresources": info.subresources,
            "namespaced": info.namespaced, "preferred": info.preferred, "verbs": info.verbs,
        })
        .to_string(),
        None => "none".to_owned(),
    };
    kapsel::info!("resource {text}");
}
