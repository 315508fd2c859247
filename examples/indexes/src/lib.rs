//! Indexes, as in Kopf (KOPF.md §7): the seed's two index handlers on
//! kopfexamples, `empty_index` (returns nothing, so an object's previous values
//! stay) and `index_of_nones` (returns `{"key": null}`, so `null` is stored
//! under `"key"`), plus a useful one, `pods_by_namespace` (`{namespace: name}`
//! for every pod), which an event handler on pods reads to log the pods that
//! share the object's namespace: `pods in default: ["a", "b"]`.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-example-indexes`
//! (the component is `target/wasm32-wasip2/release/indexes.wasm`).
//! Run: `kapsel run --embedded target/wasm32-wasip2/release/indexes.wasm`, then
//! create pods with kubectl. Test natively: `cargo test -p kapsel-example-indexes`.

use std::collections::BTreeMap;

use kapsel::Cause;

/// Kopf's `empty_index`: returns nothing.
#[kapsel::index("kopfexamples")]
fn empty_index() {}

/// Kopf's `index_of_nones`: `{"key": None}`.
#[kapsel::index("kopfexamples")]
fn index_of_nones() -> BTreeMap<&'static str, Option<String>> {
    BTreeMap::from([("key", None)])
}

/// Every pod's name under its namespace.
#[kapsel::index("v1", "pods")]
fn pods_by_namespace(cause: &Cause) -> BTreeMap<String, String> {
    let mut entries = BTreeMap::new();
    if let (Some(namespace), Some(name)) = (cause.namespace(), cause.name()) {
        entries.insert(namespace.to_owned(), name.to_owned());
    }
    entries
}

/// Logs the pods in the namespace of every pod it sees.
#[kapsel::on::event("v1", "pods")]
fn pods_in_namespace(cause: &Cause) {
    let namespace = cause.namespace().unwrap_or_default();
    let mut names: Vec<String> = kapsel::index::get("pods_by_namespace", namespace);
    names.sort();
    kapsel::info!("pods in {namespace}: [{}]", names.join(", "));
}

#[cfg(test)]
mod tests {
    use kapsel::HandlerKind;
    use kapsel::testing::{self, IndexOutcome};
    use kapsel::{Value, json};

    fn pod(namespace: &str, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": namespace, "name": name}})
    }

    fn index_call(id: &str, body: Value) -> IndexOutcome {
        let mut cause = testing::cause()
            .handler_id(id)
            .kind(HandlerKind::Index)
            .body(body)
            .build();
        testing::index(&mut cause)
    }

    #[test]
    fn index_results_mean_what_kopf_says() {
        assert_eq!(index_call("empty_index", json!({})), IndexOutcome::Keep);
        assert_eq!(
            index_call("index_of_nones", json!({})),
            IndexOutcome::Entries(vec![(json!("key"), Value::Null)])
        );
        assert_eq!(
            index_call("pods_by_namespace", pod("default", "web-0")),
            IndexOutcome::Entries(vec![(json!("default"), json!("web-0"))])
        );
    }

    #[test]
    fn event_handler_reads_the_index() {
        testing::set_index("pods_by_namespace", "default", ["web-1", "web-0"]);
        let cause = testing::cause().body(pod("default", "web-0")).build();
        super::pods_in_namespace(&cause);
        assert_eq!(
            testing::logs()[0].message,
            "pods in default: [web-0, web-1]"
        );
    }
}
