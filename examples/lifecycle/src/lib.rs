//! A kopfexample's whole life, in the style of Kopf's examples of handlers,
//! errors and events: what each kind of changing handler receives, and how its
//! result, its errors and its retries show on the object.
//!
//! Handler ids differ from Kopf's usual `create_fn`/`update_fn` so that this guest
//! can run beside `minimal.wasm` on the same objects: progress annotations and
//! results are keyed by handler id alone, as in Kopf.
//!
//! - `created`: on creation; its result lands in `status.created`, it sets
//!   `status.phase` through the patch and posts a `Normal` Event.
//! - `updated`: on every later change of the object's essence; logs the diff.
//! - `field_changed`: whenever `spec.field` changes (creation included, as Kopf does).
//! - `deleting`: on deletion. Not `optional`, so objects carry Kopf's finalizer
//!   until it has run.
//! - `flaky`: fails with a temporary error (retried after 1 s) on its first two
//!   attempts, then succeeds: `status.flaky.attempts` is 3.
//! - `broken`: only for objects labelled `demo/break=yes`; fails permanently
//!   (no retries), and the others still run.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-example-lifecycle`
//! (the component is `target/wasm32-wasip2/release/lifecycle.wasm`).
//! Run: `kapsel run --embedded -A target/wasm32-wasip2/release/lifecycle.wasm`, then
//! apply, edit and delete `examples/manifests/kopfexample-obj.yaml` with kubectl.

use kapsel::{Cause, PermanentError, TemporaryError, Value, json};

/// How many failed attempts `flaky` makes before it succeeds.
const FLAKY_FAILURES: u32 = 2;

/// Greets the new object: an Event, `status.phase`, and a result in `status.created`.
#[kapsel::on::create("kopfexamples")]
fn created(cause: &mut Cause) -> Value {
    let name = cause.name().unwrap_or_default().to_owned();
    let field = cause.spec().get("field").cloned();
    kapsel::events::info(cause.body(), "Greeting", &format!("Hello, {name}!"));
    cause.patch.set("status.phase", "Greeted");
    json!({"message": format!("created {name}"), "field": field})
}

/// Logs what changed, one line per difference; `status.updated.changes` counts them.
#[kapsel::on::update("kopfexamples")]
fn updated(cause: &Cause) -> Value {
    for item in cause.diff() {
        kapsel::info!(
            "{} {}: {} -> {}",
            item.op,
            item.field(),
            show(item.old.as_ref()),
            show(item.new.as_ref())
        );
    }
    json!({"changes": cause.diff().len()})
}

/// Follows `spec.field` (status key `field_changed/spec.field`, Kopf's id for field handlers).
#[kapsel::on::field("kopfexamples", field = "spec.field")]
fn field_changed(cause: &Cause) -> Value {
    let reason = cause.reason().map_or("?", |r| r.as_str());
    kapsel::info!(
        "spec.field: {} -> {} (on {reason})",
        show(cause.old()),
        show(cause.new())
    );
    json!({"old": cause.old(), "new": cause.new()})
}

/// Runs before the object goes; the host removes the finalizer afterwards.
#[kapsel::on::delete("kopfexamples")]
fn deleting(cause: &Cause) {
    kapsel::info!(
        "Deleting {}: the finalizer goes once this returns.",
        cause.name().unwrap_or_default()
    );
}

/// Not ready on its first attempts: a temporary error retried after one second.
#[kapsel::on::create("kopfexamples")]
fn flaky(cause: &Cause) -> kapsel::Result<Value> {
    let attempt = cause.retry() + 1;
    if cause.retry() < FLAKY_FAILURES {
        return Err(
            TemporaryError::new(format!("not ready yet (attempt {attempt})"))
                .with_delay(1.0)
                .into(),
        );
    }
    Ok(json!({"attempts": attempt}))
}

/// Fails for good, only for objects that ask for it with `demo/break=yes`.
#[kapsel::on::create("kopfexamples", labels("demo/break" = "yes"))]
fn broken() -> kapsel::Result<()> {
    Err(PermanentError::new("this handler never works (label demo/break=yes)").into())
}

/// A value for a log line: its JSON, or `absent`.
fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "absent".to_owned(), Value::to_string)
}

#[cfg(test)]
mod tests {
    use kapsel::testing::{self, Outcome};
    use kapsel::{HandlerKind, Reason, Value, json};

    /// Kopf runs a cycle's handlers in declaration order (fewest retries first): the
    /// host receives them in the order they are written, whatever the link order.
    #[test]
    fn handlers_are_declared_in_source_order() {
        let ids: Vec<String> = testing::registrations()
            .iter()
            .filter_map(|r| r["id"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(
            ids,
            [
                "created",
                "updated",
                "field_changed/spec.field",
                "deleting",
                "flaky",
                "broken"
            ]
        );
    }

    fn object() -> Value {
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
               "metadata": {"namespace": "default", "name": "kopf-example-1",
                            "labels": {"somelabel": "somevalue"}},
               "spec": {"field": "value", "items": ["item1", "item2"]}})
    }

    fn call(id: &str, reason: Reason) -> testing::CauseBuilder {
        testing::cause()
            .handler_id(id)
            .changing(reason)
            .body(object())
    }

    #[test]
    fn create_greets_patches_and_returns() {
        let reply = testing::invoke(&mut call("created", Reason::Create).build());
        assert_eq!(
            reply.outcome,
            Outcome::Done(Some(
                json!({"message": "created kopf-example-1", "field": "value"})
            ))
        );
        assert_eq!(reply.patch, Some(json!({"status": {"phase": "Greeted"}})));
        let events = testing::events();
        assert_eq!(events.len(), 1);
        assert_eq!(
            (
                events[0].event_type.as_str(),
                events[0].reason.as_str(),
                events[0].message.as_str()
            ),
            ("Normal", "Greeting", "Hello, kopf-example-1!")
        );
        let about = events[0].object.as_ref().expect("an object reference");
        assert_eq!(about["metadata"]["name"], "kopf-example-1");
    }

    #[test]
    fn update_logs_the_diff() {
        let mut cause = call("updated", Reason::Update)
            .diff(json!([
                ["change", ["spec", "field"], "value", "changed"],
                ["add", ["spec", "extra"], null, 1],
                [
                    "remove",
                    ["metadata", "labels", "somelabel"],
                    "somevalue",
                    null
                ],
            ]))
            .build();
        let reply = testing::invoke(&mut cause);
        assert_eq!(reply.outcome, Outcome::Done(Some(json!({"changes": 3}))));
        let logs: Vec<String> = testing::logs().into_iter().map(|l| l.message).collect();
        assert_eq!(
            logs,
            [
                r#"change spec.field: "value" -> "changed""#,
                "add spec.extra: absent -> 1",
                r#"remove metadata.labels.somelabel: "somevalue" -> absent"#,
            ]
        );
    }

    #[test]
    fn field_follows_its_field() {
        let mut cause = call("field_changed/spec.field", Reason::Update)
            .kind(HandlerKind::Field)
            .old(json!("value"))
            .new(json!("changed"))
            .build();
        let reply = testing::invoke(&mut cause);
        assert_eq!(
            reply.outcome,
            Outcome::Done(Some(json!({"old": "value", "new": "changed"})))
        );
        assert_eq!(
            testing::logs()[0].message,
            r#"spec.field: "value" -> "changed" (on update)"#
        );
        // On creation the old value is absent.
        let mut cause = call("field_changed/spec.field", Reason::Create)
            .kind(HandlerKind::Field)
            .new(json!("value"))
            .build();
        assert_eq!(
            testing::invoke(&mut cause).outcome,
            Outcome::Done(Some(json!({"old": null, "new": "value"})))
        );
    }

    #[test]
    fn delete_needs_the_finalizer() {
        let reply = testing::invoke(&mut call("deleting", Reason::Delete).build());
        assert_eq!(reply.outcome, Outcome::Done(None));
        assert_eq!(
            testing::logs()[0].message,
            "Deleting kopf-example-1: the finalizer goes once this returns."
        );
        let registrations = testing::registrations();
        let delete = registrations
            .iter()
            .find(|r| r["id"] == "deleting")
            .expect("registered");
        assert_eq!(delete["optional"], false);
    }

    #[test]
    fn flaky_succeeds_on_the_third_attempt() {
        for retry in 0..2 {
            let mut cause = call("flaky", Reason::Create).retry(retry).build();
            assert_eq!(
                testing::invoke(&mut cause).outcome,
                Outcome::Temporary(format!("not ready yet (attempt {})", retry + 1), 1.0)
            );
        }
        let mut cause = call("flaky", Reason::Create).retry(2).build();
        assert_eq!(
            testing::invoke(&mut cause).outcome,
            Outcome::Done(Some(json!({"attempts": 3})))
        );
    }

    #[test]
    fn broken_fails_for_good_and_only_when_asked() {
        let reply = testing::invoke(&mut call("broken", Reason::Create).build());
        assert_eq!(
            reply.outcome,
            Outcome::Permanent("this handler never works (label demo/break=yes)".into())
        );
        let registrations = testing::registrations();
        let broken = registrations
            .iter()
            .find(|r| r["id"] == "broken")
            .expect("registered");
        assert_eq!(
            broken["labels"],
            json!([{"key": "demo/break", "matcher": {"equals": "yes"}}])
        );
    }
}
