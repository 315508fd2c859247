//! Kopf options that the other tests cover only in the host's units (issue 32, "thinly
//! tested"): `param` through a compiled guest, `on.resume(deleted=True)` for an
//! object deleted while the operator was down, the `-ofDRS` keys of a ReplicaSet
//! owned by a Deployment, the setting `execution.default_backoff`, and the full
//! `resource` kwarg (`Cause::resource_info`).

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

/// Kubernetes copies a Deployment's annotations onto its ReplicaSets: Kopf's records of
/// the Deployment (its diff-base among them) land on a new ReplicaSet. Kopf keeps the
/// ReplicaSet's own records under `-ofDRS` keys, so the copies are not taken for them:
/// the ReplicaSet is created, not updated, and its diff-base goes beside the copy.
#[tokio::test]
async fn a_replicaset_of_a_deployment_keeps_its_records_apart() {
    let s = Scene::start("drs").await;
    let apps = |kind: &str, plural: &str| kube::discovery::ApiResource {
        group: "apps".into(),
        version: "v1".into(),
        api_version: "apps/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    let selector = json!({"matchLabels": {"app": "web"}});
    let template = json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    });
    let deployment = create(
        &s.client,
        &apps("Deployment", "deployments"),
        Some(&s.namespace),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"selector": selector, "template": template},
        }),
    )
    .await;
    let copied = r#"{"spec":{"replicas":1}}"#;
    create(
        &s.client,
        &apps("ReplicaSet", "replicasets"),
        Some(&s.namespace),
        json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": "web-1",
                "labels": {"kapsel.test/drs": "yes"},
                // As the Deployment controller copies them.
                "annotations": {"kopf.zalando.org/last-handled-configuration": copied},
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                    "uid": deployment.metadata.uid, "controller": true,
                }],
            },
            "spec": {"selector": selector, "template": template},
        }),
    )
    .await;
    let operator = s.cluster.start_operator(operator());
    operator
        .journal()
        .wait_for(PATIENCE, |records| {
            guest_logs(records, "parity").contains(&"created web-1".to_owned())
        })
        .await
        .expect("created, not taken for an update by the copied diff-base");
    let rs: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        s.client.clone(),
        &s.namespace,
        &apps("ReplicaSet", "replicasets"),
    );
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let body = serde_json::to_value(rs.get("web-1").await.expect("the replicaset")).unwrap();
        let annotations = &body["metadata"]["annotations"];
        if annotations
            .get("kopf.zalando.org/last-handled-configuration-ofDRS")
            .is_some()
        {
            assert_eq!(
                annotations["kopf.zalando.org/last-handled-configuration"], copied,
                "the copy is left as it is"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no -ofDRS diff-base: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// Kopf's `settings.execution.default_backoff`: a handler with no `backoff` of its own is
/// retried that long after an arbitrary error (3 s here, on handler time; Kopf's 60 s
/// otherwise).
#[tokio::test]
async fn the_default_backoff_setting_paces_arbitrary_failures() {
    let s = Scene::start("default-backoff").await;
    let mut settings = kapsel_host::Settings::default();
    settings.set("execution.default_backoff", "3").unwrap();
    let operator = s
        .cluster
        .start_operator_on_handler_time(operator().settings(settings));
    s.create(labelled("obj", "kapsel.test/backoff")).await;
    let journal = operator.journal().clone();
    let attempts = |records: &[kapsel_host::Record]| {
        records
            .iter()
            .filter(|r| matches!(r, kapsel_host::Record::HandlerFinished { handler, .. } if handler == "fails_once"))
            .count()
    };
    journal
        .wait_for(PATIENCE, |records| attempts(records) == 1)
        .await
        .expect("the first attempt failed");
    s.settled(&operator, &["obj"]).await;
    operator
        .advance(std::time::Duration::from_millis(2999))
        .await
        .unwrap();
    assert_eq!(attempts(&journal.records()), 1, "not retried before 3 s");
    operator
        .advance(std::time::Duration::from_millis(1))
        .await
        .unwrap();
    journal
        .wait_for(PATIENCE, |records| attempts(records) == 2)
        .await
        .expect("retried at 3 s");
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// Kopf's `resource` kwarg in full: a handler reads what discovery says of its object's
/// resource, beyond the cause's group, version, plural, kind and namespaced: the CRD's
/// singular, short names, categories, its status subresource, the preferred version and
/// the served verbs.
#[tokio::test]
async fn a_handler_reads_the_full_description_of_its_resource() {
    let mut crd = manifest("kopfexamples-crd.yaml");
    crd["spec"]["names"]["categories"] = json!(["all", "kopf"]);
    crd["spec"]["names"]["shortNames"] = json!(["kex", "kexes"]);
    let s = Scene::start_with_crd(
        "resource-info",
        kapsel_host::testing::ServerConfig::default(),
        crd,
    )
    .await;
    let operator = s.cluster.start_operator(operator());
    s.create(labelled("described", "kapsel.test/resource"))
        .await;
    let journal = operator.journal();
    journal
        .wait_for(PATIENCE, |records| {
            guest_logs(records, "parity")
                .iter()
                .any(|l| l.starts_with("resource "))
        })
        .await
        .expect("the handler logged its resource");
    let line = guest_logs(&journal.records(), "parity")
        .into_iter()
        .find(|l| l.starts_with("resource "))
        .unwrap_or_default();
    let info: serde_json::Value =
        serde_json::from_str(line.trim_start_matches("resource ")).expect("JSON");
    assert_eq!(info["group"], "kopf.dev", "{info}");
    assert_eq!(info["version"], "v1", "{info}");
    assert_eq!(info["plural"], "kopfexamples", "{info}");
    assert_eq!(info["kind"], "KopfExample", "{info}");
    assert_eq!(info["singular"], "kopfexample", "{info}");
    assert_eq!(info["shortcuts"], json!(["kex", "kexes"]), "{info}");
    assert_eq!(info["categories"], json!(["all", "kopf"]), "{info}");
    assert_eq!(info["subresources"], json!(["status"]), "{info}");
    assert_eq!(info["namespaced"], true, "{info}");
    assert_eq!(info["preferred"], true, "{info}");
    let verbs: Vec<&str> = info["verbs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .collect();
    for verb in ["get", "list", "watch", "patch", "create", "delete"] {
        assert!(verbs.contains(&verb), "{verb} in {info}");
    }
    operator.stop().await.expect("stop");
    s.shutdown().await;
}
