//! Activity handlers (KOPF.md §1.12): probes, startup and cleanup handlers. They are
//! about no object; each runs until it succeeds or fails for good, retried per its
//! errors mode, `retries`, `timeout` and `backoff` (KOPF.md §5.2), all at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::journal::{Journal, Record};
use crate::metrics;
use crate::operator::{GuestServices, Indexes, KubeAccess};
use crate::runtime::{self, CallContext, Guest, HandlerKind};

/// Kopf's `execution.default_backoff`: the retry delay after an arbitrary failure.
pub(crate) const DEFAULT_BACKOFF: Duration = Duration::from_secs(60);

/// Kopf's delay of a `TemporaryError` without an explicit one.
pub(crate) const DEFAULT_TEMPORARY_DELAY: Duration = Duration::from_secs(60);

/// A delay in seconds from a guest; `fallback` when it is not a usable duration.
pub(crate) fn seconds_or(seconds: f64, fallback: Duration) -> Duration {
    if seconds.is_finite() && seconds >= 0.0 {
        Duration::try_from_secs_f64(seconds).unwrap_or(fallback)
    } else {
        fallback
    }
}

/// One activity handler of a loaded guest.
pub(crate) struct Activity {
    guest: Guest,
    registration: runtime::Registration,
    /// How it is named in results: the handler id, or `guest/id` when guests share it.
    pub(crate) key: String,
}

/// How an activity ended.
pub(crate) enum Finished {
    /// Its result (`None`: nothing, or an ignored failure).
    Done(Option<Value>),
    Failed(String),
}

/// How one attempt failed.
#[derive(Clone, Copy)]
enum Failure {
    /// The handler asked to be retried after this delay.
    Temporary(Duration),
    /// The handler gave up for good.
    Permanent,
    /// Anything else: an error it returned, a trap, a timeout, a memory overrun.
    Arbitrary,
}

/// The guests' activities of one kind, once per (guest, id), in declaration order.
pub(crate) fn of_kind(guests: &[Guest], kind: HandlerKind) -> Vec<Activity> {
    let mut activities: Vec<Activity> = Vec::new();
    for guest in guests {
        for registration in &guest.describe().handlers {
            let declared = activities
                .iter()
                .any(|a| a.guest.name() == guest.name() && a.registration.id == registration.id);
            if registration.kind == kind && !declared {
                activities.push(Activity {
                    guest: guest.clone(),
                    registration: registration.clone(),
                    key: registration.id.clone(),
                });
            }
        }
    }
    let mut guests_per_id: HashMap<String, usize> = HashMap::new();
    for activity in &activities {
        *guests_per_id.entry(activity.key.clone()).or_default() += 1;
    }
    for activity in &mut activities {
        if guests_per_id[&activity.key] > 1 {
            activity.key = format!("{}/{}", activity.guest.name(), activity.key);
        }
    }
    activities
}

/// What activities run with: the journal, the guests' indexes, and the cluster for
/// their Kubernetes calls (none in tests that need no cluster: calls then answer
/// `NotAvailable`).
#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) journal: Journal,
    pub(crate) indexes: Indexes,
    pub(crate) kube: Option<KubeAccess>,
}

/// Runs activities all at once (KOPF.md §1.15); their results in the same order.
pub(crate) async fn run_all(
    activities: &[Activity],
    context: &Context,
    budget: Option<Duration>,
) -> Vec<Finished> {
    futures::future::join_all(activities.iter().map(|a| a.run(context, budget))).await
}

impl Activity {
    /// The kind as the journal and the metrics name it.
    fn kind_name(&self) -> String {
        self.registration.kind.as_str().to_owned()
    }

    /// Calls the handler until it succeeds or fails for good; with a `budget`, no retry
    /// is made that would end past it.
    pub(crate) async fn run(&self, context: &Context, budget: Option<Duration>) -> Finished {
        let journal = &context.journal;
        let id = &self.registration.id;
        let kind = self.kind_name();
        let started = Instant::now();
        let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, false);
        let mut attempts: u32 = 0;
        loop {
            let cause = self.cause(attempts, &started_at, started.elapsed());
            let context = CallContext::new(
                id.clone(),
                None,
                // Activities are about no object: no default object for Events, and
                // namespaced Kubernetes calls default to `default`.
                Arc::new(GuestServices {
                    journal: journal.clone(),
                    indexes: context.indexes.clone(),
                    events: None,
                    kube: context
                        .kube
                        .as_ref()
                        .map(|kube| kube.for_call(&self.guest, Arc::new(Value::Null))),
                    sleeps: None,
                }),
            );
            journal.push(Record::HandlerCalled {
                guest: self.guest.name().to_owned(),
                handler: id.clone(),
                kind: kind.clone(),
                resource: String::new(),
                object: String::new(),
                event_type: None,
            });
            let call = Instant::now();
            let answer = self.guest.invoke(cause, context).await;
            let seconds = call.elapsed().as_secs_f64();
            attempts += 1;
            let (failure, error, fault) = match answer {
                Ok(reply) => match reply.outcome {
                    runtime::Outcome::Done(result) => {
                        let value = result.map(|text| serde_json::from_str::<Value>(&text));
                        match value.transpose() {
                            Ok(value) => {
                                self.finished(journal, seconds, "success", None);
                                return Finished::Done(value);
                            }
                            Err(e) => (
                                Failure::Permanent,
                                format!("returned invalid JSON: {e}"),
                                None,
                            ),
                        }
                    }
                    runtime::Outcome::Temporary((message, delay)) => (
                        Failure::Temporary(seconds_or(delay, DEFAULT_TEMPORARY_DELAY)),
                        message,
                        None,
                    ),
                    runtime::Outcome::Permanent(message) => (Failure::Permanent, message, None),
                    runtime::Outcome::Failed(message) => (Failure::Arbitrary, message, None),
                },
                Err(error) => (
                    Failure::Arbitrary,
                    error.to_string(),
                    metrics::sandbox_fault(&error),
                ),
            };
            let retry = match (failure, self.errors_mode()) {
                (Failure::Temporary(delay), _) => Some(delay),
                (Failure::Permanent, _) | (Failure::Arbitrary, runtime::ErrorsMode::Permanent) => {
                    None
                }
                (Failure::Arbitrary, runtime::ErrorsMode::Temporary) => Some(
                    self.registration
                        .backoff_seconds
                        .map_or(DEFAULT_BACKOFF, |s| seconds_or(s, DEFAULT_BACKOFF)),
                ),
                (Failure::Arbitrary, runtime::ErrorsMode::Ignored) => {
                    // The failure counts as a success without a result.
                    self.finished(journal, seconds, "ignored", fault);
                    tracing::error!("Activity '{id}' failed: {error}. Will ignore.");
                    return Finished::Done(None);
                }
            };
            let retry = retry.filter(|delay| {
                may_retry(
                    &self.registration,
                    attempts,
                    started.elapsed(),
                    *delay,
                    budget,
                )
            });
            match retry {
                Some(delay) => {
                    self.finished(journal, seconds, "retry", fault);
                    tracing::warn!("Activity '{id}' failed: {error}. Will retry in {delay:?}.");
                    tokio::time::sleep(delay).await;
                }
                None => {
                    self.finished(journal, seconds, "failure", fault);
                    tracing::error!("Activity '{id}' failed: {error}");
                    self.record_failure(journal, &error);
                    return Finished::Failed(format!("failed: {error}"));
                }
            }
        }
    }

    fn errors_mode(&self) -> runtime::ErrorsMode {
        // KOPF.md §5.3: activities are temporary by default.
        self.registration
            .errors
            .unwrap_or(runtime::ErrorsMode::Temporary)
    }

    fn cause(&self, retry: u32, started: &str, runtime: Duration) -> runtime::Cause {
        runtime::Cause {
            handler_id: self.registration.id.clone(),
            kind: self.registration.kind,
            // An activity is about no object: no resource, an empty body.
            resource: runtime::Resource {
                group: String::new(),
                version: String::new(),
                plural: String::new(),
                kind: String::new(),
                namespaced: false,
            },
            event_type: None,
            reason: None,
            body: "{}".to_owned(),
            old: None,
            new: None,
            diff: None,
            retry,
            started: started.to_owned(),
            runtime_seconds: runtime.as_secs_f64(),
            param: self.registration.param.clone(),
            memo: None,
        }
    }

    fn finished(&self, journal: &Journal, seconds: f64, outcome: &str, fault: Option<&str>) {
        journal.push(Record::HandlerFinished {
            guest: self.guest.name().to_owned(),
            handler: self.registration.id.clone(),
            kind: self.kind_name(),
            object: None,
            seconds,
            outcome: outcome.to_owned(),
            fault: fault.map(str::to_owned),
        });
    }

    fn record_failure(&self, journal: &Journal, error: &str) {
        journal.push(Record::HandlerFailed {
            guest: self.guest.name().to_owned(),
            handler: self.registration.id.clone(),
            object: String::new(),
            error: error.to_owned(),
        });
    }
}

/// Kopf's look-ahead (KOPF.md §5.2): no retry when the next attempt would exceed the
/// handler's retries (`attempts` made so far) or timeout; nor the caller's budget.
fn may_retry(
    registration: &runtime::Registration,
    attempts: u32,
    elapsed: Duration,
    delay: Duration,
    budget: Option<Duration>,
) -> bool {
    let next = elapsed + delay;
    registration.retries.is_none_or(|r| attempts < r)
        && registration
            .timeout_seconds
            .is_none_or(|t| next.as_secs_f64() < t)
        && budget.is_none_or(|b| next < b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(retries: Option<u32>, timeout_seconds: Option<f64>) -> runtime::Registration {
        let mut probe = runtime::registration("p", HandlerKind::Probe);
        probe.selectors.clear();
        probe.retries = retries;
        probe.timeout_seconds = timeout_seconds;
        probe
    }

    #[test]
    fn retries_look_ahead_at_retries_timeout_and_budget() {
        let budget = Some(Duration::from_secs(10));
        let may = |registration: runtime::Registration, attempts, elapsed_ms, delay_ms, budget| {
            may_retry(
                &registration,
                attempts,
                Duration::from_millis(elapsed_ms),
                Duration::from_millis(delay_ms),
                budget,
            )
        };
        // `retries = 2` means two attempts in all.
        assert!(may(probe(Some(2), None), 1, 0, 100, budget));
        assert!(!may(probe(Some(2), None), 2, 0, 100, budget));
        // A retry that would start past the timeout is not made.
        assert!(may(probe(None, Some(1.0)), 1, 500, 400, budget));
        assert!(!may(probe(None, Some(1.0)), 1, 500, 600, budget));
        // Nor one past the caller's budget (Kopf's default backoff: 60 s)...
        assert!(!may(probe(None, None), 1, 0, 60_000, budget));
        assert!(may(probe(None, None), 1, 0, 1_000, budget));
        // ...unless there is none: startup handlers retry for as long as they need.
        assert!(may(probe(None, None), 1, 0, 60_000, None));
    }

    #[test]
    fn seconds_from_guests_fall_back_when_unusable() {
        let fallback = Duration::from_secs(60);
        assert_eq!(seconds_or(1.5, fallback), Duration::from_millis(1500));
        assert_eq!(seconds_or(-1.0, fallback), fallback);
        assert_eq!(seconds_or(f64::NAN, fallback), fallback);
        assert_eq!(seconds_or(f64::INFINITY, fallback), fallback);
    }
}
