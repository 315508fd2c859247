//! Resource selection beyond named resources (KOPF.md §2.1–§2.4): a handler of every
//! resource (Kopf's `kopf.EVERYTHING`) is handed the objects of every kind the cluster
//! serves, also of a CRD created after the operator started, and never Events; a handler
//! whose guest chooses its resources (Kopf's callable selector) those it chose, also of a
//! CRD created later, and the others are never watched.

use kapsel_host::testing::Cluster;
use kapsel_host::{Journal, Operator};
use kapsel_tests::*;
use serde_json::json;

/// Waits until `guest` logged `line`.
async fn logged(journal: &Journal, guest: &str, line: &str) {
    journal
        .wait_for(PATIENCE, |records| {
            guest_logs(records, guest).iter().any(|l| l == line)
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{line:?} not logged; logged: {:?}",
                guest_logs(&journal.records(), guest)
            )
        });
}

/// Creates the kopfexamples CRD, then the kopfexample `name` in `default` once the API
/// server serves it.
async fn create_kopfexample_of_a_new_crd(client: &kube::Client, name: &str) {
    create_kopfexamples_crd(client).await;
    let mut kex = kopfexample(name, &[], json!({}), json!({}), json!({}));
    kex["metadata"]["namespace"] = json!("default");
    let kex: kube::api::DynamicObject = serde_json::from_value(kex).expect("a kopfexample");
    let api = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &kopfexamples(),
    );
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while api.create(&Default::default(), &kex).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "kopfexamples not served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The lists and watches the API server was asked for on `resource` (a plural).
fn lists_and_watches(cluster: &Cluster, resource: &str) -> Vec<String> {
    cluster
        .server()
        .request_counts()
        .iter()
        .filter(|c| {
            c.kind.resource == resource && ["list", "watch"].contains(&c.kind.verb.as_str())
        })
        .map(|c| format!("{} {}", c.kind.verb, c.kind.resource))
        .collect()
}

/// `@kopf.on.event(kopf.EVERYTHING)`: a ConfigMap there before the operator, a Pod created
/// after it started, and a kopfexample of a CRD created after it started are all handed
/// to the one handler; Events (which handling itself produces) are never listed or
/// watched.
#[tokio::test]
async fn a_handler_of_everything_gets_every_kind_and_crds_created_later_but_no_events() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    create(
        &client,
        &core("ConfigMap", "configmaps"),
        Some("default"),
        configmap("cm-early", json!({})),
    )
    .await;
    let operator = cluster.start_operator(Operator::new([guest("selection")]).standalone());
    let journal = operator.journal().clone();
    logged(&journal, "selection", "configmaps cm-early").await;
    create(
        &client,
        &core("Pod", "pods"),
        Some("default"),
        pod("pod-late"),
    )
    .await;
    logged(&journal, "selection", "pods pod-late").await;
    // Scanning picks the new CRD up: its objects are handed over too.
    create_kopfexample_of_a_new_crd(&client, "kex-late").await;
    logged(&journal, "selection", "kopfexamples kex-late").await;
    let events = lists_and_watches(&cluster, "events");
    assert!(events.is_empty(), "Events asked for: {events:?}");
    let handled = guest_logs(&journal.records(), "selection");
    assert!(
        !handled.iter().any(|line| line.starts_with("events ")),
        "{handled:?}"
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// `@kopf.on.event(lambda resource: resource.group == 'kopf.dev' or resource.plural ==
/// 'configmaps')`: the guest's function of the resource's description chooses; a ConfigMap
/// there before the operator and a kopfexample of a CRD created after it started are
/// handed over, and the Pods it did not choose are never listed or watched.
#[tokio::test]
async fn a_handler_choosing_its_resources_gets_what_it_chose_and_the_rest_is_not_watched() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    create(
        &client,
        &core("ConfigMap", "configmaps"),
        Some("default"),
        configmap("cm-early", json!({})),
    )
    .await;
    create(
        &client,
        &core("Pod", "pods"),
        Some("default"),
        pod("pod-early"),
    )
    .await;
    let operator = cluster.start_operator(Operator::new([guest("choosing")]).standalone());
    let journal = operator.journal().clone();
    logged(&journal, "choosing", "configmaps cm-early").await;
    create_kopfexample_of_a_new_crd(&client, "kex-late").await;
    logged(&journal, "choosing", "kopfexamples kex-late").await;
    let pods = lists_and_watches(&cluster, "pods");
    assert!(pods.is_empty(), "Pods asked for: {pods:?}");
    let handled = guest_logs(&journal.records(), "choosing");
    assert!(
        handled
            .iter()
            .all(|line| line.starts_with("configmaps ") || line.starts_with("kopfexamples ")),
        "{handled:?}"
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}
