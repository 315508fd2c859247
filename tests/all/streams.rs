//! Watch streams survive the API server's faults: dropped connections resume,
//! expired history relists (and objects deleted meanwhile get DELETED).

use std::time::Duration;

use kapsel_host::testing::{Cluster, Fault, RequestMatcher, ServerConfig};
use kapsel_host::{Operator, Record};
use kapsel_tests::*;
use serde_json::json;

#[tokio::test]
async fn dropped_watches_resume() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let pods = core("Pod", "pods");
    create(&client, &pods, Some("default"), pod("first")).await;
    let operator = cluster.start_operator(Operator::new([guest("seed")]));
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |r| !calls(r, "log_event").is_empty())
        .await
        .expect("listing");

    cluster.server().faults().drop_watches();
    create(&client, &pods, Some("default"), pod("after-drop")).await;
    journal
        .wait_for(PATIENCE, |r| {
            calls(r, "log_event").contains(&("default/after-drop".into(), Some("ADDED".into())))
        })
        .await
        .expect("events after a dropped watch arrive");
    // Resumed from its resourceVersion: nothing was listed again.
    assert!(
        !journal
            .records()
            .iter()
            .any(|r| matches!(r, Record::Relisted { .. }))
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// The stream falls behind (a write it does not watch moves the cluster's
/// resourceVersion past its own, and no bookmark catches it up), its history expires and
/// its connection drops: it reconnects from its version, gets 410 Gone and must relist.
/// Its first listings fail, so it is away while a pod is deleted and another changed:
/// the deleted one gets DELETED from the relisting, the changed one comes listed.
#[tokio::test]
async fn an_object_deleted_while_the_stream_was_away_gets_deleted_after_a_relist() {
    // Without the simulated kubelet: the pods change only as the test says (a running
    // pod's DELETE would wait for its grace period).
    let config = ServerConfig::default()
        .bookmark_interval(Duration::from_secs(3600))
        .kubelet(false);
    let cluster = Cluster::start_with(config).await.unwrap();
    let client = cluster.client();
    let pods = core("Pod", "pods");
    create(&client, &pods, Some("default"), pod("first")).await;
    create(&client, &pods, Some("default"), pod("kept")).await;
    let operator = cluster.start_operator(Operator::new([guest("seed")]));
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |r| calls(r, "log_event").len() == 2)
        .await
        .expect("listing");

    let faults = cluster.server().faults();
    create(
        &client,
        &core("ConfigMap", "configmaps"),
        Some("default"),
        configmap("unwatched", json!({})),
    )
    .await;
    const FAILING_LISTS: usize = 1000;
    faults.fail_next(
        FAILING_LISTS,
        RequestMatcher::any().verb("list").plural("pods"),
        Fault::InternalError,
    );
    faults.expire_history();
    faults.drop_watches();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while faults.unserved() == FAILING_LISTS {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stream never tried to relist"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // No watch is open until a listing succeeds: these changes can only come with one.
    delete(&client, &pods, Some("default"), "first").await;
    patch(
        &client,
        &pods,
        Some("default"),
        "kept",
        json!({"metadata": {"labels": {"n": "1"}}}),
    )
    .await;
    faults.clear();
    journal
        .wait_for(PATIENCE, |r| {
            r.iter().any(|r| {
                matches!(r, Record::Relisted { resource, namespace: None } if resource == "pods.v1")
            })
        })
        .await
        .expect("the stream relists");
    operator.settle([]).await.expect("the relisting is handled");
    let mut seen = calls(&journal.records(), "log_event");
    seen.sort();
    let listed = |name: &str| (format!("default/{name}"), None);
    assert_eq!(
        seen,
        [
            listed("first"),
            ("default/first".into(), Some("DELETED".into())),
            listed("kept"),
            listed("kept"),
        ],
        "the first listing, then the relisting"
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}
