//! The rules the guests' needs come to, cluster-wide or per namespace, for an operator
//! running in a given mode.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::needs::GuestNeeds;
use crate::cluster::Scope;
use crate::peering::resources as peering;

/// How the operator runs, as far as its permissions depend on it (`kapsel run`'s flags).
#[derive(Debug, Clone)]
pub(crate) struct Mode {
    /// The namespaces it serves (`-A` or `-n`).
    pub(crate) scope: Scope,
    /// The peering object it keeps its record in (`--peering NAME`, or `default` when
    /// no flag is given); `None` for `--standalone`.
    pub(crate) peering: Option<String>,
    /// How the webhook server of its admission handlers runs.
    pub(crate) admission: Admission,
}

/// How the webhook server of admission handlers runs (`kapsel run`'s `--admission-*`), as
/// far as its permissions depend on it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Admission {
    /// `--admission-managed NAME`: the configurations it writes, the only ones it may
    /// patch; without it, any (`kapsel rbac` was not told the name).
    pub(crate) managed: Option<String>,
    /// `--admission-secret NAMESPACE/NAME`: where a generated certificate is kept (default:
    /// `<managed name or kapsel>-admission-tls` in the operator's namespace, as `kapsel
    /// run`'s).
    pub(crate) secret: Option<(String, String)>,
}

impl Admission {
    /// The Secret of a generated certificate: its namespace and name.
    pub(crate) fn secret(&self, operator_namespace: &str) -> (String, String) {
        self.secret.clone().unwrap_or_else(|| {
            let prefix = self.managed.as_deref().unwrap_or("kapsel");
            (
                operator_namespace.to_owned(),
                format!("{prefix}-admission-tls"),
            )
        })
    }
}

/// Rules by (API group, resource, the one object they are limited to): their verbs.
pub(super) type Rules = BTreeMap<(String, String, Option<String>), BTreeSet<String>>;

/// The rules of the ClusterRole, and of the Role in each named namespace.
#[derive(Debug, Default)]
pub(super) struct Grants {
    pub(super) cluster: Rules,
    pub(super) namespaced: BTreeMap<String, Rules>,
}

impl Grants {
    /// Grants `verbs` on `group`/`resource` where the operator uses it: cluster-wide, or
    /// in each of `namespaces` (`None`: not known in advance, so cluster-wide too).
    fn grant(
        &mut self,
        namespaces: Option<&[String]>,
        group: &str,
        resource: &str,
        verbs: &[&str],
    ) {
        self.grant_on(namespaces, (group, resource, None), verbs);
    }

    /// As [`Grants::grant`], limited to the object named in `target` if one is.
    fn grant_on(
        &mut self,
        namespaces: Option<&[String]>,
        (group, resource, name): (&str, &str, Option<&str>),
        verbs: &[&str],
    ) {
        let add = |rules: &mut Rules| {
            rules
                .entry((
                    group.to_owned(),
                    resource.to_owned(),
                    name.map(str::to_owned),
                ))
                .or_default()
                .extend(verbs.iter().map(|v| (*v).to_owned()));
        };
        match namespaces {
            None => add(&mut self.cluster),
            Some(names) => {
                for name in names {
                    add(self.namespaced.entry(name.clone()).or_default());
                }
            }
        }
    }
}

/// What `needs` requires of an operator running in `mode` in `operator_namespace`.
pub(super) fn grants(needs: &GuestNeeds, mode: &Mode, operator_namespace: &str) -> Grants {
    let mut grants = Grants::default();
    // The named namespaces of `-n`; `None` cluster-wide and for globs.
    let named = mode.scope.plain_names();
    let named = named.as_deref();
    let at = |namespaced: bool| if namespaced { named } else { None };

    // The framework (KOPF.md §14).
    grants.grant(
        None,
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &["list", "watch"],
    );
    if matches!(mode.scope, Scope::Namespaces(_)) && named.is_none() {
        grants.grant(None, "", "namespaces", &["list", "watch"]);
    }
    grants.grant(named, "", "events", &["create"]);
    // Events about the operator itself (a guest a reload refused) are about its pod, in
    // its own namespace.
    if let Some(names) = named
        && !names.iter().any(|n| n == operator_namespace)
    {
        grants.grant(
            Some(&[operator_namespace.to_owned()]),
            "",
            "events",
            &["create"],
        );
    }
    // Events about cluster-scoped objects go to `default` (as Kopf posts them).
    if let Some(names) = named
        && !names.iter().any(|n| n == "default")
        && (needs.watched.iter().any(|(r, _)| !r.namespaced) || !needs.everything.is_empty())
    {
        grants.grant(Some(&["default".to_owned()]), "", "events", &["create"]);
    }
    if let Some(name) = &mode.peering {
        let clusterwide = mode.scope == Scope::Cluster;
        let where_ = if clusterwide { None } else { named };
        let resource = peering::plural(clusterwide);
        // The operator peers through every group serving it; without any, the one
        // `deploy/` installs.
        let mut groups: Vec<&str> = needs
            .peering
            .iter()
            .filter(|r| r.plural == resource)
            .map(|r| r.group.as_str())
            .collect();
        if groups.is_empty() {
            groups.push(peering::GROUPS[0]);
        }
        for group in groups {
            // Following the peers is listing and watching the object by name (a field
            // selector), which RBAC authorizes by resource; our record's patches name it.
            grants.grant(where_, group, resource, &["list", "watch"]);
            grants.grant_on(where_, (group, resource, Some(name)), &["patch"]);
        }
    }

    if !needs.admission.is_empty() {
        admission(&mut grants, &mode.admission, operator_namespace);
    }

    for (resource, patches) in &needs.watched {
        let where_ = at(resource.namespaced);
        grants.grant(
            where_,
            &resource.group,
            &resource.plural,
            &["list", "watch"],
        );
        if *patches {
            grants.grant(where_, &resource.group, &resource.plural, &["patch"]);
            if resource.subresources.iter().any(|s| s == "status") {
                let status = format!("{}/status", resource.plural);
                grants.grant(where_, &resource.group, &status, &["patch"]);
            }
        }
    }
    // Every resource, also those of CRDs created later: a wildcard, cluster-wide.
    if !needs.everything.is_empty() {
        grants.grant(None, "*", "*", &["list", "watch"]);
        if needs.everything.iter().any(|(_, patches)| *patches) {
            grants.grant(None, "*", "*", &["patch"]);
            grants.grant(None, "*", "*/status", &["patch"]);
        }
    }
    for (resource, verbs) in &needs.permitted {
        let verbs: Vec<&str> = verbs.iter().map(String::as_str).collect();
        grants.grant(
            at(resource.namespaced),
            &resource.group,
            &resource.plural,
            &verbs,
        );
    }
    grants
}

/// What the webhook server of admission handlers does (`kapsel run --admission-*`), as
/// Kopf grants it: it creates its two configurations, whichever kinds of handler there
/// are (a reload may add the other), and merge-patches their webhooks (a 409 on create:
/// they exist, so neither `get` nor `update` is needed), patches limited to their name
/// when it is known; a generated certificate is read and replaced in its Secret, by name,
/// and the Secret created (RBAC cannot limit a create to a name).
fn admission(grants: &mut Grants, admission: &Admission, operator_namespace: &str) {
    let group = "admissionregistration.k8s.io";
    for resource in [
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
    ] {
        grants.grant(None, group, resource, &["create"]);
        let named = admission.managed.as_deref();
        grants.grant_on(None, (group, resource, named), &["patch"]);
    }
    let (namespace, name) = admission.secret(operator_namespace);
    let there = [namespace];
    grants.grant(Some(&there), "", "secrets", &["create"]);
    grants.grant_on(
        Some(&there),
        ("", "secrets", Some(&name)),
        &["get", "update"],
    );
}

pub(super) fn rules_json(rules: Rules) -> Vec<Value> {
    rules
        .into_iter()
        .map(|((group, resource, name), verbs)| {
            let mut rule = json!({"apiGroups": [group], "resources": [resource]});
            if let Some(name) = name {
                rule["resourceNames"] = json!([name]);
            }
            rule["verbs"] = json!(verbs);
            rule
        })
        .collect()
}
