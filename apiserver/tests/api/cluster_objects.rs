//! What a fresh cluster has besides namespaces: the `default/kubernetes` Service with its
//! Endpoints and EndpointSlice pointing at the server, kept so across restarts, and kube's
//! default ClusterRoles and bindings, with RBAC on or off.

use super::*;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use serde_json::json;

/// Checks the three objects point at `server`, and returns the Service's uid.
async fn assert_points_at(server: &ApiServer, client: &Client) -> String {
    let port = i32::from(server.addr().port());
    let svc = Api::<Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .expect("the kubernetes service");
    let labels = svc.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("component").map(String::as_str),
        Some("apiserver")
    );
    assert_eq!(
        labels.get("provider").map(String::as_str),
        Some("kubernetes")
    );
    let spec = serde_json::to_value(svc.spec.expect("a spec")).expect("JSON");
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["clusterIP"], "10.96.0.1");
    assert_eq!(
        spec["ports"],
        json!([{"name": "https", "protocol": "TCP", "port": 443, "targetPort": port}])
    );
    let ep = Api::<Endpoints>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .expect("the kubernetes endpoints");
    assert_eq!(
        serde_json::to_value(ep.subsets).expect("JSON"),
        json!([{"addresses": [{"ip": "127.0.0.1"}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}])
    );
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), "default")
        .list(&kube::api::ListParams::default().labels("kubernetes.io/service-name=kubernetes"))
        .await
        .expect("the endpoint slices");
    assert_eq!(slices.items.len(), 1);
    let slice = serde_json::to_value(&slices.items[0]).expect("JSON");
    assert_eq!(slice["metadata"]["name"], "kubernetes");
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(slice["endpoints"][0]["addresses"], json!(["127.0.0.1"]));
    assert_eq!(
        slice["ports"],
        json!([{"name": "https", "port": port, "protocol": "TCP"}])
    );
    svc.metadata.uid.expect("a uid")
}

#[tokio::test]
async fn a_fresh_cluster_has_the_kubernetes_service() {
    let (server, client) = start().await;
    assert_points_at(&server, &client).await;
    let list = get(&server, "/api/v1/namespaces/default/services")
        .await
        .json();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
}

/// kube-apiserver makes its default roles whatever authorizes requests; clients bind
/// them (kube-rs's tests bind `cluster-admin` on any cluster).
#[tokio::test]
async fn a_fresh_cluster_without_rbac_has_the_default_cluster_roles() {
    let (server, _client) = start().await;
    for path in [
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:discovery",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin",
    ] {
        let r = get(&server, path).await;
        assert_eq!(r.code, 200, "{path}: {}", r.body);
    }
    let admin = get(
        &server,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin",
    )
    .await
    .json();
    assert_eq!(
        admin["rules"][0],
        json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})
    );
}

#[tokio::test]
async fn a_restart_keeps_one_kubernetes_service_pointing_at_the_new_port() {
    let dir = std::env::temp_dir().join(format!("kapsel-apiserver-{}-svc", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let path = dir.join("state.json");
    let _ = std::fs::remove_file(&path);
    let (server, client) = start_with(Config::default().state_file(&path)).await;
    let uid = assert_points_at(&server, &client).await;
    let first_port = server.addr().port();
    server.shutdown().await.expect("a shutdown");
    // Another port: the objects follow it, and are the same objects.
    let (server, client) = start_with(Config::default().state_file(&path)).await;
    assert_ne!(server.addr().port(), first_port);
    assert_eq!(assert_points_at(&server, &client).await, uid);
    let list = get(&server, "/apis/discovery.k8s.io/v1/endpointslices")
        .await
        .json();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

/// One APIService per served group-version, as kube-aggregator registers them: the
/// built-ins' at start, a CRD group's with its CRD, gone with it.
#[tokio::test]
async fn apiservices_follow_the_served_group_versions() {
    let (server, client) = start().await;
    let apiservices = "/apis/apiregistration.k8s.io/v1/apiservices";
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    let list = get(&server, apiservices).await.json();
    for name in [
        "v1.",
        "v1.apps",
        "v1.apiregistration.k8s.io",
        "v1.coordination.k8s.io",
    ] {
        assert!(names(&list).contains(&name.to_string()), "{name}: {list}");
    }
    let core = get(&server, &format!("{apiservices}/v1.")).await.json();
    assert_eq!(core["spec"]["groupPriorityMinimum"], 18000);
    assert_eq!(
        core["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "onstart"
    );
    assert_eq!(core["status"]["conditions"][0]["type"], "Available");
    assert_eq!(core["status"]["conditions"][0]["reason"], "Local");

    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    create_kopf_crd(&server).await;
    let kopf = get(&server, &format!("{apiservices}/v1.kopf.dev")).await;
    assert_eq!(kopf.code, 200, "{}", kopf.body);
    let kopf = kopf.json();
    assert_eq!(kopf["spec"]["group"], "kopf.dev");
    assert_eq!(kopf["spec"]["groupPriorityMinimum"], 1000);
    assert_eq!(
        kopf["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "true"
    );
    let r = raw(
        &server,
        "DELETE",
        &format!("{crds}/kopfexamples.kopf.dev"),
        None,
        b"",
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        get(&server, &format!("{apiservices}/v1.kopf.dev"))
            .await
            .code,
        404
    );

    // kube-rs finds the group and lists it (its `group_discovery_oneshot` test).
    let group = kube::discovery::group(&client, "apiregistration.k8s.io")
        .await
        .expect("the group");
    let (ar, _) = group.recommended_kind("APIService").expect("APIService");
    let all = Api::<kube::core::DynamicObject>::all_with(client, &ar)
        .list(&Default::default())
        .await
        .expect("a list");
    assert_eq!(all.items.len(), names(&list).len());
}
