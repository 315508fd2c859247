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
//!   changes (as the merge patch from the previous recorded version), deletions. What the
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
//! are left out of the comparison: they differ on every run.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Map, Value, json};

use super::matching;
use super::runner::{self, CaseRun, Verdict, World, Written};
use crate::clock::ManualClock;
use crate::cluster::{Resource, find_kind};
use crate::recording::{Entry, Recorder, ResourceInfo};
use crate::runtime::{Guest, Runtime};
use crate::testing::Cluster;

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
        Err(message) => (Verdict::Failed { step: 0, message }, Vec::new()),
        Ok(plan) => match Cluster::start().await {
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
    let set_up_failed = |message: String| {
        (
            Verdict::Failed {
                step: 0,
                message: format!("cannot set up the replay: {message}"),
            },
            Vec::new(),
        )
    };
    let client = cluster.client();
    let mut resources = Resources::default();
    for info in plan.resources.values() {
        if let Err(message) = resources.serve(&client, info).await {
            return set_up_failed(message);
        }
    }
    for seed in &plan.seeds {
        if let Err(message) = create_object(&client, seed).await {
            return set_up_failed(message);
        }
    }
    let mut given = Vec::new();
    for (key, body) in &plan.given {
        match resources.create(&client, key, body).await {
            Ok(written) => given.extend(written),
            Err(message) => return set_up_failed(message),
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
            Err(message) => {
                failure = Some(Verdict::Failed {
                    step: index + 1,
                    message: format!("cannot replay the change at {:.3} s: {message}", step.at),
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

/// The replay cluster's resources, as the recording names them.
#[derive(Default)]
struct Resources {
    infos: HashMap<String, ResourceInfo>,
    served: HashMap<String, Resource>,
}

impl Resources {
    /// Makes the cluster serve a recorded resource: custom ones get a CRD.
    async fn serve(&mut self, client: &Client, info: &ResourceInfo) -> Result<(), String> {
        self.infos.insert(info.key.clone(), info.clone());
        if let Ok(resource) = find_kind(client, &info.api_version(), &info.kind).await {
            self.served.insert(info.key.clone(), resource);
            return Ok(());
        }
        let crds: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &kube::api::ApiResource {
                group: "apiextensions.k8s.io".into(),
                version: "v1".into(),
                api_version: "apiextensions.k8s.io/v1".into(),
                kind: "CustomResourceDefinition".into(),
                plural: "customresourcedefinitions".into(),
            },
        );
        let crd: DynamicObject =
            serde_json::from_value(crd_for(info)).map_err(|e| format!("{}: {e}", info.key))?;
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(format!("cannot create the CRD for {}: {e}", info.key)),
        }
        // A new CRD is served once the server has established it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            match find_kind(client, &info.api_version(), &info.kind).await {
                Ok(resource) => {
                    self.served.insert(info.key.clone(), resource);
                    return Ok(());
                }
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return Err(format!("{} is not served: {e}", info.key));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    fn resource(&self, key: &str) -> Result<&Resource, String> {
        self.served
            .get(key)
            .ok_or_else(|| format!("the recording does not describe the resource {key}"))
    }

    fn api(
        &self,
        client: &Client,
        at: &Address,
    ) -> Result<(Api<DynamicObject>, &Resource), String> {
        let resource = self.resource(&at.0)?;
        let namespace = at.1.as_deref().unwrap_or("default");
        Ok((runner::api(client, resource, namespace), resource))
    }

    /// Creates an object as recorded, deleting it again if it was being deleted.
    async fn create(
        &self,
        client: &Client,
        key: &str,
        body: &Value,
    ) -> Result<Vec<Written>, String> {
        let mut written = create_object(client, body).await?;
        if body.pointer("/metadata/deletionTimestamp").is_some() {
            written.extend(self.delete(client, &address_of(key, body)).await?);
        }
        Ok(written)
    }

    async fn delete(&self, client: &Client, at: &Address) -> Result<Vec<Written>, String> {
        let (api, resource) = self.api(client, at)?;
        match api.delete(&at.2, &Default::default()).await {
            // Still there (held by finalizers): the operator must see the deletion.
            Ok(deleted) => Ok(deleted
                .left()
                .and_then(|o| runner::version_of(resource, &o))
                .into_iter()
                .collect()),
            // Already gone in the replay: the comparison will tell if that matters.
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
            Err(e) => Err(format!("deleting {}: {e}", describe(at))),
        }
    }

    async fn patch(
        &self,
        client: &Client,
        at: &Address,
        patch: &Value,
        status: bool,
    ) -> Result<Vec<Written>, String> {
        let (api, resource) = self.api(client, at)?;
        let params = PatchParams::default();
        let sent = if status {
            api.patch_status(&at.2, &params, &Patch::Merge(patch)).await
        } else {
            api.patch(&at.2, &params, &Patch::Merge(patch)).await
        };
        match sent {
            Ok(object) => Ok(runner::version_of(resource, &object).into_iter().collect()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
            Err(e) => Err(format!("patching {}: {e}", describe(at))),
        }
    }

    async fn perform(&self, client: &Client, action: &Action) -> Result<Vec<Written>, String> {
        match action {
            Action::Wait => Ok(Vec::new()),
            Action::Create(key, body) => self.create(client, key, body).await,
            Action::Patch { at, main, status } => {
                let mut written = Vec::new();
                let has_status = self
                    .resource(&at.0)?
                    .subresources
                    .iter()
                    .any(|s| s == "status");
                if let Some(main) = main {
                    written.extend(self.patch(client, at, main, false).await?);
                }
                if let Some(status) = status {
                    let patch = json!({ "status": status });
                    written.extend(self.patch(client, at, &patch, has_status).await?);
                }
                Ok(written)
            }
            Action::Delete(at) => self.delete(client, at).await,
            Action::Release(at) => {
                let patch = json!({"metadata": {"finalizers": null}});
                self.patch(client, at, &patch, false).await
            }
        }
    }
}

/// Creates an object as recorded (its namespace first, if missing), status included.
async fn create_object(client: &Client, body: &Value) -> Result<Vec<Written>, String> {
    if let Some(namespace) = namespace_of(body) {
        ensure_namespace(client, namespace).await?;
    }
    let mut fresh = strip_server_fields(body);
    let status = fresh.as_object_mut().and_then(|o| o.remove("status"));
    let (resource, created) = runner::apply_object(client, &fresh).await?;
    let mut written: Vec<Written> = runner::version_of(&resource, &created)
        .into_iter()
        .collect();
    if let Some(status) = status.filter(|s| !is_empty(s)) {
        let name = text(body, "/metadata/name").unwrap_or_default();
        let api = runner::api(client, &resource, namespace_of(body).unwrap_or("default"));
        let patch = json!({ "status": status });
        let params = PatchParams::default();
        let patched = if resource.subresources.iter().any(|s| s == "status") {
            api.patch_status(name, &params, &Patch::Merge(&patch)).await
        } else {
            api.patch(name, &params, &Patch::Merge(&patch)).await
        }
        .map_err(|e| format!("{} {name}: the status: {e}", resource.key()))?;
        written.extend(runner::version_of(&resource, &patched));
    }
    Ok(written)
}

fn describe(at: &Address) -> String {
    match &at.1 {
        Some(ns) => format!("{} {ns}/{}", at.0, at.2),
        None => format!("{} {}", at.0, at.2),
    }
}

async fn ensure_namespace(client: &Client, name: &str) -> Result<(), String> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace = k8s_openapi::api::core::v1::Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &namespace).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(format!("cannot create the namespace {name}: {e}")),
    }
}

/// A CRD that serves a recorded custom resource (any content: the schema keeps
/// unknown fields).
fn crd_for(info: &ResourceInfo) -> Value {
    let mut names = json!({
        "plural": info.plural,
        "kind": info.kind,
        "singular": if info.singular.is_empty() { info.kind.to_lowercase() } else { info.singular.clone() },
    });
    if !info.short_names.is_empty() {
        names["shortNames"] = json!(info.short_names);
    }
    if !info.categories.is_empty() {
        names["categories"] = json!(info.categories);
    }
    let mut version = json!({
        "name": info.version,
        "served": true,
        "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
    });
    if info.subresources.iter().any(|s| s == "status") {
        version["subresources"] = json!({"status": {}});
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", info.plural, info.group)},
        "spec": {
            "group": info.group,
            "names": names,
            "scope": if info.namespaced { "Namespaced" } else { "Cluster" },
            "versions": [version],
        },
    })
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

/// Works out the replay from a recording.
fn plan(entries: &[Entry]) -> Result<Plan, String> {
    let Some(Entry::Recording {
        started, guests, ..
    }) = entries.first()
    else {
        return Err("the recording has no header".into());
    };
    // Other guests' handlers would show as differences, and their patches in the objects.
    if guests.len() > 1 {
        return Err(format!(
            "the recording was made with {} guests ({}); a replay runs one guest: record it alone",
            guests.len(),
            guests.join(", ")
        ));
    }
    let started = chrono::DateTime::parse_from_rfc3339(started)
        .map_err(|e| format!("the recording's start {started:?} is not an RFC 3339 time: {e}"))?
        .with_timezone(&chrono::Utc);

    // The versions the operator produced itself, wherever their lines are: a watch event
    // may be recorded before the response to the patch that caused it.
    let mut own_versions: HashSet<&str> = HashSet::new();
    let mut host_released: HashSet<(Option<&str>, &str)> = HashSet::new();
    let mut guest_deleted: HashSet<(Option<&str>, &str)> = HashSet::new();
    for entry in entries {
        match entry {
            Entry::Write {
                resource_version,
                namespace,
                name,
                released,
                ..
            } => {
                // A release's answer is the deleted object, whose version another
                // (somebody else's) event may carry: only the DELETED event is ours.
                if *released {
                    host_released.insert((namespace.as_deref(), name));
                } else {
                    own_versions.insert(resource_version);
                }
            }
            Entry::Call {
                verb,
                result: Some(result),
                ..
            } if verb == "create" || verb == "patch" => {
                own_versions.extend(text(result, "/metadata/resourceVersion"));
            }
            Entry::Call {
                verb,
                namespace,
                name: Some(name),
                error: None,
                ..
            } if verb == "delete" => {
                guest_deleted.insert((namespace.as_deref(), name));
            }
            _ => {}
        }
    }

    let mut resources = BTreeMap::new();
    let mut given = Vec::new();
    let mut steps = Vec::new();
    let mut last: HashMap<Address, Value> = HashMap::new();
    let mut listing = true;
    let mut end: f64 = 0.0;
    for entry in entries {
        end = end.max(entry.at());
        match entry {
            Entry::Resource(info) => {
                resources.insert(info.key.clone(), info.clone());
            }
            Entry::Handler { at, .. } => steps.push(Step {
                at: *at,
                action: Action::Wait,
            }),
            Entry::Watch {
                at,
                resource,
                event_type,
                object,
            } => {
                if !resources.contains_key(resource) {
                    return Err(format!(
                        "a watch event of {resource} comes before the resource's description"
                    ));
                }
                let address = address_of(resource, object);
                let key = (address.1.as_deref(), address.2.as_str());
                let version = text(object, "/metadata/resourceVersion").unwrap_or_default();
                let listed = event_type == "LISTED";
                listing &= listed;
                let previous = last.get(&address).cloned();
                let own = own_versions.contains(version);
                let action = match (event_type.as_str(), &previous) {
                    ("LISTED", None) if listing => {
                        given.push((resource.clone(), object.clone()));
                        None
                    }
                    ("DELETED", None) => None,
                    ("DELETED", Some(previous)) => {
                        let deleting = previous.pointer("/metadata/deletionTimestamp").is_some();
                        if own
                            || guest_deleted.contains(&key)
                            || (deleting && host_released.contains(&key))
                        {
                            None
                        } else if deleting {
                            Some(Action::Release(address.clone()))
                        } else {
                            Some(Action::Delete(address.clone()))
                        }
                    }
                    (_, _) if own => None,
                    (_, None) => Some(Action::Create(resource.clone(), object.clone())),
                    (_, Some(previous)) => {
                        change(&address, previous, object, guest_deleted.contains(&key))
                    }
                };
                if event_type == "DELETED" {
                    last.remove(&address);
                } else {
                    last.insert(address, object.clone());
                }
                if let Some(action) = action {
                    steps.push(Step { at: *at, action });
                }
            }
            Entry::Recording { .. } | Entry::Write { .. } | Entry::Call { .. } => {}
        }
    }
    Ok(Plan {
        started,
        resources,
        given,
        seeds: seeds(entries),
        steps,
        end,
    })
}

/// An object's identity across clusters: apiVersion, kind, namespace, name.
type Identity = (String, String, Option<String>, String);

fn identity(object: &Value) -> Identity {
    let field = |pointer: &str| text(object, pointer).unwrap_or_default().to_owned();
    (
        field("/apiVersion"),
        field("/kind"),
        namespace_of(object).map(str::to_owned),
        field("/metadata/name"),
    )
}

/// The objects the guests read (`get`, `list`) that no stream watched and no guest had
/// created before reading them: they existed in the recorded cluster, so the replay's
/// must have them too.
fn seeds(entries: &[Entry]) -> Vec<Value> {
    let watched: HashSet<Identity> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Watch { object, .. } => Some(identity(object)),
            _ => None,
        })
        .collect();
    let mut known = HashSet::new();
    let mut seeds = Vec::new();
    for entry in entries {
        let Entry::Call {
            verb,
            result: Some(result),
            ..
        } = entry
        else {
            continue;
        };
        let read: Vec<&Value> = match verb.as_str() {
            // Created by a guest: it will be created again by the guest under test.
            "create" => {
                known.insert(identity(result));
                continue;
            }
            "get" => vec![result],
            "list" => result
                .get("items")
                .and_then(Value::as_array)
                .map(|items| items.iter().collect())
                .unwrap_or_default(),
            _ => continue,
        };
        for object in read {
            let id = identity(object);
            if !id.3.is_empty() && !watched.contains(&id) && known.insert(id) {
                seeds.push(object.clone());
            }
        }
    }
    seeds
}

/// What somebody else changed between two recorded versions.
fn change(
    at: &Address,
    previous: &Value,
    current: &Value,
    deleted_by_guest: bool,
) -> Option<Action> {
    let was_deleting = previous.pointer("/metadata/deletionTimestamp").is_some();
    if current.pointer("/metadata/deletionTimestamp").is_some() && !was_deleting {
        // A deletion: the rest of that version's changes are the server's.
        return (!deleted_by_guest).then(|| Action::Delete(at.clone()));
    }
    let mut diff = merge_diff(
        &strip_server_fields(previous),
        &strip_server_fields(current),
    )?;
    let status = diff.as_object_mut().and_then(|d| d.remove("status"));
    let main = Some(diff).filter(|d| !is_empty(d));
    if main.is_none() && status.is_none() {
        return None;
    }
    Some(Action::Patch {
        at: at.clone(),
        main,
        status,
    })
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`; `None` when equal.
fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for (key, value) in new {
                match old.get(key) {
                    Some(before) => {
                        if let Some(inner) = merge_diff(before, value) {
                            patch.insert(key.clone(), inner);
                        }
                    }
                    None => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in old.keys() {
                if !new.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (old, new) if old == new => None,
        (_, new) => Some(new.clone()),
    }
}

/// Where the replay did differently than the recording, one line each.
fn differences(recorded: &[Entry], replayed: &[Entry]) -> Vec<String> {
    let mut found = Vec::new();
    let sequences = [
        ("handler", outcomes(recorded), outcomes(replayed)),
        ("Kubernetes calls of", calls(recorded), calls(replayed)),
    ];
    for (what, before, after) in &sequences {
        for key in keys(before, after) {
            let (before, after) = (before.get(&key), after.get(&key));
            if before != after {
                found.push(format!(
                    "{what} {} on {}: recorded {}, replayed {}",
                    key.1,
                    key.0,
                    list(before),
                    list(after)
                ));
            }
        }
    }
    let (states_before, states_after) = (last_states(recorded), last_states(replayed));
    for key in keys(&states_before, &states_after) {
        let name = describe(&key);
        match (states_before.get(&key), states_after.get(&key)) {
            (Some(Some(_)), None) => {
                found.push(format!("{name}: recorded, but never seen in the replay"));
            }
            (None, Some(Some(_))) => {
                found.push(format!("{name}: seen in the replay, but not recorded"));
            }
            (Some(Some(_)), Some(None)) => {
                found.push(format!(
                    "{name}: recorded as existing at the end, deleted in the replay"
                ));
            }
            (Some(None), Some(Some(_))) => {
                found.push(format!(
                    "{name}: recorded as deleted, still exists in the replay"
                ));
            }
            (Some(Some(before)), Some(Some(after))) => {
                let expected = exact(before, after);
                let mismatches = matching::mismatches(&expected, after);
                for mismatch in mismatches {
                    found.push(format!("{name}: {}", replace_wording(&mismatch)));
                }
            }
            _ => {}
        }
    }
    found
}

/// A mismatch, worded for a replay: "recorded X, replayed Y".
fn replace_wording(mismatch: &matching::Mismatch) -> String {
    mismatch
        .to_string()
        .replacen(": expected ", ": recorded ", 1)
        .replacen(", got ", ", replayed ", 1)
}

fn keys<K: Ord + Clone, A, B>(a: &BTreeMap<K, A>, b: &BTreeMap<K, B>) -> BTreeSet<K> {
    a.keys().chain(b.keys()).cloned().collect()
}

fn list(items: Option<&Vec<String>>) -> String {
    match items {
        None => "none".to_owned(),
        Some(items) => format!("[{}]", items.join(", ")),
    }
}

/// How each handler's calls ended, per (object, handler), in order.
fn outcomes(entries: &[Entry]) -> BTreeMap<(String, String), Vec<String>> {
    let mut found: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for entry in entries {
        if let Entry::Handler {
            handler,
            object,
            outcome,
            ..
        } = entry
        {
            found
                .entry((object.clone(), handler.clone()))
                .or_default()
                .push(outcome.clone());
        }
    }
    found
}

/// The Kubernetes calls each handler made, per (object, handler), in order.
fn calls(entries: &[Entry]) -> BTreeMap<(String, String), Vec<String>> {
    let mut found: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for entry in entries {
        if let Entry::Call {
            handler,
            object,
            verb,
            target,
            namespace,
            name,
            body,
            error,
            ..
        } = entry
        {
            let mut call = format!("{verb} {target}");
            if let Some(ns) = namespace {
                call.push_str(&format!(" in {ns}"));
            }
            if let Some(name) = name {
                call.push_str(&format!(" {name}"));
            }
            if let Some(body) = body {
                call.push_str(&format!(" {}", normalize(body)));
            }
            match error {
                None => call.push_str(" → ok"),
                Some(e) => call.push_str(&format!(" → {} {}", e.code, e.reason)),
            }
            found
                .entry((object.clone().unwrap_or_default(), handler.clone()))
                .or_default()
                .push(call);
        }
    }
    found
}

/// The last recorded state of every watched object: `None` once deleted.
fn last_states(entries: &[Entry]) -> BTreeMap<Address, Option<Value>> {
    let mut found = BTreeMap::new();
    for entry in entries {
        if let Entry::Watch {
            resource,
            event_type,
            object,
            ..
        } = entry
        {
            let state = (event_type != "DELETED").then(|| normalize(object));
            found.insert(address_of(resource, object), state);
        }
    }
    found
}

/// An object without what differs on every run: server-set metadata, times in Kopf's
/// progress records, the touch-dummy annotation.
fn normalize(object: &Value) -> Value {
    let mut object = strip_server_fields(object);
    if let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.retain(|key, _| !key.ends_with("/touch-dummy"));
        for value in annotations.values_mut() {
            let Some(text) = value.as_str() else { continue };
            let Ok(Value::Object(mut record)) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            for time in ["started", "stopped", "delayed"] {
                record.remove(time);
            }
            *value = Value::Object(record);
        }
    }
    object
}

/// `expected`, with an explicit `null` for every key only `actual` has, so that the
/// partial matching of case files compares exactly.
fn exact(expected: &Value, actual: &Value) -> Value {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            let mut out = Map::new();
            for (key, value) in want {
                let inner = match have.get(key) {
                    Some(h) => exact(value, h),
                    None => value.clone(),
                };
                out.insert(key.clone(), inner);
            }
            for key in have.keys() {
                out.entry(key.clone()).or_insert(Value::Null);
            }
            Value::Object(out)
        }
        (want, _) => want.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Entry {
        Entry::Recording {
            format: crate::recording::FORMAT,
            started: "2026-11-30T10:00:00.000000Z".into(),
            host: "kapsel".into(),
            guests: vec!["g".into()],
        }
    }

    fn resource() -> Entry {
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

    fn watch(at: f64, event_type: &str, object: Value) -> Entry {
        Entry::Watch {
            at,
            resource: "kopfexamples.v1.kopf.dev".into(),
            event_type: event_type.into(),
            object,
        }
    }

    fn kex(version: &str, extra: Value) -> Value {
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

    fn write(version: &str, part: &str, released: bool) -> Entry {
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

    #[test]
    fn only_what_others_changed_is_replayed() {
        let entries = vec![
            header(),
            resource(),
            watch(0.5, "LISTED", kex("1", json!({}))),
            // The operator's own patch, its write line after its echo.
            watch(0.6, "MODIFIED", kex("2", json!({"status": {"done": true}}))),
            write("2", "status", false),
            // A user's change of spec.size and a label.
            watch(
                1.0,
                "MODIFIED",
                kex("3", json!({"spec": {"size": 2}, "status": {"done": true}})),
            ),
            watch(
                2.0,
                "MODIFIED",
                kex(
                    "4",
                    json!({"spec": {"size": 2}, "status": {"done": true},
                    "metadata": {"name": "kex", "namespace": "ns", "resourceVersion": "4",
                                 "deletionTimestamp": "t", "finalizers": ["f"]}}),
                ),
            ),
            watch(2.5, "DELETED", kex("5", json!({}))),
            // The release's answer carries the version of the user's deletion.
            write("4", "finalizers", true),
        ];
        let plan = plan(&entries).expect("a plan");
        assert_eq!(plan.given.len(), 1, "the listed object exists at the start");
        let address: Address = (
            "kopfexamples.v1.kopf.dev".into(),
            Some("ns".into()),
            "kex".into(),
        );
        assert_eq!(
            plan.steps,
            vec![
                Step {
                    at: 1.0,
                    action: Action::Patch {
                        at: address.clone(),
                        main: Some(json!({"spec": {"size": 2}})),
                        status: None,
                    },
                },
                Step {
                    at: 2.0,
                    action: Action::Delete(address),
                },
            ],
            "the status echo and the host's release are not replayed"
        );
        assert_eq!(plan.end, 2.5);
    }

    #[test]
    fn differences_name_handlers_calls_and_fields() {
        let handler = |outcome: &str| Entry::Handler {
            at: 1.0,
            handler: "create_fn".into(),
            handler_kind: "create".into(),
            object: "ns/kex".into(),
            outcome: outcome.into(),
        };
        let progress = r#"{"started":"2026-11-30T10:00:00.5","success":true}"#;
        let recorded = vec![
            header(),
            handler("retry"),
            handler("success"),
            watch(
                1.0,
                "MODIFIED",
                kex(
                    "7",
                    json!({"status": {"create_fn": {"n": 1}},
                "metadata": {"name": "kex", "namespace": "ns", "annotations": {"p/x": progress}}}),
                ),
            ),
        ];
        let same = vec![
            header(),
            handler("retry"),
            handler("success"),
            watch(
                1.0,
                "MODIFIED",
                kex(
                    "9",
                    json!({"status": {"create_fn": {"n": 1}},
                "metadata": {"name": "kex", "namespace": "ns",
                             "annotations": {"p/x": r#"{"started":"2026-11-30T10:00:00.7","success":true}"#}}}),
                ),
            ),
        ];
        assert_eq!(differences(&recorded, &same), Vec::<String>::new());
        let other = vec![
            header(),
            handler("success"),
            watch(
                1.0,
                "MODIFIED",
                kex(
                    "9",
                    json!({"status": {"create_fn": {"n": 2}, "extra": 1},
                "metadata": {"name": "kex", "namespace": "ns", "annotations": {"p/x": progress}}}),
                ),
            ),
        ];
        assert_eq!(
            differences(&recorded, &other),
            vec![
                "handler create_fn on ns/kex: recorded [retry, success], replayed [success]",
                "kopfexamples.v1.kopf.dev ns/kex: status.create_fn.n: recorded 1, replayed 2",
                "kopfexamples.v1.kopf.dev ns/kex: status.extra: recorded absent, replayed 1",
            ]
        );
    }

    #[test]
    fn objects_only_guests_read_are_seeded() {
        let call = |verb: &str, result: Value| Entry::Call {
            at: 1.0,
            handler: "h".into(),
            object: Some("ns/kex".into()),
            verb: verb.into(),
            target: "configmaps.v1".into(),
            namespace: Some("ns".into()),
            name: None,
            body: None,
            result: Some(result),
            error: None,
        };
        let cm = |name: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": "ns"}, "data": {"a": "b"}})
        };
        let entries = vec![
            header(),
            resource(),
            watch(0.5, "LISTED", kex("1", json!({}))),
            call("create", cm("made")),
            call("get", cm("made")),
            call("get", cm("settings")),
            call("list", json!({"items": [cm("settings"), cm("other")]})),
            call("get", kex("1", json!({}))),
        ];
        let plan = plan(&entries).expect("a plan");
        let names: Vec<&str> = plan
            .seeds
            .iter()
            .map(|s| s["metadata"]["name"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            ["settings", "other"],
            "not the guest's own, not the watched"
        );
    }

    #[test]
    fn recordings_of_several_guests_are_refused() {
        let entries = vec![Entry::Recording {
            format: crate::recording::FORMAT,
            started: "2026-11-30T10:00:00Z".into(),
            host: "kapsel".into(),
            guests: vec!["a".into(), "b".into()],
        }];
        let error = plan(&entries).expect_err("two guests");
        assert!(error.contains("made with 2 guests (a, b)"), "{error}");
    }

    #[test]
    fn merge_diffs_remove_and_replace() {
        assert_eq!(merge_diff(&json!({"a": 1}), &json!({"a": 1})), None);
        assert_eq!(
            merge_diff(
                &json!({"a": 1, "b": {"c": 1, "d": 2}}),
                &json!({"b": {"c": 2, "d": 2}, "e": [1]})
            ),
            Some(json!({"a": null, "b": {"c": 2}, "e": [1]}))
        );
    }
}
