//! The seed example: Kopf's
//!
//! ```python
//! @kopf.on.event('kopfexamples')
//! @kopf.on.event('v1', 'pods')
//! def fn(**_): pass
//! ```
//!
//! in Rust: one function, two stacked `on::event` registrations (same id, `log_event`);
//! it logs every event it sees (the initial listing shows as `None`) with the
//! object's kind and namespace/name.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-example-seed`
//! (the component is `target/wasm32-wasip2/release/seed.wasm`).
//! Run: `kapsel run --embedded target/wasm32-wasip2/release/seed.wasm`, then create
//! kopfexamples or pods with kubectl.

use kapsel::Cause;

/// Logs one line per event, e.g. `event ADDED for Pod default/web-0`.
#[kapsel::on::event("kopfexamples")]
#[kapsel::on::event("v1", "pods")]
fn log_event(cause: &Cause) {
    let event = cause.event_type().map_or("None", |t| t.as_str());
    let kind = &cause.resource().kind;
    let namespace = cause.namespace().unwrap_or_default();
    let name = cause.name().unwrap_or_default();
    kapsel::info!("event {event} for {kind} {namespace}/{name}");
}

#[cfg(test)]
mod tests {
    use kapsel::json;
    use kapsel::{EventType, testing};

    #[test]
    fn logs_type_kind_and_name() {
        let cause = testing::cause()
            .body(json!({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"namespace": "default", "name": "web-0"}}))
            .event_type(EventType::Added)
            .build();
        super::log_event(&cause);
        let cause = testing::cause()
            .body(json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                         "metadata": {"namespace": "ns", "name": "kex"}}))
            .build();
        super::log_event(&cause);
        let logs: Vec<String> = testing::logs().into_iter().map(|l| l.message).collect();
        assert_eq!(
            logs,
            [
                "event ADDED for Pod default/web-0",
                "event None for KopfExample ns/kex"
            ]
        );
    }

    #[test]
    fn registers_twice_under_one_id() {
        let registrations = testing::registrations();
        let ours: Vec<_> = registrations
            .iter()
            .filter(|r| r["id"] == "log_event")
            .collect();
        assert_eq!(ours.len(), 2);
        assert_eq!(ours.iter().filter(|r| r["kind"] == "event").count(), 2);
        let selectors: Vec<_> = ours.iter().map(|r| r["selectors"][0].clone()).collect();
        assert!(
            selectors.contains(
                &json!({"group": null, "version": null, "name": {"any": "kopfexamples"}})
            )
        );
        assert!(
            selectors.contains(&json!({"group": "", "version": "v1", "name": {"any": "pods"}}))
        );
    }
}
