//! How objects and resources are named inside the server, and small helpers on an
//! object's metadata and on timestamps (the ground every other module stands on).

use serde_json::{Map, Value, json};

/// A stored resource: (group, plural). Every version of a CRD shares one storage, as in kube.
pub(crate) type ResKey = (String, String);

/// An object's key inside its resource: (namespace or "" when cluster-scoped, name).
pub(crate) type ObjKey = (String, String);

pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        // Both were made objects just above; no request can reach this.
        _ => unreachable!("metadata is an object"),
    }
}

/// Drops the metadata members that kube writes out only when they have something
/// (`omitempty` in ObjectMeta): empty labels, annotations, finalizers, ownerReferences.
pub(crate) fn drop_empty_members(meta: &mut Map<String, Value>) {
    for k in ["labels", "annotations", "finalizers", "ownerReferences"] {
        let empty = match meta.get(k) {
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Null) => true,
            _ => false,
        };
        if empty {
            meta.remove(k);
        }
    }
}

/// The current time as kube writes timestamps (RFC 3339, seconds, `Z`).
pub(crate) fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}
