//! OpenAPI documents (`/openapi/v2`, `/openapi/v3`) built from the served resource types.
//!
//! # What kubectl does with them, and what we chose
//!
//! kubectl 1.32 (`--validate=true`, i.e. `Strict`, is the default) first asks
//! whether the *server* validates fields: it reads the `/openapi/v3` index,
//! fetches the group-version document of the object, finds the PATCH
//! operation whose `x-kubernetes-group-version-kind` is the object's GVK and
//! looks for a `fieldValidation` query parameter on it. If it is there,
//! kubectl does no schema validation of its own and sends
//! `?fieldValidation=Strict` with create/update/patch. Otherwise it validates
//! client-side against the OpenAPI schemas, and a missing or wrong schema
//! rejects valid objects. (If the v3 document has no PATCH path for the GVK at
//! all, kubectl falls back to `/openapi/v2`, which client-go fetches as
//! protobuf only, and fails.)
//!
//! **We advertise server-side field validation** (as every kube-apiserver
//! since 1.27 does): every resource type gets a PATCH operation carrying
//! `fieldValidation`, so kubectl never rejects an object on our hand-written
//! schemas. The server then receives `fieldValidation=Strict|Warn|Ignore`
//! and must accept it (kube-apiserver answers unknown fields under `Strict`
//! with 400 BadRequest, `strict decoding error: unknown field "spec.x"`).
//!
//! The documents still matter beyond validation:
//!
//! - client-side `kubectl apply` of a built-in computes a three-way strategic
//!   merge patch from the v3 component schema carrying the kind's
//!   `x-kubernetes-group-version-kind`, when the PATCH operation lists
//!   `application/strategic-merge-patch+json`; it needs the
//!   `x-kubernetes-patch-merge-key`/`-strategy` extensions (see
//!   [`schemas`]). Custom resources do not list that content type, so kubectl
//!   sends a JSON merge patch for them, as with a real cluster;
//! - `kubectl explain` renders the v3 component schema of the kind;
//! - custom resources are published from their CRD's `openAPIV3Schema`,
//!   with `apiVersion`, `kind` and `metadata` (a reference to ObjectMeta)
//!   added, as kube-apiserver does.
//!
//! The `/openapi/v3` index points at each group-version document with a
//! `?hash=` of that document's bytes, so kubectl's HTTP cache sees a new URL
//! whenever a document changes (e.g. a CRD's schema). `/openapi/v2` is the
//! same content as one Swagger 2.0 document (JSON only).

pub(crate) mod fields;
mod paths;
mod schemas;
mod v2_protobuf;

pub(crate) use v2_protobuf::encode as v2_protobuf;

use std::collections::{BTreeMap, BTreeSet};

use crate::registry::ResourceType;
use serde_json::{Map, Value, json};

use schemas::{META, REF_PREFIX};

const INFO_VERSION: &str = "v1.32.0";

/// The whole Swagger 2.0 document served at `/openapi/v2`.
pub(crate) fn v2(resources: &[ResourceType]) -> Value {
    let mut paths = BTreeMap::new();
    let mut definitions = BTreeMap::new();
    for (group, version) in group_versions(resources) {
        let Some(doc) = v3_group_version(resources, &group, &version) else {
            continue;
        };
        if let Some(Value::Object(ps)) = doc.get("paths") {
            for (path, item) in ps {
                paths.insert(path.clone(), path_item_to_v2(item));
            }
        }
        if let Some(Value::Object(ss)) = doc.pointer("/components/schemas") {
            for (name, schema) in ss {
                definitions.insert(name.clone(), schema_to_v2(schema));
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": INFO_VERSION},
        "paths": paths.into_iter().collect::<Map<_, _>>(),
        "definitions": definitions.into_iter().collect::<Map<_, _>>(),
        "securityDefinitions": {
            "BearerToken": {"description": "Bearer Token authentication", "type": "apiKey", "name": "authorization", "in": "header"},
        },
        "security": [{"BearerToken": []}],
    })
}

/// The `/openapi/v3` discovery index: one entry per group-version.
pub(crate) fn v3_index(resources: &[ResourceType]) -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions(resources) {
        let Some(doc) = v3_group_version(resources, &group, &version) else {
            continue;
        };
        let key = if group.is_empty() {
            format!("api/{version}")
        } else {
            format!("apis/{group}/{version}")
        };
        let hash = document_hash(&doc);
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// The OpenAPI v3 document of one group-version (`/openapi/v3/api/v1`,
/// `/openapi/v3/apis/<group>/<version>`); None when nothing is served there.
pub(crate) fn v3_group_version(
    resources: &[ResourceType],
    group: &str,
    version: &str,
) -> Option<Value> {
    let mut served: Vec<&ResourceType> = resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    // The document (and so its hash) must not depend on the table's order.
    served.sort_by(|a, b| (&a.plural, &a.kind).cmp(&(&b.plural, &b.kind)));

    let mut schemas = BTreeMap::new();
    let mut paths = BTreeMap::new();
    for rt in served {
        let (name, schema) = kind_schema(rt).clone();
        let (list_name, list) = schemas::list_schema(group, version, &rt.kind, &name);
        for (path, item) in paths::paths(rt, &name, &list_name) {
            paths.insert(path, item);
        }
        schemas.insert(name, schema);
        schemas.insert(list_name, list);
    }
    add_referenced_definitions(&mut schemas, &paths);

    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": INFO_VERSION},
        "paths": paths.into_iter().collect::<Map<_, _>>(),
        "components": {
            "schemas": schemas.into_iter().collect::<Map<_, _>>(),
            "securitySchemes": {
                "BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"},
            },
        },
        "security": [{"BearerToken": []}],
    }))
}

/// The served group-versions, sorted.
fn group_versions(resources: &[ResourceType]) -> BTreeSet<(String, String)> {
    resources
        .iter()
        .map(|r| (r.group.clone(), r.version.clone()))
        .collect()
}

/// The component name and schema of a resource type's kind: the
/// hand-written one for known built-ins, else the given schema (a CRD's
/// `openAPIV3Schema`) wrapped as kube does, else an open object.
///
/// Built once per resource type (kept in [`ResourceType::kind_schema`]).
pub(crate) fn kind_schema(rt: &ResourceType) -> &(String, Value) {
    rt.kind_schema.get_or_init(|| {
        if !rt.custom
            && let Some((name, def)) = schemas::builtin_kind(&rt.group, &rt.version, &rt.kind)
        {
            return (name, def.clone());
        }
        let name = schemas::definition_name(&rt.group, &rt.version, &rt.kind);
        (name, schemas::from_given_schema(rt, rt.schema.as_ref()))
    })
}

/// Adds every shared definition that the schemas and paths reference,
/// transitively.
fn add_referenced_definitions(
    schemas: &mut BTreeMap<String, Value>,
    paths: &BTreeMap<String, Value>,
) {
    let mut pending = Vec::new();
    for v in schemas.values().chain(paths.values()) {
        collect_refs(v, &mut pending);
    }
    for extra in ["Status", "DeleteOptions", "Patch"] {
        pending.push(format!("{META}.{extra}"));
    }
    let known = schemas::definitions();
    while let Some(name) = pending.pop() {
        if schemas.contains_key(&name) {
            continue;
        }
        if let Some(def) = known.get(&name) {
            collect_refs(def, &mut pending);
            schemas.insert(name, def.clone());
        }
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                if k == "$ref"
                    && let Some(name) = v.as_str().and_then(|s| s.strip_prefix(REF_PREFIX))
                {
                    out.push(name.to_owned());
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// A stable 128-bit FNV-1a hash of the document's JSON, in upper-case hex
/// (kube uses SHA-512; kubectl only needs the URL to change with the content).
fn document_hash(doc: &Value) -> String {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let bytes = doc.to_string();
    let hash = bytes
        .as_bytes()
        .iter()
        .fold(OFFSET, |h, b| (h ^ u128::from(*b)).wrapping_mul(PRIME));
    format!("{hash:032X}")
}

// ---- v3 -> Swagger 2.0 -------------------------------------------------------

/// A v3 schema as Swagger 2.0 has it: `#/definitions/` references, single
/// `allOf` references flattened, and no `nullable`/`anyOf`/`oneOf`/`not`
/// (which kube also drops from CRD schemas in v2).
fn schema_to_v2(v: &Value) -> Value {
    match v {
        Value::Object(o) => {
            let mut out = Map::new();
            if let Some(Value::Array(all)) = o.get("allOf")
                && all.len() == 1
                && let Some(r) = all[0].get("$ref")
            {
                out.insert("$ref".to_owned(), ref_to_v2(r));
            }
            for (k, v) in o {
                match k.as_str() {
                    "nullable" | "anyOf" | "oneOf" | "not" => {}
                    "allOf" if out.contains_key("$ref") => {}
                    "default" if out.contains_key("$ref") => {}
                    "$ref" => {
                        out.insert(k.clone(), ref_to_v2(v));
                    }
                    // Keys of `properties` are field names, not keywords.
                    "properties" => {
                        let props = v
                            .as_object()
                            .map(|p| {
                                p.iter()
                                    .map(|(n, s)| (n.clone(), schema_to_v2(s)))
                                    .collect()
                            })
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    _ => {
                        out.insert(k.clone(), schema_to_v2(v));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(schema_to_v2).collect()),
        other => other.clone(),
    }
}

fn ref_to_v2(r: &Value) -> Value {
    match r.as_str().and_then(|s| s.strip_prefix(REF_PREFIX)) {
        Some(name) => Value::String(format!("#/definitions/{name}")),
        None => r.clone(),
    }
}

fn parameter_to_v2(p: &Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(o) = p {
        for (k, v) in o {
            if k == "schema" {
                if let Value::Object(s) = v {
                    out.extend(s.clone());
                }
            } else {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn operation_to_v2(op: &Value) -> Value {
    let Value::Object(o) = op else {
        return op.clone();
    };
    let mut out = Map::new();
    let mut params: Vec<Value> = o
        .get("parameters")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().map(parameter_to_v2).collect())
        .unwrap_or_default();
    for (k, v) in o {
        match k.as_str() {
            "parameters" => {}
            "requestBody" => {
                let content = v.get("content").and_then(Value::as_object);
                let schema = content
                    .and_then(|c| c.values().next())
                    .and_then(|m| m.get("schema"))
                    .map(schema_to_v2)
                    .unwrap_or_else(|| json!({"type": "object"}));
                params.insert(
                    0,
                    json!({"name": "body", "in": "body", "required": true, "schema": schema}),
                );
                let consumes: Vec<&String> =
                    content.map(|c| c.keys().collect()).unwrap_or_default();
                out.insert("consumes".to_owned(), json!(consumes));
            }
            "responses" => {
                let mut responses = Map::new();
                for (code, r) in v.as_object().into_iter().flatten() {
                    let mut resp =
                        json!({"description": r.get("description").cloned().unwrap_or(json!(""))});
                    if let Some(s) = r.pointer("/content/application~1json/schema") {
                        resp["schema"] = schema_to_v2(s);
                    }
                    responses.insert(code.clone(), resp);
                }
                out.insert(k.clone(), Value::Object(responses));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out.insert("parameters".to_owned(), Value::Array(params));
    out.insert(
        "produces".to_owned(),
        json!([
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf"
        ]),
    );
    out.insert("schemes".to_owned(), json!(["https"]));
    Value::Object(out)
}

fn path_item_to_v2(item: &Value) -> Value {
    let Value::Object(o) = item else {
        return item.clone();
    };
    let mut out = Map::new();
    for (k, v) in o {
        if k == "parameters" {
            let ps: Vec<Value> = v
                .as_array()
                .into_iter()
                .flatten()
                .map(parameter_to_v2)
                .collect();
            out.insert(k.clone(), Value::Array(ps));
        } else {
            out.insert(k.clone(), operation_to_v2(v));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests;
