//! The table of served resource types: built-ins plus those CRDs define.

use serde_json::Value;

/// One served resource type (one group/version/plural), as discovery shows it.
///
/// Shared by discovery, routing, storage and the OpenAPI documents, so that
/// what the server announces is exactly what it serves.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResourceType {
    /// API group; empty for the core group.
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
    /// The URL segment, e.g. `pods`.
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) namespaced: bool,
    pub(crate) verbs: Vec<String>,
    /// Whether `<plural>/status` is served as a subresource.
    pub(crate) has_status: bool,
    /// Whether this version is the group's preferred (storage) version.
    pub(crate) preferred: bool,
    /// The OpenAPI v3 schema of the object (`openAPIV3Schema` for CRDs; a
    /// hand-written one for built-ins), if known.
    pub(crate) schema: Option<Value>,
    /// Whether it comes from a CustomResourceDefinition.
    pub(crate) custom: bool,
}

impl ResourceType {
    /// `apiVersion` as objects carry it: `v1` or `group/version`.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}
