//! `kapsel rbac GUEST...`: the RBAC manifests an operator of these guests needs
//! (KOPF.md §14), worked out from what the guests declare, resolved on a cluster.
//!
//! What is granted, and nothing more:
//! - the framework's needs: observing CRDs; posting Events; the peering resource of the
//!   mode in use (`clusterkopfpeerings` cluster-wide, `kopfpeerings` for `-n`, none
//!   `--standalone`) in each group the cluster serves it in (`kopf.dev`, the legacy
//!   `zalando.org`; `kopf.dev` when neither); listing namespaces when `-n` has globs;
//! - every resource a handler watches: `list`, `watch`, and `patch` when any handler
//!   but an index writes to its objects (results, progress records, finalizers), with
//!   `patch` on `<plural>/status` too when the resource has a status subresource (the
//!   gap in Kopf's documented example);
//! - every resource the guests' `kapsel::permit!` declarations name, with their verbs;
//! - for a handler selecting every resource (Kopf's `kopf.EVERYTHING`): `list` and
//!   `watch` on every resource of every group (`*`), cluster-wide, and `patch` on them and
//!   their `status` unless it is an index. A wildcard, because the operator serves the
//!   CRDs created after it started too; it includes Secrets, which the operator still
//!   hands such a handler only with its guest's `kapsel::permit!` for them (a comment at
//!   the top says so);
//! - for a handler whose guest chooses its resources (Kopf's callable selector): what
//!   the guest chooses of what the cluster serves now, asked as the operator asks it (a
//!   comment at the top says that CRDs created later are not covered).
//!
//! Where: a ServiceAccount, and a ClusterRole with its binding for what is cluster-wide.
//! An operator restricted to named namespaces (`-n a -n b`) gets its namespaced grants
//! as a Role and RoleBinding in each; with globs (`-n 'team-*'`) the namespaces are not
//! known in advance, so those grants are cluster-wide.
//!
//! Selectors are resolved by discovery, as the operator resolves them when it runs, so
//! the CRDs must exist on the cluster asked (`kapsel rbac --crd` asks an in-process one
//! that serves the given CRDs); selectors that resolve to nothing are listed in a
//! comment at the top rather than guessed. A handler selecting Secrets without its
//! guest's `kapsel::permit!` for them is not served by the operator, so nothing is
//! granted for it either (listed in a comment too): the grants are exactly what the
//! operator lets the guests do.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::cluster::{self, DiscoveryError, Resolution, Resource, Scope, Selector};
use crate::handlers::{Handler, HandlerSpec, Registry, declaration, undeclared};
use crate::peering::resources as peering;
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
    /// The peering resources the cluster serves, of both modes.
    pub(crate) peering: Vec<Resource>,
    /// Handlers selecting every resource (`handler "id" of guest "name"`), and whether
    /// they patch what they are handed.
    pub(crate) everything: Vec<(String, bool)>,
    /// Handlers whose guests chose their resources on this cluster.
    pub(crate) chosen: Vec<String>,
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
    let mut needs = GuestNeeds {
        peering: [true, false]
            .into_iter()
            .flat_map(|clusterwide| peering::served(&discovered, clusterwide))
            .collect(),
        ..GuestNeeds::default()
    };
    let resolve = |selector: &Selector, needs: &mut GuestNeeds| {
        match cluster::resolve(selector, &discovered) {
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
            let named = format!("handler {:?} of guest {:?}", registration.id, guest.name());
            if guest.selects_everything(&registration.id) {
                needs.everything.push((named.clone(), patches));
            }
            let mut selectors: Vec<Selector> = registration
                .selectors
                .iter()
                .map(Selector::from_wit)
                .collect();
            if guest.chooses_resources(&registration.id) {
                // Asked as the operator asks it.
                let spec = HandlerSpec::of(registration, guest.runtime().limits())
                    .choosing_resources(true);
                let registry = Registry::new(vec![Handler {
                    guest: guest.clone(),
                    spec,
                }]);
                registry.choose(&discovered).await;
                selectors = registry.selectors();
                needs.chosen.push(named);
            }
            for selector in &selectors {
                for resource in resolve(selector, &mut needs) {
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
            for resource in resolve(&Selector::from_wit(&permission.target), &mut needs) {
                needs.permitted.push((resource, permission.verbs.clone()));
            }
        }
    }
    Ok(needs)
}

/// Who the manifests are for.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    /// The ServiceAccount's name (also the roles' and the bindings').
    pub(crate) name: String,
    /// The namespace the operator runs in.
    pub(crate) namespace: String,
}

/// How the operator runs, as far as its permissions depend on it (`kapsel run`'s flags).
#[derive(Debug, Clone)]
pub(crate) struct Mode {
    /// The namespaces it serves (`-A` or `-n`).
    pub(crate) scope: Scope,
    /// The peering object it keeps its record in (`--peering NAME`, or `default` when
    /// no flag is given); `None` for `--standalone`.
    pub(crate) peering: Option<String>,
}

/// Rules by (API group, resource, the one object they are limited to): their verbs.
type Rules = BTreeMap<(String, String, Option<String>), BTreeSet<String>>;

/// The rules of the ClusterRole, and of the Role in each named namespace.
#[derive(Debug, Default)]
struct Grants {
    cluster: Rules,
    namespaced: BTreeMap<String, Rules>,
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

/// What `needs` requires of an operator running in `mode`.
fn grants(needs: &GuestNeeds, mode: &Mode) -> Grants {
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

fn rules_json(rules: Rules) -> Vec<Value> {
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

/// The manifests, as one YAML stream: the ServiceAccount, the ClusterRole and its
/// binding, then a Role and its binding per named namespace.
pub(crate) fn manifests(needs: &GuestNeeds, subject: &Subject, mode: &Mode) -> String {
    let grants = grants(needs, mode);
    let name = &subject.name;
    let account = json!([{"kind": "ServiceAccount", "name": name, "namespace": subject.namespace}]);
    let mut documents = vec![
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": subject.namespace},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules_json(grants.cluster),
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": account,
        }),
    ];
    for (namespace, rules) in grants.namespaced {
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": rules_json(rules),
        }));
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": account,
        }));
    }
    let mut out = String::new();
    if !needs.refused.is_empty() {
        out.push_str(
            "# Not served by the operator (Secrets its guest did not declare), so not granted:\n",
        );
        for refused in &needs.refused {
            out.push_str(&format!("#   {refused}\n"));
        }
    }
    if !needs.everything.is_empty() {
        out.push_str(
            "# Selecting every resource (EVERYTHING), so granted on every resource of every \
             group (*), Secrets included, which the operator hands them only with their \
             guest's kapsel::permit! for Secrets:\n",
        );
        for (handler, _) in &needs.everything {
            out.push_str(&format!("#   {handler}\n"));
        }
    }
    if !needs.chosen.is_empty() {
        out.push_str(
            "# Choosing their resources, granted what their guest chose of what this cluster \
             serves now (make these again for CRDs created later):\n",
        );
        for handler in &needs.chosen {
            out.push_str(&format!("#   {handler}\n"));
        }
    }
    if !needs.unresolved.is_empty() {
        out.push_str("# Not resolved on this cluster (create their CRDs first), so not granted:\n");
        for selector in &needs.unresolved {
            out.push_str(&format!("#   {selector}\n"));
        }
    }
    if matches!(mode.scope, Scope::Namespaces(_)) && mode.scope.plain_names().is_none() {
        out.push_str(
            "# -n with globs: the namespaces are not known in advance, so what the operator \
             does in them is granted cluster-wide.\n",
        );
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

    fn needs() -> GuestNeeds {
        let cluster_scoped = |group: &str, plural: &str| Resource {
            namespaced: false,
            ..resource(group, plural, false)
        };
        let nodes = cluster_scoped("", "nodes");
        GuestNeeds {
            watched: vec![
                (resource("kopf.dev", "kopfexamples", true), true),
                (resource("", "pods", true), false),
                (cluster_scoped("kopf.dev", "clusterexamples"), true),
            ],
            permitted: vec![
                (
                    resource("", "configmaps", false),
                    vec!["get".into(), "create".into()],
                ),
                (nodes, vec!["get".into()]),
            ],
            unresolved: vec!["widgets".into()],
            refused: Vec::new(),
            peering: Vec::new(),
            everything: Vec::new(),
            chosen: Vec::new(),
        }
    }

    fn mode(namespaces: &[&str], peering: Option<&str>) -> Mode {
        Mode {
            scope: Scope::from_patterns(namespaces),
            peering: peering.map(str::to_owned),
        }
    }

    fn subject() -> Subject {
        Subject {
            name: "op".into(),
            namespace: "ops".into(),
        }
    }

    fn documents(text: &str) -> Vec<Value> {
        serde_yaml::Deserializer::from_str(text)
            .map(|d| serde::Deserialize::deserialize(d).expect("yaml"))
            .collect()
    }

    /// The verbs a document's rules grant on `group`/`resource` (on every object, or
    /// with `name` in `resource`, `plural:name`, on that one).
    fn verbs(document: &Value, group: &str, resource: &str) -> Vec<String> {
        let (resource, name) = match resource.split_once(':') {
            Some((resource, name)) => (resource, Value::from(name)),
            None => (resource, Value::Null),
        };
        document["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .find(|r| {
                r["apiGroups"][0] == group
                    && r["resources"][0] == resource
                    && r["resourceNames"][0] == name
            })
            .map(|r| serde_json::from_value(r["verbs"].clone()).expect("verbs"))
            .unwrap_or_default()
    }

    /// `(kind, namespace)` of each document.
    fn kinds(documents: &[Value]) -> Vec<(String, String)> {
        documents
            .iter()
            .map(|d| {
                let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                (text(&d["kind"]), text(&d["metadata"]["namespace"]))
            })
            .collect()
    }

    #[test]
    fn cluster_wide_rules_cover_the_framework_the_watched_and_the_permitted() {
        let text = manifests(&needs(), &subject(), &mode(&[], Some("default")));
        assert!(text.starts_with("# Not resolved on this cluster"), "{text}");
        assert!(text.contains("#   widgets"), "{text}");
        let documents = documents(&text);
        let role = &documents[1];
        assert_eq!(
            verbs(role, "kopf.dev", "kopfexamples"),
            ["list", "patch", "watch"]
        );
        assert_eq!(verbs(role, "kopf.dev", "kopfexamples/status"), ["patch"]);
        // Index-only: read, never patched.
        assert_eq!(verbs(role, "", "pods"), ["list", "watch"]);
        assert!(verbs(role, "", "pods/status").is_empty());
        assert_eq!(verbs(role, "", "configmaps"), ["create", "get"]);
        assert_eq!(verbs(role, "", "events"), ["create"]);
        assert_eq!(
            verbs(role, "kopf.dev", "clusterkopfpeerings"),
            ["list", "watch"]
        );
        assert_eq!(
            verbs(role, "kopf.dev", "clusterkopfpeerings:default"),
            ["patch"]
        );
        assert!(verbs(role, "kopf.dev", "kopfpeerings").is_empty());
        // Namespaces are listed only to follow `-n` globs.
        assert!(verbs(role, "", "namespaces").is_empty());
        assert_eq!(
            kinds(&documents),
            [
                ("ServiceAccount".into(), "ops".into()),
                ("ClusterRole".into(), String::new()),
                ("ClusterRoleBinding".into(), String::new()),
            ]
        );
        assert_eq!(documents[2]["subjects"][0]["namespace"], "ops");
    }

    #[test]
    fn named_namespaces_get_a_role_each_and_the_cluster_role_keeps_the_rest() {
        let text = manifests(
            &needs(),
            &subject(),
            &mode(&["team-a", "team-b"], Some("main")),
        );
        let documents = documents(&text);
        assert_eq!(
            kinds(&documents),
            [
                ("ServiceAccount".into(), "ops".into()),
                ("ClusterRole".into(), String::new()),
                ("ClusterRoleBinding".into(), String::new()),
                ("Role".into(), "default".into()),
                ("RoleBinding".into(), "default".into()),
                ("Role".into(), "team-a".into()),
                ("RoleBinding".into(), "team-a".into()),
                ("Role".into(), "team-b".into()),
                ("RoleBinding".into(), "team-b".into()),
            ]
        );
        let cluster = &documents[1];
        assert_eq!(
            verbs(cluster, "apiextensions.k8s.io", "customresourcedefinitions"),
            ["list", "watch"]
        );
        // Cluster-scoped resources stay in the ClusterRole; namespaced ones leave it.
        assert_eq!(verbs(cluster, "", "nodes"), ["get"]);
        assert_eq!(
            verbs(cluster, "kopf.dev", "clusterexamples"),
            ["list", "patch", "watch"]
        );
        for (group, resource) in [
            ("kopf.dev", "kopfexamples"),
            ("", "events"),
            ("kopf.dev", "kopfpeerings"),
            ("kopf.dev", "clusterkopfpeerings"),
            ("", "namespaces"),
        ] {
            assert!(verbs(cluster, group, resource).is_empty(), "{resource}");
        }
        for role in [&documents[5], &documents[7]] {
            assert_eq!(
                verbs(role, "kopf.dev", "kopfexamples"),
                ["list", "patch", "watch"]
            );
            assert_eq!(verbs(role, "", "configmaps"), ["create", "get"]);
            assert_eq!(verbs(role, "", "events"), ["create"]);
            assert_eq!(verbs(role, "kopf.dev", "kopfpeerings"), ["list", "watch"]);
            assert_eq!(verbs(role, "kopf.dev", "kopfpeerings:main"), ["patch"]);
        }
        // Events about the cluster-scoped clusterexamples go to `default`.
        assert_eq!(verbs(&documents[3], "", "events"), ["create"]);
        assert_eq!(documents[3]["rules"].as_array().map(Vec::len), Some(1));
        assert_eq!(documents[6]["roleRef"]["kind"], "Role");
        assert_eq!(documents[6]["subjects"][0]["namespace"], "ops");
    }

    #[test]
    fn globs_grant_cluster_wide_with_the_namespaces_and_say_why() {
        let text = manifests(&needs(), &subject(), &mode(&["team-*"], Some("main")));
        assert!(text.contains("# -n with globs"), "{text}");
        let documents = documents(&text);
        assert_eq!(documents.len(), 3, "{text}");
        let cluster = &documents[1];
        assert_eq!(verbs(cluster, "", "namespaces"), ["list", "watch"]);
        assert_eq!(
            verbs(cluster, "kopf.dev", "kopfpeerings"),
            ["list", "watch"]
        );
        assert_eq!(verbs(cluster, "kopf.dev", "kopfpeerings:main"), ["patch"]);
        assert_eq!(
            verbs(cluster, "kopf.dev", "kopfexamples"),
            ["list", "patch", "watch"]
        );
    }

    #[test]
    fn everything_is_granted_on_every_resource_cluster_wide_and_said_so() {
        let everything = |patches| GuestNeeds {
            everything: vec![("handler \"all_fn\" of guest \"g\"".into(), patches)],
            ..needs()
        };
        let text = manifests(&everything(true), &subject(), &mode(&["team-a"], None));
        assert!(
            text.starts_with("# Selecting every resource (EVERYTHING)"),
            "{text}"
        );
        assert!(
            text.contains("#   handler \"all_fn\" of guest \"g\""),
            "{text}"
        );
        let granted = documents(&text);
        let cluster = &granted[1];
        assert_eq!(verbs(cluster, "*", "*"), ["list", "patch", "watch"]);
        assert_eq!(verbs(cluster, "*", "*/status"), ["patch"]);
        // Events about cluster-scoped objects it is handed go to `default`.
        assert_eq!(kinds(&granted)[3], ("Role".into(), "default".into()));
        // An index only reads.
        let text = manifests(&everything(false), &subject(), &mode(&[], None));
        let cluster = &documents(&text)[1];
        assert_eq!(verbs(cluster, "*", "*"), ["list", "watch"]);
        assert!(verbs(cluster, "*", "*/status").is_empty());
    }

    #[test]
    fn peering_is_granted_in_the_groups_the_cluster_serves_it_in() {
        let cluster_scoped = |group: &str, plural: &str| Resource {
            namespaced: false,
            ..resource(group, plural, false)
        };
        let legacy = GuestNeeds {
            peering: vec![
                cluster_scoped("zalando.org", "clusterkopfpeerings"),
                resource("kopf.dev", "kopfpeerings", false),
                resource("zalando.org", "kopfpeerings", false),
            ],
            ..needs()
        };
        let text = manifests(&legacy, &subject(), &mode(&[], Some("default")));
        let role = &documents(&text)[1];
        let group = "zalando.org";
        assert_eq!(verbs(role, group, "clusterkopfpeerings"), ["list", "watch"]);
        assert_eq!(verbs(role, group, "clusterkopfpeerings:default"), ["patch"]);
        assert!(verbs(role, "kopf.dev", "clusterkopfpeerings").is_empty());

        let text = manifests(&legacy, &subject(), &mode(&["a"], Some("default")));
        let role = &documents(&text)[3];
        for group in ["kopf.dev", "zalando.org"] {
            assert_eq!(verbs(role, group, "kopfpeerings"), ["list", "watch"]);
            assert_eq!(verbs(role, group, "kopfpeerings:default"), ["patch"]);
        }
    }

    #[test]
    fn standalone_operators_get_no_peering() {
        for namespaces in [&[][..], &["team-a"][..]] {
            let text = manifests(&needs(), &subject(), &mode(namespaces, None));
            assert!(!text.contains("peerings"), "{text}");
        }
    }
}
