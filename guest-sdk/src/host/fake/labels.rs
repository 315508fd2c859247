//! Equality-based label selectors, as the fake API filters `list` by them (`a=b`,
//! `a==b`, `a!=b`, `a`, `!a`).

use serde_json::Value;

use super::types::bad_request;
use crate::host::ApiError;

/// One label requirement of an equality-based selector.
pub(super) enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    Absent(String),
}

pub(super) fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
}

pub(super) fn valid_value(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

pub(super) fn parse_label_selector(text: &str) -> Result<Vec<Requirement>, ApiError> {
    let unsupported = || {
        bad_request(format!(
            "unable to parse the label selector {text:?}: the fake API supports \
             `a=b`, `a==b`, `a!=b`, `a` and `!a`, comma-separated"
        ))
    };
    let mut requirements = Vec::new();
    for term in text.split(',').map(str::trim) {
        if term.is_empty() {
            if text.trim().is_empty() {
                continue;
            }
            return Err(unsupported());
        }
        let requirement = if let Some((key, value)) = term.split_once("!=") {
            Requirement::NotEquals(key.trim().to_owned(), value.trim().to_owned())
        } else if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
            Requirement::Equals(key.trim().to_owned(), value.trim().to_owned())
        } else if let Some(key) = term.strip_prefix('!') {
            Requirement::Absent(key.trim().to_owned())
        } else {
            Requirement::Exists(term.to_owned())
        };
        let ok = match &requirement {
            Requirement::Equals(k, v) | Requirement::NotEquals(k, v) => {
                valid_key(k) && valid_value(v)
            }
            Requirement::Exists(k) | Requirement::Absent(k) => valid_key(k),
        };
        if !ok {
            return Err(unsupported());
        }
        requirements.push(requirement);
    }
    Ok(requirements)
}

pub(super) fn labels_match(object: &Value, requirements: &[Requirement]) -> bool {
    let label = |key: &str| {
        object
            .pointer("/metadata/labels")
            .and_then(|labels| labels.get(key))
            .and_then(Value::as_str)
    };
    requirements.iter().all(|r| match r {
        Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
        Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
        Requirement::Exists(k) => label(k).is_some(),
        Requirement::Absent(k) => label(k).is_none(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn label_selectors() {
        let object = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        let check = |text: &str| labels_match(&object, &parse_label_selector(text).unwrap());
        assert!(check("a=1"));
        assert!(check("a==1,b"));
        assert!(check("a!=2, !c"));
        assert!(check(""));
        assert!(!check("a=2"));
        assert!(!check("!b"));
        for bad in ["a in (1,2)", "a=1,,b", "a notin (x)", "=1", "a>1"] {
            assert_eq!(
                parse_label_selector(bad).err().map(|e| e.code),
                Some(400),
                "{bad}"
            );
        }
    }
}
