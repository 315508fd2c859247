//! Every version of the kopfexamples in one namespace, as a watch delivers them:
//! change-handling tests check the intermediate states (one PATCH per processing
//! cycle, KOPF.md §1.15, §4.9), not only the end state.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{PATIENCE, kopfexamples};

/// One version of an object, when the test saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When the watch delivered it.
    pub at: Instant,
    /// `ADDED`, `MODIFIED` or `DELETED` (`LISTED` after a re-list).
    pub event: &'static str,
    /// The object.
    pub body: Value,
}

impl Seen {
    fn name(&self) -> &str {
        self.body["metadata"]["name"].as_str().unwrap_or_default()
    }
}

/// Records the versions of the kopfexamples of a namespace, from its start on.
#[derive(Debug)]
pub struct Tracker {
    seen: Arc<Mutex<Vec<Seen>>>,
    changed: watch::Sender<usize>,
    task: JoinHandle<()>,
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(seen: &Mutex<Vec<Seen>>) -> MutexGuard<'_, Vec<Seen>> {
    seen.lock().unwrap_or_else(|p| p.into_inner())
}

impl Tracker {
    /// Starts watching the namespace (the kopfexamples CRD must exist).
    ///
    /// # Panics
    /// When the first listing fails.
    pub async fn start(client: &kube::Client, namespace: &str) -> Tracker {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &kopfexamples());
        let list = api
            .list(&ListParams::default())
            .await
            .expect("list kopfexamples");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let changed = watch::Sender::new(0);
        let mut version = list.metadata.resource_version.unwrap_or_default();
        {
            let mut seen = lock(&seen);
            for item in list.items {
                seen.push(Seen {
                    at: Instant::now(),
                    event: "LISTED",
                    body: serde_json::to_value(item).expect("json"),
                });
            }
        }
        let task = {
            let (seen, changed) = (seen.clone(), changed.clone());
            tokio::spawn(async move {
                loop {
                    version = follow(&api, &version, &seen, &changed).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        Tracker {
            seen,
            changed,
            task,
        }
    }

    /// Every version of the named object so far, oldest first.
    pub fn versions(&self, name: &str) -> Vec<Seen> {
        lock(&self.seen)
            .iter()
            .filter(|s| s.name() == name)
            .cloned()
            .collect()
    }

    /// The latest version of the named object (`None` if never seen).
    pub fn latest(&self, name: &str) -> Option<Seen> {
        self.versions(name).pop()
    }

    /// Waits until the latest version of `name` satisfies `check` and returns it.
    ///
    /// # Panics
    /// After [`PATIENCE`], with `what` and the versions seen.
    pub async fn wait_for(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        self.wait(name, what, |versions| {
            versions
                .last()
                .filter(|s| s.event != "DELETED" && check(&s.body))
                .map(|s| s.body.clone())
        })
        .await
    }

    /// Waits until some version of `name` (the earliest) satisfies `check`.
    ///
    /// # Panics
    /// After [`PATIENCE`], with `what` and the versions seen.
    pub async fn wait_seen(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Seen {
        self.wait(name, what, |versions| {
            versions.iter().find(|s| check(&s.body)).cloned()
        })
        .await
    }

    /// Waits until the object is deleted from the cluster.
    ///
    /// # Panics
    /// After [`PATIENCE`].
    pub async fn wait_gone(&self, name: &str) {
        self.wait(name, "the object is gone", |versions| {
            versions.last().filter(|s| s.event == "DELETED").map(|_| ())
        })
        .await;
    }

    async fn wait<T>(
        &self,
        name: &str,
        what: &str,
        mut find: impl FnMut(&[Seen]) -> Option<T>,
    ) -> T {
        let mut rx = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(found) = find(&self.versions(name)) {
                return found;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                panic!(
                    "{name}: {what}: not within {PATIENCE:?}; versions seen:\n{}",
                    self.dump(name)
                );
            }
        }
    }

    /// The versions of an object, one per line, for failure messages.
    pub fn dump(&self, name: &str) -> String {
        let Some(first) = self.versions(name).first().map(|s| s.at) else {
            return "(none)".into();
        };
        self.versions(name)
            .iter()
            .map(|s| {
                let meta = &s.body["metadata"];
                format!(
                    "+{:.3}s {} rv={} finalizers={} annotations={} status={}",
                    (s.at - first).as_secs_f64(),
                    s.event,
                    meta["resourceVersion"],
                    meta["finalizers"],
                    meta["annotations"],
                    s.body["status"]
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Follows one watch connection from `version`; returns the version to go on from.
/// A 410 (history gone) re-lists, recording the objects as `LISTED`.
async fn follow(
    api: &Api<DynamicObject>,
    version: &str,
    seen: &Mutex<Vec<Seen>>,
    changed: &watch::Sender<usize>,
) -> String {
    use futures::StreamExt as _;
    let mut version = version.to_owned();
    let record = |event: &'static str, object: DynamicObject| {
        let body = serde_json::to_value(object).expect("json");
        let len = {
            let mut seen = lock(seen);
            seen.push(Seen {
                at: Instant::now(),
                event,
                body,
            });
            seen.len()
        };
        changed.send_replace(len);
    };
    let relist = async |version: String| {
        let Ok(list) = api.list(&ListParams::default()).await else {
            return version;
        };
        for item in list.items {
            record("LISTED", item);
        }
        list.metadata.resource_version.unwrap_or(version)
    };
    let params = WatchParams::default().timeout(290);
    let Ok(stream) = api.watch(&params, &version).await else {
        return relist(version).await;
    };
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let (name, object) = match event {
            Ok(WatchEvent::Added(o)) => ("ADDED", o),
            Ok(WatchEvent::Modified(o)) => ("MODIFIED", o),
            Ok(WatchEvent::Deleted(o)) => ("DELETED", o),
            Ok(WatchEvent::Bookmark(b)) => {
                version = b.metadata.resource_version;
                continue;
            }
            Ok(WatchEvent::Error(e)) if e.code == 410 => return relist(version).await,
            Ok(WatchEvent::Error(_)) | Err(_) => return version,
        };
        if let Some(rv) = &object.metadata.resource_version {
            version.clone_from(rv);
        }
        record(name, object);
    }
    version
}
