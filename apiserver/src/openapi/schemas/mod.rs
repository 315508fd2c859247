//! Schemas (in OpenAPI v3 form) of the built-in kinds, the shared meta/v1
//! types, and the wrapping of CRD schemas as kube-apiserver publishes them.
//!
//! Built-in schemas are hand-written data (`meta.json`: the shared meta/v1
//! types; `core.json`: the core `v1` kinds kubectl walks and their parts;
//! `groups.json`: the kinds of the named groups, apps, batch, rbac, ...), each
//! a map of definition name to schema. They are deliberately permissive: every
//! object whose fields are not listed in full carries
//! `x-kubernetes-preserve-unknown-fields: true`. They are accurate where
//! kubectl reads them:
//!
//! - `x-kubernetes-group-version-kind` (an array on definitions, as kube does);
//! - the strategic-merge extensions (`x-kubernetes-patch-merge-key`,
//!   `x-kubernetes-patch-strategy`) on the lists that have them in Kubernetes
//!   (containers, env, ports, volumeMounts, volumes, ownerReferences,
//!   finalizers, service ports, ...), because client-side `kubectl apply`
//!   computes its three-way strategic merge patch by walking these schemas;
//! - property trees for the paths that such a walk enters (a map or list
//!   present in both the last-applied and the new manifest). Where a walk
//!   meets a field the schema does not list, kubectl prints a warning and
//!   falls back to its compiled-in Go types, which give the same patch.
//!
//! Some values are there as kube publishes them, for server-side apply: the
//! `default` of a container port's `protocol` (`TCP`; apply keys ports by it),
//! and `x-kubernetes-map-type: atomic` on LabelSelector (apply owns a selector
//! as a whole).

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::LazyLock;

use crate::registry::ResourceType;

/// Prefix of a v3 reference to a component schema.
pub(super) const REF_PREFIX: &str = "#/components/schemas/";

/// Package of the meta/v1 types.
pub(super) const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

/// The files of hand-written definitions, by name, in the order they are read.
const DEFINITION_FILES: [(&str, &str); 3] = [
    ("meta.json", include_str!("meta.json")),
    ("core.json", include_str!("core.json")),
    ("groups.json", include_str!("groups.json")),
];

/// The definition name of ObjectMeta.
fn object_meta() -> String {
    format!("{META}.ObjectMeta")
}

// ---- The few schema shapes built in code -----------------------------------

fn string() -> Value {
    json!({"type": "string"})
}

/// An object whose fields are not described: anything is accepted.
fn open() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// A reference to a named component schema, in kube's v3 style.
fn reference(name: &str) -> Value {
    json!({"allOf": [{"$ref": format!("{REF_PREFIX}{name}")}], "default": {}})
}

fn object(props: Vec<(&str, Value)>) -> Value {
    let properties: Map<String, Value> =
        props.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    json!({"type": "object", "properties": properties})
}

fn list_of(name: &str) -> Value {
    json!({"type": "array", "items": reference(name)})
}

fn describe(mut v: Value, text: &str) -> Value {
    v["description"] = Value::String(text.to_owned());
    v
}

fn required(mut v: Value, fields: &[&str]) -> Value {
    v["required"] = json!(fields);
    v
}

// ---- Names --------------------------------------------------------------

/// The definition-name package of an API group, as kube names them:
/// `io.k8s.api.core`, `io.k8s.api.apps`, ..., and the reversed group for
/// anything else (`kopf.dev` -> `dev.kopf`).
fn package(group: &str) -> String {
    match group {
        "" => "io.k8s.api.core".to_owned(),
        "apiextensions.k8s.io" => {
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions".to_owned()
        }
        "apiregistration.k8s.io" => "io.k8s.kube-aggregator.pkg.apis.apiregistration".to_owned(),
        g if !g.contains('.') || g.ends_with(".k8s.io") => {
            let first = g.split('.').next().unwrap_or(g);
            format!("io.k8s.api.{first}")
        }
        g => g.split('.').rev().collect::<Vec<_>>().join("."),
    }
}

/// The component-schema name of a kind in a group-version.
pub(super) fn definition_name(group: &str, version: &str, kind: &str) -> String {
    format!("{}.{version}.{kind}", package(group))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

// ---- Kinds ----------------------------------------------------------------

/// The members every kind has: `apiVersion`, `kind` and `metadata`.
fn type_meta_props() -> Vec<(&'static str, Value)> {
    vec![
        (
            "apiVersion",
            describe(
                string(),
                "APIVersion defines the versioned schema of this representation of an object. \
                 Servers should convert recognized schemas to the latest internal value, and may \
                 reject unrecognized values.",
            ),
        ),
        (
            "kind",
            describe(
                string(),
                "Kind is a string value representing the REST resource this object represents. \
                 Servers may infer this from the endpoint the client submits requests to. \
                 Cannot be updated. In CamelCase.",
            ),
        ),
        (
            "metadata",
            describe(reference(&object_meta()), "Standard object's metadata."),
        ),
    ]
}

/// `<Kind>List` for a kind whose item definition is `item`.
pub(super) fn list_schema(
    group: &str,
    version: &str,
    kind_name: &str,
    item: &str,
) -> (String, Value) {
    let list_kind = format!("{kind_name}List");
    let mut props = type_meta_props();
    props.pop();
    props.push((
        "items",
        describe(list_of(item), &format!("List of {kind_name} objects.")),
    ));
    props.push((
        "metadata",
        describe(
            reference(&format!("{META}.ListMeta")),
            "Standard list metadata.",
        ),
    ));
    let mut schema = required(
        describe(
            object(props),
            &format!("{list_kind} is a list of {kind_name}."),
        ),
        &["items"],
    );
    schema["x-kubernetes-group-version-kind"] = gvk(group, version, &list_kind);
    (definition_name(group, version, &list_kind), schema)
}

/// A top-level kind from a CRD's (or any other given) `openAPIV3Schema`, with
/// `apiVersion`, `kind` and `metadata` added and the GVK attached, as
/// kube-apiserver publishes custom resources.
pub(super) fn from_given_schema(rt: &ResourceType, given: Option<&Value>) -> Value {
    let mut schema = match given {
        Some(Value::Object(o)) => Value::Object(o.clone()),
        _ => open(),
    };
    if schema.get("type").is_none() {
        schema["type"] = Value::String("object".to_owned());
    }
    let mut properties: Map<String, Value> = type_meta_props()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    if let Some(Value::Object(given_props)) = schema.get("properties") {
        for (k, v) in given_props {
            // kube replaces the user's metadata schema with ObjectMeta.
            if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                properties.insert(k.clone(), v.clone());
            }
        }
    }
    schema["properties"] = Value::Object(properties);
    schema["x-kubernetes-group-version-kind"] = gvk(&rt.group, &rt.version, &rt.kind);
    schema
}

// ---- The shared and built-in definitions ----------------------------------

/// Every hand-written definition, by name: the data files, parsed once.
pub(super) fn definitions() -> &'static BTreeMap<String, Value> {
    static DEFINITIONS: LazyLock<BTreeMap<String, Value>> = LazyLock::new(|| {
        let mut all = BTreeMap::new();
        for (file, text) in DEFINITION_FILES {
            // The files are part of the build and checked by the tests: one that does not
            // parse is a bug in the build, served (loudly) without its definitions.
            match serde_json::from_str::<Map<String, Value>>(text) {
                Ok(definitions) => all.extend(definitions),
                Err(e) => {
                    tracing::error!(file, error = %e, "built-in OpenAPI definitions do not parse")
                }
            }
        }
        all
    });
    &DEFINITIONS
}

/// The hand-written definition of a built-in kind, if there is one.
pub(super) fn builtin_kind(
    group: &str,
    version: &str,
    kind_name: &str,
) -> Option<(String, &'static Value)> {
    let name = definition_name(group, version, kind_name);
    let def = definitions().get(&name)?;
    let has_gvk = def
        .get("x-kubernetes-group-version-kind")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|g| g["kind"] == kind_name && g["group"] == group && g["version"] == version)
        });
    has_gvk.then_some((name, def))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` under `v`, as the definition name it points to.
    fn references(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                for (k, v) in o {
                    match (k.as_str(), v.as_str()) {
                        ("$ref", Some(r)) => out.push(r.to_owned()),
                        _ => references(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| references(v, out)),
            _ => {}
        }
    }

    #[test]
    fn the_definition_files_parse_into_schemas_by_name() {
        let mut names = 0;
        for (file, text) in DEFINITION_FILES {
            let parsed: Map<String, Value> =
                serde_json::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(!parsed.is_empty(), "{file} is empty");
            for (name, schema) in &parsed {
                assert!(
                    schema.get("type").is_some_and(Value::is_string),
                    "{file}: {name} has no type"
                );
            }
            names += parsed.len();
        }
        // No name is defined twice (a later file would replace an earlier one's).
        assert_eq!(definitions().len(), names);
    }

    #[test]
    fn every_reference_names_a_definition() {
        let all = definitions();
        let mut refs = Vec::new();
        all.values().for_each(|d| references(d, &mut refs));
        assert!(!refs.is_empty());
        for r in refs {
            let name = r.strip_prefix(REF_PREFIX).unwrap_or_else(|| panic!("{r}"));
            assert!(all.contains_key(name), "{r} is not defined");
        }
        // The ones the documents and the list schemas add by name.
        for extra in ["ObjectMeta", "ListMeta", "Status", "DeleteOptions", "Patch"] {
            assert!(all.contains_key(&format!("{META}.{extra}")), "{extra}");
        }
    }

    #[test]
    fn kinds_are_found_under_their_group_version_kind() {
        let mut kinds = 0;
        for (name, def) in definitions() {
            let Some(gvks) = def.get("x-kubernetes-group-version-kind") else {
                continue;
            };
            let gvks = gvks
                .as_array()
                .unwrap_or_else(|| panic!("{name}: not an array"));
            for gvk in gvks {
                let field = |k: &str| gvk[k].as_str().unwrap_or_else(|| panic!("{name}: {k}"));
                let (group, version, kind) = (field("group"), field("version"), field("kind"));
                let found = builtin_kind(group, version, kind).map(|(n, _)| n);
                assert_eq!(found.as_deref(), Some(name.as_str()));
                kinds += 1;
            }
        }
        assert!(kinds >= 20, "{kinds} kinds");
        assert!(builtin_kind("", "v1", "Pod").is_some());
        assert!(builtin_kind("apps", "v1", "Deployment").is_some());
    }
}
