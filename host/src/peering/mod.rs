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
mod follower;
mod identity;
mod peers;
mod places;
pub(crate) mod resources;
mod settings;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kube::Client;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::Resource;
pub use command::Freezer;
use follower::{Shared, serve_target, waiting_reason};
use places::{Blocks, Place, Target};
pub(crate) use settings::{DEV_PRIORITY, Mode, Settings};

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
