//! Where an object is in its deletion: being deleted, and whether our finalizer holds it.

use serde_json::Value;

/// `metadata.deletionTimestamp` is set.
pub(crate) fn is_deletion_ongoing(body: &Value) -> bool {
    body.get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|t| !t.is_null())
}

/// Our finalizer is in `metadata.finalizers`.
pub(crate) fn is_deletion_blocked(body: &Value, finalizer: &str) -> bool {
    body.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .is_some_and(|list| list.iter().any(|f| f.as_str() == Some(finalizer)))
}
