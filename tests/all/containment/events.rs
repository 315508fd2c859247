//! A guest's Events never hold up its calls: past its Event pace they wait in the
//! background, identical ones folded into one Event with a count, the excess dropped and
//! counted in `/metrics`; when the operator stops, what still waits goes out.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kapsel_tests::*;
use kube::api::{Api, ListParams};

use super::{Figure, Stage, sample, test_limits};

/// The `Burst` Events on the cluster.
async fn bursts(client: &kube::Client) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Burst"))
        .collect()
}

/// One call posts 1,000 Events about its object: 500 the same, then 500 each different.
/// Past a burst of 10, the guest's pace is one Event every ten minutes: a call waiting
/// for its Events would take a week. It ends at once; the 10 of the burst go out, the
/// same Event waits as one (the other 489 folded into it), four different ones wait
/// beside it (a queue of five), and the 496 others are dropped and counted. When the
/// operator stops, the five waiting go out: the same one with its count of 490.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_events_never_hold_it_up() {
    let mut limits = test_limits();
    limits.max_events_per_call = 1000;
    limits.guest_event_rate = 1.0 / 600.0;
    limits.guest_event_burst = 10;
    limits.max_queued_events = 5;
    let stage = Stage::start(&["hostile"], limits, &[]).await;
    stage.attack("event-burst", "event-burst").await;
    let object = "default/event-burst";
    stage
        .journal
        .wait_for(PATIENCE, |records| {
            !outcomes(records, "event_burst", object).is_empty()
        })
        .await
        .expect("the call ends");
    let outcome = outcomes(&stage.journal.records(), "event_burst", object);
    assert_eq!(
        outcome,
        [("success".to_owned(), None)],
        "one call, not failed"
    );

    // The burst goes out while the rest waits for a turn days away.
    let mut burst = Vec::new();
    for _ in 0..100 {
        burst = bursts(&stage.client).await;
        if burst.len() >= 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(burst.len(), 10, "the burst");
    assert!(burst.iter().all(|e| e.count.is_none()), "sent once each");

    let metrics = stage.metrics().await;
    let figure = |series: &str| sample(&metrics, series).unwrap_or(0.0);
    let posted = figure("kapsel_guest_api_requests_total{guest=\"hostile\",verb=\"event\"}");
    let folded = figure("kapsel_events_aggregated_total{guest=\"hostile\"}");
    let dropped = figure("kapsel_events_dropped_total{guest=\"hostile\",reason=\"queue_full\"}");
    assert_eq!(
        (posted, folded, dropped),
        (1000.0, 489.0, 496.0),
        "{metrics}"
    );
    stage.assert_healthy().await;

    // Stopping sends what waits.
    stage.operator.stop().await.expect("a clean stop");
    let all = bursts(&stage.client).await;
    let counts: Vec<i32> = all.iter().map(|e| e.count.unwrap_or(1)).collect();
    let same = all
        .iter()
        .find(|e| e.count.is_some_and(|n| n > 1))
        .unwrap_or_else(|| panic!("no Event with a count: {counts:?}"));
    assert_eq!(same.message.as_deref(), Some("same"));
    assert_eq!(same.count, Some(490));
    assert_eq!(same.series.as_ref().and_then(|s| s.count), Some(490));
    assert!(same.first_timestamp <= same.last_timestamp);
    let sent: i32 = counts.iter().sum();
    assert_eq!(all.len(), 15, "{counts:?}");
    assert_eq!(
        f64::from(sent) + dropped,
        1000.0,
        "every Event accounted for"
    );
    Figure::new("event-burst")
        .with("posted", posted)
        .with("events_sent", all.len())
        .with("folded", folded)
        .with("dropped", dropped)
        .print();
    stage.cluster.shutdown().await.expect("shutdown");
}
