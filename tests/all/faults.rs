//! Work under API faults (issue 16): 200 objects created, updated and deleted while the
//! API server drops watch connections mid-stream, answers 410 Gone on resume, 500 and
//! 429 (with Retry-After) on lists and patches, 409 and 422 on patches, and answers
//! slowly. The objects end exactly as in the same run without faults, every deletion
//! completes, and the operator is still running.

use std::collections::BTreeMap;
use std::time::Duration;

use kapsel_host::Operator;
use kapsel_host::testing::{Cluster, Fault, Faults, RequestMatcher};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use kapsel_tests::*;

const OBJECTS: usize = 200;

/// What an object ended as, without what differs between two runs anyway (uids,
/// versions, timestamps).
fn essence(body: &Value) -> Value {
    let annotations = body["metadata"]["annotations"]
        .as_object()
        .map(|a| {
            a.iter()
                .filter(|(k, _)| {
                    k.starts_with("runs.kopf.zalando.org/") || k.starts_with("kopf.zalando.org/")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<serde_json::Map<_, _>>()
        })
        .unwrap_or_default();
    json!({
        "spec": body["spec"],
        "status": body["status"],
        "finalizers": body["metadata"]["finalizers"],
        "annotations": annotations,
    })
}

/// The test's own requests meet the injected faults too: it retries them. `landed` is
/// the status code that says an earlier attempt got through (409 `AlreadyExists` for a
/// creation, 404 for a deletion).
async fn persist<T, F: std::future::Future<Output = Result<T, kube::Error>>>(
    what: &str,
    landed: Option<u16>,
    attempt: impl Fn() -> F,
) -> Option<T> {
    for _ in 0..100 {
        match attempt().await {
            Ok(value) => return Some(value),
            Err(kube::Error::Api(status)) if Some(status.code) == landed => return None,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    panic!("{what}: still refused after 100 attempts");
}

async fn snapshot(api: &Api<DynamicObject>) -> BTreeMap<String, Value> {
    let params = ListParams::default();
    persist("a list", None, || api.list(&params))
        .await
        .expect("a list")
        .items
        .into_iter()
        .map(|o| {
            let body = serde_json::to_value(&o).expect("json");
            (o.metadata.name.unwrap_or_default(), essence(&body))
        })
        .collect()
}

/// Polls until every object satisfies `done`, or panics naming the first that does not.
async fn until_all(api: &Api<DynamicObject>, what: &str, done: impl Fn(&str, &Value) -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE * 9;
    loop {
        let objects = snapshot(api).await;
        let pending: Vec<&String> = objects
            .iter()
            .filter(|(name, body)| !done(name, body))
            .map(|(name, _)| name)
            .collect();
        if pending.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {} objects pending, e.g. {}: {:#}",
            pending.len(),
            pending[0],
            objects[pending[0]]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Injects one fault after another until cancelled, from a fixed sequence.
async fn chaos(cluster_faults: Faults, stop: CancellationToken) -> usize {
    let mut injected = 0;
    let kinds = [
        "drop",
        "gone",
        "list-500",
        "patch-429",
        "patch-409",
        "patch-422",
        "patch-500",
        "slow",
    ];
    while !stop.is_cancelled() {
        let patches = RequestMatcher::any().verb("patch").plural("kopfexamples");
        // Failures wait for a matching request: they are not piled up while unserved.
        if cluster_faults.unserved() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        match kinds[injected % kinds.len()] {
            "drop" => cluster_faults.drop_watches(),
            "gone" => {
                cluster_faults.expire_history();
                cluster_faults.drop_watches();
            }
            "list-500" => cluster_faults.fail_next(
                2,
                RequestMatcher::any().verb("list"),
                Fault::InternalError,
            ),
            "patch-429" => cluster_faults.fail_next(
                2,
                patches,
                Fault::TooManyRequests {
                    retry_after_secs: 1,
                },
            ),
            "patch-409" => cluster_faults.fail_next(1, patches, Fault::Conflict),
            "patch-422" => cluster_faults.fail_next(1, patches, Fault::Invalid),
            "patch-500" => cluster_faults.fail_next(2, patches, Fault::InternalError),
            _ => cluster_faults
                .delay_responses((injected % 16 == 7).then_some(Duration::from_millis(20))),
        }
        injected += 1;
        tokio::select! {
            () = stop.cancelled() => {}
            () = tokio::time::sleep(Duration::from_millis(150)) => {}
        }
    }
    cluster_faults.delay_responses(None);
    cluster_faults.clear();
    injected
}

/// Faults injected while a phase's writes are made and for a while after, as the
/// operator works on them; then the storm ends and the operator must converge.
struct Storm {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<usize>>,
}

impl Storm {
    fn start(faulty: bool, faults: &Faults) -> Storm {
        let stop = CancellationToken::new();
        let task = faulty.then(|| tokio::spawn(chaos(faults.clone(), stop.clone())));
        Storm { stop, task }
    }

    /// How many faults were injected.
    async fn end(self) -> usize {
        let Some(task) = self.task else { return 0 };
        tokio::time::sleep(STORM_AFTER_WRITES).await;
        self.stop.cancel();
        task.await.expect("the chaos task")
    }
}

/// How long faults go on after a phase's writes: while the operator works on them.
const STORM_AFTER_WRITES: Duration = Duration::from_secs(3);

/// Creates, updates and deletes the objects in three phases, each waited for, with or
/// without faults; returns the objects at the end and how many faults were injected.
async fn churn(faulty: bool) -> (BTreeMap<String, Value>, usize) {
    let cluster = Cluster::start().await.expect("cluster");
    let client = cluster.client();
    create_kopfexamples_crd(&client).await;
    let operator = Operator::new([guest("durable")])
        .all_namespaces()
        .standalone();
    let running = cluster.start_operator(operator);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &kopfexamples());
    let faults = cluster.server().faults();
    let mut injected = 0;

    let storm = Storm::start(faulty, &faults);
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("obj-{i:03}")).collect();
    for chunk in names.chunks(20) {
        let creations = chunk.iter().map(|name| {
            let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                "metadata": {"name": name}, "spec": {"field": "v0"}});
            let object: DynamicObject = serde_json::from_value(body).expect("an object");
            let (api, params) = (&api, PostParams::default());
            async move { persist("a creation", Some(409), || api.create(&params, &object)).await }
        });
        futures::future::join_all(creations).await;
    }
    injected += storm.end().await;
    let handled = |field: &str, body: &Value, key: &str| {
        body["status"][key]["field"] == field
            && body["annotations"]
                .as_object()
                .is_some_and(|a| !a.keys().any(|k| is_progress(k)))
    };
    until_all(&api, "created", |_, body| handled("v0", body, "created")).await;

    let updated = |name: &str| name.ends_with(['0', '2', '4', '6', '8']);
    let change = Patch::Merge(json!({"spec": {"field": "v1"}}));
    let params = PatchParams::default();
    let storm = Storm::start(faulty, &faults);
    for name in names.iter().filter(|n| updated(n)) {
        persist("an update", None, || api.patch(name, &params, &change)).await;
    }
    injected += storm.end().await;
    until_all(&api, "updated", |name, body| {
        !updated(name) || handled("v1", body, "updated")
    })
    .await;

    let deleted = |name: &str| name.ends_with(['0', '5']);
    let delete_params = Default::default();
    let storm = Storm::start(faulty, &faults);
    for name in names.iter().filter(|n| deleted(n)) {
        persist("a deletion", Some(404), || api.delete(name, &delete_params)).await;
    }
    injected += storm.end().await;
    let deadline = tokio::time::Instant::now() + PATIENCE * 9;
    loop {
        let left = snapshot(&api).await;
        if !left.keys().any(|n| deleted(n)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "deletions did not complete: {:?}",
            left.keys().filter(|n| deleted(n)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let objects = snapshot(&api).await;
    assert!(!running.is_finished(), "the operator is still running");
    running.stop().await.expect("a clean stop");
    cluster.shutdown().await.expect("shutdown");
    (objects, injected)
}

fn is_progress(key: &str) -> bool {
    key.starts_with("kopf.zalando.org/") && key != "kopf.zalando.org/last-handled-configuration"
}

#[tokio::test]
async fn objects_end_as_without_faults() {
    let (calm, _) = churn(false).await;
    let (stormy, injected) = churn(true).await;
    assert_eq!(calm.len(), OBJECTS - OBJECTS / 5);
    assert!(
        injected >= 8,
        "every kind of fault was injected: {injected}"
    );
    for (name, expected) in &calm {
        assert_eq!(
            stormy.get(name),
            Some(expected),
            "{name} ended differently under faults ({injected} injected)"
        );
    }
    assert_eq!(stormy.len(), calm.len());
}

/// A release of the finalizer that the API server refuses (422), when the cycle wrote
/// nothing else, is tried again: no event of the operator's own would come to do it.
#[tokio::test]
async fn a_refused_finalizer_release_is_tried_again() {
    let cluster = Cluster::start().await.expect("cluster");
    let client = cluster.client();
    create_kopfexamples_crd(&client).await;
    let running = cluster.start_operator(
        Operator::new([guest("durable")])
            .all_namespaces()
            .standalone(),
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &kopfexamples());
    let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": "held"}, "spec": {"field": "v0"}});
    create(&client, &kopfexamples(), Some("default"), body).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while snapshot(&api)
        .await
        .get("held")
        .is_none_or(|o| o["status"]["created"].is_null())
    {
        assert!(tokio::time::Instant::now() < deadline, "never created");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The deletion handler patches nothing: the next patch is the release.
    let faults = cluster.server().faults();
    let object_patches = RequestMatcher::any()
        .verb("patch")
        .plural("kopfexamples")
        .subresource("");
    faults.fail_next(1, object_patches, Fault::Invalid);
    delete(&client, &kopfexamples(), Some("default"), "held").await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let left = snapshot(&api).await;
        if !left.contains_key("held") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the deletion never completed (refusal served: {}): {:#}",
            faults.unserved() == 0,
            left["held"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(faults.unserved(), 0, "the release was refused once");
    running.stop().await.expect("a clean stop");
    cluster.shutdown().await.expect("shutdown");
}
