//! Activity handlers (KOPF.md §1.12, §6.1): startup handlers run (and are retried)
//! before anything else; cleanup handlers run when the operator stops.

use kapsel_host::Record;
use kapsel_host::testing::Cluster;
use kapsel_tests::{PATIENCE, configmap, core, create, guest, guest_logs};
use serde_json::json;

/// How the startup handler `warm_up`'s attempts ended, in order.
fn warm_ups(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::HandlerFinished {
                handler, outcome, ..
            } if handler == "warm_up" => Some(outcome.clone()),
            _ => None,
        })
        .collect()
}

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
    assert_eq!(warm_ups(&records), ["retry", "success"]);
    cluster.shutdown().await.expect("cluster stops");
}

/// A startup handler's retry waits on handler time, as every handler's does: on a manual
/// clock, its delay is over only once the test advances the clock past it, however long
/// the test waits (`kapsel test`'s `advance` reaches activities too).
#[tokio::test]
async fn an_activity_retry_waits_on_handler_time() {
    let cluster = Cluster::start().await.expect("cluster");
    let operator = cluster.start_operator_on_handler_time(
        kapsel_host::Operator::new([guest("activities")]).standalone(),
    );
    let journal = operator.journal().clone();
    let outcomes = warm_ups;
    journal
        .wait_for(PATIENCE, |records| outcomes(records) == ["retry"])
        .await
        .expect("the first attempt failed");
    // The operator settles as it is: its startup waits for handler time to pass.
    operator.settle([]).await.expect("waiting on handler time");
    assert_eq!(outcomes(&journal.records()), ["retry"], "not retried yet");
    // Its 0.2 s are the host's shortest retry delay, 1 s (`--min-retry-delay-ms`).
    let advance = |ms| operator.advance(std::time::Duration::from_millis(ms));
    advance(999).await.expect("advanced");
    assert_eq!(outcomes(&journal.records()), ["retry"], "not due yet");
    advance(1).await.expect("advanced");
    journal
        .wait_for(PATIENCE, |records| {
            outcomes(records) == ["retry", "success"]
        })
        .await
        .expect("retried once the delay was over");
    operator.stop().await.expect("stopped cleanly");
    cluster.shutdown().await.expect("cluster stops");
}
