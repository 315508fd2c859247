//! Request attributes as kube's RequestInfoFactory computes them, and kube's 403 wording.

use super::*;
use http::Method;

fn attrs(method: Method, path: &str, query: &[(&str, &str)]) -> Attributes {
    let q: HashMap<String, String> = query
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    attributes(&method, path, &q)
}

fn resource(verb: &str, group: &str, res: &str, sub: &str, ns: &str, name: &str) -> Attributes {
    Attributes {
        verb: verb.into(),
        target: Target::Resource {
            group: group.into(),
            resource: res.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        },
    }
}

#[test]
fn verbs_names_and_scopes_are_kubes() {
    let cases = [
        (
            Method::GET,
            "/api/v1/namespaces/ops/pods",
            vec![],
            resource("list", "", "pods", "", "ops", ""),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/ops/pods",
            vec![("watch", "true")],
            resource("watch", "", "pods", "", "ops", ""),
        ),
        (
            Method::GET,
            "/api/v1/watch/namespaces/ops/pods",
            vec![],
            resource("watch", "", "pods", "", "ops", ""),
        ),
        (
            Method::GET,
            "/api/v1/pods",
            vec![("fieldSelector", "metadata.name=x")],
            resource("list", "", "pods", "", "", "x"),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/ops/pods/p",
            vec![],
            resource("get", "", "pods", "", "ops", "p"),
        ),
        (
            Method::PATCH,
            "/apis/kopf.dev/v1/namespaces/ops/kopfexamples/k/status",
            vec![],
            resource("patch", "kopf.dev", "kopfexamples", "status", "ops", "k"),
        ),
        (
            Method::POST,
            "/api/v1/namespaces/ops/serviceaccounts/sa/token",
            vec![],
            resource("create", "", "serviceaccounts", "token", "ops", "sa"),
        ),
        (
            Method::DELETE,
            "/api/v1/namespaces/ops/configmaps",
            vec![],
            resource("deletecollection", "", "configmaps", "", "ops", ""),
        ),
        (
            Method::DELETE,
            "/api/v1/namespaces/ops/configmaps/c",
            vec![],
            resource("delete", "", "configmaps", "", "ops", "c"),
        ),
        (
            Method::PUT,
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/r",
            vec![],
            resource(
                "update",
                "rbac.authorization.k8s.io",
                "clusterroles",
                "",
                "",
                "r",
            ),
        ),
        // A namespace is its own namespace; `status` and `finalize` are its subresources.
        (
            Method::GET,
            "/api/v1/namespaces/ops",
            vec![],
            resource("get", "", "namespaces", "", "ops", "ops"),
        ),
        (
            Method::PUT,
            "/api/v1/namespaces/ops/finalize",
            vec![],
            resource("update", "", "namespaces", "finalize", "ops", "ops"),
        ),
        (
            Method::GET,
            "/api/v1/namespaces",
            vec![],
            resource("list", "", "namespaces", "", "", ""),
        ),
    ];
    for (method, path, query, want) in cases {
        assert_eq!(attrs(method, path, &query), want, "{path} {query:?}");
    }
    for path in [
        "/api",
        "/api/v1",
        "/apis/apps/v1",
        "/version",
        "/openapi/v2",
    ] {
        assert_eq!(
            attrs(Method::GET, path, &[]),
            Attributes {
                verb: "get".into(),
                target: Target::Path(path.into())
            }
        );
    }
}

#[test]
fn forbidden_messages_are_kubes() {
    let sa = User::service_account("ops", "kapsel");
    let e = forbidden(
        &sa,
        &resource("patch", "", "configmaps", "", "default", "x"),
        "",
    );
    assert_eq!(
        e.message,
        r#"configmaps "x" is forbidden: User "system:serviceaccount:ops:kapsel" cannot patch resource "configmaps" in API group "" in the namespace "default""#
    );
    let e = forbidden(
        &sa,
        &resource("get", "kopf.dev", "kopfexamples", "status", "", "k"),
        "",
    );
    assert_eq!(
        e.message,
        r#"kopfexamples.kopf.dev "k" is forbidden: User "system:serviceaccount:ops:kapsel" cannot get resource "kopfexamples/status" in API group "kopf.dev" at the cluster scope"#
    );
    assert_eq!(
        e.to_status()["details"],
        json!({"name": "k", "group": "kopf.dev", "kind": "kopfexamples"})
    );
    let e = forbidden(
        &sa,
        &resource("list", "", "pods", "", "", ""),
        "RBAC: role.rbac.authorization.k8s.io \"r\" not found",
    );
    assert_eq!(
        e.message,
        r#"pods is forbidden: User "system:serviceaccount:ops:kapsel" cannot list resource "pods" in API group "" at the cluster scope: RBAC: role.rbac.authorization.k8s.io "r" not found"#
    );
    let path = Attributes {
        verb: "get".into(),
        target: Target::Path("/".into()),
    };
    let e = forbidden(&User::anonymous(), &path, "");
    assert_eq!(
        e.message,
        r#"forbidden: User "system:anonymous" cannot get path "/""#
    );
    assert_eq!(e.to_status()["details"], json!({}));
}
