//! [`Calls`]: how every stage attempts a handler about an object ([`Calls::attempt`]) —
//! the cause built from the event, the services the guest may use, the pool its slots
//! come from, the attempt itself (`execution::attempt`), the journal records, and Kopf's
//! log line for how it ended.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;

use super::EventContext;
use crate::clock::Clock;
use crate::cluster::{KubeAccess, ObjectRef, PostedEvent, Poster, from_log, posting_level};
use crate::handlers::execution::{
    self, Attempt, Attempted, Called, Decision, Executed, IndexEntries, Retrying, Standing, Verdict,
};
use crate::handlers::{
    About, DaemonSleeps, Ended, GuestServices, Handler, Indexes, OperatorMemo, SettingsAccess,
    Subhandling,
};
use crate::journal::Journal;
use crate::metrics::Metrics;
use crate::object_log::object_log;
use crate::reactor::changes::{self, Patch};
use crate::reactor::objects::{EventType, ObjectMemory};
use crate::recording::Recorder;
use crate::runtime::{self, CallContext, HandlerKind, Level, Pool};
use crate::settings::SharedSettings;

/// What a changing handler's cause carries beyond the event (KOPF.md §1.13); daemons
/// carry their sleeps only. (The retry and time details come from the attempt's
/// [`Standing`].)
#[derive(Debug, Clone, Default)]
pub(crate) struct ChangeDetails {
    /// `create`, `update`, `delete`, `resume`.
    pub(crate) reason: String,
    /// JSON: essences, or the field's values for field handlers.
    pub(crate) old: String,
    pub(crate) new: String,
    /// JSON: Kopf's diff, a list of `[op, [path...], old, new]`.
    pub(crate) diff: String,
    /// Daemons: what their `sleep_unless_stopped` sleeps on.
    pub(crate) sleeps: Option<DaemonSleeps>,
}

/// The reason of the `when` call that asks a timer or daemon for its initial delay (the
/// WIT's `spawning.initial-delay`).
const INITIAL_DELAY: &str = "initial-delay";

/// How loudly a success is logged: changing handlers, timers and daemons at `info`
/// (as Kopf), raw event handlers at `debug` (one line per event), indexers not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Success {
    Info,
    Debug,
    Silent,
}

/// Whether what a handler of `kind` logs, and Kopf's lines about its attempts, are posted
/// as Events when `posting.loggers` is on: Kopf posts the lines of its object logger
/// (changing handlers, timers, daemons), never those about raw event and index handlers.
fn posts_logs(kind: HandlerKind) -> bool {
    !matches!(kind, HandlerKind::Event | HandlerKind::Index)
}

/// How a stage attempts a handler about the event's object.
#[derive(Clone, Copy)]
pub(super) struct Attempting<'a> {
    /// A changing handler's cause, a timer's or daemon's retry and time details; `None`:
    /// the event alone (raw event and index handlers).
    pub(super) details: Option<&'a ChangeDetails>,
    /// Where the handler stands in its retries; `None`: a first attempt, now.
    pub(super) standing: Option<Standing>,
    /// What becomes of a failure that would be retried.
    pub(super) retrying: Retrying,
    /// How loudly a success is logged.
    pub(super) success: Success,
    /// A changing handler's sub-handlers; `None`: it may declare none.
    pub(super) subhandlers: Option<&'a Arc<dyn Subhandling>>,
}

/// Guest calls about objects; shared by every stage (cheap to clone).
#[derive(Clone)]
pub(crate) struct Calls {
    journal: Journal,
    indexes: Indexes,
    /// Kubernetes Events the guests post.
    poster: Poster,
    /// The cluster and what discovery found last, for the guests' Kubernetes calls.
    kube: KubeAccess,
    /// Where `--record` writes the guests' Kubernetes calls.
    recorder: Recorder,
    /// Handler time: where an attempt stands in its retries and timeout.
    clock: Arc<dyn Clock>,
    /// What an object's memo starts as (Kopf's operator-wide memo).
    operator_memo: OperatorMemo,
    /// Kopf's settings, in force: object handlers read them.
    settings: SharedSettings,
    /// Where the filter calls are counted.
    metrics: Metrics,
}

impl Calls {
    pub(crate) fn new(
        journal: Journal,
        indexes: Indexes,
        poster: Poster,
        kube: KubeAccess,
        recorder: Recorder,
        clock: Arc<dyn Clock>,
    ) -> Calls {
        Calls {
            journal,
            indexes,
            poster,
            kube,
            recorder,
            clock,
            operator_memo: OperatorMemo::default(),
            settings: SharedSettings::default(),
            metrics: Metrics::default(),
        }
    }

    /// Objects' memos start as `memo` (the operator's, which startup handlers leave).
    pub(crate) fn with_operator_memo(mut self, memo: OperatorMemo) -> Calls {
        self.operator_memo = memo;
        self
    }

    /// The filter calls are counted in these metrics (the operator's).
    pub(crate) fn with_metrics(mut self, metrics: Metrics) -> Calls {
        self.metrics = metrics;
        self
    }

    /// Handlers read these settings (the operator's, in force).
    pub(crate) fn with_settings(mut self, settings: SharedSettings) -> Calls {
        self.settings = settings;
        self
    }

    /// Where what happened is recorded.
    pub(super) fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The guests' indexes.
    pub(super) fn indexes(&self) -> &Indexes {
        &self.indexes
    }

    /// Handler time now.
    pub(super) fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// What the journal says the call is about.
    fn about<'a>(ctx: &'a EventContext<'_>) -> About<'a> {
        About {
            resource: &ctx.resource_key,
            object: Some(ctx.object),
            event_type: ctx.event.event_type.as_kopf(),
        }
    }

    /// The context of one call: the object, and the services the guest may use.
    fn context(
        &self,
        handler: &Handler,
        ctx: &EventContext<'_>,
        (sleeps, subhandlers): (Option<DaemonSleeps>, Option<Arc<dyn Subhandling>>),
    ) -> CallContext {
        let services = GuestServices {
            journal: self.journal.clone(),
            indexes: self.indexes.clone(),
            guest: handler.guest.clone(),
            object: ctx.event.body.clone(),
            poster: Some(self.poster.clone()),
            posts_logs: posts_logs(handler.spec.kind),
            kube: Some(self.kube.clone()),
            recorder: self.recorder.clone(),
            sleeps,
            subhandlers,
            settings: SettingsAccess::read_only(&self.settings),
            resource: Some(ctx.stream.resource.clone()),
        };
        CallContext::new(
            handler.spec.id.clone(),
            Some(ctx.object.to_owned()),
            Arc::new(services),
        )
        .in_pool(match handler.spec.kind {
            // Long-running calls have slots of their own: they never starve short ones.
            HandlerKind::Timer | HandlerKind::Daemon => Pool::Background,
            _ => Pool::Handlers,
        })
    }

    /// One attempt of a raw event, changing, timer or daemon handler about the event's
    /// object: the memo goes in and comes back, the handler's patch is merged into
    /// `patch`; Kopf's log line and the journal say how it ended. The stage applies the
    /// decision.
    pub(super) async fn attempt(
        &self,
        handler: &Handler,
        ctx: &EventContext<'_>,
        how: Attempting<'_>,
        memory: &ObjectMemory,
        patch: &mut Patch,
    ) -> Decision {
        let standing = self.standing(&how);
        let call = self.invoke_patching(handler, ctx, (&how, standing), memory, patch);
        let decision = self.attempted(handler, ctx, (how, standing), call).await;
        let concluded = matches!(
            decision.verdict,
            Verdict::Success | Verdict::Failure | Verdict::Ignored
        );
        if concluded && handler.spec.is_changing() {
            memory.progressed();
        }
        decision
    }

    /// One attempt of an index handler about the event's object, as [`Calls::attempt`].
    pub(super) async fn attempt_index(
        &self,
        handler: &Handler,
        ctx: &EventContext<'_>,
        how: Attempting<'_>,
    ) -> Decision<IndexEntries> {
        let standing = self.standing(&how);
        let call = self.index(handler, ctx, standing);
        self.attempted(handler, ctx, (how, standing), call).await
    }

    /// Where the handler stands: as the stage says, else at a first attempt now (handler
    /// time: the cause's `started`).
    fn standing(&self, how: &Attempting<'_>) -> Standing {
        how.standing
            .unwrap_or_else(|| Standing::first(self.clock.now()))
    }

    /// Makes the attempt and concludes it (a call that the strict checks did not make is
    /// given up on).
    async fn attempted<T>(
        &self,
        handler: &Handler,
        ctx: &EventContext<'_>,
        (how, standing): (Attempting<'_>, Standing),
        call: impl Future<Output = Executed<T>>,
    ) -> Decision<T> {
        let Attempted { decision, called } =
            execution::attempt(&handler.spec, standing, how.retrying, &*self.clock, call).await;
        match called {
            Some(called) => self.conclude(handler, ctx, called, &decision, how.success),
            None => {
                object_log!(error, ctx.object, "{}", decision.line);
                handler.record_gave_up(&self.journal, Self::about(ctx), &decision.line);
            }
        }
        decision
    }

    /// Calls an event, changing, timer or daemon handler, recorded in the journal. (The
    /// runtime bounds the calls at once: see `runtime::Pool`.)
    async fn invoke(
        &self,
        handler: &Handler,
        ctx: &EventContext<'_>,
        (how, standing): (&Attempting<'_>, Standing),
        memo: Option<String>,
    ) -> Executed {
        handler.record_called(&self.journal, Self::about(ctx));
        let details = how.details;
        let cause = cause(handler, ctx, details, memo, (standing, self.clock.now()));
        let sleeps = details.and_then(|d| d.sleeps.clone());
        let subhandlers = how.subhandlers.cloned();
        let context = self.context(handler, ctx, (sleeps, subhandlers));
        let mut executed = execution::invoke(&handler.guest, cause, context).await;
        if let Some(subhandlers) = how.subhandlers {
            executed.attempt =
                awaiting_children(executed.attempt, &handler.spec.id, &**subhandlers);
        }
        executed
    }

    /// Calls a handler that keeps the object's memo and builds a patch for it (every
    /// handler but indexers): the memo goes in and comes back, and the handler's patch is
    /// merged into `patch`.
    async fn invoke_patching(
        &self,
        handler: &Handler,
        ctx: &EventContext<'_>,
        (how, standing): (&Attempting<'_>, Standing),
        memory: &ObjectMemory,
        patch: &mut Patch,
    ) -> Executed {
        // Kopf copies the operator's memo for each object; here an object reads it until
        // a handler leaves the object a memo of its own (no copy per object is kept).
        let memo = memory.memo().or_else(|| self.operator_memo.get());
        let executed = self.invoke(handler, ctx, (how, standing), memo).await;
        if let Some(memo) = &executed.memo {
            memory.set_memo(memo.clone());
        }
        if let Some(fields) = &executed.patch {
            if !fields.is_empty() {
                memory.patched_by(&handler.spec.id);
            }
            merge_into(&mut patch.merge, fields.clone());
        }
        executed
    }

    /// Calls an index handler.
    async fn index(
        &self,
        handler: &Handler,
        ctx: &EventContext<'_>,
        standing: Standing,
    ) -> Executed<IndexEntries> {
        handler.record_called(&self.journal, Self::about(ctx));
        let cause = cause(handler, ctx, None, None, (standing, self.clock.now()));
        let context = self.context(handler, ctx, (None, None));
        execution::index(&handler.guest, cause, context).await
    }

    /// Evaluates a handler's `when` filter in the guest (changing handlers' filters also
    /// see the reason, old, new and diff); a failing filter does not pass.
    pub(super) async fn passes_when(
        &self,
        handler: &Handler,
        ctx: &EventContext<'_>,
        details: Option<&ChangeDetails>,
    ) -> bool {
        if !handler.spec.has_when {
            return true;
        }
        // Filters get the cause, but no retry, start or runtime (KOPF.md §1.13).
        let now = self.clock.now();
        let cause = cause(handler, ctx, details, None, (Standing::first(now), now));
        let context = self.context(handler, ctx, (None, None));
        let answer = handler.guest.when(cause, context).await;
        let result = match &answer {
            Ok(true) => "pass",
            Ok(false) => "skip",
            Err(_) => "error",
        };
        let (guest, id) = handler.identity();
        self.metrics.filter_called(&guest, &id, result);
        match answer {
            Ok(passes) => passes,
            Err(error) => {
                object_log!(
                    error,
                    ctx.object,
                    "The `when` filter of handler '{}' failed: {error}",
                    handler.spec.id
                );
                let error = error.to_string();
                handler.record_failed(&self.journal, Self::about(ctx), &error);
                false
            }
        }
    }

    /// A timer's or daemon's initial delay for the event's object, as the guest computes it
    /// (Kopf's callable `initial_delay`): asked through the guest's `when` export, as its
    /// filters are, with the reason `initial-delay`. No answer, or a failed call: no delay
    /// (a failure is logged).
    pub(super) async fn initial_delay(
        &self,
        handler: &Handler,
        ctx: &EventContext<'_>,
    ) -> Option<f64> {
        let now = self.clock.now();
        let details = ChangeDetails {
            reason: INITIAL_DELAY.to_owned(),
            ..ChangeDetails::default()
        };
        let cause = cause(
            handler,
            ctx,
            Some(&details),
            None,
            (Standing::first(now), now),
        );
        let context = self.context(handler, ctx, (None, None));
        match handler.guest.initial_delay(cause, context).await {
            // NaN, negative: no delay; absurd ones end at the end of time.
            Ok(delay) => delay.filter(|seconds| *seconds > 0.0),
            Err(error) => {
                object_log!(
                    error,
                    ctx.object,
                    "The initial delay of handler '{}' failed: {error}",
                    handler.spec.id
                );
                handler.record_failed(&self.journal, Self::about(ctx), &error.to_string());
                None
            }
        }
    }

    /// Logs Kopf's line for how an attempt ended and records it (a failed attempt also
    /// as a failure, with that line).
    fn conclude<T>(
        &self,
        handler: &Handler,
        ctx: &EventContext<'_>,
        called: Called,
        decision: &Decision<T>,
        success: Success,
    ) {
        let (object, line, verdict) = (ctx.object, decision.line.as_str(), decision.verdict);
        let logged = match (verdict, success) {
            (Verdict::Success, Success::Info) => {
                object_log!(info, object, "{line}");
                Some(Level::Info)
            }
            (Verdict::Success, Success::Debug) => {
                object_log!(debug, object, "{line}");
                Some(Level::Debug)
            }
            (Verdict::Success, Success::Silent) => None,
            (Verdict::Pending, _) => {
                object_log!(debug, object, "{line}");
                Some(Level::Debug)
            }
            _ => {
                object_log!(error, object, "{line}");
                handler.record_failed(&self.journal, Self::about(ctx), line);
                Some(Level::Error)
            }
        };
        if let Some(level) = logged
            && posts_logs(handler.spec.kind)
        {
            self.post_line(ctx, level, line);
        }
        let ended = Ended {
            elapsed: called.elapsed,
            verdict,
            fault: called.fault,
            line,
        };
        handler.record_finished(&self.journal, Self::about(ctx), ended);
    }

    /// Logs one of Kopf's lines about the event's object (a changing cycle's), and posts
    /// it as an Event when `posting.loggers` is on, as Kopf's object logger does.
    pub(super) fn say(&self, ctx: &EventContext<'_>, level: Level, line: &str) {
        let object = ctx.object;
        match level {
            Level::Debug => object_log!(debug, object, "{line}"),
            Level::Info => object_log!(info, object, "{line}"),
            Level::Warning => object_log!(warn, object, "{line}"),
            Level::Error => object_log!(error, object, "{line}"),
        }
        self.post_line(ctx, level, line);
    }

    /// Posts a line about the event's object as an Event with reason `Logging`, when
    /// `posting.loggers` is on and the line is at `posting.level` or above.
    fn post_line(&self, ctx: &EventContext<'_>, level: Level, line: &str) {
        if self.poster.admits_log(posting_level(level))
            && let Some(event) = from_log(&ctx.event.body, level, line)
        {
            self.poster.post(event);
        }
    }

    /// Posts a Warning Event about the event's object, from the operator itself.
    pub(super) fn warn_about(&self, ctx: &EventContext<'_>, reason: &str, message: String) {
        if let Some(involved) = ObjectRef::of(&ctx.event.body) {
            self.poster
                .post(PostedEvent::warning(involved, reason, message));
        }
    }
}

/// The cause of one call about the event's object, for an attempt that stands at
/// `standing` `now` (handler time).
fn cause(
    handler: &Handler,
    ctx: &EventContext<'_>,
    details: Option<&ChangeDetails>,
    memo: Option<String>,
    (standing, now): (Standing, chrono::DateTime<chrono::Utc>),
) -> runtime::Cause {
    let resource = &ctx.stream.resource;
    runtime::Cause {
        handler_id: handler.spec.id.clone(),
        kind: handler.spec.kind,
        resource: runtime::Resource {
            group: resource.group.clone(),
            version: resource.version.clone(),
            plural: resource.plural.clone(),
            kind: resource.kind.clone(),
            namespaced: resource.namespaced,
        },
        event_type: match ctx.event.event_type {
            EventType::Listed => None,
            EventType::Added => Some(runtime::EventType::Added),
            EventType::Modified => Some(runtime::EventType::Modified),
            EventType::Deleted => Some(runtime::EventType::Deleted),
        },
        // Timers carry retry and time details but no reason and no change.
        reason: details.map(|d| d.reason.clone()).filter(|r| !r.is_empty()),
        body: ctx.body.to_string(),
        old: details.map(|d| d.old.clone()).filter(|v| !v.is_empty()),
        new: details.map(|d| d.new.clone()).filter(|v| !v.is_empty()),
        diff: details.map(|d| d.diff.clone()).filter(|v| !v.is_empty()),
        retry: standing.retries,
        started: changes::format_time(standing.started),
        runtime_seconds: changes::seconds(now - standing.started),
        param: handler.spec.param.clone(),
        memo,
    }
}

/// Kopf's `HandlerChildrenRetry`: a handler that returned is not done while sub-handlers
/// it declared are unfinished; nor is one whose call failed in a sub-handler (the failure
/// is that sub-handler's, and the handler's own code did not run to its end: it is
/// called again at once if nothing else is pending).
fn awaiting_children(attempt: Attempt, id: &str, subhandlers: &dyn Subhandling) -> Attempt {
    let pending = subhandlers.pending(id);
    match attempt {
        Attempt::Success(_) if pending.is_some() => Attempt::ChildrenRetry { delay: pending },
        Attempt::Arbitrary { message } if subhandlers.interrupted(&message) => {
            let delay = subhandlers.pending(id).or(Some(0.0));
            Attempt::ChildrenRetry { delay }
        }
        attempt => attempt,
    }
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
