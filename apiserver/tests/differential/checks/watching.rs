//! Watch event sequences: from a resourceVersion, with initial events and their bookmark,
//! from a resourceVersion too old, and through selectors.

use crate::fixtures::{configmap, make_configmaps};
use crate::run::{MERGE, Run, rv};
use futures::future::BoxFuture;
use serde_json::json;

pub(crate) fn from_resource_version(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let list = r.configmaps("");
        let one = r.configmaps("watched");
        let created = r
            .post(
                "create",
                &list,
                &configmap("watched", json!({}), json!({"n": "0"})),
            )
            .await;
        let from = rv(&created);
        r.patch("change", &one, MERGE, &json!({"data": {"n": "1"}}))
            .await;
        r.patch(
            "label",
            &one,
            MERGE,
            &json!({"metadata": {"labels": {"l": "1"}}}),
        )
        .await;
        r.delete("delete", &one, None).await;
        r.watch(
            "events after the create",
            &format!("{list}?watch=1&resourceVersion={from}"),
            3,
        )
        .await;
        r.watch(
            "from resourceVersion 0: none",
            &format!("{list}?watch=1&resourceVersion=0"),
            1,
        )
        .await;
    })
}

pub(crate) fn initial_events(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        make_configmaps(r, &[("a", json!({})), ("b", json!({}))]).await;
        let list = r.configmaps("");
        r.watch(
            "sendInitialEvents with a bookmark",
            &format!("{list}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
            3,
        )
        .await;
        r.watch(
            "sendInitialEvents without resourceVersionMatch",
            &format!("{list}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"),
            1,
        )
        .await;
        r.watch(
            "without a resourceVersion: the objects",
            &format!("{list}?watch=1"),
            2,
        )
        .await;
    })
}

pub(crate) fn too_old(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let list = r.configmaps("");
        r.watch(
            "from resourceVersion 1",
            &format!("{list}?watch=1&resourceVersion=1"),
            1,
        )
        .await;
        make_configmaps(r, &[("late", json!({}))]).await;
        r.watch(
            "from resourceVersion 1 with an object",
            &format!("{list}?watch=1&resourceVersion=1"),
            1,
        )
        .await;
        r.watch(
            "from a resourceVersion that is not one",
            &format!("{list}?watch=1&resourceVersion=abc"),
            1,
        )
        .await;
        r.get(
            "list at resourceVersion 1 Exact",
            &format!("{list}?resourceVersion=1&resourceVersionMatch=Exact"),
        )
        .await;
    })
}

pub(crate) fn selected(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        make_configmaps(r, &[("in", json!({"app": "x"})), ("out", json!({}))]).await;
        let list = r.configmaps("");
        let snapshot = r.get("list", &list).await;
        let from = snapshot["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // "out" comes into the selection, "in" leaves it.
        r.patch(
            "label out",
            &r.configmaps("out"),
            MERGE,
            &json!({"metadata": {"labels": {"app": "x"}}}),
        )
        .await;
        r.patch(
            "unlabel in",
            &r.configmaps("in"),
            MERGE,
            &json!({"metadata": {"labels": {"app": null}}}),
        )
        .await;
        r.watch(
            "app=x from the list",
            &format!("{list}?watch=1&labelSelector=app%3Dx&resourceVersion={from}"),
            2,
        )
        .await;
        r.watch(
            "metadata.name=in from the list",
            &format!("{list}?watch=1&fieldSelector=metadata.name%3Din&resourceVersion={from}"),
            1,
        )
        .await;
    })
}
