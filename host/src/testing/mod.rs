//! Run operators on a fresh in-memory cluster, for tests (Kopf's `KopfRunner`, and more).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use kapsel_host::{testing::Cluster, Operator};
//! let cluster = Cluster::start().await?;
//! let operator = cluster.start_operator(Operator::new(["seed.wasm"]));
//! // ... create objects with cluster.client(), then:
//! operator.journal().wait_for(std::time::Duration::from_secs(5), |records| !records.is_empty()).await.ok();
//! operator.stop().await?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

mod cases;
mod running;

use std::sync::Arc;

pub use cases::{TestError, TestRequest};
pub use kapsel_apiserver::{ApiServer, Config as ServerConfig, Fault, Faults, RequestMatcher};
pub use running::{RunningOperator, SettleError};

use crate::Operator;
use crate::clock::ManualClock;

/// Why an in-memory cluster (or a client of one) is not there.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The API server did not start (no free port, an unreadable state file).
    #[error("the in-memory API server did not start")]
    Start(#[from] kapsel_apiserver::Error),
    /// The URL is not one a client can use.
    #[error("bad API server URL {url}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The client cannot be built.
    #[error("cannot build a client for {url}")]
    Client {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// A kube client for an API server at this URL (plain HTTP on loopback).
///
/// # Errors
/// The URL does not parse, or the client cannot be built.
pub fn client_for(url: &str) -> Result<kube::Client, ClusterError> {
    let uri = url.parse().map_err(|e| ClusterError::Url {
        url: url.to_owned(),
        source: Box::new(e),
    })?;
    let config = kube::Config::new(uri);
    crate::cluster::kube_client(config).map_err(|source| ClusterError::Client {
        url: url.to_owned(),
        source,
    })
}

/// A fresh in-memory cluster on a free loopback port.
pub struct Cluster {
    server: ApiServer,
    client: kube::Client,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("url", &self.server.url())
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Starts an empty cluster (namespaces `default`, `kube-system`, `kube-public`).
    ///
    /// # Errors
    /// The server cannot bind a port.
    pub async fn start() -> Result<Cluster, ClusterError> {
        Cluster::start_with(ServerConfig::default()).await
    }

    /// Starts an empty cluster served as `config` says (e.g. with a longer bookmark
    /// interval, so that a watcher's resourceVersion stays behind).
    ///
    /// # Errors
    /// The server cannot bind a port, or cannot load its state file.
    pub async fn start_with(config: ServerConfig) -> Result<Cluster, ClusterError> {
        let server = ApiServer::start(config).await?;
        let client = client_for(&server.url())?;
        Ok(Cluster { server, client })
    }

    /// A client of this cluster.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The API server, e.g. for its URL, kubeconfig and fault injection.
    pub fn server(&self) -> &ApiServer {
        &self.server
    }

    /// Starts an operator on this cluster in the background.
    pub fn start_operator(&self, operator: Operator) -> RunningOperator {
        RunningOperator::start(operator.client(self.client.clone()), None)
    }

    /// Starts an operator on this cluster in the background, on handler time that moves
    /// only when the test says ([`RunningOperator::advance`]): retry delays, backoffs,
    /// timers, daemon sleeps and handler timeouts take no wall time, as in `kapsel test`.
    pub fn start_operator_on_handler_time(&self, operator: Operator) -> RunningOperator {
        RunningOperator::start(
            operator.client(self.client.clone()),
            Some(Arc::new(ManualClock::new())),
        )
    }

    /// Stops the server.
    ///
    /// # Errors
    /// The server did not stop cleanly (e.g. its state file could not be saved).
    pub async fn shutdown(self) -> Result<(), kapsel_apiserver::Error> {
        self.server.shutdown().await
    }
}

/// How a `kapsel test` run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseSummary {
    /// Cases (and replays) that passed.
    pub passed: usize,
    /// Cases (and replays) that failed.
    pub failed: usize,
}

/// Runs `kapsel test` in-process: `guest` against the case files (or directories of
/// them), each on a fresh embedded cluster; the report is written to `out`.
///
/// # Errors
/// A case file that cannot be parsed (the message names the file, line and problem),
/// a guest that cannot be loaded, or no case selected.
pub async fn run_cases(
    guest: &Path,
    cases: &[PathBuf],
    out: &mut impl std::io::Write,
) -> Result<CaseSummary, TestError> {
    test(&TestRequest::new(guest).cases(cases), out).await
}

/// Runs `kapsel test GUEST --replay FILE...` in-process: each recording of
/// `kapsel run --record` is replayed against `guest` on a fresh embedded cluster, and
/// what the guest did differently is reported to `out`.
///
/// # Errors
/// A recording that cannot be read (the message names the file and line), or a guest
/// that cannot be loaded.
pub async fn replay(
    guest: &Path,
    recordings: &[PathBuf],
    out: &mut impl std::io::Write,
) -> Result<CaseSummary, TestError> {
    test(&TestRequest::new(guest).replays(recordings), out).await
}

/// Runs what `kapsel test` was asked (case files and recordings against one guest);
/// the report is written to `out`.
///
/// # Errors
/// What keeps the run from starting (the `kapsel` command exits 2 for these): a case
/// file or recording that cannot be read, a guest that cannot be loaded, nothing
/// selected, a JUnit report that cannot be written.
pub async fn test(
    request: &TestRequest,
    out: &mut impl std::io::Write,
) -> Result<CaseSummary, TestError> {
    cases::run(request, out).await
}
