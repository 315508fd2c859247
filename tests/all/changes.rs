//! Change handling through the real host: creation, updates, field handlers,
//! restarts and resumes, long ids (KOPF.md §1.6, §1.13–1.15, §4.2–4.4, §4.7, §4.9).
//! Each test checks what lands on the object after each step: finalizers,
//! annotations (byte for byte), and results in `status`.

use kapsel_tests::*;
use serde_json::{Value, json};

/// The group labels of the `basic` handlers, as the essence shows them.
fn basic_labels() -> Value {
    json!({"kapsel.test/basic": "yes"})
}

/// Every consecutive pair of versions finishes at most one handler: Kopf's default
/// `asap` lifecycle runs one handler per cycle, each cycle ending with a PATCH (§1.15).
fn assert_one_handler_per_cycle(versions: &[Seen]) {
    let finished = |b: &Value| {
        progress_keys(b)
            .iter()
            .filter_map(|k| record_at(b, k))
            .filter(|r| r["success"] == true || r["failure"] == true)
            .count()
    };
    for pair in versions.windows(2) {
        let (before, after) = (finished(&pair[0].body), finished(&pair[1].body));
        assert!(
            after <= before + 1,
            "two handlers finished in one cycle: {} -> {}",
            pair[0].body["metadata"]["annotations"],
            pair[1].body["metadata"]["annotations"]
        );
    }
}

#[tokio::test]
async fn creation_adds_the_finalizer_then_runs_create_and_field_handlers() {
    let s = Scene::start("creation").await;
    let operator = s.operator();
    s.create(kopfexample(
        "obj",
        &["basic"],
        json!({"somelabel": "somevalue"}),
        json!({"someannotation": "somevalue"}),
        json!({"field": "value", "items": ["a"]}),
    ))
    .await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_fn", "field_fn/spec.field"])
        })
        .await;

    // The end state (§4.2, §4.4, §4.9): records purged in the patch that stores the
    // diff-base; the diff-base is the essence as compact JSON plus a newline, with
    // labels and annotations re-added after `spec`.
    assert_eq!(finalizers(&done), [FINALIZER]);
    assert_eq!(kopf_keys(&done), [DIFF_BASE], "{}", s.tracker.dump("obj"));
    assert_eq!(
        diff_base(&done).as_deref(),
        Some(concat!(
            r#"{"spec":{"field":"value","items":["a"]},"#,
            r#""metadata":{"labels":{"kapsel.test/basic":"yes","somelabel":"somevalue"},"#,
            r#""annotations":{"someannotation":"somevalue"}}}"#,
            "\n"
        ))
    );
    assert_eq!(
        status(&done, "create_fn"),
        &json!({"message": "created", "field": "value"})
    );
    // on.field fires on creation: the field appears (old absent, §1.6). The result
    // `{"old": null, ...}` is merge-patched into status, so its null removes `old`:
    // Kopf does the same (`patch.status[id].update(result)`, then a merge-patch).
    assert_eq!(
        status(&done, "field_fn/spec.field"),
        &json!({"new": "value", "reason": "create"})
    );
    for absent in ["update_fn", "resume_fn"] {
        assert_eq!(status(&done, absent), &Value::Null, "{absent} must not run");
    }

    // The steps (§4.9): the finalizer alone first, by itself; then one handler per
    // cycle, with records created for all selected handlers on the first one.
    let versions = s.tracker.versions("obj");
    let first_change = versions
        .iter()
        .find(|v| !finalizers(&v.body).is_empty())
        .expect("the finalizer was added");
    assert!(
        kopf_keys(&first_change.body).is_empty() && first_change.body["status"].is_null(),
        "the finalizer comes in a cycle of its own: {}",
        s.tracker.dump("obj")
    );
    let with_records = versions
        .iter()
        .find(|v| !progress_keys(&v.body).is_empty())
        .expect("progress records were stored");
    assert_eq!(
        progress_keys(&with_records.body),
        [
            "kopf.zalando.org/create_fn",
            "kopf.zalando.org/field_fn.spec.field"
        ],
        "records for every selected handler at once"
    );
    let records: Vec<Value> = progress_keys(&with_records.body)
        .iter()
        .filter_map(|k| record_at(&with_records.body, k))
        .collect();
    let finished: Vec<&Value> = records.iter().filter(|r| r["success"] == true).collect();
    let pending: Vec<&Value> = records.iter().filter(|r| r["success"] == false).collect();
    assert_eq!((finished.len(), pending.len()), (1, 1), "{records:?}");
    assert_eq!(finished[0]["retries"], 1);
    assert!(finished[0].get("stopped").is_some(), "{}", finished[0]);
    assert_eq!(pending[0]["retries"], 0);
    assert!(pending[0].get("stopped").is_none(), "{}", pending[0]);
    for r in &records {
        assert_eq!(r["purpose"], "create");
        assert_eq!(r["failure"], false);
    }
    assert_one_handler_per_cycle(&versions);

    // Since Kopf 1.44, log lines are not posted as Events (§6.5): none about the object.
    assert_eq!(s.events_about("obj").await, Vec::<Value>::new());

    // Nothing more happens: no handler runs twice, nothing else is patched.
    let count = versions.len();
    s.settled(&operator, &["obj"]).await;
    let records = operator.journal().records();
    let o = s.object("obj");
    assert_calls(
        &records,
        &o,
        &[
            ("create_fn", 1),
            ("field_fn/spec.field", 1),
            ("update_fn", 0),
            ("resume_fn", 0),
            ("delete_fn", 0),
        ],
    );
    assert_eq!(
        s.tracker.versions("obj").len(),
        count,
        "no patch after the cycle finished: {}",
        s.tracker.dump("obj")
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

#[tokio::test]
async fn a_spec_change_runs_update_and_field_handlers_and_moves_the_diff_base() {
    let s = Scene::start("update").await;
    let operator = s.operator();
    s.create(kopfexample(
        "obj",
        &["basic"],
        json!({}),
        json!({}),
        json!({"field": "value", "items": ["a"]}),
    ))
    .await;
    s.tracker
        .wait_for("obj", "creation handled", |b| diff_base(b).is_some())
        .await;
    s.patch("obj", json!({"spec": {"field": "changed"}})).await;
    let done = s
        .tracker
        .wait_for("obj", "update handled", |b| {
            diff_base(b).is_some_and(|d| d.contains("changed"))
                && status(b, "field_fn/spec.field")["reason"] == "update"
                && handled_with(b, &["update_fn"])
        })
        .await;

    let old =
        json!({"spec": {"field": "value", "items": ["a"]}, "metadata": {"labels": basic_labels()}});
    let new = json!({"spec": {"field": "changed", "items": ["a"]}, "metadata": {"labels": basic_labels()}});
    assert_eq!(
        diff_base(&done),
        Some(format!("{}\n", serde_json::to_string(&new).expect("json")))
    );
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    // old/new are essences; the diff is Kopf's `(op, path, old, new)` list (§1.13).
    assert_eq!(
        status(&done, "update_fn"),
        &json!({"old": old, "new": new, "diff": [["change", ["spec", "field"], "value", "changed"]]})
    );
    assert_eq!(
        status(&done, "field_fn/spec.field"),
        &json!({"old": "value", "new": "changed", "reason": "update"})
    );
    assert_eq!(
        status(&done, "create_fn"),
        &json!({"message": "created", "field": "value"})
    );
    let versions = s.tracker.versions("obj");
    let updating = versions
        .iter()
        .find(|v| {
            record(&v.body, "update_fn").is_some_and(|r| r["purpose"] == "update")
                || record(&v.body, "field_fn/spec.field").is_some_and(|r| r["purpose"] == "update")
        })
        .unwrap_or_else(|| panic!("no update records: {}", s.tracker.dump("obj")));
    assert_eq!(
        progress_keys(&updating.body),
        [
            "kopf.zalando.org/field_fn.spec.field",
            "kopf.zalando.org/update_fn"
        ]
    );
    assert_one_handler_per_cycle(&versions);

    let records = operator.journal().records();
    let o = s.object("obj");
    assert_calls(
        &records,
        &o,
        &[
            ("create_fn", 1),
            ("update_fn", 1),
            ("field_fn/spec.field", 2),
            ("resume_fn", 0),
        ],
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// §4.2: labels and annotations are part of the essence, except Kopf's own
/// annotations (any `kopf.zalando.org/` key) and kubectl's last-applied
/// configuration; `status` is not. So a labels-only change IS an update.
#[tokio::test]
async fn labels_and_annotations_are_essential_but_status_and_kopf_annotations_are_not() {
    let s = Scene::start("essence").await;
    let operator = s.operator();
    s.create(kopfexample(
        "obj",
        &["basic"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    ))
    .await;
    let created = s
        .tracker
        .wait_for("obj", "creation handled", |b| diff_base(b).is_some())
        .await;
    let base = diff_base(&created);

    // Not essential: status, Kopf-managed annotations, kubectl's last-applied copy.
    s.patch_status("obj", json!({"status": {"extra": 1}})).await;
    s.patch(
        "obj",
        json!({"metadata": {"annotations": {
            "kopf.zalando.org/foreign": "x",
            "kubectl.kubernetes.io/last-applied-configuration": "{}"
        }}}),
    )
    .await;
    s.tracker
        .wait_for("obj", "the non-essential changes arrive", |b| {
            b["status"]["extra"] == 1 && annotations(b).contains_key("kopf.zalando.org/foreign")
        })
        .await;
    s.settled(&operator, &["obj"]).await;
    let o = s.object("obj");
    assert_eq!(calls_for(&operator.journal().records(), "update_fn", &o), 0);
    let latest = s.tracker.latest("obj").expect("seen").body;
    assert_eq!(diff_base(&latest), base, "the essence did not change");

    // A label: an update with the label in the diff; the field handler stays quiet.
    s.patch("obj", json!({"metadata": {"labels": {"colour": "red"}}}))
        .await;
    let labelled = s
        .tracker
        .wait_for("obj", "label change handled", |b| {
            diff_base(b).is_some_and(|d| d.contains("colour"))
                && status(b, "update_fn")["diff"]
                    .to_string()
                    .contains("colour")
        })
        .await;
    assert_eq!(
        status(&labelled, "update_fn")["diff"],
        json!([["add", ["metadata", "labels", "colour"], null, "red"]])
    );
    // The essence keeps the labels in the order the API server writes them, as Kopf
    // reads its JSON (the tracker's `DynamicObject`s sort them).
    let url = format!("/apis/kopf.dev/v1/namespaces/{}/kopfexamples", s.namespace);
    let request = kube::core::Request::new(url)
        .get("obj", &Default::default())
        .expect("a request");
    let served = s.client.request_text(request).await.expect("the object");
    let served: Value = serde_json::from_str(&served).expect("JSON");
    let labels = served["metadata"]["labels"].clone();
    assert_eq!(labels, json!({"kapsel.test/basic": "yes", "colour": "red"}));
    let essence = json!({"spec": {"field": "value"}, "metadata": {"labels": labels.clone()}});
    assert_eq!(
        diff_base(&labelled),
        Some(format!(
            "{}\n",
            serde_json::to_string(&essence).expect("json")
        ))
    );

    // An ordinary annotation: an update too; Kopf's and kubectl's stay out of the essence.
    s.patch(
        "obj",
        json!({"metadata": {"annotations": {"note": "hello"}}}),
    )
    .await;
    let annotated = s
        .tracker
        .wait_for("obj", "annotation change handled", |b| {
            diff_base(b).is_some_and(|d| d.contains("hello"))
                && status(b, "update_fn")["diff"].to_string().contains("hello")
        })
        .await;
    assert_eq!(
        status(&annotated, "update_fn")["diff"],
        // The old essence had no annotations at all (empty ones are dropped, §4.2), so
        // the whole mapping is added, as Kopf's diff does for a missing key.
        json!([["add", ["metadata", "annotations"], null, {"note": "hello"}]])
    );
    let essence = json!({"spec": {"field": "value"},
        "metadata": {"labels": labels, "annotations": {"note": "hello"}}});
    assert_eq!(
        diff_base(&annotated),
        Some(format!(
            "{}\n",
            serde_json::to_string(&essence).expect("json")
        ))
    );
    assert_eq!(
        kopf_keys(&annotated),
        ["kopf.zalando.org/foreign", DIFF_BASE],
        "other Kopf annotations are left alone"
    );
    let records = operator.journal().records();
    assert_eq!(calls_for(&records, "update_fn", &o), 2);
    assert_eq!(calls_for(&records, "field_fn/spec.field", &o), 1);
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

#[tokio::test]
async fn a_field_handler_fires_on_creation_and_on_changes_of_its_field_only() {
    let s = Scene::start("field").await;
    let operator = s.operator();
    let o = s.object("obj");
    s.create(kopfexample(
        "obj",
        &["basic"],
        json!({}),
        json!({}),
        json!({"field": "value", "items": ["a"]}),
    ))
    .await;
    s.tracker
        .wait_for("obj", "creation handled", |b| diff_base(b).is_some())
        .await;

    // Another field changes: the update handler runs, the field handler does not.
    s.patch("obj", json!({"spec": {"items": ["a", "b"]}})).await;
    let b = s
        .tracker
        .wait_for("obj", "items change handled", |b| {
            diff_base(b).is_some_and(|d| d.contains(r#"["a","b"]"#))
                && status(b, "update_fn")["diff"].to_string().contains("items")
        })
        .await;
    assert_eq!(
        status(&b, "update_fn")["diff"],
        json!([["change", ["spec", "items"], ["a"], ["a", "b"]]]),
        "lists are compared as whole values"
    );
    assert_eq!(
        calls_for(&operator.journal().records(), "field_fn/spec.field", &o),
        1
    );

    // The field changes, then disappears: both are changes of the field.
    s.patch("obj", json!({"spec": {"field": "other"}})).await;
    let changed = s
        .tracker
        .wait_for("obj", "field change handled", |b| {
            diff_base(b).is_some_and(|d| d.contains("other"))
                && status(b, "field_fn/spec.field")["new"] == "other"
        })
        .await;
    assert_eq!(
        status(&changed, "field_fn/spec.field"),
        &json!({"old": "value", "new": "other", "reason": "update"})
    );
    s.patch("obj", json!({"spec": {"field": null}})).await;
    let removed = s
        .tracker
        .wait_for("obj", "field removal handled", |b| {
            diff_base(b).is_some_and(|d| !d.contains("field"))
                && status(b, "field_fn/spec.field")["old"] == "other"
        })
        .await;
    // The result's `"new": null` removes `new` from status (merge-patch), as in Kopf.
    assert_eq!(
        status(&removed, "field_fn/spec.field"),
        &json!({"old": "other", "reason": "update"})
    );
    let records = operator.journal().records();
    assert_eq!(calls_for(&records, "field_fn/spec.field", &o), 3);
    assert_eq!(calls_for(&records, "update_fn", &o), 3);
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// §4.3: a 73-character id. V2 key: the name part cut to 63 characters with a hash
/// of the id; V1 key: the whole key cut to 63. The suffix is Kopf's
/// `-` + base64(blake2b(id, digest_size=4), altchars=b'-.') stripped of `=-.`,
/// computed with Python's hashlib:
/// `base64.b64encode(hashlib.blake2b(ID.encode(), digest_size=4).digest(), altchars=b'-.')`
/// gives `hDxhOw==` (the id has no `/`, so the V1 hash of the safe id is the same).
#[tokio::test]
async fn a_long_handler_id_gets_cut_and_hashed_annotation_keys() {
    const ID: &str = "a_handler_whose_id_is_far_too_long_for_the_name_part_of_an_annotation_key";
    const SUFFIX: &str = "-hDxhOw";
    let v2 = format!("{PREFIX}/{}{SUFFIX}", &ID[..63 - SUFFIX.len()]);
    let v1 = format!(
        "{PREFIX}/{}{SUFFIX}",
        &ID[..63 - PREFIX.len() - 1 - SUFFIX.len()]
    );
    assert_eq!(v2.len() - PREFIX.len() - 1, 63);
    assert_eq!(v1.len(), 63);

    let s = Scene::start("long-id").await;
    let operator = s.operator();
    s.create(kopfexample(
        "obj",
        &["long"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    let retrying = s
        .tracker
        .wait_seen("obj", "the long id's record", |b| {
            !progress_keys(b).is_empty()
        })
        .await;
    let mut expected = vec![v1.clone(), v2.clone()];
    expected.sort();
    assert_eq!(progress_keys(&retrying.body), expected);
    let a = annotations(&retrying.body);
    assert_eq!(a[&v1], a[&v2], "both generations hold the same record");
    let r = check_record(&a[&v2]);
    assert_eq!(
        (r["retries"].clone(), r["message"].clone()),
        (json!(1), json!("once more"))
    );

    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| handled_with(b, &[ID]))
        .await;
    assert_eq!(kopf_keys(&done), [DIFF_BASE], "both keys purged");
    assert_eq!(
        status(&done, ID),
        &json!({"done": true}),
        "results use the id itself"
    );
    assert_eq!(
        calls_for(&operator.journal().records(), ID, &s.object("obj")),
        2
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// Not in Kopf: an object whose essence exceeds what its annotations may hold (256 KiB
/// in all) gets its diff-base stored with its largest values as digests. Kopf's patch
/// fails with 422 at every cycle, for good. Reported once; changes beside and of the
/// digested value are still detected.
#[tokio::test]
async fn a_huge_object_is_handled_with_its_largest_values_digested() {
    let s = Scene::start("huge").await;
    let operator = s.operator();
    let size = 300 * 1024;
    let spec = json!({"field": "value", "blob": "a".repeat(size)});
    s.create(kopfexample("obj", &["huge"], json!({}), json!({}), spec))
        .await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["huge_create"])
        })
        .await;
    assert_eq!(status(&done, "huge_create"), &json!({"blob": size}));
    let stored = diff_base(&done).expect("a diff-base");
    assert!(
        stored.len() < 1024
            && stored.contains(r#""blob":"kapsel-digest:sha256:"#)
            && stored.contains(r#""field":"value""#),
        "{stored}"
    );
    let warnings = s.warnings_about("obj", "DiffBaseDigested").await;
    assert!(
        warnings.len() == 1
            && warnings[0]["message"]
                .as_str()
                .is_some_and(|m| m.contains("spec.blob")),
        "one Warning Event naming the digested value: {warnings:#?}"
    );

    // A change beside the digested value: the diff holds it alone, and the old essence
    // has the unchanged blob back whole.
    s.patch("obj", json!({"spec": {"field": "changed"}})).await;
    let done = s
        .tracker
        .wait_for("obj", "update handled", |b| {
            diff_base(b).is_some_and(|d| d.contains(r#""field":"changed""#))
        })
        .await;
    assert_eq!(
        status(&done, "huge_update"),
        &json!({"diff": [["change", ["spec", "field"], "value", "changed"]],
                "old_blob": format!("<{size} chars>")})
    );
    let second = diff_base(&done);

    // A change of the digested value: seen as a change from its digest.
    s.patch("obj", json!({"spec": {"blob": "b".repeat(size)}}))
        .await;
    let done = s
        .tracker
        .wait_for("obj", "blob update handled", |b| {
            status(b, "huge_update")["diff"][0][1] == json!(["spec", "blob"])
                && diff_base(b) != second
        })
        .await;
    let update = status(&done, "huge_update");
    let diff = &update["diff"];
    assert_eq!(diff.as_array().map(Vec::len), Some(1), "{update}");
    assert!(
        diff[0][2]
            .as_str()
            .is_some_and(|old| old.starts_with("kapsel-digest:sha256:"))
            && diff[0][3] == format!("<{size} chars>")
            && update["old_blob"] == diff[0][2],
        "{update}"
    );
    assert_ne!(diff_base(&done).as_deref(), Some(stored.as_str()));

    // Reported once: the later cycles stored digests over digests. (Events are posted in
    // order before each cycle's patch; the deletion's cycles give them time to land.)
    s.delete("obj").await;
    s.tracker.wait_gone("obj").await;
    let warnings = s.warnings_about("obj", "DiffBaseDigested").await;
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    operator.stop().await.expect("stop");
    s.shutdown().await;
}
