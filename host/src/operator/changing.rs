//! The changing part of an object's event (KOPF.md §6.4 steps 5–7): cause detection,
//! the finalizer decision, the consistency wait, the handlers planned by the lifecycle,
//! the progress records and results, the finalizer release, and the patch or the
//! sleep-then-touch wake-up. The decisions are the pure core's ([`super::changes`]);
//! this module does the I/O around them: guest calls, API requests, sleeps, logs.

use std::sync::Arc;

use serde_json::Value;

use super::calls::{CallOutcome, ChangeDetails, Failure, Invocation};
use super::changes::{
    self, Attempt, CallbackSlot, ChangingCause, ChangingHandler, Criterion, CycleContext,
    FinalizerChange, FinalizerDecision, Lifecycle, Outcome, Patch, Reason, RetryPolicy, Wakeup,
};
use super::filters::Matcher;
use super::memory::ObjectMemory;
use super::patching::{self, Applied, PatchError, Target};
use super::process::{Processor, StreamContext};
use super::registry::{ErrorsMode, Handler, Kind};
use super::stream::ObjectEvent;
use crate::object_log::object_log;

/// A resource's changing handlers, mapped once onto what the pure core needs.
#[derive(Debug, Default, Clone)]
pub(crate) struct ChangingHandlers {
    handlers: Vec<Arc<Handler>>,
    views: Vec<ChangingHandler>,
    /// Every changing handler id (for loading and purging progress records).
    owned: Vec<String>,
    /// Fields of field handlers outside the essence's usual scope.
    extra_fields: Vec<Vec<String>>,
}

impl ChangingHandlers {
    pub(crate) fn new(handlers: &[Arc<Handler>]) -> ChangingHandlers {
        let views: Vec<ChangingHandler> = handlers.iter().map(|h| view(h)).collect();
        let mut owned: Vec<String> = Vec::new();
        for v in &views {
            if !owned.contains(&v.id) {
                owned.push(v.id.clone());
            }
        }
        let mut extra_fields: Vec<Vec<String>> = Vec::new();
        for field in views.iter().filter_map(|v| v.field.clone()) {
            if !extra_fields.contains(&field) {
                extra_fields.push(field);
            }
        }
        ChangingHandlers {
            handlers: handlers.to_vec(),
            views,
            owned,
            extra_fields,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }
}

/// The pure core's view of a registration.
fn view(handler: &Handler) -> ChangingHandler {
    let spec = &handler.spec;
    let meta = |filters: &[(String, Matcher)]| {
        filters
            .iter()
            .map(|(key, m)| {
                let criterion = match m {
                    Matcher::Equals(v) => Criterion::Equals(Value::String(v.clone())),
                    Matcher::Present => Criterion::Present,
                    Matcher::Absent => Criterion::Absent,
                };
                (key.clone(), criterion)
            })
            .collect()
    };
    // Field matchers carry JSON text; a value the SDK did not encode is compared as a string.
    let field_criterion = |m: Option<&Matcher>| match m {
        None => Criterion::Unset,
        Some(Matcher::Present) => Criterion::Present,
        Some(Matcher::Absent) => Criterion::Absent,
        Some(Matcher::Equals(json)) => Criterion::Equals(
            serde_json::from_str(json).unwrap_or_else(|_| Value::String(json.clone())),
        ),
    };
    ChangingHandler {
        id: spec.id.clone(),
        guest: handler.guest.name().to_owned(),
        reason: match spec.kind {
            Kind::Create => Some(Reason::Create),
            Kind::Update => Some(Reason::Update),
            Kind::Delete => Some(Reason::Delete),
            _ => None,
        },
        initial: spec.kind == Kind::Resume,
        deleted: spec.deleted,
        requires_finalizer: spec.kind == Kind::Delete && !spec.optional,
        field_needs_change: matches!(spec.kind, Kind::Update | Kind::Field),
        labels: meta(&spec.filters.labels),
        annotations: meta(&spec.filters.annotations),
        field: spec.filters.field.clone(),
        value: field_criterion(spec.filters.value.as_ref()),
        old: field_criterion(spec.old.as_ref()),
        new: field_criterion(spec.new.as_ref()),
        has_when: spec.has_when,
    }
}

fn retry_policy(handler: &Handler) -> RetryPolicy {
    let spec = &handler.spec;
    RetryPolicy {
        errors: match spec.errors_mode() {
            ErrorsMode::Temporary => changes::ErrorsMode::Temporary,
            ErrorsMode::Permanent => changes::ErrorsMode::Permanent,
            ErrorsMode::Ignored => changes::ErrorsMode::Ignored,
        },
        timeout: spec.timeout_seconds,
        retries: spec.retries,
        backoff: spec.backoff_seconds,
    }
}

/// Data matchers never call back into the guest (`when` is evaluated separately).
fn no_callbacks(_: &ChangingHandler, _: CallbackSlot<'_>, _: Option<&Value>) -> bool {
    false
}

fn resource_version(body: &Value) -> Option<&str> {
    body.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
}

/// RFC 7386: merges a handler's patch into the cycle's patch.
fn merge_into(target: &mut serde_json::Map<String, Value>, patch: serde_json::Map<String, Value>) {
    for (key, value) in patch {
        match (target.get_mut(&key), value) {
            (Some(Value::Object(existing)), Value::Object(more)) => merge_into(existing, more),
            (_, value) => {
                target.insert(key, value);
            }
        }
    }
}

/// How one event's changing part ended, for the caller's throttling.
pub(crate) type ChangeResult = Result<(), PatchError>;

impl Processor {
    /// Steps 5–7 of the per-event pipeline for a live (not DELETED) object. `patch`
    /// already holds the on.event handlers' results; it is sent with this cycle's changes.
    pub(crate) async fn handle_changes(
        &self,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        memory: &ObjectMemory,
        seq: u64,
        mut patch: Patch,
    ) -> ChangeResult {
        let settings = &*self.changes;
        let body: &Value = &event.body;
        let changing = &stream.changing;
        let (diffbase, keys) = (settings.diffbase(), settings.keys());

        if memory.state().released && changes::is_deletion_ongoing(body) {
            // Echoes of our last patches before the release; the DELETED event follows.
            return self
                .send(stream, event, object, memory, patch)
                .await
                .map(drop);
        }

        // Our own patch came back: the state is consistent again (KOPF.md §4.8).
        let expected = memory.state().expected_version.clone();
        if let Some((version, _)) = &expected
            && resource_version(body) == Some(version.as_str())
        {
            memory.state().expected_version = None;
        }

        let daemons_required = memory.state().daemons_match;
        if changing.is_empty() {
            // Only timers and daemons: no change detection (nothing is stored for it, as in
            // Kopf); only the finalizer they need, released once they have stopped.
            let decision = changes::decide(body, &settings.finalizer, daemons_required);
            patch.finalizer = finalizer_change(decision, &settings.finalizer, object);
            if patch.finalizer.is_none()
                && changes::release_on_deletion(body, &settings.finalizer, false)
            {
                patch.finalizer = Some(release(&settings.finalizer, object));
            }
            return self
                .send(stream, event, object, memory, patch)
                .await
                .map(drop);
        }

        let (old, warnings) = diffbase.fetch(body);
        for warning in warnings {
            object_log!(warn, object, "{warning}");
        }
        let new = diffbase.build(body, &changing.extra_fields);
        let initial = {
            let state = memory.state();
            state.noticed_by_listing == Some(true) && !state.fully_handled_once
        };
        let cause = changes::detect_cause(false, body, &settings.finalizer, old, new, initial);
        let active = self.active_handlers(stream, event, object, &cause).await;
        let mut eval = no_callbacks;
        let required = daemons_required
            || changes::changing_requires_finalizer(&active.views, &cause, body, &mut eval);
        let decision = changes::decide(body, &settings.finalizer, required);

        let mut delays: Vec<f64> = Vec::new();
        // When the delays were measured: the wake-up is absolute (see `Clock::sleep_until`).
        let mut measured = self.clock.now();
        let mut handled = false;
        match decision {
            FinalizerDecision::Add | FinalizerDecision::Remove => {
                patch.finalizer = finalizer_change(decision, &settings.finalizer, object);
            }
            FinalizerDecision::Keep
                if changes::is_stealth(&active.views, &cause, body, &mut eval) =>
            {
                // Stealth mode (KOPF.md §3): nothing logged, stored or patched for it.
                memory.state().fully_handled_once = true;
            }
            FinalizerDecision::Keep => {
                if !self.consistent(memory, seq, object).await {
                    // A newer event is queued: it carries the fresher state.
                    return self
                        .send(stream, event, object, memory, patch)
                        .await
                        .map(drop);
                }
                let carried = memory.state().carried_finalizer.take();
                if let Some(FinalizerChange::Remove(name)) = carried
                    && changes::is_deletion_ongoing(body)
                    && changes::is_deletion_blocked(body, &name)
                {
                    // The deletion handlers finished, but the release was refused (422).
                    patch.finalizer = Some(FinalizerChange::Remove(name));
                } else if cause.reason.runs_handlers() {
                    (delays, measured) = self
                        .run_cycle(stream, &active, event, object, memory, &cause, &mut patch)
                        .await;
                    handled = true;
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
                    memory.state().fully_handled_once = true;
                }
            }
        }

        patch.finalize(body, &keys, &settings.touch_key);
        let patched = !patch.is_empty();
        if patched {
            self.send(stream, event, object, memory, patch).await?;
        }
        match changes::after_patch(patched, &delays) {
            Wakeup::Idle if handled => {
                object_log!(
                    info,
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
                let wake_at = chrono::TimeDelta::from_std(pause)
                    .ok()
                    .and_then(|p| measured.checked_add_signed(p))
                    .unwrap_or(measured);
                if !memory.idle_unless_newer(seq, &*self.clock, wake_at).await {
                    let mut touch = Patch::default();
                    let now = changes::touch_value(self.clock.now());
                    touch.touch(body, &keys, &settings.touch_key, Some(&now));
                    if !touch.is_empty() {
                        self.send(stream, event, object, memory, touch).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Waits for our last patch to come back (KOPF.md §4.8). `false`: a newer event is
    /// queued, so this one's state-dependent processing is skipped.
    async fn consistent(&self, memory: &ObjectMemory, seq: u64, object: &str) -> bool {
        let Some((version, since)) = memory.state().expected_version.clone() else {
            return true;
        };
        if memory.has_newer(seq) {
            return false;
        }
        let deadline = since + self.changes.consistency_timeout;
        let sleep = Box::pin(tokio::time::sleep_until(deadline));
        if memory.sleep_unless_newer(seq, sleep).await {
            return false;
        }
        object_log!(
            debug,
            object,
            "Timed out waiting for resourceVersion {version}; going on with the object as it is."
        );
        memory.state().expected_version = None;
        true
    }

    /// The handlers whose `when` filter passes (all without one), for this cause.
    ///
    /// Kopf's "prematch" includes the `when` callback, so it takes part in stealth mode
    /// and in the finalizer decision, not only in the selection; it is evaluated once
    /// per event, and only for handlers whose data filters already match.
    async fn active_handlers(
        &self,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        cause: &ChangingCause,
    ) -> ChangingHandlers {
        let changing = &stream.changing;
        let body: &Value = &event.body;
        if !changing.views.iter().any(|v| v.has_when) {
            return changing.clone();
        }
        let body_json: Arc<str> = Arc::from(body.to_string());
        let now = self.clock.now();
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
                // Filters get the cause, but no retry/started/runtime (KOPF.md §1.13).
                let details = details(view, cause, 0, now, now);
                if !self
                    .passes_when(handler, stream, event, object, &body_json, Some(&details))
                    .await
                {
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
    #[allow(
        clippy::too_many_arguments,
        reason = "the parts of one cycle; bundling them would only rename them"
    )]
    async fn run_cycle(
        &self,
        stream: &StreamContext,
        changing: &ChangingHandlers,
        event: &ObjectEvent,
        object: &str,
        memory: &ObjectMemory,
        cause: &ChangingCause,
        patch: &mut Patch,
    ) -> (Vec<f64>, chrono::DateTime<chrono::Utc>) {
        let settings = &*self.changes;
        let body: &Value = &event.body;
        let (diffbase, progress) = (settings.diffbase(), settings.progress());
        let body_json: Arc<str> = Arc::from(body.to_string());

        let now = self.clock.now();
        let mut eval = no_callbacks;
        // `changing` holds only the handlers whose `when` passed (`active_handlers`).
        let selected: Vec<String> =
            changes::select_handlers(&changing.views, cause, body, &mut eval)
                .into_iter()
                .map(|index| changing.views[index].id.clone())
                .collect();

        let ctx = CycleContext {
            body,
            progress: &progress,
            diffbase: &diffbase,
            owned: &changing.owned,
            selected: &selected,
            now,
        };
        let cycle = changes::begin(&ctx, cause, Lifecycle::Asap, patch);
        for warning in &cycle.warnings {
            object_log!(warn, object, "{warning}");
        }
        for line in &cycle.log {
            object_log!(info, object, "{line}");
        }
        if !selected.is_empty() {
            object_log!(
                debug,
                object,
                "{} is in progress.",
                changes::capitalize(&changes::title(cause.reason.as_str()))
            );
        }

        let mut outcomes: Vec<(String, Outcome)> = Vec::new();
        for id in &cycle.plan {
            let Some(index) = changing.views.iter().position(|v| &v.id == id) else {
                continue;
            };
            let Some(state) = cycle.state.get(id) else {
                continue;
            };
            let handler = &changing.handlers[index];
            let policy = retry_policy(handler);
            if let Some(outcome) = changes::precheck(id, &policy, state, now) {
                if let Some(error) = &outcome.error {
                    object_log!(error, object, "{error}");
                    self.record_failure(handler, object, error);
                }
                outcomes.push((id.clone(), outcome));
                continue;
            }
            let started = state.started.unwrap_or(now);
            let details = details(&changing.views[index], cause, state.retries, started, now);
            let invocation = self
                .call_patching(
                    handler, stream, event, object, &body_json, &details, memory, patch,
                )
                .await;
            let attempt = match invocation.outcome {
                CallOutcome::Done(result) => Attempt::Success(
                    result
                        .as_deref()
                        .and_then(|r| serde_json::from_str(r).ok())
                        .unwrap_or(Value::Null),
                ),
                CallOutcome::Index(_) => Attempt::Success(Value::Null),
                CallOutcome::Failed { error, failure } => match failure {
                    Failure::Temporary(delay) => Attempt::Temporary {
                        message: error,
                        delay: Some(delay.as_secs_f64()),
                    },
                    Failure::Permanent => Attempt::Permanent { message: error },
                    Failure::Arbitrary => Attempt::Arbitrary { message: error },
                },
            };
            let outcome = changes::outcome(id, &policy, state, now, attempt.clone());
            let line = changes::log_line(id, &policy, &attempt, &outcome);
            let verdict = match (&attempt, outcome.is_final, &outcome.error) {
                (Attempt::Success(_), _, _) => "success",
                (Attempt::Arbitrary { .. }, true, None) => "ignored",
                (_, false, _) => "retry",
                (_, true, _) => "failure",
            };
            if verdict == "success" {
                object_log!(info, object, "{line}");
            } else {
                object_log!(error, object, "{line}");
                self.record_failure(handler, object, &line);
            }
            self.record_finished(
                handler,
                object,
                invocation.elapsed,
                verdict,
                invocation.fault,
            );
            outcomes.push((id.clone(), outcome));
        }

        let end = changes::finish(&ctx, cause, cycle, outcomes, patch);
        for line in &end.log {
            object_log!(info, object, "{line}");
        }
        if end.fully_handled {
            memory.state().fully_handled_once = true;
        }
        if changes::release_on_deletion(body, &settings.finalizer, !end.delays.is_empty()) {
            patch.finalizer = Some(release(&settings.finalizer, object));
        }
        (end.delays, now)
    }

    /// Calls a handler that keeps the object's memo and builds a patch for it (changing
    /// handlers, timers, daemons): the memo goes in and comes back, and the handler's patch is
    /// merged into `patch`.
    #[allow(
        clippy::too_many_arguments,
        reason = "the parts of one call, as for `Processor::call`, plus the memo's and patch's owners"
    )]
    pub(crate) async fn call_patching(
        &self,
        handler: &Handler,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        body_json: &Arc<str>,
        details: &ChangeDetails,
        memory: &ObjectMemory,
        patch: &mut Patch,
    ) -> Invocation {
        let memo = memory.state().memo.clone();
        let invocation = self
            .call(
                handler,
                stream,
                event,
                object,
                body_json,
                Some(details),
                memo,
            )
            .await;
        if let Some(memo) = &invocation.memo {
            memory.state().memo = Some(memo.clone());
        }
        if let Some(handler_patch) = invocation.patch.as_deref() {
            match serde_json::from_str::<Value>(handler_patch) {
                Ok(Value::Object(fields)) => merge_into(&mut patch.merge, fields),
                Ok(Value::Null) => {}
                _ => object_log!(
                    warn,
                    object,
                    "Handler '{}' returned a patch that is not a JSON object; ignored.",
                    handler.spec.id
                ),
            }
        }
        invocation
    }

    /// Sends a patch; remembers the resourceVersion it produced and a refused finalizer
    /// release. Returns whether the object still exists.
    pub(crate) async fn send(
        &self,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        memory: &ObjectMemory,
        patch: Patch,
    ) -> Result<bool, PatchError> {
        if patch.is_empty() {
            return Ok(true);
        }
        let body: &Value = &event.body;
        let meta = body.get("metadata");
        let name = meta
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let namespace = meta
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str);
        let target = Target {
            resource: &stream.resource,
            namespace,
            name,
        };
        let releasing = matches!(patch.finalizer, Some(FinalizerChange::Remove(_)))
            && changes::is_deletion_ongoing(body);
        let applied = patching::apply(&self.client, target, body, &patch, &self.recorder).await?;
        let (fresh, refused) = match applied {
            Applied::Gone => {
                object_log!(debug, object, "The object is gone; nothing to patch.");
                return Ok(false);
            }
            Applied::Done(fresh) => (fresh, false),
            Applied::FinalizerRefused(fresh) => (fresh, true),
        };
        let mut state = memory.state();
        if releasing && !refused {
            state.released = true;
        }
        if refused {
            object_log!(
                debug,
                object,
                "The finalizer change was refused (the object changed meanwhile); retrying in the next cycle."
            );
            state.carried_finalizer = patch.finalizer.clone();
        }
        // Releasing a deleting object's last finalizer deletes it: that version never arrives.
        state.expected_version = match fresh.as_ref().and_then(resource_version) {
            Some(version) if !releasing || refused => {
                Some((version.to_owned(), tokio::time::Instant::now()))
            }
            _ => None,
        };
        Ok(true)
    }
}

/// The finalizer change a decision asks for, logged as Kopf logs it (`None`: keep).
fn finalizer_change(
    decision: FinalizerDecision,
    finalizer: &str,
    object: &str,
) -> Option<FinalizerChange> {
    match decision {
        FinalizerDecision::Add => {
            object_log!(
                debug,
                object,
                "Adding the finalizer, thus preventing the actual deletion."
            );
            Some(FinalizerChange::Add(finalizer.to_owned()))
        }
        FinalizerDecision::Remove => {
            object_log!(
                debug,
                object,
                "Removing the finalizer, as there are no handlers requiring it."
            );
            Some(FinalizerChange::Remove(finalizer.to_owned()))
        }
        FinalizerDecision::Keep => None,
    }
}

/// Releasing a deleted object: nothing is pending any more.
fn release(finalizer: &str, object: &str) -> FinalizerChange {
    object_log!(
        debug,
        object,
        "Removing the finalizer, thus allowing the actual deletion."
    );
    FinalizerChange::Remove(finalizer.to_owned())
}

/// What a changing handler's cause carries: the reason, its view of old/new/diff, and
/// the attempt's retry count and times.
fn details(
    view: &ChangingHandler,
    cause: &ChangingCause,
    retry: u32,
    started: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> ChangeDetails {
    let (old, new, diff) = changes::handler_view(view, cause);
    ChangeDetails {
        reason: cause.reason.as_str().to_owned(),
        old: old.to_string(),
        new: new.to_string(),
        diff: diff.to_json().to_string(),
        retry,
        started: changes::format_time(started),
        runtime_seconds: changes::seconds(now - started),
        sleeps: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn handler_patches_merge_deeply() {
        let mut target = json!({"metadata": {"annotations": {"a": "1"}}, "status": {"x": 1}});
        let Value::Object(ref mut map) = target else {
            unreachable!()
        };
        let Value::Object(more) =
            json!({"metadata": {"annotations": {"b": "2"}, "labels": {"l": "v"}}, "status": 5})
        else {
            unreachable!()
        };
        merge_into(map, more);
        assert_eq!(
            target,
            json!({"metadata": {"annotations": {"a": "1", "b": "2"}, "labels": {"l": "v"}}, "status": 5})
        );
    }
}
