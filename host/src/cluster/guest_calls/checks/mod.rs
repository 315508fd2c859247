//! Checking a guest's Kubernetes call before anything is sent: the one resource its
//! selector means, whether the guest declared the permission, the namespace it goes to
//! (one the operator serves), and whether its names and body are usable; and whether an
//! Event may name the object it is about. Refusals are the API server's own shapes (403,
//! 404, 400), so the guest handles them like any answer.

use serde_json::Value;

use crate::cluster::discovery::Resource;
use crate::cluster::events::ObjectRef;
use crate::cluster::scope::Scope;
use crate::cluster::selectors::{self, Resolution};
use crate::runtime::{Guest, KubeError, KubeRequest, Permission, Selector};

/// Resources whose objects hold credentials (group, plural): a guest is handed them only
/// when it declared a permission for them with `kapsel::permit!`, selecting them in a
/// handler is not enough (see SECURITY.md).
pub(crate) const SENSITIVE: [(&str, &str); 1] = [("", "secrets")];

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

impl Action {
    /// The RBAC verb of the action.
    pub(super) fn verb(&self) -> &'static str {
        match self {
            Action::Get { .. } => "get",
            Action::List { .. } => "list",
            Action::Create { .. } => "create",
            Action::Patch { .. } => "patch",
            Action::Delete { .. } => "delete",
        }
    }
}

/// Checks a request without sending anything: the resource it means, whether the guest
/// may make it, where it goes (a namespace the operator serves), and whether its body is
/// usable.
pub(super) fn prepare(
    guest: &str,
    permissions: &[Permission],
    known: &[Resource],
    scope: &Scope,
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
        check_namespace(namespace)?;
    }
    if resource.namespaced {
        match (&namespace, scope) {
            (Some(namespace), _) if !scope.includes(namespace) => {
                return Err(outside_scope(guest, namespace));
            }
            (None, Scope::Namespaces(_)) => {
                return Err(forbidden_message(format!(
                    "guest '{guest}' may not list {} across all namespaces: this operator \
                     serves only some (-n); list in one of them",
                    resource.plural
                )));
            }
            _ => {}
        }
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

/// Whether the guest declared every one of `verbs` on `target` (see [`permits`]).
pub(crate) fn guest_may(
    permissions: &[Permission],
    verbs: &[&str],
    target: &Resource,
    known: &[Resource],
) -> bool {
    verbs
        .iter()
        .all(|verb| permits(permissions, verb, target, known))
}

/// Whether an Event's reference is one a request path may be built from: its namespace
/// an RFC 1123 label (as kube's namespace names are), its name a path segment. Checked
/// before the namespace is compared with those the operator serves: `default/../kube-system`
/// is no namespace, whatever `-n` includes.
pub(super) fn valid_reference(involved: &ObjectRef) -> Result<(), KubeError> {
    if let Some(namespace) = &involved.namespace {
        check_namespace(namespace)?;
    }
    check_segment(&involved.name, "name")
}

/// Whether an Event may name `involved`: an object of a resource the guest handles (one
/// of its handlers' selectors means it) or may read (it declared `get`, `list` or
/// `watch` on it). Events about objects of other resources are refused, and so are
/// those about a sensitive resource (Secrets) the guest did not declare: selecting it in
/// a handler the host then refuses to serve does not count.
pub(super) fn may_mention(
    guest: &Guest,
    known: &[Resource],
    involved: &ObjectRef,
) -> Result<(), KubeError> {
    let (group, version) = match involved.api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", involved.api_version.as_str()),
    };
    let Some(resource) = known
        .iter()
        .find(|r| r.group == group && r.version == version && r.kind == involved.kind)
    else {
        return Err(not_found(format!(
            "the cluster serves no {} in {}: an Event cannot be about it",
            involved.kind, involved.api_version
        )));
    };
    let described = guest.describe();
    let same = |r: &Resource| r.group == resource.group && r.plural == resource.plural;
    let handles = described
        .handlers
        .iter()
        .flat_map(|h| &h.selectors)
        .any(
            |wit| match selectors::resolve(&selectors::Selector::from_wit(wit), known) {
                Resolution::Resolved(found) => found.iter().any(same),
                Resolution::Ambiguous(_) | Resolution::Unresolved => false,
            },
        );
    let reads = ["get", "list", "watch"]
        .iter()
        .any(|verb| permits(&described.permissions, verb, resource, known));
    let sensitive = SENSITIVE.contains(&(resource.group.as_str(), resource.plural.as_str()));
    if reads || (handles && !sensitive) {
        Ok(())
    } else {
        Err(forbidden_message(format!(
            "guest '{}' may not post Events about {} {}: it neither handles nor may read \
             {}; declare it with kapsel::permit!(...)",
            guest.name(),
            involved.kind,
            involved.name,
            resource.plural
        )))
    }
}

/// The refusal of a call or Event in a namespace the operator does not serve.
pub(super) fn outside_scope(guest: &str, namespace: &str) -> KubeError {
    forbidden_message(format!(
        "guest '{guest}' may not act in namespace {namespace:?}: this operator does not \
         serve it (-n)"
    ))
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

/// A namespace is an RFC 1123 label, as kube-apiserver validates namespace names (so no
/// `..`, `/` or anything else that would change a request's path), refused with kube's
/// words before anything is sent.
fn check_namespace(namespace: &str) -> Result<(), KubeError> {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let valid = !namespace.is_empty()
        && namespace.len() <= 63
        && namespace.chars().all(|c| alnum(c) || c == '-')
        && namespace.starts_with(alnum)
        && namespace.ends_with(alnum);
    if valid {
        return Ok(());
    }
    Err(bad_request(format!(
        "namespace {namespace:?} is not a valid namespace name: a lowercase RFC 1123 label \
         must consist of lower case alphanumeric characters or '-', and must start and end \
         with an alphanumeric character (at most 63 characters)"
    )))
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

/// A refusal that names the declaration the guest lacks, in the SDK's own words.
fn forbidden(guest: &str, verb: &str, resource: &Resource) -> KubeError {
    let (group, permit) = if resource.group.is_empty() {
        (
            "core",
            format!(
                "kapsel::permit!(\"{}\", \"{}\", verbs = [\"{verb}\"])",
                resource.version, resource.plural
            ),
        )
    } else {
        (
            resource.group.as_str(),
            format!(
                "kapsel::permit!(\"{}\", \"{}\", \"{}\", verbs = [\"{verb}\"])",
                resource.group, resource.version, resource.plural
            ),
        )
    };
    forbidden_message(format!(
        "guest '{guest}' did not declare permission to {verb} {}.{group}; \
         declare it with {permit}",
        resource.plural
    ))
}

fn forbidden_message(message: String) -> KubeError {
    KubeError {
        code: 403,
        reason: "Forbidden".to_owned(),
        message,
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
