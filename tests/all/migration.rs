//! Taking over from Kopf (DESIGN.md "State and compatibility"): objects that carry
//! state written by Kopf in its exact format (KOPF.md §4.4, §4.9) when the operator
//! starts. Finished handlers are not re-run, unfinished ones are, and what is left
//! behind is what Kopf would leave.

use kapsel_tests::*;
use serde_json::{Value, json};

const STARTED: &str = "2026-11-30T03:32:51.611056+00:00";

/// A finished record, as Kopf writes it.
fn finished(purpose: &str) -> String {
    format!(
        r#"{{"started":"{STARTED}","stopped":"{STARTED}","purpose":"{purpose}","retries":1,"success":true,"failure":false}}"#
    )
}

/// An object in the middle of handling, created before the operator starts.
fn kopf_object(spec: Value, annotations: Value, status: Value) -> Value {
    let mut body = kopfexample("obj", &["basic"], json!({}), annotations, spec);
    body["metadata"]["finalizers"] = json!([FINALIZER]);
    body["status"] = status;
    body
}

#[tokio::test]
async fn a_creation_kopf_left_unfinished_is_continued() {
    let s = Scene::start("kopf-creation").await;
    s.create(kopf_object(
        json!({"field": "value"}),
        json!({
            "kopf.zalando.org/create_fn": finished("create"),
            "kopf.zalando.org/field_fn.spec.field":
                format!(r#"{{"started":"{STARTED}","purpose":"create","retries":0,"success":false,"failure":false}}"#),
            "kopf.zalando.org/touch-dummy": STARTED,
        }),
        json!({}),
    ))
    .await;
    // Kopf stored create_fn's result with its progress (status is a subresource).
    s.patch_status(
        "obj",
        json!({"status": {"create_fn": {"message": "from kopf"}}}),
    )
    .await;
    let operator = s.operator();
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["field_fn/spec.field"])
        })
        .await;
    assert_eq!(
        kopf_keys(&done),
        [DIFF_BASE],
        "records and touch-dummy purged"
    );
    assert_eq!(
        diff_base(&done).as_deref(),
        Some(
            "{\"spec\":{\"field\":\"value\"},\"metadata\":{\"labels\":{\"kapsel.test/basic\":\"yes\"}}}\n"
        )
    );
    assert_eq!(finalizers(&done), [FINALIZER]);
    assert_eq!(status(&done, "create_fn"), &json!({"message": "from kopf"}));
    assert_eq!(
        status(&done, "field_fn/spec.field"),
        &json!({"new": "value", "reason": "create"}),
        "the result's null `old` is merged away, as in Kopf"
    );
    s.settled(&operator, &["obj"]).await;
    let records = operator.journal().records();
    let o = s.object("obj");
    assert_calls(
        &records,
        &o,
        &[
            ("create_fn", 0),
            ("field_fn/spec.field", 1),
            ("resume_fn", 0),
            ("update_fn", 0),
        ],
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// An update in progress: Kopf's diff-base still holds the old essence, `update_fn`
/// is done, `field_fn` failed once (§4.4's captured record). The operator sees it in
/// its initial listing: an update with resume handlers mixed in (§1.6).
#[tokio::test]
async fn an_update_kopf_left_unfinished_is_continued() {
    let s = Scene::start("kopf-update").await;
    let old_essence = "{\"spec\":{\"field\":\"value\"},\"metadata\":{\"labels\":{\"kapsel.test/basic\":\"yes\"}}}\n";
    s.create(kopf_object(
        json!({"field": "changed"}),
        json!({
            DIFF_BASE: old_essence,
            "kopf.zalando.org/update_fn": finished("update"),
            "kopf.zalando.org/field_fn.spec.field":
                r#"{"started":"2026-11-30T03:32:51.611056+00:00","delayed":"2026-11-30T03:32:51.623181+00:00","purpose":"update","retries":1,"success":false,"failure":false,"message":"not yet"}"#,
        }),
        json!({}),
    ))
    .await;
    s.patch_status("obj", json!({"status": {"update_fn": {"by": "kopf"}}}))
        .await;
    let operator = s.operator();
    let done = s
        .tracker
        .wait_for("obj", "update handled", |b| {
            diff_base(b).is_some_and(|d| d.contains("changed"))
                && handled_with(b, &["field_fn/spec.field", "resume_fn"])
        })
        .await;
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    assert_eq!(
        diff_base(&done).as_deref(),
        Some(
            "{\"spec\":{\"field\":\"changed\"},\"metadata\":{\"labels\":{\"kapsel.test/basic\":\"yes\"}}}\n"
        )
    );
    assert_eq!(
        status(&done, "update_fn"),
        &json!({"by": "kopf"}),
        "not re-run"
    );
    assert_eq!(
        status(&done, "field_fn/spec.field"),
        &json!({"old": "value", "new": "changed", "reason": "update"})
    );
    assert_eq!(status(&done, "resume_fn"), &json!({"reason": "update"}));
    assert_eq!(finalizers(&done), [FINALIZER]);
    // While in progress, the unfinished record kept Kopf's start time and retry count.
    let progressed = s
        .tracker
        .versions("obj")
        .into_iter()
        .filter_map(|v| record(&v.body, "field_fn/spec.field"))
        .collect::<Vec<_>>();
    assert!(
        progressed.iter().all(|r| r["started"] == STARTED),
        "{progressed:?}"
    );
    s.settled(&operator, &["obj"]).await;
    let records = operator.journal().records();
    let o = s.object("obj");
    assert_calls(
        &records,
        &o,
        &[
            ("update_fn", 0),
            ("field_fn/spec.field", 1),
            ("resume_fn", 1),
            ("create_fn", 0),
        ],
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}
