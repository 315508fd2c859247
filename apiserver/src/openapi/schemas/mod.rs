//! Schemas (in OpenAPI v3 form) of the built-in kinds, the shared meta/v1
//! types, and the wrapping of CRD schemas as kube-apiserver publishes them.
//!
//! Built-in schemas are hand-written and deliberately permissive: every
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

mod core;
mod meta;
mod other;

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::registry::ResourceType;

/// Prefix of a v3 reference to a component schema.
pub(super) const REF_PREFIX: &str = "#/components/schemas/";

/// Package of the meta/v1 types.
pub(super) const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

/// The definition name of ObjectMeta.
pub(super) fn object_meta() -> String {
    format!("{META}.ObjectMeta")
}

// ---- A tiny schema DSL ------------------------------------------------------

pub(super) fn string() -> Value {
    json!({"type": "string"})
}

pub(super) fn int32() -> Value {
    json!({"type": "integer", "format": "int32"})
}

pub(super) fn int64() -> Value {
    json!({"type": "integer", "format": "int64"})
}

pub(super) fn boolean() -> Value {
    json!({"type": "boolean"})
}

pub(super) fn time() -> Value {
    reference(&format!("{META}.Time"))
}

pub(super) fn micro_time() -> Value {
    reference(&format!("{META}.MicroTime"))
}

pub(super) fn int_or_string() -> Value {
    reference("io.k8s.apimachinery.pkg.util.intstr.IntOrString")
}

pub(super) fn quantity() -> Value {
    reference("io.k8s.apimachinery.pkg.api.resource.Quantity")
}

pub(super) fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string", "default": ""}})
}

/// A list of strings merged as a set by strategic merge patch.
pub(super) fn string_set() -> Value {
    json!({
        "type": "array",
        "items": {"type": "string", "default": ""},
        "x-kubernetes-list-type": "set",
        "x-kubernetes-patch-strategy": "merge",
    })
}

pub(super) fn string_map() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}})
}

pub(super) fn byte_map() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string", "format": "byte"}})
}

pub(super) fn quantity_map() -> Value {
    json!({"type": "object", "additionalProperties": quantity()})
}

/// An object whose fields are not described: anything is accepted.
pub(super) fn open() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// A reference to a named component schema, in kube's v3 style.
pub(super) fn reference(name: &str) -> Value {
    json!({"allOf": [{"$ref": format!("{REF_PREFIX}{name}")}], "default": {}})
}

pub(super) fn object(props: Vec<(&str, Value)>) -> Value {
    let properties: Map<String, Value> =
        props.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    json!({"type": "object", "properties": properties})
}

/// An object with some fields described and any others accepted.
pub(super) fn partial(props: Vec<(&str, Value)>) -> Value {
    let mut o = object(props);
    o["x-kubernetes-preserve-unknown-fields"] = Value::Bool(true);
    o
}

pub(super) fn atomic_list(item: Value) -> Value {
    json!({"type": "array", "items": item, "x-kubernetes-list-type": "atomic"})
}

pub(super) fn list_of(name: &str) -> Value {
    json!({"type": "array", "items": reference(name)})
}

/// A list merged by key under strategic merge patch (and a list-map for
/// server-side apply).
pub(super) fn merge_list(item: Value, key: &str) -> Value {
    merge_list_keys(item, key, &[key])
}

pub(super) fn merge_list_keys(item: Value, key: &str, map_keys: &[&str]) -> Value {
    json!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": map_keys,
        "x-kubernetes-patch-merge-key": key,
        "x-kubernetes-patch-strategy": "merge",
    })
}

pub(super) fn describe(mut v: Value, text: &str) -> Value {
    v["description"] = Value::String(text.to_owned());
    v
}

pub(super) fn required(mut v: Value, fields: &[&str]) -> Value {
    v["required"] = json!(fields);
    v
}

// ---- Names --------------------------------------------------------------

/// The definition-name package of an API group, as kube names them:
/// `io.k8s.api.core`, `io.k8s.api.apps`, ..., and the reversed group for
/// anything else (`kopf.dev` -> `dev.kopf`).
pub(super) fn package(group: &str) -> String {
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

pub(super) fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

// ---- Kinds ----------------------------------------------------------------

pub(super) fn type_meta_props(kind_desc: &str) -> Vec<(&'static str, Value)> {
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
            describe(
                reference(&object_meta()),
                if kind_desc.is_empty() {
                    "Standard object's metadata."
                } else {
                    kind_desc
                },
            ),
        ),
    ]
}

/// A top-level kind: apiVersion, kind, metadata, the given fields, and its GVK.
pub(super) fn kind(
    group: &str,
    version: &str,
    kind_name: &str,
    description: &str,
    fields: Vec<(&'static str, Value)>,
) -> (String, Value) {
    let mut props = type_meta_props("");
    props.extend(fields);
    let mut schema = describe(object(props), description);
    schema["x-kubernetes-group-version-kind"] = gvk(group, version, kind_name);
    (definition_name(group, version, kind_name), schema)
}

/// `<Kind>List` for a kind whose item definition is `item`.
pub(super) fn list_schema(
    group: &str,
    version: &str,
    kind_name: &str,
    item: &str,
) -> (String, Value) {
    let list_kind = format!("{kind_name}List");
    let mut props = type_meta_props("");
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
    let mut properties: Map<String, Value> = type_meta_props("")
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

/// Every hand-written definition, by name.
pub(super) fn definitions() -> &'static BTreeMap<String, Value> {
    static DEFS: OnceLock<BTreeMap<String, Value>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let mut d = BTreeMap::new();
        meta::definitions(&mut d);
        core::definitions(&mut d);
        other::definitions(&mut d);
        d
    })
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

pub(super) fn add(d: &mut BTreeMap<String, Value>, name: String, schema: Value) {
    d.insert(name, schema);
}
