//! An in-memory Kubernetes API server, served over HTTP on loopback.
//!
//! It answers kube-apiserver's REST API closely enough for kubectl, kube-rs and Kapsel's
//! host: discovery and OpenAPI documents (negotiated on `Accept`, OpenAPI v2 in protobuf
//! too), built-in resources (with the protobuf bodies kubectl's typed commands send), CRDs,
//! CRUD with every patch type, server-side apply with field ownership (`managedFields`,
//! conflicts, force), finalizers, owner-reference garbage collection, status subresources,
//! selectors, and watches with bookmarks and 410 Gone. With a state file, every
//! acknowledged write survives a crash. Tests can inject faults through [`Faults`]; every
//! request is counted ([`ApiServer::request_counts`], `GET /metrics`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), kapsel_apiserver::Error> {
//! let server = kapsel_apiserver::ApiServer::start(kapsel_apiserver::Config::default()).await?;
//! println!("{}", server.kubeconfig());
//! server.shutdown().await;
//! # Ok(()) }
//! ```

mod builtins;
mod counts;
mod crd;
mod defaults;
mod discovery;
mod faults;
mod field_validation;
mod gc;
mod kubeconfig;
mod list;
mod managed;
mod meta;
mod negotiate;
mod objects;
mod openapi;
mod patch;
mod persist;
#[cfg(test)]
mod proptests;
mod protobuf;
mod registry;
mod requests;
mod scale;
mod schema;
mod selectors;
mod server;
mod state;
mod status;
mod store;
mod table;
mod validate;
mod watch;

pub use counts::{RequestCount, RequestKind};
pub use faults::{Fault, RequestMatcher};

use serde_json::json;
use state::Shared;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A handle to inject faults into a running [`ApiServer`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct Faults {
    shared: Arc<Shared>,
}

impl Faults {
    /// Closes every open watch connection now (their clients see a clean end of stream).
    pub fn drop_watches(&self) {
        self.shared.closer.send_modify(|n| *n += 1);
    }

    /// Answers the next `n` requests that `matcher` matches with `fault`.
    pub fn fail_next(&self, n: usize, matcher: RequestMatcher, fault: Fault) {
        self.shared.faults.push(n, matcher, fault);
    }

    /// How many injected failures are still waiting for a matching request: lets a
    /// test wait until a fault has been served before acting on its consequences.
    pub fn unserved(&self) -> usize {
        self.shared.faults.unserved()
    }

    /// Delays every response by `d` (None switches the delay off).
    pub fn delay_responses(&self, d: Option<Duration>) {
        self.shared.faults.set_delay(d);
    }

    /// Forgets the watch history: watches from any resourceVersion before now get 410 Gone.
    pub fn expire_history(&self) {
        self.shared.lock().expire_history();
    }
}

/// How to run the server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// TCP port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// The state file: loaded at start, and every change is logged to it and synced before
    /// it is acknowledged (see the format in the `persist` module); None keeps all in
    /// memory.
    pub state_file: Option<PathBuf>,
    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK event.
    pub bookmark_interval: Duration,
    /// How many events the watch history keeps; watches from older versions get 410 Gone.
    pub history_limit: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 0,
            state_file: None,
            bookmark_interval: Duration::from_secs(5),
            history_limit: 10_000,
        }
    }
}

impl Config {
    /// Sets the port (0 = any free port).
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Sets the state file.
    #[must_use]
    pub fn state_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.state_file = Some(path.into());
        self
    }

    /// Sets the bookmark interval.
    #[must_use]
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d;
        self
    }

    /// Sets the watch history length.
    #[must_use]
    pub fn history_limit(mut self, n: usize) -> Self {
        self.history_limit = n;
        self
    }
}

/// What can go wrong starting or stopping the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The port could not be bound.
    #[error("cannot listen on 127.0.0.1:{port}")]
    Bind {
        /// The port asked for.
        port: u16,
        /// Why binding failed.
        #[source]
        source: std::io::Error,
    },
    /// The state file exists but cannot be read or understood; it is left untouched.
    #[error("cannot load the state file {}: {message}", path.display())]
    State {
        /// The state file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The state file could not be written.
    #[error("cannot save the state file {}", path.display())]
    Save {
        /// The state file.
        path: PathBuf,
        /// Why writing failed.
        #[source]
        source: std::io::Error,
    },
}

/// A running server. Dropping it stops serving; [`ApiServer::shutdown`] also waits for
/// open connections. Every acknowledged change is in the state file already.
#[derive(Debug)]
pub struct ApiServer {
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    serving: Option<JoinHandle<()>>,
}

/// Creates the namespaces every cluster starts with.
fn seed(store: &mut store::Store) {
    let Some(rt) = store.registry.find("", "v1", "namespaces").cloned() else {
        return;
    };
    let scope = objects::Scope { rt, ns: None };
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let ns = json!({"metadata": {"name": name}});
        if let Err(e) = objects::create(store, &scope, ns, false, objects::Fields::Keep) {
            tracing::warn!(namespace = name, error = ?e, "could not create a built-in namespace");
        }
    }
}

impl ApiServer {
    /// Binds 127.0.0.1:`port`, loads the state file if there is one, and starts serving.
    pub async fn start(config: Config) -> Result<ApiServer, Error> {
        let mut store = store::Store::new(config.history_limit);
        let saved = match &config.state_file {
            Some(path) => persist::load(path)?,
            None => None,
        };
        match saved {
            Some((resource_version, objects)) => store.load(resource_version, objects),
            None => seed(&mut store),
        }
        if let Some(path) = &config.state_file {
            // Every start writes a fresh snapshot: the log starts short, a torn last record
            // is gone, and an old-format file is converted.
            store.set_journal(persist::Journal::create(path, &store.snapshot())?);
        }
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, config.port))
            .await
            .map_err(|source| Error::Bind {
                port: config.port,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            port: config.port,
            source,
        })?;
        let shared = Arc::new(Shared::new(store, config.bookmark_interval, addr));
        let (stop, stopped) = oneshot::channel::<()>();
        let app = server::router(shared.clone());
        let serving = tokio::spawn(async move {
            let graceful = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = graceful.await {
                tracing::error!(error = %e, "the API server stopped serving");
            }
        });
        tracing::info!(%addr, "embedded API server listening");
        Ok(ApiServer {
            shared,
            stop: Some(stop),
            serving: Some(serving),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// A kubeconfig (YAML) for this server: cluster, context and user `kapsel`.
    pub fn kubeconfig(&self) -> String {
        kubeconfig::kubeconfig(&self.url())
    }

    /// How many requests of each kind (client, verb, resource, status code) the server
    /// answered since it started, sorted by kind; `GET /metrics` serves the same as
    /// Prometheus text (`apiserver_request_total`).
    pub fn request_counts(&self) -> Vec<RequestCount> {
        self.shared.counts.snapshot()
    }

    /// The fault-injection handle.
    pub fn faults(&self) -> Faults {
        Faults {
            shared: self.shared.clone(),
        }
    }

    /// Stops serving and closes every watch. (Nothing is left to save: every acknowledged
    /// change is in the state file already.)
    pub async fn shutdown(mut self) -> Result<(), Error> {
        self.stop_serving();
        if let Some(serving) = self.serving.take() {
            // Open keep-alive connections get a moment to finish; then they are cut.
            let abort = serving.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), serving)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        Ok(())
    }

    fn stop_serving(&mut self) {
        self.shared.closer.send_modify(|n| *n += 1);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop_serving();
    }
}

/// Serves until `shutdown` completes, then shuts down cleanly (for `kapsel dev-cluster`).
/// `on_start` receives the running server first, e.g. to write its kubeconfig.
pub async fn serve_until(
    config: Config,
    on_start: impl FnOnce(&ApiServer),
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let server = ApiServer::start(config).await?;
    on_start(&server);
    shutdown.await;
    server.shutdown().await
}
