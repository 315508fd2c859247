//! `kapsel rbac`'s manifests for given needs: what is granted, where, and what is
//! said in comments.

use serde_json::Value;

use super::grants::{Admission, Mode};
use super::manifests::{Subject, manifests};
use super::needs::GuestNeeds;
use crate::cluster::{Resource, Scope};

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
        admission: Vec::new(),
    }
}

fn mode(namespaces: &[&str], peering: Option<&str>) -> Mode {
    Mode {
        scope: Scope::from_patterns(namespaces),
        peering: peering.map(str::to_owned),
        admission: Admission::default(),
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
    // Offline, the way to resolve them is the flag, not the cluster.
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.contains("--crd FILE")),
        "{text}"
    );
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
            ("Role".into(), "ops".into()),
            ("RoleBinding".into(), "ops".into()),
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
    for role in [&documents[7], &documents[9]] {
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
    // Events about the operator itself are about its pod, in its own namespace.
    assert_eq!(verbs(&documents[5], "", "events"), ["create"]);
    assert_eq!(documents[5]["rules"].as_array().map(Vec::len), Some(1));
    assert_eq!(documents[8]["roleRef"]["kind"], "Role");
    assert_eq!(documents[8]["subjects"][0]["namespace"], "ops");
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

#[test]
fn admission_handlers_get_their_configurations_and_the_certificates_secret() {
    let admission = GuestNeeds {
        admission: vec!["handler \"check_field\" of guest \"admission\"".into()],
        ..needs()
    };
    let group = "admissionregistration.k8s.io";
    let configurations = [
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
    ];
    for namespaces in [&[][..], &["team-a"][..]] {
        let text = manifests(&admission, &subject(), &mode(namespaces, None));
        assert!(
            text.contains(
                "# Admission handlers: their webhook server writes the webhook \
                 configurations of any name (give --admission-managed), and keeps a \
                 generated certificate in the Secret ops/kapsel-admission-tls:\n\
                 #   handler \"check_field\" of guest \"admission\"\n"
            ),
            "{text}"
        );
        let documents = documents(&text);
        let cluster = &documents[1];
        for resource in configurations {
            assert_eq!(verbs(cluster, group, resource), ["create", "patch"]);
        }
        // The Secret, in the operator's namespace only: created, then read and
        // replaced by its name alone.
        assert!(verbs(cluster, "", "secrets").is_empty());
        let role = documents
            .iter()
            .find(|d| d["kind"] == "Role" && d["metadata"]["namespace"] == "ops")
            .unwrap_or_else(|| panic!("a Role in ops: {text}"));
        assert_eq!(verbs(role, "", "secrets"), ["create"]);
        assert_eq!(
            verbs(role, "", "secrets:kapsel-admission-tls"),
            ["get", "update"]
        );
        // With -n, beside its Events (about the operator's pod); cluster-wide, the
        // ClusterRole grants those.
        let events = usize::from(!namespaces.is_empty());
        assert_eq!(verbs(role, "", "events").len(), events);
        assert_eq!(
            role["rules"].as_array().map(Vec::len),
            Some(2 + events),
            "{role}"
        );
        let binding = documents
            .iter()
            .find(|d| d["kind"] == "RoleBinding" && d["metadata"]["namespace"] == "ops")
            .unwrap_or_else(|| panic!("a RoleBinding in ops: {text}"));
        assert_eq!(binding["subjects"][0]["name"], "op");
    }
    // Without admission handlers, none of it.
    let text = manifests(&needs(), &subject(), &mode(&[], None));
    assert!(
        !text.contains("admission") && !text.contains("secrets"),
        "{text}"
    );
}

#[test]
fn the_managed_configurations_and_the_secret_are_granted_by_name_when_known() {
    let admission = GuestNeeds {
        admission: vec!["handler \"mark_seen\" of guest \"admission\"".into()],
        ..needs()
    };
    let group = "admissionregistration.k8s.io";
    let managed = |secret: Option<(&str, &str)>| Mode {
        admission: Admission {
            managed: Some("kex.example.com".into()),
            secret: secret.map(|(ns, name)| (ns.into(), name.into())),
        },
        ..mode(&[], None)
    };
    let text = manifests(&admission, &subject(), &managed(None));
    assert!(
        text.contains(
            "configurations kex.example.com, and keeps a generated certificate in the \
             Secret ops/kex.example.com-admission-tls:"
        ),
        "{text}"
    );
    let granted = documents(&text);
    for resource in [
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
    ] {
        assert_eq!(verbs(&granted[1], group, resource), ["create"]);
        let named = format!("{resource}:kex.example.com");
        assert_eq!(verbs(&granted[1], group, &named), ["patch"]);
    }
    let secret = "secrets:kex.example.com-admission-tls";
    assert_eq!(verbs(&granted[3], "", secret), ["get", "update"]);
    // --admission-secret: that one, in its namespace.
    let text = manifests(&admission, &subject(), &managed(Some(("certs", "tls"))));
    assert!(text.contains("in the Secret certs/tls:"), "{text}");
    let documents = documents(&text);
    assert_eq!(kinds(&documents)[3], ("Role".into(), "certs".into()));
    assert_eq!(verbs(&documents[3], "", "secrets"), ["create"]);
    assert_eq!(verbs(&documents[3], "", "secrets:tls"), ["get", "update"]);
    assert_eq!(documents.len(), 5, "{text}");
}
