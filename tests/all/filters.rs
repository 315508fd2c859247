//! Filters of changing handlers (KOPF.md §3): labels and annotations (value, present,
//! absent, callbacks), field values (and callbacks), old/new transitions, `when` callbacks
//! and Kopf's combinators (`kapsel::filters`), and stealth mode for
//! objects that match nothing.

use std::collections::BTreeSet;

use kapsel_tests::*;
use serde_json::{Value, json};

/// The handler ids with a result in `status`.
fn results(body: &Value) -> BTreeSet<String> {
    body["status"]
        .as_object()
        .map(|s| s.keys().cloned().collect())
        .unwrap_or_default()
}

fn ids(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|&s| s.to_owned()).collect()
}

#[tokio::test]
async fn each_kind_of_filter_selects_its_handlers() {
    let s = Scene::start("filters").await;
    let operator = s.operator();
    // Matches nothing: never touched at all (stealth mode). Created first, so that by
    // the time the others are done the operator has long seen it.
    s.create(kopfexample(
        "none",
        &["filters"],
        json!({"kapsel.test/skip": "yes"}),
        json!({"kapsel.test/skip": "yes"}),
        json!({"special": false}),
    ))
    .await;
    s.create(kopfexample(
        "all",
        &["filters"],
        json!({"kapsel.test/colour": "red", "kapsel.test/size": "l"}),
        json!({"kapsel.test/mode": "fast", "kapsel.test/owner": "me"}),
        json!({"size": 3, "special": true}),
    ))
    .await;
    s.create(kopfexample(
        "few",
        &["filters"],
        json!({"kapsel.test/colour": "blue", "kapsel.test/skip": "yes"}),
        json!({"kapsel.test/mode": "slow", "kapsel.test/skip": "yes"}),
        json!({"size": 4, "special": false}),
    ))
    .await;
    s.create(kopfexample(
        "sizeless",
        &["filters"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;

    let all = s
        .tracker
        .wait_for("all", "creation handled", |b| {
            diff_base(b).is_some() && results(b).len() >= 13
        })
        .await;
    // `value = absent` is satisfied by either side (§3); on creation the old side is
    // absent, so `by_field_absent` runs for `all` too (Kopf's `_matches_field_values`
    // checks `[new, old]`, and the old essence of a creation has no fields at all).
    assert_eq!(
        results(&all),
        ids(&[
            "by_label_value",
            "by_label_present",
            "by_label_absent",
            "by_annotation_value",
            "by_annotation_present",
            "by_annotation_absent",
            "by_field_value/spec.size",
            "by_field_present/spec.size",
            "by_field_absent/spec.size",
            "by_when",
            "by_label_callback",
            "by_combinators",
            // The event handler on `metadata.managedFields` (red objects only).
            "managed_mark",
        ])
    );
    let few = s
        .tracker
        .wait_for("few", "creation handled", |b| {
            diff_base(b).is_some() && results(b).len() >= 2
        })
        .await;
    assert_eq!(
        results(&few),
        ids(&["by_field_present/spec.size", "by_value_callback/spec.size"])
    );
    let sizeless = s
        .tracker
        .wait_for("sizeless", "creation handled", |b| {
            diff_base(b).is_some() && results(b).len() >= 3
        })
        .await;
    assert_eq!(
        results(&sizeless),
        ids(&[
            "by_label_absent",
            "by_annotation_absent",
            "by_field_absent/spec.size"
        ])
    );
    for done in [&all, &few, &sizeless] {
        assert!(
            finalizers(done).is_empty(),
            "no delete handlers, no finalizer"
        );
        assert_eq!(kopf_keys(done), [DIFF_BASE]);
    }

    s.settled(&operator, &["all", "few", "sizeless", "none"])
        .await;
    let versions = s.tracker.versions("none");
    assert_eq!(
        versions.len(),
        1,
        "never patched: {}",
        s.tracker.dump("none")
    );
    let none = &versions[0].body;
    assert_eq!(
        annotations(none).keys().collect::<Vec<_>>(),
        ["kapsel.test/skip"]
    );
    assert!(none["status"].is_null() && finalizers(none).is_empty());
    let records = operator.journal().records();
    assert!(
        calls(&records, "by_when")
            .iter()
            .all(|(o, _)| o == &s.object("all")),
        "the `when` handler ran only where `when` held"
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

#[tokio::test]
async fn old_and_new_filters_select_update_handlers_by_transition() {
    let s = Scene::start("transitions").await;
    let operator = s.operator();
    s.create(kopfexample(
        "obj",
        &["filters"],
        json!({"kapsel.test/skip": "yes"}),
        json!({"kapsel.test/skip": "yes"}),
        json!({"size": 3}),
    ))
    .await;
    s.tracker
        .wait_for("obj", "creation handled", |b| diff_base(b).is_some())
        .await;

    s.patch("obj", json!({"spec": {"size": 5}})).await;
    let five = s
        .tracker
        .wait_for("obj", "3 -> 5 handled", |b| {
            diff_base(b).is_some_and(|d| d.contains(r#""size":5"#))
                && ["from_three", "to_five", "size_changed"]
                    .iter()
                    .all(|id| status(b, &format!("{id}/spec.size"))["new"] == 5)
        })
        .await;
    let three_to_five = json!({"old": 3, "new": 5});
    for id in [
        "from_three/spec.size",
        "to_five/spec.size",
        "size_changed/spec.size",
    ] {
        assert_eq!(status(&five, id), &three_to_five, "{id}");
    }

    s.patch("obj", json!({"spec": {"size": 6}})).await;
    let six = s
        .tracker
        .wait_for("obj", "5 -> 6 handled", |b| {
            diff_base(b).is_some_and(|d| d.contains(r#""size":6"#))
                && status(b, "size_changed/spec.size")["new"] == 6
        })
        .await;
    assert_eq!(
        status(&six, "size_changed/spec.size"),
        &json!({"old": 5, "new": 6})
    );
    assert_eq!(
        status(&six, "from_three/spec.size"),
        &three_to_five,
        "old = 3 no more"
    );
    assert_eq!(
        status(&six, "to_five/spec.size"),
        &three_to_five,
        "new = 5 no more"
    );

    // A change elsewhere: an update, but no field handler sees its field change; the
    // cycle has no handlers and still stores the new diff-base (§4.2).
    s.patch("obj", json!({"metadata": {"labels": {"colour": "green"}}}))
        .await;
    s.tracker
        .wait_for("obj", "label change handled", |b| {
            diff_base(b).is_some_and(|d| d.contains("green"))
        })
        .await;
    let o = s.object("obj");
    let records = operator.journal().records();
    assert_calls(
        &records,
        &o,
        &[
            ("from_three/spec.size", 1),
            ("to_five/spec.size", 1),
            ("size_changed/spec.size", 2),
        ],
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// Each `when` filter call is counted in `/metrics`, by result.
#[tokio::test]
async fn when_filter_calls_are_counted() {
    let s = Scene::start("filter-metrics").await;
    let port = free_port();
    let operator = s
        .cluster
        .start_operator(changes_operator().liveness(format!("http://127.0.0.1:{port}/healthz")));
    for (name, special) in [("yes", true), ("no", false)] {
        s.create(kopfexample(
            name,
            &["filters"],
            json!({}),
            json!({}),
            json!({"special": special}),
        ))
        .await;
    }
    s.settled(&operator, &["yes", "no"]).await;
    let metrics = http("GET", &format!("http://127.0.0.1:{port}/metrics"))
        .await
        .expect("metrics")
        .1;
    let count = |result: &str| {
        let series = format!(
            "kapsel_filter_calls_total{{guest=\"changes\",handler=\"by_when\",result=\"{result}\"}} "
        );
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(series.as_str()))
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(count("pass") >= 1.0, "{metrics}");
    assert!(count("skip") >= 1.0, "{metrics}");
    assert_eq!(count("error"), 0.0, "{metrics}");
    operator.stop().await.expect("stop");
    s.shutdown().await;
}
