//! CRDs of other shapes than Kopf's example (issue 16's "odd schemas"): no status
//! subresource, a schema that prunes the handlers' results, one that refuses them, and
//! objects whose content is not under `spec`. The operator handles each object once, stores
//! what it can, and says what the API server would not take.

use kapsel_host::testing::ServerConfig;
use kapsel_tests::*;
use serde_json::{Value, json};

/// The kopfexamples CRD with `version` (one entry of `spec.versions`) changed by `shape`.
fn crd(shape: impl FnOnce(&mut Value)) -> Value {
    let mut crd = manifest("kopfexamples-crd.yaml");
    shape(&mut crd["spec"]["versions"][0]);
    crd
}

/// A `basic` object: create, update, field and delete handlers of the `changes` guest.
fn object(name: &str, spec: Value) -> Value {
    kopfexample(name, &["basic"], json!({}), json!({}), spec)
}

/// Without a status subresource the results go into the object itself (one patch).
#[tokio::test]
async fn without_a_status_subresource_results_are_patched_into_the_object() {
    let s = Scene::start_with_crd(
        "nostatus",
        ServerConfig::default(),
        crd(|v| {
            v.as_object_mut().expect("a version").remove("subresources");
        }),
    )
    .await;
    let operator = s.operator();
    s.create(object("obj", json!({"field": "value"}))).await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_fn", "field_fn/spec.field"])
        })
        .await;
    assert_eq!(
        status(&done, "create_fn"),
        &json!({"message": "created", "field": "value"})
    );
    assert_calls(
        &operator.journal().records(),
        &s.object("obj"),
        &[("create_fn", 1), ("field_fn/spec.field", 1)],
    );
    s.delete("obj").await;
    s.tracker.wait_gone("obj").await;
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// A structural schema that does not keep unknown fields in `status` prunes the results
/// (kube-apiserver does the same). The outcome is stored all the same: the handlers run
/// once, the diff-base is written, and a change is still handled.
#[tokio::test]
async fn a_schema_that_prunes_the_results_does_not_rerun_the_handlers() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "field": {"type": "string"}, "items": {"type": "array", "items": {"type": "string"}}}},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}});
    let s = Scene::start_with_crd(
        "pruning",
        ServerConfig::default(),
        crd(|v| v["schema"]["openAPIV3Schema"] = schema),
    )
    .await;
    let operator = s.operator();
    s.create(object("obj", json!({"field": "value", "undeclared": 1})))
        .await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| diff_base(b).is_some())
        .await;
    assert_eq!(
        done["spec"],
        json!({"field": "value"}),
        "pruned on creation"
    );
    assert_eq!(
        status(&done, "create_fn"),
        &Value::Null,
        "the results were pruned"
    );
    s.patch("obj", json!({"spec": {"field": "changed"}})).await;
    s.tracker
        .wait_for("obj", "update handled", |b| {
            diff_base(b).is_some_and(|d| d.contains("changed"))
        })
        .await;
    s.delete("obj").await;
    s.tracker.wait_gone("obj").await;
    assert_calls(
        &operator.journal().records(),
        &s.object("obj"),
        &[
            ("create_fn", 1),
            ("update_fn", 1),
            ("field_fn/spec.field", 2),
            ("delete_fn", 1),
        ],
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// A schema whose `status` refuses the results (422 Invalid): the handler's success is
/// stored all the same (it does not run again and again), and the refusal is reported
/// with the API server's reason as a Warning Event.
#[tokio::test]
async fn a_schema_that_refuses_the_results_is_reported_and_the_outcome_kept() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                   "properties": {"create_fn": {"type": "string"}}}}});
    let s = Scene::start_with_crd(
        "refusing",
        ServerConfig::default(),
        crd(|v| v["schema"]["openAPIV3Schema"] = schema),
    )
    .await;
    let operator = s.operator();
    s.create(object("obj", json!({"field": "value"}))).await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| diff_base(b).is_some())
        .await;
    assert_eq!(status(&done, "create_fn"), &Value::Null);
    let refused = s.warnings_about("obj", "ResultsRefused").await;
    assert!(
        refused.iter().any(|e| e["message"]
            .as_str()
            .is_some_and(|m| m.contains("status.create_fn"))),
        "a Warning Event with the API server's reason: {refused:#?}"
    );
    s.delete("obj").await;
    s.tracker.wait_gone("obj").await;
    assert_calls(
        &operator.journal().records(),
        &s.object("obj"),
        &[("create_fn", 1), ("delete_fn", 1)],
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// Objects with their content beside `spec` (a schema that keeps everything): every
/// top-level field is part of the essence, as in Kopf.
#[tokio::test]
async fn content_outside_spec_is_essential() {
    let s = Scene::start_with_crd(
        "toplevel",
        ServerConfig::default(),
        crd(|v| {
            v["schema"]["openAPIV3Schema"] =
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        }),
    )
    .await;
    let operator = s.operator();
    let mut body = object("obj", json!({"field": "value"}));
    body["data"] = json!({"key": "one"});
    s.create(body).await;
    s.tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_fn"])
        })
        .await;
    s.patch("obj", json!({"data": {"key": "two"}})).await;
    let done = s
        .tracker
        .wait_for("obj", "update handled", |b| {
            !status(b, "update_fn").is_null()
        })
        .await;
    assert_eq!(
        status(&done, "update_fn")["diff"],
        json!([["change", ["data", "key"], "one", "two"]])
    );
    s.delete("obj").await;
    s.tracker.wait_gone("obj").await;
    operator.stop().await.expect("stop");
    s.shutdown().await;
}
