//! Index handlers (KOPF.md §7): every rule of index results, lookups from the
//! guest, and the readiness gate.

use kapsel_host::{Operator, Record, testing::Cluster};
use kapsel_tests::*;
use serde_json::{Value, json};

const CONFIGMAPS: (&str, &str) = ("ConfigMap", "configmaps");

/// The latest `report` line the probes guest logged after `trigger`'s event.
fn last_report(records: &[Record], trigger: &str) -> Option<Value> {
    guest_logs(records, "probes")
        .iter()
        .rev()
        .filter_map(|l| l.strip_prefix("report "))
        .filter_map(|json| serde_json::from_str::<Value>(json).ok())
        .find(|v| v["trigger"] == trigger)
}

/// Touches the reporting configmap and waits for its report.
async fn report(cluster: &Cluster, journal: &kapsel_host::Journal, round: u32) -> Value {
    let cm = core(CONFIGMAPS.0, CONFIGMAPS.1);
    let name = format!("report-{round}");
    create(
        &cluster.client(),
        &cm,
        Some("default"),
        configmap(&name, json!({"report": "yes"})),
    )
    .await;
    journal
        .wait_for(PATIENCE, |r| last_report(r, &name).is_some())
        .await
        .expect("a report");
    last_report(&journal.records(), &name).expect("a report was logged")
}

/// Waits until this many events of `object` went through the pipeline (the
/// `seen` event handler runs after the indexers, DELETED included).
async fn indexed(journal: &kapsel_host::Journal, object: &str, events: usize) {
    journal
        .wait_for(PATIENCE, |r| {
            calls(r, "seen").iter().filter(|(o, _)| o == object).count() >= events
        })
        .await
        .expect("indexed");
}

#[tokio::test]
async fn index_results_follow_kopf() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let cm = core(CONFIGMAPS.0, CONFIGMAPS.1);
    let operator = cluster.start_operator(Operator::new([guest("probes")]));
    let journal = operator.journal().clone();

    create(
        &client,
        &cm,
        Some("default"),
        configmap("a", json!({"sticky": "one", "a": "1", "b": "2"})),
    )
    .await;
    indexed(&journal, "default/a", 1).await;
    let r = report(&cluster, &journal, 1).await;
    assert_eq!(r["sticky"], json!(["one"]));
    assert_eq!(
        (r["a"].clone(), r["b"].clone()),
        (json!(["1"]), json!(["2"]))
    );
    assert_eq!(
        r["null_values"],
        json!(true),
        "{{\"key\": null}} stores null: {r}"
    );
    let nulls_before = r["nulls"].as_u64().unwrap();

    // The sticky label goes: the handler returns nothing, so "one" stays.
    // Label b goes: the key the handler no longer returns is removed.
    patch(
        &client,
        &cm,
        Some("default"),
        "a",
        json!({"metadata": {"labels": {"sticky": null, "b": null}}}),
    )
    .await;
    indexed(&journal, "default/a", 2).await;
    let r = report(&cluster, &journal, 2).await;
    assert_eq!(
        r["sticky"],
        json!(["one"]),
        "returning nothing keeps the values: {r}"
    );
    assert_eq!(r["a"], json!(["1"]));
    assert_eq!(r["b"], json!([]), "keys not returned are removed: {r}");

    // Deletion removes the object from every index.
    delete(&client, &cm, Some("default"), "a").await;
    indexed(&journal, "default/a", 3).await;
    let r = report(&cluster, &journal, 3).await;
    assert_eq!(
        (r["sticky"].clone(), r["a"].clone()),
        (json!([]), json!([])),
        "{r}"
    );
    // Two report configmaps were added meanwhile (they are indexed too), and `a` left.
    assert_eq!(r["nulls"].as_u64().unwrap(), nulls_before + 2 - 1, "{r}");
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn event_handlers_wait_for_complete_indexes() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let pods = core("Pod", "pods");
    for name in ["a", "b", "c", "d", "e"] {
        create(&client, &pods, Some("default"), pod(name)).await;
    }
    let operator = cluster.start_operator(Operator::new([guest("indexes")]));
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |r| {
            guest_logs(r, "indexes")
                .iter()
                .filter(|l| l.starts_with("pods in"))
                .count()
                >= 5
        })
        .await
        .expect("the event handler runs for each listed pod");
    // Every event handler call saw the whole listing already indexed.
    for line in guest_logs(&journal.records(), "indexes") {
        assert_eq!(
            line, "pods in default: [a, b, c, d, e]",
            "the gate held the handler back until indexing was complete"
        );
    }
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}
