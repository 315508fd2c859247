//! ConfigMaps through their life: create, read, list, replace, delete; generated names, dry
//! runs, delete preconditions and the Table kubectl reads.

use crate::fixtures::{configmap, make_configmaps};
use crate::run::{Run, rv};
use futures::future::BoxFuture;
use serde_json::json;

pub(crate) fn crud(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let (list, one) = (r.configmaps(""), r.configmaps("one"));
        let body = configmap("one", json!({"app": "x"}), json!({"a": "1"}));
        let created = r.post("create", &list, &body).await;
        r.get("get", &one).await;
        r.get("list", &list).await;
        let mut changed = created.clone();
        changed["data"] = json!({"a": "2", "b": "3"});
        let replaced = r.put("replace", &one, &changed).await;
        r.note(
            "replace changes the resourceVersion",
            json!(rv(&created) != rv(&replaced)),
        );
        // The first object's resourceVersion is stale now.
        r.put("replace with a stale resourceVersion", &one, &changed)
            .await;
        let mut unversioned = changed.clone();
        unversioned["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("resourceVersion");
        unversioned["data"] = json!({"c": "4"});
        r.put("replace without a resourceVersion", &one, &unversioned)
            .await;
        r.delete("delete", &one, None).await;
        r.get("get after delete", &one).await;
        r.delete("delete again", &one, None).await;
        r.get("empty list", &list).await;
    })
}

pub(crate) fn generate_name(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let list = r.configmaps("");
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"generateName": "made-"}, "data": {"k": "v"}});
        let made = r.post("create with generateName", &list, &body).await;
        let name = made["metadata"]["name"].as_str().unwrap_or_default();
        r.note(
            "a generated name is the prefix and five characters",
            json!(name.len() == "made-".len() + 5),
        );
        let neither = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
        r.post("create with neither name nor generateName", &list, &neither)
            .await;
    })
}

pub(crate) fn dry_run(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let list = r.configmaps("");
        let body = configmap("dry", json!({}), json!({"k": "v"}));
        r.post("create dryRun=All", &format!("{list}?dryRun=All"), &body)
            .await;
        r.get("get after a dry run", &r.configmaps("dry")).await;
        r.post(
            "create dryRun=Bogus",
            &format!("{list}?dryRun=Bogus"),
            &body,
        )
        .await;
        make_configmaps(r, &[("kept", json!({}))]).await;
        let kept = r.configmaps("kept");
        r.delete("delete dryRun=All", &format!("{kept}?dryRun=All"), None)
            .await;
        r.get("get after a dry-run delete", &kept).await;
    })
}

pub(crate) fn preconditions(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        make_configmaps(r, &[("guarded", json!({}))]).await;
        let one = r.configmaps("guarded");
        let wrong_uid = json!({"kind": "DeleteOptions", "apiVersion": "v1",
                               "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}});
        r.delete("delete with another uid", &one, Some(&wrong_uid))
            .await;
        let wrong_rv = json!({"kind": "DeleteOptions", "apiVersion": "v1",
                              "preconditions": {"resourceVersion": "1"}});
        r.delete("delete with another resourceVersion", &one, Some(&wrong_rv))
            .await;
        let background = json!({"kind": "DeleteOptions", "apiVersion": "v1",
                                "propagationPolicy": "Background"});
        r.delete("delete with a propagation policy", &one, Some(&background))
            .await;
    })
}

pub(crate) fn table(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        make_configmaps(r, &[("tab", json!({"app": "x"}))]).await;
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
        let list = r.configmaps("");
        r.get_as("list as a Table", &list, table).await;
        r.get_as("get as a Table", &r.configmaps("tab"), table)
            .await;
        r.get_as(
            "list as a Table without objects",
            &format!("{list}?includeObject=None"),
            table,
        )
        .await;
        let metadata = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
        r.get_as("list as metadata", &list, metadata).await;
    })
}
