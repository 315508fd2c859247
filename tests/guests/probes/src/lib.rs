//! Handlers that make the host's behaviour observable, for its integration tests:
//! overlapping selectors (one call per event, KOPF.md §1.4) and each rule of
//! index results (KOPF.md §7). Every handler logs one line the tests parse.
//! Its probe handlers feed the liveness endpoint (KOPF.md §9).

use std::collections::BTreeMap;

use kapsel::{Cause, Value, json};

/// The same resource named four ways: the host must call this once per event.
#[kapsel::on::event("pods")]
#[kapsel::on::event("v1", "pods")]
#[kapsel::on::event("", "v1", "pods")]
#[kapsel::on::event("pods.v1")]
fn once(cause: &Cause) {
    let event = cause.event_type().map_or("None", |t| t.as_str());
    let namespace = cause.namespace().unwrap_or_default();
    let name = cause.name().unwrap_or_default();
    kapsel::info!("once {event} {namespace}/{name}");
}

/// `{"sticky": <label>}` while the label is there; nothing once it is gone, so
/// the object's earlier value stays.
#[kapsel::index("configmaps")]
fn sticky(cause: &Cause) -> Option<BTreeMap<String, String>> {
    let value = cause.labels().get("sticky")?.as_str()?.to_owned();
    Some(BTreeMap::from([("sticky".to_owned(), value)]))
}

/// One key per label `a`/`b` present: keys not returned are removed.
#[kapsel::index("configmaps")]
fn partial(cause: &Cause) -> BTreeMap<String, String> {
    ["a", "b"]
        .into_iter()
        .filter_map(|key| {
            let value = cause.labels().get(key)?.as_str()?;
            Some((key.to_owned(), value.to_owned()))
        })
        .collect()
}

/// `{"key": null}` for every configmap: null is a value.
#[kapsel::index("configmaps")]
fn nulls() -> BTreeMap<&'static str, Option<String>> {
    BTreeMap::from([("key", None)])
}

/// Logs every index's content as JSON, on events of configmaps labelled `report`.
#[kapsel::on::event("configmaps", labels(report = present))]
fn report(cause: &Cause) {
    let sorted = |mut values: Vec<Value>| {
        values.sort_by_key(|v| v.to_string());
        values
    };
    let content = json!({
        "trigger": cause.name().unwrap_or_default(),
        "sticky": sorted(kapsel::index::get("sticky", "sticky")),
        "a": sorted(kapsel::index::get("partial", "a")),
        "b": sorted(kapsel::index::get("partial", "b")),
        "nulls": kapsel::index::get::<Value>("nulls", "key").len(),
        "null_values": kapsel::index::get::<Value>("nulls", "key").iter().all(Value::is_null),
    });
    kapsel::info!("report {content}");
}

/// Every configmap event, after the indexers ran for it: tests wait on this.
#[kapsel::on::event("configmaps")]
fn seen(cause: &Cause) {
    let event = cause.event_type().map_or("None", |t| t.as_str());
    kapsel::debug!("seen {event} {}", cause.name().unwrap_or_default());
}

/// Liveness: a fixed result.
#[kapsel::on::probe]
fn status() -> &'static str {
    "ok"
}

/// Liveness: how many keys the `partial` index has (probes read indexes, as in Kopf).
#[kapsel::on::probe]
fn partial_keys() -> usize {
    kapsel::index::keys::<String>("partial").len()
}

/// The configmaps labelled `sick`, for the `well` probe.
#[kapsel::index("configmaps", labels(sick = present))]
fn sick(cause: &Cause) -> BTreeMap<&'static str, String> {
    BTreeMap::from([("sick", cause.name().unwrap_or_default().to_owned())])
}

/// Liveness: fails while a configmap labelled `sick` exists; no result otherwise.
#[kapsel::on::probe]
fn well() -> kapsel::Result<()> {
    match kapsel::index::get::<String>("sick", "sick").first() {
        Some(name) => Err(kapsel::PermanentError::new(format!("{name} is sick")).into()),
        None => Ok(()),
    }
}

/// Liveness: no result, so the report leaves it out (as Kopf does).
#[kapsel::on::probe]
fn quiet() {}

/// Liveness: needs 40 MiB, so it fails under a smaller memory cap (the host's
/// `call_memory_mib`); reports the MiB it got.
#[kapsel::on::probe]
fn roomy() -> usize {
    let room = vec![1_u8; 40 << 20];
    std::hint::black_box(&room).len() >> 20
}
