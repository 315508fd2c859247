//! Daemons end with what runs them (KOPF.md §1.9, §8): when the operator stops, a
//! daemon's sleep answers false and it returns; when the operator pauses for a peer, its
//! daemons stop the same way, and start again when it resumes. On handler time: the
//! `heartbeat` daemon of the `timers` guest beats every 10 s.

use std::time::Duration;

use kapsel_host::testing::RunningOperator;
use kapsel_host::{Freezer, Operator, Record};
use kapsel_tests::*;
use serde_json::json;

fn heartbeat_calls(operator: &RunningOperator) -> usize {
    calls(&operator.journal().records(), "heartbeat").len()
}

/// Starts the `timers` guest on handler time and a beating object, and lets it beat once.
async fn one_beat(s: &Scene, operator: Operator) -> RunningOperator {
    let operator = s.cluster.start_operator_on_handler_time(operator);
    s.create(kopfexample(
        "beating",
        &["daemon"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    ))
    .await;
    operator
        .journal()
        .wait_for(PATIENCE, |r| !calls(r, "heartbeat").is_empty())
        .await
        .expect("the daemon starts");
    operator
        .advance(Duration::from_secs(10))
        .await
        .expect("settles");
    assert_eq!(
        guest_logs(&operator.journal().records(), "timers"),
        ["beat 1 of beating"]
    );
    operator
}

#[tokio::test]
async fn a_daemon_returns_when_the_operator_stops() {
    let s = Scene::start("daemon-stop").await;
    let operator = one_beat(&s, Operator::new([guest("timers")]).standalone()).await;
    let journal = operator.journal().clone();
    operator.stop().await.expect("stop");
    let records = journal.records();
    assert_eq!(
        guest_logs(&records, "timers"),
        ["beat 1 of beating", "heartbeat of beating stopped after 1"],
        "its sleep answered false, and it returned"
    );
    assert_eq!(
        outcomes(&records, "heartbeat", &s.object("beating")),
        [("success".to_owned(), None)]
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_daemon_stops_while_the_operator_is_paused_and_starts_again_on_resume() {
    let s = Scene::start("daemon-pause").await;
    apply_peering_manifests(&s.client, true).await;
    let operator = one_beat(&s, Operator::new([guest("timers")]).identity("op")).await;

    let freezer = Freezer::new("default")
        .identity("admin@console")
        .client(s.client.clone());
    freezer
        .clone()
        .freeze(Duration::from_secs(600))
        .await
        .expect("freeze");
    operator
        .journal()
        .wait_for(PATIENCE, |r| {
            guest_logs(r, "timers").contains(&"heartbeat of beating stopped after 1".to_owned())
        })
        .await
        .expect("the daemon stops when the operator pauses");
    assert!(
        operator
            .journal()
            .records()
            .iter()
            .any(|r| matches!(r, Record::Paused { reason } if reason.contains("admin@console")))
    );
    // Paused: no beat however long it lasts.
    operator
        .advance(Duration::from_secs(60))
        .await
        .expect("settles");
    assert_eq!(guest_logs(&operator.journal().records(), "timers").len(), 2);
    assert_eq!(heartbeat_calls(&operator), 1);

    freezer.resume().await.expect("resume");
    operator
        .journal()
        .wait_for(PATIENCE, |r| calls(r, "heartbeat").len() == 2)
        .await
        .expect("the daemon starts again on resume");
    operator
        .advance(Duration::from_secs(10))
        .await
        .expect("settles");
    assert_eq!(
        guest_logs(&operator.journal().records(), "timers"),
        [
            "beat 1 of beating",
            "heartbeat of beating stopped after 1",
            "beat 1 of beating"
        ]
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}
