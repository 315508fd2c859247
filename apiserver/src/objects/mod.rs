//! Object writes and reads with kube-apiserver's rules: create (`create`), get, update
//! (`update`: PUT and the common tail of every patch), the checks of both (`validation`),
//! CertificateSigningRequests' conditions (`csr`),
//! and objects as a resource serves them (`presented`).

mod create;
pub(crate) mod csr;
mod presented;
mod update;
mod validation;

pub(crate) use create::{create, store_prepared};
pub(crate) use presented::{Presented, present};
pub(crate) use update::{commit_update, store_prepared_update};

use crate::registry::ResourceType;
use crate::status::{ApiError, Target};
use crate::store::{ObjKey, ResKey, Store, res_of};
use serde_json::Value;

/// Where a request points: the type and, for namespaced types, the namespace.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    pub(crate) rt: ResourceType,
    /// The namespace from the URL (None for cluster-scoped types or all-namespace lists).
    pub(crate) ns: Option<String>,
}

impl Scope {
    pub(crate) fn res(&self) -> ResKey {
        res_of(&self.rt)
    }

    pub(crate) fn key(&self, name: &str) -> ObjKey {
        (self.ns.clone().unwrap_or_default(), name.to_string())
    }

    pub(crate) fn target<'a>(&'a self, name: &'a str) -> Target<'a> {
        Target {
            group: &self.rt.group,
            plural: &self.rt.plural,
            name,
        }
    }
}

/// How a write records field ownership in `metadata.managedFields`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fields<'a> {
    /// An `Update` entry for this manager (create, PUT, every patch but apply).
    Update(&'a crate::managed::Who),
    /// The body carries the managedFields server-side apply computed for this applier.
    Applied(&'a crate::managed::Who),
    /// The server's own writes (controllers, built-in objects): entries stay as they are.
    Keep,
}

impl Fields<'_> {
    /// The subresource the write goes through (`status`, `approval`, …), if any.
    fn subresource(&self) -> Option<&'static str> {
        match self {
            Fields::Update(who) | Fields::Applied(who) => who.subresource,
            Fields::Keep => None,
        }
    }

    /// The user whose write this is, when RBAC is checked (server writes have none).
    fn user(&self) -> Option<&crate::auth::User> {
        match self {
            Fields::Update(who) | Fields::Applied(who) => who.user.as_deref(),
            Fields::Keep => None,
        }
    }
}

/// Whether the type is CertificateSigningRequests, whose writes kube's strategy shapes.
fn is_csr(rt: &ResourceType) -> bool {
    (rt.group.as_str(), rt.plural.as_str()) == ("certificates.k8s.io", "certificatesigningrequests")
}

/// The built-in types whose strategy keeps `metadata.generation` (kube's
/// `pkg/registry/*/strategy.go` that set it to 1 on create), by (group, plural). Custom
/// resources and CRDs keep it too; other types (ConfigMaps, Secrets, Namespaces, ...) have
/// none.
const GENERATION_KEPT: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "podtemplates"),
    ("", "replicationcontrollers"),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"),
    (
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicybindings",
    ),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("apps", "daemonsets"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("autoscaling", "horizontalpodautoscalers"),
    ("batch", "cronjobs"),
    ("batch", "jobs"),
    ("discovery.k8s.io", "endpointslices"),
    ("flowcontrol.apiserver.k8s.io", "flowschemas"),
    (
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
    ),
    ("networking.k8s.io", "ingressclasses"),
    ("networking.k8s.io", "ingresses"),
    ("networking.k8s.io", "networkpolicies"),
    ("policy", "poddisruptionbudgets"),
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "devicetaintrules"),
    ("resource.k8s.io", "resourceslices"),
    ("scheduling.k8s.io", "priorityclasses"),
];

/// Whether objects of the type have a `metadata.generation` the server keeps: 1 when
/// created, one more at each change of what is not metadata or status.
fn keeps_generation(rt: &ResourceType) -> bool {
    rt.custom || GENERATION_KEPT.contains(&(rt.group.as_str(), rt.plural.as_str()))
}

/// What kube does to every written object: built-in defaults, and for a custom resource
/// its structural schema's defaults and pruning.
pub(crate) fn apply_defaults(scope: &Scope, obj: &mut Value) {
    crate::defaults::apply(&scope.rt.group, &scope.rt.plural, obj);
    if let Some(schema) = scope.rt.schema.as_ref().filter(|_| scope.rt.custom) {
        crate::schema::default_and_prune(obj, schema);
    }
}

/// GET of one object.
pub(crate) fn get(store: &Store, scope: &Scope, name: &str) -> Result<Value, ApiError> {
    store
        .get(&scope.res(), &scope.key(name))
        .map(|o| present(&scope.rt, o))
        .ok_or_else(|| ApiError::not_found(scope.target(name)))
}
