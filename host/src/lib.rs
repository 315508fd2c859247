//! The Kapsel host: runs Kubernetes operators whose handlers are sandboxed
//! WebAssembly components, with Kopf's programming model.
//!
//! The `kapsel` binary is a thin shell over this library. Applications can
//! embed an operator with [`Operator`]; tests use [`testing`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), kapsel_host::Error> {
//! let operator = kapsel_host::Operator::new(["handlers/"]).all_namespaces();
//! operator.run(async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```

mod cli;
mod journal;
mod operator;
mod runtime;
pub mod testing;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use cli::{Cli, CliError, LogFormat, Logging};
pub use journal::{Journal, Record};

/// The handlers a guest declares, as JSON (what `kapsel inspect` prints).
///
/// # Errors
/// The reason the guest cannot be loaded, naming the file.
pub async fn inspect(guest: &Path) -> Result<serde_json::Value, String> {
    let runtime = runtime::Runtime::new(runtime::RuntimeConfig::default())
        .map_err(|e| cli::error_chain(&e))?;
    let guest = runtime.load(guest).await.map_err(|e| e.to_string())?;
    Ok(runtime::describe_json(guest.describe()))
}

/// Errors that stop an operator.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No Kubernetes connection could be configured (no in-cluster account, no kubeconfig).
    #[error("cannot find a Kubernetes cluster to connect to")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The WebAssembly engine could not start.
    #[error("the WebAssembly runtime could not start")]
    Runtime(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// None of the given guests could be loaded (each reason was logged).
    #[error("no guest could be loaded: {}", .0.join("; "))]
    NoGuests(Vec<String>),
    /// The operator failed while running.
    #[error("the operator failed")]
    Operator(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// An operator: guests (WebAssembly handlers) served on a cluster.
///
/// Built with chained setters, run with [`Operator::run`].
#[derive(Clone)]
#[must_use]
pub struct Operator {
    guests: Vec<PathBuf>,
    namespaces: Vec<String>,
    client: Option<kube::Client>,
    journal: Journal,
    settings: operator::Settings,
    runtime: runtime::RuntimeConfig,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("guests", &self.guests)
            .field("namespaces", &self.namespaces)
            .field("client", &self.client.as_ref().map(|_| "given"))
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Operator {
    /// An operator of these guests: `.wasm` files, or directories of them.
    pub fn new<I, P>(guests: I) -> Operator
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        Operator {
            guests: guests.into_iter().map(Into::into).collect(),
            namespaces: Vec::new(),
            client: None,
            journal: Journal::default(),
            settings: operator::Settings::default(),
            runtime: runtime::RuntimeConfig::default(),
        }
    }

    /// Serve every namespace with one cluster-wide stream per resource (`-A`). The default.
    pub fn all_namespaces(mut self) -> Operator {
        self.namespaces.clear();
        self.settings.scope = operator::Scope::Cluster;
        self
    }

    /// Serve only namespaces matching these Kopf patterns (`-n`): globs with
    /// `*` and `?`, comma-separated, `!` to exclude.
    pub fn namespaces<I, S>(mut self, patterns: I) -> Operator
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.namespaces = patterns.into_iter().map(Into::into).collect();
        self.settings.scope = operator::Scope::from_patterns(&self.namespaces);
        self
    }

    /// Use this client instead of inferring one (in-cluster, `KUBECONFIG`, `~/.kube/config`).
    pub fn client(mut self, client: kube::Client) -> Operator {
        self.client = Some(client);
        self
    }

    /// Reconnect a watch stream that was silent (not even a bookmark) this long. Default 70 s.
    pub fn inactivity_timeout(mut self, timeout: Duration) -> Operator {
        self.settings.streams.inactivity_timeout = timeout;
        self
    }

    /// The wall-clock budget of one handler call, unless the handler declares its own. Default 5 s.
    pub fn call_deadline(mut self, deadline: Duration) -> Operator {
        self.runtime.default_deadline = deadline;
        self
    }

    /// The memory cap of one handler call in MiB, unless the handler declares its own. Default 64.
    pub fn call_memory_mib(mut self, mib: u32) -> Operator {
        self.runtime.default_memory_mib = mib;
        self
    }

    /// The record of what this operator does (shared: clone it before [`Operator::run`]).
    pub fn journal(&self) -> Journal {
        self.journal.clone()
    }

    /// Runs until `shutdown` completes, then stops the streams and lets
    /// in-flight handlers finish (bounded).
    ///
    /// # Errors
    /// When no cluster connection can be made, the WebAssembly runtime cannot
    /// start, no guest can be loaded, or the initial discovery fails.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), Error> {
        let client = match self.client {
            Some(client) => client,
            None => kube::Client::try_default()
                .await
                .map_err(|e| Error::Connect(Box::new(e)))?,
        };
        let runtime =
            runtime::Runtime::new(self.runtime).map_err(|e| Error::Runtime(Box::new(e)))?;
        let (guests, errors) = runtime.load_all(&self.guests).await;
        for error in &errors {
            tracing::error!("{error}");
            self.journal.push(Record::GuestRejected {
                path: error.path().display().to_string(),
                error: error.to_string(),
            });
        }
        if guests.is_empty() {
            return Err(Error::NoGuests(
                errors.iter().map(ToString::to_string).collect(),
            ));
        }
        for guest in &guests {
            tracing::info!(
                "Loaded guest '{}' from {} ({} handler registrations).",
                guest.name(),
                guest.path().display(),
                guest.describe().handlers.len()
            );
        }
        let stop = CancellationToken::new();
        let trigger = stop.clone();
        let operator = operator::run(client, &guests, self.settings, self.journal, stop);
        tokio::pin!(operator);
        tokio::pin!(shutdown);
        tokio::select! {
            result = &mut operator => return result.map_err(|e| Error::Operator(Box::new(e))),
            () = &mut shutdown => trigger.cancel(),
        }
        operator.await.map_err(|e| Error::Operator(Box::new(e)))
    }
}
