//! API traffic: each guest's Kubernetes requests and Events at its own pace (counted per
//! guest in `/metrics`), the shortest timer interval and retry delay, and objects whose
//! handlers re-trigger themselves backed off and reported.

use std::time::{Duration, Instant};

use kapsel_tests::*;
use kube::api::{Api, ListParams};

use super::{Figure, Stage, assert_no_events, sample, test_limits};

/// Measured: one call made 39,568 GETs in 4.5 s, another created 2,513 ConfigMaps of
/// 100 KB, one posted 10,000 Events, and 3,000 Events about made-up objects started
/// 3,000 poster tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_api_traffic_keeps_its_pace() {
    let mut limits = test_limits();
    limits.guest_api_rate = 20.0;
    limits.guest_api_burst = 20;
    limits.guest_event_rate = 20.0;
    limits.guest_event_burst = 20;
    // With the burst, fewer than the Events per call: the flood fills its queue.
    limits.max_queued_events = 30;
    let stage = Stage::start(&["hostile", "polite"], limits.clone(), &[]).await;
    let baseline = stage.baseline().await;
    let started = Instant::now();
    for attack in ["get-flood", "create-flood", "event-flood", "made-up-events"] {
        stage.attack(attack, attack).await;
    }
    for (handler, attack) in [
        ("get_flood", "get-flood"),
        ("create_flood", "create-flood"),
        ("event_flood", "event-flood"),
        ("made_up_events", "made-up-events"),
    ] {
        let object = format!("default/{attack}");
        stage
            .journal
            .wait_for(PATIENCE, |records| {
                !outcomes(records, handler, &object).is_empty()
            })
            .await
            .unwrap_or_else(|_| panic!("{handler} never ended"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let under = stage.assert_polite("beside-floods", baseline).await;

    // One pace for all of the hostile guest's requests, one for its Events; every Event
    // posted is counted, those that waited, were folded or dropped as throttled.
    let metrics = stage.metrics().await;
    let count = |verb: &str| {
        sample(
            &metrics,
            &format!("kapsel_guest_api_requests_total{{guest=\"hostile\",verb=\"{verb}\"}}"),
        )
        .unwrap_or(0.0)
    };
    let hostile = count("get") + count("create");
    let events = count("event");
    let throttled = sample(
        &metrics,
        "kapsel_guest_api_throttled_total{guest=\"hostile\"}",
    )
    .unwrap_or(0.0);
    let paced = f64::from(limits.guest_api_burst) + limits.guest_api_rate * elapsed;
    // Each refusal is counted too: one per flood, at most; and one turn reserved before
    // the time was taken may be counted after it.
    assert!(
        hostile <= paced + 3.0,
        "{hostile} requests in {elapsed:.1} s, paced at {paced:.0}: {metrics}"
    );
    let dropped = sample(
        &metrics,
        "kapsel_events_dropped_total{guest=\"hostile\",reason=\"queue_full\"}",
    )
    .unwrap_or(0.0);
    // The flood's 100 Events came within its call's second: past the burst, the pace's
    // refill and the queue, the rest was dropped.
    let kept = f64::from(limits.guest_event_burst)
        + limits.guest_event_rate * limits.call_deadline.as_secs_f64()
        + f64::from(limits.max_queued_events);
    assert!(
        dropped >= f64::from(limits.max_events_per_call) - kept - 1.0,
        "{dropped} of {events} Events dropped: {metrics}"
    );
    assert!(throttled >= 1.0, "{metrics}");
    assert!(
        sample(
            &metrics,
            "kapsel_guest_api_requests_total{guest=\"polite\",verb=\"get\"}"
        )
        .is_some_and(|n| n >= 6.0),
        "the polite guest's own requests are counted apart: {metrics}"
    );
    let created =
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(stage.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .expect("configmaps")
            .items
            .iter()
            .filter(|c| {
                c.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.contains("-flood-"))
            })
            .count();
    assert!((created as f64) <= paced, "{created} ConfigMaps created");

    // The Event flood fails its call at the Events per call (its Events never held it
    // up); Events about objects the guest has nothing to do with are refused, so none of
    // them is posted. Those let through go out at the pace.
    let failure = stage.failure_of("event_flood", "event-flood").await;
    assert!(failure.contains("--max-events-per-call"), "{failure}");
    assert_no_events(&stage.client, &["Hijack", "MadeUp"]).await;
    let paced = f64::from(limits.guest_event_burst)
        + limits.guest_event_rate * started.elapsed().as_secs_f64();
    let flood = Api::<k8s_openapi::api::core::v1::Event>::all(stage.client.clone())
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Flood"))
        .count();
    assert!((flood as f64) <= paced, "{flood} Events of one call");
    stage.assert_healthy().await;
    Figure::new("api-floods")
        .polite(baseline, &[under])
        .with("hostile_requests", hostile)
        .with("hostile_events", events)
        .with("events_dropped", dropped)
        .with("paced_bound", format!("{paced:.0}"))
        .with("throttled", throttled)
        .with("configmaps_created", created)
        .with("flood_events_posted", flood)
        .with("seconds", format!("{elapsed:.1}"))
        .print();
    stage.stop().await;
}

/// The times of the next `count` calls of `handler` about `default/<name>` (those that
/// end from now on), as the test saw them end; calls ending together get one time.
async fn call_times(stage: &Stage, handler: &str, name: &str, count: usize) -> Vec<Instant> {
    let object = format!("default/{name}");
    let before = outcomes(&stage.journal.records(), handler, &object).len();
    let mut times = Vec::new();
    while times.len() < count {
        let seen = before + times.len();
        stage
            .journal
            .wait_for(PATIENCE, |records| {
                outcomes(records, handler, &object).len() > seen
            })
            .await
            .unwrap_or_else(|_| panic!("{handler} stopped being called for {object}"));
        let now = Instant::now();
        let total = outcomes(&stage.journal.records(), handler, &object).len();
        times.extend(std::iter::repeat_n(now, total - seen));
    }
    times
}

/// Measured: a timer with an interval of 0.001 s patched about 260 times/s; a retry delay
/// of 0 gave 600–790 calls/s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_and_retries_have_a_floor() {
    let mut limits = test_limits();
    limits.min_timer_interval = Duration::from_millis(200);
    limits.min_retry_delay = Duration::from_millis(200);
    // Only the floors bound these calls: the retries of `no-delay` patch its object, and
    // the self-trigger backoff would slow them down as well.
    limits.self_trigger_limit = 1000;
    let stage = Stage::start(&["hostile", "polite"], limits, &[]).await;
    let baseline = stage.baseline().await;
    stage.attack("fast-timer", "fast-timer").await;
    stage.attack("no-delay", "no-delay").await;
    let mut figure = Figure::new("fast-timer-and-no-retry-delay");
    for (handler, name) in [("fast_timer", "fast-timer"), ("no_delay", "no-delay")] {
        let times = call_times(&stage, handler, name, 6).await;
        let spread = times[5] - times[0];
        // Five intervals of at least 200 ms (the calls' own ends may bunch by a tick).
        assert!(
            spread >= Duration::from_millis(800),
            "{handler}: 6 calls within {spread:?}"
        );
        figure = figure.ms(&format!("{handler}_6_calls_spread"), spread);
    }
    let under = stage.assert_polite("beside-fast", baseline).await;
    stage.assert_healthy().await;
    figure
        .ms("spread_at_least", Duration::from_millis(800))
        .polite(baseline, &[under])
        .print();
    stage.stop().await;
}

/// Measured: a handler patching its own object looped at ~750 writes/s; fighting the
/// operator over the finalizer made 53,707 writes in 50 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_triggering_handlers_are_backed_off_and_reported() {
    let mut limits = test_limits();
    limits.min_retry_delay = Duration::from_millis(200);
    limits.self_trigger_limit = 5;
    let stage = Stage::start(&["hostile", "polite"], limits, &[]).await;
    let baseline = stage.baseline().await;
    let mut figure = Figure::new("self-triggering");
    for (handler, name) in [
        ("self_patch", "self-patch"),
        ("finalizer_fight", "finalizer-fight"),
    ] {
        let attacked = Instant::now();
        stage.attack(name, name).await;
        // Reported as a Warning Event about the object.
        let events =
            Api::<k8s_openapi::api::core::v1::Event>::namespaced(stage.client.clone(), "default");
        let deadline = Instant::now() + PATIENCE;
        loop {
            let reported = events
                .list(&ListParams::default())
                .await
                .expect("events")
                .items
                .into_iter()
                .any(|e| {
                    e.reason.as_deref() == Some("SelfTriggering")
                        && e.involved_object.name.as_deref() == Some(name)
                });
            if reported {
                break;
            }
            assert!(Instant::now() < deadline, "{name} is never reported");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // From then on, each round waits twice as long: 200, 400, 800 ms ...
        let reported = attacked.elapsed();
        let times = call_times(&stage, handler, name, 4).await;
        let spread = times[3] - times[0];
        assert!(
            spread >= Duration::from_millis(1000),
            "{handler}: 4 calls within {spread:?} after the report"
        );
        figure = figure
            .ms(&format!("{handler}_reported_after"), reported)
            .ms(&format!("{handler}_4_calls_spread"), spread);
    }
    let metrics = stage.metrics().await;
    assert!(
        sample(
            &metrics,
            "kapsel_self_trigger_backoffs_total{resource=\"configmaps.v1\"}"
        )
        .is_some_and(|n| n >= 2.0),
        "{metrics}"
    );
    let under = stage.assert_polite("beside-loops", baseline).await;
    stage.assert_healthy().await;
    figure
        .ms("spread_at_least", Duration::from_millis(1000))
        .polite(baseline, &[under])
        .print();
    stage.stop().await;
}

/// Measured: an ordinary guest with 12 create handlers (one per cycle, each patching) got
/// a `SelfTriggering` Warning and delays: going through a list of handlers was taken for
/// a loop. A write that records a changing handler's conclusion is progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn going_through_many_handlers_is_no_loop() {
    let mut limits = test_limits();
    limits.self_trigger_limit = 5;
    let stage = Stage::start(&["polite"], limits, &[]).await;
    let started = Instant::now();
    stage
        .configmap("steps-0", serde_json::json!({"kapsel.test/steps": "yes"}))
        .await;
    let object = "default/steps-0";
    stage
        .journal
        .wait_for(PATIENCE * 2, |records| {
            (1..=12).all(|n| {
                outcomes(records, &format!("step_{n:02}"), object)
                    .iter()
                    .any(|(outcome, _)| outcome == "success")
            })
        })
        .await
        .expect("all twelve handlers succeeded");
    let took = started.elapsed();
    assert_no_events(&stage.client, &["SelfTriggering"]).await;
    let metrics = stage.metrics().await;
    assert_eq!(
        sample(
            &metrics,
            "kapsel_self_trigger_backoffs_total{resource=\"configmaps.v1\"}"
        ),
        None,
        "{metrics}"
    );
    Figure::new("handler-steps")
        .ms("twelve_handlers", took)
        .with("self_trigger_limit", 5)
        .print();
    stage.stop().await;
}
