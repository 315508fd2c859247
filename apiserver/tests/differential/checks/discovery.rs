//! Discovery documents: /api, /apis, the resources of core v1 and apps/v1 the dev cluster
//! serves, and the aggregated documents (apidiscovery.k8s.io/v2) — compared for the
//! groups and resources both servers have, with the sets of names noted apart.

use crate::run::Run;
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// The resources whose discovery entries are compared one by one.
const CORE: &[&str] = &[
    "configmaps",
    "namespaces",
    "pods",
    "pods/status",
    "pods/log",
    "services",
    "secrets",
    "serviceaccounts",
    "serviceaccounts/token",
    "events",
    "nodes",
    "persistentvolumeclaims",
];
const APPS: &[&str] = &[
    "deployments",
    "deployments/scale",
    "replicasets",
    "statefulsets",
    "daemonsets",
];

/// Records the entries of `names` in a resource list one by one, and the list's names.
fn entries(r: &mut Run, what: &str, list: &Value, names: &[&str]) {
    let resources = list["resources"].as_array().cloned().unwrap_or_default();
    for name in names {
        let entry = resources.iter().find(|e| e["name"] == *name).cloned();
        r.note(&format!("{what} {name}"), entry.unwrap_or(Value::Null));
    }
    let mut all: Vec<String> = resources
        .iter()
        .filter_map(|e| e["name"].as_str().map(str::to_string))
        .collect();
    all.sort();
    r.note(&format!("{what} resource names"), json!(all));
}

pub(crate) fn documents(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        r.get("/api", "/api").await;
        let groups = r
            .quietly(&crate::run::request("GET", "/apis", None, None))
            .await;
        let groups = groups.body["groups"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut names: Vec<String> = groups
            .iter()
            .filter_map(|g| g["name"].as_str().map(str::to_string))
            .filter(|n| !n.ends_with(".kapsel.dev"))
            .collect();
        names.sort();
        r.note("group names", json!(names));
        for group in [
            "apps",
            "apiextensions.k8s.io",
            "rbac.authorization.k8s.io",
            "coordination.k8s.io",
        ] {
            let entry = groups.iter().find(|g| g["name"] == group).cloned();
            r.note(&format!("group {group}"), entry.unwrap_or(Value::Null));
        }
        let core = r
            .quietly(&crate::run::request("GET", "/api/v1", None, None))
            .await;
        entries(r, "v1", &core.body, CORE);
        let apps = r
            .quietly(&crate::run::request("GET", "/apis/apps/v1", None, None))
            .await;
        entries(r, "apps/v1", &apps.body, APPS);
        let version = r
            .quietly(&crate::run::request("GET", "/version", None, None))
            .await;
        let keys: Vec<&String> = version
            .body
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        r.note("/version keys", json!(keys));
    })
}

pub(crate) fn aggregated(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let mut request = crate::run::request("GET", "/api", None, None);
        request.accept = Some(accept);
        let core = r.quietly(&request).await;
        r.note("/api content type", json!(core.content_type));
        r.note("/api kind", core.body["kind"].clone());
        let v1 = &core.body["items"][0]["versions"][0];
        let resources = v1["resources"].as_array().cloned().unwrap_or_default();
        for name in ["configmaps", "pods", "namespaces"] {
            let entry = resources.iter().find(|e| e["resource"] == name).cloned();
            r.note(&format!("v1 {name}"), entry.unwrap_or(Value::Null));
        }
        request.path = "/apis";
        let apis = r.quietly(&request).await;
        let items = apis.body["items"].as_array().cloned().unwrap_or_default();
        let apps = items
            .iter()
            .find(|g| g["metadata"]["name"] == "apps")
            .cloned();
        let deployments = apps
            .as_ref()
            .and_then(|g| g["versions"][0]["resources"].as_array())
            .and_then(|rs| rs.iter().find(|e| e["resource"] == "deployments").cloned());
        r.note("apps/v1 deployments", deployments.unwrap_or(Value::Null));
    })
}
