//! A CRD and its custom objects: the CRD as stored, its objects' CRUD, schema validation
//! and pruning, the status and scale subresources, and metadata.generation.

use crate::fixtures::{make_widgets, wait_until_served, widget_crd, widget_group};
use crate::run::{MERGE, Run, rv};
use futures::future::BoxFuture;
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn widget(name: &str, group: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
           "metadata": {"name": name}, "spec": spec})
}

pub(crate) fn crd(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let group = widget_group(r, "crd");
        let name = format!("widgets.{group}");
        r.post("create", CRDS, &widget_crd(&group)).await;
        wait_until_served(r, &format!("/apis/{group}/v1/widgets")).await;
        r.get("get", &format!("{CRDS}/{name}")).await;
        r.get("the group", &format!("/apis/{group}")).await;
        r.get("the group version", &format!("/apis/{group}/v1"))
            .await;
        let mut bad = widget_crd(&group);
        bad["metadata"]["name"] = json!("wrong.name");
        r.post("create with a name that is not plural.group", CRDS, &bad)
            .await;
        let mut no_storage = widget_crd(&format!("nostorage.{}.kapsel.dev", r.token));
        no_storage["spec"]["versions"][0]["storage"] = json!(false);
        r.post("create without a storage version", CRDS, &no_storage)
            .await;
    })
}

pub(crate) fn objects(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let widgets = make_widgets(r, "objects").await;
        let group = widget_group(r, "objects");
        let one = format!("{widgets}/w1");
        let body = widget(
            "w1",
            &group,
            json!({"size": 3, "color": "red", "unknown": "pruned"}),
        );
        r.post("create (an unknown field pruned)", &widgets, &body)
            .await;
        r.get("get", &one).await;
        r.get("list", &widgets).await;
        r.get(
            "list across namespaces",
            &format!(
                "/apis/{group}/v1/widgets?fieldSelector=metadata.namespace={}",
                r.ns
            ),
        )
        .await;
        r.patch("merge the spec", &one, MERGE, &json!({"spec": {"size": 4}}))
            .await;
        r.patch(
            "merge the status through the object",
            &one,
            MERGE,
            &json!({"status": {"phase": "Ignored"}}),
        )
        .await;
        r.patch(
            "merge the status",
            &format!("{one}/status"),
            MERGE,
            &json!({"status": {"phase": "Ready"}}),
        )
        .await;
        r.get("get the status", &format!("{one}/status")).await;
        r.get("get the scale", &format!("{one}/scale")).await;
        r.patch(
            "merge the scale",
            &format!("{one}/scale"),
            MERGE,
            &json!({"spec": {"replicas": 2}}),
        )
        .await;
        r.patch(
            "strategic merge on a custom object",
            &one,
            crate::run::STRATEGIC,
            &json!({"spec": {"size": 5}}),
        )
        .await;
        r.delete("delete", &one, None).await;
        r.get("get after delete", &one).await;
    })
}

pub(crate) fn validation(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let widgets = make_widgets(r, "validation").await;
        let group = widget_group(r, "validation");
        let too_big = widget("big", &group, json!({"size": 11, "color": "green"}));
        r.post("create against the schema", &widgets, &too_big)
            .await;
        let wrong_type = widget("typed", &group, json!({"size": "three"}));
        r.post("create with a wrong type", &widgets, &wrong_type)
            .await;
        let unknown = widget("strict", &group, json!({"size": 1, "extra": true}));
        r.post(
            "fieldValidation=Strict with an unknown field",
            &format!("{widgets}?fieldValidation=Strict"),
            &unknown,
        )
        .await;
        let unknown2 = widget("warned", &group, json!({"size": 1, "extra": true}));
        r.post(
            "fieldValidation=Warn with an unknown field",
            &format!("{widgets}?fieldValidation=Warn"),
            &unknown2,
        )
        .await;
        let no_kind = json!({"apiVersion": format!("{group}/v1"), "metadata": {"name": "nokind"}});
        r.post("create without kind", &widgets, &no_kind).await;
    })
}

pub(crate) fn generation(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let widgets = make_widgets(r, "generation").await;
        let group = widget_group(r, "generation");
        let one = format!("{widgets}/g");
        let created = r
            .post("create", &widgets, &widget("g", &group, json!({"size": 1})))
            .await;
        let mut last = rv(&created);
        let changes: [(&str, String, Value); 4] = [
            ("the spec", one.clone(), json!({"spec": {"size": 2}})),
            (
                "a label",
                one.clone(),
                json!({"metadata": {"labels": {"l": "1"}}}),
            ),
            (
                "the status",
                format!("{one}/status"),
                json!({"status": {"phase": "P"}}),
            ),
            ("nothing", one.clone(), json!({"spec": {"size": 2}})),
        ];
        for (what, path, patch) in changes {
            let after = r
                .patch(&format!("patch {what}"), &path, MERGE, &patch)
                .await;
            r.note(
                &format!("patching {what} changes the resourceVersion"),
                json!(rv(&after) != last),
            );
            last = rv(&after);
        }
    })
}
