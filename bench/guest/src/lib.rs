//! The benchmark's operator, handler for handler the same as
//! `bench/operator/kopf_operator.py` (same ids, same results, same Events), so that
//! `make bench` compares the two hosts and nothing else:
//!
//! - `pods_by_namespace`: an index of pod names per namespace;
//! - `pod_event`: every pod event, reading that index;
//! - `create_fn`, `update_fn`, `delete_fn` on kopfexamples: each sets `status.phase`
//!   through the patch and returns a map (into `status.<id>`); `delete_fn` also posts
//!   an Event (and, being a delete handler, keeps Kopf's finalizer on the objects).
//!
//! The bench counts an object as handled once `status.create_fn` shows up.

use std::collections::BTreeMap;

use kapsel::{Cause, Value, json};

/// Kopf: `@kopf.index('pods')` returning `{namespace: name}`.
#[kapsel::index("v1", "pods")]
fn pods_by_namespace(cause: &Cause) -> BTreeMap<String, String> {
    let mut entries = BTreeMap::new();
    if let (Some(namespace), Some(name)) = (cause.namespace(), cause.name()) {
        entries.insert(namespace.to_owned(), name.to_owned());
    }
    entries
}

/// Kopf: `@kopf.on.event('pods')`, counting the pods of the namespace in the index.
#[kapsel::on::event("v1", "pods")]
fn pod_event(cause: &Cause) {
    let namespace = cause.namespace().unwrap_or_default();
    let pods: Vec<String> = kapsel::index::get("pods_by_namespace", namespace);
    kapsel::debug!("{} pod(s) in {namespace}", pods.len());
}

/// Kopf: `@kopf.on.create('kopfexamples')`.
#[kapsel::on::create("kopf.dev", "v1", "kopfexamples")]
fn create_fn(cause: &mut Cause) -> Value {
    let name = cause.name().unwrap_or_default().to_owned();
    cause.patch.set("status.phase", "Created");
    json!({"message": format!("created {name}")})
}

/// Kopf: `@kopf.on.update('kopfexamples')`.
#[kapsel::on::update("kopf.dev", "v1", "kopfexamples")]
fn update_fn(cause: &mut Cause) -> Value {
    let changes = cause.diff().len();
    cause.patch.set("status.phase", "Updated");
    json!({"changes": changes})
}

/// Kopf: `@kopf.on.delete('kopfexamples')`, posting an Event.
#[kapsel::on::delete("kopf.dev", "v1", "kopfexamples")]
fn delete_fn(cause: &mut Cause) -> Value {
    let name = cause.name().unwrap_or_default().to_owned();
    kapsel::events::info(cause.body(), "Deleting", &format!("deleting {name}"));
    cause.patch.set("status.phase", "Deleting");
    json!({"message": format!("deleted {name}")})
}

#[cfg(test)]
mod tests {
    use kapsel::testing;
    use kapsel::{HandlerKind, json};

    #[test]
    fn create_sets_the_phase_and_returns_a_message() {
        let mut cause = testing::cause()
            .kind(HandlerKind::Create)
            .body(json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                         "metadata": {"namespace": "ns", "name": "kex-1"}}))
            .build();
        let result = super::create_fn(&mut cause);
        assert_eq!(result, json!({"message": "created kex-1"}));
        assert_eq!(
            cause.patch.to_value(),
            json!({"status": {"phase": "Created"}})
        );
    }
}
