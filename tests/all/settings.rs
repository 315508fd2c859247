//! Kopf's settings (`kapsel_host::Settings`), from the command line, the embedding API and
//! startup handlers (`kapsel::settings`), changing what the operator does: server-side
//! selectors on its watches (labels, fields, shards), which of the guests' Events and log lines are posted, how
//! many objects are handled at once, how long a stop waits, and how long the operator
//! waits for its own patch to come back. (The lifecycles: `lifecycles`.)

use kapsel_cli::Runner;
use kapsel_host::{Operator, Record, Settings};
use std::time::{Duration, Instant};

use kapsel_tests::*;
use serde_json::{Value, json};

/// The objects the event handler `log_event` was called for, each once, sorted.
fn handled(records: &[Record]) -> Vec<String> {
    let mut seen: Vec<String> = calls(records, "log_event")
        .into_iter()
        .map(|(object, _)| object)
        .collect();
    seen.sort();
    seen.dedup();
    seen
}

/// The reasons of the Events about a kopfexample of the scene.
async fn reasons(s: &Scene, name: &str) -> Vec<String> {
    s.events_about(name)
        .await
        .iter()
        .filter_map(|e| e["reason"].as_str().map(str::to_owned))
        .collect()
}

/// `--setting posting.level=warning` (Kopf's `settings.posting.level`): a guest's Normal
/// Event is not posted, its Warning and Error ones are. The Events about one object go
/// out in order, so once the last one is there, the first would be too.
#[tokio::test]
async fn posting_level_from_the_command_line_drops_the_events_below_it() {
    let s = Scene::start("settings-posting").await;
    let changes = guest("changes");
    let runner = Runner::start_on(
        s.client.clone(),
        [
            "run",
            "-A",
            "--standalone",
            "--setting",
            "posting.level=warning",
            &changes.to_string_lossy(),
        ],
    )
    .await
    .expect("started");
    s.create(kopfexample(
        "noisy",
        &["posting"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut posted = reasons(&s, "noisy").await;
    while !posted.contains(&"Broken".to_owned()) {
        assert!(tokio::time::Instant::now() < deadline, "posted: {posted:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        posted = reasons(&s, "noisy").await;
    }
    // (Listed by name, not in the order posted.)
    posted.sort();
    assert_eq!(posted, ["Broken", "Suspicious"], "no Normal Event");
    let result = runner.stop().await;
    assert_eq!(result.exit_code, 0, "{}", result.output);
    s.shutdown().await;
}

/// `watching.label_selectors` (Kopf's `settings.watching.label_selectors`): the watches
/// ask the API server for the matching objects only, listed or created later; the others
/// are never seen, not even by an event handler.
#[tokio::test]
async fn a_label_selector_setting_hides_the_other_objects_from_every_stream() {
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
    let client = cluster.client();
    let served = |name: &str| {
        let mut pod = pod(name);
        pod["metadata"]["labels"] = json!({"kapsel.test/served": "yes"});
        pod
    };
    create(
        &client,
        &core("Pod", "pods"),
        Some("default"),
        pod("listed-plain"),
    )
    .await;
    create(
        &client,
        &core("Pod", "pods"),
        Some("default"),
        served("listed-served"),
    )
    .await;
    let mut settings = Settings::default();
    settings
        .set("watching.label_selectors", "kapsel.test/served=yes")
        .unwrap();
    let operator = cluster.start_operator_on_handler_time(
        Operator::new([guest("seed")])
            .standalone()
            .settings(settings),
    );
    create(&client, &core("Pod", "pods"), Some("default"), pod("plain")).await;
    create(
        &client,
        &core("Pod", "pods"),
        Some("default"),
        served("served"),
    )
    .await;
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |records| handled(records).len() >= 2)
        .await
        .expect("the served pods were handled");
    operator.settle([]).await.expect("settled");
    assert_eq!(
        handled(&journal.records()),
        ["default/listed-served", "default/served"]
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// 64-bit FNV-1a, the API server's hash of a shard key, written here apart.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The ConfigMaps the `activities` guest's `saw` was called for, each once, sorted.
fn saw(records: &[Record]) -> Vec<String> {
    let mut seen: Vec<String> = calls(records, "saw")
        .into_iter()
        .map(|(object, _)| object)
        .collect();
    seen.sort();
    seen.dedup();
    seen
}

/// `watching.shard_selectors` (Kopf 1.45's `settings.watching.shard_selectors`, kube's
/// sharded lists and watches): two operators with complementary halves of the hash space
/// of uids share the ConfigMaps, listed or created later: each handles exactly those whose
/// uid hashes into its half, together all of them, none both.
#[tokio::test]
async fn operators_with_complementary_shard_selectors_share_the_objects() {
    // The selectors `kapsel run --shard 0/2` and `1/2` set; the halves below are computed
    // apart (this file's FNV-1a and the middle of the space).
    use kapsel_host::sharding::{ShardKey, ShardRange, shard_selector};
    let halves: Vec<String> = (0..2)
        .map(|i| {
            shard_selector(ShardKey::Uid, &[ShardRange::of(i, 2).expect("a shard")]).to_string()
        })
        .collect();
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
    let client = cluster.client();
    let configmaps = core("ConfigMap", "configmaps");
    for n in 0..4 {
        create(
            &client,
            &configmaps,
            Some("default"),
            configmap(&format!("listed-{n}"), json!({})),
        )
        .await;
    }
    let operators: Vec<_> = halves
        .iter()
        .map(|half| {
            let mut settings = Settings::default();
            settings.set("watching.shard_selectors", half).unwrap();
            cluster.start_operator(
                Operator::new([guest("activities")])
                    .standalone()
                    .settings(settings),
            )
        })
        .collect();
    // Created while they run, until each half has two of these.
    let mut late = [0, 0];
    let mut n = 0;
    while late.iter().any(|count| *count < 2) {
        n += 1;
        let created = create(
            &client,
            &configmaps,
            Some("default"),
            configmap(&format!("late-{n}"), json!({})),
        )
        .await;
        let uid = created.metadata.uid.expect("a uid");
        late[usize::from(fnv1a(&uid) >= 1 << 63)] += 1;
    }
    // Every ConfigMap of the cluster, in the half its uid hashes into.
    let mut expected = [Vec::new(), Vec::new()];
    let all = kube::Api::<kube::api::DynamicObject>::all_with(client.clone(), &configmaps)
        .list(&Default::default())
        .await
        .unwrap();
    for object in all.items {
        let name = format!(
            "{}/{}",
            object.metadata.namespace.unwrap_or_default(),
            object.metadata.name.unwrap_or_default()
        );
        let half = usize::from(fnv1a(&object.metadata.uid.unwrap_or_default()) >= 1 << 63);
        expected[half].push(name);
    }
    for (operator, expected) in operators.iter().zip(&mut expected) {
        expected.sort();
        let journal = operator.journal().clone();
        journal
            .wait_for(PATIENCE, |records| saw(records).len() >= expected.len())
            .await
            .expect("its shard was handled");
        operator.settle([]).await.expect("settled");
        assert_eq!(&saw(&journal.records()), expected, "exactly its shard");
    }
    assert!(expected.iter().all(|half| !half.is_empty()), "{expected:?}");
    for operator in operators {
        operator.stop().await.unwrap();
    }
    cluster.shutdown().await.unwrap();
}

/// How the handler `handler`'s attempts ended, in order.
fn outcomes(records: &[Record], handler: &str) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::HandlerFinished {
                handler: h,
                outcome,
                ..
            } if h == handler => Some(outcome.clone()),
            _ => None,
        })
        .collect()
}

/// Kopf's `settings` changed in `@kopf.on.startup`: the `settings` guest's startup
/// handler sets `watching.label_selectors`, and the operator then watches with it, so the
/// pods without the label are never seen (as with the setting given by the embedding
/// API, above). Its event handler reads the selector in force, and its own change is
/// refused: only startup handlers change settings, before the operator starts.
#[tokio::test]
async fn a_startup_handler_changes_the_settings_the_operator_then_runs_with() {
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
    let client = cluster.client();
    let served = |name: &str| {
        let mut pod = pod(name);
        pod["metadata"]["labels"] = json!({"kapsel.test/served": "yes"});
        pod
    };
    let pods = core("Pod", "pods");
    create(&client, &pods, Some("default"), pod("listed-plain")).await;
    create(&client, &pods, Some("default"), served("listed-served")).await;
    let operator =
        cluster.start_operator_on_handler_time(Operator::new([guest("settings")]).standalone());
    create(&client, &pods, Some("default"), pod("plain")).await;
    create(&client, &pods, Some("default"), served("served")).await;
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |records| handled(records).len() >= 2)
        .await
        .expect("the served pods were handled");
    operator.settle([]).await.expect("settled");
    let records = journal.records();
    assert_eq!(
        handled(&records),
        ["default/listed-served", "default/served"]
    );
    assert_eq!(outcomes(&records, "select"), ["success"]);
    let logs = guest_logs(&records, "settings");
    assert!(
        logs.contains(&r#"saw served with "kapsel.test/served=yes""#.to_owned()),
        "the selector in force: {logs:?}"
    );
    let refusals: Vec<&String> = logs.iter().filter(|l| l.starts_with("refused")).collect();
    assert!(!refusals.is_empty(), "{logs:?}");
    for refused in refusals {
        assert!(
            refused.contains("only startup handlers may change the operator's settings"),
            "{refused}"
        );
    }
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// A startup handler's change the host refuses (an unknown setting) fails that handler
/// for good, not retried (a wrong setting does not fix itself), and with it the
/// operator's start, saying what is wrong.
#[tokio::test]
async fn a_startup_handler_setting_an_unknown_setting_fails_the_start_for_good() {
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
    let operator = cluster.start_operator_on_handler_time(
        Operator::new([guest("settings")])
            .standalone()
            .memo(json!({"bad": true})),
    );
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |records| !outcomes(records, "select").is_empty())
        .await
        .expect("the startup handler ran");
    let error = operator.stop().await.expect_err("the start failed");
    let message = format!("{error}: {error:?}");
    assert!(
        message.contains("unknown setting watching.label_selector ")
            && message.contains("watching.label_selectors"),
        "{message}"
    );
    let records = journal.records();
    assert_eq!(outcomes(&records, "select"), ["failure"], "not retried");
    assert!(calls(&records, "log_event").is_empty(), "nothing else ran");
    cluster.shutdown().await.unwrap();
}

/// The settings are checked when given: an unknown key or a wrong value is refused with
/// what is wrong, before anything runs.
#[tokio::test]
async fn wrong_settings_are_usage_errors() {
    let error = Runner::start(["run", "--setting", "watching.sever_timeout=1", "x.wasm"])
        .await
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("unknown setting watching.sever_timeout")
            && error.contains("watching.server_timeout"),
        "{error}"
    );
    let mut settings = Settings::default();
    let refused = settings.merge(&json!({"queueing": {"objects_in_flight": 0}}));
    assert!(refused.is_err());
    assert_eq!(
        settings.to_json()["queueing"]["objects_in_flight"],
        Value::from(64)
    );
}

/// `scanning.disabled` (Kopf's `settings.scanning.disabled`), for an operator that may not
/// list CRDs or namespaces: it never asks for them, and of its namespace patterns it
/// serves the plain names only (`team-a`, not `team-*`).
#[tokio::test]
async fn with_scanning_disabled_no_crds_or_namespaces_are_asked_for() {
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
    let client = cluster.client();
    for namespace in ["team-a", "team-b"] {
        create_namespace(&client, namespace).await;
    }
    let mut settings = Settings::default();
    settings.set("scanning.disabled", "true").unwrap();
    let operator = cluster.start_operator_on_handler_time(
        Operator::new([guest("seed")])
            .standalone()
            .namespaces(["team-a", "team-*"])
            .settings(settings),
    );
    for namespace in ["team-a", "team-b"] {
        create(&client, &core("Pod", "pods"), Some(namespace), pod("web")).await;
    }
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |records| !handled(records).is_empty())
        .await
        .expect("the plainly named namespace's pod was handled");
    operator.settle([]).await.expect("settled");
    assert_eq!(handled(&journal.records()), ["team-a/web"]);
    let asked: Vec<String> = cluster
        .server()
        .request_counts()
        .iter()
        .filter(|c| ["customresourcedefinitions", "namespaces"].contains(&c.kind.resource.as_str()))
        .filter(|c| c.kind.verb != "create")
        .map(|c| format!("{} {}", c.kind.verb, c.kind.resource))
        .collect();
    assert!(asked.is_empty(), "asked for {asked:?}");
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// A ConfigMap in `namespace` that the `activities` guest's `linger` spends `seconds` of
/// wall-clock time on.
async fn lingering_configmap(client: &kube::Client, namespace: &str, name: &str, seconds: f64) {
    let mut body = configmap(name, json!({"kapsel.test/linger": "yes"}));
    body["data"] = json!({"seconds": seconds.to_string()});
    create(
        client,
        &core("ConfigMap", "configmaps"),
        Some(namespace),
        body,
    )
    .await;
}

/// What happened to the `activities` guest's lingering handler, in order: `start <name>`
/// and `end <namespace/name>`.
fn lingering(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::GuestLog { message, .. } => message
                .strip_prefix("lingering in ")
                .map(|name| format!("start {name}")),
            Record::HandlerFinished {
                handler, object, ..
            } if handler == "linger" => object.as_deref().map(|o| format!("end {o}")),
            _ => None,
        })
        .collect()
}

/// How many lingering handlers started before the first one ended, once both ended.
async fn starts_before_an_end(operator: &kapsel_host::testing::RunningOperator) -> usize {
    let journal = operator.journal().clone();
    journal
        .wait_for(PATIENCE, |records| lingering(records).len() >= 4)
        .await
        .expect("both lingered");
    let seen = lingering(&journal.records());
    seen.iter()
        .take_while(|step| step.starts_with("start"))
        .count()
}

/// `queueing.objects_in_flight` (Kapsel's bound on the objects of one stream handled at
/// once; Kopf has none): at 1, a second object's handler starts only once the first
/// object's has finished, however many calls could run at once.
#[tokio::test]
async fn objects_in_flight_bounds_the_objects_handled_at_once() {
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
    let client = cluster.client();
    let mut settings = Settings::default();
    settings.set("queueing.objects_in_flight", "1").unwrap();
    let mut limits = kapsel_host::Limits::default();
    limits.guest_threads = 2;
    let operator = cluster.start_operator(
        Operator::new([guest("activities")])
            .standalone()
            .limits(limits)
            .settings(settings),
    );
    for name in ["first", "second"] {
        lingering_configmap(&client, "default", name, 0.5).await;
    }
    assert_eq!(
        starts_before_an_end(&operator).await,
        1,
        "one object at a time"
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// `queueing.worker_limit` (Kopf's setting; here across the whole operator): at 1, the
/// objects of two streams (one per namespace served) are handled one at a time, while
/// each stream alone would let its object in.
#[tokio::test]
async fn worker_limit_bounds_the_objects_handled_at_once_across_streams() {
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
    let client = cluster.client();
    for namespace in ["team-a", "team-b"] {
        create_namespace(&client, namespace).await;
    }
    let mut settings = Settings::default();
    settings.set("queueing.worker_limit", "1").unwrap();
    let mut limits = kapsel_host::Limits::default();
    limits.guest_threads = 2;
    let operator = cluster.start_operator(
        Operator::new([guest("activities")])
            .standalone()
            .namespaces(["team-a", "team-b"])
            .limits(limits)
            .settings(settings),
    );
    for namespace in ["team-a", "team-b"] {
        lingering_configmap(&client, namespace, "slow", 0.5).await;
    }
    assert_eq!(
        starts_before_an_end(&operator).await,
        1,
        "one object of all streams at a time"
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// Stops `operator` once its lingering handler has started for the ConfigMap `name` (in
/// `default`); how long the stop took, and whether the handler finished.
async fn stop_while_lingering(
    operator: kapsel_host::testing::RunningOperator,
    name: &str,
) -> (Duration, bool) {
    let journal = operator.journal().clone();
    let start = format!("start {name}");
    journal
        .wait_for(PATIENCE, |records| lingering(records).contains(&start))
        .await
        .expect("the handler started");
    let started = Instant::now();
    operator.stop().await.expect("stopped");
    let end = format!("end default/{name}");
    let finished = lingering(&journal.records()).contains(&end);
    (started.elapsed(), finished)
}

/// `queueing.exit_timeout` (Kopf's setting): when the operator stops, a handler in flight
/// gets that long to finish. At 6 s, a call of 3 s finishes (the default, 2 s, would
/// abandon it); at 0.5 s, a call of 30 s is abandoned and the operator exits long before
/// the call would have ended.
#[tokio::test]
async fn exit_timeout_is_how_long_a_call_in_flight_may_finish() {
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
    let client = cluster.client();
    let operator_with = |exit_timeout: &str| {
        let mut settings = Settings::default();
        settings.set("queueing.exit_timeout", exit_timeout).unwrap();
        cluster.start_operator(
            Operator::new([guest("activities")])
                .standalone()
                .settings(settings),
        )
    };

    let operator = operator_with("6");
    lingering_configmap(&client, "default", "short", 3.0).await;
    let (_, finished) = stop_while_lingering(operator, "short").await;
    assert!(finished, "the call of 3 s finished within the 6 s given");

    let operator = operator_with("0.5");
    lingering_configmap(&client, "default", "endless", 30.0).await;
    let (took, finished) = stop_while_lingering(operator, "endless").await;
    assert!(!finished, "the call of 30 s was abandoned");
    assert!(took < Duration::from_secs(10), "the stop took {took:?}");
    cluster.shutdown().await.unwrap();
}

/// `watching.initial_streaming` (Kopf's setting, Kubernetes' `sendInitialEvents`): the
/// operator lists by watching, so the API server gets no list request for the served
/// resource, and the objects there before the operator are still handled.
#[tokio::test]
async fn initial_streaming_lists_by_watching() {
    let cluster = kapsel_host::testing::Cluster::start().await.unwrap();
    let client = cluster.client();
    create(&client, &core("Pod", "pods"), Some("default"), pod("early")).await;
    let mut settings = Settings::default();
    settings.set("watching.initial_streaming", "true").unwrap();
    let operator = cluster.start_operator(
        Operator::new([guest("seed")])
            .standalone()
            .settings(settings),
    );
    operator
        .journal()
        .wait_for(PATIENCE, |records| {
            calls(records, "log_event")
                .iter()
                .any(|(object, _)| object == "default/early")
        })
        .await
        .expect("the pod there before was handled");
    let pod_requests: Vec<String> = cluster
        .server()
        .request_counts()
        .iter()
        .filter(|c| c.kind.resource == "pods")
        .map(|c| c.kind.verb.clone())
        .collect();
    assert!(
        pod_requests.contains(&"watch".to_owned()) && !pod_requests.contains(&"list".to_owned()),
        "{pod_requests:?}"
    );
    operator.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// `posting.loggers` (Kopf's setting, off by default since Kopf 1.44), on the command
/// line: what a creation handler logs at `posting.level` (info) or above becomes an
/// Event with reason `Logging` and a type by level, and so do the operator's lines about
/// how its call ended and how the creation was processed; its debug lines do not, nor
/// what a raw event handler logs (as in Kopf). The event handler runs first, and one object's Events go out in order: once the
/// last line is there, the others would be too. The Events carry Kopf's own names, as
/// `posting.reporting_component`, `reporting_instance` and `event_name_prefix` say.
#[tokio::test]
async fn posting_loggers_posts_what_changing_handlers_log() {
    let s = Scene::start("settings-loggers").await;
    let changes = guest("changes");
    let runner = Runner::start_on(
        s.client.clone(),
        [
            "run",
            "-A",
            "--standalone",
            "--setting",
            "posting.loggers=true",
            "--setting",
            "posting.reporting_component=kopf",
            "--setting",
            "posting.reporting_instance=dev",
            "--setting",
            "posting.event_name_prefix=kopf-event-",
            &changes.to_string_lossy(),
        ],
    )
    .await
    .expect("started");
    s.create(kopfexample(
        "chatty",
        &["loggers"],
        json!({}),
        json!({}),
        json!({}),
    ))
    .await;
    let logged = || async {
        s.events_about("chatty")
            .await
            .iter()
            .filter(|e| e["reason"] == "Logging")
            .map(|e| format!("{} {}", e["type"].as_str().unwrap_or("?"), e["message"]))
            .collect::<Vec<String>>()
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut posted = logged().await;
    // Kopf's line about the whole cycle comes last.
    while !posted.iter().any(|e| e.contains("is processed")) {
        assert!(tokio::time::Instant::now() < deadline, "posted: {posted:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        posted = logged().await;
    }
    posted.sort();
    assert_eq!(
        posted,
        [
            r#"Error "chatty: an error line""#,
            r#"Normal "Creation is processed: 1 succeeded; 0 failed.""#,
            r#"Normal "Handler 'logging_create' succeeded.""#,
            r#"Normal "chatty: an info line""#,
            r#"Warning "chatty: a warning line""#,
        ]
    );
    for event in s.events_about("chatty").await {
        let names = (
            &event["reportingComponent"],
            &event["reportingInstance"],
            &event["source"]["component"],
        );
        assert_eq!(names, (&json!("kopf"), &json!("dev"), &json!("kopf")));
        let name = event["metadata"]["name"].as_str().unwrap_or_default();
        assert!(name.starts_with("kopf-event-"), "{name}");
    }
    let result = runner.stop().await;
    assert_eq!(result.exit_code, 0, "{}", result.output);
    s.shutdown().await;
}

/// How many patches of kopfexamples' status the API server answered.
fn status_patches(s: &Scene) -> u64 {
    s.cluster
        .server()
        .request_counts()
        .iter()
        .filter(|c| {
            let k = &c.kind;
            (k.verb.as_str(), k.resource.as_str(), k.subresource.as_str())
                == ("patch", "kopfexamples", "status")
        })
        .map(|c| c.count)
        .sum()
}

/// `persistence.consistency_timeout` (Kopf's setting): before running changing handlers,
/// the operator waits for its own last patch to come back, and after the timeout goes on
/// with the object as it is. Once the creation is handled, the `consistency` event
/// handler marks the object (a new version, whose echo comes), then marks it again at
/// that echo: a patch that changes nothing, so no new version and no echo ever come. The
/// update made after it (after the third status patch: the creation's results, the mark,
/// the mark again) waits the 8 s set from that last patch on, longer than the default
/// 5 s, and then runs.
#[tokio::test]
async fn consistency_timeout_is_how_long_a_missing_echo_is_waited_for() {
    let s = Scene::start("settings-consistency").await;
    let mut settings = Settings::default();
    settings
        .set("persistence.consistency_timeout", "8")
        .unwrap();
    let operator = s
        .cluster
        .start_operator(changes_operator().settings(settings));
    s.create(kopfexample(
        "echoless",
        &["consistency"],
        json!({}),
        json!({}),
        json!({"field": "old"}),
    ))
    .await;
    s.tracker
        .wait_for("echoless", "creation handled and marked", |b| {
            b["status"]["consistency_seen"] == "yes"
        })
        .await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while status_patches(&s) < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}",
            s.tracker.dump("echoless")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The operator's wait began once this answer reached it: at most a poll ago.
    let marked = Instant::now();
    s.patch("echoless", json!({"spec": {"field": "new"}})).await;
    operator
        .journal()
        .wait_for(Duration::from_secs(30), |records| {
            !outcomes(records, "consistency_update").is_empty()
        })
        .await
        .expect("the update was handled after the timeout");
    let waited = marked.elapsed();
    assert!(
        waited >= Duration::from_millis(7500),
        "the update ran {waited:?} after the patch that changed nothing: {}",
        s.tracker.dump("echoless")
    );
    assert_eq!(
        outcomes(&operator.journal().records(), "consistency_update"),
        ["success"]
    );
    s.tracker
        .wait_for("echoless", "update handled", |b| {
            status(b, "consistency_update") == &json!({"field": "new"})
        })
        .await;
    operator.stop().await.unwrap();
    s.shutdown().await;
}
