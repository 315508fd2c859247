//! Activity handlers (KOPF.md §1.12, §6.1): startup handlers run (and are retried)
//! before anything else; cleanup handlers run when the operator stops.

use kapsel_host::Record;
use kapsel_host::testing::Cluster;
use kapsel_tests::{PATIENCE, configmap, core, create, guest, guest_logs};
use serde_json::json;

#[tokio::test]
async fn startup_handlers_run_first_and_cleanup_handlers_last() {
    let cluster = Cluster::start().await.expect("cluster");
    let client = cluster.client();
    create(
        &client,
        &core("ConfigMap", "configmaps"),
        Some("default"),
        configmap("early", json!({})),
    )
    .await;
    let operator =
        cluster.start_operator(kapsel_host::Operator::new([guest("activities")]).standalone());
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |records| {
            guest_logs(records, "activities").contains(&"saw early".to_owned())
        })
        .await
        .expect("the event handler ran");
    operator.stop().await.expect("stopped cleanly");

    let records = journal.records();
    let logs = guest_logs(&records, "activities");
    assert_eq!(
        logs,
        ["warmed up after 2 attempts", "saw early", "tidied up"],
        "startup (retried once) before any event, cleanup at the end"
    );
    let outcomes: Vec<&str> = records
        .iter()
        .filter_map(|r| match r {
            Record::HandlerFinished {
                handler, outcome, ..
            } if handler == "warm_up" => Some(outcome.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(outcomes, ["retry", "success"]);
    cluster.shutdown().await.expect("cluster stops");
}
