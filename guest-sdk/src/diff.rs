//! Kopf's diff of two essences, typed (the `diff` kwarg, KOPF.md §1.13).

use serde::ser::{Serialize, SerializeTuple, Serializer};
use serde_json::Value;

/// What happened to one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiffOp {
    /// The field appeared (`old` is `None`).
    Add,
    /// The field's value changed.
    Change,
    /// The field went away (`new` is `None`).
    Remove,
}

impl DiffOp {
    /// Kopf's word: `add`, `change`, `remove`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Change => "change",
            Self::Remove => "remove",
        }
    }

    fn parse(word: &str) -> Option<Self> {
        match word {
            "add" => Some(Self::Add),
            "change" => Some(Self::Change),
            "remove" => Some(Self::Remove),
            _ => None,
        }
    }
}

impl std::fmt::Display for DiffOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One difference: Kopf's `(op, field, old, new)` tuple.
///
/// Mappings are compared key by key, everything else (lists included) as a
/// whole, so `path` names object keys only; an empty path means the whole
/// value (a creation's diff is one `Add` at the root). `None` means absent.
///
/// Serialises back to Kopf's JSON form, `["change", ["spec", "size"], 1, 2]`.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffItem {
    /// What happened.
    pub op: DiffOp,
    /// The keys from the root (`["spec", "size"]`).
    pub path: Vec<String>,
    /// The value before (`None`: absent).
    pub old: Option<Value>,
    /// The value after (`None`: absent).
    pub new: Option<Value>,
}

impl DiffItem {
    /// The path as Kopf users write fields: `spec.size` (empty for the root).
    pub fn field(&self) -> String {
        self.path.join(".")
    }

    /// `true` when this difference is at `path` or inside it (`["spec"]`
    /// covers `spec.size`).
    pub fn is_under(&self, path: &[&str]) -> bool {
        self.path.len() >= path.len() && self.path.iter().zip(path).all(|(a, b)| a == b)
    }
}

impl Serialize for DiffItem {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut tuple = serializer.serialize_tuple(4)?;
        tuple.serialize_element(self.op.as_str())?;
        tuple.serialize_element(&self.path)?;
        tuple.serialize_element(&self.old)?;
        tuple.serialize_element(&self.new)?;
        tuple.end()
    }
}

/// The typed diff from the JSON the host sends: `[[op, [key...], old, new], ...]`.
pub(crate) fn parse(json: &Value) -> Result<Vec<DiffItem>, String> {
    let items = json
        .as_array()
        .ok_or_else(|| format!("a diff must be a list, not {json}"))?;
    items.iter().map(parse_item).collect()
}

fn parse_item(item: &Value) -> Result<DiffItem, String> {
    let bad = || format!("a diff item must be [op, [key...], old, new], not {item}");
    let [op, path, old, new] = item.as_array().map(Vec::as_slice).ok_or_else(bad)? else {
        return Err(bad());
    };
    let op = op.as_str().and_then(DiffOp::parse).ok_or_else(bad)?;
    let path = path
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|key| match key {
            Value::String(key) => key.clone(),
            other => other.to_string(),
        })
        .collect();
    let present = |value: &Value| (!value.is_null()).then(|| value.clone());
    Ok(DiffItem {
        op,
        path,
        old: present(old),
        new: present(new),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parses_and_serialises_kopfs_form() {
        let json = json!([
            ["add", [], null, {"spec": {"size": 1}}],
            ["change", ["spec", "size"], 1, 2],
            ["remove", ["metadata", "labels", "app"], "web", null],
        ]);
        let diff = parse(&json).unwrap();
        assert_eq!(diff.len(), 3);
        assert_eq!(
            diff[1],
            DiffItem {
                op: DiffOp::Change,
                path: vec!["spec".into(), "size".into()],
                old: Some(json!(1)),
                new: Some(json!(2)),
            }
        );
        assert_eq!((diff[0].op, diff[0].old.as_ref()), (DiffOp::Add, None));
        assert_eq!(
            (diff[2].field().as_str(), diff[2].new.as_ref()),
            ("metadata.labels.app", None)
        );
        assert!(diff[1].is_under(&["spec"]) && !diff[2].is_under(&["spec"]));
        assert_eq!(serde_json::to_value(&diff).unwrap(), json);
    }

    #[test]
    fn rejects_other_shapes() {
        for bad in [
            json!({"op": "add"}),
            json!([["add", []]]),
            json!([["rename", [], null, 1]]),
            json!([["add", "spec", null, 1]]),
        ] {
            assert!(parse(&bad).is_err(), "{bad}");
        }
    }
}
