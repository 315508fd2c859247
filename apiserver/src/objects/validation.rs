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

/// Whether the type's names are path segments (RBAC's `system:discovery`, Events' and
/// Nodes' names), not DNS subdomains.
fn name_is_path_segment(scope: &Scope) -> bool {
    scope.rt.group.is_empty() && matches!(scope.rt.plural.as_str(), "events" | "nodes")
        || scope.rt.group == "rbac.authorization.k8s.io"
}

/// kube's `RegexError`: a rule's message, its examples and the regex.
fn regex_error(message: &str, regex: &str, examples: &[&str]) -> String {
    let shown: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{message} (e.g. {}regex used for validation is '{regex}')",
        shown.join(" or ")
    )
}

/// What kube's `IsDNS1123Label` says of a name that is not one.
fn label_problems(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    if name.len() > 63 {
        out.push("must be no more than 63 characters".into());
    }
    if crate::validate::dns_subdomain(name) {
        out.push("must not contain dots".into());
    } else {
        out.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "123-abc"],
        ));
    }
    out
}

/// What kube's `IsDNS1123Subdomain` says of a name that is not one.
fn subdomain_problems(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    if name.len() > 253 {
        out.push("must be no more than 253 characters".into());
    }
    out.push(regex_error(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
        &["example.com"],
    ));
    out
}

/// kube's `IsConfigMapKey` over the keys of a ConfigMap's or Secret's `field`: each
/// problem a cause at `field[key]`.
fn config_key_problems(obj: &Value, field: &str) -> Vec<(String, String)> {
    let keys = obj
        .get(field)
        .and_then(Value::as_object)
        .into_iter()
        .flatten();
    let mut out = Vec::new();
    for key in keys.map(|(k, _)| k) {
        let mut messages = Vec::new();
        if key.len() > 253 {
            messages.push("must be no more than 253 characters".to_string());
        }
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
        if key.is_empty() || !key.chars().all(allowed) {
            messages.push(regex_error(
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                "[-._a-zA-Z0-9]+",
                &["key.name", "KEY_NAME", "key-name"],
            ));
        }
        match key.as_str() {
            "." => messages.push("must not be '.'".into()),
            ".." => messages.push("must not be '..'".into()),
            k if k.starts_with("..") => messages.push("must not start with '..'".into()),
            _ => {}
        }
        out.extend(messages.into_iter().map(|m| {
            (
                format!("{field}[{key}]"),
                format!("Invalid value: {key:?}: {m}"),
            )
        }));
    }
    out
}

/// 422 checks of a complete object about to be stored.
pub(super) fn check_object(scope: &Scope, obj: &Value) -> Result<(), ApiError> {
    let name = meta_str(obj, "name");
    let mut causes = Vec::new();
    let name_ok = if scope.rt.plural == "namespaces" {
        crate::validate::dns_label(name)
    } else if name_is_path_segment(scope) {
        // Path segment names (RBAC's `system:discovery`); kube also refuses `%` in them.
        !name.is_empty() && !name.contains(['/', '%']) && name != "." && name != ".."
    } else {
        crate::validate::dns_subdomain(name)
    };
    if !name_ok {
        let messages = match scope.rt.plural.as_str() {
            "namespaces" => label_problems(name),
            _ if name_is_path_segment(scope) => vec![
                "a lowercase RFC 1123 name must consist of lower case alphanumeric characters, '-' or '.'".into(),
            ],
            _ => subdomain_problems(name),
        };
        causes.extend(messages.into_iter().map(|m| {
            (
                "metadata.name".to_string(),
                format!("Invalid value: {name:?}: {m}"),
            )
        }));
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
        causes.extend(config_key_problems(obj, "data"));
        causes.extend(config_key_problems(obj, "binaryData"));
        causes.extend(configmap_size_problem(obj));
    }
    if scope.rt.group.is_empty() && scope.rt.plural == "secrets" {
        causes.extend(config_key_problems(obj, "data"));
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
