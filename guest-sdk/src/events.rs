//! Posting Kubernetes Events about objects (Kopf's `kopf.event`, `kopf.info`,
//! `kopf.warn`, `kopf.exception`): `kapsel::events::info(cause.body(), "Created", "...")`.
//! (Log lines are the macros `kapsel::info!` and friends.)

use serde_json::Value;

use crate::host;

/// The reference the host needs to post an Event about `object`: its
/// `apiVersion`, `kind` and `metadata` (name, namespace, uid). `None` (the
/// current object) when `object` has no `kind`.
fn reference(object: &Value) -> Option<String> {
    let kind = object.get("kind")?;
    let meta = object.get("metadata").cloned().unwrap_or(Value::Null);
    let mut metadata = serde_json::Map::new();
    for key in ["name", "namespace", "uid"] {
        if let Some(value) = meta.get(key) {
            metadata.insert(key.to_owned(), value.clone());
        }
    }
    let reference = serde_json::json!({
        "apiVersion": object.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": kind,
        "metadata": metadata,
    });
    Some(reference.to_string())
}

/// Posts a Kubernetes Event about `object` (any object with `apiVersion`,
/// `kind` and `metadata`, such as [`Cause::body`](crate::Cause::body); `&Value::Null`
/// means the handler's current object). `event_type` is `Normal`, `Warning` or
/// `Error` (Kopf's `kopf.event`).
///
/// # Guarantees
/// The host posts asynchronously, with retries, and logs what it could not post
/// (an Event about an object the guest neither handles nor may read, or in a
/// namespace the operator does not serve, is refused with a warning). The call never
/// waits for the Event: past the guest's Event pace, Events wait for their turn in the
/// background, identical ones waiting go out as one with a count, and past the host's
/// queue of waiting Events they are dropped (counted in its `/metrics`). The call
/// fails only when it goes past the host's limits: too many Events in one call, or
/// one too large (see the host's SECURITY.md).
pub fn post(object: &Value, event_type: &str, reason: &str, message: &str) {
    host::post_event(reference(object).as_deref(), event_type, reason, message);
}

/// A `Normal` event (Kopf's `kopf.info`).
pub fn info(object: &Value, reason: &str, message: &str) {
    post(object, "Normal", reason, message);
}

/// A `Warning` event (Kopf's `kopf.warn`).
pub fn warn(object: &Value, reason: &str, message: &str) {
    post(object, "Warning", reason, message);
}

/// An `Error` event (Kopf's `kopf.exception`).
pub fn exception(object: &Value, reason: &str, message: &str) {
    post(object, "Error", reason, message);
}
