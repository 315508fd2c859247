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
    KubeError {
        code: 403,
        reason: "Forbidden".to_owned(),
        message: format!(
            "guest '{guest}' did not declare permission to {verb} {}.{group}; \
             declare it with {permit}",
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
pub(super) mod tests {
    use serde_json::json;

    use super::*;
    use crate::runtime::ResourceName;

    fn res(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Resource {
        Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: kind.into(),
            singular: kind.to_lowercase(),
            short_names: vec![],
            categories: vec![],
            namespaced,
            verbs: vec!["get".into(), "list".into()],
            subresources: vec![],
            preferred: true,
        }
    }

    pub(crate) fn known() -> Vec<Resource> {
        let mut cm = res("", "v1", "configmaps", "ConfigMap", true);
        cm.short_names = vec!["cm".into()];
        cm.categories = vec!["all".into()];
        let mut old_kex = res("kopf.dev", "v1beta1", "kopfexamples", "KopfExample", true);
        old_kex.preferred = false;
        vec![
            cm,
            res("", "v1", "secrets", "Secret", true),
            res("", "v1", "namespaces", "Namespace", false),
            res("kopf.dev", "v1", "kopfexamples", "KopfExample", true),
            old_kex,
            res("a.example", "v1", "widgets", "Widget", true),
            res("b.example", "v1", "widgets", "Widget", true),
            res(
                "metrics.k8s.io",
                "v1beta1",
                "configmaps",
                "ConfigMapMetrics",
                true,
            ),
        ]
    }

    fn sel(group: Option<&str>, version: Option<&str>, name: ResourceName) -> Selector {
        Selector {
            group: group.map(Into::into),
            version: version.map(Into::into),
            name,
        }
    }

    fn any(name: &str) -> ResourceName {
        ResourceName::Any(name.to_owned())
    }

    fn permit(target: Selector, verbs: &[&str]) -> Permission {
        Permission {
            target,
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    fn get(target: Selector, namespace: Option<&str>, name: &str) -> KubeRequest {
        KubeRequest::Get {
            target,
            namespace: namespace.map(Into::into),
            name: name.into(),
        }
    }

    pub(crate) fn find(known: &[Resource], plural: &str, group: &str) -> Resource {
        known
            .iter()
            .find(|r| r.plural == plural && r.group == group && r.preferred)
            .cloned()
            .expect("known")
    }

    #[test]
    fn a_permission_covers_the_resource_it_resolves_to_and_its_verbs() {
        let known = known();
        let configmaps = find(&known, "configmaps", "");
        let perms = [permit(
            sel(Some(""), Some("v1"), any("configmaps")),
            &["get", "list"],
        )];
        assert!(permits(&perms, "get", &configmaps, &known));
        assert!(permits(&perms, "list", &configmaps, &known));
        assert!(!permits(&perms, "delete", &configmaps, &known));
        let secrets = find(&known, "secrets", "");
        assert!(!permits(&perms, "get", &secrets, &known));
        assert!(!permits(&[], "get", &configmaps, &known));
    }

    #[test]
    fn permissions_resolve_by_kopf_rules() {
        let known = known();
        let configmaps = find(&known, "configmaps", "");
        // Any name form; the core group wins over metrics.k8s.io's configmaps.
        for name in ["cm", "ConfigMap", "configmap", "configmaps"] {
            let perms = [permit(sel(None, None, any(name)), &["get"])];
            assert!(permits(&perms, "get", &configmaps, &known), "{name}");
        }
        let metrics = find(&known, "configmaps", "metrics.k8s.io");
        let perms = [permit(sel(None, None, any("configmaps")), &["get"])];
        assert!(!permits(&perms, "get", &metrics, &known));
        // A category grants each of its members; "*" grants every verb.
        let perms = [permit(
            sel(None, None, ResourceName::Category("all".into())),
            &["*"],
        )];
        assert!(permits(&perms, "delete", &configmaps, &known));
        // An ambiguous permission grants nothing.
        let widgets = find(&known, "widgets", "a.example");
        let perms = [permit(sel(None, None, any("widgets")), &["get"])];
        assert!(!permits(&perms, "get", &widgets, &known));
        let perms = [permit(
            sel(Some("a.example"), None, any("widgets")),
            &["get"],
        )];
        assert!(permits(&perms, "get", &widgets, &known));
        // One version's permission covers the resource's other versions.
        let old = known
            .iter()
            .find(|r| r.plural == "kopfexamples" && !r.preferred)
            .cloned()
            .expect("v1beta1");
        let perms = [permit(
            sel(Some("kopf.dev"), None, any("kopfexamples")),
            &["get"],
        )];
        assert!(permits(&perms, "get", &old, &known));
    }

    #[test]
    fn refusals_say_why() {
        let known = known();
        let perms = [permit(
            sel(Some(""), Some("v1"), any("configmaps")),
            &["get"],
        )];
        let refused = prepare(
            "g",
            &perms,
            &known,
            Some("ns"),
            get(sel(None, None, any("secrets")), None, "x"),
        )
        .expect_err("forbidden");
        assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
        // The declaration to add, ready to paste.
        assert_eq!(
            refused.message,
            "guest 'g' did not declare permission to get secrets.core; declare it with \
             kapsel::permit!(\"v1\", \"secrets\", verbs = [\"get\"])"
        );
        let grouped = prepare(
            "g",
            &perms,
            &known,
            Some("ns"),
            get(sel(None, None, any("kopfexamples")), None, "x"),
        )
        .expect_err("forbidden");
        assert!(
            grouped.message.ends_with(
                "declare it with kapsel::permit!(\"kopf.dev\", \"v1\", \"kopfexamples\", verbs = [\"get\"])"
            ),
            "{}",
            grouped.message
        );

        let unknown = prepare(
            "g",
            &perms,
            &known,
            None,
            get(sel(None, None, any("gadgets")), None, "x"),
        )
        .expect_err("not found");
        assert_eq!((unknown.code, unknown.reason.as_str()), (404, "NotFound"));
        assert!(unknown.message.contains("gadgets"), "{}", unknown.message);

        let ambiguous = prepare(
            "g",
            &perms,
            &known,
            None,
            get(sel(None, None, any("widgets")), None, "x"),
        )
        .expect_err("ambiguous");
        assert_eq!(ambiguous.code, 404);
        assert!(
            ambiguous.message.contains("widgets.v1.a.example")
                && ambiguous.message.contains("widgets.v1.b.example"),
            "{}",
            ambiguous.message
        );
    }

    #[test]
    fn bad_bodies_and_names_are_refused_before_sending() {
        let known = known();
        let perms = [permit(sel(None, None, any("configmaps")), &["*"])];
        let cm = || sel(None, None, any("configmaps"));
        for body in ["not json", "[1, 2]", "\"text\"", ""] {
            let refused = prepare(
                "g",
                &perms,
                &known,
                None,
                KubeRequest::Create {
                    target: cm(),
                    namespace: None,
                    body: body.into(),
                },
            )
            .expect_err("bad body");
            assert_eq!((refused.code, refused.reason.as_str()), (400, "BadRequest"));
        }
        let refused = prepare(
            "g",
            &perms,
            &known,
            None,
            KubeRequest::Patch {
                target: cm(),
                namespace: None,
                name: "x".into(),
                merge_patch: "null".into(),
            },
        )
        .expect_err("bad patch");
        assert_eq!(refused.code, 400);
        for name in ["", "a/status", "..", "x?watch=1"] {
            let refused =
                prepare("g", &perms, &known, None, get(cm(), None, name)).expect_err("bad name");
            assert_eq!(refused.code, 400, "{name:?}");
        }
        let refused = prepare("g", &perms, &known, None, get(cm(), Some("a/b"), "x"))
            .expect_err("bad namespace");
        assert_eq!(refused.code, 400);
    }

    #[test]
    fn namespaces_default_to_the_handled_object_then_default() {
        let known = known();
        let perms = [permit(sel(None, None, any("configmaps")), &["*"])];
        let perms_ns = [permit(sel(None, None, any("namespaces")), &["*"])];
        let cm = || sel(None, None, any("configmaps"));
        let ns_of = |perms: &[Permission], object: Option<&str>, request| {
            prepare("g", perms, &known, object, request)
                .expect("allowed")
                .namespace
        };
        assert_eq!(
            ns_of(&perms, Some("obj-ns"), get(cm(), None, "x")),
            Some("obj-ns".into())
        );
        assert_eq!(
            ns_of(&perms, Some("obj-ns"), get(cm(), Some("other"), "x")),
            Some("other".into())
        );
        assert_eq!(
            ns_of(&perms, None, get(cm(), None, "x")),
            Some("default".into())
        );
        let create = |body: Value| KubeRequest::Create {
            target: cm(),
            namespace: None,
            body: body.to_string(),
        };
        assert_eq!(
            ns_of(
                &perms,
                Some("obj-ns"),
                create(json!({"metadata": {"name": "x", "namespace": "body-ns"}}))
            ),
            Some("body-ns".into())
        );
        assert_eq!(
            ns_of(
                &perms,
                Some("obj-ns"),
                create(json!({"metadata": {"name": "x"}}))
            ),
            Some("obj-ns".into())
        );
        let list = |namespace: Option<&str>| KubeRequest::List {
            target: cm(),
            namespace: namespace.map(Into::into),
            label_selector: Some("a=b".into()),
        };
        assert_eq!(ns_of(&perms, Some("obj-ns"), list(None)), None);
        assert_eq!(
            ns_of(&perms, Some("obj-ns"), list(Some("x"))),
            Some("x".into())
        );
        // Cluster-scoped: the namespace is ignored.
        let namespaces = sel(None, None, any("namespaces"));
        assert_eq!(
            ns_of(
                &perms_ns,
                Some("obj-ns"),
                get(namespaces.clone(), Some("x"), "y")
            ),
            None
        );
        assert_eq!(
            ns_of(&perms_ns, Some("obj-ns"), get(namespaces, None, "y")),
            None
        );
    }
}
