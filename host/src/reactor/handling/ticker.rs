//! [`Ticker`]: one timer or daemon of one object, as a task of its own.
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
//! The initial delay is the registration's, or (Kopf's callable `initial_delay`) the
//! guest's answer for the object, asked once per task through its `when` export.
//!
//! Once stopped (KOPF.md §1.9), a task stops as Kopf stops one: its sleeps end at once
//! and its call sees why (`stopped`); a daemon with a `cancellation_backoff` is given
//! that long to exit gracefully (`DAEMON_SIGNALLED`), then with a `cancellation_timeout`
//! that long to exit by force (`DAEMON_CANCELLED`: a compiled guest cannot be interrupted
//! where it stands, so this is a last notice it can read), and then its call is
//! abandoned (`DAEMON_ABANDONED`): the call's future, and with it the guest's instance,
//! is dropped, its outcome and patch are lost, and whoever waited for the task (the
//! deletion, before it releases the finalizer) goes on. Without a timeout the task is
//! waited for, however long the call takes (its deadline bounds it). Timers have neither
//! backoff nor timeout.
//!
//! `cancellation_polling` is how often a task asked to stop, without a timeout, is
//! checked while it has not exited: each check is Kopf's "is still exiting" line and a
//! [`Record::TaskStillExiting`]. In Kopf a check is also when the exit is noticed (the
//! object is processed again every `polling` seconds, and its finalizer released at the
//! first check after the exit); here whoever waits for the task awaits it, so the exit
//! is noticed at once, between checks. A check never interrupts the call: a compiled
//! guest is stopped where it stands only by abandoning its call, which is what
//! `cancellation_timeout` is for (or its deadline's epoch interruption, as any call).
//!
//! However the task ends (its work is over, or its call abandoned), it is stopped for
//! `DONE` last, as Kopf's daemon runner does, and a [`Record::TaskEnded`] says why it
//! stopped. No call of the task runs by then, so no guest reads `DONE` (Kopf's reaches
//! the threads a sync daemon leaves behind; a component has none).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::watch;

use super::calls::{Attempting, Calls, ChangeDetails, Success};
use super::{EventContext, StreamContext};
use crate::clock::Clock;
use crate::clock::after_seconds as after;
use crate::handlers::execution::{self, Retrying, Standing, Verdict};
use crate::handlers::{Cancellation, Stopper};
use crate::handlers::{DaemonSleeps, Handler, Schedule, SharedProgress};
use crate::journal::{Journal, Record};
use crate::object_log::object_log;
use crate::reactor::changes::{self, ChangeSettings, Patch};
use crate::reactor::objects::{EventType, ObjectEvent, ObjectMemory};
use crate::reactor::patching::{Applied, Patcher, Target};
use crate::runtime::HandlerKind;
use crate::runtime::StopReasons;

/// One timer or daemon of one object.
pub(super) struct Ticker {
    pub(super) calls: Calls,
    pub(super) patcher: Patcher,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) stream: Arc<StreamContext>,
    pub(super) handler: Arc<Handler>,
    pub(super) object: String,
    pub(super) memory: Arc<ObjectMemory>,
    /// The object's event as last seen (its text whole, for the guest).
    pub(super) latest: watch::Receiver<ObjectEvent>,
    /// When the object last changed (what `idle` waits on).
    pub(super) changed: watch::Receiver<DateTime<Utc>>,
    pub(super) stop: Stopper,
    pub(super) progress: SharedProgress,
    /// The operator's annotation keys (for the touch that follows a daemon's exit).
    pub(super) settings: Arc<ChangeSettings>,
}

/// How a tick ended.
enum Tick {
    /// Call again after this many seconds (a failure that is retried).
    Retry(f64),
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

/// Which task of which object, for its log lines and records.
struct TaskName {
    /// Kopf's display name: `Daemon 'x'`.
    name: String,
    guest: String,
    handler: String,
    object: String,
}

impl TaskName {
    fn of(handler: &Handler, object: &str) -> TaskName {
        TaskName {
            name: execution::display_name(handler.spec.kind, &handler.spec.id),
            guest: handler.guest.name().to_owned(),
            handler: handler.spec.id.clone(),
            object: object.to_owned(),
        }
    }
}

/// Once `stopper` is stopped: Kopf's stopping of a daemon (backoff, timeout) on handler
/// time; ends when its call is to be abandoned, never without a timeout (then it checks
/// every `polling` seconds that the task is still exiting, until the task ends).
async fn stopping(
    stopper: Stopper,
    cancellation: Cancellation,
    clock: Arc<dyn Clock>,
    journal: Journal,
    task: &TaskName,
) {
    let TaskName { name, object, .. } = task;
    stopper.stopped().await;
    if let Some(backoff) = cancellation.backoff {
        stopper.stop(StopReasons::DAEMON_SIGNALLED);
        object_log!(
            debug,
            object.as_str(),
            "{name} is signalled to exit gracefully."
        );
        clock.sleep_until(after(clock.now(), backoff)).await;
    }
    let Some(timeout) = cancellation.timeout else {
        let polling = cancellation.polling;
        loop {
            clock.sleep_until(after(clock.now(), polling)).await;
            object_log!(
                debug,
                object.as_str(),
                "{name} is still exiting. The next check is in {polling} seconds."
            );
            journal.push(Record::TaskStillExiting {
                guest: task.guest.clone(),
                handler: task.handler.clone(),
                object: object.clone(),
            });
        }
    };
    stopper.stop(StopReasons::DAEMON_CANCELLED);
    object_log!(
        debug,
        object.as_str(),
        "{name} is signalled to exit by force."
    );
    clock.sleep_until(after(clock.now(), timeout)).await;
    stopper.stop(StopReasons::DAEMON_ABANDONED);
    object_log!(
        warn,
        object.as_str(),
        "{name} did not exit in time. Abandoning its call."
    );
}

impl Ticker {
    /// Runs the timer or daemon until it ends, or (a daemon with a cancellation timeout
    /// that did not exit in time) is abandoned.
    pub(super) async fn run(self) {
        let spec = &self.handler.spec;
        let task = TaskName::of(&self.handler, &self.object);
        let stopping = stopping(
            self.stop.clone(),
            spec.cancellation,
            self.clock.clone(),
            self.calls.journal().clone(),
            &task,
        );
        let work = async {
            if self.handler.spec.kind == HandlerKind::Daemon {
                self.run_daemon().await;
            } else {
                self.run_timer().await;
            }
        };
        tokio::select! {
            () = work => {}
            // Abandoned: the call in flight is dropped with `work`.
            () = stopping => {}
        }
        self.ended(&task);
    }

    /// The task is over: stopped for `DONE` (Kopf's runner sets it whatever ended the
    /// daemon), with Kopf's line for a daemon, and recorded.
    fn ended(&self, task: &TaskName) {
        let TaskName { name, object, .. } = task;
        let requested = self.stop.is_stopped();
        if self.handler.spec.kind == HandlerKind::Daemon {
            if requested {
                object_log!(
                    debug,
                    object.as_str(),
                    "{name} has exited on request and will not be retried or restarted."
                );
            } else {
                object_log!(
                    debug,
                    object.as_str(),
                    "{name} has exited on its own and will not be retried or restarted."
                );
            }
        }
        self.stop.stop(StopReasons::DONE);
        self.calls.journal().push(Record::TaskEnded {
            guest: task.guest.clone(),
            handler: task.handler.clone(),
            object: object.clone(),
            reasons: self.stop.reasons().to_string(),
        });
    }

    /// What the task's calls get of it: sleeps, the stop, the latest body.
    fn sleeps(&self) -> DaemonSleeps {
        let latest = self.latest.clone();
        DaemonSleeps {
            stopper: self.stop.clone(),
            clock: self.clock.clone(),
            progress: self.progress.clone(),
            latest: Arc::new(move || latest.borrow().text.clone()),
        }
    }

    /// Waits the initial delay (the registration's, or the guest's answer for the
    /// object); `false` when stopped meanwhile.
    async fn initial_delay(&self) -> bool {
        let schedule = &self.handler.spec.schedule;
        let delay = if schedule.initial_delay_callback {
            let seen = self.latest.borrow().clone();
            let event = ObjectEvent {
                event_type: EventType::Listed,
                ..seen
            };
            let ctx = EventContext::new(&self.stream, &event, &self.object);
            self.calls.initial_delay(&self.handler, &ctx).await
        } else {
            schedule.initial_delay
        };
        match delay {
            Some(delay) => self.sleep_until(after(self.clock.now(), delay)).await,
            None => !self.stop.is_stopped(),
        }
    }

    async fn run_daemon(&self) {
        let clock = self.clock.clone();
        if !self.initial_delay().await {
            return;
        }
        let sleeps = self.sleeps();
        let mut attempts = Attempts::default();
        loop {
            match self.call(&mut attempts, Some(&sleeps)).await {
                Tick::Retry(delay) if !self.stop.is_stopped() => {
                    if !self.sleep_until(after(clock.now(), delay)).await {
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

    async fn run_timer(&self) {
        let schedule = self.handler.spec.schedule;
        let clock = self.clock.clone();
        if !self.initial_delay().await {
            return;
        }
        // Timers see their stop and the latest body as daemons do (Kopf's `stopped`).
        let sleeps = self.sleeps();
        let mut changed = self.changed.clone();
        let mut attempts = Attempts::default();
        loop {
            if let Some(idle) = schedule.idle
                && !self.wait_idle(&mut changed, idle).await
            {
                return;
            }
            let tick_started = clock.now();
            let next = match self.call(&mut attempts, Some(&sleeps)).await {
                Tick::Gone => return,
                Tick::Retry(delay) => Some(after(clock.now(), delay)),
                Tick::Done => {
                    attempts = Attempts::default();
                    next_tick(&schedule, tick_started, clock.now())
                }
            };
            let waited = match next {
                Some(at) => self.sleep_until(at).await,
                None if schedule.idle.is_some() => self.wait_change(&mut changed).await,
                None => false,
            };
            if !waited {
                self.set_progress(false, None);
                return;
            }
        }
    }

    fn set_progress(&self, busy: bool, due: Option<DateTime<Utc>>) {
        crate::handlers::set_progress(&self.progress, busy, due);
    }

    /// Sleeps on handler time; `false` when stopped meanwhile.
    async fn sleep_until(&self, at: DateTime<Utc>) -> bool {
        self.set_progress(false, Some(at));
        let sleep = self.clock.sleep_until(at);
        let slept = tokio::select! {
            () = self.stop.stopped() => false,
            () = sleep => true,
        };
        self.set_progress(true, None);
        slept && !self.stop.is_stopped()
    }

    /// Waits until the object has not changed for `idle` seconds; `false` when stopped.
    async fn wait_idle(&self, changes: &mut watch::Receiver<DateTime<Utc>>, idle: f64) -> bool {
        loop {
            let due = after(*changes.borrow_and_update(), idle);
            if self.clock.now() >= due {
                return !self.stop.is_stopped();
            }
            self.set_progress(false, Some(due));
            let sleep = self.clock.sleep_until(due);
            tokio::select! {
                () = self.stop.stopped() => return false,
                () = sleep => {}
                changed = changes.changed() => if changed.is_err() { return false },
            }
            self.set_progress(true, None);
        }
    }

    /// Waits for the object's next change; `false` when stopped.
    async fn wait_change(&self, changes: &mut watch::Receiver<DateTime<Utc>>) -> bool {
        changes.borrow_and_update();
        self.set_progress(false, None);
        let changed = tokio::select! {
            () = self.stop.stopped() => false,
            changed = changes.changed() => changed.is_ok(),
        };
        self.set_progress(true, None);
        changed && !self.stop.is_stopped()
    }

    /// Calls the handler once and applies what it returned.
    async fn call(&self, attempts: &mut Attempts, sleeps: Option<&DaemonSleeps>) -> Tick {
        let handler = &self.handler;
        let spec = &handler.spec;
        let seen = self.latest.borrow().clone();
        let body = seen.body.clone();
        let now = self.clock.now();
        let started = *attempts.started.get_or_insert(now);
        let details = ChangeDetails {
            sleeps: sleeps.cloned(),
            ..ChangeDetails::default()
        };
        // Timers are called about no event (Kopf's `type` is None for them).
        let event = ObjectEvent {
            event_type: EventType::Listed,
            ..seen
        };
        let ctx = EventContext::new(&self.stream, &event, &self.object);
        let mut patch = Patch::default();
        let how = Attempting {
            details: Some(&details),
            standing: Some(Standing {
                retries: attempts.retry,
                started,
            }),
            retrying: Retrying::Later,
            success: Success::Info,
            subhandlers: None,
        };
        let decision = self
            .calls
            .attempt(handler, &ctx, how, &self.memory, &mut patch)
            .await;
        let tick = match decision.verdict {
            Verdict::Retry | Verdict::Pending => {
                attempts.retry += 1;
                Tick::Retry(decision.outcome.delay.unwrap_or(0.0))
            }
            Verdict::Success | Verdict::Failure | Verdict::Ignored => {
                if let Some(result) = &decision.outcome.result {
                    patch.deliver_result(&spec.id, result);
                }
                Tick::Done
            }
        };
        if matches!(tick, Tick::Done) && spec.kind == HandlerKind::Daemon && !self.stop.is_stopped()
        {
            // Before the patch goes out: its echo must find the daemon exited, so that
            // the cycle it starts removes the finalizer the daemon no longer needs.
            self.memory.tasks.mark_exited(handler);
            if patch.is_empty() {
                // Nothing else to patch (a final failure has no result): a touch, so
                // that an echo still comes and runs that cycle.
                let now = changes::touch_value(self.clock.now());
                let settings = &self.settings;
                settings.progress().touch(&body, &mut patch, Some(&now));
            }
        }
        self.send(patch, &body).await.unwrap_or(tick)
    }

    /// Applies a tick's patch; `Some(Tick::Gone)` when the object is gone.
    async fn send(&self, patch: Patch, body: &Value) -> Option<Tick> {
        if patch.is_empty() {
            return None;
        }
        let target = Target::of(&self.stream.resource, body);
        match self.patcher.apply(target, body, &patch).await {
            Ok(Applied::Gone) => Some(Tick::Gone),
            Ok(_) => None,
            Err(error) => {
                object_log!(
                    error,
                    self.object.as_str(),
                    "{} could not patch the object: {error}",
                    execution::display_name(self.handler.spec.kind, &self.handler.spec.id)
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

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
}
