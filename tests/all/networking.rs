//! Kopf's `networking` and `watching` settings (KOPF.md §5.5, §6.2, §13) through the real
//! path, with the API server's faults: how often the operator's writes are attempted
//! (`error_backoffs`, `enforce_retry_after`), how long a request may take
//! (`request_timeout`, `watching.connect_timeout`, `client_timeout`), and how the watch
//! streams end and come back (`server_timeout`, `inactivity_timeout`, `reconnect_backoff`)
//! and list (`chunk_size`), as the API server counts the requests.

use std::time::Duration;

use kapsel_host::testing::{Cluster, Fault, RequestMatcher, RunningOperator, ServerConfig};
use kapsel_host::{Operator, Settings};
use kapsel_tests::*;
use kube::api::{Api, DynamicObject};
use serde_json::json;
use tokio::time::Instant;

/// Settings with these changes (`key`, YAML value).
fn settings(changes: &[(&str, &str)]) -> Settings {
    let mut settings = Settings::default();
    for (key, value) in changes {
        settings.set(key, value).expect("a valid setting");
    }
    settings
}

/// The requests of this verb for this resource the API server answered, with `code`
/// when given.
fn answered(cluster: &Cluster, verb: &str, resource: &str, code: Option<u16>) -> u64 {
    cluster
        .server()
        .request_counts()
        .iter()
        .filter(|c| c.kind.verb == verb && c.kind.resource == resource)
        .filter(|c| code.is_none_or(|code| c.kind.code == code))
        .map(|c| c.count)
        .sum()
}

/// Waits until the API server has answered `at_least` requests of this verb for this
/// resource.
async fn until_answered(cluster: &Cluster, verb: &str, resource: &str, at_least: u64) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let seen = answered(cluster, verb, resource, None);
        if seen >= at_least {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{seen} {verb} requests for {resource}, not {at_least}: {:?}",
            cluster.server().request_counts()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An operator of the `seed` guest (an event handler on pods) with these settings.
fn seed_operator(cluster: &Cluster, changes: &[(&str, &str)]) -> RunningOperator {
    cluster.start_operator(
        Operator::new([guest("seed")])
            .standalone()
            .settings(settings(changes)),
    )
}

/// The patches of kopfexamples.
fn kopfexample_patches() -> RequestMatcher {
    RequestMatcher::any().verb("patch").plural("kopfexamples")
}

/// An operator of the `changes` guest with these settings.
fn changes_operator_with(s: &Scene, changes: &[(&str, &str)]) -> RunningOperator {
    s.cluster
        .start_operator(changes_operator().standalone().settings(settings(changes)))
}

/// A kopfexample with the `changes` guest's `create_quiet` handler alone.
async fn create_quiet(s: &Scene, name: &str) {
    s.create(kopfexample(
        name,
        &["optional"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
}

/// Waits until the result of `create_quiet` is stored on the kopfexample (its patch went
/// through).
async fn until_stored(s: &Scene, name: &str) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(s.client.clone(), &s.namespace, &kopfexamples());
    let deadline = Instant::now() + PATIENCE;
    loop {
        let object = api.get(name).await.expect("the kopfexample");
        if object.data["status"]["create_quiet"]["done"] == json!(true) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the result was not stored: {:?}",
            object.data
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `networking.error_backoffs` (Kopf's, KOPF.md §5.5): two pauses, three attempts. The
/// result's patch fails three times, so the processing fails for good (no fourth
/// attempt, which would have gone through), the object is throttled and handled again,
/// and that second call's patch is stored.
#[tokio::test]
async fn error_backoffs_give_one_attempt_more_than_pauses_then_the_failure_surfaces() {
    let s = Scene::start("networking-backoffs").await;
    let faults = s.cluster.server().faults();
    faults.fail_next(3, kopfexample_patches(), Fault::InternalError);
    let operator = changes_operator_with(&s, &[("networking.error_backoffs", "[0, 0.1]")]);
    create_quiet(&s, "refused").await;
    let object = s.object("refused");
    operator
        .journal()
        .wait_for(PATIENCE, |records| {
            calls_for(records, "create_quiet", &object) >= 2
        })
        .await
        .expect("handled again after its patch failed three times");
    until_stored(&s, "refused").await;
    let failed = answered(&s.cluster, "patch", "kopfexamples", Some(500));
    assert_eq!(failed, 3, "three attempts");
    operator.stop().await.unwrap();
    s.shutdown().await;
}

/// `networking.enforce_retry_after`: after a 429, the pause is the server's
/// `retryAfterSeconds` (1 s), not the longer backoff (60 s).
#[tokio::test]
async fn enforce_retry_after_pauses_as_long_as_the_server_says() {
    let s = Scene::start("networking-retry-after").await;
    let faults = s.cluster.server().faults();
    let too_many = Fault::TooManyRequests {
        retry_after_secs: 1,
    };
    faults.fail_next(1, kopfexample_patches(), too_many);
    let operator = changes_operator_with(
        &s,
        &[
            ("networking.error_backoffs", "[60]"),
            ("networking.enforce_retry_after", "true"),
        ],
    );
    create_quiet(&s, "busy").await;
    until_stored(&s, "busy").await;
    assert_eq!(answered(&s.cluster, "patch", "kopfexamples", Some(429)), 1);
    let records = operator.journal().records();
    assert_eq!(calls_for(&records, "create_quiet", &s.object("busy")), 1);
    operator.stop().await.unwrap();
    s.shutdown().await;
}

/// `networking.request_timeout`: a patch whose answer is 30 s late is given up after
/// 1 s and sent again, at once (`error_backoffs: [0]`); the watches, not bound by it,
/// stay open.
#[tokio::test]
async fn request_timeout_gives_up_a_slow_answer_but_not_a_watch() {
    let s = Scene::start("networking-request-timeout").await;
    let faults = s.cluster.server().faults();
    faults.fail_next(
        1,
        kopfexample_patches(),
        Fault::Slow(Duration::from_secs(30)),
    );
    let operator = changes_operator_with(
        &s,
        &[
            ("networking.request_timeout", "1"),
            ("networking.error_backoffs", "[0]"),
        ],
    );
    create_quiet(&s, "slow").await;
    until_stored(&s, "slow").await;
    assert_eq!(faults.unserved(), 0, "the slow answer was waited for");
    // The scene's tracker's and the operator's.
    let watches = answered(&s.cluster, "watch", "kopfexamples", None);
    assert_eq!(watches, 2, "the watch outlived the request timeout");
    operator.stop().await.unwrap();
    s.shutdown().await;
}

/// `watching.connect_timeout`, set by a startup handler: a watch whose answer has not
/// started after 1 s is given up and opened again, so a pod created after the listing
/// is seen long before the slow watch (30 s) would have shown it.
#[tokio::test]
async fn a_watch_that_does_not_start_in_the_startup_handlers_connect_timeout_is_reopened() {
    let cluster = Cluster::start().await.unwrap();
    let faults = cluster.server().faults();
    faults.fail_next(
        1,
        RequestMatcher::any().verb("watch").plural("pods"),
        Fault::Slow(Duration::from_secs(30)),
    );
    let operator = cluster.start_operator(
        Operator::new([guest("settings")])
            .standalone()
            .memo(json!({"settings": {"watching": {"connect_timeout": 1}}})),
    );
    until_answered(&cluster, "list", "pods", 1).await;
    let mut late = pod("late");
    late["metadata"]["labels"] = json!({"kapsel.test/served": "yes"});
    create(
        &cluster.client(),
        &core("Pod", "pods"),
        Some("default"),
        late,
    )
    .await;
    operator
        .journal()
        .wait_for(PATIENCE, |records| {
            guest_logs(records, "settings")
                .iter()
                .any(|line| line.starts_with("saw late"))
        })
        .await
        .expect("the pod created after the listing was seen");
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// `watching.client_timeout`: a watch request lasts 1 s at most, client-side, however
/// long the server would keep it (`server_timeout`, `inactivity_timeout`: an hour), and
/// is opened again each time.
#[tokio::test]
async fn client_timeout_ends_each_watch_request() {
    let cluster = Cluster::start().await.unwrap();
    let operator = seed_operator(
        &cluster,
        &[
            ("watching.client_timeout", "1"),
            ("watching.server_timeout", "3600"),
            ("watching.inactivity_timeout", "3600"),
        ],
    );
    until_answered(&cluster, "watch", "pods", 3).await;
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// `watching.server_timeout`: the watch requests carry `timeoutSeconds=1`, so the server
/// ends each after a second, and the stream opens the next one.
#[tokio::test]
async fn server_timeout_has_the_server_end_each_watch_which_is_reopened() {
    let cluster = Cluster::start().await.unwrap();
    let operator = seed_operator(&cluster, &[("watching.server_timeout", "1")]);
    until_answered(&cluster, "watch", "pods", 3).await;
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// `watching.inactivity_timeout`: a watch silent for 1 s (the server sends bookmarks
/// every 5 s, and would keep it an hour) is closed and opened again.
#[tokio::test]
async fn inactivity_timeout_reopens_a_silent_watch() {
    let cluster = Cluster::start().await.unwrap();
    let operator = seed_operator(
        &cluster,
        &[
            ("watching.inactivity_timeout", "1"),
            ("watching.server_timeout", "3600"),
        ],
    );
    until_answered(&cluster, "watch", "pods", 3).await;
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// `watching.chunk_size`: the listing asks for 2 objects a page, so 5 pods take 3 list
/// requests, and every pod is handled.
#[tokio::test]
async fn chunk_size_pages_the_listing() {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let names = ["a", "b", "c", "d", "e"];
    for name in names {
        create(&client, &core("Pod", "pods"), Some("default"), pod(name)).await;
    }
    let operator = seed_operator(&cluster, &[("watching.chunk_size", "2")]);
    operator
        .journal()
        .wait_for(PATIENCE, |records| {
            let handled = calls(records, "log_event");
            names
                .iter()
                .all(|name| handled.iter().any(|(o, _)| *o == format!("default/{name}")))
        })
        .await
        .expect("every pod was handled");
    assert_eq!(answered(&cluster, "list", "pods", None), 3, "pages of 2");
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// `watching.reconnect_backoff`: once its watch history has expired, a stream lists
/// again only after its pause (3 s here; Kopf's 0.1 s), not at once. (The stream falls
/// behind as in `streams.rs`: a write it does not watch, and no bookmark to catch up.)
#[tokio::test]
async fn reconnect_backoff_paces_a_stream_listing_again() {
    let config = ServerConfig::default().bookmark_interval(Duration::from_secs(3600));
    let cluster = Cluster::start_with(config).await.unwrap();
    let operator = seed_operator(&cluster, &[("watching.reconnect_backoff", "3")]);
    until_answered(&cluster, "watch", "pods", 1).await;
    let unwatched = configmap("unwatched", json!({}));
    let configmaps = core("ConfigMap", "configmaps");
    create(&cluster.client(), &configmaps, Some("default"), unwatched).await;
    let faults = cluster.server().faults();
    faults.expire_history();
    faults.drop_watches();
    let dropped = Instant::now();
    until_answered(&cluster, "list", "pods", 2).await;
    let paused = dropped.elapsed();
    assert!(
        paused >= Duration::from_secs(3),
        "listed again after {paused:?}"
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}
