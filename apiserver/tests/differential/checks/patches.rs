//! Merge patches, JSON patches and strategic merge patches, their results and their
//! refusals.

use crate::fixtures::make_configmaps;
use crate::run::{JSON_PATCH, MERGE, Run, STRATEGIC};
use futures::future::BoxFuture;
use serde_json::json;

pub(crate) fn merge(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        make_configmaps(r, &[("merged", json!({"keep": "1", "drop": "2"}))]).await;
        let one = r.configmaps("merged");
        let patch = json!({"metadata": {"labels": {"drop": null, "new": "3"}}, "data": {"x": "y"}});
        r.patch("merge labels and data", &one, MERGE, &patch).await;
        r.patch("merge a null data", &one, MERGE, &json!({"data": null}))
            .await;
        r.patch(
            "merge with a resourceVersion that is stale",
            &one,
            MERGE,
            &json!({"metadata": {"resourceVersion": "1"}, "data": {"z": "z"}}),
        )
        .await;
        r.patch(
            "merge a missing object",
            &r.configmaps("missing"),
            MERGE,
            &json!({}),
        )
        .await;
        r.patch("merge that is not an object", &one, MERGE, &json!([1]))
            .await;
        r.patch(
            "merge an invalid label",
            &one,
            MERGE,
            &json!({"metadata": {"labels": {"bad key!": "v"}}}),
        )
        .await;
    })
}

pub(crate) fn json_patch(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        make_configmaps(r, &[("jsonpatched", json!({"a": "1"}))]).await;
        let one = r.configmaps("jsonpatched");
        let ops = json!([
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "replace", "path": "/data/k", "value": "w"},
            {"op": "remove", "path": "/metadata/labels/a"},
        ]);
        r.patch("add, replace and remove", &one, JSON_PATCH, &ops)
            .await;
        let failing_test = json!([{"op": "test", "path": "/data/k", "value": "nope"}]);
        r.patch("a failing test", &one, JSON_PATCH, &failing_test)
            .await;
        let missing = json!([{"op": "remove", "path": "/data/nothing"}]);
        r.patch("remove a missing member", &one, JSON_PATCH, &missing)
            .await;
        r.patch(
            "not a list of operations",
            &one,
            JSON_PATCH,
            &json!({"op": "add"}),
        )
        .await;
        let unknown = json!([{"op": "frobnicate", "path": "/data"}]);
        r.patch("an unknown operation", &one, JSON_PATCH, &unknown)
            .await;
    })
}

pub(crate) fn strategic(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        make_configmaps(r, &[("strategic", json!({}))]).await;
        let one = r.configmaps("strategic");
        let finalizers = json!({"metadata": {"finalizers": ["a.example.com/one"]}});
        r.patch("add a finalizer", &one, STRATEGIC, &finalizers)
            .await;
        let more = json!({"metadata": {"finalizers": ["a.example.com/two"]}});
        r.patch("merge a second finalizer", &one, STRATEGIC, &more)
            .await;
        let delete =
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/one"]}});
        r.patch("delete one from the list", &one, STRATEGIC, &delete)
            .await;
        let replace = json!({"metadata": {"finalizers": [], "$setElementOrder/finalizers": []}, "data": {"k": null, "n": "m"}});
        r.patch("empty the list and drop a key", &one, STRATEGIC, &replace)
            .await;
        let directive = json!({"data": {"$patch": "replace", "only": "this"}});
        r.patch("replace a map", &one, STRATEGIC, &directive).await;
        let bad = json!({"data": {"$patch": "frobnicate"}});
        r.patch("an unknown directive", &one, STRATEGIC, &bad).await;
    })
}
