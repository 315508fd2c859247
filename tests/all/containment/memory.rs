//! Host memory: everything a guest hands the host is bounded before it is kept or
//! parsed, and the excess fails the call with an error naming the limit; the declared
//! memory caps of the calls running at once share one budget; and nothing a guest
//! asks for runs long on the executor (WASI randomness).

use std::time::{Duration, Instant};

use kapsel_host::Record;
use kapsel_tests::*;
use kube::api::Api;

use super::{Stage, rss_mib, sample, test_limits};

/// Measured: one call logging 200 MiB kept +205 MiB (512 MiB of debug lines under `-q`:
/// +528 MiB); memos 8 × 40 MB kept +322 MiB; index entries 8 × 20 MB +162 MiB; 500
/// Events of 4 MiB peaked at 718 MiB; a 50 MB result disappeared after the handler
/// "succeeded"; four guests asking WASI for 64 MiB of random bytes made `/healthz` take
/// 3.7–8 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_data_is_bounded_before_it_is_kept() {
    let stage = Stage::start(&["hostile", "polite"], test_limits(), &[]).await;
    let rss_before = rss_mib();
    let baseline = stage.baseline().await;
    let (_, _, health_baseline) = stage.health().await;

    // (handler, attack, what the failure must name)
    let attacks = [
        ("log_line", "log-line", "--max-log-line-bytes"),
        ("log_flood", "log-flood", "--max-log-bytes-per-call"),
        ("memo_hog", "memo-hog", "--max-memo-bytes"),
        ("index_hog", "index-hog", "--max-index-bytes"),
        ("event_hog", "event-hog", "--max-event-bytes"),
        ("big_result", "big-result", "--max-result-bytes"),
        ("big_patch", "big-patch", "--max-patch-bytes"),
        ("random", "random", "--max-random-bytes"),
    ];
    for round in 0..4 {
        for (_, attack, _) in attacks {
            stage.attack(&format!("{attack}-{round}"), attack).await;
        }
    }
    let (code, body, took) = stage.health().await;
    assert_eq!(code, 200, "{body}");
    let allowed = (health_baseline * 25).max(Duration::from_secs(1));
    assert!(
        took <= allowed,
        "liveness took {took:?} (baseline {health_baseline:?})"
    );
    for (handler, attack, flag) in attacks {
        let failure = stage.failure_of(handler, &format!("{attack}-0")).await;
        assert!(failure.contains(flag), "{handler}: {failure}");
    }

    // Nothing of it was kept: no log line above the limit, no annotation, no result.
    let longest = stage
        .journal
        .records()
        .iter()
        .filter_map(|r| match r {
            Record::GuestLog { message, .. } => Some(message.len()),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    assert!(
        longest <= 16 << 10,
        "a log line of {longest} bytes was kept"
    );
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(stage.client.clone(), "default");
    let patched = configmaps.get("big-patch-0").await.expect("the object");
    let annotations = patched.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key("hostile/big"),
        "the 2 MiB patch landed"
    );
    // The handler with the big result failed, so the object is not handled: no diff-base.
    let unhandled = configmaps.get("big-result-0").await.expect("the object");
    let annotations = unhandled.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key("kopf.zalando.org/last-handled-configuration"),
        "{annotations:?}"
    );
    let events =
        Api::<k8s_openapi::api::core::v1::Event>::namespaced(stage.client.clone(), "default")
            .list(&Default::default())
            .await
            .expect("events");
    assert!(
        events
            .items
            .iter()
            .all(|e| e.reason.as_deref() != Some("Hog")),
        "an Event of 4 MiB went out"
    );

    stage.assert_polite("after-data", baseline).await;
    stage.assert_healthy().await;
    let grown = rss_mib().saturating_sub(rss_before);
    assert!(grown < 256, "RSS grew by {grown} MiB");
    stage.stop().await;
}

/// Measured: six handlers declaring 512 MiB each took 2.9 GiB. Each `greedy` call
/// declares 64 MiB, four slots of 16 MiB: a handler holds at most four of the eight
/// slots, so one runs at a time, holding 48 MiB for 1.5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_memory_shares_one_budget() {
    let stage = Stage::start(&["hostile", "polite"], test_limits(), &[]).await;
    let rss_before = rss_mib();
    let baseline = stage.baseline().await;
    for i in 0..6 {
        stage.attack(&format!("greedy-{i}"), "greedy").await;
    }
    let started = Instant::now();
    let mut peak_rss = 0;
    let mut peak_busy = 0.0_f64;
    let mut seen_waiting = false;
    loop {
        let metrics = stage.metrics().await;
        let busy = sample(&metrics, "kapsel_call_slots_busy{pool=\"handlers\"}").unwrap_or(0.0);
        let waiting =
            sample(&metrics, "kapsel_call_slots_waiting{pool=\"handlers\"}").unwrap_or(0.0);
        peak_busy = peak_busy.max(busy);
        seen_waiting |= waiting >= 1.0;
        peak_rss = peak_rss.max(rss_mib());
        let records = stage.journal.records();
        let done = (0..6)
            .filter(|i| !outcomes(&records, "greedy", &format!("default/greedy-{i}")).is_empty())
            .count();
        if done == 6 {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE * 3,
            "the greedy calls never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        peak_busy <= 4.0,
        "greedy calls held {peak_busy} slots at once"
    );
    assert!(seen_waiting, "greedy calls never waited for one another");
    let grown = peak_rss.saturating_sub(rss_before);
    // Six at once would be 6 × 48 MiB; one at a time is 48 MiB.
    assert!(grown < 200, "RSS grew by {grown} MiB");
    stage.assert_polite("beside-greedy", baseline).await;
    stage.assert_healthy().await;
    stage.stop().await;
}
