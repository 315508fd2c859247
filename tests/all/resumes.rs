//! Restarts through the real host: an object created while the operator was down, and
//! a restart without and after a change (resume handlers, KOPF.md §1.6, §4.3), and one
//! function stacked as creation, update and resume handler.

use std::time::Duration;

use kapsel_host::Record;
use kapsel_host::testing::ServerConfig;
use kapsel_tests::*;
use serde_json::{Value, json};

/// §1.6 (DOC≠CODE): creation never mixes with resuming, even in the initial listing.
#[tokio::test]
async fn an_object_created_while_the_operator_was_down_gets_creation_handlers_only() {
    let s = Scene::start("created-while-down").await;
    s.create(kopfexample(
        "obj",
        &["basic"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    ))
    .await;
    let operator = s.operator();
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_fn", "field_fn/spec.field"])
        })
        .await;
    assert_eq!(finalizers(&done), [FINALIZER]);
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    assert_eq!(status(&done, "resume_fn"), &Value::Null);
    s.settled(&operator, &["obj"]).await;
    let records = operator.journal().records();
    let o = s.object("obj");
    assert_calls(
        &records,
        &o,
        &[
            ("create_fn", 1),
            ("field_fn/spec.field", 1),
            ("resume_fn", 0),
        ],
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

#[tokio::test]
async fn a_restart_without_changes_runs_only_resume_handlers_once() {
    // No bookmark within the test: a stream's resourceVersion stays where its last event
    // left it, so that a write it does not watch leaves it behind.
    let config = ServerConfig::default().bookmark_interval(Duration::from_secs(3600));
    let s = Scene::start_with("resume", config).await;
    let first = s.operator();
    s.create(kopfexample(
        "obj",
        &["basic"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    ))
    .await;
    let handled = s
        .tracker
        .wait_for("obj", "creation handled", |b| diff_base(b).is_some())
        .await;
    first.stop().await.expect("stop");

    let second = s.operator();
    let resumed = s
        .tracker
        .wait_for("obj", "resumed", |b| !status(b, "resume_fn").is_null())
        .await;
    assert_eq!(status(&resumed, "resume_fn"), &json!({"reason": "resume"}));
    assert_eq!(
        diff_base(&resumed),
        diff_base(&handled),
        "the essence is the same"
    );
    assert_eq!(kopf_keys(&resumed), [DIFF_BASE]);
    assert_eq!(finalizers(&resumed), [FINALIZER]);

    // A re-listing (watch history lost) is not a new start: no second resume (§1.6,
    // "fully handled once"). The stream falls behind, its history expires, its
    // connection drops: it reconnects, gets 410 Gone and relists.
    second.settle([&resumed]).await.expect("resuming is over");
    create(
        &s.client,
        &core("ConfigMap", "configmaps"),
        Some(&s.namespace),
        configmap("unwatched", json!({})),
    )
    .await;
    s.cluster.server().faults().expire_history();
    s.cluster.server().faults().drop_watches();
    second
        .journal()
        .wait_for(PATIENCE, |r| {
            r.iter().any(|r| {
                matches!(r, Record::Relisted { resource, .. } if resource == "kopfexamples.v1.kopf.dev")
            })
        })
        .await
        .expect("the stream relists");
    second.settle([]).await.expect("the relisting is handled");
    let records = second.journal().records();
    let o = s.object("obj");
    assert_calls(
        &records,
        &o,
        &[
            ("resume_fn", 1),
            ("create_fn", 0),
            ("update_fn", 0),
            ("field_fn/spec.field", 0),
        ],
    );
    second.stop().await.expect("stop");
    s.shutdown().await;
}

#[tokio::test]
async fn a_restart_after_a_change_runs_update_field_and_resume_handlers() {
    let s = Scene::start("resume-changed").await;
    let first = s.operator();
    s.create(kopfexample(
        "obj",
        &["basic"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    ))
    .await;
    s.tracker
        .wait_for("obj", "creation handled", |b| diff_base(b).is_some())
        .await;
    first.stop().await.expect("stop");
    s.patch("obj", json!({"spec": {"field": "changed while down"}}))
        .await;

    let second = s.operator();
    let done = s
        .tracker
        .wait_for("obj", "update handled", |b| {
            diff_base(b).is_some_and(|d| d.contains("changed while down"))
                && status(b, "field_fn/spec.field")["new"] == "changed while down"
                && handled_with(b, &["resume_fn"])
        })
        .await;
    // Resume handlers are mixed into the update cycle (§1.6).
    assert_eq!(status(&done, "resume_fn"), &json!({"reason": "update"}));
    assert_eq!(
        status(&done, "field_fn/spec.field"),
        &json!({"old": "value", "new": "changed while down", "reason": "update"})
    );
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    let records = second.journal().records();
    let o = s.object("obj");
    assert_calls(
        &records,
        &o,
        &[
            ("update_fn", 1),
            ("field_fn/spec.field", 1),
            ("resume_fn", 1),
            ("create_fn", 0),
        ],
    );
    second.stop().await.expect("stop");
    s.shutdown().await;
}

/// The kinds of the calls of `handler` about `object` the journal recorded, in order.
fn called_kinds(records: &[Record], handler: &str, object: &str) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::HandlerCalled {
                handler: h,
                kind,
                object: o,
                ..
            } if h == handler && o == object => Some(kind.clone()),
            _ => None,
        })
        .collect()
}

/// The number of calls of `stacked_fn` of `kind` that `/metrics` on `port` counts.
async fn stacked_calls_counted(port: u16, kind: &str) -> String {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let (_, metrics) = http("GET", &url).await.expect("metrics are served");
    let series = format!(
        r#"kapsel_handler_invocations_total{{guest="changes",handler="stacked_fn",kind="{kind}"}} "#
    );
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .unwrap_or("0")
        .to_owned()
}

/// One function registered as creation, update and resume handler (one id) is called
/// as the registration that matched the cause: its cause, the journal and the metrics
/// say `create`, then `update`, then `resume`, not the first registration's kind.
#[tokio::test]
async fn a_stacked_handler_is_called_with_the_kind_of_the_registration_that_matched() {
    let s = Scene::start("stacked").await;
    let port = free_port();
    let first = s
        .cluster
        .start_operator(changes_operator().metrics(format!("http://127.0.0.1:{port}/metrics")));
    s.create(kopfexample(
        "obj",
        &["stacked"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    ))
    .await;
    let created = s
        .tracker
        .wait_for("obj", "creation handled", |b| diff_base(b).is_some())
        .await;
    let result = |kind: &str| json!({"kind": kind, "reason": kind});
    assert_eq!(status(&created, "stacked_fn"), &result("create"));
    s.patch("obj", json!({"spec": {"field": "changed"}})).await;
    let updated = s
        .tracker
        .wait_for("obj", "update handled", |b| {
            diff_base(b).is_some_and(|d| d.contains("changed"))
        })
        .await;
    assert_eq!(status(&updated, "stacked_fn"), &result("update"));
    s.settled(&first, &["obj"]).await;
    let o = s.object("obj");
    let records = first.journal().records();
    assert_eq!(
        called_kinds(&records, "stacked_fn", &o),
        ["create", "update"]
    );
    assert_eq!(stacked_calls_counted(port, "create").await, "1");
    assert_eq!(stacked_calls_counted(port, "update").await, "1");
    first.stop().await.expect("stop");

    let second = s.operator();
    let resumed = s
        .tracker
        .wait_for("obj", "resumed", |b| {
            status(b, "stacked_fn")["reason"] == "resume"
        })
        .await;
    assert_eq!(status(&resumed, "stacked_fn"), &result("resume"));
    s.settled(&second, &["obj"]).await;
    let records = second.journal().records();
    assert_eq!(called_kinds(&records, "stacked_fn", &o), ["resume"]);
    second.stop().await.expect("stop");
    s.shutdown().await;
}
