//! Sub-handlers (KOPF.md §1.8): declared by a changing handler during its call, run one
//! per cycle with their own progress records, retries and results, nested, executed
//! explicitly, refused outside changing handlers, and continued from Kopf's records.
//! The `subhandlers` guest declares `item-<x>` for each `spec.items` entry, behaving as
//! `spec.behaviours[x]` says.

use std::time::Duration;

use kapsel_tests::*;
use serde_json::{Value, json};

fn operator() -> kapsel_host::Operator {
    let mut limits = kapsel_host::Limits::default();
    limits.min_retry_delay = Duration::from_millis(10);
    kapsel_host::Operator::new([guest("subhandlers")]).limits(limits)
}

fn example(name: &str, spec: Value) -> Value {
    kopfexample(name, &[], json!({}), json!({}), spec)
}

/// The object is handled: the parent's result is there and no record is left.
fn finished(body: &Value) -> bool {
    !status(body, "create_fn").is_null() && progress_keys(body).is_empty()
}

async fn handled(s: &Scene, name: &str) -> Value {
    s.tracker
        .wait_for(name, "creation handled", |b| {
            finished(b) && diff_base(b).is_some()
        })
        .await
}

/// Every version's progress record of `id`, where there was one.
fn records_of(s: &Scene, name: &str, id: &str) -> Vec<Value> {
    s.tracker
        .versions(name)
        .iter()
        .filter_map(|v| record(&v.body, id))
        .collect()
}

#[tokio::test]
async fn sub_handlers_run_one_per_cycle_and_then_the_parent_completes() {
    let s = Scene::start("subhandlers").await;
    let operator = s.cluster.start_operator(operator());
    s.create(example("obj", json!({"items": ["a", "b"]}))).await;
    let done = handled(&s, "obj").await;
    assert_eq!(status(&done, "create_fn"), &json!({"parent": "done"}));
    assert_eq!(status(&done, "create_fn/item-a"), &json!({"item": "a"}));
    assert_eq!(status(&done, "create_fn/item-b"), &json!({"item": "b"}));
    assert_eq!(done["status"]["done"], json!({"a": true, "b": true}));
    assert_eq!(kopf_keys(&done), [DIFF_BASE], "every record purged");

    // The first cycle ran the parent and item-a; the parent's record named both
    // sub-handlers, and each had its own record in Kopf's format.
    let parent = records_of(&s, "obj", "create_fn");
    let first = parent.first().expect("the parent's record");
    assert_eq!(
        first["subrefs"],
        json!(["create_fn/item-a", "create_fn/item-b"])
    );
    assert_eq!(
        (first["retries"].clone(), first["success"].clone()),
        (json!(1), json!(false))
    );
    assert_eq!(
        first["message"],
        json!(""),
        "Kopf's HandlerChildrenRetry has no message"
    );
    let a = records_of(&s, "obj", "create_fn/item-a");
    assert_eq!(a.first().map(|r| r["success"].clone()), Some(json!(true)));
    let b = records_of(&s, "obj", "create_fn/item-b");
    assert_eq!(
        b.first()
            .map(|r| (r["retries"].clone(), r["success"].clone())),
        Some((json!(0), json!(false))),
        "declared at once, run in the next cycle"
    );
    s.settled(&operator, &["obj"]).await;
    assert_calls(
        &operator.journal().records(),
        &s.object("obj"),
        &[("create_fn", 2)],
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_failing_sub_handler_is_retried_on_its_own_record_after_its_delay() {
    let s = Scene::start("subhandlers").await;
    let operator = s.cluster.start_operator_on_handler_time(operator());
    let spec = json!({"items": ["a", "b"], "behaviours": {"a": "fail-once"}});
    s.create(example("obj", spec)).await;
    let failed = |b: &Value| record(b, "create_fn/item-a").is_some_and(|r| r["retries"] == 1);
    let seen = s
        .tracker
        .wait_seen("obj", "item-a failed once", failed)
        .await;
    let a = record(&seen.body, "create_fn/item-a").expect("a record");
    assert_eq!(a["message"], json!("not yet"));
    assert!(a["delayed"].is_string(), "{a}");
    s.settled(&operator, &["obj"]).await;
    // Asap: item-b (no retries) runs while item-a sleeps; then the parent waits for it.
    let waiting = s.tracker.latest("obj").expect("seen").body;
    assert_eq!(status(&waiting, "create_fn/item-b"), &json!({"item": "b"}));
    assert!(
        status(&waiting, "create_fn").is_null(),
        "the parent waits for item-a"
    );

    operator
        .advance(Duration::from_secs(1))
        .await
        .expect("settles");
    let done = handled(&s, "obj").await;
    assert_eq!(status(&done, "create_fn/item-a"), &json!({"item": "a"}));
    s.shutdown().await;
}

/// A permanent error fails a sub-handler at once; a panic traps the whole call, and
/// counts against the sub-handler that was running (its errors mode, retries and
/// backoff), as an exception in it does in Kopf; the parent completes after both.
#[tokio::test]
async fn a_sub_handler_failing_for_good_is_finished_and_the_parent_completes() {
    let s = Scene::start("subhandlers").await;
    let _operator = s.cluster.start_operator(operator());
    let spec = json!({"items": ["a", "b"], "behaviours": {"a": "permanent", "b": "panic"}});
    s.create(example("obj", spec)).await;
    let done = handled(&s, "obj").await;
    assert!(status(&done, "create_fn/item-a").is_null());
    assert!(status(&done, "create_fn/item-b").is_null());
    assert_eq!(status(&done, "create_fn"), &json!({"parent": "done"}));
    let failure = |id: &str| {
        records_of(&s, "obj", id)
            .into_iter()
            .find(|r| r["failure"] == json!(true))
            .unwrap_or_else(|| panic!("{id} failed: {}", s.tracker.dump("obj")))
    };
    assert_eq!(failure("create_fn/item-a")["message"], json!("refused"));
    let b = failure("create_fn/item-b");
    assert_eq!(b["retries"], json!(5), "{b}");
    let message = b["message"].as_str().unwrap_or_default();
    assert!(message.contains("panicked"), "{message}");
    let parent = records_of(&s, "obj", "create_fn");
    assert!(
        parent.iter().all(|r| r["message"] == json!("")),
        "the parent only waited for its sub-handlers: {parent:?}"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn nested_sub_handlers_finish_before_their_parents() {
    let s = Scene::start("subhandlers").await;
    let _operator = s.cluster.start_operator(operator());
    let spec = json!({"items": ["n"], "behaviours": {"n": "nested"}});
    s.create(example("obj", spec)).await;
    let done = handled(&s, "obj").await;
    assert_eq!(done["status"]["done"], json!({"n-a": true, "n-b": true}));
    let parent = records_of(&s, "obj", "create_fn");
    assert_eq!(
        parent.first().map(|r| r["subrefs"].clone()),
        Some(json!([
            "create_fn/item-n",
            "create_fn/item-n/a",
            "create_fn/item-n/b"
        ])),
        "every descendant, for the purge"
    );
    assert!(!records_of(&s, "obj", "create_fn/item-n/a").is_empty());
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    s.shutdown().await;
}

#[tokio::test]
async fn code_after_an_explicit_execute_runs_once_the_sub_handlers_are_done() {
    let s = Scene::start("subhandlers").await;
    let _operator = s.cluster.start_operator(operator());
    s.create(example(
        "obj",
        json!({"items": ["a", "b"], "explicit": true}),
    ))
    .await;
    let done = handled(&s, "obj").await;
    assert_eq!(done["status"]["after_execute"], json!(true));
    let before_b = s
        .tracker
        .versions("obj")
        .into_iter()
        .find(|v| !status(&v.body, "create_fn/item-a").is_null())
        .expect("item-a's result");
    assert!(
        status(&before_b.body, "create_fn/item-b").is_null()
            && before_b.body["status"]["after_execute"].is_null(),
        "{}",
        s.tracker.dump("obj")
    );
    s.shutdown().await;
}

#[tokio::test]
async fn sub_handlers_of_other_handlers_are_refused() {
    let s = Scene::start("subhandlers").await;
    let operator = s.cluster.start_operator(operator());
    let cm = configmap("cm", json!({"kapsel-test": "subhandlers"}));
    create(
        &s.client,
        &core("ConfigMap", "configmaps"),
        Some(&s.namespace),
        cm,
    )
    .await;
    operator
        .journal()
        .wait_for(PATIENCE, |records| {
            guest_logs(records, "subhandlers")
                .iter()
                .any(|line| line.contains("only for changing handlers"))
        })
        .await
        .expect("the refusal reaches the guest");
    s.shutdown().await;
}

/// Kopf 1.45 left the object mid-way: the parent retried once, item-a done, item-b
/// not started. Kapsel goes on from there without calling item-a again.
#[tokio::test]
async fn sub_handlers_continue_from_records_kopf_left() {
    let s = Scene::start("subhandlers").await;
    let started = "2026-12-07T07:00:00.000000+00:00";
    let parent = format!(
        r#"{{"started":"{started}","delayed":"{started}","purpose":"create","retries":1,"success":false,"failure":false,"message":"","subrefs":["create_fn/item-a","create_fn/item-b"]}}"#
    );
    let a = format!(
        r#"{{"started":"{started}","stopped":"{started}","purpose":"create","retries":1,"success":true,"failure":false}}"#
    );
    let b = format!(
        r#"{{"started":"{started}","purpose":"create","retries":0,"success":false,"failure":false}}"#
    );
    let annotations = json!({
        format!("{PREFIX}/create_fn"): parent,
        format!("{PREFIX}/create_fn.item-a"): a,
        format!("{PREFIX}/create_fn.item-b"): b,
    });
    let body = kopfexample(
        "obj",
        &[],
        json!({}),
        annotations,
        json!({"items": ["a", "b"]}),
    );
    s.create(body).await;
    let _operator = s.cluster.start_operator(operator());
    let done = handled(&s, "obj").await;
    assert_eq!(
        done["status"]["done"],
        json!({"b": true}),
        "item-a finished under Kopf and is not called again"
    );
    assert_eq!(status(&done, "create_fn"), &json!({"parent": "done"}));
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    s.shutdown().await;
}
