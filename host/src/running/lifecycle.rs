//! What runs around the reactor, in `Operator::run`'s order: the persistence check, the
//! task that logs in again, the startup handlers, and the cleanup handlers; and the
//! context the activities run with.

use std::future::Future;
use std::time::Duration;

use crate::cluster::{KubeAccess, Scope, Vault};
use crate::runtime::{self, HandlerKind, ServedGuests};
use crate::{Error, Persistence, activities, reactor};

/// How long cleanup handlers may take, retries included, when the operator stops.
const CLEANUP_BUDGET: Duration = Duration::from_secs(10);

/// Aborts a task when dropped.
pub(super) struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Refuses persistence settings out of range; warns of prefixes Kopf warns of.
pub(super) fn check_persistence(persistence: &Persistence) -> Result<(), Error> {
    persistence
        .check()
        .map_err(|e| Error::Persistence(Box::new(e)))?;
    for prefix in reactor::long_prefixes(persistence) {
        tracing::warn!(
            "The annotations prefix {prefix:?} is too long. It can cause errors when PATCHing."
        );
    }
    Ok(())
}

/// With a vault, the task that logs in again whenever the API server refuses the
/// credentials: a future that ends (with why) only if logging in fails for good, and
/// what aborts the task when dropped. Without a vault, a future that never ends.
pub(super) fn keep_logged_in(
    vault: Option<Vault>,
    served: &ServedGuests,
    activities: &activities::Context,
) -> (impl Future<Output = String> + use<>, Option<AbortOnDrop>) {
    let (task, stop) = match vault {
        Some(vault) => {
            let relogins = activities::keep_logged_in(vault, served.clone(), activities.clone());
            let task = tokio::spawn(relogins);
            let abort = task.abort_handle();
            (Some(task), Some(AbortOnDrop(abort)))
        }
        None => (None, None),
    };
    let failed = async move {
        match task {
            Some(task) => task
                .await
                .unwrap_or_else(|e| format!("the login task failed: {e}")),
            None => std::future::pending().await,
        }
    };
    (failed, stop)
}

/// Runs the startup handlers (KOPF.md §6.1): an error names those that failed for good.
pub(super) async fn run_startup(
    guests: &[runtime::Guest],
    activities: &activities::Context,
) -> Result<(), Error> {
    let startup = activities::of_kind(guests, HandlerKind::Startup);
    if startup.is_empty() {
        return Ok(());
    }
    let finished = activities::run_all(&startup, activities, None).await;
    let failed: Vec<String> = startup
        .iter()
        .zip(finished)
        .filter_map(|(a, f)| match f {
            activities::Finished::Failed(e) => Some(format!("'{}' {e}", a.key)),
            activities::Finished::Done(_) => None,
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::Startup(failed.join("; ")))
    }
}

/// Runs the cleanup handlers last, bounded: a stopping operator must stop.
pub(super) async fn run_cleanup(guests: &[runtime::Guest], activities: &activities::Context) {
    let cleanup = activities::of_kind(guests, HandlerKind::Cleanup);
    if cleanup.is_empty() {
        return;
    }
    let finished = activities::run_all(&cleanup, activities, Some(CLEANUP_BUDGET));
    if tokio::time::timeout(CLEANUP_BUDGET, finished)
        .await
        .is_err()
    {
        tracing::warn!("Cleanup handlers did not finish within {CLEANUP_BUDGET:?}.");
    }
}

/// What the operator's activities (startup, cleanup, probes) run with.
pub(crate) fn activities_context(
    client: &kube::Client,
    shared: &reactor::Shared,
    scope: &Scope,
) -> activities::Context {
    activities::Context {
        journal: shared.journal.clone(),
        indexes: shared.indexes.clone(),
        kube: Some(KubeAccess::new(
            client.clone(),
            shared.known.clone(),
            scope.clone(),
            shared.traffic.clone(),
        )),
        recorder: shared.recorder.clone(),
        clock: shared.clock.clone(),
        memo: shared.memo.clone(),
        settings: shared.settings.clone(),
    }
}
