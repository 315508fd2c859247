//! Embedding and the testing runner (KOPF.md §11, §12): an operator in a thread of its
//! own, stopped through its handle; `kapsel run` command lines run in the background
//! with their output captured.

use std::time::Duration;

use kapsel_cli::Runner;
use kapsel_host::Record;
use kapsel_tests::{PATIENCE, core, create, guest, guest_logs, pod};

#[tokio::test]
async fn the_embedding_example_runs_handlers_beside_its_main_loop_and_stops() {
    let seed = guest("seed");
    // The example is a plain (blocking) program: run it off the test's runtime.
    let report = tokio::task::spawn_blocking(move || embedded::run(vec![seed], 3))
        .await
        .expect("no panic")
        .expect("the example runs");
    assert_eq!(report.created, 3);
    assert!(
        report.handler_calls >= 3,
        "one call per pod at least: {report:?}"
    );
}

#[tokio::test]
async fn a_spawned_operator_reports_ready_and_stops_through_its_handle() {
    let cluster = kapsel_host::testing::Cluster::start()
        .await
        .expect("cluster");
    let operator = kapsel_host::Operator::new([guest("seed")])
        .standalone()
        .client(cluster.client());
    let handle = operator.spawn().expect("spawned");
    let handle = tokio::task::spawn_blocking(move || {
        assert!(handle.wait_ready(PATIENCE), "ready");
        handle
    })
    .await
    .expect("no panic");
    assert!(!handle.is_finished());
    create(
        &cluster.client(),
        &core("Pod", "pods"),
        Some("default"),
        pod("web-1"),
    )
    .await;
    handle
        .journal()
        .wait_for(PATIENCE, |records| {
            // Listed or added: "ready" means the streams have started, not finished listing.
            guest_logs(records, "seed")
                .iter()
                .any(|line| line.ends_with("for Pod default/web-1"))
        })
        .await
        .expect("the handler ran");
    tokio::task::spawn_blocking(move || handle.stop())
        .await
        .expect("no panic")
        .expect("stopped cleanly");
    cluster.shutdown().await.expect("cluster stops");
}

#[tokio::test]
async fn a_spawned_operator_that_cannot_start_is_not_ready_and_says_why() {
    let cluster = kapsel_host::testing::Cluster::start()
        .await
        .expect("cluster");
    let handle = kapsel_host::Operator::new(["/nonexistent/guest.wasm"])
        .standalone()
        .client(cluster.client())
        .spawn()
        .expect("spawned");
    let error = tokio::task::spawn_blocking(move || {
        assert!(!handle.wait_ready(PATIENCE), "never ready");
        handle.stop()
    })
    .await
    .expect("no panic")
    .expect_err("no guest");
    assert!(
        error.to_string().contains("no guest could be loaded"),
        "{error}"
    );
}

#[tokio::test]
async fn the_runner_runs_a_command_line_and_captures_its_output() {
    let seed = guest("seed");
    let runner = Runner::start(["run", "-A", "--standalone", &seed.to_string_lossy()])
        .await
        .expect("started");
    create(
        &runner.client(),
        &core("Pod", "pods"),
        Some("default"),
        pod("web-1"),
    )
    .await;
    runner
        .journal()
        .wait_for(PATIENCE, |records| {
            records.iter().any(|r| {
                matches!(r, Record::GuestLog { message, .. } if message.ends_with("for Pod default/web-1"))
            })
        })
        .await
        .expect("the handler ran");
    let result = runner.stop().await;
    assert_eq!(result.exit_code, 0, "{}", result.output);
    assert!(result.error.is_none());
    assert!(
        result.output.contains("for Pod default/web-1"),
        "guest lines are in the output: {}",
        result.output
    );
}

/// Kopf's `KopfRunner` runs on an existing cluster: so does `Runner::start_on`, which
/// leaves the cluster running, with what the operator wrote in it, when it stops.
#[tokio::test]
async fn the_runner_runs_on_an_existing_cluster_and_leaves_it_running() {
    let cluster = kapsel_host::testing::Cluster::start()
        .await
        .expect("cluster");
    let seed = guest("seed");
    let runner = Runner::start_on(
        cluster.client(),
        ["run", "-A", "--standalone", &seed.to_string_lossy()],
    )
    .await
    .expect("started");
    assert!(runner.cluster().is_none(), "not the runner's cluster");
    create(
        &cluster.client(),
        &core("Pod", "pods"),
        Some("default"),
        pod("web-2"),
    )
    .await;
    runner
        .journal()
        .wait_for(PATIENCE, |records| {
            records.iter().any(|r| {
                matches!(r, Record::GuestLog { message, .. } if message.ends_with("for Pod default/web-2"))
            })
        })
        .await
        .expect("the handler ran on the existing cluster");
    let result = runner.stop().await;
    assert_eq!(result.exit_code, 0, "{}", result.output);
    // The cluster still serves.
    let pods: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        cluster.client(),
        "default",
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
    );
    assert!(
        pods.get("web-2").await.is_ok(),
        "the cluster outlives the runner"
    );
    cluster.shutdown().await.expect("cluster stops");
}

#[tokio::test]
async fn the_runner_reports_usage_errors_and_failures() {
    let usage = Runner::start(["run", "--priority", "high", "x.wasm"])
        .await
        .expect_err("a usage error")
        .to_string();
    assert!(usage.contains("invalid value 'high'"), "{usage}");

    let runner = Runner::start(["run", "--standalone", "/nonexistent/guest.wasm"])
        .await
        .expect("started");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !runner.is_finished() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let result = runner.stop().await;
    assert_eq!(result.exit_code, 1);
    let error = result.error.expect("an error").to_string();
    assert!(error.contains("no guest could be loaded"), "{error}");
    assert!(
        result.output.contains("/nonexistent/guest.wasm"),
        "{}",
        result.output
    );
}
