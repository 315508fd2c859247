//! Hot reload: the guests an operator serves follow their files while it runs (a mounted
//! ConfigMap the kubelet updates, a file replaced by hand), without a restart.
//!
//! Every interval the operator's paths are rescanned (`runtime::Library`, which also says
//! why a rescan and not file-system notifications). A new version is compiled, checked
//! and `describe`d, and its startup handlers run, before anything changes; then the
//! reactor swaps the guests in ([`reactor::Swap`]): each stream takes the new handlers for
//! its next event, streams no handler needs any more retire, new ones start. Calls in
//! flight finish on the version they began with. A version that fails any of this is
//! refused, and the version before it keeps serving; the refusal is logged, journaled
//! (and so counted in `kapsel_guest_reloads_total{result="refused"}`), listed in the
//! liveness answer (`refused-guests`, without failing it), and posted as a Warning Event
//! about the operator's pod (`POD_NAME` and `POD_NAMESPACE`, which `deploy/` sets from
//! the downward API), or else, run outside a pod, its peering object; standalone and
//! outside a pod there is no object that stands for the operator, and a line at start
//! says the Events are not posted. A removed guest's cleanup handlers run once it no
//! longer serves.
//!
//! What handlers that disappear leave behind is decided as Kopf decides it for an
//! operator restarted with fewer handlers — which it sees as a relisting of every object;
//! a reload replays the objects of every stream whose handlers changed as a listing:
//!
//! - **finalizers**: the replay runs each object's changing cycle with the new handlers,
//!   which removes the operator's finalizer from objects that no longer need it (no
//!   delete handler, timer or daemon left for them). Unlike Kopf, this holds also for a
//!   resource no handler serves any more: its stream replays its objects with no handlers
//!   before it closes, so that no object is left undeletable. An object being deleted
//!   whose delete handler disappeared is released: the new guests have nothing to run
//!   for it.
//! - **timers and daemons** of removed or replaced handlers are stopped (a daemon's
//!   sleeps end at once and it returns); the new versions start where they match, a
//!   daemon that had exited for good included (as after a restart).
//! - **indexes** of removed index handlers are dropped; those of new ones fill by the
//!   replay. Progress records of removed changing handlers stay in the objects' annotations
//!   until their cycle is over, as in Kopf.
//! - **on.event handlers** see the replayed objects as a listing (event type none), as
//!   after a restart; no create or resume handler runs for objects already handled.
//! - **startup handlers** of a new version run before it serves; **cleanup handlers** of a
//!   removed guest run after; those of a replaced guest's old version do not run (the
//!   guest goes on serving, in its new version).
//! - **login handlers** (Kopf's `on.login`) of a new version, or of the version it
//!   replaces, log in anew after its startup handlers, with the login handlers of the
//!   guests as they will be: their credentials replace all the vault had (those of an
//!   old version are not used again), and a failed login refuses the version, the
//!   credentials before it kept. A version is refused that would bring the first login
//!   handlers to an operator started without any (its client is the one it was given,
//!   which every part of the operator holds: only a restart changes it), or take the
//!   last ones away (it could not log in again once its credentials are refused). A
//!   removed guest's login handlers cannot be refused: the others log in anew, and an
//!   error says so when none are left.
//! - **the compiled-guest cache** (`--cache-dir`) is bounded again before the reload is
//!   reported: the old versions' entries go once more recent ones fill `--max-cache-mib`.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::activities::{self, Finished};
use crate::cluster::{ObjectRef, PostedEvent, Poster, Scope, Vault};
use crate::journal::{Journal, Record};
use crate::peering;
use crate::reactor::Swap;
use crate::runtime::{Guest, HandlerKind, Library, Refusal, Rescan, Runtime, ServedGuests};

/// How long a new version's startup handlers may take, retries included, before it is
/// refused: a reload must not hang on one guest.
const STARTUP_BUDGET: Duration = Duration::from_secs(60);

/// How long a removed guest's cleanup handlers may take, retries included.
const CLEANUP_BUDGET: Duration = Duration::from_secs(10);

/// The reason of the Warning Events about refused guests.
const REFUSED_REASON: &str = "GuestRefused";

/// Where the reload loop reports, besides the journal.
pub(crate) struct Reporting {
    pub(crate) journal: Journal,
    /// The guests served and refused, for the liveness endpoint and the cleanup at exit.
    pub(crate) served: ServedGuests,
    /// What the startup and cleanup handlers run with.
    pub(crate) activities: activities::Context,
    /// Posts the Warning Events, about this object (none: not posted).
    pub(crate) events: Option<(Poster, ObjectRef)>,
}

/// The reload loop of one operator.
pub(crate) struct Reloader {
    pub(crate) runtime: Runtime,
    pub(crate) library: Library,
    /// How often the paths are rescanned.
    pub(crate) interval: Duration,
    /// Where new guests go to be served.
    pub(crate) swaps: mpsc::Sender<Swap>,
    pub(crate) reporting: Reporting,
    /// The credentials vault, when the operator logs in with login handlers.
    pub(crate) vault: Option<Vault>,
}

/// Whether any of `guests` declares a login handler.
fn logs_in(guests: &[Guest]) -> bool {
    !activities::logins(guests).is_empty()
}

/// Why a new version's startup handlers refused it.
#[derive(Debug, thiserror::Error)]
enum StartupFailed {
    #[error("its startup handlers took longer than {0:?}")]
    TooSlow(Duration),
    /// Each failed handler, and how it failed.
    #[error("{}", .0.join("; "))]
    Failed(Vec<String>),
}

/// What one reload changed, for the reports.
struct Changes {
    added: Vec<Guest>,
    /// Old and new versions.
    replaced: Vec<(Guest, Guest)>,
    removed: Vec<Guest>,
    refused: Vec<Refusal>,
}

impl Changes {
    fn of(rescan: &Rescan) -> Changes {
        let mut changes = Changes {
            added: Vec::new(),
            replaced: Vec::new(),
            removed: rescan.removed.clone(),
            refused: rescan.refused.clone(),
        };
        for candidate in &rescan.candidates {
            match &candidate.replaces {
                Some(old) => changes
                    .replaced
                    .push((old.clone(), candidate.guest.clone())),
                None => changes.added.push(candidate.guest.clone()),
            }
        }
        changes
    }

    /// Whether the guests served change.
    fn swaps_guests(&self) -> bool {
        !(self.added.is_empty() && self.replaced.is_empty() && self.removed.is_empty())
    }
}

impl Reloader {
    /// Rescans every interval until `stop`, swapping in what changed.
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(self.interval) => {}
            }
            let mut rescan = self.library.rescan(&self.runtime).await;
            if !rescan.is_empty() {
                let candidates: Vec<(Guest, Option<Guest>)> = rescan
                    .candidates
                    .iter()
                    .map(|c| (c.guest.clone(), c.replaces.clone()))
                    .collect();
                for (guest, replaces) in candidates {
                    let started = tokio::select! {
                        () = stop.cancelled() => return,
                        started = self.start(&guest) => started.map_err(|e| e.to_string()),
                    };
                    let logged_in = match started {
                        Ok(()) => tokio::select! {
                            () = stop.cancelled() => return,
                            logged_in = self.log_in(&guest, replaces.as_ref()) => logged_in,
                        },
                        Err(error) => Err(error),
                    };
                    if let Err(error) = logged_in {
                        rescan.refuse(&guest, error);
                    }
                }
            }
            let changes = Changes::of(&rescan);
            let recovered = self.library.apply(rescan);
            self.report_recovered(&recovered);
            if logs_in(&changes.removed) {
                self.log_in_without(&changes.removed).await;
            }
            if changes.swaps_guests() {
                let (done, served) = oneshot::channel();
                let swap = Swap {
                    guests: self.library.guests(),
                    done,
                };
                // The reactor has stopped when it takes no more swaps: so does this loop.
                tokio::select! {
                    () = stop.cancelled() => return,
                    sent = self.swaps.send(swap) => if sent.is_err() { return },
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    served = served => if served.is_err() { return },
                }
            }
            self.reporting
                .served
                .replace(self.library.guests(), self.library.refusals());
            if !changes.refused.is_empty() || changes.swaps_guests() {
                // Before the report: what reads it finds the cache bounded already.
                self.library.prune_cache(&self.runtime).await;
                self.report(&changes);
                self.clean_up(&changes.removed).await;
            }
        }
    }

    /// Runs a new version's startup handlers; why they failed, if they did.
    async fn start(&self, guest: &Guest) -> Result<(), StartupFailed> {
        let startup = activities::of_kind(std::slice::from_ref(guest), HandlerKind::Startup);
        if startup.is_empty() {
            return Ok(());
        }
        let context = &self.reporting.activities;
        let finished = activities::run_all(&startup, context, Some(STARTUP_BUDGET));
        let finished = tokio::time::timeout(STARTUP_BUDGET, finished)
            .await
            .map_err(|_| StartupFailed::TooSlow(STARTUP_BUDGET))?;
        let failed: Vec<String> = startup
            .iter()
            .zip(finished)
            .filter_map(|(activity, finished)| match finished {
                Finished::Failed(error) => {
                    Some(format!("startup handler '{}' {error}", activity.key))
                }
                Finished::Done(_) => None,
            })
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(StartupFailed::Failed(failed))
        }
    }

    /// Logs in anew when `guest` (a new version, replacing `replaces`) changes the login
    /// handlers: with those of the guests as they will be. Why it must be refused, if it
    /// must.
    async fn log_in(&self, guest: &Guest, replaces: Option<&Guest>) -> Result<(), String> {
        let declares = logs_in(std::slice::from_ref(guest));
        if !declares && !replaces.is_some_and(|old| logs_in(std::slice::from_ref(old))) {
            return Ok(());
        }
        let Some(vault) = &self.vault else {
            return Err(
                "it declares login handlers, but the operator started without any: \
                 it uses the client it was given, which a reload cannot replace; restart \
                 the operator to log in with them"
                    .to_owned(),
            );
        };
        let mut guests: Vec<Guest> = self
            .library
            .guests()
            .into_iter()
            .filter(|served| served.name() != guest.name())
            .collect();
        guests.push(guest.clone());
        if !logs_in(&guests) {
            return Err(
                "it removes the operator's last login handlers: the operator \
                 could not log in again once its credentials are refused; restart the \
                 operator to use the client it is given"
                    .to_owned(),
            );
        }
        activities::renew_login(vault, &guests, &self.reporting.activities)
            .await
            .map_err(|error| {
                format!("its login handlers could not log in ({error}); the credentials before it are kept")
            })
    }

    /// Guests with login handlers were removed: the guests left log in anew, or, with no
    /// login handler left, an error says what follows.
    async fn log_in_without(&self, removed: &[Guest]) {
        let Some(vault) = &self.vault else {
            return;
        };
        let guests = self.library.guests();
        let names: Vec<&str> = removed.iter().map(Guest::name).collect();
        if !logs_in(&guests) {
            tracing::error!(
                "Reload: the removed guests {names:?} had the operator's last login handlers: \
                 it goes on with the credentials it has, and stops once the API server \
                 refuses them; restart it to use the client it is given."
            );
            return;
        }
        // On failure the credentials before are kept; the error is logged.
        let _ = activities::renew_login(vault, &guests, &self.reporting.activities).await;
    }

    /// Logs and journals the guests whose file is back to the version served after a
    /// refused one: nothing is reloaded, but the refusal reported before is over.
    fn report_recovered(&self, recovered: &[Guest]) {
        for guest in recovered {
            tracing::info!(
                "Reload: {} holds the version of guest '{}' served ({}) again; the refused version is gone.",
                guest.path().display(),
                guest.name(),
                guest.digest().short()
            );
            self.reporting.journal.push(Record::GuestRecovered {
                guest: guest.name().to_owned(),
                path: guest.path().display().to_string(),
            });
        }
    }

    /// Logs, journals and posts what a reload did.
    fn report(&self, changes: &Changes) {
        let journal = &self.reporting.journal;
        let reloaded = |guest: &Guest, change: &str| {
            journal.push(Record::GuestReloaded {
                guest: guest.name().to_owned(),
                path: guest.path().display().to_string(),
                change: change.to_owned(),
            });
        };
        for guest in &changes.added {
            tracing::info!(
                "Reload: added guest '{}' from {} ({} handler registrations), {}.",
                guest.name(),
                guest.path().display(),
                guest.describe().handlers.len(),
                guest.compilation()
            );
            reloaded(guest, "added");
        }
        for (old, new) in &changes.replaced {
            tracing::info!(
                "Reload: replaced guest '{}' (version {}) with version {} from {} ({} handler registrations), {}.",
                new.name(),
                old.digest().short(),
                new.digest().short(),
                new.path().display(),
                new.describe().handlers.len(),
                new.compilation()
            );
            reloaded(new, "replaced");
        }
        for guest in &changes.removed {
            tracing::info!(
                "Reload: removed guest '{}': {} is gone.",
                guest.name(),
                guest.path().display()
            );
            reloaded(guest, "removed");
        }
        let served = self.library.guests();
        for refusal in &changes.refused {
            let serving = served.iter().any(|g| g.name() == refusal.guest);
            let message = format!(
                "Refused the new version of guest '{}' from {}: {}; {}.",
                refusal.guest,
                refusal.path.display(),
                refusal.error,
                if serving {
                    "the version before it keeps serving"
                } else {
                    "it is not served"
                }
            );
            tracing::error!("{message}");
            journal.push(Record::GuestRefused {
                guest: refusal.guest.clone(),
                path: refusal.path.display().to_string(),
                error: refusal.error.clone(),
            });
            if let Some((poster, involved)) = &self.reporting.events {
                poster.post(PostedEvent::warning(
                    involved.clone(),
                    REFUSED_REASON,
                    message,
                ));
            }
        }
    }

    /// Runs the cleanup handlers of guests that no longer serve (bounded).
    async fn clean_up(&self, removed: &[Guest]) {
        let cleanup = activities::of_kind(removed, HandlerKind::Cleanup);
        if cleanup.is_empty() {
            return;
        }
        let finished =
            activities::run_all(&cleanup, &self.reporting.activities, Some(CLEANUP_BUDGET));
        if tokio::time::timeout(CLEANUP_BUDGET, finished)
            .await
            .is_err()
        {
            tracing::warn!(
                "Cleanup handlers of removed guests did not finish within {CLEANUP_BUDGET:?}."
            );
        }
    }
}

/// What Warning Events about refused guests are about: the operator's pod when it is
/// known (`pod`: its namespace and name), else the peering object the operator uses
/// (the cluster-wide one, or that of its only namespace), else nothing (they are logged
/// only, which a line says).
pub(crate) fn reported_object(
    pod: Option<(String, String)>,
    peering: &peering::Settings,
    scope: &Scope,
) -> Option<ObjectRef> {
    let object = about(pod, peering, scope);
    if object.is_none() {
        tracing::info!(
            "Events about the operator (refused guests) are logged only: it runs outside a \
             pod (no POD_NAME and POD_NAMESPACE) and peers through no one peering object."
        );
    }
    object
}

/// [`reported_object`], without the line.
fn about(
    pod: Option<(String, String)>,
    peering: &peering::Settings,
    scope: &Scope,
) -> Option<ObjectRef> {
    if let Some((namespace, name)) = pod {
        return Some(ObjectRef {
            api_version: "v1".to_owned(),
            kind: "Pod".to_owned(),
            name,
            namespace: Some(namespace),
            uid: None,
        });
    }
    if peering.mode == peering::Mode::Standalone {
        return None;
    }
    let (kind, namespace) = match scope {
        Scope::Cluster => ("ClusterKopfPeering", None),
        Scope::Namespaces(_) => match scope.plain_names().as_deref() {
            Some([only]) => ("KopfPeering", Some(only.clone())),
            _ => return None,
        },
    };
    Some(ObjectRef {
        api_version: "kopf.dev/v1".to_owned(),
        kind: kind.to_owned(),
        name: peering.name.clone(),
        namespace,
        uid: None,
    })
}

/// The pod the operator runs in, from the environment (the downward API's variables,
/// which `deploy/` sets): its name in `POD_NAME`, or else `POD_ID` (Kopf's identity
/// variable, which deployments set to the pod's name too); its namespace in
/// `POD_NAMESPACE`, or else the namespace of the pod's service account. Without both
/// (run outside a pod), none.
pub(crate) fn pod_from_environment() -> Option<(String, String)> {
    const ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
    let variable = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let name = variable("POD_NAME").or_else(|| variable("POD_ID"))?;
    let namespace = std::env::var("POD_NAMESPACE")
        .ok()
        .or_else(|| std::fs::read_to_string(ACCOUNT_NAMESPACE).ok())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())?;
    Some((namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_about_the_pod_else_the_peering_object() {
        let auto = peering::Settings::default();
        let pod = Some(("ops".to_owned(), "kapsel-7d9".to_owned()));
        let object = reported_object(pod, &auto, &Scope::Cluster).expect("the pod");
        assert_eq!(
            (
                object.kind.as_str(),
                object.name.as_str(),
                object.namespace.as_deref()
            ),
            ("Pod", "kapsel-7d9", Some("ops"))
        );
        let object = reported_object(None, &auto, &Scope::Cluster).expect("the peering");
        assert_eq!(
            (object.kind.as_str(), object.name.as_str(), object.namespace),
            ("ClusterKopfPeering", "default", None)
        );
        let one = Scope::from_patterns(&["team-a"]);
        let object = reported_object(None, &auto, &one).expect("the namespace's peering");
        assert_eq!(
            (object.kind.as_str(), object.namespace.as_deref()),
            ("KopfPeering", Some("team-a"))
        );
        assert!(reported_object(None, &auto, &Scope::from_patterns(&["team-*"])).is_none());
        let standalone = peering::Settings {
            mode: peering::Mode::Standalone,
            ..auto
        };
        assert!(reported_object(None, &standalone, &Scope::Cluster).is_none());
    }
}
