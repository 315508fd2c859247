//! Errors, retries and limits of changing handlers (KOPF.md §4.4, §4.7, §5), and
//! recovery from API errors on the host's own patches (§4.7 step 4, §5.4).

use std::time::Duration;

use kapsel_host::Record;
use kapsel_host::testing::{Fault, RequestMatcher, RunningOperator};
use kapsel_tests::*;
use serde_json::{Value, json};

fn seconds(record: &Value, field: &str) -> f64 {
    kopf_time(record[field].as_str().unwrap_or_default())
}

/// Two times in Kopf's format are this many seconds apart (to their microseconds).
fn assert_apart(later: f64, earlier: f64, by: f64, what: &str) {
    assert!(
        (later - earlier - by).abs() < 1e-5,
        "{what}: {later} - {earlier} is not {by}"
    );
}

async fn advance(operator: &RunningOperator, by: Duration) {
    operator.advance(by).await.expect("the operator settles");
}

/// On handler time: each retry comes exactly when its delay is over, not a microsecond
/// earlier.
#[tokio::test]
async fn a_temporary_error_is_retried_after_its_delay_until_success() {
    let s = Scene::start("flaky").await;
    let operator = s.operator_on_handler_time();
    s.create(kopfexample(
        "obj",
        &["flaky"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    let o = s.object("obj");
    let retry = |n: u64| move |b: &Value| record(b, "flaky").is_some_and(|r| r["retries"] == n);
    let first = s.tracker.wait_seen("obj", "first failure", retry(1)).await;
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
    assert_apart(
        seconds(&r1, "delayed"),
        seconds(&r1, "started"),
        1.0,
        "delayed",
    );

    // 1 ms before the delay is over: no second attempt.
    advance(&operator, Duration::from_millis(999)).await;
    let retried = |records: &[Record]| outcomes(records, "flaky", &o);
    assert_eq!(retried(&operator.journal().records()).len(), 1);
    advance(&operator, Duration::from_millis(1)).await;
    let second = s.tracker.wait_seen("obj", "second failure", retry(2)).await;
    let r2 = record(&second.body, "flaky").expect("record");
    assert_eq!(
        r2["started"], r1["started"],
        "started is the first attempt's"
    );
    assert_apart(
        seconds(&r2, "delayed"),
        seconds(&r1, "delayed"),
        1.0,
        "delayed again",
    );
    // Nothing else to patch while waiting: the host sleeps, then touches the object
    // (§4.7 step 7) when the retry is due.
    let touched = s
        .tracker
        .versions("obj")
        .into_iter()
        .filter_map(|v| annotations(&v.body).get(TOUCH).cloned())
        .next()
        .unwrap_or_else(|| panic!("no touch-dummy: {}", s.tracker.dump("obj")));
    // (KOPF.md shows the marker as a timestamp; its exact format is not checked here.)
    let touched_at = kopf_time(&format!("{}+00:00", touched.trim_end_matches("+00:00")));
    assert_apart(touched_at, seconds(&r1, "delayed"), 0.0, "touched");

    advance(&operator, Duration::from_millis(999)).await;
    assert_eq!(retried(&operator.journal().records()).len(), 2);
    advance(&operator, Duration::from_millis(1)).await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| handled_with(b, &["flaky"]))
        .await;
    assert_eq!(
        kopf_keys(&done),
        [DIFF_BASE],
        "records and touch-dummy purged"
    );
    let result = status(&done, "flaky");
    assert_eq!(result["retry"], 2);
    let runtime = result["runtime"].as_f64().unwrap_or_default();
    assert_apart(runtime, 0.0, 2.0, "runtime");
    s.settled(&operator, &["obj"]).await;
    assert_eq!(
        retried(&operator.journal().records()),
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
    s.settled(&operator, &["obj"]).await;
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
/// failure is final at once, by the look-ahead (§5.2). On handler time: `limited` fails
/// at 0 and (for good) at 0.3 s, `slow` at 0 and (for good) at 1 s.
#[tokio::test]
async fn retries_and_timeout_limits_end_the_attempts() {
    let s = Scene::start("limits").await;
    let operator = s.operator_on_handler_time();
    s.create(kopfexample(
        "obj",
        &["limits"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    let o = s.object("obj");
    let ended = |handler: &str| outcomes(&operator.journal().records(), handler, &o);
    let retry = || ("retry".to_owned(), None);
    let failure = || ("failure".to_owned(), None);
    s.tracker
        .wait_seen("obj", "both failed once", |b| {
            ["limited", "slow"]
                .iter()
                .all(|h| record(b, h).is_some_and(|r| r["retries"] == 1))
        })
        .await;
    s.settled(&operator, &["obj"]).await;
    assert_eq!(
        (ended("limited"), ended("slow")),
        (vec![retry()], vec![retry()])
    );

    advance(&operator, Duration::from_millis(300)).await;
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
    let r = record(&limited.body, "slow").expect("record");
    assert_eq!(
        (r["failure"].clone(), r["message"].clone()),
        (json!(false), json!("too slow"))
    );
    assert_eq!(ended("slow"), [retry()], "not yet due");

    advance(&operator, Duration::from_millis(700)).await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| diff_base(b).is_some())
        .await;
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    assert_eq!(status(&done, "limited"), &Value::Null);
    assert_eq!(status(&done, "slow"), &Value::Null);
    s.settled(&operator, &["obj"]).await;
    assert_eq!(ended("limited"), [retry(), failure()]);
    assert_eq!(ended("slow"), [retry(), failure()]);
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// A trap is an arbitrary error: per the errors mode, retried after the backoff
/// (default `temporary`), final (`permanent`) or a success without result (`ignored`).
#[tokio::test]
async fn a_trapping_handler_follows_its_errors_mode() {
    let s = Scene::start("trap").await;
    let operator = s.operator_on_handler_time();
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
    assert_apart(
        seconds(&r, "delayed"),
        seconds(&r, "started"),
        0.5,
        "backoff",
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

    advance(&operator, Duration::from_millis(500)).await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| handled_with(b, &["trapper"]))
        .await;
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    assert_eq!(status(&done, "trapper"), &json!({"recovered_at_retry": 1}));
    assert_eq!(status(&done, "trap_permanent"), &Value::Null);
    assert_eq!(status(&done, "trap_ignored"), &Value::Null);
    s.settled(&operator, &["obj"]).await;
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

/// A 422 on the merge-patch that names no result is an unexpected API error (§5.5: not
/// retried as a request): the object is throttled for 1 s (§5.4). Kopf then waits for
/// the object's next event; Kapsel deliberately retries the same event once the
/// throttling is over (process.rs), so no later event is needed. The end state must be
/// as if nothing happened. (A conflict is no unexpected error: see `conflicts.rs`.)
#[tokio::test]
async fn an_unexpected_error_on_a_patch_is_recovered_from_after_throttling() {
    let s = Scene::start("invalid").await;
    let operator = s.operator_on_handler_time();
    s.create_with_a_failing_patch("obj", "optional", Fault::Invalid)
        .await;
    // Throttled on handler time: nothing happens until 1 s has passed.
    let calls = || {
        calls_for(
            &operator.journal().records(),
            "create_quiet",
            &s.object("obj"),
        )
    };
    s.settled(&operator, &["obj"]).await;
    advance(&operator, Duration::from_millis(999)).await;
    let latest = s.tracker.latest("obj").expect("seen").body;
    assert_eq!((calls(), diff_base(&latest)), (1, None), "still throttled");
    advance(&operator, Duration::from_millis(1)).await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_quiet"])
        })
        .await;
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    assert_eq!(
        diff_base(&done).as_deref(),
        Some(
            "{\"spec\":{\"field\":\"value\"},\"metadata\":{\"labels\":{\"kapsel.test/optional\":\"yes\"}}}\n"
        )
    );
    assert_eq!(status(&done, "create_quiet"), &json!({"done": true}));
    assert_eq!(
        calls(),
        2,
        "handled again because the first result was lost"
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// `queueing.error_delays` (Kopf's setting) changes how long an object whose processing
/// failed is throttled: with `[3]`, the refusal above holds it back for 3 s, not 1 s.
#[tokio::test]
async fn the_error_delays_setting_changes_the_throttling() {
    let s = Scene::start("invalid-delays").await;
    let mut settings = kapsel_host::Settings::default();
    settings.set("queueing.error_delays", "[3]").unwrap();
    let operator = s
        .cluster
        .start_operator_on_handler_time(changes_operator().settings(settings));
    s.create_with_a_failing_patch("obj", "optional", Fault::Invalid)
        .await;
    s.settled(&operator, &["obj"]).await;
    advance(&operator, Duration::from_millis(2999)).await;
    let latest = s.tracker.latest("obj").expect("seen").body;
    assert_eq!(diff_base(&latest), None, "still throttled");
    advance(&operator, Duration::from_millis(1)).await;
    s.tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_quiet"])
        })
        .await;
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// An object deleted between the two writes of a cycle: its results are written to
/// `/status`, then the object's patch fails (500), and its retry a second later finds
/// the object gone (404). The echo of the status write, still queued, does not say the
/// cause was handled; the handler must not run again for an object that no longer
/// exists (it would make its children again, after their owner).
#[tokio::test]
async fn an_object_gone_between_the_writes_of_a_cycle_is_not_handled_again() {
    let s = Scene::start("gone-between").await;
    let operator = s.operator();
    s.cluster.server().faults().fail_next(
        1,
        RequestMatcher::any()
            .verb("patch")
            .plural("kopfexamples")
            .subresource(""),
        Fault::InternalError,
    );
    // No finalizer for this group: the deletion removes the object at once.
    s.create(kopfexample(
        "obj",
        &["optional"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    ))
    .await;
    s.faults_served().await;
    s.tracker
        .wait_for("obj", "the results written", |o| {
            o["status"]["create_quiet"] == json!({"done": true})
        })
        .await;
    s.delete("obj").await;
    s.tracker.wait_gone("obj").await;
    s.settled(&operator, &["obj"]).await;
    let records = operator.journal().records();
    assert_eq!(
        outcomes(&records, "create_quiet", &s.object("obj")),
        [("success".to_owned(), None)],
        "handled once"
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
    s.faults_served().await;
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

/// What the sandbox stops — a call past its deadline, or past its memory cap — is an
/// arbitrary error of a changing handler: retried after its `backoff` until its
/// `retries` run out, or final at once with `errors = "permanent"` (KOPF.md §5). On
/// handler time: `overeat` fails at 0 and (for good) at 4 s, `overrun` at 0, 7 and (for
/// good) 14 s, `overrun_for_good` once at 0.
#[tokio::test]
async fn overruns_of_changing_handlers_follow_their_backoff_and_errors_mode() {
    let s = Scene::start("overruns").await;
    let operator = s.operator_on_handler_time();
    s.create(kopfexample(
        "obj",
        &["overruns"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    let o = s.object("obj");
    let ended = |handler: &str| outcomes(&operator.journal().records(), handler, &o);
    let retry = |fault: &str| ("retry".to_owned(), Some(fault.to_owned()));
    let failure = |fault: &str| ("failure".to_owned(), Some(fault.to_owned()));
    let first = s
        .tracker
        .wait_seen("obj", "every handler's first attempt", |b| {
            ["overrun", "overeat", "overrun_for_good"]
                .iter()
                .all(|h| record(b, h).is_some_and(|r| r["retries"] == 1))
        })
        .await;
    s.settled(&operator, &["obj"]).await;
    assert_eq!(ended("overrun"), [retry("timeout")]);
    assert_eq!(ended("overeat"), [retry("memory")]);
    assert_eq!(ended("overrun_for_good"), [failure("timeout")]);
    let delay = |handler: &str| {
        let r = record(&first.body, handler).expect("record");
        seconds(&r, "delayed") - seconds(&r, "started")
    };
    assert_apart(delay("overrun"), 0.0, 7.0, "overrun's backoff");
    assert_apart(delay("overeat"), 0.0, 4.0, "overeat's backoff");
    let r = record(&first.body, "overrun_for_good").expect("record");
    assert!(
        r["failure"] == true && r.get("delayed").is_none(),
        "final at once: {r}"
    );

    // t = 3.999: nothing is due yet; t = 4: overeat's last attempt.
    advance(&operator, Duration::from_millis(3999)).await;
    assert_eq!(ended("overeat").len(), 1);
    advance(&operator, Duration::from_millis(1)).await;
    assert_eq!(ended("overeat"), [retry("memory"), failure("memory")]);
    assert_eq!(ended("overrun").len(), 1);
    // t = 7: overrun's second attempt; t = 14: its third and last.
    advance(&operator, Duration::from_secs(3)).await;
    assert_eq!(ended("overrun"), [retry("timeout"), retry("timeout")]);
    advance(&operator, Duration::from_millis(6999)).await;
    assert_eq!(ended("overrun").len(), 2);
    advance(&operator, Duration::from_millis(1)).await;
    assert_eq!(
        ended("overrun"),
        [retry("timeout"), retry("timeout"), failure("timeout")]
    );
    let done = s
        .tracker
        .wait_for("obj", "the cycle completes", |b| diff_base(b).is_some())
        .await;
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    s.settled(&operator, &["obj"]).await;
    assert_eq!(ended("overrun_for_good"), [failure("timeout")]);
    assert!(!operator.is_finished(), "the host goes on");
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// The operator's own patch answered 503 is retried as Kopf retries its requests
/// (KOPF.md §5.5: after 1 s), by the one layer that retries: the server sees the 503
/// and, a second later, the patch that lands — not a retry 5 ms later from kube's
/// `server_retry` layer under it (which also retried what the guests sent).
#[tokio::test]
async fn a_patch_answered_503_is_retried_after_kopfs_backoff() {
    let s = Scene::start("patch-503").await;
    let operator = s.operator();
    let server = s.cluster.server();
    let patches = |code: u16| -> u64 {
        server
            .request_counts()
            .iter()
            .filter(|c| {
                c.kind.verb == "patch"
                    && c.kind.resource == "kopfexamples"
                    && c.kind.subresource.is_empty()
                    && c.kind.code == code
            })
            .map(|c| c.count)
            .sum()
    };
    server.faults().fail_next(
        1,
        RequestMatcher::any()
            .verb("patch")
            .plural("kopfexamples")
            .subresource(""),
        Fault::ServiceUnavailable,
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
    s.faults_served().await;
    let refused = std::time::Instant::now();
    s.tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_quiet"])
        })
        .await;
    let waited = refused.elapsed();
    assert!(
        // Half of it: the moment the test sees the fault served lags the 503 a little.
        waited >= Duration::from_millis(500),
        "retried after {waited:?}, not after Kopf's first backoff (1 s)"
    );
    assert_eq!((patches(503), patches(200)), (1, 1));
    let records = operator.journal().records();
    assert_eq!(calls_for(&records, "create_quiet", &s.object("obj")), 1);
    operator.stop().await.expect("stop");
    s.shutdown().await;
}
