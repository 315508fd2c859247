//! [`Changing`]: the changing part of an object's event (KOPF.md §6.4 steps 5–7): cause
//! detection, the finalizer decision, the consistency wait, the handlers planned by the
//! lifecycle, the progress records and results, the finalizer release, and the patch or
//! the sleep-then-touch wake-up. The decisions are the pure core's (`reactor::changes`);
//! this stage does the I/O around them: guest calls, API requests, sleeps, logs.

mod subhandlers;
mod views;

use std::sync::Arc;

use serde_json::Value;

use super::EventContext;
use super::calls::{Attempting, Calls, ChangeDetails, Success};
use crate::clock::{self, Clock};
use crate::cluster::RequestError;
use crate::handlers::execution::{Outcome, Retrying, Standing};
use crate::handlers::{Handler, Subhandling};
use crate::object_log::object_log;
use crate::reactor::changes::{
    self, ChangeSettings, ChangingCause, CycleContext, FinalizerChange, FinalizerDecision, Patch,
    Reason, Wakeup,
};
use crate::reactor::objects::ObjectMemory;
use crate::reactor::patching::{Applied, Patcher, Target};
use crate::runtime::Level;
use subhandlers::{Parent, Subhandlers};
use views::{details, finalizer_change, no_callbacks, release};

pub(crate) use views::ChangingHandlers;

fn resource_version(body: &Value) -> Option<&str> {
    body.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
}

/// What a changing cycle left to do after its patch: the delays of the handlers still
/// pending, when they were measured, and whether handlers ran.
struct Cycle {
    delays: Vec<f64>,
    measured: chrono::DateTime<chrono::Utc>,
    handled: bool,
}

/// The changing stage.
#[derive(Clone)]
pub(crate) struct Changing {
    pub(super) calls: Calls,
    pub(super) patcher: Patcher,
    /// Kopf's persistence settings: annotation prefix, finalizer, consistency timeout.
    pub(super) settings: Arc<ChangeSettings>,
    /// Handler time: progress records, retries, delays.
    pub(super) clock: Arc<dyn Clock>,
}

impl Changing {
    /// Steps 5–7 of the per-event pipeline for a live (not DELETED) object. `patch`
    /// already holds the on.event handlers' results; it is sent with this cycle's changes.
    pub(super) async fn handle(
        &self,
        ctx: &EventContext<'_>,
        memory: &ObjectMemory,
        seq: u64,
        mut patch: Patch,
    ) -> Result<(), RequestError> {
        let settings = &*self.settings;
        let (body, object): (&Value, &str) = (&ctx.event.body, ctx.object);
        let changing = &ctx.handlers.changing;

        if memory.is_gone() {
            object_log!(
                debug,
                object,
                "The object is gone: an event from before its deletion changes nothing."
            );
            return Ok(());
        }
        if memory.is_released() && changes::is_deletion_ongoing(body) {
            // Echoes of our last patches before the release; the DELETED event follows.
            return self.send(ctx, memory, patch).await.map(drop);
        }

        // Our own patch came back: the state is consistent again (KOPF.md §4.8).
        memory.echo_arrived(resource_version(body));

        if changing.is_empty() {
            // Only timers and daemons: no change detection (nothing is stored for it, as in
            // Kopf); only the finalizer they need, released once they have stopped.
            let decision =
                changes::finalizer_decision(body, settings.finalizer(), memory.daemons_match());
            patch.finalizer = finalizer_change(decision, settings.finalizer(), object);
            if patch.finalizer.is_none()
                && changes::release_on_deletion(body, settings.finalizer(), false)
            {
                patch.finalizer = Some(release(settings.finalizer(), object));
            }
            return self.send(ctx, memory, patch).await.map(drop);
        }
        let Some(cycle) = self.changes(ctx, memory, seq, &mut patch).await else {
            // A newer event is queued: it carries the fresher state.
            return self.send(ctx, memory, patch).await.map(drop);
        };
        settings.progress().finalize(body, &mut patch);
        let patched = !patch.is_empty();
        if patched {
            self.send(ctx, memory, patch).await?;
        }
        self.wake_up(ctx, memory, seq, patched, cycle).await
    }

    /// The changes of the event: the cause, the finalizer it needs, and the handlers it
    /// runs, their outcomes put in `patch`. `None`: a newer event is queued.
    async fn changes(
        &self,
        ctx: &EventContext<'_>,
        memory: &ObjectMemory,
        seq: u64,
        patch: &mut Patch,
    ) -> Option<Cycle> {
        let settings = &*self.settings;
        let (body, object): (&Value, &str) = (&ctx.event.body, ctx.object);
        let changing = &ctx.handlers.changing;
        let (old, new, warnings) =
            settings
                .diffbase()
                .essences(body, &changing.extra_fields, settings.progress());
        for warning in warnings {
            self.calls.say(ctx, Level::Warning, &warning);
        }
        let initial = memory.is_initial();
        let cause = changes::detect_cause(false, body, settings.finalizer(), old, new, initial);
        let active = self.active_handlers(ctx, &cause).await;
        let mut eval = no_callbacks;
        let required = memory.daemons_match()
            || changes::changing_requires_finalizer(&active.views, &cause, body, &mut eval);
        let decision = changes::finalizer_decision(body, settings.finalizer(), required);

        // When the delays were measured: the wake-up is absolute (see `Clock::sleep_until`).
        let mut cycle = Cycle {
            delays: Vec::new(),
            measured: self.clock.now(),
            handled: false,
        };
        match decision {
            FinalizerDecision::Add | FinalizerDecision::Remove => {
                patch.finalizer = finalizer_change(decision, settings.finalizer(), object);
            }
            FinalizerDecision::Keep
                if changes::is_stealth(&active.views, &cause, body, &mut eval) =>
            {
                // Stealth mode (KOPF.md §3): nothing logged, stored or patched for it.
                memory.handled_fully();
            }
            FinalizerDecision::Keep => {
                if !self.consistent(memory, seq, object).await {
                    return None;
                }
                let carried = memory.take_carried_finalizer();
                if let Some(FinalizerChange::Remove(name)) = carried
                    && changes::is_deletion_ongoing(body)
                    && changes::is_deletion_blocked(body, &name)
                {
                    // The deletion handlers finished, but the release was refused (422).
                    patch.finalizer = Some(FinalizerChange::Remove(name));
                } else if cause.reason.runs_handlers() {
                    (cycle.delays, cycle.measured) =
                        self.run_cycle(ctx, &active, memory, &cause, patch).await;
                    cycle.handled = true;
                } else {
                    match cause.reason {
                        Reason::Noop => object_log!(
                            debug,
                            object,
                            "Something has changed, but we are not interested (the essence is the same)."
                        ),
                        Reason::Free => object_log!(
                            debug,
                            object,
                            "Deletion, but we are done with it, and we do not care."
                        ),
                        _ => {}
                    }
                    memory.handled_fully();
                }
            }
        }
        Some(cycle)
    }

    /// After the cycle's patch (`patched`: there was one): nothing, or a sleep until the
    /// delayed handlers are due, then a touch that brings the object back (KOPF.md §4.7).
    async fn wake_up(
        &self,
        ctx: &EventContext<'_>,
        memory: &ObjectMemory,
        seq: u64,
        patched: bool,
        cycle: Cycle,
    ) -> Result<(), RequestError> {
        let settings = &*self.settings;
        let (body, object): (&Value, &str) = (&ctx.event.body, ctx.object);
        match changes::after_patch(patched, &cycle.delays) {
            // At debug level, as Kopf logs it: a user sees it with `--verbose`.
            Wakeup::Idle if cycle.handled => {
                object_log!(
                    debug,
                    object,
                    "Handling cycle is finished, waiting for new changes."
                )
            }
            Wakeup::Idle | Wakeup::ByPatch => {}
            Wakeup::SleepThenTouch(pause) => {
                object_log!(
                    debug,
                    object,
                    "Sleeping for {} seconds for the delayed handlers.",
                    pause.as_secs_f64()
                );
                let wake_at = clock::after(cycle.measured, pause);
                if !memory.idle_unless_newer(seq, &*self.clock, wake_at).await {
                    let mut touch = Patch::default();
                    let now = changes::touch_value(self.clock.now());
                    settings.progress().touch(body, &mut touch, Some(&now));
                    if !touch.is_empty() {
                        self.send(ctx, memory, touch).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Waits for our last patch to come back (KOPF.md §4.8). `false`: a newer event is
    /// queued, so this one's state-dependent processing is skipped.
    async fn consistent(&self, memory: &ObjectMemory, seq: u64, object: &str) -> bool {
        let Some((version, since)) = memory.awaited_echo() else {
            return true;
        };
        if memory.has_newer(seq) {
            return false;
        }
        let deadline = since + self.settings.consistency_timeout;
        let sleep = Box::pin(tokio::time::sleep_until(deadline));
        if memory.sleep_unless_newer(seq, sleep).await {
            return false;
        }
        object_log!(
            debug,
            object,
            "Timed out waiting for resourceVersion {version}; going on with the object as it is."
        );
        memory.stop_awaiting_echo();
        true
    }

    /// The handlers whose `when` filter passes (all without one), for this cause.
    ///
    /// Kopf's "prematch" includes the `when` callback, so it takes part in stealth mode
    /// and in the finalizer decision, not only in the selection; it is evaluated once
    /// per event, and only for handlers whose data filters already match.
    async fn active_handlers(
        &self,
        ctx: &EventContext<'_>,
        cause: &ChangingCause,
    ) -> ChangingHandlers {
        let changing = &ctx.handlers.changing;
        let body: &Value = &ctx.event.body;
        if !changing.views.iter().any(|v| v.has_when) {
            return changing.clone();
        }
        let mut eval = no_callbacks;
        let mut active = ChangingHandlers {
            owned: changing.owned.clone(),
            extra_fields: changing.extra_fields.clone(),
            ..ChangingHandlers::default()
        };
        for (handler, view) in changing.handlers.iter().zip(&changing.views) {
            if view.has_when {
                if !changes::prematch(view, cause, body, &mut eval) {
                    continue;
                }
                let details = details(view, cause);
                if !self.calls.passes_when(handler, ctx, Some(&details)).await {
                    continue;
                }
            }
            active.handlers.push(handler.clone());
            active.views.push(view.clone());
        }
        active
    }

    /// One changing cycle: the planned handlers run, their outcomes land in the patch.
    /// Returns the delays of the handlers still pending, and when they were measured.
    async fn run_cycle(
        &self,
        ctx: &EventContext<'_>,
        changing: &ChangingHandlers,
        memory: &ObjectMemory,
        cause: &ChangingCause,
        patch: &mut Patch,
    ) -> (Vec<f64>, chrono::DateTime<chrono::Utc>) {
        let settings = &*self.settings;
        let (body, object): (&Value, &str) = (&ctx.event.body, ctx.object);
        let (diffbase, progress) = (settings.diffbase(), settings.progress());

        let now = self.clock.now();
        let mut eval = no_callbacks;
        // `changing` holds only the handlers whose `when` passed (`active_handlers`).
        let matched = changes::select_handlers(&changing.views, cause, body, &mut eval);
        let selected: Vec<String> = matched
            .iter()
            .map(|&index| changing.views[index].id.clone())
            .collect();

        let cycle_ctx = CycleContext {
            body,
            progress,
            diffbase,
            owned: &changing.owned,
            selected: &selected,
            now,
        };
        let cycle = changes::begin(&cycle_ctx, cause, settings.lifecycle, patch);
        for warning in &cycle.warnings {
            self.calls.say(ctx, Level::Warning, warning);
        }
        for line in &cycle.log {
            self.calls.say(ctx, Level::Info, line);
        }
        if !selected.is_empty() {
            let title = changes::capitalize(&changes::title(cause.reason.as_str()));
            self.calls
                .say(ctx, Level::Debug, &format!("{title} is in progress."));
        }

        let mut outcomes: Vec<(String, Outcome)> = Vec::new();
        for id in &cycle.plan {
            // The registration that matched this cause: a function stacked under several
            // (`on::create` and `on::update`, one id) is called as the one that matched,
            // with its kind, not as the first registered.
            let Some(index) = matched
                .iter()
                .copied()
                .find(|&index| &changing.views[index].id == id)
            else {
                continue;
            };
            let Some(state) = cycle.state.get(id) else {
                continue;
            };
            let standing = Standing {
                retries: state.retries,
                started: state.started.unwrap_or(now),
            };
            let handler = &changing.handlers[index];
            let details = details(&changing.views[index], cause);
            let outcome = self
                .attempt_with_subhandlers(ctx, handler, (&details, standing), memory, patch)
                .await;
            outcomes.push((id.clone(), outcome));
        }

        let end = changes::finish(&cycle_ctx, cause, cycle, outcomes, patch);
        for line in &end.log {
            self.calls.say(ctx, Level::Info, line);
        }
        if let Some(message) = end.oversized {
            self.calls.say(ctx, Level::Warning, &message);
            self.calls.warn_about(ctx, "DiffBaseDigested", message);
        }
        if end.fully_handled {
            memory.handled_fully();
        }
        if changes::release_on_deletion(body, settings.finalizer(), !end.delays.is_empty()) {
            patch.finalizer = Some(release(settings.finalizer(), object));
        }
        (end.delays, now)
    }

    /// One attempt of a changing handler, with the sub-handlers it declares during the
    /// call: their records and results go into `patch` whatever became of the handler
    /// (Kopf stores them as they finish), and its outcome lists them all as `subrefs`.
    async fn attempt_with_subhandlers(
        &self,
        ctx: &EventContext<'_>,
        handler: &Arc<Handler>,
        (details, standing): (&ChangeDetails, Standing),
        memory: &ObjectMemory,
        patch: &mut Patch,
    ) -> Outcome {
        let parent = Parent {
            id: &handler.spec.id,
            kind: handler.spec.kind,
            purpose: &details.reason,
            min_delay: handler.spec.min_retry_delay,
            default_backoff: handler.spec.default_backoff,
        };
        let progress = self.settings.progress().clone();
        let object = (&ctx.event.body, ctx.object);
        let subhandlers = Arc::new(Subhandlers::new(
            &parent,
            object,
            (progress, self.settings.lifecycle),
            self.clock.clone(),
        ));
        let shared: Arc<dyn Subhandling> = subhandlers.clone();
        let how = Attempting {
            details: Some(details),
            standing: Some(standing),
            retrying: Retrying::Later,
            success: Success::Info,
            subhandlers: Some(&shared),
        };
        let decision = self.calls.attempt(handler, ctx, how, memory, patch).await;
        subhandlers.store(patch);
        Outcome {
            subrefs: subhandlers.subrefs(),
            ..decision.outcome
        }
    }

    /// Sends a patch; remembers the resourceVersion it produced and a refused finalizer
    /// release. Returns whether the object still exists.
    pub(super) async fn send(
        &self,
        ctx: &EventContext<'_>,
        memory: &ObjectMemory,
        patch: Patch,
    ) -> Result<bool, RequestError> {
        if patch.is_empty() {
            return Ok(true);
        }
        let (body, object): (&Value, &str) = (&ctx.event.body, ctx.object);
        let releasing = matches!(patch.finalizer, Some(FinalizerChange::Remove(_)))
            && changes::is_deletion_ongoing(body);
        let target = Target::of(&ctx.stream.resource, body);
        let (fresh, refused) = match self.patcher.apply(target, body, &patch).await? {
            Applied::Gone => {
                object_log!(debug, object, "The object is gone; nothing to patch.");
                memory.gone();
                return Ok(false);
            }
            Applied::Done(fresh) => (fresh, false),
            Applied::FinalizerRefused {
                fresh: None,
                error: Some(error),
            } => {
                // Nothing of ours was written, so no event of ours will come to run the
                // next cycle: a lost race (the error says so), handled again with the
                // newer version the refusal hints at (`handle_with_throttling`).
                memory.release_refused(patch.finalizer.clone());
                return Err(error);
            }
            Applied::FinalizerRefused { fresh, .. } => (fresh, true),
        };
        if refused {
            object_log!(
                debug,
                object,
                "The finalizer change was refused (the object changed meanwhile); retrying in the next cycle."
            );
        }
        let refused = refused.then(|| patch.finalizer.clone());
        memory.wrote(
            fresh.as_ref().and_then(resource_version),
            releasing,
            refused,
        );
        Ok(true)
    }
}
