//! `kapsel run` killed abruptly (SIGKILL: no cleanup, nothing flushed) and started
//! again never loses a handler's outcome: the window between the two writes of a cycle
//! (the results to `/status`, the record that the cause was handled to the object) is
//! held open with injected API faults, the operator is killed inside it, and the
//! restarted operator must end with both written.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed step is a failed test"
)]

use std::time::Duration;

use crate::support::{PATIENCE, create_crd, guest, kopfexamples, manifest, start_operator};
use kapsel_host::testing::{Cluster, Fault, RequestMatcher};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// Polls until `done` holds for the object, or panics after [`PATIENCE`] with its last body.
async fn until(api: &Api<DynamicObject>, name: &str, what: &str, done: impl Fn(&Value) -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let body = match api.get_opt(name).await.unwrap() {
            Some(object) => serde_json::to_value(object).unwrap(),
            None => Value::Null,
        };
        if done(&body) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not so after {PATIENCE:?}:\n{body:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn handled(body: &Value) -> bool {
    let annotations = &body["metadata"]["annotations"];
    body["status"]["create_fn"]["message"] == "hello world"
        && annotations["kopf.zalando.org/last-handled-configuration"].is_string()
        && annotations["kopf.zalando.org/create_fn"].is_null()
}

/// Kills the operator while one of the cycle's two writes keeps failing (after the other
/// one could have landed), then starts it again without faults.
async fn crash_between_writes(failing: &str, name: &str) {
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let dir = std::env::temp_dir().join(format!("kapsel-crash-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.server().kubeconfig()).unwrap();
    create_crd(&client).await;

    // Every patch of the failing part fails (500), for longer than the test waits.
    let faults = cluster.server().faults();
    let matcher = RequestMatcher::any()
        .verb("patch")
        .plural("kopfexamples")
        .subresource(failing);
    faults.fail_next(100_000, matcher, Fault::InternalError);
    let guest = guest("minimal");
    let mut operator = start_operator(&kubeconfig, &guest);
    let api = kopfexamples(&client);
    let mut object = manifest("kopfexample-obj.yaml");
    object["metadata"]["name"] = json!(name);
    let object = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();

    // Inside the window: the failing write has been tried (and refused) at least once.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while faults.unserved() == 100_000 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the operator never patched"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    operator.kill().unwrap();
    operator.wait().unwrap();
    faults.clear();

    let mut restarted = start_operator(&kubeconfig, &guest);
    until(
        &api,
        name,
        "the result and the handled cause, after the restart",
        handled,
    )
    .await;
    restarted.kill().unwrap();
    restarted.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    cluster.shutdown().await.unwrap();
}

/// The results' write fails: the cause must not be recorded as handled before them,
/// or nothing would ever write them (Kopf's window: it patches the object first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_results_are_written_does_not_lose_them() {
    crash_between_writes("status", "results-refused").await;
}

/// The record that the cause was handled fails after the results landed: the handler
/// runs again after the restart (at least once) and the cycle completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_cause_is_recorded_handles_it_again() {
    crash_between_writes("", "record-refused").await;
}

/// What the test did to one object, to know what the operator must end with.
#[derive(Debug, Clone, PartialEq)]
enum Fate {
    Never,
    Alive { field: String, updates: u64 },
    Deleted,
}

/// A small deterministic generator: the same kill points and operations every run.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % sides
    }
}

/// Why an object is not (yet) as the operator must leave it; `Err` for what no later
/// work can mend (a handler run twice for one stored outcome).
fn settled(fate: &Fate, body: &Value) -> Result<Result<(), String>, String> {
    let annotations = &body["metadata"]["annotations"];
    let runs = |handler: &str| {
        annotations[format!("runs.kopf.zalando.org/{handler}")]
            .as_str()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    match fate {
        Fate::Never => Ok(Ok(())),
        Fate::Deleted if body.is_null() => Ok(Ok(())),
        Fate::Deleted => Ok(Err("still there".into())),
        Fate::Alive { field, updates } => {
            if body.is_null() {
                return Err("gone, though never deleted".into());
            }
            if runs("created") > 1 {
                return Err(format!("created ran {} times", runs("created")));
            }
            if runs("updated") > *updates {
                return Err(format!(
                    "updated ran {} times for {updates} updates",
                    runs("updated")
                ));
            }
            let handled = if runs("updated") > 0 {
                &body["status"]["updated"]["field"]
            } else {
                &body["status"]["created"]["field"]
            };
            let progress: Vec<&String> = annotations
                .as_object()
                .map(|a| {
                    a.keys()
                        .filter(|k| {
                            k.starts_with("kopf.zalando.org/")
                                && *k != "kopf.zalando.org/last-handled-configuration"
                        })
                        .collect()
                })
                .unwrap_or_default();
            Ok(if runs("created") != 1 {
                Err("not created yet".into())
            } else if handled != field.as_str() {
                Err(format!("handled field {handled}, spec.field {field}"))
            } else if !progress.is_empty() {
                Err(format!("progress annotations left: {progress:?}"))
            } else if body["metadata"]["finalizers"]
                != json!(["kopf.zalando.org/KopfFinalizerMarker"])
            {
                Err(format!("finalizers {}", body["metadata"]["finalizers"]))
            } else {
                Ok(())
            })
        }
    }
}

/// What the operators wrote so far, as one number that grows with every write of theirs:
/// finalizers added, runs counted, results stored.
async fn marks(api: &Api<DynamicObject>) -> usize {
    let list = api.list(&Default::default()).await.unwrap();
    list.items
        .iter()
        .map(|object| {
            let body = serde_json::to_value(object).unwrap();
            let finalizers = body["metadata"]["finalizers"]
                .as_array()
                .map_or(0, Vec::len);
            let runs: usize = body["metadata"]["annotations"]
                .as_object()
                .map(|a| {
                    a.iter()
                        .filter(|(k, _)| k.starts_with("runs.kopf.zalando.org/"))
                        .filter_map(|(_, v)| v.as_str()?.parse::<usize>().ok())
                        .sum()
                })
                .unwrap_or(0);
            let results = body["status"].as_object().map_or(0, |s| s.len());
            finalizers + runs + results
        })
        .sum()
}

/// The operator killed abruptly at many points while objects are created, updated and
/// deleted, then restarted, again and again: at the end every stored outcome was stored
/// once (no creation or update handler ran again after its outcome was stored), every
/// change was handled, every deletion completed, and no progress is left behind.
/// `KAPSEL_CRASH_ROUNDS` makes the run longer (default 8 kills).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_at_many_points_lose_nothing_and_repeat_nothing_stored() {
    let rounds: u64 = std::env::var("KAPSEL_CRASH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client();
    let dir = std::env::temp_dir().join(format!("kapsel-crash-churn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.server().kubeconfig()).unwrap();
    create_crd(&client).await;
    let guest = guest("durable");
    let api = kopfexamples(&client);
    // Slow answers widen every window between two writes of a cycle, so that kills land
    // inside them (a real API server under load answers in tens of milliseconds too).
    cluster
        .server()
        .faults()
        .delay_responses(Some(Duration::from_millis(25)));
    let mut fates = vec![Fate::Never; 24];
    let mut dice = Dice(0x5eed);
    let mut operations = 0;
    for _ in 0..rounds {
        let mut operator = start_operator(&kubeconfig, &guest);
        for _ in 0..10 {
            let i = usize::try_from(dice.roll(fates.len() as u64)).unwrap();
            let name = format!("obj-{i}");
            fates[i] = match fates[i].clone() {
                Fate::Never => {
                    let object = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                        "metadata": {"name": name}, "spec": {"field": "v0"}});
                    let object = serde_json::from_value(object).unwrap();
                    api.create(&PostParams::default(), &object).await.unwrap();
                    Fate::Alive {
                        field: "v0".into(),
                        updates: 0,
                    }
                }
                Fate::Alive { updates, .. } if dice.roll(5) > 0 => {
                    let field = format!("v{}", updates + 1);
                    let patch = json!({"spec": {"field": field}});
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .unwrap();
                    Fate::Alive {
                        field,
                        updates: updates + 1,
                    }
                }
                Fate::Alive { .. } => {
                    api.delete(&name, &Default::default()).await.unwrap();
                    Fate::Deleted
                }
                Fate::Deleted => Fate::Deleted,
            };
            operations += 1;
            tokio::time::sleep(Duration::from_millis(dice.roll(60))).await;
        }
        // A kill point: once this operator has written something (it is at work), at a
        // moment a little later that changes from round to round.
        let before = marks(&api).await;
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while marks(&api).await == before && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(dice.roll(150))).await;
        operator.kill().unwrap();
        operator.wait().unwrap();
    }
    let mut last = start_operator(&kubeconfig, &guest);
    let deadline = tokio::time::Instant::now() + PATIENCE * 2;
    loop {
        let mut pending = Vec::new();
        for (i, fate) in fates.iter().enumerate() {
            let name = format!("obj-{i}");
            let body = match api.get_opt(&name).await.unwrap() {
                Some(object) => serde_json::to_value(object).unwrap(),
                None => Value::Null,
            };
            match settled(fate, &body) {
                Err(broken) => panic!("{name}: {broken}\n{body:#}"),
                Ok(Err(why)) => pending.push(format!("{name}: {why}")),
                Ok(Ok(())) => {}
            }
        }
        if pending.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "after {rounds} kills and {operations} operations, not settled:\n{}",
            pending.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last.kill().unwrap();
    last.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    cluster.shutdown().await.unwrap();
}
