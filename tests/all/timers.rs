//! Timers and daemons (KOPF.md §1.9, §1.10): the case files of `tests/cases/timers/`
//! and `tests/cases/daemons/`, each run by
//! `kapsel test` in-process against the `timers` guest, on a fresh embedded cluster with
//! handler time advanced instead of waited for. One test per case file, so that a
//! failure names the behaviour; the report (with what the operator did) is printed.

use kapsel_tests::{case_passes, guest};

/// Runs one case file of `tests/cases/timers/` against the `timers` guest.
async fn passes(file: &str) {
    passes_in("timers", file).await;
}

/// Runs one case file of `tests/cases/<dir>/` against the `timers` guest.
async fn passes_in(dir: &str, file: &str) {
    case_passes("timers", dir, file).await;
}

/// Calls 1, 2, 3 at 0, 10 and 20 s; `status.tick.ticks` follows; the finalizer is on.
#[tokio::test]
async fn an_interval_timer_ticks_every_interval() {
    passes("ticks.yaml").await;
}

/// Not called at 29 s, called at 30 s, then every 10 s; no event type, no reason.
#[tokio::test]
async fn the_first_call_waits_for_the_initial_delay() {
    passes("initial-delay.yaml").await;
}

/// Called after 20 quiet seconds (a change starts them over), not again until the
/// next change plus 20 s.
#[tokio::test]
async fn an_idle_timer_waits_for_quiet_seconds_after_each_change() {
    passes("idle.yaml").await;
}

/// With both: each tick waits for the interval and for the idle time.
#[tokio::test]
async fn an_interval_timer_with_idle_also_waits_for_quiet_seconds() {
    passes("idle-and-interval.yaml").await;
}

/// Retried after the error's 3 s delay with retry 1; the next tick starts at retry 0.
#[tokio::test]
async fn a_temporary_error_is_retried_after_its_delay_and_the_count_starts_over() {
    passes("temporary-error.yaml").await;
}

/// No retry; the next tick after the interval.
#[tokio::test]
async fn a_permanent_error_ends_the_tick_not_the_timer() {
    passes("permanent-error.yaml").await;
}

/// Retried after the default 60 s backoff; `retries = 2` ends the tick; the next tick
/// after the interval, with its own retries.
#[tokio::test]
async fn an_arbitrary_error_is_retried_after_the_backoff_until_retries_run_out() {
    passes("arbitrary-error.yaml").await;
}

/// Filters stop matching: no more calls, the finalizer goes.
#[tokio::test]
async fn a_timer_stops_and_releases_the_finalizer_when_its_filters_stop_matching() {
    passes("label-removed.yaml").await;
}

/// Unmatched objects are left alone; a label that makes the timer match starts it.
#[tokio::test]
async fn a_timer_starts_when_a_label_makes_its_filters_match() {
    passes("label-added.yaml").await;
}

/// Deletion stops the timer and releases the finalizer: the object goes, no more calls.
#[tokio::test]
async fn deleting_the_object_stops_its_timer_and_lets_it_go() {
    passes("deletion.yaml").await;
}

/// A daemon beats on handler time until its object is deleted; then its sleep answers
/// false, it returns, and the finalizer goes.
#[tokio::test]
async fn a_daemon_runs_until_its_object_is_deleted() {
    passes_in("daemons", "heartbeat.yaml").await;
}

/// A daemon that returns is not started again, and its object loses the finalizer.
#[tokio::test]
async fn a_daemon_that_returns_is_done_for_good() {
    passes_in("daemons", "one-shot.yaml").await;
}

/// A daemon that fails for good is not started again, by a change or by time passing.
#[tokio::test]
async fn a_daemon_that_failed_for_good_is_not_restarted() {
    passes_in("daemons", "failed-for-good.yaml").await;
}

/// A temporary error restarts the daemon after its delay; filters that stop matching
/// stop it.
#[tokio::test]
async fn a_failed_daemon_restarts_and_stops_when_filters_stop_matching() {
    passes_in("daemons", "restarting.yaml").await;
}

/// On the real clock: a daemon's sleeps do not count against its call budget (1 s for
/// sleeps of 0.6, 0.6 and 2 s: together, and the last alone, longer than the budget and
/// the host's 0.5 s grace). The budget leaves the call's own work a second, however
/// loaded the machine.
#[tokio::test]
async fn a_daemons_sleeps_do_not_count_against_its_budget() {
    let s = kapsel_tests::Scene::start("daemon-budget").await;
    let operator = s
        .cluster
        .start_operator(kapsel_host::Operator::new([guest("timers")]));
    s.create(kapsel_tests::kopfexample(
        "sleepy",
        &["sleeper"],
        serde_json::json!({}),
        serde_json::json!({}),
        serde_json::json!({"field": "value"}),
    ))
    .await;
    let done = s
        .tracker
        .wait_for("sleepy", "the sleeper returned", |b| {
            !b["status"]["sleeper"].is_null()
        })
        .await;
    assert_eq!(
        done["status"]["sleeper"],
        serde_json::json!({"slept": 3}),
        "{}",
        s.tracker.dump("sleepy")
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}
