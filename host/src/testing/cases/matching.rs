//! Does an object contain the partial document a case expects? And if not, where not?
//!
//! Rules, chosen so that cases read naturally:
//! - maps: every expected key must match; keys the case does not mention are ignored;
//! - `null` expects the key to be absent (or null): `annotations: {kopf.zalando.org/x: null}`;
//! - lists: same length, element by element (so `finalizers: []` means "none");
//! - numbers compare by value (`1` matches `1.0`); everything else by equality.

use serde_json::Value;

/// One place where the object differs from the expectation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mismatch {
    /// Dotted path (`status.create_fn.message`, `metadata.finalizers[0]`).
    pub(crate) path: String,
    pub(crate) expected: Value,
    /// `None`: the key is absent.
    pub(crate) actual: Option<Value>,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "the object"
        } else {
            &self.path
        };
        let actual = self
            .actual
            .as_ref()
            .map_or_else(|| "absent".to_owned(), compact);
        if self.expected.is_null() {
            write!(f, "{path}: expected absent, got {actual}")
        } else {
            write!(
                f,
                "{path}: expected {}, got {actual}",
                compact(&self.expected)
            )
        }
    }
}

fn compact(value: &Value) -> String {
    let text = value.to_string();
    const LIMIT: usize = 200;
    if text.chars().count() > LIMIT {
        let cut: String = text.chars().take(LIMIT).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// The mismatches of `actual` against the partial `expected` (empty: it matches).
pub(crate) fn mismatches(expected: &Value, actual: &Value) -> Vec<Mismatch> {
    let mut found = Vec::new();
    compare(expected, Some(actual), String::new(), &mut found);
    found
}

/// Renders mismatches as an indented list for a test report.
pub(crate) fn report(mismatches: &[Mismatch]) -> String {
    mismatches.iter().map(|m| format!("  - {m}\n")).collect()
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn compare(expected: &Value, actual: Option<&Value>, path: String, found: &mut Vec<Mismatch>) {
    let mismatch = |found: &mut Vec<Mismatch>| {
        found.push(Mismatch {
            path: path.clone(),
            expected: expected.clone(),
            actual: actual.cloned(),
        });
    };
    match (expected, actual) {
        (Value::Null, None | Some(Value::Null)) => {}
        (Value::Null, Some(_)) | (_, None) => mismatch(found),
        (Value::Object(want), Some(Value::Object(have))) => {
            for (key, value) in want {
                compare(value, have.get(key), join(&path, key), found);
            }
        }
        (Value::Array(want), Some(Value::Array(have))) => {
            if want.len() != have.len() {
                mismatch(found);
                return;
            }
            for (i, (w, h)) in want.iter().zip(have).enumerate() {
                compare(w, Some(h), format!("{path}[{i}]"), found);
            }
        }
        (Value::Number(want), Some(Value::Number(have))) => {
            if want.as_f64() != have.as_f64() {
                mismatch(found);
            }
        }
        (want, Some(have)) => {
            if want != have {
                mismatch(found);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object() -> Value {
        json!({
            "metadata": {"name": "ex1", "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"],
                         "annotations": {"a": "1"}},
            "spec": {"size": 3},
            "status": {"create_fn": {"message": "hello world", "n": 1}},
        })
    }

    #[test]
    fn partial_documents_match() {
        assert!(
            mismatches(
                &json!({"status": {"create_fn": {"message": "hello world"}}}),
                &object()
            )
            .is_empty()
        );
        assert!(mismatches(&json!({"spec": {"size": 3.0}}), &object()).is_empty());
        assert!(
            mismatches(
                &json!({"metadata": {"annotations": {"gone": null}}}),
                &object()
            )
            .is_empty()
        );
        assert!(mismatches(&json!({}), &object()).is_empty());
    }

    #[test]
    fn differences_are_located_and_readable() {
        let found = mismatches(
            &json!({
                "status": {"create_fn": {"message": "hello"}, "update_fn": {"ok": true}},
                "metadata": {"finalizers": [], "annotations": {"a": null}},
            }),
            &object(),
        );
        let text = report(&found);
        assert_eq!(
            text,
            concat!(
                "  - status.create_fn.message: expected \"hello\", got \"hello world\"\n",
                "  - status.update_fn: expected {\"ok\":true}, got absent\n",
                "  - metadata.finalizers: expected [], got [\"kopf.zalando.org/KopfFinalizerMarker\"]\n",
                "  - metadata.annotations.a: expected absent, got \"1\"\n",
            )
        );
    }

    #[test]
    fn lists_match_element_by_element() {
        let actual = json!({"items": [{"a": 1, "b": 2}, {"a": 3}]});
        assert!(mismatches(&json!({"items": [{"a": 1}, {"a": 3}]}), &actual).is_empty());
        let found = mismatches(&json!({"items": [{"a": 1}, {"a": 4}]}), &actual);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, "items[1].a");
    }
}
