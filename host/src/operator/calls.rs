//! Guest calls for one object event: building the cause, the services the
//! guest may use during the call, and reading the outcome.

use std::sync::Arc;
use std::time::Duration;

use super::convert;
use super::discovery::Resource;
use super::indexes::{IndexUpdate, Indexes};
use super::process::Processor;
use super::registry::Handler;
use super::stream::{EventType, ObjectEvent};
use crate::journal::{Journal, Record};
use crate::runtime::{self, CallContext, Caller, HostServices};

/// Kopf's default delay of a `TemporaryError` without an explicit one.
pub(crate) const DEFAULT_TEMPORARY_DELAY: Duration = Duration::from_secs(60);

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

/// The services a guest may use while handling one object: its own indexes;
/// and what it logs goes to the journal.
struct ObjectServices {
    indexes: Indexes,
    journal: Journal,
}

impl HostServices for ObjectServices {
    fn log(&self, caller: &Caller, level: runtime::Level, message: &str) {
        let level = match level {
            runtime::Level::Debug => "debug",
            runtime::Level::Info => "info",
            runtime::Level::Warning => "warning",
            runtime::Level::Error => "error",
        };
        self.journal.push(Record::GuestLog {
            guest: caller.guest.to_string(),
            handler: caller.handler_id.clone(),
            object: caller.object.clone(),
            level: level.to_owned(),
            message: message.to_owned(),
        });
    }

    fn index_lookup(&self, caller: &Caller, index: &str, key: &str) -> Option<Vec<String>> {
        self.indexes.lookup(&caller.guest, index, key)
    }

    fn index_keys(&self, caller: &Caller, index: &str) -> Vec<String> {
        self.indexes.keys(&caller.guest, index)
    }
}

fn cause(
    handler: &Handler,
    resource: &Resource,
    event: &ObjectEvent,
    body: &Arc<str>,
) -> runtime::Cause {
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
        reason: None,
        body: body.to_string(),
        old: None,
        new: None,
        diff: None,
        retry: 0,
        started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, false),
        runtime_seconds: 0.0,
        param: handler.spec.param.clone(),
        memo: None,
    }
}

fn context(handler: &Handler, object: &str, processor: &Processor) -> CallContext {
    CallContext::new(
        handler.spec.id.clone(),
        Some(object.to_owned()),
        Arc::new(ObjectServices {
            indexes: processor.indexes.clone(),
            journal: processor.journal.clone(),
        }),
    )
}

fn delay(seconds: f64) -> Duration {
    if seconds.is_finite() && seconds >= 0.0 {
        Duration::try_from_secs_f64(seconds).unwrap_or(DEFAULT_TEMPORARY_DELAY)
    } else {
        DEFAULT_TEMPORARY_DELAY
    }
}

/// Calls an event (or, later, changing) handler.
pub(crate) async fn invoke(
    handler: &Handler,
    resource: &Resource,
    event: &ObjectEvent,
    object: &str,
    body: &Arc<str>,
    processor: &Processor,
) -> CallOutcome {
    let cause = cause(handler, resource, event, body);
    match handler
        .guest
        .invoke(cause, context(handler, object, processor))
        .await
    {
        Ok(reply) => match reply.outcome {
            runtime::Outcome::Done(result) => CallOutcome::Done(result),
            runtime::Outcome::Temporary((message, seconds)) => {
                failed(message, Failure::Temporary(delay(seconds)))
            }
            runtime::Outcome::Permanent(message) => failed(message, Failure::Permanent),
            runtime::Outcome::Failed(message) => failed(message, Failure::Arbitrary),
        },
        Err(error) => failed(error.to_string(), Failure::Arbitrary),
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
) -> CallOutcome {
    let cause = cause(handler, resource, event, body);
    match handler
        .guest
        .index(cause, context(handler, object, processor))
        .await
    {
        Ok(runtime::IndexOutcome::Keep) => CallOutcome::Index(IndexUpdate::Keep),
        Ok(runtime::IndexOutcome::Entries(entries)) => {
            CallOutcome::Index(IndexUpdate::Entries(entries))
        }
        Ok(runtime::IndexOutcome::Temporary((message, seconds))) => {
            failed(message, Failure::Temporary(delay(seconds)))
        }
        Ok(runtime::IndexOutcome::Permanent(message)) => failed(message, Failure::Permanent),
        Ok(runtime::IndexOutcome::Failed(message)) => failed(message, Failure::Arbitrary),
        Err(error) => failed(error.to_string(), Failure::Arbitrary),
    }
}

/// Evaluates a handler's `when` filter in the guest.
pub(crate) async fn when(
    handler: &Handler,
    resource: &Resource,
    event: &ObjectEvent,
    object: &str,
    body: &Arc<str>,
    processor: &Processor,
) -> Result<bool, String> {
    let cause = cause(handler, resource, event, body);
    handler
        .guest
        .when(cause, context(handler, object, processor))
        .await
        .map_err(|e| e.to_string())
}
