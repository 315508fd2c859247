//! `componentstatuses` (core v1, deprecated): the control plane's parts, all healthy,
//! answered as kube-apiserver answers them.

use super::*;
use k8s_openapi::api::core::v1::ComponentStatus;
use kube::Api;
use serde_json::json;

#[tokio::test]
async fn the_control_planes_parts_are_healthy() {
    let (server, client) = start().await;
    let api = Api::<ComponentStatus>::all(client);
    let list = api.list(&Default::default()).await.expect("a list");
    let mut names: Vec<String> = list
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, ["controller-manager", "etcd-0", "scheduler"]);
    let etcd = serde_json::to_value(api.get("etcd-0").await.expect("etcd-0")).expect("JSON");
    assert_eq!(
        etcd["conditions"],
        json!([{"type": "Healthy", "status": "True", "message": "ok"}])
    );
    let missing = get(&server, "/api/v1/componentstatuses/nope").await;
    assert_eq!(missing.code, 404);
    assert_eq!(
        missing.json()["message"],
        "componentstatus \"nope\" not found"
    );
    let listed = get(&server, "/api/v1/componentstatuses").await;
    assert_eq!(listed.json()["kind"], "ComponentStatusList");
    assert_eq!(
        listed.header("warning"),
        Some("299 - \"v1 ComponentStatus is deprecated in v1.19+\"")
    );
    let deleted = raw(
        &server,
        "DELETE",
        "/api/v1/componentstatuses/etcd-0",
        None,
        b"",
    )
    .await;
    assert_eq!(deleted.code, 405);
}

#[tokio::test]
async fn kubectl_get_cs_has_kubes_columns_and_discovery_lists_it() {
    let (server, _client) = start().await;
    let accept = [("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")];
    let table = raw_with(
        &server,
        "GET",
        "/api/v1/componentstatuses/scheduler",
        None,
        &accept,
        b"",
    )
    .await
    .json();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(columns, ["Name", "Status", "Message", "Error"]);
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["scheduler", "Healthy", "ok", ""])
    );
    let core = get(&server, "/api/v1").await.json();
    let cs = core["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "componentstatuses")
        .expect("componentstatuses in discovery")
        .clone();
    assert_eq!(cs["verbs"], json!(["get", "list"]));
    assert_eq!(cs["shortNames"], json!(["cs"]));
    assert_eq!(cs["namespaced"], false);
}
