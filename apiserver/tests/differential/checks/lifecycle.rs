//! Deletion held by finalizers (deletionTimestamp, what may still change) and namespaces.

use crate::fixtures::configmap;
use crate::run::{MERGE, Run, STRATEGIC};
use futures::future::BoxFuture;
use serde_json::json;

pub(crate) fn finalizers(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let list = r.configmaps("");
        let one = r.configmaps("held");
        let mut body = configmap("held", json!({}), json!({}));
        body["metadata"]["finalizers"] = json!(["example.com/hold", "example.com/also"]);
        r.post("create with finalizers", &list, &body).await;
        r.delete("delete", &one, None).await;
        r.get("get while held", &one).await;
        r.delete("delete again while held", &one, None).await;
        r.patch(
            "change data while held",
            &one,
            MERGE,
            &json!({"data": {"k": "v"}}),
        )
        .await;
        let more = json!({"metadata": {"finalizers": ["example.com/hold", "example.com/also", "example.com/new"]}});
        r.patch("add a finalizer while held", &one, MERGE, &more)
            .await;
        let unset = json!({"metadata": {"deletionTimestamp": null}});
        r.patch("unset deletionTimestamp", &one, MERGE, &unset)
            .await;
        let fewer =
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/hold"]}});
        r.patch("remove one finalizer", &one, STRATEGIC, &fewer)
            .await;
        let none = json!({"metadata": {"finalizers": null}});
        r.patch("remove the last finalizer", &one, MERGE, &none)
            .await;
        r.get("get after the last finalizer", &one).await;
    })
}

pub(crate) fn namespaces(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let name = format!("made-{}", r.token);
        let path = format!("/api/v1/namespaces/{name}");
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        r.post("create", "/api/v1/namespaces", &body).await;
        r.get("get", &path).await;
        r.post("create again", "/api/v1/namespaces", &body).await;
        let bad =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Not.A.Label"}});
        r.post("create with an invalid name", "/api/v1/namespaces", &bad)
            .await;
        r.get("get default", "/api/v1/namespaces/default").await;
        r.get("get kube-system", "/api/v1/namespaces/kube-system")
            .await;
        r.delete("delete default", "/api/v1/namespaces/default", None)
            .await;
        r.delete("delete", &path, None).await;
        // Without kube-controller-manager's namespace controller the real server keeps a
        // deleted namespace Terminating: what is compared is the answers until then.
        let inside = format!("{path}/configmaps");
        r.post(
            "create in a terminating namespace",
            &inside,
            &configmap("late", json!({}), json!({})),
        )
        .await;
    })
}
