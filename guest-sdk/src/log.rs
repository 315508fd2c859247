//! Logging to the host and posting Kubernetes Events (Kopf's `logger` and
//! `kopf.info`/`warn`/`exception`/`event`).

use serde_json::Value;

use crate::host;

pub use crate::host::Level;

/// Sends one log line to the host (the logging macros' target).
#[doc(hidden)]
pub fn log(level: Level, message: &str) {
    host::log(level, message);
}

/// Logs at debug level: `kapsel::debug!("seen {name}")`. The host attaches the
/// handler id and the object's reference.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::__private::log($crate::__private::Level::Debug, &::std::format!($($arg)+)) };
}

/// Logs at info level: `kapsel::info!("created {name}")`.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::__private::log($crate::__private::Level::Info, &::std::format!($($arg)+)) };
}

/// Logs at warning level: `kapsel::warn!("odd spec: {spec}")`.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::__private::log($crate::__private::Level::Warning, &::std::format!($($arg)+)) };
}

/// Logs at error level: `kapsel::error!("cannot do {what}")`.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::__private::log($crate::__private::Level::Error, &::std::format!($($arg)+)) };
}

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
/// Never fails the handler: the host posts asynchronously, with retries, and
/// logs what it could not post.
pub fn event(object: &Value, event_type: &str, reason: &str, message: &str) {
    host::post_event(reference(object).as_deref(), event_type, reason, message);
}

/// A `Normal` event (Kopf's `kopf.info`).
pub fn info(object: &Value, reason: &str, message: &str) {
    event(object, "Normal", reason, message);
}

/// A `Warning` event (Kopf's `kopf.warn`).
pub fn warn(object: &Value, reason: &str, message: &str) {
    event(object, "Warning", reason, message);
}

/// An `Error` event (Kopf's `kopf.exception`).
pub fn exception(object: &Value, reason: &str, message: &str) {
    event(object, "Error", reason, message);
}
