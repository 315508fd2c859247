//! on.event handlers: every event, both resources, once per event (KOPF.md §1.4, §1.7).

use kapsel_host::Operator;
use kapsel_host::testing::{Cluster, ServerConfig};
use kapsel_tests::*;
use serde_json::json;

#[tokio::test]
async fn seed_sees_events_of_both_resources() {
    // Without the simulated kubelet: a running pod's DELETE would wait for its grace period.
    let cluster = Cluster::start_with(ServerConfig::default().kubelet(false))
        .await
        .unwrap();
    let client = cluster.client();
    create_kopfexamples_crd(&client).await;
    // Objects that exist before the operator starts come as the listing (type None).
    create(
        &client,
        &kopfexamples(),
        Some("default"),
        manifest("kopfexample-obj.yaml"),
    )
    .await;
    create(&client, &core("Pod", "pods"), Some("default"), pod("early")).await;

    let operator = cluster.start_operator(Operator::new([guest("seed")]));
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |r| calls(r, "log_event").len() >= 2)
        .await
        .expect("the listing reaches the handler");

    create(&client, &core("Pod", "pods"), Some("default"), pod("late")).await;
    patch(
        &client,
        &kopfexamples(),
        Some("default"),
        "kopf-example-1",
        json!({"spec": {"field": "changed"}}),
    )
    .await;
    delete(&client, &core("Pod", "pods"), Some("default"), "late").await;
    journal
        .wait_for(PATIENCE, |r| {
            let seen = calls(r, "log_event");
            seen.contains(&("default/late".into(), Some("DELETED".into())))
                && seen.contains(&("default/kopf-example-1".into(), Some("MODIFIED".into())))
        })
        .await
        .expect("changes reach the handler");

    let seen = calls(&journal.records(), "log_event");
    assert!(
        seen.contains(&("default/kopf-example-1".into(), None)),
        "{seen:?}"
    );
    assert!(seen.contains(&("default/early".into(), None)), "{seen:?}");
    assert!(
        seen.contains(&("default/late".into(), Some("ADDED".into()))),
        "{seen:?}"
    );
    let logs = guest_logs(&journal.records(), "seed");
    assert!(
        logs.iter()
            .any(|l| l.contains("KopfExample") && l.contains("default/kopf-example-1")),
        "the seed logs type, kind and name: {logs:?}"
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn overlapping_selectors_call_a_handler_once_per_event() {
    // Without the simulated kubelet: the pod's only events are the test's own.
    let cluster = Cluster::start_with(ServerConfig::default().kubelet(false))
        .await
        .unwrap();
    let client = cluster.client();
    create(
        &client,
        &core("Pod", "pods"),
        Some("default"),
        pod("listed"),
    )
    .await;
    let operator = cluster.start_operator(Operator::new([guest("probes")]));
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |r| !calls(r, "once").is_empty())
        .await
        .expect("listing");
    create(&client, &core("Pod", "pods"), Some("default"), pod("added")).await;
    patch(
        &client,
        &core("Pod", "pods"),
        Some("default"),
        "added",
        json!({"metadata": {"labels": {"x": "y"}}}),
    )
    .await;
    delete(&client, &core("Pod", "pods"), Some("default"), "added").await;
    journal
        .wait_for(PATIENCE, |r| {
            calls(r, "once").contains(&("default/added".into(), Some("DELETED".into())))
        })
        .await
        .expect("all events arrive");
    // Every event has been processed once the operator has settled: a duplicate call
    // would be in the journal by then.
    operator.settle([]).await.expect("settled");
    let seen = calls(&journal.records(), "once");
    for expected in [
        ("default/listed".to_owned(), None),
        ("default/added".to_owned(), Some("ADDED".to_owned())),
        ("default/added".to_owned(), Some("MODIFIED".to_owned())),
        ("default/added".to_owned(), Some("DELETED".to_owned())),
    ] {
        let n = seen.iter().filter(|s| **s == expected).count();
        assert_eq!(n, 1, "{expected:?} handled {n} times: {seen:?}");
    }
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_crd_created_later_is_served_without_restart() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let operator = cluster.start_operator(Operator::new([guest("seed")]));
    let journal = operator.journal().clone();
    // Pods are served at once; kopfexamples do not exist yet.
    create(&client, &core("Pod", "pods"), Some("default"), pod("p")).await;
    journal
        .wait_for(PATIENCE, |r| !calls(r, "log_event").is_empty())
        .await
        .expect("pods served");

    create_kopfexamples_crd(&client).await;
    create(
        &client,
        &kopfexamples(),
        Some("default"),
        manifest("kopfexample-obj.yaml"),
    )
    .await;
    journal
        .wait_for(PATIENCE, |r| {
            calls(r, "log_event")
                .iter()
                .any(|(o, _)| o == "default/kopf-example-1")
        })
        .await
        .expect("the new CRD's objects reach the handler");
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn namespace_patterns_limit_the_streams() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    for ns in ["team-a", "team-b", "other"] {
        create(
            &client,
            &core("Namespace", "namespaces"),
            None,
            json!({"metadata": {"name": ns}}),
        )
        .await;
        create(&client, &core("Pod", "pods"), Some(ns), pod("p")).await;
    }
    let operator =
        cluster.start_operator(Operator::new([guest("seed")]).namespaces(["team-*,!team-b"]));
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |r| {
            calls(r, "log_event").iter().any(|(o, _)| o == "team-a/p")
        })
        .await
        .expect("matching namespace served");
    // A namespace created later that matches gets its stream too.
    create(
        &client,
        &core("Namespace", "namespaces"),
        None,
        json!({"metadata": {"name": "team-c"}}),
    )
    .await;
    create(&client, &core("Pod", "pods"), Some("team-c"), pod("p")).await;
    journal
        .wait_for(PATIENCE, |r| {
            calls(r, "log_event").iter().any(|(o, _)| o == "team-c/p")
        })
        .await
        .expect("new matching namespace served");
    let seen = calls(&journal.records(), "log_event");
    assert!(
        !seen
            .iter()
            .any(|(o, _)| o.starts_with("team-b/") || o.starts_with("other/")),
        "{seen:?}"
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// An on.event handler's patch is applied with the event (Kopf applies them after the
/// event's handlers); before, it was dropped without a word.
#[tokio::test]
async fn a_raw_event_handlers_patch_is_applied() {
    case_passes("changes", "events", "patch.yaml").await;
}

/// `kapsel::events::info`, `warn` and `exception` post Events of type Normal, Warning
/// and Error about the object, with the guest's reason and message.
#[tokio::test]
async fn a_guests_info_warn_and_exception_are_posted_as_events() {
    case_passes("changes", "events", "posting.yaml").await;
}
