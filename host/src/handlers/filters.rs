//! Data filters evaluated in the host, without a guest call (KOPF.md §3).

use std::collections::BTreeMap;

use serde_json::Value;

/// How a label, annotation or field value must look.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Matcher {
    /// Labels/annotations: the exact string. Fields: this JSON value.
    Equals(String),
    Present,
    Absent,
}

/// A handler's data filters, all AND-ed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Filters {
    pub(crate) labels: Vec<(String, Matcher)>,
    pub(crate) annotations: Vec<(String, Matcher)>,
    /// Dotted path split into its parts.
    pub(crate) field: Option<Vec<String>>,
    pub(crate) value: Option<Matcher>,
}

impl Filters {
    /// Whether there is nothing to check: every body passes (a `value` without a `field`
    /// checks nothing).
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty() && self.field.is_none()
    }

    /// Whether a body passes the label, annotation and field filters (the
    /// checks Kopf applies to event, index, daemon and timer handlers, which
    /// look at the current body only).
    pub(crate) fn matches_body(&self, body: &Value) -> bool {
        let meta = body.get("metadata");
        let labels = string_map(meta.and_then(|m| m.get("labels")));
        let annotations = string_map(meta.and_then(|m| m.get("annotations")));
        self.labels.iter().all(|(k, m)| meta_matches(&labels, k, m))
            && self
                .annotations
                .iter()
                .all(|(k, m)| meta_matches(&annotations, k, m))
            && self.field_matches(body)
    }

    fn field_matches(&self, body: &Value) -> bool {
        let Some(path) = &self.field else {
            return true;
        };
        let found = lookup(body, path);
        match (&self.value, found) {
            // A field filter without `value` means "present".
            (None | Some(Matcher::Present), found) => found.is_some(),
            (Some(Matcher::Absent), found) => found.is_none(),
            (Some(Matcher::Equals(json)), Some(found)) => {
                serde_json::from_str::<Value>(json).is_ok_and(|expected| expected == *found)
            }
            (Some(Matcher::Equals(_)), None) => false,
        }
    }
}

fn meta_matches(map: &BTreeMap<&str, &str>, key: &str, matcher: &Matcher) -> bool {
    match matcher {
        Matcher::Equals(value) => map.get(key).is_some_and(|v| v == value),
        Matcher::Present => map.contains_key(key),
        Matcher::Absent => !map.contains_key(key),
    }
}

fn string_map(value: Option<&Value>) -> BTreeMap<&str, &str> {
    value
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
                .collect()
        })
        .unwrap_or_default()
}

/// The value at a dotted path, if every step exists (a JSON null counts as absent, as None does in Kopf).
pub(crate) fn lookup<'a>(body: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut current = body;
    for part in path {
        current = current.get(part)?;
    }
    (!current.is_null()).then_some(current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body() -> Value {
        json!({"metadata": {"labels": {"app": "web", "empty": ""}, "annotations": {"note": "x"}},
               "spec": {"size": 3, "gone": null}})
    }

    #[test]
    fn filters_are_empty_when_they_check_nothing() {
        // Empty filters pass every body without reading it (an admission review is then
        // never parsed); any check makes them non-empty.
        let mut f = Filters {
            value: Some(Matcher::Present),
            ..Filters::default()
        };
        assert!(f.is_empty(), "a value without a field checks nothing");
        assert!(f.matches_body(&Value::Null));
        f.annotations = vec![("note".into(), Matcher::Present)];
        assert!(!f.is_empty());
        for f in [
            Filters {
                labels: vec![("app".into(), Matcher::Absent)],
                ..Filters::default()
            },
            Filters {
                field: Some(vec!["spec".into()]),
                ..Filters::default()
            },
        ] {
            assert!(!f.is_empty(), "{f:?}");
            assert!(!f.matches_body(&body()) || !f.matches_body(&json!({})));
        }
    }

    #[test]
    fn labels_and_annotations() {
        let mut f = Filters {
            labels: vec![
                ("app".into(), Matcher::Equals("web".into())),
                ("empty".into(), Matcher::Equals(String::new())),
            ],
            ..Filters::default()
        };
        assert!(f.matches_body(&body()));
        f.annotations = vec![
            ("other".into(), Matcher::Absent),
            ("note".into(), Matcher::Present),
        ];
        assert!(f.matches_body(&body()));
        f.labels.push(("app".into(), Matcher::Equals("db".into())));
        assert!(!f.matches_body(&body()));
        assert!(!f.matches_body(&json!({})), "no metadata at all");
    }

    #[test]
    fn fields_and_values() {
        let mut f = Filters {
            field: Some(vec!["spec".into(), "size".into()]),
            ..Filters::default()
        };
        assert!(f.matches_body(&body()));
        f.value = Some(Matcher::Equals("3".into()));
        assert!(f.matches_body(&body()));
        f.value = Some(Matcher::Equals("4".into()));
        assert!(!f.matches_body(&body()));
        f.field = Some(vec!["spec".into(), "gone".into()]);
        f.value = Some(Matcher::Absent);
        assert!(f.matches_body(&body()), "null counts as absent");
    }
}
