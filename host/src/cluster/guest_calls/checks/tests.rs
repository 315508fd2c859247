//! Tests of the checks: resolution, permissions, namespaces, bodies, scope.

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
        &Scope::Cluster,
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
        &Scope::Cluster,
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
        &Scope::Cluster,
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
        &Scope::Cluster,
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
            &Scope::Cluster,
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
        &Scope::Cluster,
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
        let refused = prepare(
            "g",
            &perms,
            &known,
            &Scope::Cluster,
            None,
            get(cm(), None, name),
        )
        .expect_err("bad name");
        assert_eq!(refused.code, 400, "{name:?}");
    }
    let refused = prepare(
        "g",
        &perms,
        &known,
        &Scope::Cluster,
        None,
        get(cm(), Some("a/b"), "x"),
    )
    .expect_err("bad namespace");
    assert_eq!(refused.code, 400);
}

#[test]
fn calls_stay_in_the_served_namespaces() {
    let known = known();
    let perms = [permit(sel(None, None, any("configmaps")), &["*"])];
    let perms_ns = [permit(sel(None, None, any("namespaces")), &["*"])];
    let cm = || sel(None, None, any("configmaps"));
    let scope = Scope::from_patterns(&["default"]);
    let refused = prepare(
        "g",
        &perms,
        &known,
        &scope,
        Some("default"),
        get(cm(), Some("kube-system"), "x"),
    )
    .expect_err("outside");
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    assert!(
        refused.message.contains("\"kube-system\""),
        "{}",
        refused.message
    );
    let created = KubeRequest::Create {
        target: cm(),
        namespace: None,
        body: json!({"metadata": {"name": "x", "namespace": "kube-system"}}).to_string(),
    };
    assert_eq!(
        prepare("g", &perms, &known, &scope, Some("default"), created)
            .expect_err("a body's namespace counts too")
            .code,
        403
    );
    let everywhere = KubeRequest::List {
        target: cm(),
        namespace: None,
        label_selector: None,
    };
    let refused = prepare("g", &perms, &known, &scope, Some("default"), everywhere)
        .expect_err("no list across namespaces");
    assert!(
        refused.message.contains("all namespaces"),
        "{}",
        refused.message
    );
    let inside = prepare(
        "g",
        &perms,
        &known,
        &scope,
        Some("default"),
        get(cm(), None, "x"),
    );
    assert_eq!(
        inside.expect("served").namespace.as_deref(),
        Some("default")
    );
    // Cluster-scoped resources are in no namespace: the permission alone decides.
    let namespaces = sel(None, None, any("namespaces"));
    assert!(
        prepare(
            "g",
            &perms_ns,
            &known,
            &scope,
            None,
            get(namespaces, None, "y")
        )
        .is_ok()
    );
}

#[test]
fn namespaces_default_to_the_handled_object_then_default() {
    let known = known();
    let perms = [permit(sel(None, None, any("configmaps")), &["*"])];
    let perms_ns = [permit(sel(None, None, any("namespaces")), &["*"])];
    let cm = || sel(None, None, any("configmaps"));
    let ns_of = |perms: &[Permission], object: Option<&str>, request| {
        prepare("g", perms, &known, &Scope::Cluster, object, request)
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

/// A namespace is an RFC 1123 label before any path is built from it: `..` and `/` in it
/// would reach another namespace whatever `-n` includes (an Event about
/// `default/../kube-system` passed the scope check once).
#[test]
fn namespaces_are_rfc_1123_labels_in_calls_and_event_references() {
    let known = known();
    let perms = [permit(sel(None, None, any("configmaps")), &["*"])];
    let call = |namespace: &str| {
        let configmaps = sel(None, None, any("configmaps"));
        prepare(
            "g",
            &perms,
            &known,
            &Scope::Cluster,
            None,
            get(configmaps, Some(namespace), "x"),
        )
    };
    let reference = |name: &str, namespace: Option<&str>| ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: name.into(),
        namespace: namespace.map(str::to_owned),
        uid: None,
    };
    let bad = [
        "default/../kube-system",
        "..",
        "Default",
        "-x",
        "x-",
        "a_b",
        "a.b",
        &"a".repeat(64),
    ];
    for namespace in bad {
        let refused = call(namespace).expect_err("bad namespace");
        assert_eq!(refused.code, 400, "{namespace:?}");
        assert!(refused.message.contains("RFC 1123"), "{}", refused.message);
        let refused = valid_reference(&reference("x", Some(namespace)));
        assert_eq!(refused.unwrap_err().code, 400, "{namespace:?}");
    }
    for namespace in ["default", "kube-system", "a", "1-2", &"a".repeat(63)] {
        assert!(
            valid_reference(&reference("x", Some(namespace))).is_ok(),
            "{namespace:?}"
        );
        assert!(call(namespace).is_ok(), "{namespace:?}");
    }
    for name in ["", "..", "a/b", "x?watch=1"] {
        assert_eq!(
            valid_reference(&reference(name, None)).unwrap_err().code,
            400,
            "{name:?}"
        );
    }
    assert!(valid_reference(&reference("system:node", None)).is_ok());
}
