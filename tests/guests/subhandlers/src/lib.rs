//! A guest for the host's sub-handler tests (KOPF.md §1.8), on `kopfexamples`
//! (`kopf.dev/v1`).
//!
//! - `create_fn`: for each string `x` of `spec.items` (none when missing), declares the
//!   sub-handler `item-<x>` (full id `create_fn/item-<x>`, `retries = 5`, `backoff = 1`),
//!   which behaves as `spec.behaviours.<x>` says (`"ok"` when missing):
//!   - `"ok"`: sets `status.done.<x>` to true (in the patch) and returns `{"item": x}`;
//!   - `"fail-once"`: a temporary error `not yet` (retry in 1 s) on its first attempt
//!     (`retry == 0`), then as `"ok"`;
//!   - `"permanent"`: a permanent error `refused`;
//!   - `"nested"`: declares its own sub-handlers `a` and `b` (`create_fn/item-<x>/a`, `/b`),
//!     each as `"ok"` for `<x>-a` / `<x>-b` (`status.done.<x>-a`, returning
//!     `{"item": "<x>-a"}`), and returns nothing;
//!   - `"panic"`: panics (`sub-handler item-<x> panics`), which traps the whole call;
//!   - anything else: a permanent error `unknown behaviour <b>`.
//!
//!   With `spec.explicit: true`, it calls `kapsel::execute` after declaring them, then
//!   sets `status.after_execute` to true (Kopf: the code after `execute` runs once all
//!   sub-handlers are finished); otherwise they run after it returns. Either way it
//!   returns `{"parent": "done"}`, stored once its sub-handlers are all finished.
//! - `misuse`: an event handler on ConfigMaps labelled `kapsel-test: subhandlers`;
//!   declares a sub-handler and executes it, which an event handler may not do, and
//!   logs the error it gets at error level: `execute refused: <message>`.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-subhandlers`
//! (the component is `target/wasm32-wasip2/release/subhandlers.wasm`).

use kapsel::{Cause, PermanentError, TemporaryError, Value, json};

/// Declares a sub-handler per item, executing them explicitly if the spec says so.
#[kapsel::on::create("kopf.dev", "v1", "kopfexamples")]
fn create_fn(cause: &mut Cause) -> kapsel::Result<Value> {
    let spec = cause.spec();
    let explicit = spec["explicit"].as_bool() == Some(true);
    let items: Vec<(String, String)> = spec["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|item| {
            let behaviour = spec["behaviours"][item].as_str().unwrap_or("ok");
            (item.to_owned(), behaviour.to_owned())
        })
        .collect();
    for (item, behaviour) in items {
        kapsel::subhandler(format!("item-{item}"))
            .retries(5)
            .backoff(1.0)
            .register(move |cause: &mut Cause| behave(cause, &item, &behaviour));
    }
    if explicit {
        kapsel::execute(cause)?;
        cause.patch.set_at(&["status", "after_execute"], true);
    }
    Ok(json!({"parent": "done"}))
}

/// One item's sub-handler, as its behaviour says.
fn behave(cause: &mut Cause, item: &str, behaviour: &str) -> kapsel::Result<Value> {
    match behaviour {
        "ok" => done(cause, item),
        "fail-once" if cause.retry() == 0 => {
            Err(TemporaryError::new("not yet").with_delay(1.0).into())
        }
        "fail-once" => done(cause, item),
        "permanent" => Err(PermanentError::new("refused").into()),
        "nested" => {
            for part in ["a", "b"] {
                let key = format!("{item}-{part}");
                kapsel::register(part, move |cause: &mut Cause| done(cause, &key));
            }
            Ok(Value::Null)
        }
        "panic" => panic!("sub-handler item-{item} panics"),
        other => Err(PermanentError::new(format!("unknown behaviour {other}")).into()),
    }
}

/// Marks `status.done.<key>` and returns `{"item": key}`.
fn done(cause: &mut Cause, key: &str) -> kapsel::Result<Value> {
    cause.patch.set_at(&["status", "done", key], true);
    Ok(json!({"item": key}))
}

/// Sub-handlers in an event handler: refused; logs the refusal.
#[kapsel::on::event("v1", "configmaps", labels("kapsel-test" = "subhandlers"))]
fn misuse(cause: &mut Cause) {
    kapsel::register("never", |_: &mut Cause| -> kapsel::Result<()> {
        panic!("a sub-handler of an event handler ran")
    });
    if let Err(error) = kapsel::execute(cause) {
        kapsel::error!("execute refused: {error}");
    }
}

#[cfg(test)]
mod tests {
    use kapsel::testing::{self, Level, Outcome, SubhandlerState};
    use kapsel::{Cause, Reason, Value, json};

    fn create(spec: Value) -> Cause {
        testing::cause()
            .handler_id("create_fn")
            .changing(Reason::Create)
            .body(json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                         "metadata": {"namespace": "default", "name": "ex1"},
                         "spec": spec}))
            .build()
    }

    fn state(id: &str) -> SubhandlerState {
        let all = testing::subhandlers();
        let progress = all.iter().find(|p| p.id == id);
        progress
            .unwrap_or_else(|| panic!("no {id} in {all:?}"))
            .state
            .clone()
    }

    #[test]
    fn the_parent_is_done_with_its_sub_handlers_in_one_call_when_they_all_succeed() {
        testing::reset();
        let reply = testing::invoke(&mut create(json!({"items": ["a", "b"]})));
        assert_eq!(
            reply.outcome,
            Outcome::Done(Some(json!({"parent": "done"})))
        );
        assert_eq!(
            reply.patch,
            Some(json!({"status": {"done": {"a": true, "b": true}}}))
        );
        let a = &testing::subhandlers()[0];
        assert_eq!(a.id, "create_fn/item-a");
        assert_eq!(a.outcomes, [Outcome::Done(Some(json!({"item": "a"})))]);
    }

    #[test]
    fn code_after_execute_runs_once_the_sub_handlers_are_finished() {
        testing::reset();
        let spec = json!({"items": ["a", "b"], "behaviours": {"b": "fail-once"}, "explicit": true});
        let reply = testing::invoke(&mut create(spec.clone()));
        assert_eq!(reply.outcome, Outcome::Done(None));
        assert_eq!(reply.patch, Some(json!({"status": {"done": {"a": true}}})));
        assert_eq!(state("create_fn/item-b"), SubhandlerState::Pending);
        let reply = testing::invoke(&mut create(spec));
        assert_eq!(
            reply.outcome,
            Outcome::Done(Some(json!({"parent": "done"})))
        );
        assert_eq!(
            reply.patch,
            Some(json!({"status": {"done": {"b": true}, "after_execute": true}}))
        );
    }

    #[test]
    fn failing_and_nested_sub_handlers() {
        testing::reset();
        let spec = json!({"items": ["p", "n", "x"],
                          "behaviours": {"p": "permanent", "n": "nested", "x": "odd"}});
        let reply = testing::invoke(&mut create(spec));
        // A sub-handler that failed for good is finished: the parent is done (as Kopf).
        assert_eq!(
            reply.outcome,
            Outcome::Done(Some(json!({"parent": "done"})))
        );
        assert_eq!(
            reply.patch,
            Some(json!({"status": {"done": {"n-a": true, "n-b": true}}}))
        );
        assert_eq!(
            state("create_fn/item-p"),
            SubhandlerState::Failed("refused".into())
        );
        assert_eq!(
            state("create_fn/item-x"),
            SubhandlerState::Failed("unknown behaviour odd".into())
        );
        assert_eq!(state("create_fn/item-n/b"), SubhandlerState::Succeeded);
        assert_eq!(state("create_fn/item-n"), SubhandlerState::Succeeded);
    }

    #[test]
    #[should_panic = "sub-handler item-boom panics"]
    fn a_panicking_sub_handler_panics_the_call() {
        testing::reset();
        let spec = json!({"items": ["boom"], "behaviours": {"boom": "panic"}});
        testing::invoke(&mut create(spec));
    }

    #[test]
    fn an_event_handler_is_refused_sub_handlers() {
        testing::reset();
        let mut cause = testing::cause().handler_id("misuse").build();
        assert_eq!(testing::invoke(&mut cause).outcome, Outcome::Done(None));
        let logs = testing::logs();
        assert_eq!(logs[0].level, Level::Error);
        assert!(
            logs[0]
                .message
                .starts_with("execute refused: sub-handlers are only for changing handlers"),
            "{}",
            logs[0].message
        );
        assert!(testing::subhandlers().is_empty());
        let registration = testing::registrations()
            .into_iter()
            .find(|r| r["id"] == "misuse");
        assert_eq!(
            registration.unwrap()["labels"],
            json!([{"key": "kapsel-test", "matcher": {"equals": "subhandlers"}}])
        );
    }
}
