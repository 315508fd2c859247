//! API errors and their Status bodies: 404 of objects, namespaces and resources; 409 of
//! names taken and stale writes; 422 of invalid objects; 400 of bodies that do not parse.

use crate::fixtures::{configmap, make_configmaps};
use crate::run::Run;
use futures::future::BoxFuture;
use serde_json::json;

pub(crate) fn not_found(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let missing = r.configmaps("missing");
        r.get("get a missing object", &missing).await;
        let body = configmap("missing", json!({}), json!({}));
        r.put("replace a missing object", &missing, &body).await;
        let nowhere = format!("/api/v1/namespaces/nowhere-{}/configmaps", r.token);
        r.post("create in a missing namespace", &nowhere, &body)
            .await;
        r.get("list in a missing namespace", &nowhere).await;
        r.get(
            "get an unknown resource",
            "/api/v1/namespaces/default/gizmos",
        )
        .await;
        r.get(
            "get an unknown group",
            "/apis/nowhere.example.com/v1/gizmos",
        )
        .await;
        r.get("get an unknown path", "/nowhere").await;
    })
}

pub(crate) fn conflict(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        make_configmaps(r, &[("taken", json!({}))]).await;
        let list = r.configmaps("");
        let body = configmap("taken", json!({}), json!({}));
        r.post("create a name taken", &list, &body).await;
        let mut stale = body.clone();
        stale["metadata"]["resourceVersion"] = json!("1");
        r.put(
            "replace at resourceVersion 1",
            &r.configmaps("taken"),
            &stale,
        )
        .await;
    })
}

pub(crate) fn invalid(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let list = r.configmaps("");
        let bad_name = configmap("Not_A_Name", json!({}), json!({}));
        r.post("create with an invalid name", &list, &bad_name)
            .await;
        let bad_label = configmap("labelled", json!({"bad key!": "v"}), json!({}));
        r.post("create with an invalid label", &list, &bad_label)
            .await;
        let bad_key = configmap("keyed", json!({}), json!({"no/slash": "v"}));
        r.post("create with an invalid data key", &list, &bad_key)
            .await;
        let other_ns = json!({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "elsewhere", "namespace": "default"}});
        r.post(
            "create with another namespace in the body",
            &list,
            &other_ns,
        )
        .await;
        make_configmaps(r, &[("renamed", json!({}))]).await;
        let renamed = configmap("other", json!({}), json!({}));
        r.put(
            "replace with another name in the body",
            &r.configmaps("renamed"),
            &renamed,
        )
        .await;
    })
}

pub(crate) fn bad_request(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let list = r.configmaps("");
        r.send_bytes(
            "create with a body that is not JSON",
            "POST",
            &list,
            "application/json",
            b"{not json",
        )
        .await;
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        r.post("create a Pod at the ConfigMaps' path", &list, &pod)
            .await;
        let wrong_version =
            json!({"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "v"}});
        r.post("create with an unknown apiVersion", &list, &wrong_version)
            .await;
        r.send_bytes(
            "create as text/plain",
            "POST",
            &list,
            "text/plain",
            b"hello",
        )
        .await;
        make_configmaps(r, &[("patched", json!({}))]).await;
        r.send_bytes(
            "patch with an unsupported content type",
            "PATCH",
            &r.configmaps("patched"),
            "application/json",
            b"{}",
        )
        .await;
    })
}
