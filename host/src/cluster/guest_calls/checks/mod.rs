//! Checking a guest's Kubernetes call before anything is sent: the one resource its
//! selector means, whether the guest declared the permission, the namespace it goes to,
//! and whether its names and body are usable. Refusals are the API server's own shapes
//! (403, 404, 400), so the guest handles them like any answer.

use serde_json::Value;

use crate::cluster::discovery::Resource;
use crate::cluster::selectors::{self, Resolution};
use crate::runtime::{KubeError, KubeRequest, Permission, Selector};

/// What a checked request does.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Action {
    Get { name: String },
    List { label_selector: Option<String> },
    Create { body: Value },
    Patch { name: String, patch: Value },
    Delete { name: String },
}

/// A request that passed every check and only needs sending.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Prepared {
    pub(super) resource: Resource,
    /// `None`: a cluster-scoped resource, or a list across all namespaces.
    pub(super) namespace: Option<String>,
    pub(super) action: Action,
}

/// Checks a request without sending anything: the resource it means, whether the guest
/// may make it, where it goes, and whether its body is usable.
pub(super) fn prepare(
    guest: &str,
    permissions: &[Permission],
    known: &[Resource],
    object_namespace: Option<&str>,
    request: KubeRequest,
) -> Result<Prepared, KubeError> {
    let verb = request.verb();
    let resource = resolve_target(request.target(), known)?;
    if !permits(permissions, verb, &resource, known) {
        return Err(forbidden(guest, verb, &resource));
    }
    let (namespace, action) = match request {
        KubeRequest::Get {
            namespace, name, ..
        } => (namespace, Action::Get { name }),
        KubeRequest::List {
            namespace,
            label_selector,
            ..
        } => (namespace, Action::List { label_selector }),
        KubeRequest::Create {
            namespace, body, ..
        } => (
            namespace,
            Action::Create {
                body: parse_object(&body, "body")?,
            },
        ),
        KubeRequest::Patch {
            namespace,
            name,
            merge_patch,
            ..
        } => (
            namespace,
            Action::Patch {
                name,
                patch: parse_object(&merge_patch, "merge patch")?,
            },
        ),
        KubeRequest::Delete {
            namespace, name, ..
        } => (namespace, Action::Delete { name }),
    };
    if let Action::Get { name } | Action::Patch { name, .. } | Action::Delete { name } = &action {
        check_segment(name, "name")?;
    }
    let namespace = choose_namespace(&resource, namespace, &action, object_namespace);
    if let Some(namespace) = &namespace {
        check_segment(namespace, "namespace")?;
    }
    Ok(Prepared {
        resource,
        namespace,
        action,
    })
}

/// The one resource a request's selector means (Kopf's rules: the core group wins).
fn resolve_target(target: &Selector, known: &[Resource]) -> Result<Resource, KubeError> {
    match selectors::resolve(&selectors::Selector::from_wit(target), known) {
        Resolution::Resolved(found) if found.len() == 1 => found
            .into_iter()
            .next()
            .ok_or_else(|| not_found(format!("no resource matches the selector {target}"))),
        Resolution::Resolved(found) | Resolution::Ambiguous(found) => {
            let keys: Vec<String> = found.iter().map(Resource::key).collect();
            Err(not_found(format!(
                "the selector {target} is ambiguous: it matches {}; name the group or version",
                keys.join(", ")
            )))
        }
        Resolution::Unresolved => Err(not_found(format!(
            "the cluster serves no resource matching the selector {target}"
        ))),
    }
}

/// Whether some declared permission resolves to the same resource and lists the verb.
///
/// "Same resource" means group and plural, as RBAC sees it: a permission for one version
/// covers the others. A permission that resolves ambiguously grants nothing, exactly as
/// an ambiguous handler selector serves nothing.
fn permits(permissions: &[Permission], verb: &str, target: &Resource, known: &[Resource]) -> bool {
    permissions
        .iter()
        .filter(|p| p.verbs.iter().any(|v| v == verb || v == "*"))
        .any(
            |p| match selectors::resolve(&selectors::Selector::from_wit(&p.target), known) {
                Resolution::Resolved(found) => found
                    .iter()
                    .any(|r| r.group == target.group && r.plural == target.plural),
                Resolution::Ambiguous(_) | Resolution::Unresolved => false,
            },
        )
}

/// The namespace a request goes to (`None`: cluster-scoped, or every namespace).
///
/// For a namespaced resource, a request without one goes to the namespace of the handled
/// object (a created body's own namespace first), then `default`; a list without one
/// spans every namespace.
fn choose_namespace(
    resource: &Resource,
    requested: Option<String>,
    action: &Action,
    object_namespace: Option<&str>,
) -> Option<String> {
    if !resource.namespaced {
        return None;
    }
    if requested.is_some() {
        return requested;
    }
    let in_body = match action {
        Action::List { .. } => return None,
        Action::Create { body } => body.pointer("/metadata/namespace").and_then(Value::as_str),
        _ => None,
    };
    Some(
        in_body
            .or(object_namespace)
            .filter(|ns| !ns.is_empty())
            .unwrap_or("default")
            .to_owned(),
    )
}

/// A name or namespace becomes a URL path segment: anything that would change the path
/// or the query (another resource, a subresource) is refused before sending.
fn check_segment(value: &str, what: &str) -> Result<(), KubeError> {
    let bad = value.is_empty()
        || value == "."
        || value == ".."
        || value.contains(['/', '?', '#', '%'])
        || value.chars().any(char::is_control);
    if bad {
        Err(bad_request(format!(
            "{what} {value:?} is not a valid object {what}"
        )))
    } else {
        Ok(())
    }
}

fn parse_object(text: &str, what: &str) -> Result<Value, KubeError> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(bad_request(format!("the {what} is not a JSON object"))),
        Err(e) => Err(bad_request(format!("the {what} is not valid JSON: {e}"))),
    }
}

fn forbidden(guest: &str, verb: &str, resource: &Resource) -> KubeError {
    let group = if resource.group.is_empty() {
        "core"
    } else {
        resource.group.as_str()
    };
    KubeError {
        code: 403,
        reason: "Forbidden".to_owned(),
        message: format!(
            "guest '{guest}' did not declare permission to {verb} {}.{group}; \
             declare it with kapsel::permit!(...)",
            resource.plural
        ),
    }
}

fn not_found(message: String) -> KubeError {
    KubeError {
        code: 404,
        reason: "NotFound".to_owned(),
        message,
    }
}

pub(super) fn bad_request(message: String) -> KubeError {
    KubeError {
        code: 400,
        reason: "BadRequest".to_owned(),
        message,
    }
}

#[cfg(test)]
pub(super) mod tests;
