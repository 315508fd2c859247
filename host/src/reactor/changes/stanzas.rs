//! Kopf's `StorageStanzaCleaner` and `dicts`: what the storages strip from an essence
//! (their own annotations and fields, then the stanzas left empty), and the dotted
//! field paths the status storages are configured with.

use serde_json::{Map, Value};

use crate::pyformat::falsy;

/// A dotted field (`status.kopf.progress`) as its path, as Kopf's `parse_field` splits it.
pub(crate) fn field_path(field: &str) -> Vec<&str> {
    field.split('.').collect()
}

/// The value at a path, if every parent is a mapping (Kopf's `dicts.resolve`).
pub(crate) fn resolve<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(value, |found, key| found.as_object()?.get(*key))
}

/// Remove a nested key and the parents it leaves empty (Kopf's `dicts.remove`).
pub(crate) fn remove_path(map: &mut Map<String, Value>, path: &[&str]) {
    match path {
        [] => {}
        [key] => {
            map.shift_remove(*key);
        }
        [key, rest @ ..] => {
            if let Some(Value::Object(child)) = map.get_mut(*key) {
                remove_path(child, rest);
                if child.is_empty() {
                    map.shift_remove(*key);
                }
            }
        }
    }
}

/// Kopf's `remove_annotations`: drop the unwanted annotations of an essence.
pub(crate) fn remove_annotations(
    essence: &mut Map<String, Value>,
    unwanted: impl Fn(&str) -> bool,
) {
    if let Some(Value::Object(annotations)) = essence
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
    {
        annotations.retain(|k, _| !unwanted(k));
    }
}

/// Kopf's `remove_empty_stanzas`: drop empty labels, annotations, metadata and status.
pub(crate) fn remove_empty_stanzas(essence: &mut Map<String, Value>) {
    if let Some(Value::Object(meta)) = essence.get_mut("metadata") {
        for key in ["annotations", "labels"] {
            if meta.get(key).is_some_and(falsy) {
                meta.shift_remove(key);
            }
        }
    }
    for key in ["metadata", "status"] {
        if essence.get(key).is_some_and(falsy) {
            essence.shift_remove(key);
        }
    }
}
