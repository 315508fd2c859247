//! Resource selection beyond named resources (KOPF.md §2.1–§2.4): a handler of every
//! resource (Kopf's `kopf.EVERYTHING`) is handed the objects of every kind the cluster
//! serves, also of a CRD created after the operator started, and never Events.

use kapsel_host::Operator;
use kapsel_tests::*;
use serde_json::json;

/// `@kopf.on.event(kopf.EVERYTHING)`: a ConfigMap there before the operator, a Pod created
/// after it started, and a kopfexample of a CRD created after it started are all handed
/// to the one handler; Events (which handling itself produces) are never listed or
/// watched.
#[tokio::test]
async fn a_handler_of_everything_gets_every_kind_and_crds_created_later_but_no_events() {
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
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
    let logged = |line: &'static str| {
        let journal = journal.clone();
        async move {
            journal
                .wait_for(PATIENCE, |records| {
                    guest_logs(records, "selection").iter().any(|l| l == line)
                })
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "{line:?} not logged; logged: {:?}",
                        guest_logs(&journal.records(), "selection")
                    )
                });
        }
    };
    logged("configmaps cm-early").await;
    create(
        &client,
        &core("Pod", "pods"),
        Some("default"),
        pod("pod-late"),
    )
    .await;
    logged("pods pod-late").await;
    // Scanning picks the new CRD up: its objects are handed over too.
    create_kopfexamples_crd(&client).await;
    let mut kex = kopfexample("kex-late", &[], json!({}), json!({}), json!({}));
    kex["metadata"]["namespace"] = json!("default");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    // The API server serves the CRD's resource once it is established.
    while kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &kopfexamples(),
    )
    .create(
        &Default::default(),
        &serde_json::from_value(kex.clone()).unwrap(),
    )
    .await
    .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "kopfexamples not served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    logged("kopfexamples kex-late").await;
    let events: Vec<String> = cluster
        .server()
        .request_counts()
        .iter()
        .filter(|c| {
            c.kind.resource == "events" && ["list", "watch"].contains(&c.kind.verb.as_str())
        })
        .map(|c| format!("{} {}", c.kind.verb, c.kind.resource))
        .collect();
    assert!(events.is_empty(), "Events asked for: {events:?}");
    let handled = guest_logs(&journal.records(), "selection");
    assert!(
        !handled.iter().any(|line| line.starts_with("events ")),
        "{handled:?}"
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}
