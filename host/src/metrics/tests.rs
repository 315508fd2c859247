//! Tests of the metrics: what the journal and the parts report, as Prometheus reads it.

use super::*;

fn finished(handler: &str, seconds: f64, outcome: &str, fault: Option<&str>) -> Record {
    Record::HandlerFinished {
        guest: "seed".into(),
        handler: handler.into(),
        kind: "event".into(),
        object: Some("default/a".into()),
        seconds,
        outcome: outcome.into(),
        fault: fault.map(str::to_owned),
        message: String::new(),
    }
}

fn lines_of<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .collect()
}

#[test]
fn handler_records_feed_counters_faults_and_durations() {
    let metrics = Metrics::default();
    metrics.observe(&finished("a", 0.002, "success", None));
    metrics.observe(&finished("a", 0.3, "retry", Some("timeout")));
    metrics.observe(&finished("a", 0.001, "failure", Some("trap")));
    metrics.observe(&finished("a", 0.001, "ignored", None));
    let text = metrics.render();
    let labels = "{guest=\"seed\",handler=\"a\",kind=\"event\"}";
    assert_eq!(
        lines_of(&text, "kapsel_handler_invocations_total"),
        [format!("kapsel_handler_invocations_total{labels} 4")]
    );
    assert_eq!(
        lines_of(&text, "kapsel_handler_failures_total"),
        [format!("kapsel_handler_failures_total{labels} 3")]
    );
    assert_eq!(
        lines_of(&text, "kapsel_handler_retries_total"),
        [format!("kapsel_handler_retries_total{labels} 1")]
    );
    assert!(text.contains(
        "kapsel_handler_duration_seconds_count{guest=\"seed\",handler=\"a\",kind=\"event\"} 4\n"
    ));
    assert!(text.contains("kapsel_handler_duration_seconds_bucket{guest=\"seed\",handler=\"a\",kind=\"event\",le=\"0.001\"} 2\n"));
    assert_eq!(
        lines_of(&text, "kapsel_sandbox_faults_total"),
        [
            "kapsel_sandbox_faults_total{guest=\"seed\",handler=\"a\",kind=\"event\",fault=\"timeout\"} 1",
            "kapsel_sandbox_faults_total{guest=\"seed\",handler=\"a\",kind=\"event\",fault=\"trap\"} 1",
        ]
    );
}

#[test]
fn every_family_is_declared_once_even_without_samples() {
    let text = Metrics::default().render();
    for family in [
        "kapsel_handler_invocations_total counter",
        "kapsel_handler_failures_total counter",
        "kapsel_handler_retries_total counter",
        "kapsel_handler_duration_seconds histogram",
        "kapsel_sandbox_faults_total counter",
        "kapsel_watch_stream_restarts_total counter",
        "kapsel_queue_objects gauge",
        "kapsel_guest_reloads_total counter",
        "kapsel_call_slots gauge",
        "kapsel_call_slots_busy gauge",
        "kapsel_call_slots_waiting gauge",
        "kapsel_guest_api_requests_total counter",
        "kapsel_guest_api_throttled_total counter",
        "kapsel_events_aggregated_total counter",
        "kapsel_events_dropped_total counter",
        "kapsel_self_trigger_backoffs_total counter",
        "kapsel_paused gauge",
    ] {
        let line = format!("# TYPE {family}");
        assert_eq!(text.lines().filter(|l| *l == line).count(), 1, "{line}");
    }
    assert!(text.ends_with("kapsel_paused 0\n"));
}

#[test]
fn streams_queues_and_pausing_are_reported() {
    let metrics = Metrics::default();
    metrics.stream_restarted("pods.v1");
    metrics.stream_restarted("pods.v1");
    let one = metrics.queue("configmaps.v1");
    let other = metrics.queue("configmaps.v1");
    one.increment();
    other.increment();
    one.decrement();
    metrics.observe(&Record::Paused {
        reason: "a peer".into(),
    });
    let text = metrics.render();
    assert!(text.contains("kapsel_watch_stream_restarts_total{resource=\"pods.v1\"} 2\n"));
    assert!(text.contains("kapsel_queue_objects{resource=\"configmaps.v1\"} 1\n"));
    assert!(text.contains("kapsel_paused 1\n"));
    metrics.observe(&Record::Resumed);
    assert!(metrics.render().contains("kapsel_paused 0\n"));
}

#[test]
fn reloads_are_counted_by_guest_and_result() {
    let metrics = Metrics::default();
    let reloaded = |change: &str| Record::GuestReloaded {
        guest: "app".into(),
        path: "/guests/app.wasm".into(),
        change: change.into(),
    };
    metrics.observe(&reloaded("replaced"));
    metrics.observe(&reloaded("replaced"));
    metrics.observe(&reloaded("added"));
    metrics.observe(&Record::GuestRefused {
        guest: "app".into(),
        path: "/guests/app.wasm".into(),
        error: "not WebAssembly".into(),
    });
    let text = metrics.render();
    for line in [
        "kapsel_guest_reloads_total{guest=\"app\",result=\"added\"} 1\n",
        "kapsel_guest_reloads_total{guest=\"app\",result=\"refused\"} 1\n",
        "kapsel_guest_reloads_total{guest=\"app\",result=\"replaced\"} 2\n",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
}

#[test]
fn slots_guest_requests_and_backoffs_are_reported() {
    let metrics = Metrics::default();
    metrics.report_slots(|| {
        vec![SlotLoad {
            pool: "handlers",
            size: 16,
            busy: 3,
            waiting: 2,
        }]
    });
    metrics.guest_request("g", "get", false);
    metrics.guest_request("g", "get", true);
    metrics.guest_request("g", "event", false);
    metrics.self_trigger_backoff("configmaps.v1");
    let text = metrics.render();
    for line in [
        "kapsel_call_slots{pool=\"handlers\"} 16\n",
        "kapsel_call_slots_busy{pool=\"handlers\"} 3\n",
        "kapsel_call_slots_waiting{pool=\"handlers\"} 2\n",
        "kapsel_guest_api_requests_total{guest=\"g\",verb=\"get\"} 2\n",
        "kapsel_guest_api_requests_total{guest=\"g\",verb=\"event\"} 1\n",
        "kapsel_guest_api_throttled_total{guest=\"g\"} 1\n",
        "kapsel_self_trigger_backoffs_total{resource=\"configmaps.v1\"} 1\n",
    ] {
        assert!(text.contains(line), "{line}");
    }
}

#[test]
fn a_loop_that_panics_is_dead_one_that_ends_is_not() {
    let metrics = Metrics::default();
    drop(metrics.loop_watch("ends"));
    let watched = metrics.clone();
    let panicked = std::thread::spawn(move || {
        let _watch = watched.loop_watch("panics");
        panic!("a host bug");
    })
    .join();
    assert!(panicked.is_err());
    assert_eq!(metrics.dead_loops(), ["panics"]);
}
