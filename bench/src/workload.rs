//! The workload: N kopfexamples (and N/10 pods, for the index and the pod event
//! handler) spread over the bench's namespaces, created or deleted concurrently as fast
//! as the API server takes them; and the `Tracker`, a watch of the bench's own on the
//! kopfexamples that notes when each was sent, handled (`status.create_fn` shows up)
//! and gone.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use crate::cluster::{kopfexamples, namespace, pods};

/// How many requests the bench keeps in flight.
const IN_FLIGHT: usize = 32;

/// The status field that says an object was handled: the create handler's result.
pub(crate) const HANDLED_BY: &str = "create_fn";

/// One object of the workload.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ObjectRef {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) pod: bool,
}

/// The `n` kopfexamples and `n / 10` pods, interleaved (a pod after every tenth).
pub(crate) fn objects(n: usize) -> Vec<ObjectRef> {
    let mut objects = Vec::with_capacity(n + n / 10);
    for i in 0..n {
        objects.push(ObjectRef {
            namespace: namespace(i),
            name: format!("kex-{i:05}"),
            pod: false,
        });
        if i % 10 == 9 {
            objects.push(ObjectRef {
                namespace: namespace(i / 10),
                name: format!("pod-{:05}", i / 10),
                pod: true,
            });
        }
    }
    objects
}

fn body(object: &ObjectRef) -> DynamicObject {
    let value = if object.pod {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"namespace": object.namespace, "name": object.name,
                            "labels": {"app": "bench"}},
               "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}})
    } else {
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
               "metadata": {"namespace": object.namespace, "name": object.name,
                            "labels": {"app": "bench"}},
               "spec": {"duration": "1m", "field": "value", "items": ["item1", "item2"]}})
    };
    serde_json::from_value(value)
        .unwrap_or_else(|_| DynamicObject::new(&object.name, &kopfexamples()))
}

/// What a batch of requests did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sent {
    /// When the first request was sent.
    pub(crate) first: Option<Instant>,
    /// The kopfexamples that the server accepted.
    pub(crate) accepted: usize,
    /// Requests that failed, and the first few messages.
    pub(crate) failed: usize,
    pub(crate) failures: Vec<String>,
}

/// Creates `objects`, `IN_FLIGHT` at a time, noting in `tracker` when each kopfexample
/// was sent.
pub(crate) async fn create(
    client: &kube::Client,
    objects: &[ObjectRef],
    tracker: Option<&Tracker>,
) -> Sent {
    let first = Instant::now();
    let results: Vec<(bool, Result<(), String>)> = futures::stream::iter(objects)
        .map(|object| async move {
            let resource = if object.pod { pods() } else { kopfexamples() };
            let api =
                Api::<DynamicObject>::namespaced_with(client.clone(), &object.namespace, &resource);
            if !object.pod
                && let Some(tracker) = tracker
            {
                tracker.sent(object);
            }
            let result = api.create(&PostParams::default(), &body(object)).await;
            (
                object.pod,
                result
                    .map(drop)
                    .map_err(|e| format!("create {}/{}: {e}", object.namespace, object.name)),
            )
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    summarize(first, results)
}

/// Deletes the kopfexamples among `objects`, `IN_FLIGHT` at a time.
pub(crate) async fn delete(client: &kube::Client, objects: &[ObjectRef]) -> Sent {
    let first = Instant::now();
    let results: Vec<(bool, Result<(), String>)> =
        futures::stream::iter(objects.iter().filter(|o| !o.pod))
            .map(|object| async move {
                let api = Api::<DynamicObject>::namespaced_with(
                    client.clone(),
                    &object.namespace,
                    &kopfexamples(),
                );
                let result = api.delete(&object.name, &DeleteParams::default()).await;
                (
                    false,
                    result
                        .map(drop)
                        .map_err(|e| format!("delete {}/{}: {e}", object.namespace, object.name)),
                )
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
    summarize(first, results)
}

fn summarize(first: Instant, results: Vec<(bool, Result<(), String>)>) -> Sent {
    let mut sent = Sent {
        first: Some(first),
        ..Sent::default()
    };
    for (pod, result) in results {
        match result {
            Ok(()) if !pod => sent.accepted += 1,
            Ok(()) => {}
            Err(e) => {
                sent.failed += 1;
                if sent.failures.len() < 5 {
                    sent.failures.push(e);
                }
            }
        }
    }
    sent
}

#[derive(Debug, Default)]
struct Seen {
    sent: HashMap<String, Instant>,
    handled: HashMap<String, Instant>,
    present: HashSet<String>,
    gone: HashMap<String, Instant>,
    /// While the watch relists (after 410 Gone), the objects listed so far: those
    /// present before and not listed are gone (the watcher sends no Delete for them).
    relisting: Option<HashSet<String>>,
    relists: u64,
    watch_errors: u64,
    last_watch_error: Option<String>,
}

/// The bench's watch on every kopfexample: when each was handled, and gone.
#[derive(Debug)]
pub(crate) struct Tracker {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl Tracker {
    /// Starts watching (a list, then a watch; relists after 410 Gone).
    pub(crate) fn start(client: &kube::Client) -> Tracker {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let api = Api::<DynamicObject>::all_with(client.clone(), &kopfexamples());
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            loop {
                match stream.try_next().await {
                    Ok(Some(event)) => note(&shared, event, Instant::now()),
                    Ok(None) => break,
                    Err(e) => {
                        note_error(&shared, &e);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Tracker { seen, task }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sent(&self, object: &ObjectRef) {
        self.lock()
            .sent
            .insert(key(&object.namespace, &object.name), Instant::now());
    }

    /// How many objects are handled.
    pub(crate) fn handled(&self) -> usize {
        self.lock().handled.len()
    }

    /// How many objects the watch has seen (and not seen go).
    pub(crate) fn present(&self) -> usize {
        self.lock().present.len()
    }

    /// How many objects are gone.
    pub(crate) fn gone(&self) -> usize {
        self.lock().gone.len()
    }

    /// When the first and the last object were handled.
    pub(crate) fn handled_span(&self) -> Option<(Instant, Instant)> {
        let seen = self.lock();
        Some((*seen.handled.values().min()?, *seen.handled.values().max()?))
    }

    /// When the last object went.
    pub(crate) fn last_gone(&self) -> Option<Instant> {
        self.lock().gone.values().max().copied()
    }

    /// For every object sent and handled: from sent to handled, seconds.
    pub(crate) fn latencies(&self) -> Vec<f64> {
        let seen = self.lock();
        seen.sent
            .iter()
            .filter_map(|(k, sent)| {
                Some(
                    seen.handled
                        .get(k)?
                        .saturating_duration_since(*sent)
                        .as_secs_f64(),
                )
            })
            .collect()
    }

    /// How many times the watch had to relist (its history expired at the server).
    pub(crate) fn relists(&self) -> u64 {
        self.lock().relists
    }

    /// Errors of the watch itself, if any.
    pub(crate) fn watch_errors(&self) -> Option<String> {
        let seen = self.lock();
        (seen.watch_errors > 0).then(|| {
            format!(
                "{} error(s) of the bench's own watch, the last: {}",
                seen.watch_errors,
                seen.last_watch_error.as_deref().unwrap_or("?")
            )
        })
    }

    /// Waits until `count()` reaches `target`, for at most `limit`; the error says what
    /// was waited for (`what`) and how far it got.
    pub(crate) async fn wait(
        &self,
        what: &str,
        target: usize,
        limit: Duration,
        count: impl Fn(&Tracker) -> usize,
        mut alive: impl FnMut() -> Result<(), String>,
    ) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let now = count(self);
            if now >= target {
                return Ok(());
            }
            alive()?;
            if start.elapsed() >= limit {
                let watch = self
                    .watch_errors()
                    .map(|e| format!("; {e}"))
                    .unwrap_or_default();
                return Err(format!(
                    "timed out after {:.0} s waiting for {what}: {now} of {target}{watch}",
                    limit.as_secs_f64()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn note_error(seen: &Mutex<Seen>, error: &watcher::Error) {
    let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    seen.watch_errors += 1;
    seen.last_watch_error = Some(error.to_string());
}

fn note(seen: &Mutex<Seen>, event: watcher::Event<DynamicObject>, at: Instant) {
    let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    let key_of = |object: &DynamicObject| {
        Some(key(
            object.metadata.namespace.as_deref()?,
            object.metadata.name.as_deref()?,
        ))
    };
    match event {
        watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
            let Some(k) = key_of(&object) else {
                return;
            };
            if object
                .data
                .get("status")
                .and_then(|s| s.get(HANDLED_BY))
                .is_some()
            {
                seen.handled.entry(k.clone()).or_insert(at);
            }
            if let Some(listed) = &mut seen.relisting {
                listed.insert(k.clone());
            }
            seen.present.insert(k);
        }
        watcher::Event::Delete(object) => {
            let Some(k) = key_of(&object) else {
                return;
            };
            seen.present.remove(&k);
            seen.gone.entry(k).or_insert(at);
        }
        watcher::Event::Init => {
            if !seen.present.is_empty() {
                seen.relists += 1;
            }
            seen.relisting = Some(HashSet::new());
        }
        watcher::Event::InitDone => {
            let listed = seen.relisting.take().unwrap_or_default();
            let vanished: Vec<String> = seen.present.difference(&listed).cloned().collect();
            for k in vanished {
                // Gone some time before this relist: noted now (an upper bound).
                seen.present.remove(&k);
                seen.gone.entry(k).or_insert(at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_has_a_pod_per_ten_objects_over_the_namespaces() {
        let objects = objects(100);
        assert_eq!(objects.iter().filter(|o| !o.pod).count(), 100);
        assert_eq!(objects.iter().filter(|o| o.pod).count(), 10);
        assert_eq!(objects[0].name, "kex-00000");
        assert_eq!(objects[10].name, "pod-00000");
        assert_eq!(objects[1].namespace, "bench-1");
        let kex = body(&objects[0]);
        assert_eq!(kex.data["spec"]["field"], "value");
        let pod = body(&objects[10]);
        assert_eq!(pod.types.map(|t| t.kind), Some("Pod".to_owned()));
    }

    fn kex(name: &str, handled: bool) -> DynamicObject {
        let mut object = body(&ObjectRef {
            namespace: "bench-0".into(),
            name: name.into(),
            pod: false,
        });
        if handled {
            object.data["status"] = json!({HANDLED_BY: {"message": "hi"}});
        }
        object
    }

    #[test]
    fn objects_missing_from_a_relist_are_gone() {
        let seen = Mutex::new(Seen::default());
        let t0 = Instant::now();
        note(&seen, watcher::Event::Init, t0);
        note(&seen, watcher::Event::InitApply(kex("a", false)), t0);
        note(&seen, watcher::Event::InitApply(kex("b", true)), t0);
        note(&seen, watcher::Event::InitDone, t0);
        note(&seen, watcher::Event::Apply(kex("a", true)), t0);
        note(&seen, watcher::Event::Delete(kex("a", true)), t0);
        // The history expired: a relist finds neither.
        note(&seen, watcher::Event::Init, t0);
        note(&seen, watcher::Event::InitDone, t0);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.handled.len(), 2);
        assert_eq!(seen.gone.len(), 2);
        assert!(seen.present.is_empty());
        assert_eq!(seen.relists, 1);
    }
}
