//! The manifests `kapsel rbac` prints: the ServiceAccount, the ClusterRole and its
//! binding, a Role and its binding per namespace, and comments on what is not granted.

use serde_json::json;

use super::grants::{Mode, grants, rules_json};
use super::needs::GuestNeeds;
use crate::cluster::Scope;

/// Who the manifests are for.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    /// The ServiceAccount's name (also the roles' and the bindings').
    pub(crate) name: String,
    /// The namespace the operator runs in.
    pub(crate) namespace: String,
}

/// The heading of the selectors not resolved: on a cluster, their CRDs are missing;
/// offline (`kapsel rbac --offline`), they were not given.
const UNRESOLVED: &str = "# Not resolved on this cluster (create their CRDs first, or give them \
                          with --crd FILE), so not granted:\n";

/// The manifests, as one YAML stream: the ServiceAccount, the ClusterRole and its
/// binding, then a Role and its binding per named namespace.
pub(crate) fn manifests(needs: &GuestNeeds, subject: &Subject, mode: &Mode) -> String {
    let grants = grants(needs, mode, &subject.namespace);
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
    if !needs.admission.is_empty() {
        let configurations = mode.admission.managed.as_ref().map_or_else(
            || "of any name (give --admission-managed)".to_owned(),
            Clone::clone,
        );
        let (namespace, secret) = mode.admission.secret(&subject.namespace);
        out.push_str(&format!(
            "# Admission handlers: their webhook server writes the webhook configurations \
             {configurations}, and keeps a generated certificate in the Secret \
             {namespace}/{secret}:\n"
        ));
        for handler in &needs.admission {
            out.push_str(&format!("#   {handler}\n"));
        }
    }
    if !needs.unresolved.is_empty() {
        out.push_str(UNRESOLVED);
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
