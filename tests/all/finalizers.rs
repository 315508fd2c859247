//! The finalizer and deletion handlers (KOPF.md §1.5, §1.6, §4.6): added only for
//! non-optional delete handlers that match, held until they are done, removed when
//! nothing needs it; optional delete handlers never hold up a deletion.

use kapsel_tests::*;
use serde_json::{Value, json};

#[tokio::test]
async fn deletion_runs_the_delete_handlers_then_releases_the_finalizer() {
    let s = Scene::start("deletion").await;
    let operator = s.operator();
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
    s.delete("obj").await;
    s.tracker.wait_gone("obj").await;

    let versions = s.tracker.versions("obj");
    let deleting: Vec<&Seen> = versions
        .iter()
        .filter(|v| !v.body["metadata"]["deletionTimestamp"].is_null())
        .collect();
    // While the handlers run, the finalizer holds the object; records say "delete".
    let with_records = deleting
        .iter()
        .find(|v| !progress_keys(&v.body).is_empty())
        .unwrap_or_else(|| panic!("no deletion records: {}", s.tracker.dump("obj")));
    assert_eq!(
        progress_keys(&with_records.body),
        [
            "kopf.zalando.org/delete_fn",
            "kopf.zalando.org/delete_optional_fn"
        ]
    );
    for key in progress_keys(&with_records.body) {
        let r = record_at(&with_records.body, &key).expect("record");
        assert_eq!(r["purpose"], "delete", "{key}");
    }
    for v in &deleting {
        let gone = v.event == "DELETED";
        assert!(
            gone || finalizers(&v.body) == [FINALIZER],
            "the finalizer stays until the handlers are done: {}",
            s.tracker.dump("obj")
        );
    }

    let records = operator.journal().records();
    let o = s.object("obj");
    assert_eq!(calls_for(&records, "delete_fn", &o), 1);
    assert_eq!(calls_for(&records, "delete_optional_fn", &o), 1);
    let logs = guest_logs(&records, "changes");
    assert!(logs.contains(&"deleting obj".to_owned()), "{logs:?}");
    assert!(
        logs.contains(&"optionally deleting obj".to_owned()),
        "{logs:?}"
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

#[tokio::test]
async fn objects_without_a_mandatory_delete_handler_get_no_finalizer() {
    let s = Scene::start("no-finalizer").await;
    let operator = s.operator();
    s.create(kopfexample(
        "obj",
        &["optional"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_quiet"])
        })
        .await;
    assert_eq!(status(&done, "create_quiet"), &json!({"done": true}));
    assert!(
        s.tracker
            .versions("obj")
            .iter()
            .all(|v| finalizers(&v.body).is_empty()),
        "never a finalizer: {}",
        s.tracker.dump("obj")
    );
    // The deletion is immediate; the optional handler has no chance to run (`gone`).
    s.delete("obj").await;
    s.tracker.wait_gone("obj").await;
    s.settled(&operator, &["obj"]).await;
    assert_eq!(
        calls_for(
            &operator.journal().records(),
            "delete_quiet",
            &s.object("obj")
        ),
        0
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// §1.6 step 2: a deleting object without our finalizer is `free`, even if another
/// finalizer holds it: no delete handlers, nothing stored.
#[tokio::test]
async fn optional_delete_handlers_do_not_run_without_our_finalizer() {
    let s = Scene::start("foreign-finalizer").await;
    let operator = s.operator();
    let mut body = kopfexample("obj", &["optional"], json!({}), json!({}), json!({}));
    body["metadata"]["finalizers"] = json!(["kapsel.test/hold"]);
    s.create(body).await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_quiet"])
        })
        .await;
    s.delete("obj").await;
    let deleting = s
        .tracker
        .wait_for("obj", "marked for deletion", |b| {
            !b["metadata"]["deletionTimestamp"].is_null()
        })
        .await;
    s.settled(&operator, &["obj"]).await;
    assert_eq!(
        calls_for(
            &operator.journal().records(),
            "delete_quiet",
            &s.object("obj")
        ),
        0
    );
    let latest = s.tracker.latest("obj").expect("seen").body;
    assert_eq!(annotations(&latest), annotations(&done), "nothing stored");
    assert_eq!(
        latest["metadata"]["resourceVersion"],
        deleting["metadata"]["resourceVersion"],
        "nothing patched: {}",
        s.tracker.dump("obj")
    );
    assert_eq!(finalizers(&latest), ["kapsel.test/hold"]);
    s.patch("obj", json!({"metadata": {"finalizers": null}}))
        .await;
    s.tracker.wait_gone("obj").await;
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// §4.6: the finalizer is removed when no delete handler matches any more (in a cycle
/// of its own); the object then matches no handler at all, so nothing else is stored
/// (stealth mode, §3) and the old diff-base stays.
#[tokio::test]
async fn the_finalizer_goes_when_no_delete_handler_matches_any_more() {
    let s = Scene::start("unmatched").await;
    let operator = s.operator();
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
        .wait_for("obj", "creation handled", |b| {
            diff_base(b).is_some() && finalizers(b) == [FINALIZER]
        })
        .await;
    s.patch(
        "obj",
        json!({"metadata": {"labels": {"kapsel.test/basic": null, "other": "x"}}}),
    )
    .await;
    let released = s
        .tracker
        .wait_for("obj", "finalizer removed", |b| finalizers(b).is_empty())
        .await;
    assert_eq!(kopf_keys(&released), [DIFF_BASE]);
    assert_eq!(diff_base(&released), diff_base(&handled));
    s.settled(&operator, &["obj"]).await;
    let latest = s.tracker.latest("obj").expect("seen").body;
    assert_eq!(
        annotations(&latest),
        annotations(&handled),
        "{}",
        s.tracker.dump("obj")
    );
    let records = operator.journal().records();
    assert_eq!(calls_for(&records, "update_fn", &s.object("obj")), 0);
    assert_eq!(status(&latest, "update_fn"), &Value::Null);
    operator.stop().await.expect("stop");
    s.shutdown().await;
}
