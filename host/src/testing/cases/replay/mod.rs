//! `kapsel test GUEST --replay FILE`: a recording made by `kapsel run --record` turned into
//! a regression test.
//!
//! The replay runs the guest on a fresh embedded cluster with a manual clock that starts
//! where the recording started:
//! - the recorded resources are served again (a CRD is created for each custom resource);
//! - objects first seen in a listing exist before the operator starts, as listed
//!   (annotations, finalizers and status included); so do the objects the guests read
//!   that no stream watched (a ConfigMap of settings), as they were first read;
//! - every change somebody else made is made again at its recorded time: creations,
//!   changes (as the merge patch from the previous recorded version), deletions; a
//!   change to an object the guests read but no stream watched, right after the read
//!   before the one that saw it. What the
//!   operator changed itself is not replayed: the versions its own patches and its
//!   guests' calls produced are recorded, and their echoes are skipped. The guest under
//!   test makes its own changes;
//! - the clock is advanced to the time of every recorded handler call, so retries and
//!   delays fall due as they did.
//!
//! Then what the guest did is compared with what the recording says: how each handler
//! call ended, per object and handler, in order; the Kubernetes calls each handler made;
//! and the last state of every watched object. Times inside Kopf's progress annotations,
//! server-set fields (uid, resourceVersion, timestamps) and the touch-dummy annotation
//! are left out of the comparison: they differ on every run; a uid anywhere else (an
//! owner reference, a result) is compared as the object it names.
//!
//! Submodules: `plan` (what to replay, from the recording), `seeding` (the cluster before
//! the operator starts), `compare` (what the guest did differently).

mod compare;
mod plan;
mod seeding;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::runner::{CaseRun, Verdict, World, quiet};
use crate::clock::ManualClock;
use crate::recording::{Entry, Recorder, ResourceInfo};
use crate::runtime::{Guest, Runtime};
use crate::testing::Cluster;
use compare::differences;
use plan::plan;
use seeding::{Resources, SeedError, create_object};

/// Server-set metadata: never replayed, never compared.
const SERVER_FIELDS: [&str; 8] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// What a replay does, worked out from a recording before anything runs.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    /// The wall time the recording started at.
    started: chrono::DateTime<chrono::Utc>,
    resources: BTreeMap<String, ResourceInfo>,
    /// Objects that existed before the operator started: (resource key, body).
    given: Vec<(String, Value)>,
    /// Objects the guests read that no stream watched, as first read: they existed too.
    seeds: Vec<Value>,
    steps: Vec<Step>,
    /// The time of the last recorded line.
    end: f64,
}

#[derive(Debug, Clone, PartialEq)]
struct Step {
    at: f64,
    action: Action,
}

/// An object's address: resource key, namespace, name.
type Address = (String, Option<String>, String);

#[derive(Debug, Clone, PartialEq)]
enum Action {
    /// Only let the clock reach the step's time (a recorded handler call).
    Wait,
    Create(String, Value),
    /// Merge patches of the object and of its status.
    Patch {
        at: Address,
        main: Option<Value>,
        status: Option<Value>,
    },
    Delete(Address),
    /// Remove every finalizer (somebody else released a deleted object).
    Release(Address),
    /// Merge patches of an object the guests read but no stream watched.
    PatchUnwatched {
        object: plan::Identity,
        main: Option<Value>,
        status: Option<Value>,
    },
}

/// Runs the recording `entries` (read from `path`) against `guest`.
pub(super) async fn run(
    runtime: &Runtime,
    guest: &Guest,
    path: &Path,
    entries: &[Entry],
) -> CaseRun {
    let started = Instant::now();
    let name = format!(
        "replay of {}",
        path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned()
        )
    );
    let (verdict, records) = match plan(entries) {
        Err(error) => (
            Verdict::Failed {
                step: 0,
                message: error.to_string(),
            },
            Vec::new(),
        ),
        // Without the simulated kubelet: the recording's changes are the only ones.
        Ok(plan) => match Cluster::start_with(quiet()).await {
            Err(e) => (
                Verdict::Failed {
                    step: 0,
                    message: format!("cannot start the embedded cluster: {e}"),
                },
                Vec::new(),
            ),
            Ok(cluster) => {
                let result = replay(&cluster, runtime, guest, &plan, entries).await;
                let _ = cluster.shutdown().await;
                result
            }
        },
    };
    CaseRun {
        name,
        path: path.to_path_buf(),
        verdict,
        elapsed: started.elapsed(),
        records,
    }
}

async fn replay(
    cluster: &Cluster,
    runtime: &Runtime,
    guest: &Guest,
    plan: &Plan,
    recorded: &[Entry],
) -> (Verdict, Vec<crate::Record>) {
    let set_up_failed = |error: SeedError| {
        (
            Verdict::Failed {
                step: 0,
                message: format!("cannot set up the replay: {error}"),
            },
            Vec::new(),
        )
    };
    let client = cluster.client();
    let mut resources = Resources::default();
    for info in plan.resources.values() {
        if let Err(error) = resources.serve(&client, info).await {
            return set_up_failed(error);
        }
    }
    for seed in &plan.seeds {
        if let Err(error) = create_object(&client, seed).await {
            return set_up_failed(error);
        }
    }
    let mut given = Vec::new();
    for (key, body) in &plan.given {
        match resources.create(&client, key, body).await {
            Ok(written) => given.extend(written),
            Err(error) => return set_up_failed(error),
        }
    }

    let clock = Arc::new(ManualClock::starting_at(plan.started));
    let (recorder, memory) = Recorder::in_memory(&[guest.name().to_owned()]);
    let mut world = World::start(cluster, runtime, guest, clock.clone(), recorder);
    world.written = given;
    let journal = world.running.journal().clone();
    let mut failure = None;
    for (index, step) in plan.steps.iter().enumerate() {
        advance_to(&mut world, &clock, step.at).await;
        match resources.perform(&client, &step.action).await {
            Ok(written) => world.written.extend(written),
            Err(error) => {
                failure = Some(Verdict::Failed {
                    step: index + 1,
                    message: format!("cannot replay the change at {:.3} s: {error}", step.at),
                });
                break;
            }
        }
    }
    advance_to(&mut world, &clock, plan.end).await;
    world.settle().await;
    let stopped = world.running.stop().await;
    let records = journal.records();
    if let Some(failure) = failure {
        return (failure, records);
    }
    if let Err(error) = stopped {
        return (
            Verdict::Failed {
                step: plan.steps.len(),
                message: format!("the operator failed: {}", crate::error_chain(&error)),
            },
            records,
        );
    }
    let found = differences(recorded, &memory.entries());
    let verdict = if found.is_empty() {
        Verdict::Passed
    } else {
        Verdict::Failed {
            step: plan.steps.len(),
            message: format!(
                "the guest did differently than recorded:\n{}",
                found
                    .iter()
                    .map(|d| format!("  - {d}\n"))
                    .collect::<String>()
            ),
        }
    };
    (verdict, records)
}

/// Lets the operator settle, then moves the clock to `at` seconds after the start.
async fn advance_to(world: &mut World, clock: &ManualClock, at: f64) {
    let target = Duration::try_from_secs_f64(at).unwrap_or(Duration::ZERO);
    let now = clock.elapsed();
    if target > now {
        world.settle().await;
        clock.advance(target - now);
    }
}

fn describe(at: &Address) -> String {
    match &at.1 {
        Some(ns) => format!("{} {ns}/{}", at.0, at.2),
        None => format!("{} {}", at.0, at.2),
    }
}

fn namespace_of(body: &Value) -> Option<&str> {
    body.pointer("/metadata/namespace").and_then(Value::as_str)
}

fn text<'a>(body: &'a Value, pointer: &str) -> Option<&'a str> {
    body.pointer(pointer).and_then(Value::as_str)
}

fn address_of(key: &str, body: &Value) -> Address {
    (
        key.to_owned(),
        namespace_of(body).map(str::to_owned),
        text(body, "/metadata/name").unwrap_or_default().to_owned(),
    )
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

fn strip_server_fields(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in SERVER_FIELDS {
            meta.remove(field);
        }
    }
    body
}

/// Recording entries for the tests of the submodules.
#[cfg(test)]
mod fixtures {
    use serde_json::{Value, json};

    use crate::recording::{Entry, ResourceInfo};

    pub(super) fn header() -> Entry {
        Entry::Recording {
            format: crate::recording::FORMAT,
            started: "2026-11-30T10:00:00.000000Z".into(),
            host: "kapsel".into(),
            guests: vec!["g".into()],
        }
    }

    pub(super) fn resource() -> Entry {
        Entry::Resource(ResourceInfo {
            key: "kopfexamples.v1.kopf.dev".into(),
            group: "kopf.dev".into(),
            version: "v1".into(),
            plural: "kopfexamples".into(),
            kind: "KopfExample".into(),
            singular: "kopfexample".into(),
            short_names: vec!["kex".into()],
            categories: Vec::new(),
            namespaced: true,
            subresources: vec!["status".into()],
        })
    }

    pub(super) fn watch(at: f64, event_type: &str, object: Value) -> Entry {
        Entry::Watch {
            at,
            resource: "kopfexamples.v1.kopf.dev".into(),
            event_type: event_type.into(),
            object,
        }
    }

    pub(super) fn kex(version: &str, extra: Value) -> Value {
        let mut object = json!({
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": "kex", "namespace": "ns", "uid": "u", "resourceVersion": version},
            "spec": {"size": 1},
        });
        if let (Some(object), Value::Object(extra)) = (object.as_object_mut(), extra) {
            for (k, v) in extra {
                object.insert(k, v);
            }
        }
        object
    }

    pub(super) fn write(version: &str, part: &str, released: bool) -> Entry {
        Entry::Write {
            at: 0.0,
            resource: "kopfexamples.v1.kopf.dev".into(),
            namespace: Some("ns".into()),
            name: "kex".into(),
            part: part.into(),
            resource_version: version.into(),
            released,
        }
    }
}
