//! The simulated node and its kubelet (KWOK's idea, in process): a task the server owns
//! that follows the store's events and, as kube-scheduler and a kubelet would, binds
//! unassigned pods to a node (`scheduling`), moves the simulated node's pods through their
//! phases with kubelet's statuses (`status`), completes Jobs' pods, and confirms graceful
//! deletions once their grace period is over. It reads and writes through the store, so
//! its writes reach watches and the state file as any other. `node`: the Node it registers.

pub(crate) mod node;
pub(crate) mod scheduling;
mod status;

use crate::gc::Propagation;
use crate::managed::Who;
use crate::meta::{meta_str, now};
use crate::objects::{Fields, Scope};
use crate::state::Shared;
use crate::store::{Event, ObjKey, Store};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The annotation that makes a pod with `restartPolicy` `Never` or `OnFailure` complete
/// after that many milliseconds of running (and sets a Job's pod's time).
pub(crate) const RUN_FOR: &str = "kubelet.kapsel.dev/run-for-ms";

/// The kubelet's own state: when its pods started running, the pod IPs it handed out.
struct Kubelet {
    job_pod_runtime: Duration,
    running_since: HashMap<String, Instant>,
    next_ip: u32,
    /// Pods to look at again at a time (a grace period's end, a run's end).
    timers: BTreeSet<(Instant, ObjKey)>,
}

/// Registers the node and starts the kubelet: it runs until the task is aborted.
pub(crate) fn start(shared: Arc<Shared>, job_pod_runtime: Duration) -> JoinHandle<()> {
    let feed = {
        let mut store = shared.lock();
        node::register(&mut store);
        store.subscribe()
    };
    let kubelet = Kubelet {
        job_pod_runtime,
        running_since: HashMap::new(),
        next_ip: 0,
        timers: BTreeSet::new(),
    };
    tokio::spawn(run(shared, kubelet, feed))
}

async fn run(
    shared: Arc<Shared>,
    mut kubelet: Kubelet,
    mut feed: tokio::sync::broadcast::Receiver<Arc<Event>>,
) {
    kubelet.sweep(&shared);
    loop {
        tokio::select! {
            event = feed.recv() => match event {
                Ok(event) if event.res.0.is_empty() && event.res.1 == "pods" => {
                    if event.ty == crate::store::EventType::Deleted {
                        kubelet.running_since.remove(meta_str(&event.object, "uid"));
                        continue;
                    }
                    let key = crate::store::obj_key(&event.object);
                    kubelet.look(&shared, &key);
                }
                // A node changed (cordoned, uncordoned, created): pods may fit now.
                Ok(event) if event.res.0.is_empty() && event.res.1 == "nodes" => kubelet.sweep(&shared),
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => kubelet.sweep(&shared),
                Err(RecvError::Closed) => return,
            },
            () = crate::timers::until(kubelet.timers.first().map(|(at, _)| *at)) => {
                let now = Instant::now();
                while let Some((at, key)) = kubelet.timers.first().cloned() {
                    if at > now {
                        break;
                    }
                    kubelet.timers.remove(&(at, key.clone()));
                    kubelet.look(&shared, &key);
                }
            }
        }
    }
}

impl Kubelet {
    /// Looks at every pod.
    fn sweep(&mut self, shared: &Shared) {
        let keys: Vec<ObjKey> = shared
            .lock()
            .list(&scheduling::pods(), None)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.look(shared, &key);
        }
    }

    /// Takes the pod's next step, if it has one now, and remembers when to look again.
    fn look(&mut self, shared: &Shared, key: &ObjKey) {
        let later = {
            let mut store = shared.lock();
            self.step(&mut store, key)
        };
        if let Some(at) = later {
            self.timers.insert((at, key.clone()));
        }
    }

    /// One step of the pod: scheduled, started, running, completed or its deletion
    /// confirmed. Returns when to look again, when its next step waits for a time.
    fn step(&mut self, store: &mut Store, key: &ObjKey) -> Option<Instant> {
        let pod = store.get(&scheduling::pods(), key)?.clone();
        let uid = meta_str(&pod, "uid").to_string();
        if !meta_str(&pod, "deletionTimestamp").is_empty() {
            self.running_since.remove(&uid);
            return confirm_deletion(store, key, &pod);
        }
        if scheduling::wants_scheduling(&pod) {
            match scheduling::choose(store, &pod) {
                Ok(node) => {
                    let _ = scheduling::bind(store, key, &node, Some(&uid), None);
                }
                Err(message) => scheduling::mark_unschedulable(store, key, &message),
            }
            return None;
        }
        if pod.pointer("/spec/nodeName").and_then(Value::as_str) != Some(node::NODE) {
            return None;
        }
        let phase = pod.pointer("/status/phase").and_then(Value::as_str);
        let now_text = now();
        match phase {
            Some("Pending") if pod.pointer("/status/hostIP").is_none() => {
                write_status(store, key, status::creating(&pod, &now_text, node::NODE_IP));
                None
            }
            Some("Pending") => {
                let ip = self.pod_ip();
                write_status(store, key, status::running(&pod, &now_text, &ip));
                self.running_since.insert(uid, Instant::now());
                None
            }
            Some("Running") => {
                let runtime = self.runtime(&pod)?;
                let since = *self.running_since.entry(uid).or_insert_with(Instant::now);
                if since.elapsed() < runtime {
                    return Some(since + runtime);
                }
                write_status(store, key, status::succeeded(&pod, &now_text));
                None
            }
            _ => None,
        }
    }

    /// How long the pod runs before it completes, if it completes: a Job's pod after the
    /// configured time, or the pod's [`RUN_FOR`] annotation, for pods that do not restart.
    fn runtime(&self, pod: &Value) -> Option<Duration> {
        let policy = pod.pointer("/spec/restartPolicy").and_then(Value::as_str);
        if !matches!(policy, Some("Never" | "OnFailure")) {
            return None;
        }
        let annotated = pod
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(RUN_FOR))
            .and_then(Value::as_str)
            .and_then(|ms| ms.trim().parse::<u64>().ok())
            .map(Duration::from_millis);
        let job = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| refs.iter().any(|r| r["kind"] == "Job"));
        annotated.or(job.then_some(self.job_pod_runtime))
    }

    /// The next pod IP of the node's range (10.244.0.2 – 10.244.0.254, then around).
    fn pod_ip(&mut self) -> String {
        let n = self.next_ip % 253 + 2;
        self.next_ip = self.next_ip.wrapping_add(1);
        format!("10.244.0.{n}")
    }
}

/// The kubelet's confirmation of a graceful deletion of one of its pods (a DELETE with a
/// grace period of 0), once the grace period is over; or when to look again.
fn confirm_deletion(store: &mut Store, key: &ObjKey, pod: &Value) -> Option<Instant> {
    if pod.pointer("/spec/nodeName").and_then(Value::as_str) != Some(node::NODE) {
        return None;
    }
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if grace == 0 {
        // Confirmed already; finalizers hold it.
        return None;
    }
    let at = crate::grace::deletion_time(pod)?;
    let left = at - chrono::Utc::now();
    if let Ok(left) = left
        .to_std()
        .map(|d| d.min(Duration::from_secs(grace.unsigned_abs())))
        && !left.is_zero()
    {
        return Some(Instant::now() + left);
    }
    crate::gc::delete_graceful(
        store,
        &scheduling::pods(),
        key,
        Propagation::Background,
        Some(0),
    );
    None
}

/// Writes a status as the kubelet (`manager: kubelet`, the status subresource).
fn write_status(store: &mut Store, key: &ObjKey, pod: Value) {
    let Some(rt) = store.registry.find("", "v1", "pods").cloned() else {
        return;
    };
    let scope = Scope {
        rt,
        ns: Some(key.0.clone()),
    };
    let who = Who {
        manager: "kubelet".into(),
        subresource: Some("status"),
        user: None,
    };
    if let Err(e) = crate::objects::commit_update(
        store,
        &scope,
        &key.1,
        pod,
        true,
        false,
        Fields::Update(&who),
    ) {
        tracing::warn!(namespace = %key.0, pod = %key.1, error = ?e, "the simulated kubelet could not write a pod's status");
    }
}
