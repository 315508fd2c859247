//! Guest calls for one object event: building the cause, the services the
//! guest may use during the call, and reading the outcome.

use std::sync::Arc;
use std::time::Duration;

use super::convert;
use super::daemons::DaemonSleeps;
use super::discovery::Resource;
use super::guest_api::GuestApi;
use super::indexes::{IndexUpdate, Indexes};
use super::posting::{self, Poster};
use super::process::Processor;
use super::registry::{Handler, Kind};
use super::stream::{EventType, ObjectEvent};
use crate::activities::{DEFAULT_TEMPORARY_DELAY, seconds_or};
use crate::journal::Journal;
use crate::runtime::{
    self, BoxFuture, CallContext, Caller, GuestEvent, HostServices, KubeError, KubeRequest,
};

/// How a failed call failed, as far as retries and indexes care.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Failure {
    /// The handler asked to be retried after this delay.
    Temporary(Duration),
    /// The handler gave up for good.
    Permanent,
    /// Anything else: an error it returned, a trap, a timeout, a memory overrun.
    Arbitrary,
}

/// What came of a call.
#[derive(Debug)]
pub(crate) enum CallOutcome {
    /// Success, with the handler's result (JSON), if any.
    Done(Option<String>),
    /// An index handler's contribution.
    Index(IndexUpdate),
    Failed {
        error: String,
        failure: Failure,
    },
}

/// What a guest may use during one call: its own indexes; Events (for calls about an
/// object, which is what Events name by default); the Kubernetes calls it declared;
/// for daemons, their sleeps. What it logs goes to the journal. Handlers of objects and
/// activities (probes, startup, cleanup) get the same services, minus what they lack.
pub(crate) struct GuestServices {
    pub(crate) journal: Journal,
    pub(crate) indexes: Indexes,
    /// The poster, and the object of the call for Events that name no other object.
    pub(crate) events: Option<(Poster, Arc<serde_json::Value>)>,
    pub(crate) kube: Option<GuestApi>,
    /// Daemons' sleeps; other handlers are told to stop at once.
    pub(crate) sleeps: Option<DaemonSleeps>,
}

impl HostServices for GuestServices {
    fn log(&self, caller: &Caller, level: runtime::Level, message: &str) {
        self.journal.push_guest_log(caller, level, message);
    }

    fn index_lookup(&self, caller: &Caller, index: &str, key: &str) -> Option<Vec<String>> {
        self.indexes.lookup(&caller.guest, index, key)
    }

    fn index_keys(&self, caller: &Caller, index: &str) -> Vec<String> {
        self.indexes.keys(&caller.guest, index)
    }

    fn post_event<'a>(
        &'a self,
        _caller: &'a Caller,
        event: GuestEvent,
    ) -> BoxFuture<'a, Result<(), KubeError>> {
        let queued = match &self.events {
            Some((poster, body)) => posting::from_guest(body, event)
                .map(|event| poster.post(event))
                .map_err(|message| KubeError::local("Invalid", message)),
            None => Err(runtime::not_available("posting Events")),
        };
        Box::pin(async move { queued })
    }

    fn kube<'a>(
        &'a self,
        caller: &'a Caller,
        request: KubeRequest,
    ) -> BoxFuture<'a, Result<String, KubeError>> {
        match &self.kube {
            Some(kube) => Box::pin(kube.call(caller, request)),
            None => Box::pin(async { Err(runtime::not_available("Kubernetes calls")) }),
        }
    }

    fn sleep_unless_stopped<'a>(
        &'a self,
        _caller: &'a Caller,
        duration: Duration,
    ) -> BoxFuture<'a, bool> {
        match &self.sleeps {
            Some(sleeps) => Box::pin(sleeps.sleep(duration)),
            // Not a daemon: nothing to sleep for.
            None => Box::pin(async { false }),
        }
    }
}

/// What a changing handler's cause carries beyond the event (KOPF.md §1.13).
#[derive(Debug, Clone, Default)]
pub(crate) struct ChangeDetails {
    /// `create`, `update`, `delete`, `resume`.
    pub(crate) reason: String,
    /// JSON: essences, or the field's values for field handlers.
    pub(crate) old: String,
    pub(crate) new: String,
    /// JSON: Kopf's diff, a list of `[op, [path...], old, new]`.
    pub(crate) diff: String,
    /// 0 on the first attempt.
    pub(crate) retry: u32,
    /// RFC 3339 time of the first attempt.
    pub(crate) started: String,
    pub(crate) runtime_seconds: f64,
    /// Daemons: what their `sleep_unless_stopped` sleeps on.
    pub(crate) sleeps: Option<super::daemons::DaemonSleeps>,
}

fn cause(
    handler: &Handler,
    resource: &Resource,
    event: &ObjectEvent,
    body: &Arc<str>,
    details: Option<&ChangeDetails>,
    memo: Option<String>,
) -> runtime::Cause {
    let started = details.map_or_else(
        || chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, false),
        |d| d.started.clone(),
    );
    runtime::Cause {
        handler_id: handler.spec.id.clone(),
        kind: convert::wit_kind(handler.spec.kind),
        resource: runtime::Resource {
            group: resource.group.clone(),
            version: resource.version.clone(),
            plural: resource.plural.clone(),
            kind: resource.kind.clone(),
            namespaced: resource.namespaced,
        },
        event_type: match event.event_type {
            EventType::Listed => None,
            EventType::Added => Some(runtime::EventType::Added),
            EventType::Modified => Some(runtime::EventType::Modified),
            EventType::Deleted => Some(runtime::EventType::Deleted),
        },
        // Timers carry retry and time details but no reason and no change.
        reason: details.map(|d| d.reason.clone()).filter(|r| !r.is_empty()),
        body: body.to_string(),
        old: details.map(|d| d.old.clone()).filter(|v| !v.is_empty()),
        new: details.map(|d| d.new.clone()).filter(|v| !v.is_empty()),
        diff: details.map(|d| d.diff.clone()).filter(|v| !v.is_empty()),
        retry: details.map_or(0, |d| d.retry),
        started,
        runtime_seconds: details.map_or(0.0, |d| d.runtime_seconds),
        param: handler.spec.param.clone(),
        memo,
    }
}

fn context(
    handler: &Handler,
    event: &ObjectEvent,
    object: &str,
    processor: &Processor,
    details: Option<&ChangeDetails>,
) -> CallContext {
    CallContext::new(
        handler.spec.id.clone(),
        Some(object.to_owned()),
        Arc::new(GuestServices {
            indexes: processor.indexes.clone(),
            journal: processor.journal.clone(),
            events: Some((processor.poster.clone(), event.body.clone())),
            kube: Some(GuestApi::new(
                processor.client.clone(),
                processor.known.clone(),
                handler.guest.clone(),
                event.body.clone(),
                processor.recorder.clone(),
            )),
            sleeps: details.and_then(|d| d.sleeps.clone()),
        }),
    )
    .long_running(handler.spec.kind == Kind::Daemon)
}

fn delay(seconds: f64) -> Duration {
    seconds_or(seconds, DEFAULT_TEMPORARY_DELAY)
}

/// What one call of an event or changing handler produced.
#[derive(Debug)]
pub(crate) struct Invocation {
    pub(crate) outcome: CallOutcome,
    /// The handler's merge-patch for its object, JSON.
    pub(crate) patch: Option<String>,
    /// The memo for later calls, JSON.
    pub(crate) memo: Option<String>,
    /// What the sandbox stopped, if anything: `trap`, `timeout` or `memory`.
    pub(crate) fault: Option<&'static str>,
    /// How long the call took.
    pub(crate) elapsed: Duration,
}

/// Calls an event or changing handler.
#[allow(
    clippy::too_many_arguments,
    reason = "the parts of one call; bundling them would only rename them"
)]
pub(crate) async fn invoke(
    handler: &Handler,
    resource: &Resource,
    event: &ObjectEvent,
    object: &str,
    body: &Arc<str>,
    details: Option<&ChangeDetails>,
    memo: Option<String>,
    processor: &Processor,
) -> Invocation {
    let cause = cause(handler, resource, event, body, details, memo);
    let started = std::time::Instant::now();
    let result = handler
        .guest
        .invoke(cause, context(handler, event, object, processor, details))
        .await;
    let elapsed = started.elapsed();
    match result {
        Ok(reply) => Invocation {
            outcome: match reply.outcome {
                runtime::Outcome::Done(result) => CallOutcome::Done(result),
                runtime::Outcome::Temporary((message, seconds)) => {
                    failed(message, Failure::Temporary(delay(seconds)))
                }
                runtime::Outcome::Permanent(message) => failed(message, Failure::Permanent),
                runtime::Outcome::Failed(message) => failed(message, Failure::Arbitrary),
            },
            patch: reply.patch,
            memo: reply.memo,
            fault: None,
            elapsed,
        },
        Err(error) => Invocation {
            fault: crate::metrics::sandbox_fault(&error),
            outcome: failed(error.to_string(), Failure::Arbitrary),
            patch: None,
            memo: None,
            elapsed,
        },
    }
}

fn failed(error: String, failure: Failure) -> CallOutcome {
    CallOutcome::Failed { error, failure }
}

/// Calls an index handler.
pub(crate) async fn index(
    handler: &Handler,
    resource: &Resource,
    event: &ObjectEvent,
    object: &str,
    body: &Arc<str>,
    processor: &Processor,
) -> Invocation {
    let cause = cause(handler, resource, event, body, None, None);
    let started = std::time::Instant::now();
    let result = handler
        .guest
        .index(cause, context(handler, event, object, processor, None))
        .await;
    let elapsed = started.elapsed();
    let mut fault = None;
    let outcome = match result {
        Ok(runtime::IndexOutcome::Keep) => CallOutcome::Index(IndexUpdate::Keep),
        Ok(runtime::IndexOutcome::Entries(entries)) => {
            CallOutcome::Index(IndexUpdate::Entries(entries))
        }
        Ok(runtime::IndexOutcome::Temporary((message, seconds))) => {
            failed(message, Failure::Temporary(delay(seconds)))
        }
        Ok(runtime::IndexOutcome::Permanent(message)) => failed(message, Failure::Permanent),
        Ok(runtime::IndexOutcome::Failed(message)) => failed(message, Failure::Arbitrary),
        Err(error) => {
            fault = crate::metrics::sandbox_fault(&error);
            failed(error.to_string(), Failure::Arbitrary)
        }
    };
    Invocation {
        outcome,
        patch: None,
        memo: None,
        fault,
        elapsed,
    }
}

/// Evaluates a handler's `when` filter in the guest (changing handlers' filters also
/// see the reason, old, new and diff).
pub(crate) async fn when(
    handler: &Handler,
    resource: &Resource,
    event: &ObjectEvent,
    object: &str,
    body: &Arc<str>,
    details: Option<&ChangeDetails>,
    processor: &Processor,
) -> Result<bool, String> {
    let cause = cause(handler, resource, event, body, details, None);
    handler
        .guest
        .when(cause, context(handler, event, object, processor, details))
        .await
        .map_err(|e| e.to_string())
}
