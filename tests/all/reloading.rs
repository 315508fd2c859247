//! Hot reload: guests mounted as a ConfigMap, updated as the kubelet updates it (`..data`
//! swapped to a new timestamped folder), while the operator runs. A changed guest serves
//! the next event, a call in flight finishes on its version, streams follow the handlers,
//! finalizers and daemons follow them too; a broken version is refused, reported (log,
//! journal, metric, Warning Event, liveness) and the version before it keeps serving.

use std::time::Duration;

use kapsel_host::{Operator, Record};
use kapsel_tests::*;
use serde_json::{Value, json};

/// Scans this often in tests: a change is taken once two scans agree.
const RESCAN: Duration = Duration::from_millis(100);

fn bytes_of(name: &str) -> Vec<u8> {
    std::fs::read(guest(name)).expect("a built guest")
}

/// Waits until the guest has logged `line`.
async fn wait_log(journal: &kapsel_host::Journal, guest_name: &str, line: &str) {
    wait_record(journal, &format!("{guest_name} logs '{line}'"), |r| {
        matches!(r, Record::GuestLog { guest, message, .. } if guest == guest_name && message == line)
    })
    .await;
}

fn reloaded(record: &Record, name: &str, how: &str) -> bool {
    matches!(record, Record::GuestReloaded { guest, change, .. } if guest == name && change == how)
}

fn stream(record: &Record, started: bool, plural: &str) -> bool {
    match record {
        Record::StreamStarted { resource, .. } if started => resource.starts_with(plural),
        Record::StreamStopped { resource, .. } if !started => resource.starts_with(plural),
        _ => false,
    }
}

#[tokio::test]
async fn a_replaced_guest_serves_the_next_event_and_calls_in_flight_finish_on_the_old() {
    let scene = Scene::start("reload").await;
    let mut volume = ConfigMapVolume::new("replaced");
    volume.publish(&[("app.wasm", &bytes_of("reload_before"))]);
    let operator = scene
        .cluster
        .start_operator(Operator::new([volume.dir()]).reload_interval(RESCAN));
    let journal = operator.journal().clone();

    // Version 1 serves: its pod stream, its create handler, its finalizer (a delete
    // handler), its daemon, and a create handler kept in flight.
    create(
        &scene.client,
        &core("Pod", "pods"),
        Some("reload"),
        pod("p"),
    )
    .await;
    wait_log(&journal, "app", "pod event 1 for p").await;
    scene
        .create(json!({"metadata": {"name": "plain"}, "spec": {}}))
        .await;
    let plain = scene
        .tracker
        .wait_for("plain", "stamped by version 1", |b| {
            status(b, "stamp") == &json!({"version": 1})
        })
        .await;
    assert_eq!(
        finalizers(&plain).len(),
        1,
        "version 1 has a delete handler"
    );
    scene
        .create(json!({"metadata": {"name": "ghost", "labels": {"reload.test/daemon": "y"}}, "spec": {}}))
        .await;
    wait_log(&journal, "app", "daemon 1 started for ghost").await;
    scene
        .create(
            json!({"metadata": {"name": "busy", "labels": {"reload.test/slow": "y"}}, "spec": {}}),
        )
        .await;
    wait_log(&journal, "app", "slow 1 started for busy").await;

    // The kubelet swaps in version 2.
    volume.publish(&[("app.wasm", &bytes_of("reload_after"))]);
    wait_record(&journal, "app replaced", |r| reloaded(r, "app", "replaced")).await;

    // The pod stream no handler needs closes; the ConfigMap stream opens.
    wait_record(&journal, "the pods stream stops", |r| {
        stream(r, false, "pods.")
    })
    .await;
    wait_record(&journal, "the configmaps stream starts", |r| {
        stream(r, true, "configmaps.")
    })
    .await;
    // The daemon of version 1 is stopped, version 2's runs in its place.
    wait_log(&journal, "app", "daemon 1 stopped for ghost").await;
    wait_log(&journal, "app", "daemon 2 started for ghost").await;
    // The next event is version 2's: a new object is stamped 2.
    scene
        .create(json!({"metadata": {"name": "fresh"}, "spec": {}}))
        .await;
    scene
        .tracker
        .wait_for("fresh", "stamped by version 2", |b| {
            status(b, "stamp") == &json!({"version": 2})
        })
        .await;
    // Version 2 has no delete handler: the finalizer is released from the object that
    // carried it for version 1, which is then deleted without a goodbye.
    scene
        .tracker
        .wait_for("plain", "its finalizer released", |b| {
            finalizers(b).is_empty()
        })
        .await;
    scene.delete("plain").await;
    scene.tracker.wait_gone("plain").await;

    // The call in flight finishes on version 1 (its result says so); the ConfigMap that
    // releases it is seen by version 2's new handler.
    create(
        &scene.client,
        &core("ConfigMap", "configmaps"),
        Some("reload"),
        configmap("release", json!({})),
    )
    .await;
    scene
        .tracker
        .wait_for("busy", "the slow handler's result", |b| {
            !status(b, "slow").is_null()
        })
        .await;
    let busy = scene.tracker.latest("busy").expect("seen").body;
    assert_eq!(status(&busy, "slow"), &json!({"version": 1}), "{busy:#}");
    wait_log(&journal, "app", "configmap event 2 for release").await;

    let logs = guest_logs(&journal.records(), "app");
    assert!(
        !logs.iter().any(|l| l.starts_with("goodbye")),
        "no delete handler ran: {logs:?}"
    );
    assert!(
        !logs.iter().any(|l| l == "slow 2 started for busy"),
        "the handled object is not handled again: {logs:?}"
    );
    operator.stop().await.expect("a clean stop");
    scene.shutdown().await;
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// One GET over HTTP/1.1: the status code and the body.
async fn get(port: u16, path: &str) -> (u16, String) {
    kapsel_tests::http("GET", &format!("http://127.0.0.1:{port}{path}"))
        .await
        .expect("the operator serves")
}

#[tokio::test]
async fn a_broken_guest_is_refused_while_the_old_version_serves_and_guests_come_and_go() {
    let scene = Scene::start("refusals").await;
    let mut volume = ConfigMapVolume::new("refused");
    let before = bytes_of("reload_before");
    volume.publish(&[("app.wasm", &before)]);
    let port = free_port();
    let operator = scene.cluster.start_operator(
        Operator::new([volume.dir()])
            .reload_interval(RESCAN)
            .liveness(format!("http://127.0.0.1:{port}/healthz"))
            .pod("refusals", "kapsel-0"),
    );
    let journal = operator.journal().clone();
    scene
        .create(json!({"metadata": {"name": "first"}, "spec": {}}))
        .await;
    scene
        .tracker
        .wait_for("first", "stamped by version 1", |b| {
            status(b, "stamp") == &json!({"version": 1})
        })
        .await;

    // A broken version: refused, reported every way, and version 1 still serves.
    volume.publish(&[("app.wasm", b"\0asm\x0d\0\x01\0 not a component any more")]);
    let refused = wait_record(
        &journal,
        "app refused",
        |r| matches!(r, Record::GuestRefused { guest, .. } if guest == "app"),
    )
    .await;
    let Record::GuestRefused { path, error, .. } = refused else {
        unreachable!()
    };
    assert!(
        path.ends_with("app.wasm") && error.contains("app.wasm"),
        "{error}"
    );
    // Posted in the background: waited for.
    let warnings = scene.warnings_about("kapsel-0", "GuestRefused").await;
    assert!(
        warnings.iter().any(|e| e["message"].as_str().is_some_and(
            |m| m.contains("app.wasm") && m.contains("the version before it keeps serving")
        )),
        "a Warning Event about the pod: {warnings:#?}"
    );
    let (code, health) = get(port, "/healthz").await;
    let health: Value = serde_json::from_str(&health).expect("JSON");
    assert_eq!(code, 200, "a refusal does not fail liveness: {health}");
    let listed = health["refused-guests"]
        .as_object()
        .expect("the refusals are listed");
    assert!(
        listed.keys().any(|file| file.ends_with("app.wasm")),
        "{health}"
    );
    let (_, metrics) = get(port, "/metrics").await;
    assert!(
        metrics.contains("kapsel_guest_reloads_total{guest=\"app\",result=\"refused\"} 1\n"),
        "{metrics}"
    );
    scene
        .create(json!({"metadata": {"name": "second"}, "spec": {}}))
        .await;
    scene
        .tracker
        .wait_for("second", "stamped by version 1 still", |b| {
            status(b, "stamp") == &json!({"version": 1})
        })
        .await;

    // A guest added beside it (and the refused file back as it was): served, with a
    // stream of its own; the refusal is over.
    volume.publish(&[
        ("app.wasm", &before),
        ("extra.wasm", &bytes_of("reload_after")),
    ]);
    wait_record(&journal, "extra added", |r| reloaded(r, "extra", "added")).await;
    // Nothing reloaded for app (its bytes are the version served), but said so.
    wait_record(
        &journal,
        "app recovered",
        |r| matches!(r, Record::GuestRecovered { guest, .. } if guest == "app"),
    )
    .await;
    create(
        &scene.client,
        &core("ConfigMap", "configmaps"),
        Some("refusals"),
        configmap("hello", json!({})),
    )
    .await;
    wait_log(&journal, "extra", "configmap event 2 for hello").await;
    let (_, health) = get(port, "/healthz").await;
    assert!(!health.contains("refused-guests"), "{health}");

    // And removed again: its stream retires.
    volume.publish(&[("app.wasm", &before)]);
    wait_record(&journal, "extra removed", |r| {
        reloaded(r, "extra", "removed")
    })
    .await;
    wait_record(&journal, "the configmaps stream stops", |r| {
        stream(r, false, "configmaps.")
    })
    .await;
    let (_, metrics) = get(port, "/metrics").await;
    for result in ["added", "removed"] {
        let sample =
            format!("kapsel_guest_reloads_total{{guest=\"extra\",result=\"{result}\"}} 1\n");
        assert!(metrics.contains(&sample), "{sample} in {metrics}");
    }
    assert!(
        !journal
            .records()
            .iter()
            .any(|r| reloaded(r, "app", "replaced")),
        "the same bytes under a new folder are no new version"
    );
    operator.stop().await.expect("a clean stop");
    scene.shutdown().await;
}

#[tokio::test]
async fn removed_guests_release_their_finalizers_and_run_their_cleanup() {
    let scene = Scene::start("removal").await;
    let mut volume = ConfigMapVolume::new("removal");
    let probes = bytes_of("probes");
    volume.publish(&[
        ("activities.wasm", &bytes_of("activities")),
        ("app.wasm", &bytes_of("reload_before")),
        ("probes.wasm", &probes),
    ]);
    let operator = scene
        .cluster
        .start_operator(Operator::new([volume.dir()]).reload_interval(RESCAN));
    let journal = operator.journal().clone();
    scene
        .create(json!({"metadata": {"name": "held"}, "spec": {}}))
        .await;
    scene
        .tracker
        .wait_for(
            "held",
            "handled, with the finalizer of its delete handler",
            |b| !status(b, "stamp").is_null() && !finalizers(b).is_empty(),
        )
        .await;

    // No guest serves kopfexamples any more: the stream replays its objects with no
    // handlers, which releases the finalizer, and only then closes. The removed guests'
    // cleanup handlers run.
    volume.publish(&[("probes.wasm", &probes)]);
    wait_record(&journal, "app removed", |r| reloaded(r, "app", "removed")).await;
    wait_record(&journal, "the kopfexamples stream stops", |r| {
        stream(r, false, "kopfexamples.")
    })
    .await;
    let held = scene.tracker.latest("held").expect("seen").body;
    assert!(finalizers(&held).is_empty(), "released: {held:#}");
    wait_log(&journal, "activities", "tidied up").await;
    scene.delete("held").await;
    scene.tracker.wait_gone("held").await;
    let logs = guest_logs(&journal.records(), "app");
    assert!(!logs.iter().any(|l| l.starts_with("goodbye")), "{logs:?}");
    operator.stop().await.expect("a clean stop");
    scene.shutdown().await;
}
