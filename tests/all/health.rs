//! The operator's HTTP endpoints: liveness with the probe handlers' results
//! (KOPF.md §9), and the metrics moving as handlers run, fail and streams break.

use std::time::{Duration, Instant};

use kapsel_host::testing::{Cluster, Fault, RequestMatcher};
use kapsel_host::{Operator, Record};
use kapsel_tests::*;
use serde_json::{Value, json};

/// One HTTP/1.1 request to the operator's endpoint; the status code and the body.
/// `None` when nothing listens.
async fn http(port: u16, method: &str, path: &str) -> Option<(u16, String)> {
    kapsel_tests::http(method, &format!("http://127.0.0.1:{port}{path}")).await
}

/// The first answer once the operator serves on `port`.
async fn served(port: u16, path: &str) -> (u16, String) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(answer) = http(port, "GET", path).await {
            return answer;
        }
        assert!(Instant::now() < deadline, "nothing served on port {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value of one sample (`name{labels}`) in a metrics text, if present.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn liveness_reports_the_probes_and_fails_when_one_fails() {
    let cluster = Cluster::start().await.unwrap();
    // Indexed by the `partial` index under the keys `a` and `b`, which a probe counts.
    create(
        &cluster.client(),
        &core("ConfigMap", "configmaps"),
        Some("default"),
        configmap("indexed", json!({"a": "1", "b": "2"})),
    )
    .await;
    let port = free_port();
    let healthy = cluster.start_operator(
        Operator::new([guest("probes")]).liveness(format!("http://127.0.0.1:{port}/healthz")),
    );
    // The indexers have run for it once its event handler has.
    healthy
        .journal()
        .wait_for(PATIENCE, |records| {
            guest_logs(records, "probes")
                .iter()
                .any(|line| line == "seen None indexed")
        })
        .await
        .expect("the configmap was indexed");

    let (code, body) = served(port, "/healthz").await;
    assert_eq!(code, 200, "{body}");
    let results: Value = serde_json::from_str(&body).unwrap();
    // `quiet` returns nothing and is left out, as in Kopf; probes read the indexes.
    assert_eq!(
        results,
        json!({"status": "ok", "roomy": 40, "partial_keys": 2})
    );

    // Results are reused for 10 s: a second request calls no probe.
    let (code, _) = served(port, "/healthz").await;
    assert_eq!(code, 200);
    let (code, metrics) = served(port, "/metrics").await;
    assert_eq!(code, 200);
    assert_eq!(
        sample(
            &metrics,
            r#"kapsel_handler_invocations_total{guest="probes",handler="status",kind="probe"}"#
        ),
        Some(1.0),
        "{metrics}"
    );

    // Only GET on the exact path.
    assert_eq!(http(port, "GET", "/other").await.unwrap().0, 404);
    assert_eq!(http(port, "POST", "/healthz").await.unwrap().0, 405);

    // A probe that cannot get its memory fails the request.
    let port = free_port();
    let cramped = cluster.start_operator(
        Operator::new([guest("probes")])
            .call_memory_mib(32)
            .liveness(format!("http://127.0.0.1:{port}/healthz")),
    );
    let (code, body) = served(port, "/healthz").await;
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("roomy") && body.contains("memory"), "{body}");
    let (_, metrics) = served(port, "/metrics").await;
    assert_eq!(
        sample(
            &metrics,
            r#"kapsel_sandbox_faults_total{guest="probes",handler="roomy",kind="probe",fault="memory"}"#
        ),
        Some(1.0),
        "{metrics}"
    );

    healthy.stop().await.unwrap();
    cramped.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// As in Kopf, the endpoints are served once the startup handlers are done, not before:
/// a startup handler waiting for its retry (on handler time, until the test advances the
/// clock) keeps the liveness endpoint unanswered; its success opens it.
#[tokio::test]
async fn liveness_is_served_once_the_startup_handlers_are_done() {
    let cluster = Cluster::start().await.unwrap();
    let port = free_port();
    let operator = cluster.start_operator_on_handler_time(
        Operator::new([guest("activities")])
            .standalone()
            .liveness(format!("http://127.0.0.1:{port}/healthz")),
    );
    let warm_ups = |records: &[Record]| {
        records
            .iter()
            .filter(
                |r| matches!(r, Record::HandlerFinished { handler, .. } if handler == "warm_up"),
            )
            .count()
    };
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |records| warm_ups(records) == 1)
        .await
        .expect("the startup handler's first attempt failed");
    operator.settle([]).await.expect("waiting on handler time");
    assert_eq!(
        http(port, "GET", "/healthz").await,
        None,
        "nothing is served while a startup handler is unfinished"
    );
    operator.advance(Duration::from_secs(1)).await.unwrap();
    journal
        .wait_for(PATIENCE, |records| warm_ups(records) == 2)
        .await
        .expect("the startup handler succeeded on its retry");
    assert_eq!(served(port, "/healthz").await.0, 200);
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// Metrics on their own address serve no liveness beside them.
#[tokio::test]
async fn metrics_alone_serve_no_liveness() {
    let cluster = Cluster::start().await.unwrap();
    let port = free_port();
    let operator = cluster.start_operator(
        Operator::new([guest("probes")]).metrics(format!("http://127.0.0.1:{port}")),
    );
    // The metrics URL has no path: they are served at /metrics; no liveness beside them.
    let (code, metrics) = served(port, "/metrics").await;
    assert_eq!(code, 200);
    assert!(metrics.contains("# TYPE kapsel_paused gauge"), "{metrics}");
    assert_eq!(http(port, "GET", "/healthz").await.unwrap().0, 404);
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// A loop of the operator that dies (a watch stream's task panics, as a host bug would
/// make it) is not reopened: liveness answers 500 naming it from then on, so that the
/// kubelet restarts the operator.
#[tokio::test]
async fn liveness_fails_once_an_operator_loop_died() {
    let cluster = Cluster::start().await.unwrap();
    let port = free_port();
    let operator = cluster.start_operator(
        Operator::new([guest("probes")]).liveness(format!("http://127.0.0.1:{port}/healthz")),
    );
    operator.settle([]).await.expect("the streams run");
    let (code, body) = served(port, "/healthz").await;
    assert_eq!(code, 200, "{body}");

    operator.kill_streams("configmaps.v1");
    let deadline = Instant::now() + PATIENCE;
    let body = loop {
        let (code, body) = served(port, "/healthz").await;
        if code == 500 {
            break body;
        }
        assert!(Instant::now() < deadline, "still {code}: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body,
        json!({"error": "operator loops died: the watch stream for configmaps.v1"})
    );
    // For good: the probes are not even asked any more.
    assert_eq!(served(port, "/healthz").await.0, 500);
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn metrics_move_with_calls_faults_and_stream_restarts() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let cm = core("ConfigMap", "configmaps");
    let port = free_port();
    let operator = cluster.start_operator(
        Operator::new([guest("misbehaving")])
            .call_deadline(Duration::from_millis(300))
            .call_memory_mib(32)
            .metrics(format!("http://127.0.0.1:{port}/metrics")),
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
    let finished = |records: &[Record], handler: &str| {
        records
            .iter()
            .filter(|r| matches!(r, Record::HandlerFinished { handler: h, .. } if h == handler))
            .count()
    };
    journal
        .wait_for(PATIENCE, |r| {
            ["spin", "hog", "crash"].iter().all(|h| finished(r, h) > 0) && finished(r, "ok") >= 3
        })
        .await
        .expect("every handler call ends");

    let (code, metrics) = served(port, "/metrics").await;
    assert_eq!(code, 200);
    let series = |name: &str, handler: &str, extra: &str| {
        format!(r#"{name}{{guest="misbehaving",handler="{handler}",kind="event"{extra}}}"#)
    };
    let value = |series: String| sample(&metrics, &series).unwrap_or(0.0);
    assert!(
        value(series("kapsel_handler_invocations_total", "ok", "")) >= 3.0,
        "{metrics}"
    );
    assert_eq!(
        value(series("kapsel_handler_failures_total", "ok", "")),
        0.0
    );
    assert!(value(series("kapsel_handler_duration_seconds_count", "ok", "")) >= 3.0);
    for (handler, fault) in [("spin", "timeout"), ("hog", "memory"), ("crash", "trap")] {
        let fault = format!(r#",fault="{fault}""#);
        assert_eq!(
            value(series("kapsel_sandbox_faults_total", handler, &fault)),
            1.0,
            "{handler}: {metrics}"
        );
        assert_eq!(
            value(series("kapsel_handler_failures_total", handler, "")),
            1.0
        );
    }
    assert!(
        sample(
            &metrics,
            r#"kapsel_queue_objects{resource="configmaps.v1"}"#
        )
        .is_some(),
        "{metrics}"
    );
    assert_eq!(sample(&metrics, "kapsel_paused"), Some(0.0));

    // The configmaps stream breaks (its next watch answers 500) and is reopened.
    let restarts = r#"kapsel_watch_stream_restarts_total{resource="configmaps.v1"}"#;
    assert_eq!(sample(&metrics, restarts), None);
    cluster.server().faults().fail_next(
        1,
        RequestMatcher::any().verb("watch").plural("configmaps"),
        Fault::InternalError,
    );
    cluster.server().faults().drop_watches();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (_, metrics) = served(port, "/metrics").await;
        if sample(&metrics, restarts).is_some_and(|n| n >= 1.0) {
            break;
        }
        assert!(Instant::now() < deadline, "no restart counted: {metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// `kapsel test`'s `healthy` is what the liveness endpoint says: a failing probe makes
/// `{healthy: false}` hold, and fails `healthy`; the probe passing again heals it.
#[tokio::test]
async fn a_cases_healthy_follows_the_probes() {
    case_passes("probes", "health", "well.yaml").await;
    case_passes("probes", "health", "sick.yaml").await;
    let mut out = Vec::new();
    let case = workspace().join("tests/cases/health/sick-but-expected-healthy.yaml");
    let result = kapsel_host::testing::run_cases(&guest("probes"), &[case], &mut out).await;
    let report = String::from_utf8_lossy(&out);
    assert_eq!(
        result.map_err(|e| e.to_string()),
        Ok(kapsel_host::testing::CaseSummary {
            passed: 0,
            failed: 1
        }),
        "{report}"
    );
    assert!(
        report.contains("expect healthy: not so after 1 s:")
            && report.contains("liveness fails: ")
            && report.contains("patient is sick"),
        "{report}"
    );
}
