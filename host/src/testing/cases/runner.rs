//! Runs one case: a fresh embedded cluster, the `given` objects, the guest in the real
//! host machinery (with a manual clock), then the steps in order; the first expectation
//! that does not hold within its time fails the case with a readable explanation.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::Value;

use super::format::{Case, Expectation, Expected, Source, Step, Target};
use super::matching;
use crate::clock::{Clock, ManualClock};
use crate::cluster::{Resource, find_kind, find_resource};
use crate::journal::Record;
use crate::reactor::{Memories, Watched};
use crate::recording::Recorder;
use crate::runtime::{Guest, Runtime};
use crate::testing::{Cluster, RunningOperator};
use crate::{Journal, Operator};

/// How often expectations look again.
const POLL: Duration = Duration::from_millis(20);

/// How a case ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    Passed,
    /// `step` is 1-based; 0 for the set-up (given objects, the operator's start).
    Failed {
        step: usize,
        message: String,
    },
}

/// The result of one case.
#[derive(Debug)]
pub(crate) struct CaseRun {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    pub(crate) verdict: Verdict,
    pub(crate) elapsed: Duration,
    /// What the operator did, for `--verbose` reports of failures.
    pub(crate) records: Vec<Record>,
}

/// Runs `case` against `guest` (compiled by `runtime`).
pub(crate) async fn run(runtime: &Runtime, guest: &Guest, case: &Case) -> CaseRun {
    let started = Instant::now();
    let (verdict, records) = match Cluster::start().await {
        Ok(cluster) => {
            let result = run_on(&cluster, runtime, guest, case).await;
            // The cluster's state is thrown away: a failure to save it does not matter.
            let _ = cluster.shutdown().await;
            result
        }
        Err(e) => (
            Verdict::Failed {
                step: 0,
                message: format!("cannot start the embedded cluster: {e}"),
            },
            Vec::new(),
        ),
    };
    CaseRun {
        name: case.name.clone(),
        path: case.path.clone(),
        verdict,
        elapsed: started.elapsed(),
        records,
    }
}

async fn run_on(
    cluster: &Cluster,
    runtime: &Runtime,
    guest: &Guest,
    case: &Case,
) -> (Verdict, Vec<Record>) {
    let client = cluster.client();
    // The operator must see the given objects too before time is first advanced.
    let mut given = Vec::new();
    for source in &case.given {
        match apply(&client, source).await {
            Ok(written) => given.extend(written),
            Err(message) => {
                return (
                    Verdict::Failed {
                        step: 0,
                        message: format!("given: {message}"),
                    },
                    Vec::new(),
                );
            }
        }
    }
    let mut world = World::start(
        cluster,
        runtime,
        guest,
        Arc::new(ManualClock::new()),
        Recorder::default(),
    );
    world.written = given;
    let journal = world.running.journal().clone();

    let mut verdict = Verdict::Passed;
    for (index, step) in case.steps.iter().enumerate() {
        let result = world.execute(step).await;
        if let Err(message) = result {
            verdict = Verdict::Failed {
                step: index + 1,
                message: format!("{}: {message}", describe(step)),
            };
            break;
        }
    }
    let stopped = world.running.stop().await;
    if let (Verdict::Passed, Err(error)) = (&verdict, stopped) {
        verdict = Verdict::Failed {
            step: case.steps.len(),
            message: format!("the operator failed: {}", crate::error_chain(&error)),
        };
    }
    (verdict, journal.records())
}

/// A step, as a failure message names it.
fn describe(step: &Step) -> String {
    match step {
        Step::Apply(Source::File(path)) => format!("apply {}", path.display()),
        Step::Apply(Source::Object(object)) => format!(
            "apply {}/{}",
            object["kind"].as_str().unwrap_or("?"),
            object["metadata"]["name"].as_str().unwrap_or("?")
        ),
        Step::Patch { target, .. } => format!("patch {target}"),
        Step::Delete(target) => format!("delete {target}"),
        Step::Advance(by) => format!("advance {} s", by.as_secs_f64()),
        Step::Sleep(by) => format!("sleep {} s", by.as_secs_f64()),
        Step::Expect(e) => match &e.what {
            Expected::Object { target, .. } => format!("expect object {target}"),
            Expected::Gone(target) => format!("expect gone {target}"),
            Expected::Event { about, .. } => format!("expect an event about {about}"),
            Expected::Called { handler, .. } => format!("expect {handler} called"),
            Expected::NotCalled(handler) => format!("expect {handler} not called"),
            Expected::Log { text, .. } => format!("expect log {text:?}"),
            Expected::Healthy => "expect healthy".to_owned(),
        },
    }
}

/// What the steps act on: the cluster, the clock, and the operator under test.
pub(super) struct World {
    pub(super) client: Client,
    pub(super) clock: Arc<ManualClock>,
    pub(super) running: RunningOperator,
    memories: Memories,
    watched: Watched,
    /// Whether the operator has started its watch streams.
    started: tokio::sync::watch::Receiver<bool>,
    /// The case's writes since time last advanced.
    pub(super) written: Vec<Written>,
}

/// An object the case wrote: its resource (key), uid and resourceVersion.
pub(super) type Written = (String, String, String);

impl World {
    /// Starts `guest` on `cluster` in the real host machinery, on `clock`, recording
    /// into `recorder`.
    pub(super) fn start(
        cluster: &Cluster,
        runtime: &Runtime,
        guest: &Guest,
        clock: Arc<ManualClock>,
        recorder: Recorder,
    ) -> World {
        let mut operator = Operator::new([guest.path().to_path_buf()])
            .all_namespaces()
            .standalone();
        operator.shared.clock = clock.clone();
        operator.shared.recorder = recorder;
        operator.preloaded = Some((runtime.clone(), vec![guest.clone()]));
        let memories = operator.shared.memories.clone();
        let watched = operator.shared.watched.clone();
        let started = operator.shared.started.subscribe();
        World {
            client: cluster.client(),
            clock,
            running: cluster.start_operator(operator),
            memories,
            watched,
            started,
            written: Vec::new(),
        }
    }

    async fn execute(&mut self, step: &Step) -> Result<(), String> {
        let client = &self.client;
        let written = match step {
            Step::Apply(source) => apply(client, source).await?,
            Step::Patch { target, merge } => {
                let (api, resource) = api_for(client, target).await?;
                let object = api
                    .patch(&target.name, &PatchParams::default(), &Patch::Merge(merge))
                    .await
                    .map_err(|e| e.to_string())?;
                version_of(&resource, &object).into_iter().collect()
            }
            Step::Delete(target) => {
                let (api, resource) = api_for(client, target).await?;
                let deleted = api
                    .delete(&target.name, &Default::default())
                    .await
                    .map_err(|e| e.to_string())?;
                // Still there (held by finalizers): the operator must see the deletion.
                deleted
                    .left()
                    .and_then(|o| version_of(&resource, &o))
                    .into_iter()
                    .collect()
            }
            Step::Advance(by) => {
                self.settle().await;
                self.clock.advance(*by);
                // What fell due within the advance runs before the next step is checked.
                self.settle().await;
                Vec::new()
            }
            Step::Sleep(by) => {
                tokio::time::sleep(*by).await;
                Vec::new()
            }
            Step::Expect(expectation) => {
                expect(client, &self.running, expectation).await?;
                Vec::new()
            }
        };
        self.written.extend(written);
        Ok(())
    }

    /// Waits until the operator has seen the case's writes and has nothing left to do
    /// but sleep on handler time, so that advancing the clock means what the case says:
    /// "after everything that could happen by now has happened". Bounded: an operator
    /// that never settles (a spinning handler) does not hang the case.
    pub(super) async fn settle(&mut self) {
        const QUIET_POLLS: usize = 3;
        let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
        // Before its streams exist, an operator has nothing to do yet, but not because
        // it is done.
        let _ = tokio::time::timeout_at(deadline, self.started.wait_for(|s| *s)).await;
        let mut quiet = 0;
        while tokio::time::Instant::now() < deadline && quiet < QUIET_POLLS {
            // Writes of resources the operator does not watch never reach it.
            let seen = self.written.iter().all(|(resource, uid, version)| {
                !self.watched.contains(resource) || self.memories.has_seen(uid, version)
            });
            quiet = if seen && self.memories.settled(self.clock.now()) {
                quiet + 1
            } else {
                0
            };
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.written.clear();
    }
}

/// The longest wait for the operator to settle before time is advanced.
const SETTLE_LIMIT: Duration = Duration::from_secs(3);

/// What the runner remembers of a write: the resource, the object's uid and version.
pub(super) fn version_of(resource: &Resource, object: &DynamicObject) -> Option<Written> {
    Some((
        resource.key(),
        object.metadata.uid.clone()?,
        object.metadata.resource_version.clone()?,
    ))
}

/// Creates the objects of a source, or merges them into existing ones; returns their
/// uids and resourceVersions.
async fn apply(client: &Client, source: &Source) -> Result<Vec<Written>, String> {
    let objects = match source {
        Source::Object(object) => vec![object.clone()],
        Source::File(path) => read_manifests(path)?,
    };
    let mut written = Vec::new();
    for object in objects {
        let (resource, applied) = apply_object(client, &object).await?;
        written.extend(version_of(&resource, &applied));
    }
    Ok(written)
}

fn read_manifests(path: &Path) -> Result<Vec<Value>, String> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value = Value::deserialize(document)
            .map_err(|e| format!("{} is not valid YAML: {e}", path.display()))?;
        if !value.is_null() {
            objects.push(value);
        }
    }
    Ok(objects)
}

pub(super) async fn apply_object(
    client: &Client,
    object: &Value,
) -> Result<(Resource, DynamicObject), String> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let (Some(api_version), Some(kind), Some(name)) =
        (text("/apiVersion"), text("/kind"), text("/metadata/name"))
    else {
        return Err("an object needs apiVersion, kind and metadata.name".into());
    };
    let resource = find_kind(client, api_version, kind).await?;
    let namespace = text("/metadata/namespace").unwrap_or("default");
    let api = api(client, &resource, namespace);
    let typed: DynamicObject =
        serde_json::from_value(object.clone()).map_err(|e| format!("{kind}/{name}: {e}"))?;
    let applied = match api.create(&PostParams::default(), &typed).await {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(status)) if status.code == 409 => api
            .patch(name, &PatchParams::default(), &Patch::Merge(object))
            .await
            .map_err(|e| format!("{kind}/{name}: {e}")),
        Err(e) => Err(format!("{kind}/{name}: {e}")),
    };
    applied.map(|object| (resource, object))
}

pub(super) fn api(client: &Client, resource: &Resource, namespace: &str) -> Api<DynamicObject> {
    let ar = resource.api_resource();
    if resource.namespaced {
        Api::namespaced_with(client.clone(), namespace, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    }
}

async fn api_for(
    client: &Client,
    target: &Target,
) -> Result<(Api<DynamicObject>, Resource), String> {
    let resource = find_resource(client, &target.resource).await?;
    Ok((
        api(client, &resource, target.namespace_or_default()),
        resource,
    ))
}

/// Polls until the expectation holds or its time is up.
async fn expect(
    client: &Client,
    running: &RunningOperator,
    expectation: &Expectation,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + expectation.within;
    let journal = running.journal();
    loop {
        let check = check(client, running, journal, &expectation.what).await;
        let last_chance = tokio::time::Instant::now() >= deadline;
        match check {
            // "not called" must hold for the whole time; everything else once.
            Check::Holds if !matches!(expectation.what, Expected::NotCalled(_)) => return Ok(()),
            Check::Holds if last_chance => return Ok(()),
            Check::Broken(why) => return Err(why),
            Check::NotYet(why) if last_chance => {
                return Err(format!(
                    "not so after {} s:\n{why}",
                    expectation.within.as_secs_f64()
                ));
            }
            _ => tokio::time::sleep(POLL).await,
        }
    }
}

/// One look at an expectation.
enum Check {
    Holds,
    /// Not yet: why not, for the report if time runs out.
    NotYet(String),
    /// Can never hold any more (a handler called too often, the operator gone).
    Broken(String),
}

async fn check(
    client: &Client,
    running: &RunningOperator,
    journal: &Journal,
    what: &Expected,
) -> Check {
    match what {
        Expected::Object { target, matches } => match get(client, target).await {
            Err(e) => Check::NotYet(e),
            Ok(None) => Check::NotYet(format!("  - {target} does not exist\n")),
            Ok(Some(object)) => {
                let found = matching::mismatches(matches, &object);
                if found.is_empty() {
                    Check::Holds
                } else {
                    Check::NotYet(matching::report(&found))
                }
            }
        },
        Expected::Gone(target) => match get(client, target).await {
            Err(e) => Check::NotYet(e),
            Ok(None) => Check::Holds,
            Ok(Some(object)) => Check::NotYet(format!(
                "  - {target} still exists (finalizers: {})\n",
                object["metadata"]["finalizers"]
            )),
        },
        Expected::Event {
            about,
            event_type,
            reason,
            message,
        } => match events_about(client, about).await {
            Err(e) => Check::NotYet(e),
            Ok(events) => {
                let fits = |e: &Value| {
                    let field = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
                    event_type.as_deref().is_none_or(|t| field("type") == t)
                        && reason.as_deref().is_none_or(|r| field("reason") == r)
                        && message
                            .as_deref()
                            .is_none_or(|m| field("message").contains(m))
                };
                if events.iter().any(fits) {
                    Check::Holds
                } else {
                    let seen: Vec<String> = events
                        .iter()
                        .map(|e| format!("  - {} {}: {}\n", e["type"], e["reason"], e["message"]))
                        .collect();
                    Check::NotYet(if seen.is_empty() {
                        format!("  - no events about {about}\n")
                    } else {
                        format!("  events about {about}:\n{}", seen.concat())
                    })
                }
            }
        },
        Expected::Called { handler, times } => {
            let calls = calls_of(journal, handler);
            match times {
                None if calls > 0 => Check::Holds,
                Some(n) if calls == *n => Check::Holds,
                Some(n) if calls > *n => {
                    Check::Broken(format!("{handler} was called {calls} times, expected {n}"))
                }
                _ => Check::NotYet(format!("  - {handler} was called {calls} times\n")),
            }
        }
        Expected::NotCalled(handler) => match calls_of(journal, handler) {
            0 => Check::Holds,
            calls => Check::Broken(format!("{handler} was called {calls} times")),
        },
        Expected::Log { text, handler: who } => {
            let records = journal.records();
            let found = records.iter().any(|r| {
                matches!(r, Record::GuestLog { handler, message, .. }
                    if message.contains(text.as_str())
                        && who.as_deref().is_none_or(|w| w == handler))
            });
            if found {
                Check::Holds
            } else {
                Check::NotYet(format!("  - no guest log line contains {text:?}\n"))
            }
        }
        Expected::Healthy => {
            if running.is_finished() {
                Check::Broken("the operator has exited".into())
            } else {
                Check::Holds
            }
        }
    }
}

fn calls_of(journal: &Journal, handler: &str) -> usize {
    journal
        .records()
        .iter()
        .filter(|r| matches!(r, Record::HandlerCalled { handler: h, .. } if h == handler))
        .count()
}

async fn get(client: &Client, target: &Target) -> Result<Option<Value>, String> {
    let (api, _) = api_for(client, target).await?;
    let object = api.get_opt(&target.name).await.map_err(|e| e.to_string())?;
    Ok(object.map(|o| serde_json::to_value(o).unwrap_or(Value::Null)))
}

async fn events_about(client: &Client, target: &Target) -> Result<Vec<Value>, String> {
    let resource = find_resource(client, &target.resource).await?;
    let events: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        if resource.namespaced {
            target.namespace_or_default()
        } else {
            "default"
        },
        &kube::api::ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "Event".into(),
            plural: "events".into(),
        },
    );
    let list = events
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
        .filter(|e| {
            e.pointer("/involvedObject/name").and_then(Value::as_str) == Some(&target.name)
                && e.pointer("/involvedObject/kind").and_then(Value::as_str) == Some(&resource.kind)
        })
        .collect())
}
