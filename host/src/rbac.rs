//! `kapsel rbac GUEST...`: the RBAC manifests an operator of these guests needs
//! (KOPF.md §14), worked out from what the guests declare, resolved on a cluster.
//!
//! One ServiceAccount, one ClusterRole and its ClusterRoleBinding:
//! - the framework's needs: peering (`kopf.dev` `clusterkopfpeerings`, `kopfpeerings`),
//!   observing CRDs and namespaces, posting Events;
//! - every resource a handler watches: `list`, `watch`, and `patch` when any handler
//!   but an index writes to its objects (results, progress records, finalizers), with
//!   `patch` on `<plural>/status` too when the resource has a status subresource (the
//!   gap in Kopf's documented example);
//! - every resource the guests' `kapsel::permit!` declarations name, with their verbs.
//!
//! Selectors are resolved by discovery, as the operator resolves them when it runs, so
//! the CRDs must exist on the cluster; selectors that resolve to nothing are listed in a
//! comment at the top rather than guessed. A handler selecting Secrets without its
//! guest's `kapsel::permit!` for them is not served by the operator, so nothing is
//! granted for it either (listed in a comment too): the grants are exactly what the
//! operator lets the guests do.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::cluster::{self, DiscoveryError, Resolution, Resource, Selector};
use crate::handlers::{declaration, undeclared};
use crate::runtime::{Guest, HandlerKind};

/// What the guests' selectors and permissions mean on a cluster (KOPF.md §2.3), for
/// `kapsel rbac`.
#[derive(Debug, Default)]
pub(crate) struct GuestNeeds {
    /// Resources the guests' handlers watch, and whether they patch them (results,
    /// progress records, finalizers: every kind but index handlers).
    pub(crate) watched: Vec<(Resource, bool)>,
    /// Resources the guests' Kubernetes calls may use, with the verbs declared.
    pub(crate) permitted: Vec<(Resource, Vec<String>)>,
    /// Selectors that resolve to nothing (or ambiguously), as written.
    pub(crate) unresolved: Vec<String>,
    /// Handlers the operator will not serve on a resource (Secrets not declared), and
    /// what their guest must declare for it.
    pub(crate) refused: Vec<String>,
}

/// Resolves every handler selector and every permission of `guests` on the cluster.
///
/// # Errors
/// When discovery fails.
pub(crate) async fn guest_needs(
    client: &kube::Client,
    guests: &[Guest],
) -> Result<GuestNeeds, DiscoveryError> {
    let discovered = cluster::scan(client).await?;
    let mut needs = GuestNeeds::default();
    let resolve = |wit: &crate::runtime::Selector, needs: &mut GuestNeeds| {
        let selector = Selector::from_wit(wit);
        match cluster::resolve(&selector, &discovered) {
            Resolution::Resolved(found) => found,
            Resolution::Ambiguous(_) | Resolution::Unresolved => {
                // Named once, however many handlers use it.
                let written = selector.to_string();
                if !needs.unresolved.contains(&written) {
                    needs.unresolved.push(written);
                }
                Vec::new()
            }
        }
    };
    for guest in guests {
        let described = guest.describe();
        for registration in &described.handlers {
            let patches = registration.kind != HandlerKind::Index;
            for wit in &registration.selectors {
                for resource in resolve(wit, &mut needs) {
                    match undeclared(guest, registration.kind, &resource, &discovered) {
                        Some(verbs) => needs.refused.push(format!(
                            "handler {:?} of guest {:?} on {}: declare {}",
                            registration.id,
                            guest.name(),
                            resource.plural,
                            declaration(&resource, verbs)
                        )),
                        None => needs.watched.push((resource, patches)),
                    }
                }
            }
        }
        for permission in &described.permissions {
            for resource in resolve(&permission.target, &mut needs) {
                needs.permitted.push((resource, permission.verbs.clone()));
            }
        }
    }
    Ok(needs)
}

/// Who the manifests are for.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    /// The ServiceAccount's name (also the role's and the binding's).
    pub(crate) name: String,
    /// The namespace the operator runs in.
    pub(crate) namespace: String,
}

/// The manifests, as one YAML stream.
pub(crate) fn manifests(needs: &GuestNeeds, subject: &Subject) -> String {
    let mut rules: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut grant = |group: &str, resource: &str, verbs: &[&str]| {
        rules
            .entry((group.to_owned(), resource.to_owned()))
            .or_default()
            .extend(verbs.iter().map(|v| (*v).to_owned()));
    };
    // The framework (KOPF.md §14).
    let peer = ["get", "list", "watch", "patch"];
    grant("kopf.dev", "clusterkopfpeerings", &peer);
    grant("kopf.dev", "kopfpeerings", &peer);
    grant(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &["list", "watch"],
    );
    grant("", "namespaces", &["list", "watch"]);
    grant("", "events", &["create"]);
    for (resource, patches) in &needs.watched {
        grant(&resource.group, &resource.plural, &["list", "watch"]);
        if *patches {
            grant(&resource.group, &resource.plural, &["patch"]);
            if resource.subresources.iter().any(|s| s == "status") {
                grant(
                    &resource.group,
                    &format!("{}/status", resource.plural),
                    &["patch"],
                );
            }
        }
    }
    for (resource, verbs) in &needs.permitted {
        let verbs: Vec<&str> = verbs.iter().map(String::as_str).collect();
        grant(&resource.group, &resource.plural, &verbs);
    }

    let rules: Vec<Value> = rules
        .into_iter()
        .map(|((group, resource), verbs)| {
            json!({"apiGroups": [group], "resources": [resource], "verbs": verbs})
        })
        .collect();
    let name = &subject.name;
    let documents = [
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": subject.namespace},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": subject.namespace}],
        }),
    ];
    let mut out = String::new();
    if !needs.refused.is_empty() {
        out.push_str(
            "# Not served by the operator (Secrets its guest did not declare), so not granted:\n",
        );
        for refused in &needs.refused {
            out.push_str(&format!("#   {refused}\n"));
        }
    }
    if !needs.unresolved.is_empty() {
        out.push_str("# Not resolved on this cluster (create their CRDs first), so not granted:\n");
        for selector in &needs.unresolved {
            out.push_str(&format!("#   {selector}\n"));
        }
    }
    for document in documents {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&document).unwrap_or_default());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Resource;

    fn resource(group: &str, plural: &str, status: bool) -> Resource {
        Resource {
            group: group.into(),
            version: "v1".into(),
            plural: plural.into(),
            kind: String::new(),
            singular: String::new(),
            short_names: Vec::new(),
            categories: Vec::new(),
            namespaced: true,
            verbs: Vec::new(),
            subresources: if status {
                vec!["status".into()]
            } else {
                Vec::new()
            },
            preferred: true,
        }
    }

    #[test]
    fn rules_cover_the_framework_the_watched_and_the_permitted() {
        let needs = GuestNeeds {
            watched: vec![
                (resource("kopf.dev", "kopfexamples", true), true),
                (resource("", "pods", true), false),
            ],
            permitted: vec![(
                resource("", "configmaps", false),
                vec!["get".into(), "create".into()],
            )],
            unresolved: vec!["widgets".into()],
            refused: Vec::new(),
        };
        let text = manifests(
            &needs,
            &Subject {
                name: "op".into(),
                namespace: "ops".into(),
            },
        );
        assert!(text.starts_with("# Not resolved on this cluster"), "{text}");
        assert!(text.contains("#   widgets"), "{text}");
        let documents: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).expect("yaml"))
            .collect();
        let rules = documents[1]["rules"].as_array().expect("rules");
        let verbs = |group: &str, resource: &str| -> Vec<String> {
            rules
                .iter()
                .find(|r| r["apiGroups"][0] == group && r["resources"][0] == resource)
                .map(|r| serde_json::from_value(r["verbs"].clone()).expect("verbs"))
                .unwrap_or_default()
        };
        assert_eq!(
            verbs("kopf.dev", "kopfexamples"),
            ["list", "patch", "watch"]
        );
        assert_eq!(verbs("kopf.dev", "kopfexamples/status"), ["patch"]);
        // Index-only: read, never patched.
        assert_eq!(verbs("", "pods"), ["list", "watch"]);
        assert!(verbs("", "pods/status").is_empty());
        assert_eq!(verbs("", "configmaps"), ["create", "get"]);
        assert_eq!(verbs("", "events"), ["create"]);
        assert_eq!(
            verbs("kopf.dev", "clusterkopfpeerings"),
            ["get", "list", "patch", "watch"]
        );
        assert_eq!(documents[2]["subjects"][0]["namespace"], "ops");
    }
}
