//! Activity handlers (KOPF.md §1.12): probes, startup, cleanup and login handlers. They
//! are about no object; each runs until it succeeds or fails for good, retried per its
//! errors mode, `retries`, `timeout` and `backoff` (KOPF.md §5.2), all at once. Logging
//! in (`log_in`, `keep_logged_in`: Kopf's authenticator) fills the credentials vault with
//! the login handlers' results.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::clock::{self, Clock};
use crate::cluster::{ConnectionInfo, KubeAccess, Vault};
use crate::handlers::execution::{self, Attempted, Retrying, Standing, Verdict};
use crate::handlers::{
    About, Ended, GuestServices, Handler, HandlerSpec, Indexes, OperatorMemo, SettingsAccess,
};
use crate::journal::Journal;
use crate::recording::Recorder;
use crate::runtime::{self, CallContext, Guest, HandlerKind, Pool};
use crate::settings::SharedSettings;

/// One activity handler of a loaded guest.
pub(crate) struct Activity {
    handler: Handler,
    /// How it is named in results: the handler id, or `guest/id` when guests share it.
    pub(crate) key: String,
}

/// How an activity ended.
pub(crate) enum Finished {
    /// Its result (`None`: nothing, or an ignored failure).
    Done(Option<Value>),
    Failed(String),
}

/// The guests' activities of one kind, once per (guest, id), in declaration order. Login
/// handlers, startup registrations on the wire, are not startup handlers: see [`logins`].
pub(crate) fn of_kind(guests: &[Guest], kind: HandlerKind) -> Vec<Activity> {
    select(guests, |guest, id, registered| {
        registered == kind && !guest.is_login(id)
    })
}

/// The guests' login handlers (Kopf's `on.login`), once per (guest, id).
pub(crate) fn logins(guests: &[Guest]) -> Vec<Activity> {
    select(guests, |guest, id, registered| {
        registered == HandlerKind::Startup && guest.is_login(id)
    })
}

/// The registrations `wanted` picks as activities, once per (guest, id), in declaration
/// order, keyed by id (`guest/id` where guests share one).
fn select(guests: &[Guest], wanted: impl Fn(&Guest, &str, HandlerKind) -> bool) -> Vec<Activity> {
    let mut activities: Vec<Activity> = Vec::new();
    for guest in guests {
        for registration in &guest.describe().handlers {
            let declared = activities.iter().any(|a| {
                a.handler.guest.name() == guest.name() && a.handler.spec.id == registration.id
            });
            if wanted(guest, &registration.id, registration.kind) && !declared {
                activities.push(Activity {
                    handler: Handler {
                        guest: guest.clone(),
                        spec: HandlerSpec::of(registration, guest.runtime().limits()),
                    },
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
            activity.key = format!("{}/{}", activity.handler.guest.name(), activity.key);
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
    pub(crate) recorder: Recorder,
    /// Handler time: the retries' delays, timeouts and budgets (`kapsel test` moves it).
    pub(crate) clock: Arc<dyn Clock>,
    /// Kopf's operator-wide memo: every activity gets it and may change it.
    pub(crate) memo: OperatorMemo,
    /// Kopf's settings: every activity reads them, startup handlers may change them until
    /// they are in force.
    pub(crate) settings: SharedSettings,
}

/// Logs in (Kopf's authentication activity): calls the login handlers of `guests` all at
/// once, with no cluster access (the client they would use is the one being made), and
/// fills the vault with what they give. `again`: a re-authentication, for the log.
///
/// # Errors
/// A login handler failed for good or gave credentials that cannot be used, or none gave
/// any: the vault fails every request then, and the message says why.
pub(crate) async fn log_in(
    vault: &Vault,
    guests: &[Guest],
    context: &Context,
    again: bool,
) -> Result<(), String> {
    let title = if again {
        "Re-authentication"
    } else {
        "Initial authentication"
    };
    tracing::info!("{title} has been initiated.");
    let result = login_credentials(vault, guests, context, false).await;
    match &result {
        Ok(()) => tracing::info!("{title} has finished."),
        Err(error) => {
            tracing::error!("{title} has failed: {error}");
            vault.fail(error.clone());
        }
    }
    result
}

/// Logs in anew with `guests`' login handlers, a reload having changed them: their
/// credentials replace all the vault had. A failure leaves the vault as it was (the
/// credentials before go on being used), and says why.
pub(crate) async fn renew_login(
    vault: &Vault,
    guests: &[Guest],
    context: &Context,
) -> Result<(), String> {
    tracing::info!("Re-authentication with the reloaded login handlers has been initiated.");
    let result = login_credentials(vault, guests, context, true).await;
    match &result {
        Ok(()) => {
            tracing::info!("Re-authentication with the reloaded login handlers has finished.")
        }
        Err(error) => tracing::error!(
            "Re-authentication with the reloaded login handlers has failed: {error}; \
             the credentials before are kept."
        ),
    }
    result
}

/// Calls the login handlers and fills the vault with what they give (`whole`: in place
/// of all it had).
async fn login_credentials(
    vault: &Vault,
    guests: &[Guest],
    context: &Context,
    whole: bool,
) -> Result<(), String> {
    let logins = logins(guests);
    let context = Context {
        kube: None,
        ..context.clone()
    };
    let finished = run_all(&logins, &context, None).await;
    let mut given = Vec::new();
    let mut failed = Vec::new();
    for (login, finished) in logins.iter().zip(finished) {
        match finished {
            Finished::Done(Some(result)) => match ConnectionInfo::from_result(result) {
                Ok(info) => given.push((login.key.clone(), info)),
                Err(error) => failed.push(format!("'{}' {error}", login.key)),
            },
            Finished::Done(None) => {}
            Finished::Failed(error) => failed.push(format!("'{}' {error}", login.key)),
        }
    }
    if !failed.is_empty() {
        return Err(format!("login handlers failed: {}", failed.join("; ")));
    }
    let filled = if whole {
        vault.replace(given).await
    } else {
        vault.populate(given).await
    };
    match filled {
        Ok(0) => Err("no credentials were retrieved from the login handlers".to_owned()),
        Ok(_) => Ok(()),
        Err((key, error)) => Err(format!(
            "login handler '{key}' gave credentials that cannot be used: {error}"
        )),
    }
}

/// Logs in again whenever the vault wants credentials (none are left: the API server
/// refused them, or they expired), with the login handlers of the guests served then.
/// Returns only when a login failed for good, with why.
pub(crate) async fn keep_logged_in(
    vault: Vault,
    served: runtime::ServedGuests,
    context: Context,
) -> String {
    loop {
        vault.wanted().await;
        if let Err(error) = log_in(&vault, &served.guests(), &context, true).await {
            return error;
        }
    }
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
    /// Calls the handler until it succeeds or fails for good; with a `budget`, no retry
    /// is made that would end past it.
    pub(crate) async fn run(&self, context: &Context, budget: Option<Duration>) -> Finished {
        let handler = &self.handler;
        let journal = &context.journal;
        let clock = &*context.clock;
        let started = clock.now();
        let retrying = budget.map_or(Retrying::Later, |budget| {
            Retrying::Before(clock::after(started, budget))
        });
        let mut standing = Standing::first(started);
        loop {
            let call = async {
                handler.record_called(journal, About::NOTHING);
                let given = context.memo.get();
                let cause = self.cause(standing, clock.now(), given.clone());
                let executed =
                    execution::invoke(&handler.guest, cause, self.call_context(context)).await;
                if let Some(returned) = &executed.memo {
                    context.memo.update(given.as_deref(), returned);
                }
                executed
            };
            let Attempted { decision, called } =
                execution::attempt(&handler.spec, standing, retrying, clock, call).await;
            standing.retries += 1;
            let verdict = decision.verdict;
            match called {
                Some(called) => {
                    let ended = Ended {
                        elapsed: called.elapsed,
                        verdict,
                        fault: called.fault,
                        line: &decision.line,
                    };
                    handler.record_finished(journal, About::NOTHING, ended);
                }
                None => handler.record_gave_up(journal, About::NOTHING, &decision.line),
            }
            match verdict {
                Verdict::Success => {
                    tracing::info!("{}", decision.line);
                    let result = decision.outcome.result.filter(|r| !r.is_null());
                    return Finished::Done(result);
                }
                Verdict::Ignored => {
                    tracing::error!("{}", decision.line);
                    return Finished::Done(None);
                }
                Verdict::Retry | Verdict::Pending => {
                    tracing::warn!("{}", decision.line);
                    let delay = decision.outcome.delay.unwrap_or(0.0);
                    clock
                        .sleep_until(clock::after_seconds(clock.now(), delay.max(0.0)))
                        .await;
                }
                Verdict::Failure => {
                    tracing::error!("{}", decision.line);
                    if called.is_some() {
                        handler.record_failed(journal, About::NOTHING, &decision.line);
                    }
                    let error = decision.outcome.error.unwrap_or(decision.line);
                    return Finished::Failed(format!("failed: {error}"));
                }
            }
        }
    }

    /// What the guest may use during a call: about no object, no default object for
    /// Events, and namespaced Kubernetes calls default to `default`.
    fn call_context(&self, context: &Context) -> CallContext {
        let handler = &self.handler;
        let services = GuestServices {
            journal: context.journal.clone(),
            indexes: context.indexes.clone(),
            guest: handler.guest.clone(),
            object: Arc::new(Value::Null),
            poster: None,
            posts_logs: false,
            kube: context.kube.clone(),
            recorder: context.recorder.clone(),
            sleeps: None,
            subhandlers: None,
            settings: SettingsAccess {
                settings: context.settings.clone(),
                may_change: handler.spec.kind == HandlerKind::Startup,
            },
            resource: None,
        };
        CallContext::new(handler.spec.id.clone(), None, Arc::new(services))
            .in_pool(Pool::Activities)
    }

    fn cause(
        &self,
        standing: Standing,
        now: DateTime<Utc>,
        memo: Option<String>,
    ) -> runtime::Cause {
        let spec = &self.handler.spec;
        runtime::Cause {
            handler_id: spec.id.clone(),
            kind: spec.kind,
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
            retry: standing.retries,
            started: standing
                .started
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, false),
            runtime_seconds: (now - standing.started)
                .to_std()
                .map_or(0.0, |runtime| runtime.as_secs_f64()),
            param: spec.param.clone(),
            memo,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::execution::{Attempt, RetryPolicy, decide};
    use chrono::TimeDelta;

    /// The decision of an activity that failed arbitrarily (Kopf's default backoff 60 s).
    fn after_failure(policy: &RetryPolicy, retries: u32, runtime_ms: i64) -> Verdict {
        let attempt = Attempt::<Value>::Arbitrary {
            message: "boom".into(),
        };
        decide(
            "Activity 'p'",
            policy,
            retries,
            TimeDelta::milliseconds(runtime_ms),
            attempt,
        )
        .verdict
    }

    #[test]
    fn retries_look_ahead_at_retries_and_timeout() {
        // `retries = 2` means two attempts in all.
        let two = RetryPolicy {
            retries: Some(2),
            backoff: Some(0.1),
            ..RetryPolicy::default()
        };
        assert_eq!(after_failure(&two, 0, 0), Verdict::Retry);
        assert_eq!(after_failure(&two, 1, 0), Verdict::Failure);
        // A retry that would start past the timeout is not made.
        let timed = |backoff: f64| RetryPolicy {
            timeout: Some(1.0),
            backoff: Some(backoff),
            ..RetryPolicy::default()
        };
        assert_eq!(after_failure(&timed(0.4), 0, 500), Verdict::Retry);
        assert_eq!(after_failure(&timed(0.6), 0, 500), Verdict::Failure);
    }
}
