//! Aggregated discovery (`apidiscovery.k8s.io/v2`): asked for by media type, agreeing with
//! the legacy documents, tagged for caching, and naming only subresources that are served.

use std::collections::BTreeSet;

use super::*;
use kube::discovery::Discovery;
use serde_json::json;

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// What kubectl and client-go send: aggregated first, legacy JSON as the fallback.
const KUBECTL: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

async fn get_as(server: &ApiServer, path: &str, headers: &[(&str, &str)]) -> Raw {
    raw_with(server, "GET", path, None, headers, b"").await
}

/// Every (group, version, kind, plural, subresources) a discovery knows.
fn known(d: &Discovery) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for g in d.groups() {
        for v in g.versions() {
            for (ar, caps) in g.versioned_resources(v) {
                let mut subs: Vec<String> = caps
                    .subresources
                    .iter()
                    .map(|(s, c)| format!("{}:{}", s.plural, c.operations.join("+")))
                    .collect();
                subs.sort();
                out.insert(format!(
                    "{}/{} {} {} {:?} [{}] {}",
                    ar.group,
                    ar.version,
                    ar.kind,
                    ar.plural,
                    caps.scope,
                    caps.operations.join("+"),
                    subs.join(",")
                ));
            }
        }
    }
    out
}

#[tokio::test]
async fn aggregated_discovery_agrees_with_the_legacy_documents() {
    let (server, client) = start().await;
    create_kopf_crd(&server).await;

    let apis = client.list_api_groups_aggregated().await.unwrap();
    let group = |name: &str| {
        apis.items
            .iter()
            .find(|g| g.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some(name))
            .unwrap_or_else(|| panic!("group {name}"))
    };
    let apps_v1 = &group("apps").versions[0];
    assert_eq!(apps_v1.version.as_deref(), Some("v1"));
    assert_eq!(apps_v1.freshness.as_deref(), Some("Current"));
    let deployments = apps_v1
        .resources
        .iter()
        .find(|r| r.resource.as_deref() == Some("deployments"))
        .unwrap();
    let subs: Vec<_> = deployments
        .subresources
        .iter()
        .map(|s| s.subresource.as_deref().unwrap())
        .collect();
    assert_eq!(subs, ["scale", "status"]);
    // A response kind in the resource's own group-version names neither (as kube's).
    let own = deployments.response_kind.as_ref().unwrap();
    assert_eq!(
        (
            own.group.as_deref(),
            own.version.as_deref(),
            own.kind.as_deref()
        ),
        (Some(""), Some(""), Some("Deployment"))
    );
    let scale = &deployments.subresources[0].response_kind.as_ref().unwrap();
    assert_eq!(
        (
            scale.group.as_deref().unwrap_or(""),
            scale.kind.as_deref().unwrap_or("")
        ),
        ("autoscaling", "Scale")
    );
    let kopf = &group("kopf.dev").versions[0].resources[0];
    assert_eq!(kopf.resource.as_deref(), Some("kopfexamples"));
    assert_eq!(kopf.scope.as_deref(), Some("Namespaced"));
    assert_eq!(kopf.singular_resource.as_deref(), Some("kopfexample"));

    let core = client.list_core_api_versions_aggregated().await.unwrap();
    assert_eq!(core.items.len(), 1);
    assert!(
        core.items[0]
            .metadata
            .as_ref()
            .and_then(|m| m.name.as_deref())
            .is_none()
    );
    let pods = core.items[0].versions[0]
        .resources
        .iter()
        .find(|r| r.resource.as_deref() == Some("pods"))
        .unwrap();
    assert_eq!(pods.short_names, ["po"]);
    assert_eq!(pods.categories, ["all"]);
    let eviction = pods
        .subresources
        .iter()
        .find(|s| s.subresource.as_deref() == Some("eviction"))
        .expect("pods/eviction");
    let kind = eviction.response_kind.as_ref().unwrap();
    assert_eq!(
        (
            kind.group.as_deref().unwrap_or(""),
            kind.version.as_deref().unwrap_or(""),
            kind.kind.as_deref().unwrap_or("")
        ),
        ("policy", "v1", "Eviction")
    );
    assert_eq!(eviction.verbs, ["create"]);

    // kube-rs's two walks find the same resources, subresources and verbs.
    let legacy = Discovery::new(client.clone()).run().await.unwrap();
    let aggregated = Discovery::new(client).run_aggregated().await.unwrap();
    assert_eq!(known(&aggregated), known(&legacy));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn only_a_client_naming_it_gets_the_aggregated_form_and_it_is_tagged() {
    let (server, _client) = start().await;
    for plain in [None, Some("application/json"), Some("*/*")] {
        let headers: Vec<(&str, &str)> = plain.map(|a| ("Accept", a)).into_iter().collect();
        let r = get_as(&server, "/apis", &headers).await;
        assert_eq!(r.json()["kind"], "APIGroupList", "Accept {plain:?}");
        assert_eq!(
            get_as(&server, "/api", &headers).await.json()["kind"],
            "APIVersions"
        );
    }
    let r = get_as(&server, "/apis", &[("Accept", KUBECTL)]).await;
    assert_eq!(r.code, 200);
    assert_eq!(r.header("content-type"), Some(AGGREGATED));
    assert_eq!(r.header("vary"), Some("Accept"));
    let doc = r.json();
    assert_eq!(doc["kind"], "APIGroupDiscoveryList");
    assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2");
    let etag = r.header("etag").expect("an ETag").to_string();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");

    // The client's copy is current: 304, no body.
    let again = get_as(
        &server,
        "/apis",
        &[("Accept", AGGREGATED), ("If-None-Match", &etag)],
    )
    .await;
    assert_eq!(again.code, 304);
    assert!(again.body.is_empty());
    // A new group changes the document and its tag.
    create_kopf_crd(&server).await;
    let changed = get_as(
        &server,
        "/apis",
        &[("Accept", AGGREGATED), ("If-None-Match", &etag)],
    )
    .await;
    assert_eq!(changed.code, 200);
    assert_ne!(changed.header("etag"), Some(etag.as_str()));
    assert!(
        changed.json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["metadata"]["name"] == "kopf.dev")
    );
    // The core group is under /api only.
    let core = get_as(&server, "/api", &[("Accept", AGGREGATED)])
        .await
        .json();
    assert_eq!(core["items"][0]["metadata"], json!({}));
    assert_eq!(core["items"][0]["versions"][0]["version"], "v1");
    assert!(
        doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["metadata"]["name"] != "")
    );
    server.shutdown().await.unwrap();
}

/// Each subresource discovery names is answered: a request for it on an absent object is
/// told the object is missing, never that the path is unknown.
#[tokio::test]
async fn every_subresource_discovery_names_is_served() {
    let (server, _client) = start().await;
    let mut checked = 0;
    for (path, doc) in [
        (
            "/api",
            get_as(&server, "/api", &[("Accept", AGGREGATED)])
                .await
                .json(),
        ),
        (
            "/apis",
            get_as(&server, "/apis", &[("Accept", AGGREGATED)])
                .await
                .json(),
        ),
    ] {
        for group in doc["items"].as_array().unwrap() {
            let name = group["metadata"]["name"].as_str().unwrap_or("");
            for version in group["versions"].as_array().unwrap() {
                let v = version["version"].as_str().unwrap();
                let base = if name.is_empty() {
                    format!("/api/{v}")
                } else {
                    format!("/apis/{name}/{v}")
                };
                for res in version["resources"].as_array().unwrap() {
                    let plural = res["resource"].as_str().unwrap();
                    let ns = if res["scope"] == "Namespaced" {
                        "/namespaces/default"
                    } else {
                        ""
                    };
                    for sub in res["subresources"].as_array().into_iter().flatten() {
                        let sub_name = sub["subresource"].as_str().unwrap();
                        let verbs = sub["verbs"].as_array().unwrap();
                        let method = if verbs.contains(&json!("get")) {
                            "GET"
                        } else {
                            "POST"
                        };
                        let url = format!("{base}{ns}/{plural}/absent/{sub_name}");
                        let r = raw(&server, method, &url, Some("application/json"), b"{}").await;
                        assert!(
                            !r.body.contains("could not find the requested resource"),
                            "{path}: {method} {url} is not served: {} {}",
                            r.code,
                            r.body
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    // status, scale, approval, the pods' seven and the ServiceAccounts' token at least.
    assert!(checked >= 20, "only {checked} subresources listed");
    server.shutdown().await.unwrap();
}
