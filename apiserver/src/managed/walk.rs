//! Objects walked with their schema, as structured-merge-diff does: the field set of an
//! object, the merge of an applied configuration into the live object, and the removal of
//! fields. The schema decides each node's shape: declared fields of a struct, map entries,
//! atomic values, and lists that are maps (by `x-kubernetes-list-map-keys`), sets, or
//! atomic (the default).

use super::set::Set;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The schema context: whether the type is a built-in (whose hand-written schemas may lack
/// list markers; kube's strategic-merge keys then say how its lists merge).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Typer {
    pub(crate) builtin: bool,
}

/// What a value is, per its schema.
enum Shape<'s> {
    /// Declared fields; other keys take the `additionalProperties` schema, if any.
    Struct(&'s Map<String, Value>, Option<&'s Value>),
    /// Entries of one element schema (none: deduced from the value).
    Map(Option<&'s Value>),
    /// Owned and replaced as a whole.
    Atomic,
    /// A list whose items are identified by these key fields.
    Keyed(Vec<String>, Option<&'s Value>),
    /// A list of distinct scalars.
    Set,
    Leaf,
}

fn resolve(schema: Option<&Value>) -> Option<&Value> {
    schema.map(crate::openapi::fields::resolve)
}

impl Typer {
    fn shape<'s>(self, schema: Option<&'s Value>, value: &Value, field: &str) -> Shape<'s> {
        let schema = resolve(schema);
        let get = |k: &str| schema.and_then(|s| s.get(k));
        match value {
            Value::Object(_) => {
                if get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
                    || get("x-kubernetes-int-or-string").is_some()
                {
                    return Shape::Atomic;
                }
                let extra = get("additionalProperties").filter(|a| a.is_object());
                match get("properties").and_then(Value::as_object) {
                    Some(props) => Shape::Struct(props, extra),
                    None => Shape::Map(extra),
                }
            }
            Value::Array(_) => {
                let items = get("items").filter(|i| i.is_object());
                match get("x-kubernetes-list-type").and_then(Value::as_str) {
                    Some("map") => {
                        let keys = get("x-kubernetes-list-map-keys")
                            .and_then(Value::as_array)
                            .map(|k| {
                                k.iter()
                                    .filter_map(|x| x.as_str().map(String::from))
                                    .collect()
                            })
                            .unwrap_or_default();
                        Shape::Keyed(keys, items)
                    }
                    Some("set") => Shape::Set,
                    Some(_) => Shape::Atomic,
                    None if self.builtin => self.builtin_list(field, value, items),
                    None => Shape::Atomic,
                }
            }
            _ => Shape::Leaf,
        }
    }

    /// A built-in list the hand-written schema does not mark: kube's patch strategy.
    fn builtin_list<'s>(self, field: &str, value: &Value, items: Option<&'s Value>) -> Shape<'s> {
        if field == "finalizers" {
            return Shape::Set;
        }
        let list = value.as_array().map(Vec::as_slice).unwrap_or_default();
        match crate::patch::merge_key(field, list) {
            Some(key) if list.iter().all(Value::is_object) => Shape::Keyed(vec![key.into()], items),
            _ => Shape::Atomic,
        }
    }

    /// The path element of a list item: `k:{...}` by its keys, `v:...` in a set.
    fn item_element(
        &self,
        shape: &Shape<'_>,
        item: &Value,
        index: usize,
    ) -> Result<String, String> {
        match shape {
            Shape::Keyed(keys, items) if !keys.is_empty() => {
                let mut sorted = keys.clone();
                sorted.sort();
                let props = resolve(*items).and_then(|s| s.get("properties"));
                let mut k = Map::new();
                for name in sorted {
                    let v = item
                        .get(&name)
                        .or_else(|| props.and_then(|p| p.get(&name)).and_then(|p| p.get("default")))
                        .ok_or_else(|| format!("associative list with keys has an element that omits key field {name:?} (and doesn't have default value)"))?;
                    k.insert(name, v.clone());
                }
                Ok(format!("k:{}", Value::Object(k)))
            }
            Shape::Set => Ok(format!("v:{item}")),
            _ => Ok(format!("i:{index}")),
        }
    }

    fn child_schema<'s>(shape: &Shape<'s>, key: &str) -> (Option<&'s Value>, bool) {
        match shape {
            Shape::Struct(props, extra) => match props.get(key) {
                Some(s) => (Some(s), true),
                None => (*extra, false),
            },
            Shape::Map(elem) => (*elem, false),
            Shape::Keyed(_, items) => (*items, false),
            _ => (None, false),
        }
    }

    /// The field set of `value`, and each member's value (for comparisons).
    pub(crate) fn field_set<'v>(
        self,
        value: &'v Value,
        schema: Option<&Value>,
    ) -> Result<(Set, HashMap<Vec<String>, &'v Value>), String> {
        let mut set = Set::default();
        let mut values = HashMap::new();
        self.walk(value, schema, "", &mut Vec::new(), &mut set, &mut values)?;
        Ok((set, values))
    }

    fn walk<'v>(
        self,
        value: &'v Value,
        schema: Option<&Value>,
        field: &str,
        path: &mut Vec<String>,
        set: &mut Set,
        values: &mut HashMap<Vec<String>, &'v Value>,
    ) -> Result<(), String> {
        let shape = self.shape(schema, value, field);
        match (&shape, value) {
            (Shape::Struct(..) | Shape::Map(_), Value::Object(m)) => {
                for (k, v) in m {
                    let (child, declared) = Self::child_schema(&shape, k);
                    path.push(format!("f:{k}"));
                    self.walk(v, child, k, path, set, values)?;
                    let empty = v.is_null() || v.as_object().is_some_and(Map::is_empty);
                    if !declared || empty {
                        set.insert(path);
                        values.insert(path.clone(), v);
                    }
                    path.pop();
                }
            }
            (Shape::Keyed(..) | Shape::Set, Value::Array(items)) => {
                let (child, _) = Self::child_schema(&shape, "");
                for (i, item) in items.iter().enumerate() {
                    path.push(self.item_element(&shape, item, i)?);
                    if matches!(shape, Shape::Keyed(..)) {
                        self.walk(item, child, "", path, set, values)?;
                    }
                    set.insert(path);
                    values.insert(path.clone(), item);
                    path.pop();
                }
            }
            _ if path.is_empty() => {}
            _ => {
                set.insert(path);
                values.insert(path.clone(), value);
            }
        }
        Ok(())
    }

    /// Server-side apply's merge: `config` over `live`. Atomic values and scalars are
    /// replaced; structs and maps merge by key; keyed lists by item key; sets by value.
    pub(crate) fn merge(
        self,
        live: &Value,
        config: &Value,
        schema: Option<&Value>,
        field: &str,
    ) -> Result<Value, String> {
        let shape = self.shape(schema, config, field);
        match (&shape, config) {
            (Shape::Struct(..) | Shape::Map(_), Value::Object(cm)) => {
                let mut out = live.as_object().cloned().unwrap_or_default();
                for (k, cv) in cm {
                    let (child, _) = Self::child_schema(&shape, k);
                    let lv = out.get(k).cloned().unwrap_or(Value::Null);
                    out.insert(k.clone(), self.merge(&lv, cv, child, k)?);
                }
                Ok(Value::Object(out))
            }
            (Shape::Keyed(..), Value::Array(items)) => {
                let (child, _) = Self::child_schema(&shape, "");
                let mut out: Vec<Value> = live.as_array().cloned().unwrap_or_default();
                let mut ids = Vec::new();
                for (i, item) in out.iter().enumerate() {
                    ids.push(self.item_element(&shape, item, i).ok());
                }
                let mut seen = std::collections::HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    let id = self.item_element(&shape, item, i)?;
                    if !seen.insert(id.clone()) {
                        return Err(format!("duplicate entries for key {}", &id[2..]));
                    }
                    match ids.iter().position(|x| x.as_deref() == Some(&id)) {
                        Some(p) => out[p] = self.merge(&out[p], item, child, "")?,
                        None => {
                            out.push(self.merge(&Value::Null, item, child, "")?);
                            ids.push(Some(id));
                        }
                    }
                }
                Ok(Value::Array(out))
            }
            (Shape::Set, Value::Array(items)) => {
                let mut out: Vec<Value> = live.as_array().cloned().unwrap_or_default();
                for item in items {
                    if !out.contains(item) {
                        out.push(item.clone());
                    }
                }
                Ok(Value::Array(out))
            }
            _ => Ok(config.clone()),
        }
    }

    /// Removes the members of `remove` from `value`, except where `keep` (what other
    /// managers own) has something at or below them: then only the parts it does not own go.
    pub(crate) fn prune(
        self,
        value: &mut Value,
        schema: Option<&Value>,
        field: &str,
        remove: &Set,
        keep: Option<&Set>,
    ) {
        let shape = self.shape(schema, value, field);
        let kept = |name: &str| keep.and_then(|k| k.children.get(name));
        match value {
            Value::Object(m) => {
                for (name, rm) in &remove.children {
                    let Some(key) = name.strip_prefix("f:") else {
                        continue;
                    };
                    let keep_child = kept(name);
                    if rm.member && keep_child.is_none_or(Set::is_empty) {
                        m.remove(key);
                    } else if let Some(v) = m.get_mut(key) {
                        let (child, _) = Self::child_schema(&shape, key);
                        self.prune(v, child, key, rm, keep_child);
                    }
                }
            }
            Value::Array(items) => {
                let (child, _) = Self::child_schema(&shape, "");
                let mut drop = Vec::new();
                for (i, item) in items.iter_mut().enumerate() {
                    let Ok(id) = self.item_element(&shape, item, i) else {
                        continue;
                    };
                    let Some(rm) = remove.children.get(&id) else {
                        continue;
                    };
                    let keep_child = kept(&id);
                    if rm.member && keep_child.is_none_or(Set::is_empty) {
                        drop.push(i);
                    } else {
                        self.prune(item, child, "", rm, keep_child);
                    }
                }
                for i in drop.into_iter().rev() {
                    items.remove(i);
                }
            }
            _ => {}
        }
    }
}
