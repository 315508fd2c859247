//! Structural-schema handling of custom resources, as kube-apiserver does it on every write:
//! defaulting, pruning of unknown fields, and type/required/enum validation.

use serde_json::Value;

/// Applies `default`s and prunes fields the schema does not know (unless
/// `x-kubernetes-preserve-unknown-fields`), starting at the object's root, where
/// `apiVersion`, `kind` and `metadata` are always kept.
pub(crate) fn default_and_prune(obj: &mut Value, schema: &Value) {
    let Some(m) = obj.as_object_mut() else { return };
    let keep: Vec<(String, Value)> = ["apiVersion", "kind", "metadata"]
        .iter()
        .filter_map(|k| m.remove(*k).map(|v| (k.to_string(), v)))
        .collect();
    walk(obj, schema);
    if let Some(m) = obj.as_object_mut() {
        let rest = std::mem::take(m);
        m.extend(keep);
        m.extend(rest);
    }
}

fn preserves(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

fn walk(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if let Some(props) = props {
                for (k, s) in props {
                    if !m.contains_key(k)
                        && let Some(d) = s.get("default")
                    {
                        m.insert(k.clone(), d.clone());
                    }
                }
            }
            let embedded = schema
                .get("x-kubernetes-embedded-resource")
                .and_then(Value::as_bool)
                == Some(true);
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let sub = props.and_then(|p| p.get(&k)).or(additional);
                match sub {
                    Some(s) => {
                        if let Some(child) = m.get_mut(&k) {
                            walk(child, s);
                        }
                    }
                    None if preserves(schema) => {}
                    None if embedded
                        && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") => {}
                    None => {
                        m.remove(&k);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for i in items {
                    walk(i, s);
                }
            }
        }
        _ => {}
    }
}

/// Problems (`field`, message) of a pruned object against its schema: wrong types, missing
/// required fields, values outside an enum.
pub(crate) fn validate(obj: &Value, schema: &Value) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    let mut root = obj.as_object().cloned().unwrap_or_default();
    for k in ["apiVersion", "kind", "metadata"] {
        root.remove(k);
    }
    check(&Value::Object(root), schema, "", &mut errs, true);
    errs
}

fn type_ok(v: &Value, ty: &str, schema: &Value) -> bool {
    if schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return v.is_i64() || v.is_u64() || v.is_string();
    }
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => true,
    }
}

fn check(v: &Value, schema: &Value, path: &str, errs: &mut Vec<(String, String)>, root: bool) {
    if v.is_null() {
        if schema.get("nullable").and_then(Value::as_bool) != Some(true) && !root {
            errs.push((
                path.to_string(),
                "Invalid value: \"null\": must not be null".into(),
            ));
        }
        return;
    }
    if let Some(ty) = schema.get("type").and_then(Value::as_str)
        && !root
        && !type_ok(v, ty, schema)
    {
        errs.push((
            path.to_string(),
            format!(
                "Invalid value: {}: {path} in body must be of type {ty}",
                short(v)
            ),
        ));
        return;
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(v)
    {
        errs.push((path.to_string(), format!("Unsupported value: {}", short(v))));
    }
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for r in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(r) = r.as_str()
                    && !m.contains_key(r)
                {
                    errs.push((join(r), "Required value".into()));
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in m {
                if let Some(s) = props.and_then(|p| p.get(k)).or(additional) {
                    check(child, s, &join(k), errs, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item, s, &format!("{path}[{i}]"), errs, false);
                }
            }
        }
        _ => {}
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!("{}...", &s[..s.floor_char_boundary(57)])
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prunes_defaults_and_validates() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer"}, "mode": {"type": "string", "default": "fast", "enum": ["fast", "slow"]}}},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
        let mut o = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "spec": {"size": 1, "junk": 2}, "status": {"any": {"thing": 1}}, "top": 1});
        default_and_prune(&mut o, &schema);
        assert_eq!(
            o,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "spec": {"size": 1, "mode": "fast"}, "status": {"any": {"thing": 1}}})
        );
        assert!(validate(&o, &schema).is_empty());
        let bad = json!({"spec": {"size": "big", "mode": "medium"}});
        let errs = validate(&bad, &schema);
        assert_eq!(errs.len(), 2, "{errs:?}");
        let errs = validate(&json!({"spec": {"mode": "medium"}}), &schema);
        assert_eq!(errs.len(), 2, "{errs:?}");
    }
}
