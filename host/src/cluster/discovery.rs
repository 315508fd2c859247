//! API discovery: the resources a cluster serves, read as kube-apiserver announces them (KOPF.md §2.4).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::Client;
use kube::api::ApiResource;

/// One resource a cluster serves, as discovery describes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Resource {
    /// API group; empty for the core group.
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) kind: String,
    pub(crate) singular: String,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) namespaced: bool,
    pub(crate) verbs: Vec<String>,
    /// Subresources served beside it (`status`, `scale`, ...).
    pub(crate) subresources: Vec<String>,
    /// Whether this is the preferred version of its group.
    pub(crate) preferred: bool,
}

impl Resource {
    /// `apiVersion` as objects carry it.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// A short unique name for logs: `plural.version.group` (kubectl-like).
    pub(crate) fn key(&self) -> String {
        if self.group.is_empty() {
            format!("{}.{}", self.plural, self.version)
        } else {
            format!("{}.{}.{}", self.plural, self.version, self.group)
        }
    }

    /// What kube-rs's dynamic API needs to address this resource.
    pub(crate) fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: self.api_version(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }

    pub(crate) fn has_verb(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// All of it, as the WIT's `resources.current` hands it to a guest.
    pub(crate) fn info(&self) -> crate::runtime::ResourceInfo {
        crate::runtime::ResourceInfo {
            group: self.group.clone(),
            version: self.version.clone(),
            plural: self.plural.clone(),
            kind: self.kind.clone(),
            singular: self.singular.clone(),
            shortcuts: self.short_names.clone(),
            categories: self.categories.clone(),
            subresources: self.subresources.clone(),
            namespaced: self.namespaced,
            preferred: self.preferred,
            verbs: self.verbs.clone(),
        }
    }
}

/// Errors of a discovery scan.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("listing the API groups failed")]
    Groups(#[source] kube::Error),
    #[error("listing the core API versions failed")]
    CoreVersions(#[source] kube::Error),
}

/// Every resource of every group the cluster serves, all versions.
///
/// A group version that fails to answer (404 when a CRD vanished meanwhile,
/// 503 for an unavailable aggregated API) yields nothing and a warning, as in
/// Kopf: one broken group must not stop the operator.
pub(crate) async fn scan(client: &Client) -> Result<Vec<Resource>, Error> {
    let mut found = Vec::new();
    let core = client
        .list_core_api_versions()
        .await
        .map_err(Error::CoreVersions)?;
    for (i, version) in core.versions.iter().enumerate() {
        match client.list_core_api_resources(version).await {
            Ok(list) => found.extend(parse_resource_list("", version, i == 0, &list)),
            Err(err) => tracing::warn!("Discovery of core {version} failed: {err}"),
        }
    }
    let groups = client.list_api_groups().await.map_err(Error::Groups)?;
    for group in &groups.groups {
        let preferred = group.preferred_version.as_ref().map(|v| v.version.clone());
        for gv in &group.versions {
            found.extend(
                scan_group_version(client, &group.name, &gv.version, preferred.as_deref()).await,
            );
        }
    }
    Ok(found)
}

/// The resources of one group (all its versions); used when a CRD of that
/// group appears or changes, so the rest of the cluster is not rescanned.
pub(crate) async fn scan_group(client: &Client, group: &str) -> Vec<Resource> {
    let groups = match client.list_api_groups().await {
        Ok(groups) => groups,
        Err(err) => {
            tracing::warn!("Discovery of API groups failed: {err}");
            return Vec::new();
        }
    };
    let mut found = Vec::new();
    for g in groups.groups.iter().filter(|g| g.name == group) {
        let preferred = g.preferred_version.as_ref().map(|v| v.version.clone());
        for gv in &g.versions {
            found.extend(
                scan_group_version(client, &g.name, &gv.version, preferred.as_deref()).await,
            );
        }
    }
    found
}

async fn scan_group_version(
    client: &Client,
    group: &str,
    version: &str,
    preferred: Option<&str>,
) -> Vec<Resource> {
    let api_version = format!("{group}/{version}");
    match client.list_api_group_resources(&api_version).await {
        Ok(list) => parse_resource_list(group, version, preferred == Some(version), &list),
        Err(err) => {
            tracing::warn!("Discovery of {api_version} failed: {err}");
            Vec::new()
        }
    }
}

/// Turns an APIResourceList into resources, folding `plural/sub` entries into
/// their parent's subresources.
pub(crate) fn parse_resource_list(
    group: &str,
    version: &str,
    preferred: bool,
    list: &APIResourceList,
) -> Vec<Resource> {
    let mut subresources: Vec<(String, String)> = Vec::new();
    let mut resources = Vec::new();
    for r in &list.resources {
        if let Some((parent, sub)) = r.name.split_once('/') {
            subresources.push((parent.to_owned(), sub.to_owned()));
            continue;
        }
        let singular = if r.singular_name.is_empty() {
            r.kind.to_lowercase()
        } else {
            r.singular_name.clone()
        };
        resources.push(Resource {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: r.name.clone(),
            kind: r.kind.clone(),
            singular,
            short_names: r.short_names.clone().unwrap_or_default(),
            categories: r.categories.clone().unwrap_or_default(),
            namespaced: r.namespaced,
            verbs: r.verbs.clone(),
            subresources: Vec::new(),
            preferred,
        });
    }
    for resource in &mut resources {
        let subs: BTreeSet<String> = subresources
            .iter()
            .filter(|(parent, _)| *parent == resource.plural)
            .map(|(_, sub)| sub.clone())
            .collect();
        resource.subresources = subs.into_iter().collect();
    }
    resources
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subresources_fold_into_their_parent() {
        let list: APIResourceList = serde_json::from_value(json!({
            "groupVersion": "kopf.dev/v1",
            "resources": [
                {"name": "kopfexamples", "singularName": "kopfexample", "namespaced": true,
                 "kind": "KopfExample", "verbs": ["get", "list", "watch", "patch"],
                 "shortNames": ["kopfexes", "kex"], "categories": ["all"]},
                {"name": "kopfexamples/status", "singularName": "", "namespaced": true,
                 "kind": "KopfExample", "verbs": ["get", "patch"]},
                {"name": "things", "singularName": "", "namespaced": false, "kind": "Thing", "verbs": []}
            ]
        }))
        .unwrap();
        let found = parse_resource_list("kopf.dev", "v1", true, &list);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].subresources, vec!["status"]);
        assert_eq!(found[0].short_names, vec!["kopfexes", "kex"]);
        assert!(found[0].has_verb("watch"));
        assert_eq!(
            found[1].singular, "thing",
            "singular falls back to the lowercased kind"
        );
        assert_eq!(found[0].key(), "kopfexamples.v1.kopf.dev");
    }
}
