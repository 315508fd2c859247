//! Timers and daemons (KOPF.md §1.9, §1.10; Kopf's "spawning" handlers): one task per
//! object and handler, running while the object exists, matches the handler's filters
//! and is not being deleted.
//!
//! A timer's task waits its `initial_delay` once, then loops: it waits for `idle` quiet
//! seconds when asked to, calls the handler with the object as last seen, applies the
//! handler's patch and result, and sleeps: the retry delay after a temporary failure,
//! else the `interval` (with `sharp`, to the next multiple of it counted from the
//! tick's start), else (only `idle`) until the object changes again; with neither it
//! runs once.
//!
//! A daemon's task waits its `initial_delay`, then calls the handler, which runs as long
//! as it likes, sleeping with `sleep_unless_stopped` (its sleeps do not count against
//! its call budget). When the call ends it is retried after a temporary failure; after
//! a success or a final failure the daemon has exited for good for this object (until
//! the operator restarts), and no longer needs the finalizer.
//!
//! Tasks are started after the object carries the finalizer (they require it, KOPF.md
//! §4.6), and stopped when the object is being deleted or deleted, when the filters stop
//! matching, and when their stream stops (pausing, exiting). A stop never interrupts a
//! call: a daemon's sleeps return `false` at once, and the task ends when the call has
//! returned (or at its deadline). Everything that decides on time goes through the
//! operator's clock, so `kapsel test` advances timers and daemons like any handler time.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::calls::{CallOutcome, ChangeDetails, Failure};
use super::changes::{self, Patch};
use super::indexes::ObjectKey;
use super::memory::ObjectMemory;
use super::patching::{self, Applied, Target};
use super::process::{Processor, StreamContext};
use super::registry::{ErrorsMode, Handler, Schedule};
use super::stream::{EventType, ObjectEvent};
use crate::object_log::object_log;

/// The timers and daemons of one object; part of the object's memory.
#[derive(Debug, Default)]
pub(crate) struct ObjectDaemons(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    /// By handler identity (guest, id).
    running: HashMap<(String, String), Running>,
    /// Daemons that have exited for good for this object (success or final failure):
    /// not started again, and no longer needing the finalizer.
    exited: HashSet<(String, String)>,
    /// What resets `idle` when it changes: spec, labels, annotations, status.
    fingerprint: Option<Value>,
    /// When the fingerprint last changed (handler time); the tasks wait on it.
    changed: Option<watch::Sender<DateTime<Utc>>>,
}

#[derive(Debug)]
struct Running {
    stop: CancellationToken,
    /// The object as last seen: calls get the freshest body (Kopf's live kwargs).
    body: watch::Sender<Arc<Value>>,
    #[cfg_attr(
        not(any(test, feature = "testing")),
        expect(
            dead_code,
            reason = "read by `kapsel test`'s settling (feature `testing`)"
        )
    )]
    progress: Arc<Mutex<Progress>>,
    task: tokio::task::JoinHandle<()>,
}

/// Where a task is, for `kapsel test`'s "settled".
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(
    not(any(test, feature = "testing")),
    expect(
        dead_code,
        reason = "read by `kapsel test`'s settling (feature `testing`)"
    )
)]
struct Progress {
    /// Not waiting: starting, or calling the handler and sending its patch.
    busy: bool,
    /// When its current wait ends on its own (none: it waits for a change).
    due: Option<DateTime<Utc>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ObjectDaemons {
    #[cfg(any(test, feature = "testing"))]
    /// No task is busy, and none waits for a time that has come.
    pub(crate) fn settled(&self, now: DateTime<Utc>) -> bool {
        lock(&self.0).running.values().all(|r| {
            let progress = *lock(&r.progress);
            r.task.is_finished() || (!progress.busy && progress.due.is_none_or(|due| due > now))
        })
    }

    /// Whether a task of this handler is running (or stopping).
    fn is_running(&self, identity: &(String, String)) -> bool {
        lock(&self.0)
            .running
            .get(identity)
            .is_some_and(|r| !r.task.is_finished())
    }

    /// Notes the object as seen now: a change of what `idle` watches restarts it. The
    /// operator's own bookkeeping (annotations under `prefix`: progress records, the
    /// diff-base, touch-dummy) is no change of the object; results in `status` are.
    fn observe(
        &self,
        body: &Arc<Value>,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> watch::Receiver<DateTime<Utc>> {
        let own = format!("{prefix}/");
        let annotations: serde_json::Map<String, Value> = body
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(key, _)| !key.starts_with(&own))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let fingerprint = serde_json::json!({
            "spec": body.get("spec"),
            "labels": body.pointer("/metadata/labels"),
            "annotations": annotations,
            "status": body.get("status"),
        });
        let mut state = lock(&self.0);
        let changed = state
            .changed
            .get_or_insert_with(|| watch::Sender::new(now))
            .clone();
        if state.fingerprint.as_ref() != Some(&fingerprint) {
            if state.fingerprint.is_some() {
                changed.send_replace(now);
            }
            state.fingerprint = Some(fingerprint);
        }
        for running in state.running.values() {
            running.body.send_replace(body.clone());
        }
        changed.subscribe()
    }

    /// Stops the tasks `keep` rejects and waits until they have ended.
    async fn stop_where(&self, keep: impl Fn(&(String, String)) -> bool) {
        let stopping: Vec<Running> = {
            let mut state = lock(&self.0);
            let ids: Vec<(String, String)> = state
                .running
                .keys()
                .filter(|id| !keep(id))
                .cloned()
                .collect();
            ids.iter()
                .filter_map(|id| state.running.remove(id))
                .collect()
        };
        for running in stopping {
            running.stop.cancel();
            // A task that panicked is gone as well.
            let _ = running.task.await;
        }
    }

    /// The daemons that have exited for good.
    fn exited(&self) -> HashSet<(String, String)> {
        lock(&self.0).exited.clone()
    }

    /// Stops every timer and daemon of the object and waits until they have ended.
    pub(crate) async fn stop_all(&self) {
        self.stop_where(|_| false).await;
    }
}

impl Processor {
    /// The timers and daemons whose filters match the object, daemons that exited for
    /// good left out (deletion aside: a deleted object keeps needing the finalizer until
    /// its tasks have stopped).
    pub(crate) async fn matching_daemons(
        &self,
        stream: &StreamContext,
        event: &ObjectEvent,
        object: &str,
        memory: &ObjectMemory,
        body_json: &Arc<str>,
    ) -> Vec<Arc<Handler>> {
        let mut matching = Vec::new();
        if stream.handlers.spawning.is_empty() {
            return matching;
        }
        let exited = memory.daemons.exited();
        for handler in &stream.handlers.spawning {
            if exited.contains(&handler.identity()) {
                continue;
            }
            if handler.spec.filters.matches_body(&event.body)
                && self
                    .passes_when(handler, stream, event, object, body_json, None)
                    .await
            {
                matching.push(handler.clone());
            }
        }
        matching
    }

    /// Starts the timers and daemons that match and are not running, and stops the
    /// others. They start only once the object carries the finalizer, and never while it
    /// is being deleted.
    pub(crate) async fn sync_daemons(
        &self,
        stream: &Arc<StreamContext>,
        event: &ObjectEvent,
        object: &str,
        memory: &Arc<ObjectMemory>,
        matching: &[Arc<Handler>],
    ) {
        if stream.handlers.spawning.is_empty() {
            return;
        }
        let tasks = &memory.daemons;
        let changed = tasks.observe(&event.body, &self.changes.prefix, self.clock.now());
        let body: &Value = &event.body;
        if changes::is_deletion_ongoing(body) {
            tasks.stop_all().await;
            return;
        }
        tasks
            .stop_where(|id| matching.iter().any(|h| &h.identity() == id))
            .await;
        if !changes::is_deletion_blocked(body, &self.changes.finalizer) {
            // The finalizer comes first; the event that shows it starts the tasks.
            return;
        }
        for handler in matching {
            let identity = handler.identity();
            if tasks.is_running(&identity) {
                continue;
            }
            let stop = stream.stopping.child_token();
            let (body, latest) = watch::channel(event.body.clone());
            let progress = Arc::new(Mutex::new(Progress {
                busy: true,
                due: None,
            }));
            let ticker = Ticker {
                processor: self.clone(),
                stream: stream.clone(),
                handler: handler.clone(),
                key: event.key.clone(),
                object: object.to_owned(),
                memory: memory.clone(),
                body: latest,
                changed: changed.clone(),
                stop: stop.clone(),
                progress: progress.clone(),
            };
            let task = stream.daemons.spawn(ticker.run());
            lock(&tasks.0).running.insert(
                identity,
                Running {
                    stop,
                    body,
                    progress,
                    task,
                },
            );
        }
    }
}

/// What a daemon's sleeps (`sleep_unless_stopped`) need: the stop, the clock, and where
/// `kapsel test` sees that the daemon waits rather than works.
#[derive(Clone)]
pub(crate) struct DaemonSleeps {
    stop: CancellationToken,
    clock: Arc<dyn crate::clock::Clock>,
    progress: Arc<Mutex<Progress>>,
}

impl std::fmt::Debug for DaemonSleeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSleeps")
            .field("stopped", &self.stop.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl DaemonSleeps {
    /// Sleeps on handler time; `false` once the daemon must stop (at once if it must).
    pub(crate) async fn sleep(&self, duration: Duration) -> bool {
        if self.stop.is_cancelled() {
            return false;
        }
        let until = after(self.clock.now(), duration.as_secs_f64());
        *lock(&self.progress) = Progress {
            busy: false,
            due: Some(until),
        };
        let slept = tokio::select! {
            () = self.stop.cancelled() => false,
            () = self.clock.sleep_until(until) => true,
        };
        *lock(&self.progress) = Progress {
            busy: true,
            due: None,
        };
        slept && !self.stop.is_cancelled()
    }
}

/// One timer or daemon of one object.
struct Ticker {
    processor: Processor,
    stream: Arc<StreamContext>,
    handler: Arc<Handler>,
    key: ObjectKey,
    object: String,
    memory: Arc<ObjectMemory>,
    body: watch::Receiver<Arc<Value>>,
    changed: watch::Receiver<DateTime<Utc>>,
    stop: CancellationToken,
    progress: Arc<Mutex<Progress>>,
}

/// How a tick ended.
enum Tick {
    /// Call again after this delay (a temporary failure).
    Retry(Duration),
    /// The tick is over (success or final failure): the schedule decides what is next.
    Done,
    /// The object is gone.
    Gone,
}

/// The attempts of one tick (reset after each success or final failure).
#[derive(Default)]
struct Attempts {
    retry: u32,
    started: Option<DateTime<Utc>>,
}

fn after(time: DateTime<Utc>, seconds: f64) -> DateTime<Utc> {
    Duration::try_from_secs_f64(seconds)
        .ok()
        .and_then(|d| TimeDelta::from_std(d).ok())
        .and_then(|d| time.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// How log lines name the handler, as Kopf's do.
fn what(handler: &Handler) -> &'static str {
    if handler.spec.kind == super::registry::Kind::Daemon {
        "Daemon"
    } else {
        "Timer"
    }
}

fn seconds_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).to_std().map_or(0.0, |d| d.as_secs_f64())
}

/// When the next tick starts, by the schedule; `None`: wait for a change (only `idle`),
/// or stop (neither `interval` nor `idle`).
fn next_tick(
    schedule: &Schedule,
    tick_started: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let interval = schedule.interval?;
    if schedule.sharp {
        let elapsed = seconds_between(tick_started, now);
        Some(after(now, interval - elapsed % interval))
    } else {
        Some(after(now, interval))
    }
}

impl Ticker {
    async fn run(self) {
        if self.handler.spec.kind == super::registry::Kind::Daemon {
            self.run_daemon().await;
        } else {
            self.run_timer().await;
        }
    }

    async fn run_daemon(self) {
        let clock = self.processor.clock.clone();
        if let Some(delay) = self.handler.spec.schedule.initial_delay
            && !self.sleep_until(after(clock.now(), delay)).await
        {
            return;
        }
        let sleeps = DaemonSleeps {
            stop: self.stop.clone(),
            clock: clock.clone(),
            progress: self.progress.clone(),
        };
        let mut attempts = Attempts::default();
        loop {
            match self.call(&mut attempts, Some(&sleeps)).await {
                Tick::Retry(delay) if !self.stop.is_cancelled() => {
                    if !self
                        .sleep_until(after(clock.now(), delay.as_secs_f64()))
                        .await
                    {
                        break;
                    }
                }
                // Stopped while running: it may start again (a later event, a resume).
                Tick::Retry(_) => break,
                Tick::Gone => break,
                // Exited for good (`call` noted it before sending the last patch).
                Tick::Done => break,
            }
        }
        self.set_progress(false, None);
    }

    async fn run_timer(mut self) {
        let schedule = self.handler.spec.schedule;
        let clock = self.processor.clock.clone();
        if let Some(delay) = schedule.initial_delay
            && !self.sleep_until(after(clock.now(), delay)).await
        {
            return;
        }
        let mut attempts = Attempts::default();
        loop {
            if let Some(idle) = schedule.idle
                && !self.wait_idle(idle).await
            {
                return;
            }
            let tick_started = clock.now();
            let next = match self.call(&mut attempts, None).await {
                Tick::Gone => return,
                Tick::Retry(delay) => Some(after(clock.now(), delay.as_secs_f64())),
                Tick::Done => {
                    attempts = Attempts::default();
                    next_tick(&schedule, tick_started, clock.now())
                }
            };
            let waited = match next {
                Some(at) => self.sleep_until(at).await,
                None if schedule.idle.is_some() => self.wait_change().await,
                None => false,
            };
            if !waited {
                self.set_progress(false, None);
                return;
            }
        }
    }

    fn set_progress(&self, busy: bool, due: Option<DateTime<Utc>>) {
        *lock(&self.progress) = Progress { busy, due };
    }

    /// Sleeps on handler time; `false` when stopped meanwhile.
    async fn sleep_until(&self, at: DateTime<Utc>) -> bool {
        self.set_progress(false, Some(at));
        let sleep = self.processor.clock.sleep_until(at);
        let slept = tokio::select! {
            () = self.stop.cancelled() => false,
            () = sleep => true,
        };
        self.set_progress(true, None);
        slept && !self.stop.is_cancelled()
    }

    /// Waits until the object has not changed for `idle` seconds; `false` when stopped.
    async fn wait_idle(&mut self, idle: f64) -> bool {
        loop {
            let due = after(*self.changed.borrow_and_update(), idle);
            if self.processor.clock.now() >= due {
                return !self.stop.is_cancelled();
            }
            self.set_progress(false, Some(due));
            let sleep = self.processor.clock.sleep_until(due);
            tokio::select! {
                () = self.stop.cancelled() => return false,
                () = sleep => {}
                changed = self.changed.changed() => if changed.is_err() { return false },
            }
            self.set_progress(true, None);
        }
    }

    /// Waits for the object's next change; `false` when stopped.
    async fn wait_change(&mut self) -> bool {
        self.changed.borrow_and_update();
        self.set_progress(false, None);
        let changed = tokio::select! {
            () = self.stop.cancelled() => false,
            changed = self.changed.changed() => changed.is_ok(),
        };
        self.set_progress(true, None);
        changed && !self.stop.is_cancelled()
    }

    /// Calls the handler once and applies what it returned.
    async fn call(&self, attempts: &mut Attempts, sleeps: Option<&DaemonSleeps>) -> Tick {
        let processor = &self.processor;
        let handler = &self.handler;
        let spec = &handler.spec;
        let id = &spec.id;
        let what = what(handler);
        let object = self.object.as_str();
        let body = self.body.borrow().clone();
        let now = processor.clock.now();
        let started = *attempts.started.get_or_insert(now);
        let details = ChangeDetails {
            retry: attempts.retry,
            started: changes::format_time(started),
            runtime_seconds: seconds_between(started, now),
            sleeps: sleeps.cloned(),
            ..ChangeDetails::default()
        };
        let event = ObjectEvent {
            // Timers are called about no event (Kopf's `type` is None for them).
            event_type: EventType::Listed,
            key: self.key.clone(),
            body: body.clone(),
        };
        let body_json: Arc<str> = Arc::from(body.to_string());
        let mut patch = Patch::default();
        let invocation = processor
            .call_patching(
                handler,
                &self.stream,
                &event,
                object,
                &body_json,
                &details,
                &self.memory,
                &mut patch,
            )
            .await;
        let attempt = attempts.retry + 1;
        let runtime = seconds_between(started, processor.clock.now());
        let (tick, verdict) = match invocation.outcome {
            CallOutcome::Done(result) => {
                let result = result
                    .as_deref()
                    .and_then(|r| serde_json::from_str(r).ok())
                    .unwrap_or(Value::Null);
                patch.deliver_result(id, &result);
                object_log!(info, object, "{what} '{id}' succeeded.");
                (Tick::Done, "success")
            }
            // Not an answer `invoke` gives; nothing to apply.
            CallOutcome::Index(_) => (Tick::Done, "success"),
            CallOutcome::Failed { error, failure } => {
                processor.record_failure(handler, object, &error);
                let retry_after = match failure {
                    Failure::Temporary(delay) => Some(delay),
                    Failure::Permanent => None,
                    Failure::Arbitrary => match spec.errors_mode() {
                        ErrorsMode::Temporary => Some(spec.backoff()),
                        ErrorsMode::Permanent => None,
                        ErrorsMode::Ignored => None,
                    },
                };
                let ignored = matches!(failure, Failure::Arbitrary)
                    && spec.errors_mode() == ErrorsMode::Ignored;
                let out_of_retries = spec.retries.is_some_and(|limit| attempt >= limit);
                let out_of_time = spec.timeout_seconds.is_some_and(|limit| runtime >= limit);
                match retry_after {
                    None if ignored => {
                        object_log!(
                            error,
                            object,
                            "{what} '{id}' failed with an exception. Will ignore: {error}"
                        );
                        (Tick::Done, "ignored")
                    }
                    Some(_) if out_of_retries => {
                        object_log!(
                            error,
                            object,
                            "{what} '{id}' has exceeded {attempt} retries: {error}"
                        );
                        (Tick::Done, "failure")
                    }
                    Some(_) if out_of_time => {
                        object_log!(
                            error,
                            object,
                            "{what} '{id}' has timed out after {runtime:.1} seconds: {error}"
                        );
                        (Tick::Done, "failure")
                    }
                    Some(delay) => {
                        object_log!(
                            error,
                            object,
                            "{what} '{id}' failed temporarily: {error}. Will retry in {} seconds.",
                            delay.as_secs_f64()
                        );
                        attempts.retry = attempt;
                        (Tick::Retry(delay), "retry")
                    }
                    None => {
                        object_log!(error, object, "{what} '{id}' failed permanently: {error}");
                        (Tick::Done, "failure")
                    }
                }
            }
        };
        processor.record_finished(
            handler,
            object,
            invocation.elapsed,
            verdict,
            invocation.fault,
        );
        if matches!(tick, Tick::Done)
            && spec.kind == super::registry::Kind::Daemon
            && !self.stop.is_cancelled()
        {
            // Before the patch goes out: its echo must find the daemon exited, so that
            // the cycle it starts removes the finalizer the daemon no longer needs.
            lock(&self.memory.daemons.0)
                .exited
                .insert(handler.identity());
        }
        self.send(patch, &body).await.unwrap_or(tick)
    }

    /// Applies a tick's patch; `Some(Tick::Gone)` when the object is gone.
    async fn send(&self, patch: Patch, body: &Value) -> Option<Tick> {
        if patch.is_empty() {
            return None;
        }
        let meta = body.get("metadata");
        let text = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
        let target = Target {
            resource: &self.stream.resource,
            namespace: text("namespace"),
            name: text("name").unwrap_or_default(),
        };
        let processor = &self.processor;
        match patching::apply(&processor.client, target, body, &patch, &processor.recorder).await {
            Ok(Applied::Gone) => Some(Tick::Gone),
            Ok(_) => None,
            Err(error) => {
                object_log!(
                    error,
                    self.object.as_str(),
                    "{} '{}' could not patch the object: {error}",
                    what(&self.handler),
                    self.handler.spec.id
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::seconds(seconds)
    }

    #[test]
    fn the_next_tick_follows_the_schedule() {
        let every_10 = Schedule {
            interval: Some(10.0),
            ..Schedule::default()
        };
        // Measured after the call: a 3-second call pushes the next tick to 13.
        assert_eq!(next_tick(&every_10, at(0), at(3)), Some(at(13)));
        let sharp = Schedule {
            sharp: true,
            ..every_10
        };
        // Sharp: the call's own time is taken off, so ticks stay 10 s apart.
        assert_eq!(next_tick(&sharp, at(0), at(3)), Some(at(10)));
        assert_eq!(next_tick(&sharp, at(0), at(23)), Some(at(30)));
        // Without an interval: a change (idle) or nothing decides.
        let idle = Schedule {
            idle: Some(5.0),
            ..Schedule::default()
        };
        assert_eq!(next_tick(&idle, at(0), at(1)), None);
    }

    #[test]
    fn idle_restarts_on_changes_of_what_users_change() {
        let timers = ObjectDaemons::default();
        let body = |spec: i64, version: &str| {
            Arc::new(serde_json::json!({
                "metadata": {"resourceVersion": version, "labels": {"a": "b"}},
                "spec": {"size": spec},
            }))
        };
        let changed = timers.observe(&body(1, "1"), "p", at(0));
        assert_eq!(*changed.borrow(), at(0));
        // Only the resourceVersion moved: not a change.
        timers.observe(&body(1, "2"), "p", at(5));
        assert_eq!(*changed.borrow(), at(0));
        // The operator's own records are not a change either.
        let mut recorded = (*body(1, "3")).clone();
        recorded["metadata"]["annotations"] = serde_json::json!({"p/tick": "{}"});
        timers.observe(&Arc::new(recorded), "p", at(6));
        assert_eq!(*changed.borrow(), at(0));
        timers.observe(&body(2, "4"), "p", at(7));
        assert_eq!(*changed.borrow(), at(7));
        assert!(timers.settled(at(100)), "no timer runs");
    }
}
