//! Name, label and annotation checks, following apimachinery's validation rules.

use serde_json::Value;

fn is_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// RFC 1123 label: lowercase alphanumerics and '-', alphanumeric at both ends, ≤ 63.
pub(crate) fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| is_alnum(c) || c == '-')
        && s.starts_with(is_alnum)
        && s.ends_with(is_alnum)
}

/// RFC 1123 subdomain: dot-separated labels, ≤ 253.
pub(crate) fn dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(dns_label)
}

/// A qualified name (label/annotation key without prefix): ≤ 63, alphanumerics, '-', '_', '.'.
fn qualified_name_part(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| ok(c) || matches!(c, '-' | '_' | '.'))
        && s.starts_with(ok)
        && s.ends_with(ok)
}

/// Problems with a label or annotation key (`prefix/name`); empty when valid.
pub(crate) fn label_key(k: &str) -> Vec<String> {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let mut errs = Vec::new();
    if let Some(p) = prefix
        && !dns_subdomain(p)
    {
        errs.push(format!("prefix part of {k:?} must be a DNS subdomain"));
    }
    if !qualified_name_part(name) {
        errs.push(format!("name part of {k:?} must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (at most 63)"));
    }
    errs
}

/// Problems with a label value; empty when valid (empty values are valid).
pub(crate) fn label_value(v: &str) -> Vec<String> {
    if v.is_empty() || qualified_name_part(v) {
        Vec::new()
    } else {
        vec![format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (got {v:?})"
        )]
    }
}

/// Decode-level checks: fields with the wrong JSON type are a 400 in kube (the body does not
/// decode), so they are reported separately from 422 validation problems.
pub(crate) fn metadata_types(obj: &Value) -> Result<(), String> {
    let Some(obj) = obj.as_object() else {
        return Err("the body must be a JSON object".into());
    };
    for f in ["apiVersion", "kind"] {
        if obj.get(f).is_some_and(|v| !v.is_string() && !v.is_null()) {
            return Err(format!("{f} must be a string"));
        }
    }
    let Some(meta) = obj.get("metadata") else {
        return Ok(());
    };
    if meta.is_null() {
        return Ok(());
    }
    let Some(meta) = meta.as_object() else {
        return Err("metadata must be an object".into());
    };
    for f in [
        "name",
        "generateName",
        "namespace",
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
    ] {
        if meta.get(f).is_some_and(|v| !v.is_string() && !v.is_null()) {
            return Err(format!("metadata.{f} must be a string"));
        }
    }
    for f in ["labels", "annotations"] {
        match meta.get(f) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                if m.values().any(|v| !v.is_string()) {
                    return Err(format!("metadata.{f} values must be strings"));
                }
            }
            Some(_) => return Err(format!("metadata.{f} must be an object")),
        }
    }
    match meta.get("finalizers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        Some(_) => return Err("metadata.finalizers must be a list of strings".into()),
    }
    match meta.get("ownerReferences") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().all(|r| r.get("uid").is_some_and(Value::is_string)) => {}
        Some(_) => {
            return Err("metadata.ownerReferences must be a list of objects with a uid".into());
        }
    }
    if meta
        .get("generation")
        .is_some_and(|v| !v.is_i64() && !v.is_null())
    {
        return Err("metadata.generation must be an integer".into());
    }
    Ok(())
}

/// 422-level problems with labels, annotations and finalizers: `(field, message)` pairs.
pub(crate) fn metadata(meta: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            for e in label_key(k) {
                out.push(("metadata.labels".to_string(), e));
            }
            for e in label_value(v.as_str().unwrap_or("")) {
                out.push((format!("metadata.labels[{k}]"), e));
            }
        }
    }
    if let Some(ann) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in ann {
            total += k.len() + v.as_str().map_or(0, str::len);
            for e in label_key(k) {
                out.push(("metadata.annotations".to_string(), e));
            }
        }
        if total > 256 * 1024 {
            out.push((
                "metadata.annotations".into(),
                "Too long: must have at most 262144 bytes".into(),
            ));
        }
    }
    if let Some(fins) = meta.get("finalizers").and_then(Value::as_array) {
        for f in fins.iter().filter_map(Value::as_str) {
            if !f.contains('/') && !f.starts_with("kubernetes") && !label_key(f).is_empty()
                || f.contains('/') && !label_key(f).is_empty()
            {
                out.push((
                    "metadata.finalizers".into(),
                    format!("{f:?}: must be a qualified name"),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(dns_label("a-1") && !dns_label("-a") && !dns_label("A") && !dns_label(""));
        assert!(dns_subdomain("a.b-c.d") && !dns_subdomain("a..b"));
        assert!(label_key("kopf.dev/x_y").is_empty() && !label_key("a/b/c").is_empty());
        assert!(label_value("").is_empty() && !label_value("-x").is_empty());
    }
}
