//! An in-memory Kubernetes API server, served over HTTP on loopback.
//!
//! It answers kube-apiserver's REST API closely enough for kubectl, kube-rs and Kapsel's
//! host: discovery and OpenAPI documents (negotiated on `Accept`, OpenAPI v2 in protobuf
//! too), built-in resources (with the protobuf bodies kubectl's typed commands send), CRDs,
//! CRUD with every patch type, server-side apply with field ownership (`managedFields`,
//! conflicts, force), finalizers, owner-reference garbage collection, status subresources,
//! selectors (label, field, and shard selectors: sharded lists and watches,
//! [`Config::sharded_list_and_watch`]), and watches with bookmarks and 410 Gone. With a
//! state file, every acknowledged write survives a crash. A simulated node and kubelet
//! ([`Config::kubelet`], on by default) schedule pods, run them through their phases and
//! confirm their graceful deletions. Tests can inject faults through [`Faults`]; every
//! request is counted ([`ApiServer::request_counts`], `GET /metrics`).
//!
//! With [`Config::rbac`] (`kapsel dev-cluster --rbac`), every request is authenticated
//! and authorized with RBAC as kube-apiserver does: the server's [`ApiServer::kubeconfig`]
//! is the admin's (`kapsel-admin` in `system:masters`, over `https://` on the same port);
//! a ServiceAccount's token comes from `kubectl create token NAME -n NS` (the TokenRequest
//! API) or [`ApiServer::service_account_token`]; [`Config::static_token`] names other
//! users. Roles, ClusterRoles and their bindings decide the rest, with kube's 401 and 403.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kapsel_apiserver::Error> {
//! let server = kapsel_apiserver::ApiServer::start(kapsel_apiserver::Config::default()).await?;
//! println!("{}", server.kubeconfig());
//! server.shutdown().await;
//! # Ok(()) }
//! ```

mod admission;
mod apiservices;
mod auth;
mod builtins;
mod cel;
mod counts;
mod crd;
mod defaults;
mod discovery;
mod faults;
mod field_validation;
mod gc;
mod grace;
mod kubeconfig;
mod kubelet;
mod list;
mod managed;
mod master_service;
mod meta;
mod namespaces;
mod negotiate;
mod objects;
mod openapi;
mod owners;
mod patch;
mod persist;
#[cfg(test)]
mod proptests;
mod protobuf;
mod rbac;
mod registry;
mod requests;
mod scale;
mod schema;
mod selectors;
mod server;
mod shards;
mod state;
mod status;
mod store;
mod table;
mod timers;
mod tls;
mod validate;
mod watch;

pub use auth::StaticToken;
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

    /// Forgets the injected failures not served yet.
    pub fn clear(&self) {
        self.shared.faults.clear();
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
    /// Authenticate every request and authorize it with RBAC, as kube-apiserver with
    /// `--authorization-mode=RBAC` does (off: everyone may do everything). With it on, the
    /// server's [`ApiServer::kubeconfig`] carries an admin token (a `system:masters`
    /// user), a request without a bearer token is `system:anonymous`, and one with a token
    /// that is not valid gets 401. The default ClusterRoles and bindings (cluster-admin,
    /// discovery, public info, basic user) are created at start either way, as every
    /// kube-apiserver has them.
    pub rbac: bool,
    /// Bearer tokens that name users (kube's `--token-auth-file`), besides the admin token
    /// and ServiceAccount tokens.
    pub static_tokens: Vec<StaticToken>,
    /// Serve sharded lists and watches (KEP-5866, kube's `ShardedListAndWatch` feature
    /// gate, alpha in Kubernetes 1.36; on by default here): `shardSelector=
    /// shardRange(object.metadata.uid, '0x…', '0x…') || …` keeps the objects whose field
    /// (`object.metadata.uid` or `object.metadata.namespace`) hashes (64-bit FNV-1a) into
    /// one of the ranges `[start, end)`, and a list says so in `metadata.shardInfo`; a
    /// malformed selector gets 400. Off: the parameter is ignored, as a cluster without
    /// the feature gate ignores it (every object is sent, no `shardInfo`).
    pub sharded_list_and_watch: bool,
    /// Run the simulated node and kubelet (KWOK's idea, in process; on by default): a Node
    /// (`kapsel-node`) is registered when the cluster has none of that name, pods without
    /// `spec.nodeName` are bound to it (through a binding, as kube-scheduler does) unless
    /// it is cordoned, and its pods go Pending → Running with kubelet's conditions and
    /// container statuses; a scheduled pod's DELETE is graceful (it stays, with
    /// `deletionTimestamp`, until the kubelet confirms it after its grace period). Off:
    /// no node, pods stay as stored and are deleted at once (the server before the kubelet).
    pub kubelet: bool,
    /// How long a pod owned by a Job runs before the simulated kubelet makes it
    /// `Succeeded` (a pod's annotation `kubelet.kapsel.dev/run-for-ms` overrides it, and
    /// makes any pod with `restartPolicy` `Never` or `OnFailure` complete).
    pub job_pod_runtime: Duration,
    /// The line `pods/log` answers for a container that started (None: an empty log).
    pub pod_log: Option<String>,
    /// How long after a namespace starts terminating its content is deleted, as kube's
    /// namespace controller waits (5 s, kube's): until then the namespace is
    /// `Terminating`, refuses new content, and its objects are still there for a client
    /// that deletes them one by one after it (`kubectl delete -k`). Zero: at once, after
    /// the DELETE is answered.
    pub namespace_deletion_delay: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 0,
            state_file: None,
            bookmark_interval: Duration::from_secs(5),
            history_limit: 10_000,
            rbac: false,
            static_tokens: Vec::new(),
            sharded_list_and_watch: true,
            kubelet: true,
            job_pod_runtime: Duration::from_secs(1),
            pod_log: None,
            namespace_deletion_delay: namespaces::KUBE_DELAY,
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

    /// Switches authentication and RBAC authorization on or off (see [`Config::rbac`]).
    #[must_use]
    pub fn rbac(mut self, on: bool) -> Self {
        self.rbac = on;
        self
    }

    /// Switches sharded lists and watches on or off (see
    /// [`Config::sharded_list_and_watch`]).
    #[must_use]
    pub fn sharded_list_and_watch(mut self, on: bool) -> Self {
        self.sharded_list_and_watch = on;
        self
    }

    /// Switches the simulated node and kubelet on or off (see [`Config::kubelet`]).
    #[must_use]
    pub fn kubelet(mut self, on: bool) -> Self {
        self.kubelet = on;
        self
    }

    /// Sets how long a Job's pod runs before it succeeds (see [`Config::job_pod_runtime`]).
    #[must_use]
    pub fn job_pod_runtime(mut self, d: Duration) -> Self {
        self.job_pod_runtime = d;
        self
    }

    /// Sets the namespace controller's delay (see [`Config::namespace_deletion_delay`]).
    #[must_use]
    pub fn namespace_deletion_delay(mut self, d: Duration) -> Self {
        self.namespace_deletion_delay = d;
        self
    }

    /// Sets the line `pods/log` answers (see [`Config::pod_log`]).
    #[must_use]
    pub fn pod_log(mut self, line: impl Into<String>) -> Self {
        self.pod_log = Some(line.into());
        self
    }

    /// Makes `token` a bearer token of the user `user` in `groups` (and
    /// `system:authenticated`).
    #[must_use]
    pub fn static_token(
        mut self,
        token: impl Into<String>,
        user: impl Into<String>,
        groups: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.static_tokens.push(StaticToken {
            token: token.into(),
            user: user.into(),
            groups: groups.into_iter().map(Into::into).collect(),
        });
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
    /// A client certificate could not be issued.
    #[error("cannot issue a client certificate: {0}")]
    Certificate(String),
    /// A ServiceAccount token could not be issued.
    #[error("cannot issue a token for the service account {namespace}/{name}: {message}")]
    Token {
        /// The account's namespace.
        namespace: String,
        /// The account's name.
        name: String,
        /// Why not (the account does not exist).
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
    /// The simulated kubelet's task (`Config::kubelet`).
    kubelet: Option<JoinHandle<()>>,
    /// The namespace controller's task.
    namespace_controller: Option<JoinHandle<()>>,
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

/// Creates kube's default ClusterRoles and bindings that are missing (existing ones, maybe
/// changed by an admin, are left as they are).
fn bootstrap_rbac(store: &mut store::Store) {
    for (plural, obj) in rbac::default_objects() {
        let Some(rt) = store
            .registry
            .find("rbac.authorization.k8s.io", "v1", plural)
            .cloned()
        else {
            continue;
        };
        let name = store::meta_str(&obj, "name").to_string();
        let scope = objects::Scope { rt, ns: None };
        if store.get(&scope.res(), &scope.key(&name)).is_some() {
            continue;
        }
        if let Err(e) = objects::create(store, &scope, obj, false, objects::Fields::Keep) {
            tracing::warn!(%plural, %name, error = ?e, "could not create a default RBAC object");
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
        let state_error = |message: String| Error::State {
            path: config.state_file.clone().unwrap_or_default(),
            message,
        };
        let credentials = match saved.as_ref().and_then(|s| s.credentials.as_ref()) {
            Some(c) => auth::Credentials::from_json(c).map_err(state_error)?,
            None => auth::Credentials::generate().map_err(state_error)?,
        };
        store.set_credentials(credentials.to_json());
        match saved {
            Some(s) => store.load(s.resource_version, s.objects),
            None => seed(&mut store),
        }
        bootstrap_rbac(&mut store);
        apiservices::reconcile(&mut store);
        // What the server made before it serves is not in the watch history, as a fresh
        // kube-apiserver's watch cache starts at its first list: a watch from an older
        // resourceVersion is answered 410 Gone.
        store.expire_history();
        store.set_graceful_pods(config.kubelet);
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
        // The `default/kubernetes` Service points at the bound port.
        master_service::reconcile(&mut store, addr);
        // With RBAC on, TLS beside plain HTTP (kubectl sends tokens only over TLS).
        let bind_error = |message: String| Error::Bind {
            port: config.port,
            source: std::io::Error::other(message),
        };
        let (listener, dual, client_ca) = if config.rbac {
            let client_ca = tls::ClientCa::generate().map_err(bind_error)?;
            let dual = tls::DualListener::new(listener, &credentials.tls, &client_ca)
                .map_err(bind_error)?;
            (None, Some(dual), Some(client_ca))
        } else {
            (Some(listener), None, None)
        };
        let shared = Arc::new(Shared::new(
            store,
            config.bookmark_interval,
            addr,
            auth::Authenticator::new(credentials, &config.static_tokens, client_ca),
            config.rbac,
            config.sharded_list_and_watch,
            state::PodSettings {
                kubelet: config.kubelet,
                log: config.pod_log.clone(),
            },
        ));
        // The simulated node's kubelet, when there is one: it stops with the server.
        let kubelet = config
            .kubelet
            .then(|| kubelet::start(shared.clone(), config.job_pod_runtime));
        let namespace_controller = Some(namespaces::start(
            shared.clone(),
            config.namespace_deletion_delay,
        ));
        let (stop, stopped) = oneshot::channel::<()>();
        let app = server::router(shared.clone());
        let serving = tokio::spawn(async move {
            let stopped = async {
                let _ = stopped.await;
            };
            let served = match (listener, dual) {
                (Some(plain), _) => {
                    axum::serve(plain, app)
                        .with_graceful_shutdown(stopped)
                        .await
                }
                (None, Some(dual)) => {
                    // Each request knows its connection's client certificate.
                    let app = app.into_make_service_with_connect_info::<tls::Peer>();
                    axum::serve(dual, app).with_graceful_shutdown(stopped).await
                }
                (None, None) => Ok(()),
            };
            if let Err(e) = served {
                tracing::error!(error = %e, "the API server stopped serving");
            }
        });
        tracing::info!(%addr, "embedded API server listening");
        Ok(ApiServer {
            shared,
            stop: Some(stop),
            serving: Some(serving),
            kubelet,
            namespace_controller,
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

    /// A kubeconfig (YAML) for this server: cluster, context and user `kapsel`. With
    /// [`Config::rbac`], the server is `https://` (the same port answers TLS and plain
    /// HTTP; kubectl sends tokens only over TLS) with the server's CA, and the user has the
    /// admin token ([`ApiServer::admin_token`]).
    pub fn kubeconfig(&self) -> String {
        if self.shared.rbac {
            let ca = &self.shared.auth.credentials().tls.ca_pem;
            let url = format!("https://{}", self.shared.addr);
            kubeconfig::kubeconfig(&url, Some((&self.admin_token(), ca)))
        } else {
            kubeconfig::kubeconfig(&self.url(), None)
        }
    }

    /// The bearer token of the server's admin user (`kapsel-admin`, in `system:masters`):
    /// allowed everything. It is kept in the state file, so it outlives a restart.
    pub fn admin_token(&self) -> String {
        self.shared.auth.credentials().admin_token().to_string()
    }

    /// A token for the ServiceAccount `namespace/name`, as the TokenRequest API
    /// (`kubectl create token`) issues it: for the API server's audience, valid for
    /// `valid_for`, and no longer once the account is deleted or re-created.
    pub fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        valid_for: Duration,
    ) -> Result<String, Error> {
        let error = |message: String| Error::Token {
            namespace: namespace.into(),
            name: name.into(),
            message,
        };
        let store = self.shared.lock();
        let res = (String::new(), "serviceaccounts".to_string());
        let sa = store
            .get(&res, &(namespace.to_string(), name.to_string()))
            .ok_or_else(|| error("it does not exist".into()))?;
        let seconds = i64::try_from(valid_for.as_secs()).unwrap_or(i64::MAX);
        let (token, _) = self
            .shared
            .auth
            .issue(sa, &[auth::ISSUER.to_string()], seconds)
            .map_err(error)?;
        Ok(token)
    }

    /// The uid of the ServiceAccount `namespace/name`, if it exists: a new one once it was
    /// re-created (and the tokens of the old one are refused).
    pub fn service_account_uid(&self, namespace: &str, name: &str) -> Option<String> {
        let store = self.shared.lock();
        let res = (String::new(), "serviceaccounts".to_string());
        store
            .get(&res, &(namespace.to_string(), name.to_string()))
            .map(|sa| meta::meta_str(sa, "uid").to_owned())
    }

    /// A kubeconfig (YAML) that acts as the ServiceAccount `namespace/name`: the admin's
    /// ([`ApiServer::kubeconfig`]) with a token of the account
    /// ([`ApiServer::service_account_token`]) in place of the admin's. With
    /// [`Config::rbac`] only (without it, requests carry no credentials).
    pub fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        valid_for: Duration,
    ) -> Result<String, Error> {
        let token = self.service_account_token(namespace, name, valid_for)?;
        let ca = &self.shared.auth.credentials().tls.ca_pem;
        let url = format!("https://{}", self.shared.addr);
        Ok(kubeconfig::kubeconfig(&url, Some((&token, ca))))
    }

    /// A client certificate and its key (PEM) for the user `user` in `groups` (and
    /// `system:authenticated`), as a cluster's CA would sign one: TLS connections that
    /// present it are that user (kube's x509 authenticator). Valid until the server
    /// stops (its client CA is made at each start); with [`Config::rbac`] only.
    pub fn client_certificate(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<(String, String), Error> {
        let groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        let issued = self
            .shared
            .auth
            .issue_certificate(user, &groups)
            .map_err(Error::Certificate)?;
        Ok((issued.certificate_pem, issued.key_pem))
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
        for task in [self.kubelet.take(), self.namespace_controller.take()]
            .into_iter()
            .flatten()
        {
            task.abort();
        }
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
