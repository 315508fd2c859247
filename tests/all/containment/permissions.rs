//! Permissions are the declarations: a guest is handed Secrets only when it declared
//! them (selecting them is not enough, and `kapsel rbac` grants exactly what the operator
//! serves), its calls and Events stay in the namespaces the operator serves, and the
//! diff-base annotation of a Secret holds digests, not its data.

use kapsel_host::RbacRequest;
use kapsel_tests::*;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use super::{Figure, Stage, assert_no_events, test_limits};

fn parse(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).expect("yaml"))
        .collect()
}

fn granted(documents: &[Value], resource: &str) -> Vec<String> {
    documents[1]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .find(|r| r["apiGroups"][0] == "" && r["resources"][0] == resource)
        .map(|r| serde_json::from_value(r["verbs"].clone()).expect("verbs"))
        .unwrap_or_default()
}

/// Measured: a handler selecting `secrets` read every Secret with no `permit!` for them,
/// and the host copied the Secret's data into its `last-handled-configuration`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_handed_only_to_guests_that_declared_them() {
    let stage = Stage::start(&["hostile", "polite"], test_limits(), &[]).await;
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "labels": {"kapsel.test/hostile": "peek-secret",
                                               "kapsel.test/polite": "yes"}},
        "data": {"password": "aHVudGVyMg=="},
        "stringData": {"token": "plain-text-token"},
    });
    create(
        &stage.client,
        &core("Secret", "secrets"),
        Some("default"),
        secret,
    )
    .await;
    // Both guests select it; only the one that declared Secrets is handed it (its
    // changing handler runs after the event handlers of the same event).
    stage
        .journal
        .wait_for(PATIENCE, |records| {
            outcomes(records, "secret_seen", "default/db")
                .iter()
                .any(|(outcome, _)| outcome == "success")
        })
        .await
        .expect("the polite guest is handed the Secret");
    let records = stage.journal.records();
    assert!(
        calls(&records, "peek_secret").is_empty(),
        "hostile was handed it"
    );
    assert!(
        !guest_logs(&records, "hostile")
            .iter()
            .any(|line| line.contains("handed secret")),
    );

    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(stage.client.clone(), "default");
    // The diff-base is patched once the handlers of the event are done.
    let deadline = std::time::Instant::now() + PATIENCE;
    let diff_base = loop {
        let stored = secrets.get("db").await.expect("the secret");
        let annotations = stored.metadata.annotations.unwrap_or_default();
        if let Some(diff_base) = annotations.get("kopf.zalando.org/last-handled-configuration") {
            break diff_base.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never handled: no diff-base"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    for value in [
        "aHVudGVyMg==",
        "plain-text-token",
        "cGxhaW4tdGV4dC10b2tlbg==",
    ] {
        assert!(!diff_base.contains(value), "{value} copied: {diff_base}");
    }
    assert!(diff_base.contains("sha256:"), "{diff_base}");

    // `kapsel rbac` grants what the operator serves: nothing on Secrets for the guest that
    // did not declare them, and says why.
    let text = kapsel_host::rbac(
        &RbacRequest::new([guest("hostile")]).service_account("op", "ops"),
        stage.client.clone(),
    )
    .await
    .expect("manifests");
    assert!(granted(&parse(&text), "secrets").is_empty(), "{text}");
    assert!(
        text.contains("handler \"peek_secret\" of guest \"hostile\" on secrets")
            && text.contains("kapsel::permit!(\"v1\", \"secrets\""),
        "{text}"
    );
    let text = kapsel_host::rbac(
        &RbacRequest::new([guest("polite")]).service_account("op", "ops"),
        stage.client.clone(),
    )
    .await
    .expect("manifests");
    assert_eq!(
        granted(&parse(&text), "secrets"),
        ["list", "patch", "watch"]
    );
    Figure::new("undeclared-secrets")
        .with(
            "calls_handed_to_undeclared",
            calls(&records, "peek_secret").len(),
        )
        .with("secret_values_in_diff_base", 0)
        .with("diff_base_bytes", diff_base.len())
        .print();
    stage.stop().await;
}

/// Measured: an operator started with `-n default` let its guest create and patch
/// ConfigMaps in `kube-system`, and post Events about a kube-system Pod and a Node. (The
/// guest also posts an Event about a kube-system ConfigMap: a resource it handles, so
/// only the namespace refuses it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_stay_in_the_namespaces_the_operator_serves() {
    let stage = Stage::start(&["hostile"], test_limits(), &["default"]).await;
    stage.attack("elsewhere", "elsewhere").await;
    stage.attack("made-up-events", "made-up-events").await;
    stage
        .journal
        .wait_for(PATIENCE, |records| {
            guest_logs(records, "hostile")
                .iter()
                .any(|line| line.starts_with("elsewhere "))
        })
        .await
        .expect("the elsewhere handler ran");
    let logs = guest_logs(&stage.journal.records(), "hostile");
    assert!(
        logs.iter()
            .any(|line| line == "elsewhere create=403 patch=403"),
        "{logs:?}"
    );
    let planted = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
        stage.client.clone(),
        "kube-system",
    )
    .list(&ListParams::default())
    .await
    .expect("configmaps")
    .items
    .into_iter()
    .filter(|c| c.metadata.name.as_deref() == Some("elsewhere-planted"))
    .count();
    assert_eq!(planted, 0);
    let object = "default/made-up-events";
    stage
        .journal
        .wait_for(PATIENCE, |records| {
            !outcomes(records, "made_up_events", object).is_empty()
        })
        .await
        .expect("the made-up Events were tried");
    assert_no_events(&stage.client, &["Hijack", "MadeUp", "Elsewhere"]).await;
    stage.assert_healthy().await;
    Figure::new("outside-the-namespaces")
        .with("create_in_kube_system", 403)
        .with("patch_in_kube_system", 403)
        .with("planted", planted)
        .with("events_outside_posted", 0)
        .print();
    stage.stop().await;
}

/// Measured: under `-n '!kube-system'`, an Event about an object in the namespace
/// `default/../kube-system` passed the scope check and was sent to that path; and a guest
/// could post Events about Secrets by declaring a handler on them, which the host refuses
/// to serve. A reference's namespace must be a namespace name, and a sensitive resource
/// must be declared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_references_are_names_and_secrets_stay_undeclared() {
    let stage = Stage::start(&["hostile"], test_limits(), &["!kube-system"]).await;
    stage.attack("sneaky-events", "sneaky-events").await;
    let object = "default/sneaky-events";
    stage
        .journal
        .wait_for(PATIENCE, |records| {
            !outcomes(records, "sneaky_events", object).is_empty()
        })
        .await
        .expect("the sneaky Events were tried");
    assert_no_events(&stage.client, &["Traversal", "AboutSecret"]).await;
    stage.assert_healthy().await;
    Figure::new("event-references")
        .with("traversal_posted", 0)
        .with("about_secret_posted", 0)
        .print();
    stage.stop().await;
}
