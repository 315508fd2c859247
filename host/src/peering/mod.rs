//! Peering, compatible with Kopf's (KOPF.md §8): operators that share a
//! peering object (ClusterKopfPeering for cluster-wide operators, KopfPeering
//! in each served namespace for namespaced ones; `kopf.dev/v1`, the legacy
//! `zalando.org/v1`, or both, whichever discovery finds served) write
//! keep-alive records into its status and pause while a live peer has a
//! higher priority, or the same one. Peering is a pause signal, not leader
//! election: there are no per-object locks.
//!
//! The operator starts a [`Peering`], tells it what discovery finds, and follows
//! its pause signal; `freeze` and `resume` write one record and exit ([`Freezer`]).

mod command;
mod identity;
mod peers;
pub(crate) mod resources;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use rand::Rng;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cluster::Resource;
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

/// One peering object: the API group of its resource, and where it lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Place {
    group: String,
    target: Target,
}

impl Place {
    /// Says where a pause comes from: the namespace, and the group when it is the
    /// legacy one (when both groups are served, the same peer blocks in each).
    fn locate(&self, reason: &str) -> String {
        let legacy = (self.group != resources::GROUPS[0]).then_some(self.group.as_str());
        match (&self.target, legacy) {
            (None, None) => reason.to_owned(),
            (None, Some(group)) => format!("{reason} ({group})"),
            (Some(ns), None) => format!("{reason} (in '{ns}')"),
            (Some(ns), Some(group)) => format!("{reason} (in '{ns}', {group})"),
        }
    }
}

fn peering_api(client: &Client, resource: &Resource, target: &Target) -> Api<DynamicObject> {
    let resource = resource.api_resource();
    match target {
        None => Api::all_with(client.clone(), &resource),
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
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

/// Why the operator must pause, per peering object (`None`: no peering resource is
/// served, with `--peering`); their sum is published.
#[derive(Clone)]
struct Blocks {
    reasons: Arc<Mutex<BTreeMap<Option<Place>, String>>>,
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
    fn set(&self, place: Option<&Place>, reason: Option<String>) {
        let sum = {
            let mut reasons = self.reasons.lock().unwrap_or_else(|p| p.into_inner());
            let key = place.cloned();
            match reason {
                Some(reason) => reasons.insert(key, reason),
                None => reasons.remove(&key),
            };
            let parts: Vec<String> = reasons
                .iter()
                .map(|(place, reason)| match place {
                    None => reason.clone(),
                    Some(place) => place.locate(reason),
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
    /// The peering resources of its mode the cluster serves, as discovery found them last.
    resources: Vec<Resource>,
    /// The namespaces it serves (a namespaced operator).
    namespaces: BTreeSet<String>,
    /// Whether it was said that no peering resource is served (said once per absence).
    told_missing: bool,
    tasks: HashMap<Place, (CancellationToken, JoinHandle<()>)>,
}

impl Peering {
    /// Starts peering for a cluster-wide operator, or for a namespaced one in
    /// these namespaces, through the peering resources among those discovered.
    /// With `--peering` the pause signal is on from the start.
    pub(crate) fn start(
        client: Client,
        settings: Settings,
        clusterwide: bool,
        namespaces: &BTreeSet<String>,
        discovered: &[Resource],
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
            resources: resources::served(discovered, clusterwide),
            namespaces: namespaces.clone(),
            told_missing: false,
            tasks: HashMap::new(),
        };
        peering.reconcile();
        peering
    }

    /// The pause signal: `Some(reason)` while the operator must pause.
    pub(crate) fn pause(&self) -> watch::Receiver<Option<String>> {
        self.shared.blocks.signal.subscribe()
    }

    /// Follows the served namespaces of a namespaced operator: peers in new
    /// ones, leaves those no longer served.
    pub(crate) fn serve_namespaces(&mut self, namespaces: &BTreeSet<String>) {
        namespaces.clone_into(&mut self.namespaces);
        self.reconcile();
    }

    /// Follows what discovery finds: peers through a peering resource once it is
    /// served (a CRD deployed meanwhile), leaves one no longer served.
    pub(crate) fn serve_resources(&mut self, discovered: &[Resource]) {
        let resources = resources::served(discovered, self.clusterwide);
        if resources != self.resources {
            self.resources = resources;
            self.reconcile();
        }
    }

    /// Starts a task for each peering object to follow (each served peering resource,
    /// cluster-wide or in each served namespace), stops the others.
    fn reconcile(&mut self) {
        if self.shared.settings.mode == Mode::Standalone {
            return;
        }
        self.tell_missing();
        let targets: Vec<Target> = if self.clusterwide {
            vec![None]
        } else {
            self.namespaces.iter().cloned().map(Some).collect()
        };
        let wanted: BTreeMap<Place, Resource> = self
            .resources
            .iter()
            .flat_map(|resource| {
                targets.iter().map(move |target| {
                    let place = Place {
                        group: resource.group.clone(),
                        target: target.clone(),
                    };
                    (place, resource.clone())
                })
            })
            .collect();
        let gone: Vec<Place> = self
            .tasks
            .keys()
            .filter(|place| !wanted.contains_key(place))
            .cloned()
            .collect();
        for place in gone {
            if let Some((cancel, _task)) = self.tasks.remove(&place) {
                // The task removes its record and its block when it ends.
                cancel.cancel();
            }
        }
        for (place, resource) in wanted {
            if self.tasks.contains_key(&place) {
                continue;
            }
            if self.shared.settings.mode == Mode::Mandatory {
                // Set before the task runs, so that no stream starts in between.
                self.shared.blocks.set(
                    Some(&place),
                    Some(waiting_reason(&self.shared.settings.name)),
                );
            }
            let cancel = CancellationToken::new();
            let task = tokio::spawn(serve_target(
                self.shared.clone(),
                resource,
                place.clone(),
                cancel.clone(),
            ));
            self.tasks.insert(place, (cancel, task));
        }
    }

    /// Without any peering resource, `--peering` pauses (Kopf's "peering CRD is
    /// missing") and auto-detection runs on; either is said once, when it happens.
    fn tell_missing(&mut self) {
        let settings = &self.shared.settings;
        let mandatory = settings.mode == Mode::Mandatory;
        let missing = self
            .resources
            .is_empty()
            .then(|| resources::missing(self.clusterwide));
        if let Some(missing) = &missing
            && !self.told_missing
        {
            if mandatory {
                tracing::warn!(
                    "Peering through '{}': {missing}: paused until one is (deploy the peering CRDs).",
                    settings.name
                );
            } else {
                tracing::info!(
                    "Running without peering: {missing} (deploy the peering CRDs, or use --standalone)."
                );
            }
        }
        self.told_missing = missing.is_some();
        self.shared.blocks.set(None, missing.filter(|_| mandatory));
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
    place: Place,
    /// `clusterkopfpeerings.kopf.dev`, as messages name the resource.
    resource: String,
    api: Api<DynamicObject>,
    /// Kopf's `conflicts_found` toggle for this object.
    blocked: bool,
    /// Whether the object was seen (and not deleted since).
    present: bool,
    /// Whether the current listing contained the object.
    listed: bool,
    /// Whether watching fails, and that was warned about: the further failures of the
    /// streak are logged at debug level only, however long it lasts.
    watch_failing: bool,
    /// The same for writing our record.
    touch_failing: bool,
}

/// Keeps our record alive in one peering object and follows its peers.
async fn serve_target(
    shared: Arc<Shared>,
    resource: Resource,
    place: Place,
    cancel: CancellationToken,
) {
    let name = shared.settings.name.clone();
    let lifetime = shared.settings.lifetime;
    let api = peering_api(&shared.client, &resource, &place.target);
    let mut follower = Follower {
        blocked: shared.settings.mode == Mode::Mandatory,
        shared,
        resource: resources::name(&resource.group, place.target.is_none()),
        place,
        api: api.clone(),
        present: false,
        listed: false,
        watch_failing: false,
        touch_failing: false,
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
                // Only what a listing or a watch delivered ends a streak of failures: each
                // retry starts with `Init` before it fails again.
                let succeeded = matches!(
                    event,
                    Some(Ok(Event::InitApply(_) | Event::InitDone | Event::Apply(_) | Event::Delete(_)))
                );
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
                if succeeded {
                    follower.watch_failing = false;
                }
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
    follower.shared.blocks.set(Some(&follower.place), None);
    // Leave as Kopf does: a record with no lifetime, i.e. removal.
    if tokio::time::timeout(LEAVE_TIMEOUT, follower.touch(0))
        .await
        .is_err()
    {
        tracing::warn!(
            "Could not remove ourselves from the peering object {}: timed out.",
            follower.where_()
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

    /// Where the object is, as messages say it: Kopf's words, and the group when it is
    /// the legacy one.
    fn where_(&self) -> String {
        let where_ = describe(&self.place.target);
        if self.place.group == resources::GROUPS[0] {
            where_
        } else {
            format!("{where_} ({})", self.place.group)
        }
    }

    /// Writes our record (removes it with `lifetime` 0).
    async fn touch(&mut self, lifetime: i64) {
        let body = peers::touch_patch(
            &self.shared.identity,
            self.shared.settings.priority,
            lifetime,
            peers::now(),
        );
        let where_ = self.where_();
        let result = patch(&self.api, self.name(), &body).await;
        let failing = result.is_err();
        match result {
            // Kopf's stealth mode keeps quiet about keep-alives, unless the object is gone.
            Ok(true) if self.shared.settings.stealth => {}
            Ok(found) => {
                let result = if found { "ok" } else { "not found" };
                tracing::debug!("Keep-alive in '{}' {where_}: {result}.", self.name());
            }
            // Once per streak of failures (a missing grant fails every keep-alive).
            Err(error) if !self.touch_failing => tracing::warn!(
                "Keep-alive in '{}' {where_} failed: {}",
                self.name(),
                crate::error_chain(&error)
            ),
            Err(error) => tracing::debug!(
                "Keep-alive in '{}' {where_} failed again: {}",
                self.name(),
                crate::error_chain(&error)
            ),
        }
        self.touch_failing = failing;
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
                self.where_(),
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
                    self.where_()
                );
            }
            self.block(waiting_reason(self.name()));
        } else {
            // No object, no peers: Kopf's auto-detected peering runs unpaused.
            self.unblock();
        }
    }

    /// Watching failed. A 404: the peering resource is not served any more (its CRD was
    /// deleted; discovery stops this task soon); a 403: the operator may not read it.
    /// Either means no peering through this object: `--peering` stays paused,
    /// auto-detection runs on. Each streak of failures is warned about once, so that a
    /// missing grant is said once, not at every retry.
    fn failed(&mut self, error: &watcher::Error) {
        let code = match error {
            watcher::Error::InitialListFailed(kube::Error::Api(status))
            | watcher::Error::WatchStartFailed(kube::Error::Api(status))
            | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status.code),
            watcher::Error::WatchError(status) => Some(status.code),
            _ => None,
        };
        let resource = &self.resource;
        let (reason, advice) = match code {
            Some(404) => (
                format!("the peering resource {resource} is not served"),
                "deploy the peering CRDs",
            ),
            Some(403) => (
                format!("reading the peering resource {resource} is forbidden"),
                "grant list and watch of it, as `kapsel rbac` does",
            ),
            _ => {
                let where_ = self.where_();
                let error = crate::error_chain(error);
                if self.watch_failing {
                    tracing::debug!("Watching the peering object {where_} failed again: {error}");
                } else {
                    tracing::warn!(
                        "Watching the peering object {where_} failed, retrying: {error}"
                    );
                }
                self.watch_failing = true;
                return;
            }
        };
        if !self.watch_failing {
            let where_ = self.where_();
            if self.mandatory() {
                tracing::warn!("Paused {where_}: {reason} ({advice}).");
            } else {
                tracing::warn!("No peering {where_}: {reason} ({advice}, or use --standalone).");
            }
        }
        if self.mandatory() {
            self.block(reason);
        } else {
            self.present = false;
            self.unblock();
        }
        self.watch_failing = true;
    }

    fn block(&mut self, reason: String) {
        self.blocked = true;
        self.shared.blocks.set(Some(&self.place), Some(reason));
    }

    fn unblock(&mut self) {
        if self.blocked {
            tracing::info!(
                "Resuming operations after the pause. Conflicting operators with the same priority are gone."
            );
        }
        self.blocked = false;
        self.shared.blocks.set(Some(&self.place), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(group: &str, target: Option<&str>) -> Place {
        Place {
            group: group.to_owned(),
            target: target.map(str::to_owned),
        }
    }

    #[test]
    fn the_pause_signal_sums_every_peering_object() {
        let blocks = Blocks::new();
        let signal = blocks.signal.subscribe();
        let (a, b) = (place("kopf.dev", Some("a")), place("kopf.dev", Some("b")));
        blocks.set(Some(&a), Some("in favour of dev".into()));
        blocks.set(Some(&b), Some("waiting".into()));
        assert_eq!(
            signal.borrow().as_deref(),
            Some("in favour of dev (in 'a'); waiting (in 'b')")
        );
        blocks.set(Some(&a), None);
        assert_eq!(signal.borrow().as_deref(), Some("waiting (in 'b')"));
        blocks.set(Some(&b), None);
        assert_eq!(*signal.borrow(), None);
        blocks.set(
            Some(&place("kopf.dev", None)),
            Some("in favour of x".into()),
        );
        assert_eq!(signal.borrow().as_deref(), Some("in favour of x"));
    }

    #[test]
    fn pauses_through_the_legacy_group_say_so() {
        let blocks = Blocks::new();
        let signal = blocks.signal.subscribe();
        blocks.set(
            Some(&place("zalando.org", Some("a"))),
            Some("in favour of dev".into()),
        );
        blocks.set(Some(&place("zalando.org", None)), Some("waiting".into()));
        blocks.set(None, Some("no peering resource is served".into()));
        assert_eq!(
            signal.borrow().as_deref(),
            Some(
                "no peering resource is served; waiting (zalando.org); in favour of dev (in 'a', zalando.org)"
            )
        );
    }
}
