//! kube-apiserver's checks of a written object: the body against the request (400), and
//! the complete object about to be stored (422): names, metadata, CRDs, pods' containers,
//! ConfigMaps' size, custom resources' schemas.

use super::Scope;
use crate::status::ApiError;
use crate::store::{CRDS, meta_str};
use serde_json::Value;

/// Body checks common to create and update: decodable metadata, matching apiVersion/kind.
pub(super) fn check_body(scope: &Scope, body: &Value) -> Result<(), ApiError> {
    crate::validate::metadata_types(body).map_err(ApiError::bad_request)?;
    let rt = &scope.rt;
    let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if !av.is_empty() && av != rt.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    if !kind.is_empty() && kind != rt.kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    if let Some(ns) = &scope.ns {
        let body_ns = meta_str(body, "namespace");
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    Ok(())
}

/// Kube's validation of a pod's containers (the part clients most often get wrong).
fn pod_problems(obj: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match obj.pointer("/spec/containers").and_then(Value::as_array) {
        None => out.push(("spec.containers".to_string(), "Required value".to_string())),
        Some(cs) if cs.is_empty() => {
            out.push(("spec.containers".to_string(), "Required value".to_string()))
        }
        Some(cs) => {
            for (i, c) in cs.iter().enumerate() {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("");
                if !crate::validate::dns_label(name) {
                    out.push((
                        format!("spec.containers[{i}].name"),
                        format!("Invalid value: {name:?}: a lowercase RFC 1123 label"),
                    ));
                }
                if c.get("image")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    out.push((
                        format!("spec.containers[{i}].image"),
                        "Required value".to_string(),
                    ));
                }
            }
        }
    }
    out
}

/// The most a ConfigMap holds, as kube-apiserver validates it (`MaxSecretSize`).
const CONFIGMAP_LIMIT: usize = 1024 * 1024;

/// kube-apiserver's size check of a ConfigMap: its keys and values, `data` and
/// `binaryData` together (the latter counted decoded, as stored), at most 1 MiB. Guests
/// are deployed in ConfigMaps: one too large must be refused here as on a cluster.
fn configmap_size_problem(obj: &Value) -> Option<(String, String)> {
    use base64::Engine as _;
    let entries = |field: &str| {
        obj.get(field)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(key, value)| (key.len(), value.as_str().unwrap_or_default()))
    };
    let text: usize = entries("data").map(|(key, value)| key + value.len()).sum();
    let binary: usize = entries("binaryData")
        .map(|(key, value)| {
            // A value that is not base64 is counted as sent.
            let size = base64::engine::general_purpose::STANDARD
                .decode(value)
                .map_or(value.len(), |bytes| bytes.len());
            key + size
        })
        .sum();
    (text + binary > CONFIGMAP_LIMIT).then(|| {
        (
            "[]".to_string(),
            format!("Too long: must have at most {CONFIGMAP_LIMIT} bytes"),
        )
    })
}

/// 422 checks of a complete object about to be stored.
pub(super) fn check_object(scope: &Scope, obj: &Value) -> Result<(), ApiError> {
    let name = meta_str(obj, "name");
    let mut causes = Vec::new();
    let name_ok = if scope.rt.plural == "namespaces" {
        crate::validate::dns_label(name)
    } else if scope.rt.group.is_empty() && matches!(scope.rt.plural.as_str(), "events" | "nodes")
        || scope.rt.group == "rbac.authorization.k8s.io"
    {
        // Path segment names (RBAC's `system:discovery`); kube also refuses `%` in them.
        !name.is_empty() && !name.contains(['/', '%']) && name != "." && name != ".."
    } else {
        crate::validate::dns_subdomain(name)
    };
    if !name_ok {
        causes.push(("metadata.name".to_string(), format!("Invalid value: {name:?}: a lowercase RFC 1123 name must consist of lower case alphanumeric characters, '-' or '.'")));
    }
    causes.extend(crate::validate::metadata(
        obj.get("metadata").unwrap_or(&Value::Null),
    ));
    if (scope.rt.group.as_str(), scope.rt.plural.as_str()) == CRDS {
        causes.extend(crate::crd::validate(obj));
    }
    if scope.rt.group.is_empty() && scope.rt.plural == "pods" {
        causes.extend(pod_problems(obj));
    }
    if scope.rt.group.is_empty() && scope.rt.plural == "configmaps" {
        causes.extend(configmap_size_problem(obj));
    }
    if let Some(schema) = scope.rt.schema.as_ref().filter(|_| scope.rt.custom) {
        causes.extend(crate::schema::validate(obj, schema));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            scope.target(name),
            &scope.rt.kind,
            &causes,
        ))
    }
}
