//! Where an adopted object may be, for its owner reference to hold: Kubernetes looks a
//! namespaced owner up in its dependent's namespace only, so that a dependent in another
//! namespace, or a cluster-scoped one, has an owner its garbage collector takes for
//! absent, and is deleted at once (with a Warning Event `OwnerRefInvalidNamespace` on
//! it). A cluster-scoped owner may own objects anywhere.
//!
//! What a guest can check on JSON alone: the namespace the object names, and whether its
//! kind is one Kubernetes itself serves cluster-scoped ([`CLUSTER_SCOPED`]). A custom
//! resource's scope is in its CRD, which a guest does not read here: a cluster-scoped
//! custom resource adopted by a namespaced owner is not caught.

use serde_json::Value;

use super::fields::{Check, HierarchyError, present};

/// The kinds Kubernetes serves cluster-scoped, by API group (`""`: the core group):
/// those an operator may create (the reviews, never stored, are left out).
const CLUSTER_SCOPED: &[(&str, &[&str])] = &[
    (
        "",
        &["Namespace", "Node", "PersistentVolume", "ComponentStatus"],
    ),
    (
        "admissionregistration.k8s.io",
        &[
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "MutatingAdmissionPolicy",
            "MutatingAdmissionPolicyBinding",
        ],
    ),
    ("apiextensions.k8s.io", &["CustomResourceDefinition"]),
    ("apiregistration.k8s.io", &["APIService"]),
    (
        "certificates.k8s.io",
        &["CertificateSigningRequest", "ClusterTrustBundle"],
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        &["FlowSchema", "PriorityLevelConfiguration"],
    ),
    (
        "networking.k8s.io",
        &["IngressClass", "IPAddress", "ServiceCIDR"],
    ),
    ("node.k8s.io", &["RuntimeClass"]),
    (
        "rbac.authorization.k8s.io",
        &["ClusterRole", "ClusterRoleBinding"],
    ),
    ("resource.k8s.io", &["DeviceClass", "ResourceSlice"]),
    ("scheduling.k8s.io", &["PriorityClass"]),
    (
        "storage.k8s.io",
        &[
            "StorageClass",
            "VolumeAttachment",
            "CSIDriver",
            "CSINode",
            "VolumeAttributesClass",
        ],
    ),
];

/// The object's kind when Kubernetes serves it cluster-scoped (by its `apiVersion`'s
/// group and its `kind`).
fn cluster_scoped_kind(object: &Value) -> Option<&str> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    CLUSTER_SCOPED
        .iter()
        .any(|(g, kinds)| *g == group && kinds.contains(&kind))
        .then_some(kind)
}

impl Check {
    /// An object adopted by an owner in `owner_namespace` (`None`: cluster-scoped) holds
    /// its owner reference: it is in the owner's namespace, or will be put there
    /// (`forced`, or no namespace of its own), and is not of a cluster-scoped kind.
    pub(super) fn scope(
        &self,
        object: &Value,
        owner_namespace: Option<&str>,
        forced: bool,
    ) -> Result<(), HierarchyError> {
        let Some(owner_namespace) = owner_namespace else {
            return Ok(());
        };
        if let Some(kind) = cluster_scoped_kind(object) {
            return Err(HierarchyError::ClusterScopedChild {
                object: self.object,
                kind: kind.to_owned(),
            });
        }
        let namespace = object
            .get("metadata")
            .and_then(Value::as_object)
            .and_then(|meta| present(meta, "namespace"));
        match namespace {
            Some(namespace) if !forced && namespace.as_str() != Some(owner_namespace) => {
                Err(HierarchyError::OwnerInAnotherNamespace {
                    object: self.object,
                    namespace: namespace.as_str().unwrap_or_default().to_owned(),
                    owner_namespace: owner_namespace.to_owned(),
                })
            }
            _ => Ok(()),
        }
    }
}
