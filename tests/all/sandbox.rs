//! The sandbox: a guest that loops forever is stopped at its deadline, one that
//! allocates without bound at its memory cap, one that panics traps; the host
//! and the other handlers go on.

use std::time::Duration;

use kapsel_host::{Operator, Record, testing::Cluster};
use kapsel_tests::*;
use serde_json::json;

fn failures(records: &[Record], handler: &str) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::HandlerFailed {
                handler: h, error, ..
            } if h == handler => Some(error.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn misbehaving_handlers_are_stopped_and_the_host_goes_on() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let cm = core("ConfigMap", "configmaps");
    let operator = cluster.start_operator(
        Operator::new([guest("misbehaving")])
            .call_deadline(Duration::from_millis(300))
            .call_memory_mib(32),
    );
    let journal = operator.journal().clone();
    for behaviour in ["spin", "hog", "crash"] {
        create(
            &client,
            &cm,
            Some("default"),
            configmap(behaviour, json!({"kapsel.test/behaviour": behaviour})),
        )
        .await;
    }
    journal
        .wait_for(PATIENCE, |r| {
            ["spin", "hog", "crash"]
                .iter()
                .all(|h| !failures(r, h).is_empty())
        })
        .await
        .expect("each misbehaviour fails its call");
    let records = journal.records();
    let spin = failures(&records, "spin").join(" | ");
    let hog = failures(&records, "hog").join(" | ");
    let crash = failures(&records, "crash").join(" | ");
    assert!(
        spin.contains("deadline") || spin.contains("time"),
        "spin: {spin}"
    );
    assert!(hog.contains("memory"), "hog: {hog}");
    assert!(
        crash.contains("panic") || crash.contains("trap"),
        "crash: {crash}"
    );

    // The host goes on: a well-behaved configmap is still handled afterwards.
    create(&client, &cm, Some("default"), configmap("fine", json!({}))).await;
    journal
        .wait_for(PATIENCE, |r| {
            calls(r, "ok").iter().any(|(o, _)| o == "default/fine")
        })
        .await
        .expect("other handlers keep running");
    assert!(!operator.is_finished());
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}
