//! Label and field selectors, pagination, all-namespace lists.

use super::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use serde_json::json;

#[tokio::test]
async fn selectors_and_pages() {
    let (server, client) = start().await;
    post(
        &server,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "other"}}),
    )
    .await;
    let items = [
        ("default", "a", json!({"env": "prod", "tier": "web"})),
        ("default", "b", json!({"env": "dev"})),
        ("default", "c", json!({})),
        ("other", "d", json!({"env": "prod"})),
    ];
    for (ns, name, labels) in &items {
        let r = post(
            &server,
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            json!({"metadata": {"name": name, "labels": labels}}),
        )
        .await;
        assert_eq!(r.code, 201);
    }
    let all: Api<ConfigMap> = Api::all(client.clone());
    let names = |sel: &'static str, field: bool| {
        let all = all.clone();
        async move {
            let lp = if field {
                ListParams::default().fields(sel)
            } else {
                ListParams::default().labels(sel)
            };
            let mut n: Vec<String> = all
                .list(&lp)
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|c| c.metadata.name.unwrap())
                .collect();
            n.sort();
            n.join(",")
        }
    };
    assert_eq!(names("env=prod", false).await, "a,d");
    assert_eq!(names("env==prod", false).await, "a,d");
    assert_eq!(names("env!=prod", false).await, "b,c");
    assert_eq!(names("env in (dev,prod)", false).await, "a,b,d");
    assert_eq!(names("env notin (prod)", false).await, "b,c");
    assert_eq!(names("tier", false).await, "a");
    assert_eq!(names("!env", false).await, "c");
    assert_eq!(names("env=prod,tier=web", false).await, "a");
    assert_eq!(names("metadata.name=b", true).await, "b");
    assert_eq!(names("metadata.name==b", true).await, "b");
    assert_eq!(names("metadata.namespace!=default", true).await, "d");
    assert_eq!(
        names("metadata.namespace=default,metadata.name!=a", true).await,
        "b,c"
    );
    let ns: Api<ConfigMap> = Api::namespaced(client, "default");
    assert_eq!(
        ns.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
    // limit + continue over the namespace.
    let first = ns.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().unwrap();
    assert_eq!(first.metadata.remaining_item_count, Some(1));
    let second = ns
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(second.items.len(), 1);
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    assert!(
        second
            .metadata
            .continue_
            .as_deref()
            .unwrap_or("")
            .is_empty()
    );
    // Raw: the list's own resourceVersion is the cluster's current one.
    let l = get(&server, "/api/v1/configmaps?labelSelector=env%3Dprod")
        .await
        .json();
    assert_eq!(l["items"].as_array().unwrap().len(), 2);
    assert!(
        l["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    // Pods support more fields.
    post(
        &server,
        "/api/v1/namespaces/default/pods",
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .await;
    // (The simulated kubelet moves it from Pending to Running meanwhile.)
    let l = get(
        &server,
        "/api/v1/pods?fieldSelector=status.phase%21%3DFailed",
    )
    .await
    .json();
    assert_eq!(l["items"].as_array().unwrap().len(), 1);
    let l = get(&server, "/api/v1/pods?fieldSelector=status.phase%3DFailed")
        .await
        .json();
    assert_eq!(l["items"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn resource_version_zero_lists_whole_and_a_match_needs_a_version() {
    let (server, _client) = start().await;
    let p = "/api/v1/namespaces/default/configmaps";
    for name in ["a", "b", "c"] {
        assert_eq!(
            post(&server, p, json!({"metadata": {"name": name}}))
                .await
                .code,
            201
        );
    }
    // As kube-apiserver serves it from its watch cache: every item, no continue.
    let whole = get(&server, &format!("{p}?limit=1&resourceVersion=0"))
        .await
        .json();
    assert_eq!(whole["items"].as_array().map(Vec::len), Some(3), "{whole}");
    assert!(whole["metadata"].get("continue").is_none(), "{whole}");
    // A paged list at no particular version still pages.
    let page = get(&server, &format!("{p}?limit=1")).await.json();
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1), "{page}");
    // kube's ListOptions validation.
    let r = get(&server, &format!("{p}?resourceVersionMatch=Exact")).await;
    assert_status(&r, 422, "Invalid");
    let message = "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided";
    assert_eq!(
        r.json()["message"],
        format!("ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: {message}")
    );
    assert_eq!(
        r.json()["details"],
        json!({"group": "meta.k8s.io", "kind": "ListOptions", "causes": [
            {"reason": "FieldValueForbidden", "message": message, "field": "resourceVersionMatch"}]})
    );
    server.shutdown().await.unwrap();
}
