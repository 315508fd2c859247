//! Unknown-field detection against the published schemas, for the server's
//! `fieldValidation` handling (which kubectl relies on; see the module
//! documentation of [`super`]).
//!
//! kube-apiserver, given an object with fields its schema does not declare:
//! - `fieldValidation=Strict`: answers 400 BadRequest, e.g.
//!   `KopfExample in version "v1" cannot be handled as a KopfExample: strict
//!   decoding error: unknown field "spec.foo", unknown field "spec.bar"`;
//! - `Warn` (the default when the parameter is absent, as in kube): drops them and adds
//!   one `Warning: 299 - "unknown field \"spec.foo\""` header per field;
//! - `Ignore`: drops them silently.
//!
//! Fields under `x-kubernetes-preserve-unknown-fields: true` (and all of a
//! built-in's fields our hand-written schemas do not describe in full) are
//! never unknown, so a valid object is never rejected.

use serde_json::Value;

use super::schemas::{REF_PREFIX, definitions};
use crate::registry::ResourceType;

/// The paths (`spec.template.spec.containers[0].foo`) of the fields of
/// `object` that the schema of `rt`'s kind does not declare, in document
/// order.
pub(crate) fn unknown_fields(rt: &ResourceType, object: &Value) -> Vec<String> {
    let (_, schema) = super::kind_schema(rt);
    let mut out = Vec::new();
    walk(schema, object, "", &mut out);
    out
}

/// Follows `allOf: [{$ref}]` and `$ref` to the named definition.
pub(crate) fn resolve(schema: &Value) -> &Value {
    let target = schema
        .pointer("/allOf/0/$ref")
        .or_else(|| schema.get("$ref"))
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(REF_PREFIX));
    match target.and_then(|name| definitions().get(name)) {
        Some(def) => def,
        None => schema,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    if path == "metadata.managedFields" {
        // Field sets (FieldsV1) are opaque JSON to kube's decoder: never unknown fields.
        return;
    }
    let schema = resolve(schema);
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    match value {
        Value::Object(fields) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let embedded = schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
            if schema.get("x-kubernetes-int-or-string").is_some() {
                return;
            }
            for (key, v) in fields {
                if let Some(sub) = properties.and_then(|p| p.get(key)) {
                    walk(sub, v, &join(path, key), out);
                } else if let Some(extra) = additional {
                    match extra {
                        Value::Object(_) => walk(extra, v, &join(path, key), out),
                        Value::Bool(false) => out.push(join(path, key)),
                        _ => {}
                    }
                } else if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                } else if !preserve {
                    out.push(join(path, key));
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for (i, v) in items.iter().enumerate() {
                    walk(item_schema, v, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rt(group: &str, kind: &str, custom: bool, schema: Option<Value>) -> ResourceType {
        ResourceType {
            group: group.to_owned(),
            version: "v1".to_owned(),
            kind: kind.to_owned(),
            plural: format!("{}s", kind.to_lowercase()),
            singular: kind.to_lowercase(),
            short_names: vec![],
            categories: vec![],
            namespaced: true,
            verbs: vec![],
            has_status: false,
            preferred: true,
            schema,
            custom,
            kind_schema: Default::default(),
        }
    }

    #[test]
    fn builtins_accept_valid_objects_and_name_typos() {
        let deployment = rt("apps", "Deployment", false, None);
        let valid = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"a": "b"}, "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "1"}]},
            "spec": {
                "replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
                    "containers": [{"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}],
                                    "ports": [{"containerPort": 80}], "resources": {"limits": {"cpu": 1}},
                                    "securityContext": {"runAsUser": 1000}}],
                    "affinity": {"nodeAffinity": {}}, "someFutureField": true,
                }},
            },
            "status": {"replicas": 1, "whatever": {}},
        });
        assert_eq!(unknown_fields(&deployment, &valid), Vec::<String>::new());
        let typo = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "lables": {}},
            "spec": {"replica": 1, "template": {"spec": {"containers": [{"name": "c", "env": [{"name": "A", "valu": "1"}]}]}}},
        });
        assert_eq!(
            unknown_fields(&deployment, &typo),
            [
                "metadata.lables",
                "spec.replica",
                "spec.template.spec.containers[0].env[0].valu"
            ]
        );
        let cm = rt("", "ConfigMap", false, None);
        assert_eq!(
            unknown_fields(&cm, &json!({"data": {"a": "1"}, "spec": {}})),
            ["spec"]
        );
    }

    #[test]
    fn crd_schemas_are_structural() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "size": {"type": "integer"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}},
                }},
            },
        });
        let kex = rt("kopf.dev", "KopfExample", true, Some(schema));
        let obj = json!({
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "x"},
            "spec": {"size": 1, "port": "http", "tags": [{"k": "v", "x": 1}], "free": {"a": {"b": 1}},
                     "labels": {"a": "b"}, "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {"y": 1}},
                     "extra": 1},
            "status": {},
        });
        assert_eq!(
            unknown_fields(&kex, &obj),
            [
                "spec.tags[0].x",
                "spec.template.spec.y",
                "spec.extra",
                "status"
            ]
        );
        // The kopfexamples CRD keeps everything under spec and status.
        let open = rt(
            "kopf.dev",
            "KopfExample",
            true,
            Some(json!({"type": "object", "properties": {
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }})),
        );
        assert!(unknown_fields(&open, &obj).is_empty());
        assert_eq!(
            unknown_fields(&open, &json!({"spec": {}, "data": 1})),
            ["data"]
        );
    }
}
