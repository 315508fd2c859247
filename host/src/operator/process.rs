//! The per-event pipeline of one object (KOPF.md §6.4): indexers first, then
//! the readiness gate, then on.event handlers.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Semaphore;

use super::calls::{self, CallOutcome, Failure};
use super::discovery::Resource;
use super::indexes::{IndexUpdate, Indexes, Readiness};
use super::registry::{ErrorsMode, Handler, Kind, ResourceHandlers};
use super::stream::{EventType, ObjectEvent};
use crate::journal::{Journal, Record};

/// What every stream's events are processed with.
#[derive(Debug, Clone)]
pub(crate) struct Processor {
    pub(crate) indexes: Indexes,
    pub(crate) readiness: Readiness,
    pub(crate) journal: Journal,
    /// Bounds concurrent guest calls across all objects: guest calls are CPU work.
    pub(crate) calls: Arc<Semaphore>,
}

/// What a stream's events need to know about the stream.
#[derive(Debug)]
pub(crate) struct StreamContext {
    /// Unique per stream, for the readiness gate.
    pub(crate) id: String,
    pub(crate) resource: Arc<Resource>,
    pub(crate) handlers: ResourceHandlers,
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
    pub(crate) async fn process(&self, stream: &StreamContext, event: ObjectEvent) {
        let object = object_ref(&event.body);
        // Serialised once, shared by every call for this event.
        let body_json: Arc<str> = Arc::from(event.body.to_string());

        self.run_indexers(stream, &event, &object, &body_json).await;
        if event.event_type == EventType::Deleted {
            self.indexes.forget(&event.key);
        }
        if !stream.handlers.index.is_empty() {
            self.readiness.indexed(&stream.id, &event.key);
        }

        if stream.handlers.event.is_empty() {
            return;
        }
        if !self.readiness.is_open() {
            tracing::debug!("[{object}] Waiting for the indexes to be complete.");
            self.readiness.wait().await;
        }
        let mut called: HashSet<(String, String)> = HashSet::new();
        for handler in &stream.handlers.event {
            if !handler.spec.filters.matches_body(&event.body) {
                continue;
            }
            if called.contains(&handler.identity()) {
                continue;
            }
            if !self
                .passes_when(handler, stream, &event, &object, &body_json)
                .await
            {
                continue;
            }
            called.insert(handler.identity());
            self.call_event_handler(handler, stream, &event, &object, &body_json)
                .await;
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
                || !self.passes_when(handler, stream, event, object, body).await
            {
                self.indexes.remove(&guest, &id, &event.key);
                continue;
            }
            if self.indexes.is_excluded(&guest, &id, &event.key) {
                continue;
            }
            self.record_call(handler, stream, event, object);
            let outcome = {
                let _permit = self.calls.acquire().await;
                calls::index(handler, &stream.resource, event, object, body, self).await
            };
            let update = match outcome {
                CallOutcome::Index(update) => update,
                CallOutcome::Failed { error, failure } => {
                    self.record_failure(handler, object, &error);
                    index_update_on_failure(failure, handler)
                }
                CallOutcome::Done(_) => IndexUpdate::Keep,
            };
            self.indexes.apply(&guest, &id, &event.key, update);
        }
    }

    async fn passes_when(
        &self,
        handler: &Handler,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        body: &Arc<str>,
    ) -> bool {
        if !handler.spec.has_when {
            return true;
        }
        let _permit = self.calls.acquire().await;
        match calls::when(handler, &stream.resource, event, object, body, self).await {
            Ok(passes) => passes,
            Err(error) => {
                tracing::error!(
                    "[{object}] The `when` filter of handler '{}' failed: {error}",
                    handler.spec.id
                );
                self.record_failure(handler, object, &error);
                false
            }
        }
    }

    async fn call_event_handler(
        &self,
        handler: &Handler,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        body: &Arc<str>,
    ) {
        debug_assert_eq!(handler.spec.kind, Kind::Event);
        self.record_call(handler, stream, event, object);
        let outcome = {
            let _permit = self.calls.acquire().await;
            calls::invoke(handler, &stream.resource, event, object, body, self).await
        };
        match outcome {
            CallOutcome::Done(result) => {
                // Kopf stores on.event results in `status.<id>`; that arrives with change handling.
                tracing::debug!(
                    "[{object}] Handler '{}' succeeded (result: {result:?}).",
                    handler.spec.id
                );
            }
            CallOutcome::Index(_) => {
                tracing::debug!("[{object}] Handler '{}' succeeded.", handler.spec.id);
            }
            // on.event handlers are never retried (KOPF.md §1.7).
            CallOutcome::Failed { error, .. } => {
                tracing::error!(
                    "[{object}] Handler '{}' failed: {error}. Will ignore.",
                    handler.spec.id
                );
                self.record_failure(handler, object, &error);
            }
        }
    }

    fn record_call(
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

    fn record_failure(&self, handler: &Handler, object: &str, error: &str) {
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
