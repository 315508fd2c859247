//! The handling of one object event (KOPF.md §6.4), stage by stage: the index handlers
//! first (`indexing`, with the readiness gate), then the raw event handlers (`events`),
//! then the changing handlers (`changing`), then the timers and daemons that match
//! (`daemons`, each task a `ticker`). Every stage calls guests through `calls`; an
//! unexpected error throttles the object, a write that lost a race is made again.

mod calls;
mod changing;
mod daemons;
mod events;
mod indexing;
mod ticker;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::{self, Clock};
use crate::cluster::{KubeAccess, Poster, RequestError, Resource, wire};
use crate::handlers::{ResourceHandlers, Stopper};
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::object_log::object_log;
use crate::reactor::changes::{self, Patch};
use crate::reactor::objects::{
    EventType, Memories, ObjectEvent, ObjectMemory, QueuedEvent, Streak, TurnPermit, Turns,
    object_ref,
};
use crate::reactor::patching::Patcher;
use crate::reactor::{Settings, Shared};
use crate::runtime::StopReasons;
use calls::Calls;
use changing::{Changing, ChangingHandlers};
use daemons::Daemons;
use events::Events;
use indexing::Indexing;

pub(crate) use indexing::Readiness;

/// The handlers that serve a stream's objects: replaced as a whole when guests are
/// reloaded, and read once per event, so that one event is handled by one set.
#[derive(Debug, Default)]
pub(crate) struct StreamHandlers {
    pub(crate) resource: ResourceHandlers,
    pub(crate) changing: ChangingHandlers,
    /// Whether a handler's field (its filter's, or a field handler's) reaches into
    /// `metadata.managedFields`, which the stages otherwise parse no body with
    /// ([`QueuedEvent::parsed`]).
    reads_managed_fields: bool,
}

impl StreamHandlers {
    pub(crate) fn new(resource: ResourceHandlers) -> StreamHandlers {
        let changing = ChangingHandlers::new(&resource.changing);
        let reads_managed_fields = resource
            .all()
            .filter_map(|handler| handler.spec.filters.field.as_deref())
            .any(|field| {
                // `metadata` whole, or the member, or something in it.
                field
                    .iter()
                    .zip(wire::UNREAD_MEMBER)
                    .all(|(step, unread)| step == unread)
            });
        StreamHandlers {
            resource,
            changing,
            reads_managed_fields,
        }
    }
}

/// What a stream's events need to know about the stream.
#[derive(Debug)]
pub(crate) struct StreamContext {
    /// Unique per stream, for the readiness gate.
    pub(crate) id: String,
    pub(crate) resource: Arc<Resource>,
    /// The handlers serving it now; the stream follows their changes (see `streams`).
    handlers: watch::Sender<Arc<StreamHandlers>>,
    /// Cancelled when the stream stops: its objects' timers and daemons stop with it.
    pub(crate) stopping: CancellationToken,
    /// Why it stops (the bits of `StopReasons`), set before `stopping` is cancelled.
    stop_reasons: Arc<AtomicU8>,
    /// The timer and daemon tasks of the stream's objects, awaited when it stops.
    pub(crate) tasks: TaskTracker,
    /// The turns its objects take to be handled (`objects::memory`).
    pub(crate) turns: Turns,
}

impl StreamContext {
    pub(crate) fn new(
        id: String,
        resource: Arc<Resource>,
        handlers: ResourceHandlers,
        stopping: CancellationToken,
        turns: Turns,
    ) -> Self {
        StreamContext {
            id,
            resource,
            handlers: watch::Sender::new(Arc::new(StreamHandlers::new(handlers))),
            stopping,
            stop_reasons: Arc::default(),
            tasks: TaskTracker::new(),
            turns,
        }
    }

    /// The handlers serving the stream now.
    pub(crate) fn handlers(&self) -> Arc<StreamHandlers> {
        self.handlers.borrow().clone()
    }

    /// Serves the stream's next events with these handlers (guests were reloaded).
    pub(crate) fn replace_handlers(&self, handlers: ResourceHandlers) {
        self.handlers
            .send_replace(Arc::new(StreamHandlers::new(handlers)));
    }

    /// The stream is about to stop for `reason`: its timers and daemons are told so.
    pub(crate) fn stops_because(&self, reason: StopReasons) {
        self.stop_reasons.fetch_or(reason.bits(), Ordering::SeqCst);
    }

    /// The stop of a timer or daemon of one of its objects (stopped too when it stops).
    pub(crate) fn stopper(&self) -> Stopper {
        Stopper::new(&self.stopping, self.stop_reasons.clone())
    }

    /// Tells when the handlers are replaced.
    pub(crate) fn handler_changes(&self) -> watch::Receiver<Arc<StreamHandlers>> {
        self.handlers.subscribe()
    }
}

/// One event of one object, as every stage sees it.
pub(crate) struct EventContext<'a> {
    pub(crate) stream: &'a StreamContext,
    /// The stream's handlers when the event's handling began.
    pub(crate) handlers: Arc<StreamHandlers>,
    pub(crate) event: &'a ObjectEvent,
    /// `namespace/name` (or `name`), as log lines name the object.
    pub(crate) object: &'a str,
    /// The resource's key, as the journal names it.
    pub(crate) resource_key: String,
    /// The body as JSON, serialised once for every call about this event.
    pub(crate) body: Arc<str>,
}

impl<'a> EventContext<'a> {
    pub(crate) fn new(stream: &'a StreamContext, event: &'a ObjectEvent, object: &'a str) -> Self {
        EventContext {
            stream,
            handlers: stream.handlers(),
            event,
            object,
            resource_key: stream.resource.key(),
            body: event.text.clone(),
        }
    }
}

/// The stages, built once and shared by every stream (cheap to clone).
#[derive(Clone)]
pub(crate) struct Handling {
    indexing: Indexing,
    events: Events,
    changing: Changing,
    daemons: Daemons,
    /// What the operator remembers about each object between events.
    memories: Memories,
    /// Handler time, for the throttling delays.
    clock: Arc<dyn Clock>,
    /// When objects that re-trigger themselves are backed off.
    limits: Arc<Limits>,
    metrics: Metrics,
    /// Calls, for the Events the operator posts about looping objects.
    calls: Calls,
    /// The pauses of an object whose processing keeps failing.
    error_delays: Arc<[Duration]>,
}

impl Handling {
    /// The stages of an operator with these settings, on `client`, posting through `poster`.
    pub(crate) fn new(
        client: kube::Client,
        poster: Poster,
        settings: &Settings,
        shared: &Shared,
    ) -> Handling {
        let calls = Calls::new(
            shared.journal.clone(),
            shared.indexes.clone(),
            poster.clone(),
            KubeAccess::new(
                client.clone(),
                shared.known.clone(),
                settings.scope.clone(),
                shared.traffic.clone(),
            ),
            shared.recorder.clone(),
            shared.clock.clone(),
        )
        .with_operator_memo(shared.memo.clone())
        .with_settings(shared.settings.clone())
        .with_metrics(shared.metrics.clone());
        let patcher = Patcher {
            client,
            retries: settings.retries.clone(),
            recorder: shared.recorder.clone(),
            poster,
        };
        let changes = Arc::new(settings.changes.clone());
        Handling {
            indexing: Indexing {
                calls: calls.clone(),
                readiness: Readiness::default(),
            },
            events: Events {
                calls: calls.clone(),
            },
            changing: Changing {
                calls: calls.clone(),
                patcher: patcher.clone(),
                settings: changes.clone(),
                clock: shared.clock.clone(),
            },
            daemons: Daemons {
                calls: calls.clone(),
                patcher,
                clock: shared.clock.clone(),
                settings: changes,
            },
            memories: shared.memories.clone(),
            clock: shared.clock.clone(),
            limits: settings.limits.clone(),
            metrics: shared.metrics.clone(),
            calls,
            error_delays: settings.error_delays.clone(),
        }
    }

    /// The gate that holds handlers back until the indexes are complete.
    pub(crate) fn readiness(&self) -> &Readiness {
        &self.indexing.readiness
    }

    /// What the operator remembers about each object.
    pub(crate) fn memories(&self) -> &Memories {
        &self.memories
    }

    /// Handles one event of an object, through every stage.
    /// `turn`: the turn its worker started with, if any.
    pub(crate) async fn process(
        &self,
        stream: &Arc<StreamContext>,
        event: QueuedEvent,
        turn: Option<TurnPermit>,
    ) {
        let memory = self.memories.get(&event.key);
        if let Some(turn) = turn {
            memory.hand_turn(turn);
        }
        // Before anything is built for the event: an object waiting for its turn holds
        // only its event (the body as text), and this small future. The parsed body and
        // the handling's own future, tens of KiB (all its stages' states), are allocated
        // once the turn is taken.
        let _turn = memory.take_turn(&stream.turns).await;
        let whole = stream.handlers().reads_managed_fields;
        Box::pin(self.process_in_turn(stream, event.parsed(whole), &memory)).await;
    }

    async fn process_in_turn(
        &self,
        stream: &Arc<StreamContext>,
        event: ObjectEvent,
        memory: &Arc<ObjectMemory>,
    ) {
        let object = object_ref(&event.body);
        let ctx = EventContext::new(stream, &event, &object);
        let version = event
            .body
            .pointer("/metadata/resourceVersion")
            .and_then(serde_json::Value::as_str);
        let seq = memory.begin_event(version);
        // Waiting for our own patch to come back: this event is (part of) it.
        let (echo, writes) = memory.event_arrived(event.event_type == EventType::Listed);
        let waited = if echo {
            match self.back_off(&ctx, memory, seq).await {
                Some(waited) => waited,
                None => {
                    // A newer event came meanwhile: it carries the fresher state.
                    memory.end_event();
                    return;
                }
            }
        } else {
            Duration::ZERO
        };

        self.indexing.run(&ctx).await;

        let mut patch = Patch::default();
        if !ctx.handlers.resource.event.is_empty() {
            let readiness = &self.indexing.readiness;
            if !readiness.is_open() {
                object_log!(debug, object, "Waiting for the indexes to be complete.");
                // Outside its turn: the objects still to be indexed need turns.
                memory.waits_outside_its_turn(readiness.wait()).await;
            }
            self.events.run(&ctx, memory, &mut patch).await;
        }

        // Calls made from now on, and timers and daemons running, see this body (Kopf's
        // live body of daemons).
        memory.tasks.refresh(&event);
        if event.event_type == EventType::Deleted {
            memory.tasks.stop_all(StopReasons::RESOURCE_DELETED).await;
            // Nothing to patch: the object is gone (KOPF.md §6.4).
            if !ctx.handlers.changing.is_empty() {
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
        let spawning = self.daemons.matching(&ctx, memory).await;
        if changes::is_deletion_ongoing(&event.body) {
            // Stopped before the deletion cycle, which releases the finalizer after them.
            memory.tasks.stop_all(StopReasons::RESOURCE_DELETED).await;
        }
        memory.set_daemons_match(!spawning.is_empty());
        self.handle_with_throttling(&ctx, memory, seq, patch).await;
        self.note_writes(&ctx, memory, (echo, waited), writes);
        self.daemons.sync(stream, &ctx, memory, &spawning).await;
        memory.end_event();
    }

    /// Waits before handling an echo of an object whose handlers keep re-triggering
    /// themselves: how long it waited, or `None` when a newer event came meanwhile.
    async fn back_off(
        &self,
        ctx: &EventContext<'_>,
        memory: &ObjectMemory,
        seq: u64,
    ) -> Option<Duration> {
        let limits = &*self.limits;
        let backoff =
            memory.self_trigger_backoff(limits.min_retry_delay, limits.self_trigger_limit);
        let Some(delay) = backoff else {
            return Some(Duration::ZERO);
        };
        object_log!(
            debug,
            ctx.object,
            "Backing off for {} seconds: its handlers re-trigger themselves.",
            delay.as_secs_f64()
        );
        let until = clock::after(self.clock.now(), delay);
        let newer = memory.idle_unless_newer(seq, &*self.clock, until).await;
        (!newer).then_some(delay)
    }

    /// Counts the operator's write for the event (if it wrote), and reports an object
    /// whose handlers re-trigger themselves through their own patches.
    fn note_writes(
        &self,
        ctx: &EventContext<'_>,
        memory: &ObjectMemory,
        (echo, waited): (bool, Duration),
        writes: u64,
    ) {
        let limits = &*self.limits;
        // Half the shortest retry delay: a handler retried after a delay writes once
        // right after its echo and once when the delay is over, and so is no loop; a
        // loop writes right after every echo.
        let quick = (limits.min_retry_delay / 2, limits.self_trigger_limit);
        let (streak, patched_by) = memory.note_writes(writes, (echo, waited), quick);
        let handlers = match patched_by.as_slice() {
            [] => "its handlers".to_owned(),
            ids => format!("handlers {}", ids.join(", ")),
        };
        match streak {
            Streak::Quiet => {}
            Streak::Reached(count) => {
                let message = format!(
                    "The object's {handlers} re-trigger themselves through their own patches: \
                     {count} writes in a row, each within {} s of the last. Handling is backed \
                     off until they stop (--self-trigger-limit).",
                    (limits.min_retry_delay / 2).as_secs_f64()
                );
                object_log!(warn, ctx.object, "{message}");
                self.metrics.self_trigger_backoff(&ctx.resource_key);
                self.calls.warn_about(ctx, "SelfTriggering", message);
            }
            Streak::Ended => object_log!(
                info,
                ctx.object,
                "Its handlers no longer re-trigger themselves: back to normal handling."
            ),
        }
    }

    /// Runs the changing part (or just sends the on.event results), throttling this
    /// object after unexpected errors (KOPF.md §5.4). Unlike Kopf, which waits for the
    /// object's next event, Kapsel retries the same event once the throttling delay has
    /// passed without a newer event: a failed patch must not leave the object unhandled.
    /// A write that lost a race with another is no unexpected error (`after_lost_race`).
    async fn handle_with_throttling(
        &self,
        ctx: &EventContext<'_>,
        memory: &ObjectMemory,
        seq: u64,
        patch: Patch,
    ) {
        let object = ctx.object;
        let handlers = &ctx.handlers;
        // Without changing handlers, timers or daemons there is no cycle to run, unless
        // the object carries the finalizer of handlers a reload took away: the cycle
        // releases it (Kopf does when it next handles the object).
        let cycle = !handlers.changing.is_empty()
            || !handlers.resource.spawning.is_empty()
            || changes::is_deletion_blocked(&ctx.event.body, self.changing.settings.finalizer());
        // The previous attempt lost a race (see `lost_race` below).
        let mut raced = false;
        loop {
            let result = if !cycle {
                self.changing
                    .send(ctx, memory, patch.clone())
                    .await
                    .map(drop)
            } else {
                self.changing.handle(ctx, memory, seq, patch.clone()).await
            };
            let error = match result {
                Ok(()) => {
                    memory.unthrottle();
                    return;
                }
                Err(error) => error,
            };
            if error.lost_race() {
                match self
                    .after_lost_race(ctx, memory, seq, (&error, raced))
                    .await
                {
                    Again::Now => {
                        raced = true;
                        continue;
                    }
                    Again::Later => return,
                    Again::Unexpected => {}
                }
            }
            raced = false;
            let delay = memory.throttle(&self.error_delays);
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
            let until = clock::after(self.clock.now(), delay);
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

    /// After a write of the object lost a race with another write of it (a guest's, an
    /// other controller's; `RequestError::lost_race`): expected, so logged at debug and
    /// not throttled. The object is handled again at once, as Kopf does in its next
    /// cycle: with its newer version when that has arrived (`Later`: its event is next),
    /// else with the same version once more (`Now`) after a conflict, which the same
    /// write may well pass a moment later. A failed version test cannot pass against the
    /// same version: the newer one, written already, is waited for (for at most the
    /// first of `queueing.error_delays`). A race lost again right after is no longer
    /// taken as one (`Unexpected`): what keeps failing is an error.
    async fn after_lost_race(
        &self,
        ctx: &EventContext<'_>,
        memory: &ObjectMemory,
        seq: u64,
        (error, raced): (&RequestError, bool),
    ) -> Again {
        if raced {
            return Again::Unexpected;
        }
        let at_once = error.status() == Some(409);
        object_log!(
            debug,
            ctx.object,
            "The object changed meanwhile ({error}); handling it again {}.",
            if at_once {
                "at once"
            } else {
                "with its newer version"
            }
        );
        if memory.has_newer(seq) {
            return Again::Later;
        }
        if at_once {
            return Again::Now;
        }
        // Without error delays, nothing is retried after a while: the newer version's
        // event, on its way, handles the object.
        let Some(wait) = self.error_delays.first().copied() else {
            return Again::Later;
        };
        let until = clock::after(self.clock.now(), wait);
        if memory.idle_unless_newer(seq, &*self.clock, until).await {
            Again::Later
        } else {
            Again::Now
        }
    }
}

/// When an object whose write lost a race is handled again.
enum Again {
    /// Now, with the same event.
    Now,
    /// With its next event, already queued or on its way.
    Later,
    /// As after any unexpected error: it lost a race again.
    Unexpected,
}
