//! RBAC: authentication by bearer tokens (admin, static, ServiceAccount tokens) and
//! authorization of every request by Roles, ClusterRoles and their bindings, with kube's
//! answers; and the server with RBAC off staying open.

mod authorization;
mod escalation;
mod tokens;

use crate::{Raw, client_for, raw_with};
use kapsel_apiserver::{ApiServer, Config};
use kube::Client;
use serde_json::{Value, json};
use std::time::Duration;

/// A server with RBAC on, and a client with its admin kubeconfig.
pub(crate) async fn start_rbac() -> (ApiServer, Client) {
    start_rbac_with(Config::default()).await
}

pub(crate) async fn start_rbac_with(config: Config) -> (ApiServer, Client) {
    let server = ApiServer::start(config.rbac(true)).await.unwrap();
    let client = client_for(&server).await;
    (server, client)
}

/// A kube-rs client that presents `token`.
pub(crate) async fn client_with_token(server: &ApiServer, token: &str) -> Client {
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: {token}\n",
        server.url()
    );
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// A raw request with `Authorization: Bearer token`.
pub(crate) async fn as_token(
    server: &ApiServer,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Raw {
    let auth = format!("Bearer {token}");
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let ct = (!bytes.is_empty()).then_some("application/json");
    let ct = if method == "PATCH" {
        Some("application/merge-patch+json")
    } else {
        ct
    };
    raw_with(
        server,
        method,
        path,
        ct,
        &[("Authorization", &auth)],
        bytes.as_bytes(),
    )
    .await
}

/// Creates an object as the admin (asserting success).
pub(crate) async fn admin_create(server: &ApiServer, path: &str, body: Value) -> Value {
    let r = as_token(server, &server.admin_token(), "POST", path, Some(body)).await;
    assert_eq!(r.code, 201, "POST {path}: {}", r.body);
    r.json()
}

/// A namespace and a ServiceAccount in it, and a token of that account.
pub(crate) async fn service_account(server: &ApiServer, ns: &str, name: &str) -> String {
    let existing = as_token(
        server,
        &server.admin_token(),
        "GET",
        &format!("/api/v1/namespaces/{ns}"),
        None,
    )
    .await;
    if existing.code == 404 {
        admin_create(
            server,
            "/api/v1/namespaces",
            json!({"metadata": {"name": ns}}),
        )
        .await;
    }
    admin_create(
        server,
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        json!({"metadata": {"name": name}}),
    )
    .await;
    server
        .service_account_token(ns, name, Duration::from_secs(3600))
        .unwrap()
}

/// A Role (or ClusterRole, without a namespace) with these rules.
pub(crate) async fn role(server: &ApiServer, ns: Option<&str>, name: &str, rules: Value) {
    let (path, kind) = match ns {
        Some(ns) => (
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
            "Role",
        ),
        None => (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles".to_string(),
            "ClusterRole",
        ),
    };
    admin_create(
        server,
        &path,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "rules": rules}),
    )
    .await;
}

/// Binds a role (`Role` or `ClusterRole`) to the ServiceAccount `sa_ns/sa`, with a
/// RoleBinding in `ns` or, without one, a ClusterRoleBinding.
pub(crate) async fn bind(
    server: &ApiServer,
    ns: Option<&str>,
    name: &str,
    role_kind: &str,
    role: &str,
    (sa_ns, sa): (&str, &str),
) {
    let (path, kind) = match ns {
        Some(ns) => (
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
            "RoleBinding",
        ),
        None => (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".to_string(),
            "ClusterRoleBinding",
        ),
    };
    admin_create(
        server,
        &path,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}],
        }),
    )
    .await;
}

/// Asserts kube's 403 with exactly this message.
pub(crate) fn assert_forbidden(r: &Raw, message: &str) {
    crate::assert_status(r, 403, "Forbidden");
    assert_eq!(r.json()["message"], message, "{}", r.body);
}

/// The kube-rs error's Status, for a call that must fail.
pub(crate) fn status_of<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn rbac_off_everything_stays_open() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    assert!(
        !server.kubeconfig().contains("token"),
        "{}",
        server.kubeconfig()
    );
    // Anonymous, and with a token nobody issued: both may do anything.
    let r = crate::post(
        &server,
        "/api/v1/namespaces/default/secrets",
        json!({"metadata": {"name": "s"}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let r = as_token(&server, "not-a-token", "GET", "/api/v1/secrets", None).await;
    assert_eq!(r.code, 200, "{}", r.body);
    // The default roles exist (kube-apiserver's `rbac/bootstrap-roles` hook runs whatever
    // authorizes), but bind nothing that is checked.
    let r = crate::get(&server, "/apis/rbac.authorization.k8s.io/v1/clusterroles").await;
    assert!(!r.json()["items"].as_array().expect("items").is_empty());
}
