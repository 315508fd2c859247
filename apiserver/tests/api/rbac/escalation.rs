//! Privilege escalation: an account may write roles only with rules it holds, and bind
//! roles only whose rules it holds, unless it may `escalate` or `bind`.

use super::*;

const ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/ops/roles";
const BINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/ops/rolebindings";

fn role_body(name: &str, resource: &str) -> Value {
    json!({"metadata": {"name": name}, "rules": [{"apiGroups": [""], "resources": [resource], "verbs": ["get", "list"]}]})
}

fn binding_body(name: &str, cluster_role: &str) -> Value {
    json!({"metadata": {"name": name},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
           "subjects": [{"kind": "ServiceAccount", "name": "kapsel", "namespace": "ops"}]})
}

#[tokio::test]
async fn roles_and_bindings_grant_only_what_the_writer_holds() {
    let (server, _admin) = start_rbac().await;
    let token = service_account(&server, "ops", "kapsel").await;
    role(&server, Some("ops"), "manager", json!([
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "update", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
    ])).await;
    bind(
        &server,
        Some("ops"),
        "manager",
        "Role",
        "manager",
        ("ops", "kapsel"),
    )
    .await;

    let r = as_token(
        &server,
        &token,
        "POST",
        ROLES,
        Some(role_body("cm", "configmaps")),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let r = as_token(
        &server,
        &token,
        "POST",
        ROLES,
        Some(role_body("secrets", "secrets")),
    )
    .await;
    assert_forbidden(
        &r,
        "roles.rbac.authorization.k8s.io \"secrets\" is forbidden: user \"system:serviceaccount:ops:kapsel\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:ops\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}",
    );
    // Changing a role it may write into one it could not create: refused too.
    let r = as_token(
        &server,
        &token,
        "PATCH",
        &format!("{ROLES}/cm"),
        Some(json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})),
    )
    .await;
    assert_eq!(r.code, 403, "{}", r.body);
    // Binding cluster-admin: refused; binding a role it holds: allowed.
    let r = as_token(
        &server,
        &token,
        "POST",
        BINDINGS,
        Some(binding_body("root", "cluster-admin")),
    )
    .await;
    assert_eq!(r.code, 403, "{}", r.body);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}"),
        "{}",
        r.body
    );
    role(
        &server,
        None,
        "cm-reader",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
    )
    .await;
    let r = as_token(
        &server,
        &token,
        "POST",
        BINDINGS,
        Some(binding_body("cm", "cm-reader")),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);

    // With `escalate` on roles and `bind` on cluster-admin, both are allowed.
    role(&server, Some("ops"), "powers", json!([
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["cluster-admin"]},
    ])).await;
    bind(
        &server,
        Some("ops"),
        "powers",
        "Role",
        "powers",
        ("ops", "kapsel"),
    )
    .await;
    let r = as_token(
        &server,
        &token,
        "POST",
        ROLES,
        Some(role_body("secrets", "secrets")),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let r = as_token(
        &server,
        &token,
        "POST",
        BINDINGS,
        Some(binding_body("root", "cluster-admin")),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
}
