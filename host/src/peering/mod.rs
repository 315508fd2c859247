//! Peering, compatible with Kopf's (KOPF.md §8): operators that share a
//! peering object (`kopf.dev/v1` ClusterKopfPeering for cluster-wide
//! operators, KopfPeering in each served namespace for namespaced ones) write
//! keep-alive records into its status and pause while a live peer has a
//! higher priority, or the same one. Peering is a pause signal, not leader
//! election: there are no per-object locks.
//!
//! The operator starts a [`Peering`] and follows its pause signal; `freeze`
//! and `resume` write one record and exit ([`Freezer`]).

mod command;
mod identity;
mod peers;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use rand::Rng;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use command::Freezer;
use peers::{Review, Verdict};

/// How an operator takes part in peering (KOPF.md §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `--standalone`: no peering at all.
    Standalone,
    /// No flag: peer through the object if its resource and the object exist;
    /// run unpaused otherwise.
    Auto,
    /// `--peering NAME`: paused until the object exists and nobody blocks us.
    Mandatory,
}

/// Peering settings, with Kopf's defaults (`settings.peering.*`).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) mode: Mode,
    /// The peering object's name.
    pub(crate) name: String,
    pub(crate) priority: i64,
    /// Seconds our record stays valid without a keep-alive.
    pub(crate) lifetime: i64,
    /// Our identity among the peers; detected when not given.
    pub(crate) identity: Option<String>,
    /// No debug line for a keep-alive that went well (Kopf's `peering.stealth`).
    pub(crate) stealth: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Mode::Auto,
            name: "default".to_owned(),
            priority: 0,
            lifetime: 60,
            identity: None,
            stealth: false,
        }
    }
}

/// The priority `--dev` gives.
pub(crate) const DEV_PRIORITY: i64 = 666;

/// How long leaving (removing our record) may take at shutdown.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a peering object lives: `None` cluster-wide (ClusterKopfPeering),
/// else a namespace (KopfPeering).
type Target = Option<String>;

/// The peering resource: ClusterKopfPeering or KopfPeering.
fn peering_resource(clusterwide: bool) -> ApiResource {
    let (kind, plural) = if clusterwide {
        ("ClusterKopfPeering", "clusterkopfpeerings")
    } else {
        ("KopfPeering", "kopfpeerings")
    };
    ApiResource {
        group: "kopf.dev".into(),
        version: "v1".into(),
        api_version: "kopf.dev/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn peering_api(client: &Client, target: &Target) -> Api<DynamicObject> {
    match target {
        None => Api::all_with(client.clone(), &peering_resource(true)),
        Some(ns) => Api::namespaced_with(client.clone(), ns, &peering_resource(false)),
    }
}

/// As Kopf says where a peering object is: `cluster-wide` or `in 'ns'`.
fn describe(target: &Target) -> String {
    match target {
        None => "cluster-wide".to_owned(),
        Some(ns) => format!("in '{ns}'"),
    }
}

/// Merge-patches a peering object; `Ok(false)` when it does not exist.
async fn patch(api: &Api<DynamicObject>, name: &str, body: &Value) -> Result<bool, kube::Error> {
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(body))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

/// Why the operator must pause, per peering object; their sum is published.
#[derive(Clone)]
struct Blocks {
    reasons: Arc<Mutex<BTreeMap<Target, String>>>,
    signal: Arc<watch::Sender<Option<String>>>,
}

impl Blocks {
    fn new() -> Blocks {
        Blocks {
            reasons: Arc::default(),
            signal: Arc::new(watch::Sender::new(None)),
        }
    }

    /// Records (or clears, with `None`) what blocks us at one peering object.
    fn set(&self, target: &Target, reason: Option<String>) {
        let sum = {
            let mut reasons = self.reasons.lock().unwrap_or_else(|p| p.into_inner());
            match reason {
                Some(reason) => reasons.insert(target.clone(), reason),
                None => reasons.remove(target),
            };
            let parts: Vec<String> = reasons
                .iter()
                .map(|(target, reason)| match target {
                    None => reason.clone(),
                    Some(ns) => format!("{reason} (in '{ns}')"),
                })
                .collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        };
        self.signal.send_if_modified(|current| {
            let changed = *current != sum;
            *current = sum;
            changed
        });
    }
}

/// What every peering task shares.
struct Shared {
    client: Client,
    settings: Settings,
    identity: String,
    blocks: Blocks,
}

/// A running peering: keep-alives and watching of the peering object(s).
pub(crate) struct Peering {
    shared: Arc<Shared>,
    /// Whether the operator serves the whole cluster (one ClusterKopfPeering).
    clusterwide: bool,
    tasks: HashMap<Target, (CancellationToken, JoinHandle<()>)>,
}

impl Peering {
    /// Starts peering for a cluster-wide operator, or for a namespaced one in
    /// these namespaces. With `--peering` the pause signal is on from the start.
    pub(crate) fn start(
        client: Client,
        settings: Settings,
        clusterwide: bool,
        namespaces: &BTreeSet<String>,
    ) -> Peering {
        let identity = settings
            .identity
            .clone()
            .unwrap_or_else(identity::for_operator);
        if settings.mode != Mode::Standalone {
            tracing::debug!(
                "Peering as '{identity}' with priority {} through '{}'.",
                settings.priority,
                settings.name
            );
        }
        let mut peering = Peering {
            shared: Arc::new(Shared {
                client,
                settings,
                identity,
                blocks: Blocks::new(),
            }),
            clusterwide,
            tasks: HashMap::new(),
        };
        if clusterwide {
            peering.start_target(None);
        } else {
            peering.serve_namespaces(namespaces);
        }
        peering
    }

    /// The pause signal: `Some(reason)` while the operator must pause.
    pub(crate) fn pause(&self) -> watch::Receiver<Option<String>> {
        self.shared.blocks.signal.subscribe()
    }

    /// Follows the served namespaces of a namespaced operator: peers in new
    /// ones, leaves those no longer served.
    pub(crate) fn serve_namespaces(&mut self, namespaces: &BTreeSet<String>) {
        if self.clusterwide {
            return;
        }
        let gone: Vec<Target> = self
            .tasks
            .keys()
            .filter(|t| !t.as_ref().is_some_and(|ns| namespaces.contains(ns)))
            .cloned()
            .collect();
        for target in gone {
            if let Some((cancel, _task)) = self.tasks.remove(&target) {
                // The task removes its record and its block when it ends.
                cancel.cancel();
            }
        }
        for ns in namespaces {
            if !self.tasks.contains_key(&Some(ns.clone())) {
                self.start_target(Some(ns.clone()));
            }
        }
    }

    fn start_target(&mut self, target: Target) {
        if self.shared.settings.mode == Mode::Standalone {
            return;
        }
        if self.shared.settings.mode == Mode::Mandatory {
            // Set before the task runs, so that no stream starts in between.
            self.shared
                .blocks
                .set(&target, Some(waiting_reason(&self.shared.settings.name)));
        }
        let cancel = CancellationToken::new();
        let task = tokio::spawn(serve_target(
            self.shared.clone(),
            target.clone(),
            cancel.clone(),
        ));
        self.tasks.insert(target, (cancel, task));
    }

    /// Stops peering and removes our records (bounded in time).
    pub(crate) async fn stop(self) {
        let tasks: Vec<JoinHandle<()>> = self
            .tasks
            .into_values()
            .map(|(cancel, task)| {
                cancel.cancel();
                task
            })
            .collect();
        futures::future::join_all(tasks).await;
    }
}

fn waiting_reason(name: &str) -> String {
    format!("waiting for the peering object '{name}'")
}

/// The state of one peering object, as one task follows it.
struct Follower {
    shared: Arc<Shared>,
    target: Target,
    api: Api<DynamicObject>,
    /// Kopf's `conflicts_found` toggle for this object.
    blocked: bool,
    /// Whether the object was seen (and not deleted since).
    present: bool,
    /// Whether the current listing contained the object.
    listed: bool,
    /// Whether the "not served" warning was given.
    warned_unserved: bool,
}

/// Keeps our record alive in one peering object and follows its peers.
async fn serve_target(shared: Arc<Shared>, target: Target, cancel: CancellationToken) {
    let name = shared.settings.name.clone();
    let lifetime = shared.settings.lifetime;
    let api = peering_api(&shared.client, &target);
    let mut follower = Follower {
        blocked: shared.settings.mode == Mode::Mandatory,
        shared,
        target,
        api: api.clone(),
        present: false,
        listed: false,
        warned_unserved: false,
    };
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    let keepalive = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(keepalive);
    // When the first blocking peer expires (Kopf then touches itself to be re-evaluated).
    let expiry = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(expiry);
    let mut expiry_armed = false;
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            () = &mut keepalive => {
                follower.touch(lifetime).await;
                let jitter = rand::rng().random_range(5..=10);
                let period = peers::keepalive_period(lifetime, jitter);
                keepalive.as_mut().reset(Instant::now() + Duration::from_secs(period.unsigned_abs()));
            }
            () = &mut expiry, if expiry_armed => {
                expiry_armed = false;
                follower.touch(lifetime).await;
            }
            event = events.next() => {
                let was_present = follower.present;
                // Some(when to look again) after a review or a disappearance;
                // None leaves the expiry timer as it is.
                let expiry_update = match event {
                    None => break,
                    Some(Ok(Event::Init)) => {
                        follower.listed = false;
                        None
                    }
                    Some(Ok(Event::InitApply(object))) => {
                        follower.listed = true;
                        Some(follower.seen(&object).await)
                    }
                    Some(Ok(Event::InitDone)) => (!follower.listed).then(|| {
                        follower.absent();
                        None
                    }),
                    Some(Ok(Event::Apply(object))) => Some(follower.seen(&object).await),
                    Some(Ok(Event::Delete(_))) => {
                        follower.absent();
                        Some(None)
                    }
                    Some(Err(error)) => {
                        follower.failed(&error);
                        None
                    }
                };
                if follower.present && !was_present {
                    // Just appeared: announce ourselves now, not a keep-alive period later.
                    keepalive.as_mut().reset(Instant::now());
                }
                if let Some(next) = expiry_update {
                    expiry_armed = next.is_some();
                    if let Some(delay) = next {
                        expiry.as_mut().reset(Instant::now() + delay);
                    }
                }
            }
        }
    }
    follower.shared.blocks.set(&follower.target, None);
    // Leave as Kopf does: a record with no lifetime, i.e. removal.
    if tokio::time::timeout(LEAVE_TIMEOUT, follower.touch(0))
        .await
        .is_err()
    {
        tracing::warn!(
            "Could not remove ourselves from the peering object {}: timed out.",
            describe(&follower.target)
        );
    }
}

impl Follower {
    fn name(&self) -> &str {
        &self.shared.settings.name
    }

    fn mandatory(&self) -> bool {
        self.shared.settings.mode == Mode::Mandatory
    }

    /// Writes our record (removes it with `lifetime` 0).
    async fn touch(&self, lifetime: i64) {
        let body = peers::touch_patch(
            &self.shared.identity,
            self.shared.settings.priority,
            lifetime,
            peers::now(),
        );
        let where_ = describe(&self.target);
        match patch(&self.api, self.name(), &body).await {
            // Kopf's stealth mode keeps quiet about keep-alives, unless the object is gone.
            Ok(true) if self.shared.settings.stealth => {}
            Ok(found) => {
                let result = if found { "ok" } else { "not found" };
                tracing::debug!("Keep-alive in '{}' {where_}: {result}.", self.name());
            }
            Err(error) => tracing::warn!(
                "Keep-alive in '{}' {where_} failed: {}",
                self.name(),
                crate::error_chain(&error)
            ),
        }
    }

    /// Reviews the peers after an event of the peering object (Kopf's
    /// `process_peering_event`); returns when to look again if blockers expire.
    async fn seen(&mut self, object: &DynamicObject) -> Option<Duration> {
        if object.metadata.name.as_deref() != Some(self.name()) {
            return None;
        }
        self.present = true;
        let now = peers::now();
        let status = object.data.get("status").cloned().unwrap_or(Value::Null);
        let settings = &self.shared.settings;
        let review = Review::of(&status, &self.shared.identity, settings.priority, now);
        if !review.dead.is_empty() {
            tracing::debug!(
                "Removing dead peers {}: {}",
                describe(&self.target),
                peers::identities(&review.dead)
            );
            if let Err(error) =
                patch(&self.api, self.name(), &peers::clean_patch(&review.dead)).await
            {
                tracing::warn!(
                    "Could not remove dead peers: {}",
                    crate::error_chain(&error)
                );
            }
        }
        match review.verdict() {
            Verdict::Yield => {
                if !self.blocked {
                    tracing::info!(
                        "Pausing operations in favour of {}.",
                        peers::show(&review.higher)
                    );
                }
                self.block(format!(
                    "in favour of {}",
                    peers::identities(&review.higher)
                ));
            }
            Verdict::Conflict => {
                tracing::warn!(
                    "Possibly conflicting operators with the same priority: {}.",
                    peers::show(&review.same)
                );
                if !self.blocked {
                    tracing::warn!(
                        "Pausing all operators, including self: {}",
                        peers::show(&review.all)
                    );
                }
                self.block(format!(
                    "conflicting operators with the same priority: {}",
                    peers::identities(&review.same)
                ));
            }
            Verdict::Run => self.unblock(),
        }
        review
            .next_expiry()
            .and_then(|deadline| (deadline - now).to_std().ok())
            // Just past the deadline, so that the peer is dead when we look.
            .map(|delay| delay + Duration::from_millis(50))
    }

    /// The object is not there (not listed, or deleted).
    fn absent(&mut self) {
        self.present = false;
        if self.mandatory() {
            if !self.blocked {
                tracing::info!(
                    "Pausing operations: the peering object '{}' is gone {}.",
                    self.name(),
                    describe(&self.target)
                );
            }
            self.block(waiting_reason(self.name()));
        } else {
            // No object, no peers: Kopf's auto-detected peering runs unpaused.
            self.unblock();
        }
    }

    /// Watching failed; 404 means the peering resource is not served (no CRD).
    fn failed(&mut self, error: &watcher::Error) {
        let unserved = matches!(
            error,
            watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 404
        );
        if !unserved {
            tracing::warn!(
                "Watching the peering object {} failed, retrying: {}",
                describe(&self.target),
                crate::error_chain(error)
            );
            return;
        }
        let plural = &peering_resource(self.target.is_none()).plural;
        if self.mandatory() {
            if !self.warned_unserved {
                tracing::warn!(
                    "The peering resource {plural}.kopf.dev is not served: paused until it is (deploy the peering CRDs)."
                );
            }
            self.block(format!(
                "the peering resource {plural}.kopf.dev is not served"
            ));
        } else {
            if !self.warned_unserved {
                tracing::warn!(
                    "The peering resource {plural}.kopf.dev is not served: running standalone until it is (deploy the peering CRDs, or use --standalone)."
                );
            }
            self.present = false;
            self.unblock();
        }
        self.warned_unserved = true;
    }

    fn block(&mut self, reason: String) {
        self.blocked = true;
        self.shared.blocks.set(&self.target, Some(reason));
    }

    fn unblock(&mut self) {
        if self.blocked {
            tracing::info!(
                "Resuming operations after the pause. Conflicting operators with the same priority are gone."
            );
        }
        self.blocked = false;
        self.shared.blocks.set(&self.target, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_signal_sums_every_peering_object() {
        let blocks = Blocks::new();
        let signal = blocks.signal.subscribe();
        blocks.set(&Some("a".into()), Some("in favour of dev".into()));
        blocks.set(&Some("b".into()), Some("waiting".into()));
        assert_eq!(
            signal.borrow().as_deref(),
            Some("in favour of dev (in 'a'); waiting (in 'b')")
        );
        blocks.set(&Some("a".into()), None);
        assert_eq!(signal.borrow().as_deref(), Some("waiting (in 'b')"));
        blocks.set(&Some("b".into()), None);
        assert_eq!(*signal.borrow(), None);
        blocks.set(&None, Some("in favour of x".into()));
        assert_eq!(signal.borrow().as_deref(), Some("in favour of x"));
    }
}
