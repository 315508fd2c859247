//! The per-event pipeline of one object (KOPF.md §6.4): indexers first, then
//! the readiness gate, then on.event handlers, then the changing handlers
//! ([`super::changing`]), with the per-object throttling of unexpected errors.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::calls::{self, CallOutcome, Failure};
use super::changes::{self, ChangeSettings, ERROR_DELAYS, Patch};
use super::changing::ChangingHandlers;
use super::discovery::Resource;
use super::guest_api::KnownResources;
use super::indexes::{IndexUpdate, Indexes, Readiness};
use super::memory::{Memories, ObjectMemory};
use super::posting::Poster;
use super::registry::{ErrorsMode, Handler, Kind, ResourceHandlers};
use super::stream::{EventType, ObjectEvent};
use crate::clock::Clock;
use crate::journal::{Journal, Record};
use crate::object_log::object_log;

/// What every stream's events are processed with.
#[derive(Clone)]
pub(crate) struct Processor {
    pub(crate) client: kube::Client,
    pub(crate) indexes: Indexes,
    pub(crate) readiness: Readiness,
    pub(crate) journal: Journal,
    /// Bounds concurrent guest calls across all objects: guest calls are CPU work.
    pub(crate) calls: Arc<Semaphore>,
    /// What the operator remembers about each object between events.
    pub(crate) memories: Memories,
    /// Kopf's persistence settings: annotation prefix, finalizer, consistency timeout.
    pub(crate) changes: Arc<ChangeSettings>,
    /// Handler time: progress records, retries, delays.
    pub(crate) clock: Arc<dyn Clock>,
    /// Kubernetes Events the guests post.
    pub(crate) poster: Poster,
    /// What discovery found last, for the guests' Kubernetes calls.
    pub(crate) known: KnownResources,
    /// Where `--record` writes the host's patches and the guests' Kubernetes calls.
    pub(crate) recorder: crate::recording::Recorder,
}

impl std::fmt::Debug for Processor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processor")
            .field("changes", &self.changes)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// What a stream's events need to know about the stream.
#[derive(Debug)]
pub(crate) struct StreamContext {
    /// Unique per stream, for the readiness gate.
    pub(crate) id: String,
    pub(crate) resource: Arc<Resource>,
    pub(crate) handlers: ResourceHandlers,
    pub(crate) changing: ChangingHandlers,
    /// Cancelled when the stream stops: its objects' timers and daemons stop with it.
    pub(crate) stopping: CancellationToken,
    /// The timer and daemon tasks of the stream's objects, awaited when it stops.
    pub(crate) daemons: TaskTracker,
}

impl StreamContext {
    pub(crate) fn new(
        id: String,
        resource: Arc<Resource>,
        handlers: ResourceHandlers,
        stopping: CancellationToken,
    ) -> Self {
        let changing = ChangingHandlers::new(&handlers.changing);
        StreamContext {
            id,
            resource,
            handlers,
            changing,
            stopping,
            daemons: TaskTracker::new(),
        }
    }
}

/// `namespace/name` (or `name`), as Kopf prefixes object log lines.
pub(crate) fn object_ref(body: &Value) -> String {
    let meta = body.get("metadata");
    let get = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    match get("namespace") {
        "" => get("name").to_owned(),
        ns => format!("{ns}/{}", get("name")),
    }
}

impl Processor {
    pub(crate) async fn process(&self, stream: &Arc<StreamContext>, event: ObjectEvent) {
        let object = object_ref(&event.body);
        // Serialised once, shared by every call for this event.
        let body_json: Arc<str> = Arc::from(event.body.to_string());
        let memory = self.memories.get(&event.key);
        let version = event
            .body
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        let seq = memory.begin_event(version);
        memory
            .state()
            .noticed_by_listing
            .get_or_insert(event.event_type == EventType::Listed);

        self.run_indexers(stream, &event, &object, &body_json).await;
        if event.event_type == EventType::Deleted {
            self.indexes.forget(&event.key);
        }
        if !stream.handlers.index.is_empty() {
            self.readiness.indexed(&stream.id, &event.key);
        }

        let mut patch = Patch::default();
        if !stream.handlers.event.is_empty() {
            if !self.readiness.is_open() {
                object_log!(debug, object, "Waiting for the indexes to be complete.");
                self.readiness.wait().await;
            }
            self.run_event_handlers(stream, &event, &object, &body_json, &mut patch)
                .await;
        }

        if event.event_type == EventType::Deleted {
            memory.daemons.stop_all().await;
            // Nothing to patch: the object is gone (KOPF.md §6.4).
            if !stream.changing.is_empty() {
                object_log!(
                    debug,
                    object,
                    "Deleted, really deleted, and we are notified."
                );
            }
            memory.end_event();
            self.memories.forget(&event.key);
            return;
        }
        let spawning = self
            .matching_daemons(stream, &event, &object, &memory, &body_json)
            .await;
        if changes::is_deletion_ongoing(&event.body) {
            // Stopped before the deletion cycle, which releases the finalizer after them.
            memory.daemons.stop_all().await;
        }
        memory.state().daemons_match = !spawning.is_empty();
        self.handle_with_throttling(stream, &event, &object, &memory, seq, patch)
            .await;
        self.sync_daemons(stream, &event, &object, &memory, &spawning)
            .await;
        memory.end_event();
    }

    /// Runs the changing part (or just sends the on.event results), throttling this
    /// object after unexpected errors (KOPF.md §5.4). Unlike Kopf, which waits for the
    /// object's next event, Kapsel retries the same event once the throttling delay has
    /// passed without a newer event: a failed patch must not leave the object unhandled.
    async fn handle_with_throttling(
        &self,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        memory: &ObjectMemory,
        seq: u64,
        patch: Patch,
    ) {
        loop {
            let result = if stream.changing.is_empty() && stream.handlers.spawning.is_empty() {
                self.send(stream, event, object, memory, patch.clone())
                    .await
                    .map(drop)
            } else {
                self.handle_changes(stream, event, object, memory, seq, patch.clone())
                    .await
            };
            let error = match result {
                Ok(()) => {
                    memory.state().throttler.on_success();
                    return;
                }
                Err(error) => error,
            };
            let delay = memory.state().throttler.on_error(&ERROR_DELAYS);
            let Some(delay) = delay else {
                object_log!(error, object, "Processing failed: {error}");
                return;
            };
            object_log!(
                error,
                object,
                "Throttling for {} seconds due to an unexpected error: {error}",
                delay.as_secs()
            );
            let until = chrono::TimeDelta::from_std(delay)
                .ok()
                .and_then(|d| self.clock.now().checked_add_signed(d))
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
            if memory.idle_unless_newer(seq, &*self.clock, until).await {
                return;
            }
            object_log!(
                info,
                object,
                "Throttling is over. Switching back to normal operations."
            );
        }
    }

    async fn run_event_handlers(
        &self,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        body_json: &Arc<str>,
        patch: &mut Patch,
    ) {
        let mut called: HashSet<(String, String)> = HashSet::new();
        for handler in &stream.handlers.event {
            if !handler.spec.filters.matches_body(&event.body) {
                continue;
            }
            if called.contains(&handler.identity()) {
                continue;
            }
            if !self
                .passes_when(handler, stream, event, object, body_json, None)
                .await
            {
                continue;
            }
            called.insert(handler.identity());
            if let Some(result) = self
                .call_event_handler(handler, stream, event, object, body_json)
                .await
            {
                patch.deliver_result(&handler.spec.id, &result);
            }
        }
    }

    async fn run_indexers(
        &self,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        body: &Arc<str>,
    ) {
        let mut done: HashSet<(String, String)> = HashSet::new();
        for handler in &stream.handlers.index {
            let (guest, id) = handler.identity();
            if event.event_type == EventType::Deleted || !done.insert((guest.clone(), id.clone())) {
                continue;
            }
            if !handler.spec.filters.matches_body(&event.body)
                || !self
                    .passes_when(handler, stream, event, object, body, None)
                    .await
            {
                self.indexes.remove(&guest, &id, &event.key);
                continue;
            }
            if self.indexes.is_excluded(&guest, &id, &event.key) {
                continue;
            }
            self.record_call(handler, stream, event, object);
            let invocation = {
                let _permit = self.calls.acquire().await;
                calls::index(handler, &stream.resource, event, object, body, self).await
            };
            let (update, verdict) = match invocation.outcome {
                CallOutcome::Index(update) => (update, "success"),
                CallOutcome::Failed { error, failure } => {
                    self.record_failure(handler, object, &error);
                    let update = index_update_on_failure(failure, handler);
                    let verdict = match update {
                        IndexUpdate::ExcludeUntil(_) => "retry",
                        IndexUpdate::ExcludeForever => "failure",
                        _ => "ignored",
                    };
                    (update, verdict)
                }
                CallOutcome::Done(_) => (IndexUpdate::Keep, "success"),
            };
            self.record_finished(
                handler,
                object,
                invocation.elapsed,
                verdict,
                invocation.fault,
            );
            self.indexes.apply(&guest, &id, &event.key, update);
        }
    }

    pub(crate) async fn passes_when(
        &self,
        handler: &Handler,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        body: &Arc<str>,
        details: Option<&calls::ChangeDetails>,
    ) -> bool {
        if !handler.spec.has_when {
            return true;
        }
        let _permit = self.calls.acquire().await;
        match calls::when(
            handler,
            &stream.resource,
            event,
            object,
            body,
            details,
            self,
        )
        .await
        {
            Ok(passes) => passes,
            Err(error) => {
                object_log!(
                    error,
                    object,
                    "The `when` filter of handler '{}' failed: {error}",
                    handler.spec.id
                );
                self.record_failure(handler, object, &error);
                false
            }
        }
    }

    /// Calls an on.event handler; returns its result for `status.<id>` (KOPF.md §1.14).
    async fn call_event_handler(
        &self,
        handler: &Handler,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        body: &Arc<str>,
    ) -> Option<Value> {
        debug_assert_eq!(handler.spec.kind, Kind::Event);
        let invocation = self
            .call(handler, stream, event, object, body, None, None)
            .await;
        let (verdict, result) = match invocation.outcome {
            CallOutcome::Done(result) => {
                object_log!(debug, object, "Handler '{}' succeeded.", handler.spec.id);
                let result = result.as_deref().and_then(|r| serde_json::from_str(r).ok());
                ("success", result)
            }
            CallOutcome::Index(_) => ("success", None),
            // on.event handlers are never retried (KOPF.md §1.7).
            CallOutcome::Failed { error, .. } => {
                object_log!(
                    error,
                    object,
                    "Handler '{}' failed: {error}. Will ignore.",
                    handler.spec.id
                );
                self.record_failure(handler, object, &error);
                ("ignored", None)
            }
        };
        self.record_finished(
            handler,
            object,
            invocation.elapsed,
            verdict,
            invocation.fault,
        );
        result
    }

    /// Calls an event or changing handler: recorded in the journal, and within the
    /// bound on concurrent guest calls.
    #[allow(
        clippy::too_many_arguments,
        reason = "the parts of one call; bundling them would only rename them"
    )]
    pub(crate) async fn call(
        &self,
        handler: &Handler,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        body: &Arc<str>,
        details: Option<&calls::ChangeDetails>,
        memo: Option<String>,
    ) -> calls::Invocation {
        self.record_call(handler, stream, event, object);
        // A daemon's call lasts as long as the daemon: it must not hold a permit.
        let _permit = if handler.spec.kind == Kind::Daemon {
            None
        } else {
            Some(self.calls.acquire().await)
        };
        calls::invoke(
            handler,
            &stream.resource,
            event,
            object,
            body,
            details,
            memo,
            self,
        )
        .await
    }

    /// Records how a handler call ended: `success`, `retry`, `failure` or `ignored`.
    pub(crate) fn record_finished(
        &self,
        handler: &Handler,
        object: &str,
        elapsed: std::time::Duration,
        outcome: &str,
        fault: Option<&str>,
    ) {
        self.journal.push(Record::HandlerFinished {
            guest: handler.guest.name().to_owned(),
            handler: handler.spec.id.clone(),
            kind: format!("{:?}", handler.spec.kind).to_lowercase(),
            object: Some(object.to_owned()),
            seconds: elapsed.as_secs_f64(),
            outcome: outcome.to_owned(),
            fault: fault.map(str::to_owned),
        });
    }

    pub(crate) fn record_call(
        &self,
        handler: &Handler,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
    ) {
        self.journal.push(Record::HandlerCalled {
            guest: handler.guest.name().to_owned(),
            handler: handler.spec.id.clone(),
            kind: format!("{:?}", handler.spec.kind).to_lowercase(),
            resource: stream.resource.key(),
            object: object.to_owned(),
            event_type: event.event_type.as_kopf().map(str::to_owned),
        });
    }

    pub(crate) fn record_failure(&self, handler: &Handler, object: &str, error: &str) {
        self.journal.push(Record::HandlerFailed {
            guest: handler.guest.name().to_owned(),
            handler: handler.spec.id.clone(),
            object: object.to_owned(),
            error: error.to_owned(),
        });
    }
}

/// Kopf (§7): explicit temporary/permanent errors take the object out of the
/// index; arbitrary failures follow the handler's errors mode (default: ignored,
/// keeping stale values).
fn index_update_on_failure(failure: Failure, handler: &Handler) -> IndexUpdate {
    let now = std::time::Instant::now();
    match failure {
        Failure::Temporary(delay) => IndexUpdate::ExcludeUntil(now + delay),
        Failure::Permanent => IndexUpdate::ExcludeForever,
        Failure::Arbitrary => match handler.spec.errors_mode() {
            ErrorsMode::Ignored => IndexUpdate::Ignored,
            ErrorsMode::Permanent => IndexUpdate::ExcludeForever,
            ErrorsMode::Temporary => IndexUpdate::ExcludeUntil(now + handler.spec.backoff()),
        },
    }
}
