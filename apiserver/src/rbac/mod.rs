//! Authorization with RBAC, as kube-apiserver's RBAC authorizer decides: a request's
//! attributes (verb, API group, resource and subresource, namespace, name, or a non-resource
//! path) computed from its URL as kube's RequestInfo does, checked against the rules of
//! the Roles and ClusterRoles bound to the user (`rules`), with kube's 403 wording.
//! Members of `system:masters` are allowed everything, as kube's privileged-group
//! authorizer allows them before RBAC. Also the default roles (`bootstrap`) and the
//! escalation checks on writes of roles and bindings (`escalation`), and impersonation
//! (`impersonation`).

mod bootstrap;
mod escalation;
mod impersonation;
mod rules;

pub(crate) use bootstrap::default_objects;
pub(crate) use escalation::check_write;
pub(crate) use impersonation::acting_user;

use crate::auth::User;
use crate::status::ApiError;
use crate::store::Store;
use serde_json::json;
use std::collections::HashMap;

/// What a request does, as kube's authorizers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attributes {
    pub(crate) verb: String,
    pub(crate) target: Target,
}

/// A resource or a non-resource path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Resource {
        group: String,
        resource: String,
        subresource: String,
        /// Empty for cluster-scoped requests (and for lists across namespaces).
        namespace: String,
        /// Empty when the request names no object.
        name: String,
    },
    Path(String),
}

/// Kube's `?watch=` parameter (Go's ParseBool).
fn watch_param(query: &HashMap<String, String>) -> bool {
    matches!(
        query.get("watch").map(String::as_str),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True")
    )
}

/// The name a `metadata.name=NAME` (or `==`) field selector requires, if it requires one.
fn name_from_field_selector(query: &HashMap<String, String>) -> Option<String> {
    let selector = query.get("fieldSelector")?;
    selector.split(',').find_map(|req| {
        let (k, v) = req
            .split_once("==")
            .or_else(|| req.split_once('='))
            .filter(|(k, _)| !k.ends_with('!'))?;
        (k.trim() == "metadata.name" && !v.is_empty() && !v.contains('/') && v != "." && v != "..")
            .then(|| v.trim().to_string())
    })
}

/// The attributes of a request, after kube's `RequestInfoFactory`: `/api/v1/...` and
/// `/apis/GROUP/VERSION/...` are resource requests (with the `watch/` prefix,
/// `namespaces/NS/`, and `RESOURCE/NAME/SUBRESOURCE`); everything else is a path.
pub(crate) fn attributes(
    method: &http::Method,
    path: &str,
    query: &HashMap<String, String>,
) -> Attributes {
    let non_resource = || Attributes {
        verb: method.as_str().to_lowercase(),
        target: Target::Path(path.to_string()),
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", group, _version, rest @ ..] if !rest.is_empty() => (*group, rest),
        _ => return non_resource(),
    };
    let mut rest = rest;
    let mut verb = match *method {
        http::Method::POST => "create",
        http::Method::GET | http::Method::HEAD => "get",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "",
    };
    if matches!(rest.first(), Some(&("watch" | "proxy"))) {
        if rest.len() < 2 {
            return non_resource();
        }
        verb = rest[0];
        rest = &rest[1..];
    }
    let mut namespace = "";
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        namespace = rest[1];
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    let at = |i: usize| rest.get(i).copied().unwrap_or("").to_string();
    let subresource = if verb == "proxy" {
        String::new()
    } else {
        at(2)
    };
    let mut name = at(1);
    let mut verb = verb.to_string();
    if name.is_empty() && verb == "get" {
        verb = if watch_param(query) { "watch" } else { "list" }.into();
        if let Some(n) = name_from_field_selector(query) {
            name = n;
        }
    }
    if name.is_empty() && verb == "delete" {
        verb = "deletecollection".into();
    }
    Attributes {
        verb,
        target: Target::Resource {
            group: group.to_string(),
            resource: at(0),
            subresource,
            namespace: namespace.to_string(),
            name,
        },
    }
}

/// The verdict: allowed, or why not (kube's RBAC reason, empty when no binding was broken).
pub(crate) fn authorize(store: &Store, user: &User, a: &Attributes) -> Result<(), String> {
    if user.is_master() {
        return Ok(());
    }
    let namespace = match &a.target {
        Target::Resource { namespace, .. } => namespace.as_str(),
        Target::Path(_) => "",
    };
    let resolved = rules::rules_for(store, user, namespace);
    if resolved.rules.iter().any(|r| rules::allows(r, a)) {
        return Ok(());
    }
    Err(resolved.reason())
}

/// kube's 403: `RESOURCE "NAME" is forbidden: User "U" cannot VERB resource "R" in API
/// group "G" in the namespace "NS"` (or `at the cluster scope`, or `cannot VERB path "P"`),
/// with RBAC's reason after a colon when it has one.
pub(crate) fn forbidden(user: &User, a: &Attributes, reason: &str) -> ApiError {
    let (what, qualified, details) = match &a.target {
        Target::Path(p) => (
            format!("User {:?} cannot {} path {p:?}", user.name, a.verb),
            None,
            json!({}),
        ),
        Target::Resource {
            group,
            resource,
            subresource,
            namespace,
            name,
        } => {
            let combined = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            let scope = if namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {namespace:?}")
            };
            let what = format!(
                "User {:?} cannot {} resource {combined:?} in API group {group:?} {scope}",
                user.name, a.verb
            );
            let qualified = if group.is_empty() {
                resource.clone()
            } else {
                format!("{resource}.{group}")
            };
            let mut details = json!({"kind": resource});
            if !name.is_empty() {
                details["name"] = json!(name);
            }
            if !group.is_empty() {
                details["group"] = json!(group);
            }
            (what, Some((qualified, name.clone())), details)
        }
    };
    let what = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    let message = match qualified {
        None => format!("forbidden: {what}"),
        Some((q, n)) if n.is_empty() => format!("{q} is forbidden: {what}"),
        Some((q, n)) => format!("{q} {n:?} is forbidden: {what}"),
    };
    let mut e = ApiError::new(403, "Forbidden", message);
    e.details = Some(Box::new(details));
    e
}

#[cfg(test)]
mod tests;
