//! The default ClusterRoles and ClusterRoleBindings kube-apiserver creates at start
//! (bootstrappolicy): `cluster-admin` for `system:masters`, and the discovery, public-info
//! and basic-user roles every authenticated user (and, for public info, everyone) has;
//! `system:auth-delegator` (TokenReviews), unbound, for installers to bind.
//! The aggregated `admin`/`edit`/`view` roles and the controllers' `system:*` roles are
//! not created: nothing here runs as those controllers.

use super::rules::GROUP;
use serde_json::{Value, json};

fn meta(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn role(name: &str, rules: Value) -> (&'static str, Value) {
    let obj = json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "ClusterRole",
        "metadata": meta(name),
        "rules": rules,
    });
    ("clusterroles", obj)
}

fn binding(name: &str, groups: &[&str]) -> (&'static str, Value) {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g}))
        .collect();
    let obj = json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "ClusterRoleBinding",
        "metadata": meta(name),
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    });
    ("clusterrolebindings", obj)
}

/// The default objects, by plural (all in the RBAC group), in creation order.
pub(crate) fn default_objects() -> Vec<(&'static str, Value)> {
    let discovery = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ];
    let public = ["/healthz", "/livez", "/readyz", "/version", "/version/"];
    vec![
        role(
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        role(
            "system:discovery",
            json!([{"nonResourceURLs": discovery, "verbs": ["get"]}]),
        ),
        role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": public, "verbs": ["get"]}]),
        ),
        role(
            "system:basic-user",
            json!([
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
            ]),
        ),
        // For what delegates authentication and authorization to the API server
        // (kube-rbac-proxy, extension API servers): bound by their installers, not here.
        role(
            "system:auth-delegator",
            json!([
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
            ]),
        ),
        binding("cluster-admin", &[crate::auth::MASTERS]),
        binding("system:discovery", &[crate::auth::AUTHENTICATED]),
        binding(
            "system:public-info-viewer",
            &[crate::auth::AUTHENTICATED, crate::auth::UNAUTHENTICATED],
        ),
        binding("system:basic-user", &[crate::auth::AUTHENTICATED]),
    ]
}
