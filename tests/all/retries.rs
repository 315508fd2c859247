//! Errors, retries and limits of changing handlers (KOPF.md §4.4, §4.7, §5), and
//! recovery from API errors on the host's own patches (§4.7 step 4, §5.4).

use std::time::Duration;

use kapsel_host::testing::{Fault, RequestMatcher};
use kapsel_tests::*;
use serde_json::{Value, json};

fn seconds(record: &Value, field: &str) -> f64 {
    kopf_time(record[field].as_str().unwrap_or_default())
}

#[tokio::test]
async fn a_temporary_error_is_retried_after_its_delay_until_success() {
    let s = Scene::start("flaky").await;
    let operator = s.operator();
    s.create(kopfexample(
        "obj",
        &["flaky"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    let retry = |n: u64| move |b: &Value| record(b, "flaky").is_some_and(|r| r["retries"] == n);
    let first = s.tracker.wait_seen("obj", "first failure", retry(1)).await;
    let second = s.tracker.wait_seen("obj", "second failure", retry(2)).await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| handled_with(b, &["flaky"]))
        .await;

    let r1 = record(&first.body, "flaky").expect("record");
    assert_eq!(
        (
            r1["purpose"].clone(),
            r1["success"].clone(),
            r1["failure"].clone(),
            r1["message"].clone()
        ),
        (
            json!("create"),
            json!(false),
            json!(false),
            json!("not yet")
        )
    );
    assert!(r1.get("stopped").is_none(), "{r1}");
    let delay = seconds(&r1, "delayed") - seconds(&r1, "started");
    assert!(
        (1.0..1.9).contains(&delay),
        "delayed 1 s after the failure: {r1}"
    );
    let r2 = record(&second.body, "flaky").expect("record");
    assert_eq!(
        r2["started"], r1["started"],
        "started is the first attempt's"
    );
    assert!(
        seconds(&r2, "delayed") - seconds(&r1, "delayed") >= 1.0,
        "the second attempt came after the first delay: {r1} {r2}"
    );
    assert!(
        second.at - first.at >= Duration::from_millis(950),
        "the delay is respected: {:?}",
        second.at - first.at
    );
    // Nothing else to patch while waiting: the host sleeps, then touches the object
    // (§4.7 step 7) no earlier than the retry is due.
    let touched = s
        .tracker
        .versions("obj")
        .into_iter()
        .filter_map(|v| annotations(&v.body).get(TOUCH).cloned())
        .next()
        .unwrap_or_else(|| panic!("no touch-dummy: {}", s.tracker.dump("obj")));
    // (KOPF.md shows the marker as a timestamp; its exact format is not checked here.)
    let touched_at = kopf_time(&format!("{}+00:00", touched.trim_end_matches("+00:00")));
    assert!(
        touched_at >= seconds(&r1, "delayed") - 0.01,
        "{touched} vs {r1}"
    );

    assert_eq!(
        kopf_keys(&done),
        [DIFF_BASE],
        "records and touch-dummy purged"
    );
    let result = status(&done, "flaky");
    assert_eq!(result["retry"], 2);
    assert!(
        result["runtime"].as_f64().unwrap_or_default() >= 2.0,
        "{result}"
    );
    let o = s.object("obj");
    assert_eq!(
        outcomes(&operator.journal().records(), "flaky", &o),
        [
            ("retry".to_owned(), None),
            ("retry".to_owned(), None),
            ("success".to_owned(), None)
        ]
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

#[tokio::test]
async fn a_permanent_error_is_final_and_the_cycle_still_completes() {
    let s = Scene::start("permanent").await;
    let operator = s.operator();
    s.create(kopfexample(
        "obj",
        &["permanent"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    let failed = s
        .tracker
        .wait_seen("obj", "the permanent failure's record", |b| {
            record(b, "permanent_fn").is_some_and(|r| r["failure"] == true)
        })
        .await;
    let r = record(&failed.body, "permanent_fn").expect("record");
    assert_eq!(
        (
            r["retries"].clone(),
            r["success"].clone(),
            r["message"].clone()
        ),
        (json!(1), json!(false), json!("nope"))
    );
    assert!(
        r.get("stopped").is_some() && r.get("delayed").is_none(),
        "{r}"
    );

    // §5.2: a final failure still lets the cycle finish and the diff-base advance.
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["after_permanent"])
        })
        .await;
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    assert_eq!(
        status(&done, "permanent_fn"),
        &Value::Null,
        "no result on failure"
    );
    assert_eq!(status(&done, "after_permanent"), &json!({"done": true}));
    quiet_period().await;
    let o = s.object("obj");
    let records = operator.journal().records();
    assert_eq!(
        outcomes(&records, "permanent_fn", &o),
        [("failure".to_owned(), None)]
    );
    assert_eq!(calls_for(&records, "after_permanent", &o), 2);
    // Log lines are not posted as Events by default since Kopf 1.44 (§6.5).
    assert_eq!(s.events_about("obj").await, Vec::<Value>::new());
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// `retries = 2` means two attempts; `timeout = 1.5` with 1 s delays means the second
/// failure is final at once, by the look-ahead (§5.2).
#[tokio::test]
async fn retries_and_timeout_limits_end_the_attempts() {
    let s = Scene::start("limits").await;
    let operator = s.operator();
    s.create(kopfexample(
        "obj",
        &["limits"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    let limited = s
        .tracker
        .wait_seen("obj", "limited gave up", |b| {
            record(b, "limited").is_some_and(|r| r["failure"] == true)
        })
        .await;
    let r = record(&limited.body, "limited").expect("record");
    assert_eq!(
        (r["retries"].clone(), r["success"].clone()),
        (json!(2), json!(false))
    );
    let message = r["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("'limited'")
            && message.contains("2 retries")
            && message.ends_with("always failing"),
        "{message}"
    );
    let slow = s
        .tracker
        .wait_seen("obj", "slow failed once", |b| {
            record(b, "slow").is_some_and(|r| r["retries"] == 1)
        })
        .await;
    let r = record(&slow.body, "slow").expect("record");
    assert_eq!(
        (r["failure"].clone(), r["message"].clone()),
        (json!(false), json!("too slow"))
    );

    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| diff_base(b).is_some())
        .await;
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    assert_eq!(status(&done, "limited"), &Value::Null);
    assert_eq!(status(&done, "slow"), &Value::Null);
    quiet_period().await;
    let o = s.object("obj");
    let records = operator.journal().records();
    let retry_then_fail = [("retry".to_owned(), None), ("failure".to_owned(), None)];
    assert_eq!(outcomes(&records, "limited", &o), retry_then_fail);
    assert_eq!(outcomes(&records, "slow", &o), retry_then_fail);
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// A trap is an arbitrary error: per the errors mode, retried after the backoff
/// (default `temporary`), final (`permanent`) or a success without result (`ignored`).
#[tokio::test]
async fn a_trapping_handler_follows_its_errors_mode() {
    let s = Scene::start("trap").await;
    let operator = s.operator();
    s.create(kopfexample(
        "obj",
        &["trap"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    let retried = s
        .tracker
        .wait_seen("obj", "trapper retried", |b| {
            record(b, "trapper").is_some_and(|r| r["retries"] == 1)
        })
        .await;
    let r = record(&retried.body, "trapper").expect("record");
    assert_eq!(
        (r["success"].clone(), r["failure"].clone()),
        (json!(false), json!(false))
    );
    assert!(r["message"].as_str().is_some_and(|m| !m.is_empty()), "{r}");
    let backoff = seconds(&r, "delayed") - seconds(&r, "started");
    assert!(
        (0.5..1.4).contains(&backoff),
        "retried after the 0.5 s backoff: {r}"
    );

    let permanent = s
        .tracker
        .wait_seen("obj", "trap_permanent failed", |b| {
            record(b, "trap_permanent").is_some_and(|r| r["failure"] == true)
        })
        .await;
    let r = record(&permanent.body, "trap_permanent").expect("record");
    assert!(r["message"].as_str().is_some_and(|m| !m.is_empty()), "{r}");
    let ignored = s
        .tracker
        .wait_seen("obj", "trap_ignored done", |b| {
            record(b, "trap_ignored").is_some_and(|r| r["success"] == true)
        })
        .await;
    let r = record(&ignored.body, "trap_ignored").expect("record");
    assert_eq!(
        (r["retries"].clone(), r["failure"].clone()),
        (json!(1), json!(false))
    );

    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| handled_with(b, &["trapper"]))
        .await;
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    assert_eq!(status(&done, "trapper"), &json!({"recovered_at_retry": 1}));
    assert_eq!(status(&done, "trap_permanent"), &Value::Null);
    assert_eq!(status(&done, "trap_ignored"), &Value::Null);
    quiet_period().await;
    let o = s.object("obj");
    let records = operator.journal().records();
    let trap = || Some("trap".to_owned());
    assert_eq!(
        outcomes(&records, "trapper", &o),
        [("retry".to_owned(), trap()), ("success".to_owned(), None)]
    );
    assert_eq!(
        outcomes(&records, "trap_permanent", &o),
        [("failure".to_owned(), trap())]
    );
    assert_eq!(
        outcomes(&records, "trap_ignored", &o),
        [("ignored".to_owned(), trap())]
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// Waits until the API server has answered every injected fault.
async fn until_faults_served(s: &Scene) {
    let faults = s.cluster.server().faults();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while faults.unserved() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fault was never served"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A 409 on the merge-patch is an unexpected API error (§5.5: not retried as a
/// request): the object is throttled for 1 s (§5.4). Kopf then waits for the object's
/// next event; Kapsel deliberately retries the same event once the throttling is over
/// (process.rs), so no later event is needed. The end state must be as if nothing
/// happened.
#[tokio::test]
async fn a_conflict_on_a_patch_is_recovered_from_after_throttling() {
    let s = Scene::start("conflict").await;
    let operator = s.operator();
    s.cluster.server().faults().fail_next(
        1,
        RequestMatcher::any().verb("patch").plural("kopfexamples"),
        Fault::Conflict,
    );
    // No finalizer for this group: the first patch is the creation cycle's merge-patch.
    s.create(kopfexample(
        "obj",
        &["optional"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    ))
    .await;
    until_faults_served(&s).await;
    let failed_at = std::time::Instant::now();
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_quiet"])
        })
        .await;
    let handled = s
        .tracker
        .versions("obj")
        .into_iter()
        .find(|v| diff_base(&v.body).is_some())
        .expect("handled");
    assert!(
        handled.at - failed_at >= Duration::from_millis(900),
        "throttled for 1 s first: {:?}",
        handled.at - failed_at
    );
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    assert_eq!(
        diff_base(&done).as_deref(),
        Some(
            "{\"spec\":{\"field\":\"value\"},\"metadata\":{\"labels\":{\"kapsel.test/optional\":\"yes\"}}}\n"
        )
    );
    assert_eq!(status(&done, "create_quiet"), &json!({"done": true}));
    assert_eq!(
        calls_for(
            &operator.journal().records(),
            "create_quiet",
            &s.object("obj")
        ),
        2,
        "handled again because the first result was lost"
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// A 422 on the finalizer's JSON patch (a failed `resourceVersion` test, i.e. the
/// object changed meanwhile) keeps the change for the next cycle (§4.7 step 4), without
/// throttling: the next event adds the finalizer and creation goes on.
#[tokio::test]
async fn a_rejected_finalizer_patch_is_retried_on_the_next_event() {
    let s = Scene::start("invalid").await;
    let operator = s.operator();
    s.cluster.server().faults().fail_next(
        1,
        RequestMatcher::any().verb("patch").plural("kopfexamples"),
        Fault::Invalid,
    );
    s.create(kopfexample(
        "obj",
        &["basic"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    ))
    .await;
    until_faults_served(&s).await;
    let latest = s.tracker.wait_for("obj", "created", |_| true).await;
    assert!(finalizers(&latest).is_empty() && kopf_keys(&latest).is_empty());
    // The change that made the resourceVersion test fail, as another client would make.
    s.patch_status("obj", json!({"status": {"nudge": 1}})).await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_fn"])
        })
        .await;
    assert_eq!(finalizers(&done), [FINALIZER]);
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    assert_eq!(
        status(&done, "create_fn"),
        &json!({"message": "created", "field": "value"})
    );
    let records = operator.journal().records();
    assert_eq!(calls_for(&records, "create_fn", &s.object("obj")), 1);
    operator.stop().await.expect("stop");
    s.shutdown().await;
}
