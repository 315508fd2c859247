//! Runs one case: a fresh embedded cluster, the `given` objects, the guest in the real
//! host machinery (with a manual clock), then the steps in order; the first expectation
//! that does not hold within its time fails the case with a readable explanation.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;

use super::admission::{self, AdmissionError, Webhooks};
use super::expecting::{Unmet, expect};
use super::format::{Case, Expectation, Expected, Source, Step, Write};
use super::objects::{self, ObjectError, Written, apply};
use crate::clock::ManualClock;
use crate::health::Liveness;
use crate::journal::Record;
use crate::recording::Recorder;
use crate::running::activities_context;
use crate::runtime::{Guest, Runtime, ServedGuests};
use crate::testing::{Cluster, RunningOperator};
use crate::{AdmissionServer, Operator};

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

/// The API server a case runs on: without the simulated kubelet, so that its objects
/// change only as the case (or the recording it replays) says: no pod is scheduled,
/// moved to Running or kept through a grace period behind the case's back.
pub(super) fn quiet() -> crate::testing::ServerConfig {
    crate::testing::ServerConfig::default().kubelet(false)
}

/// Runs `case` against `guest` (compiled by `runtime`).
pub(crate) async fn run(runtime: &Runtime, guest: &Guest, case: &Case) -> CaseRun {
    let started = Instant::now();
    // Without the simulated kubelet: a case's cluster changes only as its steps say.
    let (verdict, records) = match Cluster::start_with(quiet()).await {
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
    // A guest with admission handlers serves them to the cluster, as when deployed; its
    // webhooks are configured before the first step, so that every write goes through them.
    let admits = !guest.admissions().is_empty();
    let mut world = World::start_with(
        cluster,
        runtime,
        guest,
        Arc::new(ManualClock::new()),
        (Recorder::default(), admits.then(admission::server)),
    );
    world.written = given;
    let journal = world.running.journal().clone();
    if admits {
        match admission::configured(&client, guest).await {
            Ok(webhooks) => world.webhooks = Some(webhooks),
            Err(message) => {
                let _ = world.running.stop().await;
                return (Verdict::Failed { step: 0, message }, journal.records());
            }
        }
    }

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
        Step::Review(review) => {
            let source = review.object.as_ref().or(review.old_object.as_ref());
            let object = match source {
                Some(Source::File(path)) => path.display().to_string(),
                Some(Source::Object(object)) => format!(
                    "{}/{}",
                    object["kind"].as_str().unwrap_or("?"),
                    object["metadata"]["name"].as_str().unwrap_or("?")
                ),
                None => "?".to_owned(),
            };
            let to = review
                .handler
                .as_ref()
                .map_or_else(String::new, |h| format!(" to {h}"));
            format!("review {} {object}{to}", review.operation)
        }
        Step::Refused(refusal) => {
            let write = match &refusal.write {
                Write::Apply(source) => describe(&Step::Apply(source.clone())),
                Write::Patch { target, merge } => describe(&Step::Patch {
                    target: target.clone(),
                    merge: merge.clone(),
                }),
                Write::Delete(target) => describe(&Step::Delete(target.clone())),
            };
            format!("refused {write}")
        }
        Step::Expect(e) => match &e.what {
            Expected::Object { target, .. } => format!("expect object {target}"),
            Expected::Gone(target) => format!("expect gone {target}"),
            Expected::Event { about, .. } => format!("expect an event about {about}"),
            Expected::Called { handler, .. } => format!("expect {handler} called"),
            Expected::NotCalled(handler) => format!("expect {handler} not called"),
            Expected::Log { text, .. } => format!("expect log {text:?}"),
            Expected::Outcome {
                handler, outcome, ..
            } => format!("expect {handler} {outcome}"),
            Expected::Healthy(true) => "expect healthy".to_owned(),
            Expected::Healthy(false) => "expect not healthy".to_owned(),
        },
    }
}

/// Why a step failed; the report puts it after the step's description.
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error(transparent)]
    Unmet(#[from] Unmet),
    #[error(transparent)]
    Admission(#[from] AdmissionError),
    /// A "not (again)" expectation cannot be judged while the operator is still busy.
    #[error(
        "the operator did not settle within {} s, so that it cannot be told whether this holds",
        within.as_secs_f64()
    )]
    Unsettled { within: Duration },
}

/// What the steps act on: the cluster, the clock, and the operator under test.
pub(super) struct World {
    pub(super) client: Client,
    pub(super) clock: Arc<ManualClock>,
    pub(super) running: RunningOperator,
    /// What the liveness endpoint would answer for the operator (for `healthy`).
    liveness: Liveness,
    /// The case's writes since time last advanced.
    pub(super) written: Vec<Written>,
    /// The guest's admission webhooks, once configured on the cluster.
    webhooks: Option<Webhooks>,
}

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
        World::start_with(cluster, runtime, guest, clock, (recorder, None))
    }

    /// [`World::start`], the operator serving admission webhooks as `admission` says.
    fn start_with(
        cluster: &Cluster,
        runtime: &Runtime,
        guest: &Guest,
        clock: Arc<ManualClock>,
        (recorder, admission): (Recorder, Option<AdmissionServer>),
    ) -> World {
        let mut operator = Operator::new([guest.path().to_path_buf()])
            .all_namespaces()
            .standalone()
            .client(cluster.client());
        operator.shared.recorder = recorder;
        operator.preloaded = Some((runtime.clone(), vec![guest.clone()]));
        if let Some(server) = admission {
            operator = operator.admission(server);
        }
        let client = cluster.client();
        let liveness = Liveness::new(
            ServedGuests::new(vec![guest.clone()]),
            activities_context(&client, &operator.shared, &operator.settings.scope),
            operator.shared.metrics.clone(),
        );
        World {
            client,
            clock: clock.clone(),
            liveness,
            running: RunningOperator::start(operator, Some(clock)),
            written: Vec::new(),
            webhooks: None,
        }
    }

    async fn execute(&mut self, step: &Step) -> Result<(), StepError> {
        let client = &self.client;
        let written = match step {
            Step::Apply(source) => apply(client, source).await?,
            Step::Patch { target, merge } => objects::merge(client, target, merge).await?,
            Step::Delete(target) => objects::delete(client, target).await?,
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
            Step::Review(review) => {
                admission::review(client, self.webhooks.as_ref(), review).await?;
                Vec::new()
            }
            Step::Refused(refusal) => admission::refused(client, refusal).await?,
            Step::Expect(expectation) => {
                expect(client, &self.running, &self.liveness, expectation).await?;
                if expectation.what.denies_more() {
                    // "Not (again)" is a fact only once nothing is left that could still
                    // call the handler before the next write or advance.
                    if !self.settle_within(expectation.within).await {
                        return Err(StepError::Unsettled {
                            within: expectation.within,
                        });
                    }
                    let once = Expectation {
                        within: Duration::ZERO,
                        ..expectation.clone()
                    };
                    expect(&self.client, &self.running, &self.liveness, &once).await?;
                }
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
    pub(super) async fn settle(&mut self) -> bool {
        self.settle_within(SETTLE_LIMIT).await
    }

    /// [`World::settle`], waiting up to `limit`.
    async fn settle_within(&mut self, limit: Duration) -> bool {
        let running = &self.running;
        let written = &self.written;
        // Writes of resources the operator does not watch never reach it.
        let settled = running
            .settle_within(limit, || {
                written.iter().all(|(resource, uid, version)| {
                    !running.watches(resource) || running.has_seen(uid, version)
                })
            })
            .await;
        self.written.clear();
        settled
    }
}

/// The longest wait for the operator to settle before time is advanced.
const SETTLE_LIMIT: Duration = Duration::from_secs(3);
