//! The state every request shares: the store (behind a lock whose release makes changes
//! durable), the injected faults, the request counts, and what open watches listen to.

use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::auth::Authenticator;
use crate::counts::RequestCounts;
use crate::faults::FaultTable;
use crate::store::Store;

/// State shared by every request, the watchers, the persister and the `Faults` handle.
#[derive(Debug)]
pub(crate) struct Shared {
    store: Mutex<Store>,
    pub(crate) faults: FaultTable,
    /// Requests answered, by kind (`/metrics`).
    pub(crate) counts: RequestCounts,
    pub(crate) bookmark_interval: Duration,
    /// Bumped to close every open watch (fault injection, shutdown).
    pub(crate) closer: tokio::sync::watch::Sender<u64>,
    pub(crate) addr: SocketAddr,
    /// Who requests are (their tokens), and the tokens the server issues.
    pub(crate) auth: Authenticator,
    /// Whether requests are authenticated and authorized with RBAC.
    pub(crate) rbac: bool,
    /// Whether lists and watches take a `shardSelector` (`Config::sharded_list_and_watch`).
    pub(crate) sharded_list_and_watch: bool,
    /// What the simulated kubelet answers for.
    pub(crate) pods: PodSettings,
}

/// The simulated kubelet's settings that requests read.
#[derive(Debug, Clone)]
pub(crate) struct PodSettings {
    /// Whether the simulated kubelet runs (`Config::kubelet`).
    pub(crate) kubelet: bool,
    /// What `pods/log` answers for a started container (`Config::pod_log`).
    pub(crate) log: Option<String>,
}

impl Shared {
    pub(crate) fn new(
        store: Store,
        bookmark_interval: Duration,
        addr: SocketAddr,
        auth: Authenticator,
        rbac: bool,
        sharded_list_and_watch: bool,
        pods: PodSettings,
    ) -> Self {
        Shared {
            store: Mutex::new(store),
            faults: FaultTable::default(),
            counts: RequestCounts::default(),
            bookmark_interval,
            closer: tokio::sync::watch::channel(0).0,
            addr,
            auth,
            rbac,
            sharded_list_and_watch,
            pods,
        }
    }

    /// The store. Writers change it through single calls that leave it consistent, so after
    /// a panic elsewhere (a bug) the data is still usable: recover from poisoning.
    pub(crate) fn lock(&self) -> StoreGuard<'_> {
        StoreGuard(self.store.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The locked store. Releasing it first makes the changes made under it durable (the
/// state file's log is synced), so no other request, and no response, sees a change that
/// a crash could lose.
pub(crate) struct StoreGuard<'a>(MutexGuard<'a, Store>);

impl std::ops::Deref for StoreGuard<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.0
    }
}

impl std::ops::DerefMut for StoreGuard<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        &mut self.0
    }
}

impl Drop for StoreGuard<'_> {
    fn drop(&mut self) {
        self.0.flush();
    }
}
