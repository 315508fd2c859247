//! The host's writes that lose a race with another write of their object (KOPF.md §4.7
//! step 4, §5.4): expected, so handled again at once and logged at debug, never
//! throttled nor logged as an unexpected error.

use std::time::Duration;

use kapsel_cli::Runner;
use kapsel_host::testing::{Fault, RequestMatcher};
use kapsel_tests::*;
use serde_json::json;

/// A 409 on the host's first write is made again at once: on handler time, without the
/// clock ever advanced, the object is handled (a throttled object would wait for 1 s of
/// handler time). Both writes that can conflict: the creation cycle's merge-patch (group
/// `optional`, no finalizer), and the finalizer's JSON patch, alone in its cycle (group
/// `basic`).
#[tokio::test]
async fn a_conflict_on_a_write_is_retried_at_once() {
    let s = Scene::start("conflict").await;
    let operator = s.operator_on_handler_time();
    s.create_with_a_failing_patch("merged", "optional", Fault::Conflict)
        .await;
    let done = s
        .tracker
        .wait_for("merged", "creation handled", |b| {
            handled_with(b, &["create_quiet"])
        })
        .await;
    assert_eq!(kopf_keys(&done), [DIFF_BASE]);
    assert_eq!(status(&done, "create_quiet"), &json!({"done": true}));
    let calls = |name: &str| calls_for(&operator.journal().records(), "create_quiet", name);
    assert_eq!(
        calls(&s.object("merged")),
        2,
        "handled again because the first result was lost"
    );

    s.create_with_a_failing_patch("finalized", "basic", Fault::Conflict)
        .await;
    let done = s
        .tracker
        .wait_for("finalized", "creation handled", |b| {
            handled_with(b, &["create_fn"])
        })
        .await;
    assert_eq!(finalizers(&done), [FINALIZER]);
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

/// Another writer's patch (a guest's, here the test's) lands while the host's finalizer
/// write is on its way: the finalizer's JSON patch fails its `resourceVersion` test
/// (422). The object is handled with its newer version at once; the operator's output
/// says so at debug, with no error and no throttling.
#[tokio::test]
async fn a_finalizer_write_raced_by_another_writer_is_made_again_without_an_error() {
    let s = Scene::start("raced").await;
    let guest = guest("changes").to_string_lossy().into_owned();
    let runner = Runner::start_on(
        s.client.clone(),
        [
            "run",
            "-v",
            "--standalone",
            "-n",
            s.namespace.as_str(),
            guest.as_str(),
        ],
    )
    .await
    .expect("the operator starts");
    // The first patch of a `basic` object is the finalizer's, alone in its cycle: held
    // back by the server before it reads the object, while the other write lands.
    s.cluster.server().faults().fail_next(
        1,
        RequestMatcher::any().verb("patch").plural("kopfexamples"),
        Fault::Slow(Duration::from_secs(2)),
    );
    s.create(kopfexample(
        "obj",
        &["basic"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    ))
    .await;
    s.faults_served().await;
    s.patch("obj", json!({"metadata": {"labels": {"touched": "yes"}}}))
        .await;
    let done = s
        .tracker
        .wait_for("obj", "creation handled", |b| {
            handled_with(b, &["create_fn"])
        })
        .await;
    assert_eq!(finalizers(&done), [FINALIZER]);
    let result = runner.stop().await;
    let output = result.output;
    assert!(
        output.contains("The object changed meanwhile"),
        "the race is logged: {output}"
    );
    assert!(
        !output.contains("Throttling") && !output.lines().any(|l| l.contains("ERROR")),
        "no error, no throttling: {output}"
    );
    s.shutdown().await;
}
