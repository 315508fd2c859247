//! Label and field selectors on lists, and paging a list with limit and continue.

use crate::fixtures::make_configmaps;
use crate::run::Run;
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// The names of a list's items.
fn names(list: &Value) -> Value {
    let items = list["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    items
        .iter()
        .map(|i| i["metadata"]["name"].clone())
        .collect()
}

pub(crate) fn labels(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        make_configmaps(
            r,
            &[
                ("red", json!({"color": "red", "size": "1"})),
                ("blue", json!({"color": "blue", "size": "2"})),
                ("plain", json!({})),
            ],
        )
        .await;
        let list = r.configmaps("");
        for selector in [
            "color=red",
            "color%3D%3Dred",
            "color!=red",
            "color%20in%20(red,blue)",
            "color%20notin%20(red)",
            "color",
            "!color",
            "color=red,size=1",
            "size%3E1",
            "color=",
        ] {
            let listed = r
                .get(
                    &format!("labelSelector={selector}"),
                    &format!("{list}?labelSelector={selector}"),
                )
                .await;
            let fact = names(&listed);
            r.note(&format!("names of labelSelector={selector}"), fact);
        }
        for bad in ["color%3D%3D%3Dred", "(", "bad%20key!=x", "color%20in%20red"] {
            r.get(
                &format!("invalid labelSelector={bad}"),
                &format!("{list}?labelSelector={bad}"),
            )
            .await;
        }
    })
}

pub(crate) fn fields(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        make_configmaps(r, &[("first", json!({})), ("second", json!({}))]).await;
        let list = r.configmaps("");
        for selector in [
            "metadata.name=first",
            "metadata.name!=first",
            format!("metadata.namespace={}", r.ns).as_str(),
            "metadata.name=first,metadata.name=second",
        ] {
            let listed = r
                .get(
                    &format!("fieldSelector={selector}"),
                    &format!("{list}?fieldSelector={selector}"),
                )
                .await;
            r.note(
                &format!("names of fieldSelector={selector}"),
                names(&listed),
            );
        }
        r.get(
            "an unsupported field",
            &format!("{list}?fieldSelector=data.k=v"),
        )
        .await;
        r.get(
            "a malformed field selector",
            &format!("{list}?fieldSelector=metadata.name"),
        )
        .await;
        let all = format!(
            "/api/v1/configmaps?fieldSelector=metadata.namespace={}",
            r.ns
        );
        let listed = r.get("across namespaces by namespace", &all).await;
        r.note("names across namespaces", names(&listed));
    })
}

pub(crate) fn paging(r: &mut Run) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let named: Vec<(String, Value)> =
            (1..=5).map(|i| (format!("page-{i}"), json!({}))).collect();
        let named: Vec<(&str, Value)> =
            named.iter().map(|(n, l)| (n.as_str(), l.clone())).collect();
        make_configmaps(r, &named).await;
        let list = r.configmaps("");
        let first = r.get("limit=2", &format!("{list}?limit=2")).await;
        r.note("first page", names(&first));
        let token = first["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let second = r
            .get("the next page", &format!("{list}?limit=2&continue={token}"))
            .await;
        r.note("second page", names(&second));
        let token = second["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let last = r
            .get("the last page", &format!("{list}?limit=2&continue={token}"))
            .await;
        r.note("last page", names(&last));
        r.get(
            "a continue token that is not one",
            &format!("{list}?limit=2&continue=bogus"),
        )
        .await;
        r.get("limit=0 lists all", &format!("{list}?limit=0")).await;
        r.get("a negative limit", &format!("{list}?limit=-1")).await;
        r.get(
            "resourceVersion=0 with limit",
            &format!("{list}?limit=2&resourceVersion=0"),
        )
        .await;
        r.get(
            "resourceVersionMatch without resourceVersion",
            &format!("{list}?resourceVersionMatch=Exact"),
        )
        .await;
    })
}
