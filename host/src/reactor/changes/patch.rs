//! The per-cycle patch (KOPF.md §4.7).
//!
//! Everything one processing cycle wants to change is accumulated here: progress
//! records, the diff-base, handler results and the handlers' own edits go into one
//! merge-patch; the finalizer change becomes an RFC 6902 JSON patch guarded by a
//! `resourceVersion` test (Kopf never merge-patches finalizers, to not lose others').
//! The integration sends the parts; this module only shapes them.

use serde_json::{Map, Value, json};

use super::diff::{Diff, DiffScope, diff_scoped};
use super::keys::KeyScheme;
use super::stanzas::{remove_path, resolve};
use crate::pyformat::falsy;

/// A finalizer to add or remove with a JSON patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FinalizerChange {
    Add(String),
    Remove(String),
}

/// One cycle's accumulated changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Patch {
    /// The merge-patch body, `status` included (split off when sending).
    pub(crate) merge: Map<String, Value>,
    /// The finalizer change, sent as a JSON patch after the merge-patches.
    pub(crate) finalizer: Option<FinalizerChange>,
}

/// The value of an annotation in a body (absent if the body has no such mapping).
pub(crate) fn body_annotation<'a>(body: &'a Value, key: &str) -> Option<&'a Value> {
    body.get("metadata")?
        .get("annotations")?
        .as_object()?
        .get(key)
}

impl Patch {
    /// Kopf's `bool(patch)`: anything to send at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.merge.is_empty() && self.finalizer.is_none()
    }

    /// An annotation already in the patch (`Value::Null` = to be removed).
    pub(crate) fn annotation(&self, key: &str) -> Option<&Value> {
        self.merge
            .get("metadata")?
            .get("annotations")?
            .as_object()?
            .get(key)
    }

    fn annotations_mut(&mut self) -> &mut Map<String, Value> {
        let meta = object_entry(&mut self.merge, "metadata");
        object_entry(meta, "annotations")
    }

    /// Set (a string) or remove (`Value::Null`) an annotation.
    pub(crate) fn set_annotation(&mut self, key: &str, value: Value) {
        self.annotations_mut().insert(key.to_owned(), value);
    }

    /// Forget an annotation change, dropping parents left empty (Kopf's `dicts.remove`).
    pub(crate) fn forget_annotation(&mut self, key: &str) {
        let Some(Value::Object(meta)) = self.merge.get_mut("metadata") else {
            return;
        };
        if let Some(Value::Object(annotations)) = meta.get_mut("annotations") {
            annotations.shift_remove(key);
            if annotations.is_empty() {
                meta.shift_remove("annotations");
            }
        }
        if meta.is_empty() {
            self.merge.shift_remove("metadata");
        }
    }

    /// The value at a path of the merge-patch, if any.
    pub(crate) fn at(&self, path: &[&str]) -> Option<&Value> {
        let (first, rest) = path.split_first()?;
        resolve(self.merge.get(*first)?, rest)
    }

    /// Set a value at a path of the merge-patch (parents created, non-mappings in the
    /// way replaced): Kopf's `dicts.ensure`.
    pub(crate) fn set_at(&mut self, path: &[&str], value: Value) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut target = &mut self.merge;
        for key in parents {
            target = object_entry(target, key);
        }
        target.insert((*last).to_owned(), value);
    }

    /// Forget a change at a path, dropping the parents it leaves empty (Kopf's
    /// `dicts.remove`).
    pub(crate) fn forget_at(&mut self, path: &[&str]) {
        remove_path(&mut self.merge, path);
    }

    /// Store a handler's result per §1.14: a mapping is shallow-merged into
    /// `status.<id>`, `null` means nothing, any other value is assigned.
    pub(crate) fn deliver_result(&mut self, handler_id: &str, result: &Value) {
        match result {
            Value::Null => {}
            Value::Object(fields) => {
                let status = object_entry(&mut self.merge, "status");
                let entry = object_entry(status, handler_id);
                for (k, v) in fields {
                    entry.insert(k.clone(), v.clone());
                }
            }
            other => {
                object_entry(&mut self.merge, "status")
                    .insert(handler_id.to_owned(), other.clone());
            }
        }
    }

    /// The merge-patch bodies to send: `(object, status)`. With a status subresource the
    /// `status` part goes separately to `/status`; otherwise it stays in the object patch.
    pub(crate) fn merge_patches(&self, status_subresource: bool) -> (Option<Value>, Option<Value>) {
        let mut main = self.merge.clone();
        let status = if status_subresource {
            main.shift_remove("status")
        } else {
            None
        };
        let main = (!main.is_empty()).then_some(Value::Object(main));
        let status = status.map(|s| json!({"status": s}));
        (main, status)
    }

    /// The JSON patch for the finalizer change against the freshest body, led by the
    /// `resourceVersion` test; `None` if there is nothing to change.
    pub(crate) fn finalizer_json_patch(&self, body: &Value) -> Option<Value> {
        let change = self.finalizer.as_ref()?;
        let meta = body.get("metadata");
        let rv = meta
            .and_then(|m| m.get("resourceVersion"))
            .cloned()
            .unwrap_or(Value::Null);
        let current: Option<&Vec<Value>> = meta
            .and_then(|m| m.get("finalizers"))
            .and_then(Value::as_array);
        let test = json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv});
        let op = match (change, current) {
            (FinalizerChange::Add(name), None) => {
                json!({"op": "add", "path": "/metadata/finalizers", "value": [name]})
            }
            (FinalizerChange::Add(name), Some(list)) => {
                if list.iter().any(|f| f.as_str() == Some(name)) {
                    return None;
                }
                json!({"op": "add", "path": format!("/metadata/finalizers/{}", list.len()), "value": name})
            }
            (FinalizerChange::Remove(_), None) => return None,
            (FinalizerChange::Remove(name), Some(list)) => {
                let index = list.iter().position(|f| f.as_str() == Some(name))?;
                if list.len() == 1 {
                    json!({"op": "remove", "path": "/metadata/finalizers"})
                } else {
                    json!({"op": "remove", "path": format!("/metadata/finalizers/{index}")})
                }
            }
        };
        Some(json!([test, op]))
    }
}

/// What the server did not apply from a merge-patch ("Merge-patching finished with
/// inconsistencies"): a left-scoped diff of the patch against the response, ignoring
/// emptied labels/annotations/finalizers (the server drops empty maps).
pub(crate) fn inconsistencies(patch: &Value, response: &Value) -> Diff {
    let known: [&[&str]; 3] = [
        &["metadata", "annotations"],
        &["metadata", "labels"],
        &["metadata", "finalizers"],
    ];
    let all = diff_scoped(patch, response, DiffScope::Left);
    Diff(
        all.0
            .into_iter()
            .filter(|d| {
                !falsy(&d.old)
                    || !falsy(&d.new)
                    || !known
                        .iter()
                        .any(|k| d.path.iter().map(String::as_str).eq(k.iter().copied()))
            })
            .collect(),
    )
}

fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(m) => m,
        _ => unreachable!("replaced by an object just above"),
    }
}

/// Brand a non-`kopf.` prefix with `<prefix>/kopf-managed: yes` unless already there.
pub(crate) fn store_marker(keys: &KeyScheme, body: &Value, patch: &mut Patch) {
    if let Some(marker) = keys.marker_key()
        && body_annotation(body, &marker).is_none()
        && patch.annotation(&marker).is_none()
    {
        patch.set_annotation(&marker, Value::String("yes".into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_land_in_status() {
        let mut p = Patch::default();
        p.deliver_result("create_fn", &json!({"message": "hello"}));
        p.deliver_result("create_fn", &json!({"n": 1}));
        p.deliver_result("create_2", &json!(42));
        p.deliver_result("nothing", &Value::Null);
        assert_eq!(
            Value::Object(p.merge.clone()),
            json!({"status": {"create_fn": {"message": "hello", "n": 1}, "create_2": 42}})
        );
        let (main, status) = p.merge_patches(true);
        assert_eq!(main, None);
        assert_eq!(
            status,
            Some(json!({"status": {"create_fn": {"message": "hello", "n": 1}, "create_2": 42}}))
        );
        let (main, status) = p.merge_patches(false);
        assert!(main.is_some() && status.is_none());
    }

    #[test]
    fn forgetting_an_annotation_drops_emptied_parents() {
        let mut p = Patch::default();
        p.set_annotation("a", json!("1"));
        p.forget_annotation("a");
        assert!(p.is_empty());
    }

    #[test]
    fn finalizer_json_patches() {
        let fin = "kopf.zalando.org/KopfFinalizerMarker";
        let add = Patch {
            finalizer: Some(FinalizerChange::Add(fin.into())),
            ..Patch::default()
        };
        let body = json!({"metadata": {"resourceVersion": "7"}});
        assert_eq!(
            add.finalizer_json_patch(&body),
            Some(
                json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                        {"op": "add", "path": "/metadata/finalizers", "value": [fin]}])
            )
        );
        let body = json!({"metadata": {"resourceVersion": "8", "finalizers": ["other", fin]}});
        assert_eq!(add.finalizer_json_patch(&body), None, "already there");
        let remove = Patch {
            finalizer: Some(FinalizerChange::Remove(fin.into())),
            ..Patch::default()
        };
        assert_eq!(
            remove.finalizer_json_patch(&body),
            Some(
                json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "8"},
                        {"op": "remove", "path": "/metadata/finalizers/1"}])
            )
        );
        let body = json!({"metadata": {"resourceVersion": "9", "finalizers": [fin]}});
        assert_eq!(
            remove.finalizer_json_patch(&body).map(|p| p[1].clone()),
            Some(json!({"op": "remove", "path": "/metadata/finalizers"}))
        );
        assert_eq!(remove.finalizer_json_patch(&json!({"metadata": 1})), None);
    }

    #[test]
    fn inconsistencies_ignore_emptied_maps() {
        let patch = json!({"metadata": {"annotations": {}, "labels": {}}, "status": {"x": 1}});
        let resp = json!({"metadata": {"name": "n"}, "status": {}});
        assert_eq!(
            inconsistencies(&patch, &resp).to_json(),
            json!([["remove", ["status", "x"], 1, null]])
        );
        let resp = json!({"metadata": {}, "status": {"x": 1, "y": 2}});
        assert!(inconsistencies(&patch, &resp).is_empty());
        // Kopf reports a removed last label: the left side `{"a": null}` is truthy.
        let patch = json!({"metadata": {"labels": {"a": null}}});
        assert_eq!(inconsistencies(&patch, &json!({"metadata": {}})).0.len(), 1);
    }
}
