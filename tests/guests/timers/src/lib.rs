//! A guest for the host's timer tests (KOPF.md §1.10, §4.6, §5), on `kopfexamples`.
//!
//! Every timer is filtered on its own label `kapsel.test/<name>` being present, so one
//! object opts into exactly one behaviour (objects with none of these labels match
//! nothing, and so carry no finalizer). The handlers:
//!
//! - `tick` (`kapsel.test/tick`): every 10 s; returns `{"ticks": n, "managed_fields":
//!   ..}`, n counting its calls for the object, and whether the body it got has
//!   `metadata.managedFields` (a timer gets the object whole, as an event handler does);
//! - `delayed` (`kapsel.test/delayed`): every 10 s after a 30 s initial delay; returns
//!   `{"calls": n, "kind": "timer", "event_type": .., "reason": ..}` (`"none"` for the
//!   missing event type and reason: a timer has neither);
//! - `quiet` (`kapsel.test/idle`): once the object has been left alone for 20 s; logs
//!   `quiet for <name>` and returns nothing (a result in `status` is a change itself,
//!   and would re-arm the idle wait forever);
//! - `patient_tick` (`kapsel.test/patient-tick`): every 10 s, each tick also waiting
//!   for 5 quiet seconds; logs `patient tick for <name>`, returns nothing;
//! - `flaky_tick` (`kapsel.test/flaky-tick`): every 10 s; each tick's first attempt
//!   fails with a temporary error (retry in 3 s), the retry succeeds and returns
//!   `{"retry": 1}`;
//! - `doomed_tick` (`kapsel.test/doomed-tick`): every 10 s; always fails permanently;
//! - `broken_tick` (`kapsel.test/broken-tick`): every 10 s, `retries = 2`; always
//!   fails with an arbitrary error (retried after the default 60 s backoff).
//!
//! Daemons (KOPF.md §1.9):
//! - `heartbeat` (`kapsel.test/daemon`): logs `beat <n> of <name>` every 10 s until it
//!   must stop, then logs `heartbeat of <name> stopped after <n>: <reasons>` (Kopf's
//!   names, `RESOURCE_DELETED`, ...) and returns;
//! - `sleeper` (`kapsel.test/sleeper`): a 1 s call budget, sleeps of 0.6, 0.6 and 2 s,
//!   then returns `{"slept": 3}` (sleeps, even one longer than the budget, do not count);
//! - `one_shot` (`kapsel.test/one-shot`): returns `{"done": true}` at once, and so has
//!   exited for good for the object;
//! - `restarting` (`kapsel.test/restarting`): its first attempt fails with a temporary
//!   error (retry in 5 s); the retry logs `restarting <name> on retry <n>`, then sleeps
//!   until it must stop;
//! - `doomed_daemon` (`kapsel.test/doomed-daemon`): fails for good at once.
//!
//! Calls are counted in the object's memo (`{"<handler id>": n}`), which the host keeps
//! per object between calls.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-timers`
//! (the component is `target/wasm32-wasip2/release/timers.wasm`).

use kapsel::{Cause, EventType, PermanentError, Reason, TemporaryError, Value, json};

/// Counts this handler's calls for the object, this one included, in the memo.
fn count_call(cause: &mut Cause) -> u64 {
    let id = cause.handler_id().to_owned();
    let memo = cause.memo_mut();
    if !memo.is_object() {
        *memo = json!({});
    }
    let n = memo[id.as_str()].as_u64().unwrap_or(0) + 1;
    memo[id.as_str()] = n.into();
    n
}

/// Every 10 s, from the moment the object is first seen.
#[kapsel::on::timer("kopfexamples", interval = 10, labels("kapsel.test/tick" = present))]
fn tick(cause: &mut Cause) -> Value {
    let managed_fields = cause.meta()["managedFields"].is_array();
    json!({"ticks": count_call(cause), "managed_fields": managed_fields})
}

/// Every 10 s, the first time 30 s after the object is first seen. Reports what a
/// timer is called with.
#[kapsel::on::timer(
    "kopfexamples",
    interval = 10,
    initial_delay = 30,
    labels("kapsel.test/delayed" = present)
)]
fn delayed(cause: &mut Cause) -> Value {
    json!({
        "calls": count_call(cause),
        "kind": cause.kind(),
        "event_type": cause.event_type().map_or("none", EventType::as_str),
        "reason": cause.reason().map_or("none", Reason::as_str),
    })
}

/// Once the object has had no change for 20 s (and again after each later change).
#[kapsel::on::timer("kopfexamples", idle = 20, labels("kapsel.test/idle" = present))]
fn quiet(cause: &Cause) {
    kapsel::info!("quiet for {}", cause.name().unwrap_or_default());
}

/// Every 10 s, but only after 5 s without any change.
#[kapsel::on::timer(
    "kopfexamples",
    interval = 10,
    idle = 5,
    labels("kapsel.test/patient-tick" = present)
)]
fn patient_tick(cause: &Cause) {
    kapsel::info!("patient tick for {}", cause.name().unwrap_or_default());
}

/// Every 10 s; the first attempt of each tick asks for a retry in 3 s.
#[kapsel::on::timer("kopfexamples", interval = 10, labels("kapsel.test/flaky-tick" = present))]
fn flaky_tick(cause: &Cause) -> kapsel::Result<Value> {
    if cause.retry() == 0 {
        return Err(TemporaryError::new("not yet").with_delay(3.0).into());
    }
    Ok(json!({"retry": cause.retry()}))
}

/// Every 10 s; fails for good each time (which ends the tick, not the timer).
#[kapsel::on::timer(
    "kopfexamples",
    interval = 10,
    labels("kapsel.test/doomed-tick" = present)
)]
fn doomed_tick() -> kapsel::Result<Value> {
    Err(PermanentError::new("doomed").into())
}

/// Every 10 s; fails with an arbitrary error each time: retried once after the default
/// backoff (60 s), then the tick ends (2 attempts in all).
#[kapsel::on::timer(
    "kopfexamples",
    interval = 10,
    retries = 2,
    labels("kapsel.test/broken-tick" = present)
)]
fn broken_tick(cause: &Cause) -> kapsel::Result<Value> {
    Err(kapsel::Error::msg(format!(
        "broken on attempt {}",
        cause.retry()
    )))
}

/// A daemon that beats every 10 s until it must stop.
#[kapsel::on::daemon("kopfexamples", labels("kapsel.test/daemon" = present))]
fn heartbeat(cause: &Cause) {
    let name = cause.name().unwrap_or_default().to_owned();
    let mut beats = 0;
    while cause.sleep_unless_stopped(10.0) {
        beats += 1;
        kapsel::info!("beat {beats} of {name}");
    }
    kapsel::info!(
        "heartbeat of {name} stopped after {beats}: {}",
        cause.stop_reasons()
    );
}

/// A daemon with a 1 s budget that sleeps 0.6 s, 0.6 s and 2 s: its sleeps must not
/// count, not even one longer than the budget and the host's grace together.
#[kapsel::on::daemon(
    "kopfexamples",
    deadline_ms = 1000,
    labels("kapsel.test/sleeper" = present)
)]
fn sleeper(cause: &Cause) -> Value {
    let mut slept = 0;
    for nap in [0.6, 0.6, 2.0] {
        if !cause.sleep_unless_stopped(nap) {
            break;
        }
        slept += 1;
    }
    json!({"slept": slept})
}

/// A daemon that is done at once.
#[kapsel::on::daemon("kopfexamples", labels("kapsel.test/one-shot" = present))]
fn one_shot() -> Value {
    json!({"done": true})
}

/// A daemon whose first attempt fails; the retry runs until it must stop.
#[kapsel::on::daemon("kopfexamples", labels("kapsel.test/restarting" = present))]
fn restarting(cause: &Cause) -> kapsel::Result<()> {
    if cause.retry() == 0 {
        return Err(TemporaryError::new("not yet").with_delay(5.0).into());
    }
    let name = cause.name().unwrap_or_default();
    kapsel::info!("restarting {name} on retry {}", cause.retry());
    while cause.sleep_unless_stopped(60.0) {}
    Ok(())
}

/// A daemon that fails for good: it is not started again for its object.
#[kapsel::on::daemon("kopfexamples", labels("kapsel.test/doomed-daemon" = present))]
fn doomed_daemon() -> kapsel::Result<()> {
    Err(PermanentError::new("doomed").into())
}

#[cfg(test)]
mod tests {
    use kapsel::testing::{self, Outcome};
    use kapsel::{HandlerKind, Value, json};

    fn object(label: &str) -> Value {
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
               "metadata": {"namespace": "default", "name": "ex1",
                            "labels": {label: "yes"}},
               "spec": {"field": "value"}})
    }

    fn timer(id: &str, label: &str) -> testing::CauseBuilder {
        testing::cause()
            .handler_id(id)
            .kind(HandlerKind::Timer)
            .body(object(label))
    }

    /// The host receives each timer with its options and its own label filter.
    #[test]
    fn timers_are_registered_with_their_options() {
        let registrations = testing::registrations();
        let find = |id: &str| {
            registrations
                .iter()
                .find(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("no registration {id}"))
                .clone()
        };
        let expected = [
            (
                "tick",
                "kapsel.test/tick",
                json!(10.0),
                Value::Null,
                Value::Null,
            ),
            (
                "delayed",
                "kapsel.test/delayed",
                json!(10.0),
                json!(30.0),
                Value::Null,
            ),
            (
                "quiet",
                "kapsel.test/idle",
                Value::Null,
                Value::Null,
                json!(20.0),
            ),
            (
                "patient_tick",
                "kapsel.test/patient-tick",
                json!(10.0),
                Value::Null,
                json!(5.0),
            ),
            (
                "flaky_tick",
                "kapsel.test/flaky-tick",
                json!(10.0),
                Value::Null,
                Value::Null,
            ),
            (
                "doomed_tick",
                "kapsel.test/doomed-tick",
                json!(10.0),
                Value::Null,
                Value::Null,
            ),
            (
                "broken_tick",
                "kapsel.test/broken-tick",
                json!(10.0),
                Value::Null,
                Value::Null,
            ),
        ];
        let timers: Vec<&Value> = registrations
            .iter()
            .filter(|r| r["kind"] == "timer")
            .collect();
        assert_eq!(timers.len(), expected.len());
        let daemons: Vec<&Value> = registrations
            .iter()
            .filter(|r| r["kind"] == "daemon")
            .map(|r| &r["id"])
            .collect();
        assert_eq!(
            daemons,
            [
                "heartbeat",
                "sleeper",
                "one_shot",
                "restarting",
                "doomed_daemon"
            ]
        );
        for (id, label, interval, initial_delay, idle) in expected {
            let r = find(id);
            assert_eq!(r["kind"], "timer", "{id}");
            assert_eq!(r["labels"][0]["key"], label, "{id}");
            assert_eq!(r["interval-seconds"], interval, "{id}");
            assert_eq!(r["initial-delay-seconds"], initial_delay, "{id}");
            assert_eq!(r["idle-seconds"], idle, "{id}");
            assert_eq!(r["sharp"], false, "{id}");
        }
        assert_eq!(find("broken_tick")["retries"], 2);
    }

    /// `tick` counts its calls in the memo, which the host hands back on the next call,
    /// and tells whether its body has managed fields.
    #[test]
    fn tick_counts_its_calls_in_the_memo() {
        let first = testing::invoke(&mut timer("tick", "kapsel.test/tick").build());
        assert_eq!(
            first.outcome,
            Outcome::Done(Some(json!({"ticks": 1, "managed_fields": false})))
        );
        let memo = first.memo.expect("a memo");
        assert_eq!(memo, json!({"tick": 1}));
        let mut managed = object("kapsel.test/tick");
        managed["metadata"]["managedFields"] = json!([{"manager": "kubectl"}]);
        let second = testing::invoke(
            &mut timer("tick", "kapsel.test/tick")
                .body(managed)
                .memo(memo)
                .build(),
        );
        assert_eq!(
            second.outcome,
            Outcome::Done(Some(json!({"ticks": 2, "managed_fields": true})))
        );
        assert_eq!(second.memo, Some(json!({"tick": 2})));
        assert_eq!(second.patch, None);
    }

    /// Another handler's count in the same object's memo is left alone.
    #[test]
    fn counts_are_kept_per_handler() {
        let reply = testing::invoke(
            &mut timer("delayed", "kapsel.test/delayed")
                .memo(json!({"tick": 7}))
                .build(),
        );
        assert_eq!(
            reply.outcome,
            Outcome::Done(Some(
                json!({"calls": 1, "kind": "timer", "event_type": "none", "reason": "none"})
            ))
        );
        assert_eq!(reply.memo, Some(json!({"tick": 7, "delayed": 1})));
    }

    /// `flaky_tick` fails on each tick's first attempt only.
    #[test]
    fn flaky_tick_asks_for_one_retry_in_three_seconds() {
        let first = testing::invoke(&mut timer("flaky_tick", "kapsel.test/flaky-tick").build());
        assert_eq!(first.outcome, Outcome::Temporary("not yet".into(), 3.0));
        let retry = testing::invoke(
            &mut timer("flaky_tick", "kapsel.test/flaky-tick")
                .retry(1)
                .build(),
        );
        assert_eq!(retry.outcome, Outcome::Done(Some(json!({"retry": 1}))));
    }

    /// The idle timers return nothing (a result would be a change) and log instead.
    #[test]
    fn idle_timers_log_and_return_nothing() {
        testing::reset();
        let quiet = testing::invoke(&mut timer("quiet", "kapsel.test/idle").build());
        assert_eq!(quiet.outcome, Outcome::Done(None));
        assert_eq!(quiet.patch, None);
        let patient =
            testing::invoke(&mut timer("patient_tick", "kapsel.test/patient-tick").build());
        assert_eq!(patient.outcome, Outcome::Done(None));
        let logs: Vec<String> = testing::logs().into_iter().map(|l| l.message).collect();
        assert_eq!(logs, ["quiet for ex1", "patient tick for ex1"]);
    }

    /// The failing timers fail the way their cases expect.
    #[test]
    fn failing_timers_fail_permanently_or_arbitrarily() {
        let doomed = testing::invoke(&mut timer("doomed_tick", "kapsel.test/doomed-tick").build());
        assert_eq!(doomed.outcome, Outcome::Permanent("doomed".into()));
        let broken = testing::invoke(
            &mut timer("broken_tick", "kapsel.test/broken-tick")
                .retry(1)
                .build(),
        );
        assert_eq!(
            broken.outcome,
            Outcome::Failed("broken on attempt 1".into())
        );
    }
}
