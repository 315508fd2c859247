//! [`Daemons`]: the timers and daemons of an object's event (KOPF.md §1.9, §1.10; Kopf's
//! "spawning" handlers): one task per object and handler (a `Ticker`), running while
//! the object exists, matches the handler's filters and is not being deleted.
//!
//! Tasks are started after the object carries the finalizer (they require it, KOPF.md
//! §4.6), and stopped when the object is being deleted or deleted, when the filters stop
//! matching, and when their stream stops (pausing, exiting), each time with that reason
//! for the call to read. A stop interrupts no call by itself: a daemon's sleeps return
//! `false` at once, and the task ends when the call has returned (or at its deadline),
//! unless a daemon's cancellation timeout is over first: then its call is abandoned
//! (see `ticker`). Everything that decides on time goes through the
//! operator's clock, so `kapsel test` advances timers and daemons like any handler time.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::runtime::StopReasons;

use super::calls::Calls;
use super::ticker::Ticker;
use super::{EventContext, StreamContext};
use crate::clock::Clock;
use crate::handlers::{Handler, TaskProgress};
use crate::reactor::changes::{self, ChangeSettings};
use crate::reactor::objects::{ObjectMemory, RunningTask};
use crate::reactor::patching::Patcher;

/// The timer and daemon stage.
#[derive(Clone)]
pub(crate) struct Daemons {
    pub(super) calls: Calls,
    pub(super) patcher: Patcher,
    pub(super) clock: Arc<dyn Clock>,
    /// The operator's annotation prefix (not a change for `idle`) and finalizer.
    pub(super) settings: Arc<ChangeSettings>,
}

impl Daemons {
    /// The timers and daemons whose filters match the object, daemons that exited for
    /// good left out (deletion aside: a deleted object keeps needing the finalizer until
    /// its tasks have stopped).
    pub(super) async fn matching(
        &self,
        ctx: &EventContext<'_>,
        memory: &ObjectMemory,
    ) -> Vec<Arc<Handler>> {
        let mut matching = Vec::new();
        for handler in &ctx.handlers.resource.spawning {
            if memory.tasks.has_exited(handler) {
                continue;
            }
            if handler.spec.filters.matches_body(&ctx.event.body)
                && self.calls.passes_when(handler, ctx, None).await
            {
                matching.push(handler.clone());
            }
        }
        matching
    }

    /// Starts the timers and daemons that match and are not running, and stops the
    /// others — also those of handlers a reload took away or replaced. They start only
    /// once the object carries the finalizer, and never while it is being deleted.
    pub(super) async fn sync(
        &self,
        stream: &Arc<StreamContext>,
        ctx: &EventContext<'_>,
        memory: &Arc<ObjectMemory>,
        matching: &[Arc<Handler>],
    ) {
        let tasks = &memory.tasks;
        if ctx.handlers.resource.spawning.is_empty() && tasks.is_empty() {
            return;
        }
        let changed = tasks.observe(
            ctx.event,
            |fingerprint| self.settings.strip_bookkeeping(fingerprint),
            self.clock.now(),
        );
        let body = &ctx.event.body;
        if changes::is_deletion_ongoing(body) {
            tasks.stop_all(StopReasons::RESOURCE_DELETED).await;
            return;
        }
        // A handler a reload took away or replaced matches no more either.
        tasks
            .stop_where(
                |running| matching.iter().any(|h| h.same_as(running)),
                StopReasons::FILTERS_MISMATCH,
            )
            .await;
        if !changes::is_deletion_blocked(body, self.settings.finalizer()) {
            // The finalizer comes first; the event that shows it starts the tasks.
            return;
        }
        for handler in matching {
            let identity = handler.identity();
            if tasks.is_running(&identity) {
                continue;
            }
            let stop = stream.stopper();
            let (seen, latest) = watch::channel(ctx.event.clone());
            let progress = Arc::new(Mutex::new(TaskProgress {
                busy: true,
                due: None,
            }));
            let ticker = Ticker {
                calls: self.calls.clone(),
                patcher: self.patcher.clone(),
                clock: self.clock.clone(),
                stream: stream.clone(),
                handler: handler.clone(),
                object: ctx.object.to_owned(),
                memory: memory.clone(),
                latest,
                changed: changed.clone(),
                stop: stop.clone(),
                progress: progress.clone(),
                settings: self.settings.clone(),
            };
            let task = stream.tasks.spawn(ticker.run());
            tasks.insert(RunningTask {
                handler: handler.clone(),
                stop,
                latest: seen,
                progress,
                task,
            });
        }
    }
}
