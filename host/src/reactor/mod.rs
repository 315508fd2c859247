//! The reactor: from the cluster's watch events to the guests' handlers and back to the
//! cluster, stage by stage (Kopf's `reactor/`).
//!
//! - `observing` follows CRDs and namespaces; `streams` keeps one watch stream per
//!   served resource and namespace (`streams::watching` turns kube-runtime's watcher
//!   into Kopf's raw events);
//! - `objects` keeps each object's events in order (`queue`) and what the operator
//!   remembers of it between events (`memory`, with its timer and daemon `tasks`);
//! - `handling` runs an event through the stages: indexing, on.event, the changing
//!   handlers (deciding with Kopf's pure core, `changes`), timers and daemons;
//! - `patching` sends what the handlers decided.
//!
//! This module is the run loop: the first discovery, the streams, peering's pauses, the
//! changes of CRDs and namespaces while the operator runs, and the guests a reload swaps
//! in ([`Swap`]).

mod changes;
mod handling;
mod objects;
mod observing;
mod patching;
mod streams;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SystemClock};
use crate::cluster::{self, GuestTraffic, KnownResources, Poster, Resource, Scope};
use crate::handlers::{Handler, HandlerSpec, Indexes, OperatorMemo, Registry};
use crate::journal::{Journal, Record};
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::peering::{self, Peering};
use crate::recording::Recorder;
use crate::runtime::{Guest, HandlerKind, Registration, StopReasons};
use crate::settings::SharedSettings;
use handling::Handling;
use observing::Trigger;
use streams::{StreamParts, Streams};

pub(crate) use changes::{ChangeSettings, diff, long_prefixes};
#[cfg(feature = "testing")]
pub(crate) use objects::Memories;
pub(crate) use streams::{StreamSettings, Watched};

/// How the operator runs, beyond its guests and its cluster: configuration only.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) scope: Scope,
    pub(crate) streams: StreamSettings,
    /// How long in-flight handlers may take to finish when stopping.
    pub(crate) exit_grace: Duration,
    /// Kopf's persistence settings (annotation prefix, finalizer, consistency timeout).
    pub(crate) changes: ChangeSettings,
    /// How this operator pauses for its peers (KOPF.md §8).
    pub(crate) peering: peering::Settings,
    /// The bounds on the guests (the runtime's: set when the operator runs).
    pub(crate) limits: Arc<Limits>,
    /// The pauses of an object whose processing keeps failing (`queueing.error_delays`).
    pub(crate) error_delays: Arc<[Duration]>,
    /// Which of the guests' Events are posted (`posting`).
    pub(crate) posting: crate::settings::Posting,
    /// No watching of CRDs and namespaces (`scanning.disabled`).
    pub(crate) scanning_disabled: bool,
    /// Seconds before an arbitrary failure is retried, unless the handler says
    /// (`execution.default_backoff`).
    pub(crate) default_backoff: f64,
    /// How the operator's own writes are retried (`networking`).
    pub(crate) retries: cluster::Retries,
}

impl Settings {
    /// Takes the user's settings (the one model, `crate::settings`) into the parts' own.
    pub(crate) fn adopt(&mut self, user: &crate::settings::Settings) {
        use crate::settings::seconds;
        self.streams = StreamSettings::of(user);
        self.exit_grace = seconds(user.queueing.exit_timeout);
        self.error_delays = user
            .queueing
            .error_delays
            .iter()
            .copied()
            .map(seconds)
            .collect();
        self.changes.persistence = user.persistence.clone();
        self.changes.consistency_timeout = seconds(user.persistence.consistency_timeout);
        self.changes.lifecycle = user.execution.lifecycle;
        self.posting = user.posting.clone();
        self.peering.stealth = user.peering.stealth;
        self.scanning_disabled = user.scanning.disabled;
        self.default_backoff = user.execution.default_backoff;
        self.retries = cluster::Retries::of(&user.networking);
    }
}

impl Default for Settings {
    fn default() -> Self {
        let user = crate::settings::Settings::default();
        // Placeholders where `adopt` takes the user's values.
        let mut settings = Settings {
            scope: Scope::Cluster,
            streams: StreamSettings::of(&user),
            exit_grace: Duration::ZERO,
            changes: ChangeSettings::default(),
            peering: peering::Settings::default(),
            limits: Arc::default(),
            error_delays: Arc::from([]),
            posting: crate::settings::Posting::default(),
            scanning_disabled: false,
            default_backoff: crate::settings::Execution::DEFAULT_BACKOFF,
            retries: cluster::Retries::default(),
        };
        // The defaults are the user settings' defaults: one place says them.
        settings.adopt(&user);
        settings
    }
}

/// What the operator shares while it runs, among its parts and with whoever observes it
/// (the embedding API, the endpoints, `kapsel test`): live handles, not configuration.
/// Cheap to clone.
#[derive(Clone)]
pub(crate) struct Shared {
    /// Handler time (a manual clock under `kapsel test`).
    pub(crate) clock: Arc<dyn Clock>,
    /// What the operator did; feeds the metrics and the recording.
    pub(crate) journal: Journal,
    pub(crate) metrics: Metrics,
    /// Where `--record` writes what the operator receives and does (off by default).
    pub(crate) recorder: Recorder,
    /// Set once the operator has started its streams (the ready signal).
    pub(crate) started: tokio::sync::watch::Sender<bool>,
    /// What the operator remembers about objects (`kapsel test` tells by it when the
    /// operator has settled).
    pub(crate) memories: objects::Memories,
    /// What it watches now.
    pub(crate) watched: Watched,
    /// What discovery found last; shared with the activities' Kubernetes calls.
    pub(crate) known: KnownResources,
    /// The guests' indexes; shared with the activities (probes read them, as in Kopf).
    pub(crate) indexes: Indexes,
    /// Each guest's pace of Kubernetes requests and Events, shared by all its calls.
    pub(crate) traffic: GuestTraffic,
    /// Kopf's operator-wide memo: the activities', and every object's until it has its own.
    pub(crate) memo: OperatorMemo,
    /// Kopf's settings as handlers read them (startup handlers change them before the
    /// operator takes them into `Settings`).
    pub(crate) settings: SharedSettings,
    /// What tests break on purpose.
    #[cfg(feature = "faults")]
    pub(crate) faults: crate::faults::Faults,
}

impl Default for Shared {
    fn default() -> Self {
        let metrics = Metrics::default();
        Shared {
            clock: Arc::new(SystemClock),
            journal: Journal::default(),
            traffic: GuestTraffic::new(&Limits::default(), metrics.clone()),
            memories: objects::Memories::counted(metrics.remembered_objects()),
            metrics,
            recorder: Recorder::default(),
            started: tokio::sync::watch::Sender::new(false),
            watched: Watched::default(),
            known: KnownResources::default(),
            indexes: Indexes::default(),
            memo: OperatorMemo::default(),
            settings: SharedSettings::default(),
            #[cfg(feature = "faults")]
            faults: crate::faults::Faults::default(),
        }
    }
}

/// The namespaces served without listing them (`scanning.disabled`): the plain names of
/// the patterns; the others cannot be served, which is said once.
fn plainly_named(scope: &Scope) -> BTreeSet<String> {
    let (names, others) = scope.plain_names_only();
    if others > 0 {
        tracing::warn!(
            "Scanning is disabled: {others} namespace pattern(s) with globs or exclusions are not served, only the plainly named namespaces {names:?}."
        );
    }
    names
}

/// Errors that stop the operator.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("the initial API discovery failed")]
    Discovery(#[from] cluster::DiscoveryError),
    #[error("listing the namespaces failed")]
    Namespaces(#[source] kube::Error),
}

/// Guests to serve from now on (a reload), and who waits until the streams serve them.
pub(crate) struct Swap {
    pub(crate) guests: Vec<Guest>,
    /// Told once the next event of every stream is handled by the new guests.
    pub(crate) done: oneshot::Sender<()>,
}

/// The next message of a channel there may be none of (then never).
async fn recv<T>(channel: Option<&mut mpsc::Receiver<T>>) -> Option<T> {
    match channel {
        Some(channel) => channel.recv().await,
        None => std::future::pending().await,
    }
}

/// Every handler of the guests (resource kinds are served by the streams, the activities
/// beside them), their indexes declared.
fn registry_of(guests: &[Guest], indexes: &Indexes, default_backoff: f64) -> Registry {
    for (guest, index) in indexes_of(guests) {
        indexes.declare(&guest, &index);
    }
    Registry::new(
        guests
            .iter()
            .flat_map(|guest| {
                // Admission handlers answer the webhook server's reviews, never a watch.
                let watched = |r: &&Registration| !guest.is_admission(&r.id);
                guest
                    .describe()
                    .handlers
                    .iter()
                    .filter(watched)
                    .map(|registration| {
                        let spec = HandlerSpec::of(registration, guest.runtime().limits())
                            .with_spawning(guest.spawning_options(&registration.id))
                            .selecting_everything(guest.selects_everything(&registration.id))
                            .choosing_resources(guest.chooses_resources(&registration.id))
                            .with_default_backoff(default_backoff);
                        warn_if_bounded(guest.name(), registration, &spec);
                        Handler {
                            guest: guest.clone(),
                            spec,
                        }
                    })
            })
            .collect(),
    )
}

/// The (guest, index id) of every index handler of the guests.
fn indexes_of(guests: &[Guest]) -> BTreeSet<(String, String)> {
    guests
        .iter()
        .flat_map(|guest| {
            guest
                .describe()
                .handlers
                .iter()
                .filter(|r| r.kind == HandlerKind::Index)
                .map(|r| (guest.name().to_owned(), r.id.clone()))
        })
        .collect()
}

/// Says so when a timer asked to run more often than the host allows.
fn warn_if_bounded(guest: &str, registration: &Registration, spec: &HandlerSpec) {
    let asked = [registration.interval_seconds, registration.idle_seconds];
    let granted = [spec.schedule.interval, spec.schedule.idle];
    for ((asked, granted), what) in asked
        .into_iter()
        .zip(granted)
        .zip(["interval", "idle time"])
    {
        if let (Some(asked), Some(granted)) = (asked, granted)
            && asked > 0.0
            && asked < granted
        {
            tracing::warn!(
                "Timer '{}' of guest '{guest}' asks for an {what} of {asked} s, below this host's \
                 minimum timer interval; it gets {granted} s (--min-timer-interval-ms).",
                registration.id
            );
        }
    }
}

/// The run loop's state.
struct Reactor {
    client: Client,
    registry: Registry,
    scope: Scope,
    shared: Shared,
    /// What discovery found, updated as CRDs come and go.
    discovered: Vec<Resource>,
    /// The namespaces served now (none when cluster-wide).
    namespaces: BTreeSet<String>,
    streams: Streams,
    peering: Peering,
    /// Peering's pause signal, and why the operator is paused now (if it is).
    pause: tokio::sync::watch::Receiver<Option<String>>,
    paused: Option<String>,
    /// What the observers noticed, and what stops them.
    triggers: mpsc::UnboundedReceiver<Trigger>,
    /// Whether observers send `triggers` (not with `scanning.disabled`): their channel
    /// closing then ends the operator.
    observing: bool,
    /// For the handlers of guests swapped in (`execution.default_backoff`).
    default_backoff: f64,
    observers: CancellationToken,
    /// Guests swapped in by reloads (none once nobody reloads any more).
    swaps: Option<mpsc::Receiver<Swap>>,
}

/// What woke the run loop up.
enum Wake {
    Shutdown,
    /// Peering's pause signal changed (`false`: it is gone for good).
    Pause(bool),
    Trigger(Option<Trigger>),
    /// New guests (`None`: nobody reloads any more).
    Swap(Option<Swap>),
}

/// Runs the operator until `shutdown` is cancelled, serving `guests`, then the guests of
/// each [`Swap`].
pub(crate) async fn run(
    client: Client,
    guests: &[Guest],
    swaps: mpsc::Receiver<Swap>,
    settings: Settings,
    shared: Shared,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    // Events go out until the streams have stopped, then get the exit timeout.
    let posting = CancellationToken::new();
    let (poster, poster_task) = Poster::start(
        client.clone(),
        (settings.retries.clone(), settings.exit_grace),
        shared.metrics.clone(),
        posting.clone(),
    );
    let poster = poster.with_posting(settings.posting.clone());
    // An early return (a failed discovery) stops the poster too.
    let _stop_posting = posting.clone().drop_guard();
    let mut reactor = Reactor::start(client, guests, &settings, shared, poster).await?;
    reactor.swaps = Some(swaps);
    reactor.follow(&shutdown).await;
    reactor.stop_streams().await;
    posting.cancel();
    let _ = poster_task.await;
    reactor.peering.stop().await;
    Ok(())
}

impl Reactor {
    /// Discovers what the cluster serves, starts observing it and peering, and starts
    /// the streams (unless paused).
    async fn start(
        client: Client,
        guests: &[Guest],
        settings: &Settings,
        shared: Shared,
        poster: Poster,
    ) -> Result<Reactor, Error> {
        let registry = registry_of(guests, &shared.indexes, settings.default_backoff);
        let handling = Handling::new(client.clone(), poster, settings, &shared);

        let discovered = cluster::scan(&client).await?;
        shared.known.replace(&discovered);
        let scope = settings.scope.clone();
        let namespaces = if settings.scanning_disabled {
            plainly_named(&scope)
        } else {
            cluster::served_namespaces(&client, &scope)
                .await
                .map_err(Error::Namespaces)?
        };
        let (triggers_tx, triggers) = mpsc::unbounded_channel();
        let observers = CancellationToken::new();
        if !settings.scanning_disabled {
            tokio::spawn(observing::observe_crds(
                client.clone(),
                triggers_tx.clone(),
                observers.clone(),
            ));
        }
        if !settings.scanning_disabled
            && matches!(scope, Scope::Namespaces(_))
            && scope.plain_names().is_none()
        {
            tokio::spawn(observing::observe_namespaces(
                client.clone(),
                scope.clone(),
                triggers_tx,
                observers.clone(),
            ));
        }

        let peering = Peering::start(
            client.clone(),
            settings.peering.clone(),
            scope == Scope::Cluster,
            &namespaces,
            &discovered,
        );
        let mut pause = peering.pause();
        let paused = pause.borrow_and_update().clone();
        let streams = Streams::new(StreamParts {
            client: client.clone(),
            handling: handling.clone(),
            settings: settings.streams.clone(),
            operator_turns: settings.streams.worker_limit.map(objects::turns),
            exit_grace: settings.exit_grace,
            metrics: shared.metrics.clone(),
            recorder: shared.recorder.clone(),
            watched: shared.watched.clone(),
            journal: shared.journal.clone(),
            #[cfg(feature = "faults")]
            faults: shared.faults.clone(),
        });
        let mut reactor = Reactor {
            client,
            registry,
            scope,
            shared,
            discovered,
            namespaces,
            streams,
            peering,
            pause,
            paused,
            triggers,
            observing: !settings.scanning_disabled,
            default_backoff: settings.default_backoff,
            observers,
            swaps: None,
        };
        match &reactor.paused {
            Some(reason) => {
                tracing::info!("Starting paused: {reason}.");
                reactor.shared.journal.push(Record::Paused {
                    reason: reason.clone(),
                });
            }
            None => reactor.reconcile().await,
        }
        handling.readiness().check();
        tracing::info!(
            "The operator is running: {} stream(s).",
            reactor.streams.len()
        );
        reactor.shared.started.send_replace(true);
        Ok(reactor)
    }

    /// Starts the streams that should run now and stops the others, once the guests that
    /// choose their handlers' resources have been asked about the resources new to them.
    async fn reconcile(&mut self) {
        self.registry.choose(&self.discovered).await;
        self.streams.reconcile(
            &self.registry,
            &self.discovered,
            &self.scope,
            &self.namespaces,
        );
    }

    /// Follows peering's pauses and the observers' triggers until `shutdown`.
    async fn follow(&mut self, shutdown: &CancellationToken) {
        let mut pause_open = true;
        loop {
            let swaps = self.swaps.as_mut();
            let wake = tokio::select! {
                () = shutdown.cancelled() => Wake::Shutdown,
                changed = self.pause.changed(), if pause_open => Wake::Pause(changed.is_ok()),
                trigger = self.triggers.recv(), if self.observing => Wake::Trigger(trigger),
                swap = recv(swaps) => Wake::Swap(swap),
            };
            match wake {
                Wake::Shutdown | Wake::Trigger(None) => return,
                Wake::Pause(open) => {
                    pause_open = open;
                    self.repause().await;
                }
                Wake::Trigger(Some(trigger)) => self.on_trigger(trigger).await,
                Wake::Swap(Some(swap)) => self.on_swap(swap).await,
                Wake::Swap(None) => self.swaps = None,
            }
        }
    }

    /// Serves new guests: the streams take their handlers for their next events, those no
    /// handler serves any more retire, new ones start (once resumed, if paused); the
    /// indexes of handlers gone are dropped.
    async fn on_swap(&mut self, swap: Swap) {
        self.registry = registry_of(&swap.guests, &self.shared.indexes, self.default_backoff);
        let declared = indexes_of(&swap.guests);
        self.shared
            .indexes
            .retain(|guest, index| declared.contains(&(guest.to_owned(), index.to_owned())));
        if self.paused.is_none() {
            self.reconcile().await;
        }
        let _ = swap.done.send(());
    }

    /// Pauses or resumes the streams as peering says.
    async fn repause(&mut self) {
        let now = self.pause.borrow_and_update().clone();
        match (&self.paused, &now) {
            (None, Some(reason)) => {
                tracing::info!("Pausing operations: {reason}.");
                self.streams.stop_all(StopReasons::OPERATOR_PAUSING).await;
                // Recorded once nothing is handled any more.
                self.shared.journal.push(Record::Paused {
                    reason: reason.clone(),
                });
            }
            (Some(_), None) => {
                tracing::info!("Resuming operations: relisting.");
                self.shared.journal.push(Record::Resumed);
                self.reconcile().await;
            }
            (Some(_), Some(reason)) => tracing::debug!("Still paused: {reason}."),
            (None, None) => {}
        }
        self.paused = now;
    }

    /// A CRD group or a namespace changed: what is served follows.
    async fn on_trigger(&mut self, trigger: Trigger) {
        match trigger {
            Trigger::Group(group) => {
                let fresh = cluster::scan_group(&self.client, &group).await;
                self.discovered.retain(|r| r.group != group);
                self.discovered.extend(fresh);
                self.shared.known.replace(&self.discovered);
                // A peering CRD deployed or deleted: peering follows.
                self.peering.serve_resources(&self.discovered);
            }
            Trigger::NamespaceAdded(ns) => {
                self.namespaces.insert(ns);
                self.peering.serve_namespaces(&self.namespaces);
            }
            Trigger::NamespaceRemoved(ns) => {
                self.namespaces.remove(&ns);
                self.peering.serve_namespaces(&self.namespaces);
            }
        }
        // While paused, resuming reconciles with whatever changed meanwhile.
        if self.paused.is_none() {
            self.reconcile().await;
        }
    }

    /// Stops observing, and the streams (in-flight handlers finish).
    async fn stop_streams(&mut self) {
        self.observers.cancel();
        tracing::info!("Stopping {} stream(s).", self.streams.len());
        self.streams.stop_all(StopReasons::OPERATOR_EXITING).await;
    }
}
