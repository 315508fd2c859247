//! kube's namespace controller: a task the server owns that, a delay after a namespace
//! starts terminating, deletes what it holds (pods gracefully, through the kubelet when one
//! runs), reports what remains in the namespace's status conditions as kube's controller
//! does, and lets the namespace go once it is empty. kube waits 5 s
//! (`namespaceDeletionGracePeriod`) before it starts, so a client that deletes a namespace
//! and then the objects in it (`kubectl delete -k`) still finds them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::gc::Propagation;
use crate::meta::{meta_str, now};
use crate::state::Shared;
use crate::store::{Event, ObjKey, ResKey, Store};

/// kube's delay before the controller handles a terminating namespace.
pub(crate) const KUBE_DELAY: Duration = Duration::from_secs(5);

fn namespaces() -> ResKey {
    (String::new(), "namespaces".to_string())
}

/// Starts the controller: it runs until the task is aborted.
pub(crate) fn start(shared: Arc<Shared>, delay: Duration) -> JoinHandle<()> {
    let feed = shared.lock().subscribe();
    tokio::spawn(run(shared, delay, feed))
}

async fn run(
    shared: Arc<Shared>,
    delay: Duration,
    mut feed: tokio::sync::broadcast::Receiver<Arc<Event>>,
) {
    // Namespaces to handle, at a time; the uids of those queued already (a namespace of
    // the same name made again is another).
    let mut due: BTreeSet<(Instant, String)> = BTreeSet::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut queue_terminating = |store: &Store, due: &mut BTreeSet<(Instant, String)>| {
        for (key, ns) in store.list(&namespaces(), None) {
            let terminating = !meta_str(ns, "deletionTimestamp").is_empty();
            if terminating && seen.insert(meta_str(ns, "uid").to_string()) {
                due.insert((Instant::now() + delay, key.1.clone()));
            }
        }
    };
    queue_terminating(&shared.lock(), &mut due);
    loop {
        tokio::select! {
            event = feed.recv() => match event {
                Ok(event) if event.res == namespaces() => queue_terminating(&shared.lock(), &mut due),
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => queue_terminating(&shared.lock(), &mut due),
                Err(RecvError::Closed) => return,
            },
            () = crate::timers::until(due.first().map(|(at, _)| *at)) => {
                let Some((_, name)) = due.pop_first() else { continue };
                clean(&mut shared.lock(), &name);
            }
        }
    }
}

/// The controller's pass over a terminating namespace: deletes its content, writes what
/// remains into its conditions, and removes it when nothing does.
pub(crate) fn clean(store: &mut Store, name: &str) {
    let key: ObjKey = (String::new(), name.to_string());
    if store
        .get(&namespaces(), &key)
        .is_none_or(|ns| meta_str(ns, "deletionTimestamp").is_empty())
    {
        return;
    }
    for res in resources_in(store, name) {
        let keys: Vec<ObjKey> = store
            .list(&res, Some(name))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            crate::gc::delete_graceful(store, &res, &k, Propagation::Background, None);
        }
    }
    write_conditions(store, name);
    crate::gc::finish_cleanup(store, &namespaces(), &key);
}

fn resources_in(store: &Store, ns: &str) -> Vec<ResKey> {
    store
        .all()
        .filter(|(_, objs)| objs.keys().any(|k| k.0 == ns))
        .map(|(r, _)| r.clone())
        .collect()
}

/// kube's five deletion conditions: the three failures false, and what content and which
/// finalizers remain.
fn write_conditions(store: &mut Store, name: &str) {
    let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
    let mut finalizers: BTreeMap<String, usize> = BTreeMap::new();
    for res in resources_in(store, name) {
        for (_, obj) in store.list(&res, Some(name)) {
            *remaining.entry(format!("{}.{}", res.1, res.0)).or_default() += 1;
            let held = obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array);
            for f in held.into_iter().flatten().filter_map(Value::as_str) {
                *finalizers.entry(f.to_string()).or_default() += 1;
            }
        }
    }
    let counted = |m: &BTreeMap<String, usize>, form: &dyn Fn(&str, usize) -> String| {
        m.iter()
            .map(|(k, n)| form(k, *n))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let content = if remaining.is_empty() {
        (
            "False",
            "ContentRemoved",
            "All content successfully removed".to_string(),
        )
    } else {
        let list = counted(&remaining, &|r, n| {
            format!("{r} has {n} resource instances")
        });
        (
            "True",
            "SomeResourcesRemain",
            format!("Some resources are remaining: {list}"),
        )
    };
    let held = if finalizers.is_empty() {
        (
            "False",
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished".to_string(),
        )
    } else {
        let list = counted(&finalizers, &|f, n| {
            format!("{f} in {n} resource instances")
        });
        let message = format!("Some content in the namespace has finalizers remaining: {list}");
        ("True", "SomeFinalizersRemain", message)
    };
    let now = now();
    let condition = |ty: &str, (status, reason, message): (&str, &str, String)| json!({"type": ty, "status": status, "lastTransitionTime": now, "reason": reason, "message": message});
    let conditions = json!([
        condition(
            "NamespaceDeletionDiscoveryFailure",
            (
                "False",
                "ResourcesDiscovered",
                "All resources successfully discovered".into()
            )
        ),
        condition(
            "NamespaceDeletionGroupVersionParsingFailure",
            (
                "False",
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed".into()
            )
        ),
        condition(
            "NamespaceDeletionContentFailure",
            (
                "False",
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization".into()
            )
        ),
        condition("NamespaceContentRemaining", content),
        condition("NamespaceFinalizersRemaining", held),
    ]);
    let key = (String::new(), name.to_string());
    let Some(mut ns) = store.get(&namespaces(), &key).cloned() else {
        return;
    };
    ns["status"]["conditions"] = conditions;
    store.replace(&namespaces(), ns);
}
