//! The kubeconfig that points kubectl and kube-rs at the server.

use base64::Engine;

/// A kubeconfig with cluster, context and user all named `kapsel`. With RBAC on, the
/// user has a token and the cluster the CA (PEM) of the server's certificate; without,
/// no credentials (the server accepts everyone).
pub(crate) fn kubeconfig(url: &str, secure: Option<(&str, &str)>) -> String {
    let (user, ca) = match secure {
        Some((token, ca)) => (
            format!("\n    token: {token}\n"),
            format!(
                "\n    certificate-authority-data: {}",
                base64::engine::general_purpose::STANDARD.encode(ca)
            ),
        ),
        None => (" {}\n".to_string(), String::new()),
    };
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kapsel
  cluster:
    server: {url}{ca}
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
