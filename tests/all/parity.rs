//! Kopf options that the other tests cover only in the host's units (issue 32, "thinly
//! tested"): `param` through a compiled guest, and `on.resume(deleted=True)` for an
//! object deleted while the operator was down.

use kapsel_tests::*;
use serde_json::json;

fn operator() -> kapsel_host::Operator {
    kapsel_host::Operator::new([guest("parity")])
}

fn labelled(name: &str, label: &str) -> serde_json::Value {
    let labels = json!({ label: "yes" });
    kopfexample(name, &[], labels, json!({}), json!({"field": "value"}))
}

#[tokio::test]
async fn a_handler_gets_its_param() {
    let s = Scene::start("param").await;
    let _operator = s.cluster.start_operator(operator());
    s.create(labelled("obj", "kapsel.test/param")).await;
    let done = s
        .tracker
        .wait_for("obj", "with_param's result", |b| {
            !status(b, "with_param").is_null()
        })
        .await;
    assert_eq!(status(&done, "with_param"), &json!({"answer": 42}));
    s.shutdown().await;
}

/// KOPF.md §1.6: resume handlers join a deletion cycle of the initial listing only with
/// `deleted=True`; an object that is not being deleted gets both.
#[tokio::test]
async fn only_resume_handlers_with_deleted_resume_an_object_being_deleted() {
    let s = Scene::start("resume-deleted").await;
    let first = s.cluster.start_operator(operator());
    for name in ["doomed", "kept"] {
        s.create(labelled(name, "kapsel.test/resume")).await;
        s.tracker
            .wait_for(name, "handled, with the finalizer", |b| {
                diff_base(b).is_some() && finalizers(b) == [FINALIZER]
            })
            .await;
    }
    first.stop().await.expect("stop");
    // Deleted while the operator is down: the finalizer holds it.
    s.delete("doomed").await;
    s.tracker
        .wait_for("doomed", "deletion pending", |b| {
            !b["metadata"]["deletionTimestamp"].is_null()
        })
        .await;

    let second = s.cluster.start_operator(operator());
    s.tracker.wait_gone("doomed").await;
    let journal = second.journal().clone();
    journal
        .wait_for(PATIENCE, |records| {
            guest_logs(records, "parity").contains(&"resumed-deleted kept".to_owned())
        })
        .await
        .expect("the kept object resumed");
    s.settled(&second, &["kept"]).await;
    let mut logs = guest_logs(&journal.records(), "parity");
    logs.sort();
    assert_eq!(
        logs,
        [
            "deleted doomed",
            "resumed kept",
            "resumed-deleted doomed",
            "resumed-deleted kept"
        ]
    );
    s.shutdown().await;
}
