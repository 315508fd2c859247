//! [`GuestServices`]: what a guest may use during one call — its own indexes, Events
//! about the handled object (or another), the Kubernetes calls it declared, and for
//! daemons their stop-aware sleeps ([`DaemonSleeps`]), for changing handlers their
//! sub-handlers ([`Subhandling`]), and Kopf's settings, which startup handlers may change
//! ([`SettingsAccess`]). Handlers of objects and activities
//! (probes, startup, cleanup) get the same services, minus what they lack. What the guest
//! logs goes to the journal; its Kubernetes calls to the recording when one is made.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::indexes::Indexes;
use crate::clock::Clock;
use crate::cluster::{KubeAccess, Poster, Resource, from_guest, from_log, posting_level};
use crate::journal::{Journal, Record};
use crate::recording::Recorder;
use crate::runtime::{
    self, Caller, Declaration, Due, Guest, GuestEvent, HostServices, KubeError, KubeRequest,
    Outcome, StopReasons,
};
use crate::settings::SharedSettings;

/// A changing handler's sub-handlers during one call: which of those it declares run
/// now, and what became of them. Implemented by the changing stage, which keeps their
/// progress records.
pub(crate) trait Subhandling: Send + Sync {
    /// Declares the sub-handlers of `parent`; answers those to call now.
    fn execute(&self, parent: &str, declared: Vec<Declaration>) -> Result<Vec<Due>, String>;
    /// How the call of a due sub-handler ended.
    fn finished(&self, id: &str, outcome: Outcome);
    /// `None` when every sub-handler of `parent` is finished, else the seconds until the
    /// next one is due.
    fn pending(&self, parent: &str) -> Option<f64>;
    /// The call ended with `message` (a trap, its deadline, its memory) while
    /// sub-handlers were being called: the innermost one failed with it, as Kopf's
    /// failing sub-handler does, and those around it wait for it. `false`: none was.
    fn interrupted(&self, message: &str) -> bool;
}

/// The services of one call.
pub(crate) struct GuestServices {
    pub(crate) journal: Journal,
    pub(crate) indexes: Indexes,
    /// The calling guest: whose permissions its Kubernetes calls are checked against.
    pub(crate) guest: Guest,
    /// The handled object (`null` for activities): the default object of Events and the
    /// default namespace of Kubernetes calls.
    pub(crate) object: Arc<Value>,
    /// Where Events go; `None` where they cannot be posted (activities, about no object).
    pub(crate) poster: Option<Poster>,
    /// What the handler logs is posted as Events too when `posting.loggers` is on:
    /// changing, timer and daemon handlers, not event and index ones (as in Kopf).
    pub(crate) posts_logs: bool,
    /// The cluster for the guest's Kubernetes calls; `None` where there is none.
    pub(crate) kube: Option<KubeAccess>,
    /// Where `--record` writes each Kubernetes call and its answer.
    pub(crate) recorder: Recorder,
    /// Daemons' sleeps; other handlers are told to stop at once.
    pub(crate) sleeps: Option<DaemonSleeps>,
    /// A changing handler's sub-handlers; other handlers may declare none.
    pub(crate) subhandlers: Option<Arc<dyn Subhandling>>,
    /// Kopf's settings: every handler reads them, a startup handler may change them
    /// (until they are in force).
    pub(crate) settings: SettingsAccess,
    /// The handled object's resource, as discovery found it (`None` for activities).
    pub(crate) resource: Option<Arc<Resource>>,
}

/// How a call reaches the operator's settings.
#[derive(Clone, Debug)]
pub(crate) struct SettingsAccess {
    pub(crate) settings: SharedSettings,
    /// A startup handler: may merge changes.
    pub(crate) may_change: bool,
}

impl SettingsAccess {
    /// Reading only: every handler but startup ones.
    pub(crate) fn read_only(settings: &SharedSettings) -> SettingsAccess {
        SettingsAccess {
            settings: settings.clone(),
            may_change: false,
        }
    }
}

impl HostServices for GuestServices {
    fn log(&self, caller: &Caller, level: runtime::Level, message: &str) {
        self.journal.push(Record::GuestLog {
            guest: caller.guest.to_string(),
            handler: caller.handler_id.clone(),
            object: caller.object.clone(),
            level: level.as_str().to_owned(),
            message: message.to_owned(),
        });
        if self.posts_logs
            && let (Some(poster), Some(kube)) = (&self.poster, &self.kube)
            && poster.admits_log(posting_level(level))
            && let Some(event) = from_log(&self.object, level, message)
            && let Some(pace) = kube.admit_logged_event(caller, &event.involved)
        {
            poster.post_paced(event, pace);
        }
    }

    fn index_lookup(&self, caller: &Caller, index: &str, key: &str) -> Option<Vec<String>> {
        self.indexes.lookup(&caller.guest, index, key)
    }

    fn index_keys(&self, caller: &Caller, index: &str) -> Vec<String> {
        self.indexes.keys(&caller.guest, index)
    }

    fn post_event<'a>(
        &'a self,
        caller: &'a Caller,
        event: GuestEvent,
    ) -> BoxFuture<'a, Result<(), KubeError>> {
        Box::pin(async move {
            let (Some(poster), Some(kube)) = (&self.poster, &self.kube) else {
                return Err(runtime::not_available("posting Events"));
            };
            // Not posted, as Kopf does not post it: quietly, and without using the pace.
            if !poster.admits(&event.event_type) {
                return Ok(());
            }
            // No object named: the Event is about the object of the call.
            let own = event.object.is_none();
            let event = from_guest(&self.object, event)
                .map_err(|error| KubeError::local("Invalid", error.to_string()))?;
            // Never waits for the guest's pace: the poster does, in the background.
            let pace = kube
                .admit_event(&self.guest, caller, &event.involved, own)
                .await?;
            poster.post_paced(event, pace);
            Ok(())
        })
    }

    fn kube<'a>(
        &'a self,
        caller: &'a Caller,
        request: KubeRequest,
    ) -> BoxFuture<'a, Result<String, KubeError>> {
        Box::pin(async move {
            let Some(kube) = &self.kube else {
                return Err(runtime::not_available("Kubernetes calls"));
            };
            // The only path a guest's request takes, so the pair is recorded here.
            let recorded = self.recorder.is_on().then(|| request.clone());
            let answer = kube.call(&self.guest, &self.object, caller, request).await;
            if let Some(request) = recorded {
                self.recorder.call(caller, &request, &answer);
            }
            answer
        })
    }

    fn sleep_unless_stopped<'a>(
        &'a self,
        _caller: &'a Caller,
        duration: Duration,
    ) -> BoxFuture<'a, bool> {
        match &self.sleeps {
            Some(sleeps) => Box::pin(sleeps.sleep(duration)),
            // Not a daemon: nothing to sleep for.
            None => Box::pin(async { false }),
        }
    }

    fn stopped(&self, _caller: &Caller) -> StopReasons {
        self.sleeps
            .as_ref()
            .map_or_else(StopReasons::default, |sleeps| sleeps.stopper.reasons())
    }

    fn latest_body(&self, _caller: &Caller) -> Option<Arc<str>> {
        self.sleeps.as_ref().map(|sleeps| (sleeps.latest)())
    }

    fn execute_subhandlers(
        &self,
        _caller: &Caller,
        parent: &str,
        declared: Vec<Declaration>,
    ) -> Result<Vec<Due>, String> {
        match &self.subhandlers {
            Some(subhandlers) => subhandlers.execute(parent, declared),
            None => Err(runtime::NOT_CHANGING.to_owned()),
        }
    }

    fn subhandler_finished(&self, _caller: &Caller, id: &str, outcome: Outcome) {
        if let Some(subhandlers) = &self.subhandlers {
            subhandlers.finished(id, outcome);
        }
    }

    fn pending_subhandlers(&self, _caller: &Caller, parent: &str) -> Option<f64> {
        self.subhandlers.as_ref()?.pending(parent)
    }

    fn settings(&self, _caller: &Caller) -> String {
        self.settings.settings.to_json().to_string()
    }

    fn resource_info(&self, _caller: &Caller) -> Option<runtime::ResourceInfo> {
        self.resource.as_deref().map(Resource::info)
    }

    fn merge_settings(&self, caller: &Caller, changes: &str) -> Result<(), String> {
        if !self.settings.may_change {
            return Err(runtime::NOT_STARTUP.to_owned());
        }
        let changes: Value = serde_json::from_str(changes)
            .map_err(|e| format!("the settings' changes are not JSON: {e}"))?;
        self.settings
            .settings
            .merge(&changes)
            .map_err(|e| e.to_string())?;
        tracing::info!(
            guest = %caller.guest,
            handler = %caller.handler_id,
            "The operator's settings were changed: {changes}"
        );
        Ok(())
    }
}

/// Where a timer's or daemon's task is, for `kapsel test`'s "settled": busy, or waiting
/// until a time (or for a change).
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(
    not(any(test, feature = "testing")),
    expect(
        dead_code,
        reason = "read by `kapsel test`'s settling (feature `testing`)"
    )
)]
pub(crate) struct TaskProgress {
    /// Not waiting: starting, or calling the handler and sending its patch.
    pub(crate) busy: bool,
    /// When its current wait ends on its own (none: it waits for a change).
    pub(crate) due: Option<DateTime<Utc>>,
}

/// A task's progress, shared between the task and whoever asks whether it settled.
pub(crate) type SharedProgress = Arc<Mutex<TaskProgress>>;

/// Sets a task's progress.
pub(crate) fn set_progress(progress: &SharedProgress, busy: bool, due: Option<DateTime<Utc>>) {
    *progress.lock().unwrap_or_else(PoisonError::into_inner) = TaskProgress { busy, due };
}

/// What a timer's or daemon's call gets of its task: its sleeps (`sleep_unless_stopped`)
/// on the stop and the clock, where `kapsel test` sees that it waits rather than works,
/// why it must stop (`stopped`), and the object's latest body (`latest-body`).
#[derive(Clone)]
pub(crate) struct DaemonSleeps {
    pub(crate) stopper: Stopper,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) progress: SharedProgress,
    /// The object's body (JSON) as last seen, at the time of asking.
    pub(crate) latest: Arc<dyn Fn() -> Arc<str> + Send + Sync>,
}

impl std::fmt::Debug for DaemonSleeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSleeps")
            .field("stopped", &self.stopper.reasons())
            .finish_non_exhaustive()
    }
}

impl DaemonSleeps {
    /// Sleeps on handler time; `false` once the daemon must stop (at once if it must).
    pub(crate) async fn sleep(&self, duration: Duration) -> bool {
        if self.stopper.is_stopped() {
            return false;
        }
        let until = crate::clock::after(self.clock.now(), duration);
        set_progress(&self.progress, false, Some(until));
        let slept = tokio::select! {
            () = self.stopper.stopped() => false,
            () = self.clock.sleep_until(until) => true,
        };
        set_progress(&self.progress, true, None);
        slept && !self.stopper.is_stopped()
    }
}

/// The stop of one timer or daemon (Kopf's `stopped`, with its `reason`): stopped with
/// reasons by whoever stops it, and also when the stream it belongs to stops (with the
/// stream's reasons then).
#[derive(Clone, Debug)]
pub(crate) struct Stopper {
    token: CancellationToken,
    /// Its own reasons' bits.
    reasons: Arc<AtomicU8>,
    /// The stream's reasons' bits, set before the stream's token is cancelled.
    stream: Arc<AtomicU8>,
}

impl Stopper {
    /// A stopper stopped also when `stream` is cancelled, for the reasons in
    /// `stream_reasons` then.
    pub(crate) fn new(stream: &CancellationToken, stream_reasons: Arc<AtomicU8>) -> Stopper {
        Stopper {
            token: stream.child_token(),
            reasons: Arc::default(),
            stream: stream_reasons,
        }
    }

    /// Stops it (if it is not yet), for `reason` besides those it has.
    pub(crate) fn stop(&self, reason: StopReasons) {
        // The reason first: whoever sees the stop sees why.
        self.reasons.fetch_or(reason.bits(), Ordering::SeqCst);
        self.token.cancel();
    }

    /// Whether it must stop.
    pub(crate) fn is_stopped(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Ends once it must stop.
    pub(crate) async fn stopped(&self) {
        self.token.cancelled().await;
    }

    /// Why it must stop; empty while it may go on. A stream stopped without saying why
    /// stopped serving its objects: the operator's exit, as far as they can tell.
    pub(crate) fn reasons(&self) -> StopReasons {
        if !self.is_stopped() {
            return StopReasons::default();
        }
        let bits = self.reasons.load(Ordering::SeqCst) | self.stream.load(Ordering::SeqCst);
        match StopReasons::from_bits(bits) {
            reasons if reasons.is_empty() => StopReasons::OPERATOR_EXITING,
            reasons => reasons,
        }
    }
}
