//! Daemons end with what runs them (KOPF.md §1.9, §8): when the operator stops, a
//! daemon's sleep answers false and it returns (reading `OPERATOR_EXITING` as the
//! reason); when the operator pauses for a peer, its daemons stop the same way
//! (`OPERATOR_PAUSING`), and start again when it resumes. On handler time: the
//! `heartbeat` daemon of the `timers` guest beats every 10 s.

use std::time::Duration;

use kapsel_host::testing::RunningOperator;
use kapsel_host::{Freezer, Operator, Record};
use kapsel_tests::*;
use serde_json::json;

fn heartbeat_calls(operator: &RunningOperator) -> usize {
    calls(&operator.journal().records(), "heartbeat").len()
}

/// Starts the `timers` guest on handler time and a beating object, and lets it beat once.
async fn one_beat(s: &Scene, operator: Operator) -> RunningOperator {
    let operator = s.cluster.start_operator_on_handler_time(operator);
    s.create(kopfexample(
        "beating",
        &["daemon"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    ))
    .await;
    operator
        .journal()
        .wait_for(PATIENCE, |r| !calls(r, "heartbeat").is_empty())
        .await
        .expect("the daemon starts");
    operator
        .advance(Duration::from_secs(10))
        .await
        .expect("settles");
    assert_eq!(
        guest_logs(&operator.journal().records(), "timers"),
        ["beat 1 of beating"]
    );
    operator
}

#[tokio::test]
async fn a_daemon_returns_when_the_operator_stops() {
    let s = Scene::start("daemon-stop").await;
    let operator = one_beat(&s, Operator::new([guest("timers")]).standalone()).await;
    let journal = operator.journal().clone();
    operator.stop().await.expect("stop");
    let records = journal.records();
    assert_eq!(
        guest_logs(&records, "timers"),
        [
            "beat 1 of beating",
            "heartbeat of beating stopped after 1: OPERATOR_EXITING"
        ],
        "its sleep answered false, and it returned, knowing why"
    );
    assert_eq!(
        outcomes(&records, "heartbeat", &s.object("beating")),
        [("success".to_owned(), None)]
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_daemon_stops_while_the_operator_is_paused_and_starts_again_on_resume() {
    let s = Scene::start("daemon-pause").await;
    apply_peering_manifests(&s.client, true).await;
    let operator = one_beat(&s, Operator::new([guest("timers")]).identity("op")).await;

    let freezer = Freezer::new("default")
        .identity("admin@console")
        .client(s.client.clone());
    freezer
        .clone()
        .freeze(Duration::from_secs(600))
        .await
        .expect("freeze");
    operator
        .journal()
        .wait_for(PATIENCE, |r| {
            guest_logs(r, "timers")
                .contains(&"heartbeat of beating stopped after 1: OPERATOR_PAUSING".to_owned())
        })
        .await
        .expect("the daemon stops when the operator pauses");
    assert!(
        operator
            .journal()
            .records()
            .iter()
            .any(|r| matches!(r, Record::Paused { reason } if reason.contains("admin@console")))
    );
    // Paused: no beat however long it lasts.
    operator
        .advance(Duration::from_secs(60))
        .await
        .expect("settles");
    assert_eq!(guest_logs(&operator.journal().records(), "timers").len(), 2);
    assert_eq!(heartbeat_calls(&operator), 1);

    freezer.resume().await.expect("resume");
    operator
        .journal()
        .wait_for(PATIENCE, |r| calls(r, "heartbeat").len() == 2)
        .await
        .expect("the daemon starts again on resume");
    operator
        .advance(Duration::from_secs(10))
        .await
        .expect("settles");
    assert_eq!(
        guest_logs(&operator.journal().records(), "timers"),
        [
            "beat 1 of beating",
            "heartbeat of beating stopped after 1: OPERATOR_PAUSING",
            "beat 1 of beating"
        ]
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

// Stopping as Kopf stops timers and daemons (KOPF.md §1.9, §1.10), with the `stopping`
// guest: the reasons a call reads, a daemon's cancellation backoff and timeout, the
// latest body, a computed initial delay, sharp timers.

/// The `stopping` guest's log lines so far.
fn stopping_logs(operator: &RunningOperator) -> Vec<String> {
    guest_logs(&operator.journal().records(), "stopping")
}

/// Waits until the `stopping` guest has logged `line`.
async fn logged(operator: &RunningOperator, line: &str) {
    let found = operator
        .journal()
        .wait_for(PATIENCE, |r| {
            guest_logs(r, "stopping").iter().any(|l| l == line)
        })
        .await;
    assert!(
        found.is_ok(),
        "never logged {line:?}; logged {:?}",
        stopping_logs(operator)
    );
}

/// A timer's call sees that it must stop, and why: its object no longer matches its
/// filter, or is being deleted (Kopf's `stopped` and `stopped.reason`, which timers get
/// as daemons do). The deletion completes once the tick returned.
#[tokio::test]
async fn a_timer_sees_why_it_must_stop() {
    let s = Scene::start("stopping-timer").await;
    let operator = s.cluster.start_operator(Operator::new([guest("stopping")]));
    for name in ["mismatching", "deleted"] {
        s.create(kopfexample(
            name,
            &["long-tick"],
            json!({}),
            json!({}),
            json!({}),
        ))
        .await;
        logged(&operator, &format!("long tick of {name} started")).await;
    }
    s.patch(
        "mismatching",
        json!({"metadata": {"labels": {"kapsel.test/long-tick": null}}}),
    )
    .await;
    logged(
        &operator,
        "long tick of mismatching stopped: FILTERS_MISMATCH",
    )
    .await;
    s.delete("deleted").await;
    logged(&operator, "long tick of deleted stopped: RESOURCE_DELETED").await;
    s.tracker.wait_gone("deleted").await;
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// Why the tasks of `handler` ended, as recorded (Kopf's `stopped.reason` then).
fn task_ends(operator: &RunningOperator, handler: &str) -> Vec<String> {
    operator
        .journal()
        .records()
        .into_iter()
        .filter_map(|r| match r {
            Record::TaskEnded {
                handler: h,
                reasons,
                ..
            } if h == handler => Some(reasons),
            _ => None,
        })
        .collect()
}

/// Waits until a task of `handler` has ended; why it stopped.
async fn task_ended(operator: &RunningOperator, handler: &str) -> String {
    operator
        .journal()
        .wait_for(PATIENCE, |r| {
            r.iter()
                .any(|r| matches!(r, Record::TaskEnded { handler: h, .. } if h == handler))
        })
        .await
        .unwrap_or_else(|_| panic!("the task of {handler} never ended"));
    task_ends(operator, handler).remove(0)
}

/// The `stubborn` or `patient` daemon of a new object, deleted once it runs: how long
/// the deletion took to complete, and what the daemon logged.
async fn deleted_while_ignoring_its_stop(
    s: &Scene,
    operator: &RunningOperator,
    which: &str,
) -> (Duration, Vec<String>) {
    s.create(kopfexample(
        which,
        &[which],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    logged(operator, &format!("{which} {which} started")).await;
    let deleted = std::time::Instant::now();
    s.delete(which).await;
    s.tracker.wait_gone(which).await;
    let took = deleted.elapsed();
    let mine = format!("{which} {which} ");
    let logs = stopping_logs(operator)
        .into_iter()
        .filter(|l| l.starts_with(&mine))
        .map(|l| l[mine.len()..].to_owned())
        .collect();
    (took, logs)
}

/// A daemon whose call ignores its stop is abandoned once its `cancellation_timeout` is
/// over (Kopf abandons it with a warning): its call is dropped while it still runs, and
/// the object's deletion completes without waiting for the call's deadline (60 s).
/// Meanwhile the call reads that it was cancelled.
#[tokio::test]
async fn a_daemon_ignoring_its_stop_is_abandoned_after_its_cancellation_timeout() {
    let s = Scene::start("stopping-abandoned").await;
    let operator = s.cluster.start_operator(Operator::new([guest("stopping")]));
    let (took, logs) = deleted_while_ignoring_its_stop(&s, &operator, "stubborn").await;
    assert!(took >= Duration::from_secs(1), "abandoned after {took:?}");
    assert!(
        took < PATIENCE,
        "the deletion waited for the call: {took:?}"
    );
    assert_eq!(
        logs.first().map(String::as_str),
        Some("started"),
        "{logs:?}"
    );
    assert_eq!(
        logs.last().map(String::as_str),
        Some("sees RESOURCE_DELETED|DAEMON_CANCELLED"),
        "it read its reasons until it was abandoned: {logs:?}"
    );
    assert!(
        !logs.iter().any(|l| l.contains("SIGNALLED")),
        "no backoff, no signal: {logs:?}"
    );
    // The call never ended: no outcome was recorded for it.
    assert_eq!(
        outcomes(
            &operator.journal().records(),
            "stubborn",
            &s.object("stubborn")
        ),
        []
    );
    // Its task ended abandoned, and then done, as Kopf's runner ends.
    assert_eq!(
        task_ended(&operator, "stubborn").await,
        "DONE|RESOURCE_DELETED|DAEMON_CANCELLED|DAEMON_ABANDONED"
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// A `cancellation_backoff` comes first: the daemon is signalled (`DAEMON_SIGNALLED`)
/// and given the backoff to exit gracefully, then cancelled for its timeout, and only
/// then abandoned: the deletion takes both.
#[tokio::test]
async fn a_cancellation_backoff_delays_the_abandonment() {
    let s = Scene::start("stopping-backoff").await;
    let operator = s.cluster.start_operator(Operator::new([guest("stopping")]));
    let (took, logs) = deleted_while_ignoring_its_stop(&s, &operator, "patient").await;
    assert!(
        took >= Duration::from_millis(2500),
        "abandoned after {took:?}, before its backoff and timeout were over"
    );
    assert!(
        took < PATIENCE,
        "the deletion waited for the call: {took:?}"
    );
    let signalled = logs
        .iter()
        .position(|l| l == "sees RESOURCE_DELETED|DAEMON_SIGNALLED");
    let cancelled = logs
        .iter()
        .position(|l| l == "sees RESOURCE_DELETED|DAEMON_SIGNALLED|DAEMON_CANCELLED");
    assert!(
        matches!((signalled, cancelled), (Some(a), Some(b)) if a < b),
        "signalled, then cancelled: {logs:?}"
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// A daemon asked to stop without a cancellation timeout is waited for, and checked every
/// `cancellation_polling` seconds while it has not exited (Kopf's "is still exiting"): 0.5 s
/// for the `lingering` daemon, which takes 2 s to exit, so three or four checks (not Kopf's
/// default of one a minute). Its exit is noticed at once: the deletion completes then.
#[tokio::test]
async fn a_daemon_still_exiting_is_checked_every_cancellation_polling() {
    let s = Scene::start("stopping-polling").await;
    let operator = s.cluster.start_operator(Operator::new([guest("stopping")]));
    s.create(kopfexample(
        "lingering",
        &["lingering"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    logged(&operator, "lingering lingering started").await;
    s.delete("lingering").await;
    s.tracker.wait_gone("lingering").await;
    // The call read why it stopped; `DONE` comes only once the task is over.
    logged(&operator, "lingering lingering exits: RESOURCE_DELETED").await;
    assert_eq!(task_ends(&operator, "lingering"), ["DONE|RESOURCE_DELETED"]);
    let checks = operator
        .journal()
        .records()
        .iter()
        .filter(|r| matches!(r, Record::TaskStillExiting { handler, .. } if handler == "lingering"))
        .count();
    assert!(
        (2..=5).contains(&checks),
        "checked {checks} times in the 2 s it took to exit, every 0.5 s"
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// How many GET requests on kopfexamples the API server answered.
fn kopfexample_gets(s: &Scene) -> u64 {
    s.cluster
        .server()
        .request_counts()
        .iter()
        .filter(|c| c.kind.verb == "get" && c.kind.resource == "kopfexamples")
        .map(|c| c.count)
        .sum()
}

/// A running daemon reads the object's latest body after a change, without any API call
/// (Kopf's daemons get a live `body`): the operator hands it the body its watch saw.
#[tokio::test]
async fn a_daemon_reads_the_latest_body_without_an_api_call() {
    let s = Scene::start("stopping-latest").await;
    let operator = s.cluster.start_operator(Operator::new([guest("stopping")]));
    s.create(kopfexample(
        "watched",
        &["watcher"],
        json!({}),
        json!({}),
        json!({"size": 1}),
    ))
    .await;
    logged(&operator, "watcher watched starts at size 1").await;
    let gets = kopfexample_gets(&s);
    s.patch("watched", json!({"spec": {"size": 2}})).await;
    logged(&operator, "watcher watched sees size 2").await;
    assert_eq!(
        kopfexample_gets(&s),
        gets,
        "no object was read from the API"
    );
    assert_eq!(
        calls(&operator.journal().records(), "watcher").len(),
        1,
        "the same call saw the change"
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// A daemon's initial delay computed by the guest for each object (Kopf's callable
/// `initial_delay`): 30 s for this one, on handler time.
#[tokio::test]
async fn an_initial_delay_computed_by_the_guest() {
    let s = Scene::start("stopping-late").await;
    let operator = s
        .cluster
        .start_operator_on_handler_time(Operator::new([guest("stopping")]));
    s.create(kopfexample(
        "late",
        &["late"],
        json!({}),
        json!({}),
        json!({"delay": 30}),
    ))
    .await;
    s.tracker
        .wait_for("late", "the finalizer", |body| !finalizers(body).is_empty())
        .await;
    operator
        .advance(Duration::from_secs(29))
        .await
        .expect("settles");
    assert!(calls(&operator.journal().records(), "late").is_empty());
    operator
        .advance(Duration::from_secs(1))
        .await
        .expect("settles");
    logged(&operator, "late late started").await;
    // It returned: its task is done, for no other reason (Kopf: exited on its own).
    assert_eq!(task_ended(&operator, "late").await, "DONE");
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// A sharp timer's ticks start every `interval` from its first, however long each tick
/// takes (Kopf's `sharp=True`): ticks of 3 s every 10 s start at 0, 10, 20, where a
/// timer without it would start at 0, 13, 26.
#[tokio::test]
async fn a_sharp_timer_keeps_to_its_interval() {
    let s = Scene::start("stopping-sharp").await;
    let operator = s
        .cluster
        .start_operator_on_handler_time(Operator::new([guest("stopping")]));
    s.create(kopfexample(
        "sharp",
        &["sharp"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    logged(&operator, "sharp tick 1 of sharp").await;
    let advance = |seconds| operator.advance(Duration::from_secs(seconds));
    advance(3).await.expect("the first tick ends");
    advance(6).await.expect("settles");
    assert_eq!(calls(&operator.journal().records(), "sharp_tick").len(), 1);
    advance(1).await.expect("settles");
    logged(&operator, "sharp tick 2 of sharp").await;
    advance(3).await.expect("the second tick ends");
    advance(7).await.expect("settles");
    logged(&operator, "sharp tick 3 of sharp").await;
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// What a compiled guest declared through `spawning` reaches the host at load, as
/// `kapsel inspect` shows it.
#[tokio::test]
async fn inspect_shows_the_options_declared_beside_the_registrations() {
    let described = kapsel_host::inspect(&guest("stopping"))
        .await
        .expect("inspect");
    let handler = |id: &str| {
        described["handlers"]
            .as_array()
            .and_then(|handlers| handlers.iter().find(|h| h["id"] == id))
            .cloned()
            .unwrap_or_else(|| panic!("no handler {id} in {described}"))
    };
    assert_eq!(handler("stubborn")["cancellation_timeout_seconds"], 1.0);
    assert_eq!(handler("patient")["cancellation_backoff_seconds"], 1.5);
    assert_eq!(handler("late")["initial_delay_callback"], true);
    assert_eq!(handler("long_tick").get("initial_delay_callback"), None);
}
