//! Handlers that count their own stored runs: each creation and update handler adds one
//! to an annotation of the object in the same patch that records the cause as handled
//! (under a `*.kopf.zalando.org` prefix, so the count is not part of the diff-base).
//! A run repeated after its outcome was stored would count twice; a run repeated after
//! a crash that lost its patch counts once. The crash tests kill the operator and check.

use kapsel::{Cause, Value, json};

/// Where the counts live.
const COUNTS: &str = "runs.kopf.zalando.org";

/// Adds one to the count of `handler` on the object, through the handler's patch.
fn count(cause: &mut Cause, handler: &str) {
    let key = format!("{COUNTS}/{handler}");
    let runs = cause
        .meta()
        .get("annotations")
        .and_then(|a| a.get(&key))
        .and_then(Value::as_str)
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    cause
        .patch
        .set_at(&["metadata", "annotations", &key], (runs + 1).to_string());
}

/// Counts the creation; its result is the field as created.
#[kapsel::on::create("kopfexamples")]
fn created(cause: &mut Cause) -> Value {
    count(cause, "created");
    json!({"field": cause.spec().get("field")})
}

/// Counts the update; its result is the field as last handled.
#[kapsel::on::update("kopfexamples")]
fn updated(cause: &mut Cause) -> Value {
    count(cause, "updated");
    json!({"field": cause.spec().get("field")})
}

/// Holds the object (Kopf's finalizer) until it has run.
#[kapsel::on::delete("kopfexamples")]
fn deleted(cause: &Cause) {
    kapsel::info!("deleted {}", cause.name().unwrap_or_default());
}
