//! `kapsel run --record` and `kapsel test --replay`: a real run's traffic, recorded, then
//! replayed against a guest on a fresh cluster with time advanced instead of waited for.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kapsel_cli::Runner;
use kapsel_host::testing::{CaseSummary, Cluster, ServerConfig, replay};
use kapsel_tests::{PATIENCE, create, create_kopfexamples_crd, delete, guest, kopfexamples, patch};
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

/// A fresh directory for one test's files.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kapsel-replay-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Waits until the kopfexample `name` in `namespace` satisfies `done` (`None`: it is gone).
async fn wait_for(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    done: impl Fn(Option<&Value>) -> bool,
) -> Option<Value> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &kopfexamples());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let object = api
            .get_opt(name)
            .await
            .expect("get")
            .map(|o| serde_json::to_value(o).expect("json"));
        if done(object.as_ref()) {
            return object;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{namespace}/{name} never got there: {object:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Records `guest` (a `kapsel run` command line on a fresh cluster) while `scene` acts.
/// The cluster runs no simulated kubelet, as the replay's: its changes to pods would come
/// before or after the operator's listing, as it happens, and the recording would differ.
async fn record<F, Fut>(guest_path: &Path, file: &Path, scene: F)
where
    F: FnOnce(kube::Client, kapsel_host::Journal) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let cluster = Cluster::start_with(ServerConfig::default().kubelet(false))
        .await
        .expect("a cluster");
    let runner = Runner::start_on(
        cluster.client(),
        [
            "run",
            "-A",
            "--standalone",
            "--record",
            &file.to_string_lossy(),
            &guest_path.to_string_lossy(),
        ],
    )
    .await
    .expect("started");
    scene(runner.client(), runner.journal().clone()).await;
    caught_up(&runner.client(), file).await;
    let result = runner.stop().await;
    assert_eq!(result.exit_code, 0, "{}", result.output);
}

/// Waits until the recording in `file` has seen every kopfexample as the server has it
/// now: the test saw the final state through its own reads, and the operator's watch
/// may still be on its way to it; stopping earlier would record a last state the
/// replay is then wrongly compared with.
async fn caught_up(client: &kube::Client, file: &Path) {
    let Ok(api) = Api::<DynamicObject>::all_with(client.clone(), &kopfexamples())
        .list(&Default::default())
        .await
    else {
        return; // No kopfexamples served in this scene.
    };
    let wanted: Vec<(String, String)> = api
        .items
        .iter()
        .map(|o| {
            (
                o.metadata.name.clone().unwrap_or_default(),
                o.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let seen: Vec<Value> = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|e| e["entry"] == "watch")
            .collect();
        let missing: Vec<&(String, String)> = wanted
            .iter()
            .filter(|(name, version)| {
                !seen.iter().any(|e| {
                    e["object"]["metadata"]["name"] == name.as_str()
                        && e["object"]["metadata"]["resourceVersion"] == version.as_str()
                })
            })
            .collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the recording never saw {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Replays `file` against `guest_path`, expecting it to pass (or to fail); the report.
async fn replayed(guest_path: &Path, file: &Path, passes: bool) -> String {
    let mut out = Vec::new();
    let summary = replay(guest_path, &[file.to_path_buf()], &mut out)
        .await
        .expect("the recording is readable");
    let report = String::from_utf8_lossy(&out).into_owned();
    let expected = CaseSummary {
        passed: usize::from(passes),
        failed: usize::from(!passes),
    };
    assert_eq!(summary, expected, "{report}");
    report
}

/// A kopfexample's whole life under the `lifecycle` guest: creation with two temporary
/// errors retried after 1 s each, a change of `spec.field`, deletion through the
/// finalizer. Replayed against the same guest, nothing differs; against another guest,
/// the report says what did.
#[tokio::test]
async fn a_recording_replays_to_the_same_outcome() {
    let dir = scratch("lifecycle");
    let file = dir.join("lifecycle.jsonl");
    let lifecycle = guest("lifecycle");
    record(&lifecycle, &file, |client, _| async move {
        create_kopfexamples_crd(&client).await;
        create(
            &client,
            &kopfexamples(),
            Some("default"),
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                   "metadata": {"name": "kex"}, "spec": {"field": "one", "size": 1}}),
        )
        .await;
        wait_for(&client, "default", "kex", |o| {
            o.is_some_and(|o| o["status"]["flaky"]["attempts"] == 3)
        })
        .await;
        patch(
            &client,
            &kopfexamples(),
            Some("default"),
            "kex",
            json!({"spec": {"field": "two"}}),
        )
        .await;
        wait_for(&client, "default", "kex", |o| {
            o.is_some_and(|o| o["status"]["updated"]["changes"] == 1)
        })
        .await;
        delete(&client, &kopfexamples(), Some("default"), "kex").await;
        wait_for(&client, "default", "kex", |o| o.is_none()).await;
    })
    .await;

    let recording = std::fs::read_to_string(&file).expect("the recording exists");
    for line in [
        r#""entry":"recording""#,
        r#""entry":"resource""#,
        r#""type":"MODIFIED""#,
        r#""entry":"write""#,
        r#""outcome":"retry""#,
    ] {
        assert!(recording.contains(line), "{line} is missing:\n{recording}");
    }

    let started = std::time::Instant::now();
    let report = replayed(&lifecycle, &file, true).await;
    assert!(
        report.contains("PASS  replay of lifecycle.jsonl"),
        "{report}"
    );
    // The two 1-second retry delays are advanced over, not waited for. (Loose: the
    // recording itself took over 2 s of retries.)
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the replay took {:?}",
        started.elapsed()
    );

    let report = replayed(&guest("minimal"), &file, false).await;
    assert!(
        report.contains(
            "handler flaky on default/kex: recorded [retry, retry, success], replayed none"
        ),
        "{report}"
    );
    assert!(
        report.contains("handler create_fn on default/kex: recorded none, replayed [success]"),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A guest's Kubernetes calls are recorded with their answers; replayed, the guest makes
/// them again against the replay's cluster, and they are compared.
#[tokio::test]
async fn guest_calls_are_recorded_and_replayed() {
    let dir = scratch("calls");
    let file = dir.join("calls.jsonl");
    let calls = guest("kube_calls");
    record(&calls, &file, |client, _| async move {
        create_kopfexamples_crd(&client).await;
        kapsel_tests::create_namespace(&client, "team").await;
        create(
            &client,
            &kopfexamples(),
            Some("team"),
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                   "metadata": {"name": "kex"}, "spec": {"size": 3}}),
        )
        .await;
        // Both create handlers done: `peek_secret`'s refused call is what the recording
        // must hold, and a deletion before its turn would skip it.
        wait_for(&client, "team", "kex", |o| {
            o.is_some_and(|o| {
                o["status"]["make_child"]["listed"] == 1
                    && o["status"]["peek_secret"]["reason"] == "Forbidden"
            })
        })
        .await;
        delete(&client, &kopfexamples(), Some("team"), "kex").await;
        wait_for(&client, "team", "kex", |o| o.is_none()).await;
    })
    .await;

    let recording = std::fs::read_to_string(&file).expect("the recording exists");
    assert!(
        recording.contains(r#""entry":"call""#) && recording.contains(r#""verb":"create""#),
        "{recording}"
    );
    assert!(recording.contains(r#""reason":"Forbidden""#), "{recording}");

    replayed(&calls, &file, true).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A guest that makes owned children (a Pod named by prefix, a Deployment, a Service) and
/// returns the Pod's uid: its own recording replays clean, although every uid, in the
/// owner references of its calls and in its result, is another in the replay.
#[tokio::test]
async fn owned_children_replay_clean_whatever_their_uids() {
    let dir = scratch("children");
    let file = dir.join("children.jsonl");
    let children = guest("children");
    record(&children, &file, |client, _| async move {
        create_kopfexamples_crd(&client).await;
        create(
            &client,
            &kopfexamples(),
            Some("default"),
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                   "metadata": {"name": "kex"}, "spec": {"field": "x"}}),
        )
        .await;
        wait_for(&client, "default", "kex", |o| {
            o.is_some_and(|o| {
                o["status"]["child_pod"].is_object() && o["status"]["web"].is_object()
            })
        })
        .await;
        delete(&client, &kopfexamples(), Some("default"), "kex").await;
        wait_for(&client, "default", "kex", |o| o.is_none()).await;
    })
    .await;
    let recording = std::fs::read_to_string(&file).expect("the recording exists");
    assert!(recording.contains(r#""ownerReferences""#), "{recording}");

    let report = replayed(&children, &file, true).await;
    assert!(report.contains("PASS"), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A ConfigMap the guest reads but does not watch, changed by somebody else between two
/// reads: the replay makes the change again before the second read, so the guest reads
/// what it read when recorded.
#[tokio::test]
async fn changes_of_what_guests_read_unwatched_are_replayed() {
    let dir = scratch("settings");
    let file = dir.join("settings.jsonl");
    let calls = guest("kube_calls");
    record(&calls, &file, |client, _| async move {
        create_kopfexamples_crd(&client).await;
        kapsel_tests::create_namespace(&client, "team").await;
        let configmaps = kapsel_tests::core("ConfigMap", "configmaps");
        let mut settings = kapsel_tests::configmap("settings", json!({}));
        settings["data"] = json!({"level": "1"});
        create(&client, &configmaps, Some("team"), settings).await;
        create(
            &client,
            &kopfexamples(),
            Some("team"),
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                   "metadata": {"name": "kex"}, "spec": {"size": 1}}),
        )
        .await;
        // The creation's cycle over (all of its handlers, then the diff-base): a change
        // of the spec before that is taken into the creation, and no update follows.
        wait_for(&client, "team", "kex", |o| {
            o.is_some_and(|o| handled_with_size(o, 1))
        })
        .await;
        for (size, level) in [(2, "1"), (3, "2")] {
            if level == "2" {
                patch(
                    &client,
                    &configmaps,
                    Some("team"),
                    "settings",
                    json!({"data": {"level": "2"}}),
                )
                .await;
            }
            patch(
                &client,
                &kopfexamples(),
                Some("team"),
                "kex",
                json!({"spec": {"size": size}}),
            )
            .await;
            wait_for(&client, "team", "kex", |o| {
                // The cycle is over once the diff-base (written after the results) has it.
                o.is_some_and(|o| {
                    o["status"]["read_settings"]["level"] == level && handled_with_size(o, size)
                })
            })
            .await;
        }
        // Not deleted: its last state, the level it read last, is compared.
    })
    .await;

    let report = replayed(&calls, &file, true).await;
    assert!(report.contains("PASS"), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether the kopfexample's diff-base (written last in a cycle) has this `spec.size`.
fn handled_with_size(object: &Value, size: u32) -> bool {
    object["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"]
        .as_str()
        .is_some_and(|d| d.contains(&format!("\"size\":{size}")))
}

/// Raw events of a core resource: every event the recording saw, the replay sees too,
/// once per change somebody made.
#[tokio::test]
async fn raw_events_of_pods_replay_one_for_one() {
    let dir = scratch("pods");
    let file = dir.join("pods.jsonl");
    let seed = guest("seed");
    record(&seed, &file, |client, journal| async move {
        let pods = kapsel_tests::core("Pod", "pods");
        create(&client, &pods, Some("default"), kapsel_tests::pod("web-1")).await;
        // Seen before it changes: created and deleted before the operator's first
        // listing, the pod would never be seen at all.
        journal
            .wait_for(PATIENCE, |records| {
                kapsel_tests::calls(records, "log_event")
                    .iter()
                    .any(|(object, _)| object == "default/web-1")
            })
            .await
            .expect("the pod was seen");
        patch(
            &client,
            &pods,
            Some("default"),
            "web-1",
            json!({"metadata": {"labels": {"tier": "web"}}}),
        )
        .await;
        delete(&client, &pods, Some("default"), "web-1").await;
        // The operator sees the deletion before it stops.
        journal
            .wait_for(PATIENCE, |records| {
                kapsel_tests::calls(records, "log_event")
                    .iter()
                    .any(|(object, event)| {
                        object == "default/web-1" && event.as_deref() == Some("DELETED")
                    })
            })
            .await
            .expect("the deletion was seen");
    })
    .await;
    let recording = std::fs::read_to_string(&file).expect("the recording exists");
    assert!(recording.contains(r#""type":"DELETED""#), "{recording}");

    replayed(&seed, &file, true).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file that is not a recording is an input error naming the line.
#[tokio::test]
async fn a_broken_recording_is_refused_with_its_line() {
    let dir = scratch("broken");
    let file = dir.join("broken.jsonl");
    std::fs::write(
        &file,
        "{\"entry\":\"recording\",\"format\":1,\"started\":\"2026-11-30T10:00:00Z\",\"host\":\"kapsel\",\"guests\":[]}\n{\"entry\":\"watch\"}\n",
    )
    .expect("written");
    let mut out = Vec::new();
    let error = replay(&guest("minimal"), std::slice::from_ref(&file), &mut out)
        .await
        .expect_err("not a recording")
        .to_string();
    assert!(
        error.contains("broken.jsonl:2: not a recording line"),
        "{error}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
