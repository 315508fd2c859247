//! Kopf's diff of two essences (KOPF.md §1.13).
//!
//! A diff is a list of `(op, path, old, new)` with ops `add`/`change`/`remove`:
//! mappings are recursed into, everything else (lists included) is compared as a
//! whole, and JSON `null` means "absent" exactly as Python's `None` does in Kopf.
//! Handlers receive this list, so its shape and JSON form must match Kopf's.

use serde_json::{Value, json};

use crate::pyformat::py_eq;

/// The kind of one difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiffOp {
    Add,
    Change,
    Remove,
}

impl DiffOp {
    /// The word Kopf uses.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DiffOp::Add => "add",
            DiffOp::Change => "change",
            DiffOp::Remove => "remove",
        }
    }
}

/// One difference: `(op, path, old, new)`; `Value::Null` stands for Python's `None`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DiffItem {
    pub(crate) op: DiffOp,
    pub(crate) path: Vec<String>,
    pub(crate) old: Value,
    pub(crate) new: Value,
}

/// Which side's keys are scanned (Kopf's `DiffScope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiffScope {
    /// Both sides: the normal diff.
    Full,
    /// Only keys present on the left: used to compare a patch with the patched result.
    Left,
}

/// A whole diff, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Diff(pub(crate) Vec<DiffItem>);

impl Diff {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The JSON form handlers see: `[["change", ["spec","field"], "value", "changed"], ...]`.
    pub(crate) fn to_json(&self) -> Value {
        Value::Array(
            self.0
                .iter()
                .map(|d| json!([d.op.as_str(), d.path, d.old.clone(), d.new.clone()]))
                .collect(),
        )
    }
}

/// `diff(old, new)` over the full scope; `None` (absent) is `Value::Null`.
pub(crate) fn diff(old: &Value, new: &Value) -> Diff {
    diff_scoped(old, new, DiffScope::Full)
}

/// `diff(old, new)` with a scope.
pub(crate) fn diff_scoped(old: &Value, new: &Value, scope: DiffScope) -> Diff {
    let mut out = Vec::new();
    diff_into(old, new, &mut Vec::new(), scope, &mut out);
    Diff(out)
}

fn diff_into(
    a: &Value,
    b: &Value,
    path: &mut Vec<String>,
    scope: DiffScope,
    out: &mut Vec<DiffItem>,
) {
    let item = |op, path: &Vec<String>| DiffItem {
        op,
        path: path.clone(),
        old: a.clone(),
        new: b.clone(),
    };
    if py_eq(a, b) {
        return;
    }
    match (a, b) {
        (Value::Null, _) => out.push(item(DiffOp::Add, path)),
        (_, Value::Null) => out.push(item(DiffOp::Remove, path)),
        (Value::Object(am), Value::Object(bm)) => {
            // Kopf iterates frozensets (arbitrary order); we use a stable one:
            // added keys, removed keys, then common keys.
            if scope == DiffScope::Full {
                for (k, v) in bm.iter().filter(|(k, _)| !am.contains_key(*k)) {
                    path.push(k.clone());
                    diff_into(&Value::Null, v, path, scope, out);
                    path.pop();
                }
            }
            for (k, v) in am.iter().filter(|(k, _)| !bm.contains_key(*k)) {
                path.push(k.clone());
                diff_into(v, &Value::Null, path, scope, out);
                path.pop();
            }
            for (k, v) in am.iter() {
                if let Some(w) = bm.get(k) {
                    path.push(k.clone());
                    diff_into(v, w, path, scope, out);
                    path.pop();
                }
            }
        }
        _ => out.push(item(DiffOp::Change, path)),
    }
}

/// Resolve a path leniently (Kopf's `dicts.resolve(d, path, None)`): anything absent or
/// not a mapping on the way yields `None`.
pub(crate) fn resolve<'a>(value: Option<&'a Value>, path: &[String]) -> Option<&'a Value> {
    let mut current = value?;
    for key in path {
        current = current.as_object()?.get(key)?;
    }
    Some(current)
}

/// Re-root a diff at a field (Kopf's `diffs.reduce`), as field handlers receive it.
pub(crate) fn reduce(d: &Diff, path: &[String]) -> Diff {
    let mut out = Vec::new();
    for item in &d.0 {
        if path.is_empty() {
            out.push(item.clone());
        } else if item.path.len() >= path.len() && item.path[..path.len()] == *path {
            // A change deeper than (or at) the field: shorten its path.
            out.push(DiffItem {
                path: item.path[path.len()..].to_vec(),
                ..item.clone()
            });
        } else if item.path.len() < path.len() && path[..item.path.len()] == *item.path {
            // A change of a parent (e.g. the whole `spec` added): diff the resolved sub-values.
            let tail = &path[item.path.len()..];
            let old = resolve(Some(&item.old), tail)
                .cloned()
                .unwrap_or(Value::Null);
            let new = resolve(Some(&item.new), tail)
                .cloned()
                .unwrap_or(Value::Null);
            out.extend(diff(&old, &new).0);
        }
    }
    Diff(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<String> {
        s.split('.').map(str::to_owned).collect()
    }

    #[test]
    fn ops_and_paths() {
        let old = json!({"spec": {"field": "value", "items": ["a"], "gone": 1}});
        let new = json!({"spec": {"field": "changed", "items": ["a", "b"], "added": {"x": 1}}});
        let d = diff(&old, &new);
        assert_eq!(
            d.to_json(),
            json!([
                ["add", ["spec", "added"], null, {"x": 1}],
                ["remove", ["spec", "gone"], 1, null],
                ["change", ["spec", "field"], "value", "changed"],
                ["change", ["spec", "items"], ["a"], ["a", "b"]],
            ])
        );
    }

    #[test]
    fn none_means_absent() {
        assert!(diff(&Value::Null, &Value::Null).is_empty());
        assert_eq!(
            diff(&Value::Null, &json!({"a": 1})).to_json(),
            json!([["add", [], null, {"a": 1}]])
        );
        assert_eq!(
            diff(&json!({"a": 1}), &Value::Null).to_json(),
            json!([["remove", [], {"a": 1}, null]])
        );
        // An explicit null inside a mapping equals an absent key in effect.
        assert_eq!(
            diff(&json!({"a": null}), &json!({"a": 2})).to_json(),
            json!([["add", ["a"], null, 2]])
        );
        assert!(
            diff(&json!({"a": 1}), &json!({"a": 1.0})).is_empty(),
            "Python equality"
        );
        assert_eq!(
            diff(&json!("x"), &json!(["x"])).to_json(),
            json!([["change", [], "x", ["x"]]])
        );
    }

    #[test]
    fn reducing_to_a_field() {
        let d = diff(&Value::Null, &json!({"spec": {"field": "value"}}));
        assert_eq!(
            reduce(&d, &p("spec.field")).to_json(),
            json!([["add", [], null, "value"]])
        );
        let d = diff(
            &json!({"spec": {"field": "value"}}),
            &json!({"spec": {"field": "changed", "o": 1}}),
        );
        assert_eq!(
            reduce(&d, &p("spec.field")).to_json(),
            json!([["change", [], "value", "changed"]])
        );
        assert_eq!(
            reduce(&d, &p("spec")).to_json(),
            json!([
                ["add", ["o"], null, 1],
                ["change", ["field"], "value", "changed"]
            ])
        );
        assert!(reduce(&d, &p("metadata.labels")).is_empty());
        assert_eq!(reduce(&d, &[]), d);
        let d = diff(&json!({"spec": "scalar"}), &json!({"spec": {"field": 1}}));
        assert_eq!(
            reduce(&d, &p("spec.field")).to_json(),
            json!([["add", [], null, 1]])
        );
    }

    #[test]
    fn left_scope_ignores_extra_keys_on_the_right() {
        let patch = json!({"metadata": {"annotations": {"a": "1", "b": null}}});
        let body = json!({"metadata": {"annotations": {"a": "1", "c": "3"}, "name": "x"}});
        assert!(diff_scoped(&patch, &body, DiffScope::Left).is_empty());
        let body = json!({"metadata": {"annotations": {"a": "2"}}});
        assert_eq!(
            diff_scoped(&patch, &body, DiffScope::Left).to_json(),
            json!([["change", ["metadata", "annotations", "a"], "1", "2"]])
        );
    }
}
