//! Objects as a resource serves them: every version of a resource from one storage, with
//! this version's `apiVersion` and `kind` first (in kube's order); and comparisons that see past them.

use crate::registry::ResourceType;
use serde_json::{Map, Value, json};

/// The object as served at this type's version: kube serves every version of a resource from
/// one storage; with conversion strategy `None` only `apiVersion` differs.
pub(crate) fn present(rt: &ResourceType, obj: &Value) -> Value {
    present_owned(rt, obj.clone())
}

/// The type's members as kube writes them first: a built-in's `kind` then `apiVersion` (its
/// Go struct's order), a custom resource's `apiVersion` then `kind` (Go sorts the keys of
/// an unstructured object). Clients see it: kube-rs's errors name the column.
fn type_members(rt: &ResourceType) -> [(&'static str, String); 2] {
    let (kind, api_version) = (("kind", rt.kind.clone()), ("apiVersion", rt.api_version()));
    if rt.custom {
        [api_version, kind]
    } else {
        [kind, api_version]
    }
}

/// [`present`] of an object the caller gives up: its members are moved, not copied.
pub(crate) fn present_owned(rt: &ResourceType, mut out: Value) -> Value {
    if let Some(m) = out.as_object_mut() {
        let mut ordered = Map::new();
        for (k, v) in type_members(rt) {
            ordered.insert(k.into(), json!(v));
        }
        for (k, v) in std::mem::take(m) {
            if k != "apiVersion" && k != "kind" {
                ordered.insert(k, v);
            }
        }
        *m = ordered;
    }
    out
}

/// [`present`] as it is written out, without a copy of the object: a copy per watcher of
/// every event was a twentieth of the server's cost of a write (`make bench`).
pub(crate) struct Presented<'a> {
    rt: &'a ResourceType,
    obj: &'a Value,
}

impl<'a> Presented<'a> {
    pub(crate) fn new(rt: &'a ResourceType, obj: &'a Value) -> Self {
        Presented { rt, obj }
    }
}

impl serde::Serialize for Presented<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(members) = self.obj.as_object() else {
            return self.obj.serialize(serializer);
        };
        let mut map = serializer.serialize_map(None)?;
        for (k, v) in type_members(self.rt) {
            map.serialize_entry(k, &v)?;
        }
        for (k, v) in members {
            if k != "apiVersion" && k != "kind" {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

/// The members [`present`] sets.
const TYPE: [&str; 2] = ["apiVersion", "kind"];

/// Whether the two objects differ in a member other than those of `skip`, compared in
/// place (objects compare as maps, whatever their members' order).
pub(super) fn differs_outside(a: &Value, b: &Value, skip: &[&str]) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a != b;
    };
    let kept = |m: &Map<String, Value>| m.keys().filter(|k| !skip.contains(&k.as_str())).count();
    kept(a) != kept(b)
        || a.iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .any(|(k, v)| b.get(k) != Some(v))
}

/// Whether `result` is `old` as [`present`] serves it, without presenting a copy of `old`.
pub(super) fn is_presented(rt: &ResourceType, result: &Value, old: &Value) -> bool {
    let member = |k: &str| result.get(k).and_then(Value::as_str);
    member("apiVersion") == Some(rt.api_version().as_str())
        && member("kind") == Some(rt.kind.as_str())
        && !differs_outside(result, old, &TYPE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_recognised_as_served_without_a_copy() {
        let rt = crate::builtins::builtins()
            .into_iter()
            .find(|t| t.plural == "configmaps")
            .expect("configmaps");
        // Stored without its type, or at another version: served with this type's.
        for old in [
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
            json!({"apiVersion": "v0", "kind": "Other", "metadata": {"name": "c"}, "data": {"a": "1"}}),
        ] {
            let served = present(&rt, &old);
            assert!(is_presented(&rt, &served, &old));
            let mut changed = served.clone();
            changed["data"]["a"] = json!("2");
            assert!(!is_presented(&rt, &changed, &old));
            let mut other_kind = served.clone();
            other_kind["kind"] = json!("Secret");
            assert!(!is_presented(&rt, &other_kind, &old));
            let mut more = served.clone();
            more["extra"] = json!(1);
            assert!(!is_presented(&rt, &more, &old));
            let mut less = served;
            less.as_object_mut().map(|m| m.remove("data"));
            assert!(!is_presented(&rt, &less, &old));
        }
    }
}
