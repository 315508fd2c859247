//! The kubeconfig that points kubectl and kube-rs at the server.

/// A kubeconfig with cluster, context and user all named `kapsel`; no authentication
/// (the server accepts everyone on loopback).
pub(crate) fn kubeconfig(url: &str) -> String {
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
  user: {{}}
"
    )
}
