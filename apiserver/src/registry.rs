//! The table of served resource types: built-ins plus those CRDs define.

use std::sync::{Arc, OnceLock};

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
    /// The kind's published schema, built at its first use.
    pub(crate) kind_schema: KindSchemaCache,
}

/// A resource type's kind schema and its component name (`openapi::kind_schema`), built
/// once and shared by every copy of the type: every write checks its object against it
/// (unknown fields, managed fields), and building it anew from a CRD's schema at each
/// write was a twentieth of the server's cost of a write (`make bench`).
///
/// Derived from the type's other fields, so it takes no part in comparing types.
#[derive(Clone, Default)]
pub(crate) struct KindSchemaCache(Arc<OnceLock<(String, Value)>>);

impl KindSchemaCache {
    /// The cached schema, built by `build` the first time.
    pub(crate) fn get_or_init(&self, build: impl FnOnce() -> (String, Value)) -> &(String, Value) {
        self.0.get_or_init(build)
    }
}

impl PartialEq for KindSchemaCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for KindSchemaCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "KindSchemaCache(built)"
        } else {
            "KindSchemaCache(empty)"
        })
    }
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

/// The verbs of an ordinary resource, in kube's order.
pub(crate) const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Every served resource type; rebuilt whenever a CRD changes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Registry {
    types: Vec<ResourceType>,
}

impl Registry {
    pub(crate) fn new(types: Vec<ResourceType>) -> Self {
        Registry { types }
    }

    pub(crate) fn all(&self) -> &[ResourceType] {
        &self.types
    }

    /// The type served at `group/version/plural`.
    pub(crate) fn find(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
    }

    /// The preferred version's type of a stored resource (group + plural).
    pub(crate) fn preferred(&self, group: &str, plural: &str) -> Option<&ResourceType> {
        let mut candidates = self
            .types
            .iter()
            .filter(|t| t.group == group && t.plural == plural);
        let first = candidates.next()?;
        Some(
            std::iter::once(first)
                .chain(candidates)
                .find(|t| t.preferred)
                .unwrap_or(first),
        )
    }

    /// Group names in discovery order: core-ish built-in groups first, then the rest as added.
    pub(crate) fn groups(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in &self.types {
            if !t.group.is_empty() && !out.contains(&t.group) {
                out.push(t.group.clone());
            }
        }
        out
    }

    /// The served versions of a group, highest priority first (kube-aware order).
    pub(crate) fn versions(&self, group: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in self.types.iter().filter(|t| t.group == group) {
            if !out.contains(&t.version) {
                out.push(t.version.clone());
            }
        }
        out.sort_by(|a, b| {
            version_priority(b)
                .cmp(&version_priority(a))
                .then_with(|| a.cmp(b))
        });
        out
    }
}

/// Kube's version priority: GA > beta > alpha, higher major then higher minor first;
/// versions that do not look like `vN[alpha|betaM]` sort last (alphabetically, by the caller).
pub(crate) fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    for (pre, level) in [("beta", 2), ("alpha", 1)] {
        if let Some(n) = tail.strip_prefix(pre)
            && let Ok(minor) = n.parse::<u64>()
        {
            return (level, major, minor);
        }
    }
    (0, 0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_aware_version_order() {
        let mut v = vec!["v1beta1", "foo", "v2", "v1", "v1alpha1", "v1beta2", "v10"];
        v.sort_by(|a, b| {
            version_priority(b)
                .cmp(&version_priority(a))
                .then_with(|| a.cmp(b))
        });
        assert_eq!(
            v,
            ["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }
}
