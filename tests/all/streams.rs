//! Watch streams survive the API server's faults: dropped connections resume,
//! expired history relists (and objects deleted meanwhile get DELETED).

use kapsel_host::{Operator, testing::Cluster};
use kapsel_tests::*;
use serde_json::json;

#[tokio::test]
async fn dropped_watches_resume_and_expired_history_relists() {
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
            calls(r, "log_event")
                .iter()
                .any(|(o, _)| o == "default/after-drop")
        })
        .await
        .expect("events after a dropped watch arrive");

    // History expires and the connection drops: the stream must relist; an
    // object deleted while it was away is reported as DELETED.
    cluster.server().faults().expire_history();
    cluster.server().faults().drop_watches();
    delete(&client, &pods, Some("default"), "first").await;
    patch(
        &client,
        &pods,
        Some("default"),
        "after-drop",
        json!({"metadata": {"labels": {"n": "1"}}}),
    )
    .await;
    journal
        .wait_for(PATIENCE, |r| {
            calls(r, "log_event").contains(&("default/first".into(), Some("DELETED".into())))
        })
        .await
        .expect("the deletion is noticed");
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}
