//! The kubeconfig that points kubectl and kube-rs at the server.

/// A kubeconfig with cluster, context and user all named `kapsel`; the user has `token`
/// when there is one (RBAC on), else no credentials (the server accepts everyone).
pub(crate) fn kubeconfig(url: &str, token: Option<&str>) -> String {
    let user = match token {
        Some(t) => format!("\n    token: {t}\n"),
        None => " {}\n".to_string(),
    };
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kapsel
  cluster:
    server: {url}
contexts:
- name: kapsel
  context:
    cluster: kapsel
    user: kapsel
    namespace: default
current-context: kapsel
preferences: {{}}
users:
- name: kapsel
  user:{user}"
    )
}
