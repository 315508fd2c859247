//! CPU: a deadline a guest may not raise past the host's maximum, call slots shared
//! fairly between guests and handlers, timers and daemons apart from the short calls,
//! the instance pool never exhausted by daemons, and liveness failing when calls starve.

use std::time::{Duration, Instant};

use kapsel_host::{Operator, Record};
use kapsel_tests::*;
use serde_json::json;

use super::{Figure, Stage, refused_at_load, rss_mib, sample, test_limits};

/// Waits until the metrics show `busy` slots held and at least `waiting` calls waiting
/// in `pool`; returns the metrics then. A failure says the most seen meanwhile.
async fn slots_reach(stage: &Stage, pool: &str, busy: f64, waiting: f64) -> String {
    let deadline = Instant::now() + PATIENCE * 2;
    let (mut most_held, mut most_queued) = (0.0_f64, 0.0_f64);
    loop {
        let metrics = stage.metrics().await;
        let held = sample(
            &metrics,
            &format!("kapsel_call_slots_busy{{pool=\"{pool}\"}}"),
        );
        let queued = sample(
            &metrics,
            &format!("kapsel_call_slots_waiting{{pool=\"{pool}\"}}"),
        );
        if held == Some(busy) && queued.is_some_and(|q| q >= waiting) {
            return metrics;
        }
        most_held = most_held.max(held.unwrap_or(0.0));
        most_queued = most_queued.max(queued.unwrap_or(0.0));
        assert!(
            Instant::now() < deadline,
            "the {pool} pool never had {busy} slots busy and {waiting} calls waiting: at most \
             {most_held} busy and {most_queued} waiting were seen"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How long liveness takes to answer: the median of its answers over a second (the
/// median, since a loaded machine delays a few of them whatever the guests do).
async fn median_health(stage: &Stage) -> Duration {
    let mut answers = Vec::new();
    let polling = Instant::now();
    while polling.elapsed() < Duration::from_secs(1) {
        answers.push(stage.health().await.2);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    answers.sort();
    answers[answers.len() / 2]
}

/// Measured: 16 spinning objects took all 16 call slots and nothing else completed for
/// 40–60 s; 4 daemons with long budgets made the other handlers 9–21× slower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinning_handlers_and_daemons_leave_the_others_room() {
    let stage = Stage::start(&["hostile", "polite"], test_limits(), &[]).await;
    let rss_before = rss_mib();
    let baseline = stage.baseline().await;
    let health_baseline = median_health(&stage).await;

    for i in 0..16 {
        stage.attack(&format!("spin-{i}"), "spin").await;
    }
    for i in 0..4 {
        stage
            .attack(&format!("spin-daemon-{i}"), "spin-daemon")
            .await;
    }
    // The spinning handler holds its share (half of the 8 slots) and no more, though
    // its guest's share is larger: its other 12 calls wait. The daemons hold slots of
    // their own pool.
    slots_reach(&stage, "handlers", 4.0, 12.0).await;
    slots_reach(&stage, "background", 4.0, 0.0).await;
    // A second spinning handler of the same guest takes what is left of the guest's
    // share (three quarters: 6 of the 8 slots), and no more.
    for i in 0..8 {
        stage.attack(&format!("spin-too-{i}"), "spin-too").await;
    }
    slots_reach(&stage, "handlers", 6.0, 6.0).await;
    // The host's own work (here: answering liveness) keeps a thread of its own, since
    // fewer guest calls compute at once than the executor has threads (turns): a
    // figure, not an assertion. Without turns, ten computing calls on two threads delay
    // each of its steps: a median of 48-68 ms against 1-1.5 ms with them, on a quiet
    // machine; but on a loaded one (`make test` beside other builds) it reached 31 ms
    // with turns, so no bound both catches the one and passes the other.
    let health_under = median_health(&stage).await;

    let mut under = Vec::new();
    for i in 0..3 {
        under.push(
            stage
                .assert_polite(&format!("under-spin-{i}"), baseline)
                .await,
        );
    }
    let metrics = stage.metrics().await;
    assert_eq!(
        sample(&metrics, "kapsel_call_slots_busy{pool=\"handlers\"}"),
        Some(6.0),
        "the polite calls came and went; the spinners still hold their guest's share only"
    );
    stage.assert_healthy().await;
    // The spinning calls end at the deadline they declared (the host's maximum).
    let failure = stage.failure_of("spin", "spin-0").await;
    assert!(failure.contains("deadline of 2000 ms"), "{failure}");
    let grown = rss_mib().saturating_sub(rss_before);
    assert!(grown < 200, "RSS grew by {grown} MiB");
    Figure::new("spinning-handlers-and-daemons")
        .polite(baseline, &under)
        .with("handler_share_slots", 4)
        .with("guest_share_slots", 6)
        .with("pool_slots", 8)
        .with("daemon_slots_busy", 4)
        .with("healthz_median_baseline_us", health_baseline.as_micros())
        .with("healthz_median_under_attack_us", health_under.as_micros())
        .with("rss_grown_mib", grown)
        .with("rss_bound_mib", 200)
        .print();
    stage.stop().await;
}

/// Measured: a guest granted itself an hour per call.
#[tokio::test]
async fn a_guest_cannot_grant_itself_an_hour() {
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
    let operator = cluster.start_operator(Operator::new([guest("greedy"), guest("polite")]));
    let journal = operator.journal().clone();
    let rejected = refused_at_load(&journal, "greedy is refused at load").await;
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert!(
        rejected[0].contains("greedy.wasm")
            && rejected[0].contains("deadline of 3600000 ms")
            && rejected[0].contains("maximum of 60000 ms"),
        "{rejected:?}"
    );
    Figure::new("hour-long-deadline")
        .with("declared_ms", 3_600_000)
        .with("bound_ms", 60_000)
        .with("refused_at_load", rejected.len())
        .print();
    // The other guest runs.
    create(
        &cluster.client(),
        &core("ConfigMap", "configmaps"),
        Some("default"),
        configmap("after-greedy", json!({"kapsel.test/polite": "yes"})),
    )
    .await;
    journal
        .wait_for(PATIENCE, |r| !calls(r, "polite").is_empty())
        .await
        .expect("the polite guest runs");
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// Measured: a spinning index handler on 16 objects at start-up, and nothing else ever
/// ran (the readiness gate waits for the indexes). Now the indexers end at their
/// deadline: the gate opens after ⌈16 / 4⌉ rounds of 1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinning_indexers_at_start_end_at_their_deadline() {
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
    let client = cluster.client();
    for i in 0..16 {
        create(
            &client,
            &core("ConfigMap", "configmaps"),
            Some("default"),
            configmap(
                &format!("spin-index-{i}"),
                json!({"kapsel.test/hostile": "spin-index"}),
            ),
        )
        .await;
    }
    let started = Instant::now();
    let stage = Stage::start_on(cluster, &["hostile", "polite"], test_limits(), &[]).await;
    let first = stage.polite_latency("first").await;
    let gate = started.elapsed();
    let rounds = 16_u32.div_ceil(4);
    let bound = test_limits().call_deadline * rounds + Duration::from_secs(5);
    assert!(
        gate <= bound,
        "the first polite call ended {gate:?} after the start ({first:?} after its object), \
         allowed {bound:?}"
    );
    let baseline = stage.baseline().await;
    // The indexers spin again on every change: the others keep their pace.
    for i in 0..16 {
        patch(
            &stage.client,
            &core("ConfigMap", "configmaps"),
            Some("default"),
            &format!("spin-index-{i}"),
            json!({"metadata": {"annotations": {"touched": "yes"}}}),
        )
        .await;
    }
    slots_reach(&stage, "handlers", 4.0, 1.0).await;
    let under = stage.assert_polite("while-indexing", baseline).await;
    stage.assert_healthy().await;
    Figure::new("spinning-indexers-at-start")
        .ms("first_polite_after_start", gate)
        .ms("first_polite_bound", bound)
        .polite(baseline, &[under])
        .print();
    stage.stop().await;
}

/// Measured: 64 well-behaved daemons held all 64 instances; every other call then failed
/// with "maximum concurrent limit of 64 … reached", and liveness said 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_cannot_hold_every_instance() {
    let mut limits = test_limits();
    limits.background_slots = 4;
    limits.guest_share_percent = 100;
    limits.handler_share_percent = 100;
    let stage = Stage::start(&["polite"], limits, &[]).await;
    let baseline = stage.baseline().await;
    for i in 0..20 {
        stage
            .configmap(&format!("sleepy-{i}"), json!({"kapsel.test/sleepy": "yes"}))
            .await;
    }
    // Four daemons run, sixteen wait for a background slot; the short calls have theirs.
    slots_reach(&stage, "background", 4.0, 16.0).await;
    let mut under = Vec::new();
    for i in 0..3 {
        under.push(
            stage
                .assert_polite(&format!("beside-daemons-{i}"), baseline)
                .await,
        );
    }
    let failures: Vec<String> = stage
        .journal
        .records()
        .into_iter()
        .filter_map(|r| match r {
            Record::HandlerFailed { error, .. } => Some(error),
            _ => None,
        })
        .collect();
    assert!(failures.is_empty(), "{failures:?}");
    stage.assert_healthy().await;
    Figure::new("daemons-hold-instances")
        .polite(baseline, &under)
        .with("daemons", 20)
        .with("daemon_slots_busy", 4)
        .with("daemons_waiting", 16)
        .with("failed_calls", failures.len())
        .print();
    stage.stop().await;
}

/// When calls do starve (here: a pool of two slots that one handler may take whole),
/// liveness says so, and recovers once they get slots again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starved_calls_fail_liveness() {
    let mut limits = test_limits();
    limits.call_slots = 2;
    limits.guest_share_percent = 100;
    limits.handler_share_percent = 100;
    // The hostile guest declares 64 MiB calls: they must fit in a handler's share.
    limits.call_memory_mib = 32;
    limits.starved_after = Duration::from_millis(500);
    let stage = Stage::start(&["hostile"], limits, &[]).await;
    stage.assert_healthy().await;
    let attacked = Instant::now();
    for i in 0..6 {
        stage.attack(&format!("starving-{i}"), "spin").await;
    }
    let deadline = Instant::now() + PATIENCE;
    let body = loop {
        let (code, body, _) = stage.health().await;
        if code == 500 {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "liveness never said the calls starve"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        body.contains("calls are starved") && body.contains("wait for a call slot"),
        "{body}"
    );
    let reported = attacked.elapsed();
    // Three rounds of 2 s: then nothing waits, and liveness is fine again.
    stage
        .journal
        .wait_for(PATIENCE, |records| {
            (0..6).all(|i| !outcomes(records, "spin", &format!("default/starving-{i}")).is_empty())
        })
        .await
        .expect("every spinning call ended");
    stage.assert_healthy().await;
    Figure::new("starved-calls")
        .ms("liveness_500_after", reported)
        .ms("starved_after", Duration::from_millis(500))
        .ms("recovered_after", attacked.elapsed())
        .print();
    stage.stop().await;
}
