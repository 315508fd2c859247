//! Discovery documents, shaped as kube-apiserver v1.32 serves them.

mod aggregated;
mod served;

pub(crate) use aggregated::{
    MEDIA_TYPE as AGGREGATED, group_discovery_list as aggregated, response as aggregated_response,
};

use crate::registry::{Registry, ResourceType};
use serde_json::{Value, json};
use served::{Served, served};
use std::net::SocketAddr;

/// `/version`.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0",
        "gitCommit": "70d3cc986aa8221cd1dfb1121852688902d3bf53",
        "gitTreeState": "clean",
        "buildDate": "2024-12-11T17:59:15Z",
        "goVersion": "go1.23.3",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`: the core group's versions.
pub(crate) fn api_versions(addr: SocketAddr) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()}]
    })
}

fn gv(group: &str, version: &str) -> Value {
    json!({"groupVersion": format!("{group}/{version}"), "version": version})
}

/// One `APIGroup`; None when nothing is served in the group.
pub(crate) fn group(reg: &Registry, name: &str) -> Option<Value> {
    if name.is_empty() {
        return None;
    }
    let versions: Vec<Value> = reg.versions(name).iter().map(|v| gv(name, v)).collect();
    let preferred = versions.first()?.clone();
    Some(json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": versions,
        "preferredVersion": preferred,
    }))
}

/// `/apis`: every group with its versions; the preferred one is the highest by kube's version
/// priority (what kube does for CRD groups too).
pub(crate) fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .filter_map(|g| group(reg, g))
        .map(|mut g| {
            if let Some(m) = g.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            g
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/api/v1` or `/apis/{group}/{version}`; None when that group-version is not served.
pub(crate) fn resource_list(
    reg: &Registry,
    group: &str,
    version: &str,
    has_scale: &dyn Fn(&ResourceType) -> bool,
) -> Option<Value> {
    let mut resources: Vec<Value> = Vec::new();
    for Served {
        rt: t,
        subresources,
    } in served(reg, group, version, has_scale)
    {
        let mut r = json!({
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": t.verbs,
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        for sub in subresources {
            let mut s = json!({
                "name": format!("{}/{}", t.plural, sub.name),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": sub.kind.kind,
                "verbs": sub.verbs,
            });
            // Named only where the subresource answers with another group-version's kind.
            if (sub.kind.group.as_str(), sub.kind.version.as_str()) != (group, version) {
                s["group"] = json!(sub.kind.group);
                s["version"] = json!(sub.kind.version);
            }
            resources.push(s);
        }
    }
    if resources.is_empty() {
        return None;
    }
    resources.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// `/`: the paths the server answers, as kube lists them.
pub(crate) fn root_paths(reg: &Registry) -> Value {
    let mut paths = vec!["/api".to_string(), "/api/v1".into(), "/apis".into()];
    for g in reg.groups() {
        paths.push(format!("/apis/{g}"));
        for v in reg.versions(&g) {
            paths.push(format!("/apis/{g}/{v}"));
        }
    }
    paths.extend(
        [
            "/healthz",
            "/livez",
            "/openapi/v2",
            "/openapi/v3",
            "/readyz",
            "/version",
        ]
        .map(String::from),
    );
    json!({"paths": paths})
}
