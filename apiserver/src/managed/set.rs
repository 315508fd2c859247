//! Field sets: which fields of an object a manager owns, in the `FieldsV1` notation of
//! `metadata.managedFields` (`f:name` a field, `k:{"name":"app"}` a list item by its keys,
//! `v:"x"` a set member, `i:3` a list item by position; `.` marks a node that is itself in
//! the set besides its children).

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A set of field paths, as a tree of path elements.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Set {
    /// The path leading here is itself in the set.
    pub(crate) member: bool,
    pub(crate) children: BTreeMap<String, Set>,
}

impl Set {
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(Set::is_empty)
    }

    /// Adds `path` as a member.
    pub(crate) fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// The node at `path`, if any.
    pub(crate) fn at(&self, path: &[String]) -> Option<&Set> {
        match path.split_first() {
            None => Some(self),
            Some((first, rest)) => self.children.get(first)?.at(rest),
        }
    }

    fn combine(&self, other: &Set, keep: fn(bool, bool) -> bool) -> Set {
        let mut out = Set {
            member: keep(self.member, other.member),
            children: BTreeMap::new(),
        };
        let empty = Set::default();
        let names: std::collections::BTreeSet<&String> =
            self.children.keys().chain(other.children.keys()).collect();
        for name in names {
            let a = self.children.get(name).unwrap_or(&empty);
            let b = other.children.get(name).unwrap_or(&empty);
            let child = a.combine(b, keep);
            if !child.is_empty() {
                out.children.insert(name.clone(), child);
            }
        }
        out
    }

    pub(crate) fn union(&self, other: &Set) -> Set {
        self.combine(other, |a, b| a || b)
    }

    /// Members of `self` that are not members of `other`.
    pub(crate) fn difference(&self, other: &Set) -> Set {
        self.combine(other, |a, b| a && !b)
    }

    pub(crate) fn intersection(&self, other: &Set) -> Set {
        self.combine(other, |a, b| a && b)
    }

    /// Every member path, depth first in element order.
    pub(crate) fn members(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (name, child) in &self.children {
            prefix.push(name.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` JSON form.
    pub(crate) fn to_json(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (name, child) in &self.children {
            if !child.is_empty() {
                m.insert(name.clone(), child.to_json());
            }
        }
        Value::Object(m)
    }

    /// Reads a `fieldsV1` value; a node with no children is a member.
    pub(crate) fn from_json(v: &Value) -> Set {
        let mut out = Set::default();
        let Some(m) = v.as_object() else {
            return out;
        };
        out.member = m.is_empty();
        for (name, child) in m {
            if name == "." {
                out.member = true;
            } else {
                out.children.insert(name.clone(), Set::from_json(child));
            }
        }
        out
    }
}

/// A path as kube-apiserver prints it in conflict messages:
/// `.spec.containers[name="app"].image`, `.metadata.finalizers[="a"]`.
pub(crate) fn path_string(path: &[String]) -> String {
    let mut out = String::new();
    for e in path {
        if let Some(f) = e.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(k) = e.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = keys.iter().map(|(n, v)| format!("{n}={v}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = e.strip_prefix("v:") {
            out.push_str(&format!("[={v}]"));
        } else if let Some(i) = e.strip_prefix("i:") {
            out.push_str(&format!("[{i}]"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(elements: &[&str]) -> Vec<String> {
        elements.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn json_form_and_operations() {
        let mut a = Set::default();
        a.insert(&p(&["f:data", "f:a"]));
        a.insert(&p(&["f:spec", "f:containers", r#"k:{"name":"app"}"#]));
        a.insert(&p(&[
            "f:spec",
            "f:containers",
            r#"k:{"name":"app"}"#,
            "f:image",
        ]));
        let j = a.to_json();
        assert_eq!(
            j,
            json!({"f:data": {"f:a": {}}, "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}}}}})
        );
        assert_eq!(Set::from_json(&j), a);
        let mut b = Set::default();
        b.insert(&p(&["f:data", "f:a"]));
        b.insert(&p(&["f:data", "f:b"]));
        assert_eq!(a.intersection(&b).members(), vec![p(&["f:data", "f:a"])]);
        assert_eq!(b.difference(&a).members(), vec![p(&["f:data", "f:b"])]);
        assert_eq!(a.union(&b).members().len(), 4);
        assert!(a.difference(&a).is_empty());
        assert_eq!(
            path_string(&p(&[
                "f:spec",
                "f:containers",
                r#"k:{"name":"app"}"#,
                "f:image"
            ])),
            r#".spec.containers[name="app"].image"#
        );
        assert_eq!(
            path_string(&p(&["f:metadata", "f:finalizers", r#"v:"a""#])),
            r#".metadata.finalizers[="a"]"#
        );
    }
}
