//! [`Operator`]: an operator as an application runs it — its settings, built with chained
//! setters, and [`Operator::run`], which assembles it all (Kopf's `running.py`): the
//! guests loaded, the startup handlers, the endpoints, the reactor, and the cleanup
//! handlers when it stops.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cluster::{KubeAccess, Scope};
use crate::journal::{Journal, Record};
use crate::limits::Limits;
use crate::runtime::{self, HandlerKind};
use crate::{Error, activities, health, peering, reactor, recording};

/// How long cleanup handlers may take, retries included, when the operator stops.
const CLEANUP_BUDGET: Duration = Duration::from_secs(10);

/// An operator: guests (WebAssembly handlers) served on a cluster.
///
/// Built with chained setters, run with [`Operator::run`].
#[derive(Clone)]
#[must_use]
pub struct Operator {
    guests: Vec<PathBuf>,
    namespaces: Vec<String>,
    client: Option<kube::Client>,
    /// How the reactor runs: configuration.
    pub(crate) settings: reactor::Settings,
    /// What its parts share while it runs, and what observers watch (the journal, the
    /// metrics the endpoints serve, the ready signal).
    pub(crate) shared: reactor::Shared,
    /// The bounds on the guests (the one place every bound is read from).
    limits: Limits,
    /// Guests compiled already (`kapsel test` compiles a guest once for all its cases).
    pub(crate) preloaded: Option<(runtime::Runtime, Vec<runtime::Guest>)>,
    /// Where to record what the operator receives and does (`--record`).
    record_to: Option<PathBuf>,
    endpoints: health::Endpoints,
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
        let shared = reactor::Shared::default();
        let metrics = shared.metrics.clone();
        shared
            .journal
            .observe(move |record| metrics.observe(record));
        Operator {
            guests: guests.into_iter().map(Into::into).collect(),
            namespaces: Vec::new(),
            client: None,
            settings: reactor::Settings::default(),
            shared,
            limits: Limits::default(),
            preloaded: None,
            record_to: None,
            endpoints: health::Endpoints::default(),
        }
    }

    /// Serve every namespace with one cluster-wide stream per resource (`-A`). The default.
    pub fn all_namespaces(mut self) -> Operator {
        self.namespaces.clear();
        self.settings.scope = Scope::Cluster;
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
        self.settings.scope = Scope::from_patterns(&self.namespaces);
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

    /// Run without peering (`--standalone`): never pause for other operators.
    pub fn standalone(mut self) -> Operator {
        self.settings.peering.mode = peering::Mode::Standalone;
        self
    }

    /// Peer through the peering object of this name (`--peering NAME`), and
    /// stay paused until it exists and no peer blocks this operator. Without
    /// this or [`Operator::standalone`], the object `default` is used if it
    /// exists (Kopf's auto-detection).
    pub fn peering(mut self, name: impl Into<String>) -> Operator {
        self.settings.peering.mode = peering::Mode::Mandatory;
        self.settings.peering.name = name.into();
        self
    }

    /// The peering priority (`--priority`, default 0): operators pause while a
    /// live peer has a higher one; equal priorities pause everyone.
    pub fn priority(mut self, priority: i64) -> Operator {
        self.settings.peering.priority = priority;
        self
    }

    /// Priority 666 (`--dev`), above deployed operators, which then pause.
    pub fn dev(self) -> Operator {
        self.priority(peering::DEV_PRIORITY)
    }

    /// The identity among peers. Default: env `POD_ID`, else
    /// `user@host/<start time>/<random>`.
    pub fn identity(mut self, identity: impl Into<String>) -> Operator {
        self.settings.peering.identity = Some(identity.into());
        self
    }

    /// How long this operator's peer record lasts without a keep-alive, in
    /// whole seconds (at least 1; default 60). Keep-alives come 5–10 s
    /// before it ends (every second for lifetimes under 11 s).
    pub fn peering_lifetime(mut self, lifetime: Duration) -> Operator {
        self.settings.peering.lifetime =
            i64::try_from(lifetime.as_secs().max(1)).unwrap_or(i64::MAX);
        self
    }

    /// The wall-clock budget of one handler call, unless the handler declares its own. Default 5 s.
    pub fn call_deadline(mut self, deadline: Duration) -> Operator {
        self.limits.call_deadline = deadline;
        self
    }

    /// The memory cap of one handler call in MiB, unless the handler declares its own. Default 64.
    pub fn call_memory_mib(mut self, mib: u32) -> Operator {
        self.limits.call_memory_mib = mib;
        self
    }

    /// Every bound on the guests at once (see [`Limits`] and SECURITY.md); replaces what
    /// [`Operator::call_deadline`] and [`Operator::call_memory_mib`] set.
    pub fn limits(mut self, limits: Limits) -> Operator {
        self.limits = limits;
        self
    }

    /// Serve liveness at this URL (`--liveness`, e.g. `http://0.0.0.0:8080/healthz`):
    /// GET answers 200 with the probe handlers' results as a JSON object (cached 10 s),
    /// or 500 when a probe fails or one of the operator's loops died. The metrics are
    /// served beside it, at `/metrics`. Only `http://`; the host defaults to `localhost`,
    /// the port to 80. Nothing is served unless asked for.
    pub fn liveness(mut self, url: impl Into<String>) -> Operator {
        self.endpoints.liveness = Some(url.into());
        self
    }

    /// Serve the metrics (Prometheus text format) at this URL (`--metrics`), e.g.
    /// `http://0.0.0.0:9090/metrics` (`/metrics` when the URL has no path).
    pub fn metrics(mut self, url: impl Into<String>) -> Operator {
        self.endpoints.metrics = Some(url.into());
        self
    }

    /// Record what the operator receives and does into this file (`--record`), for
    /// `kapsel test GUEST --replay FILE`: the watch events of its streams, the patches
    /// it sends, its guests' Kubernetes calls and how handler calls ended, as JSON Lines.
    /// The file is created (or truncated) when the operator starts.
    pub fn record(mut self, path: impl Into<PathBuf>) -> Operator {
        self.record_to = Some(path.into());
        self
    }

    /// The record of what this operator does (shared: clone it before [`Operator::run`]).
    ///
    /// From this call on, the journal keeps every record; an operator whose journal
    /// nobody asked for keeps only the most recent ones, so that it does not grow
    /// without bound.
    pub fn journal(&self) -> Journal {
        self.shared.journal.keep_everything();
        self.shared.journal.clone()
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
        let (runtime, guests, errors) = match self.preloaded {
            Some((runtime, guests)) => (runtime, guests, Vec::new()),
            None => {
                let runtime = runtime::Runtime::new(self.limits.clone())
                    .map_err(|e| Error::Runtime(Box::new(e)))?;
                let (guests, errors) = runtime.load_all(&self.guests).await;
                (runtime, guests, errors)
            }
        };
        let shared = self.shared;
        let slots = std::sync::Arc::clone(runtime.slots());
        shared.metrics.report_slots(move || slots.load());
        for error in &errors {
            tracing::error!("{error}");
            shared.journal.push(Record::GuestRejected {
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
        let mut shared = shared;
        shared.traffic.set_pace(runtime.limits());
        if let Some(path) = &self.record_to {
            let names: Vec<String> = guests.iter().map(|g| g.name().to_string()).collect();
            shared.recorder =
                recording::Recorder::to_file(path, &names).map_err(|source| Error::Recording {
                    path: path.clone(),
                    source,
                })?;
        }
        shared.recorder.observe(&shared.journal);
        let activities = activities_context(&client, &shared, &self.settings.scope);
        // Stopped when dropped, on every way out of this function.
        let _endpoints = health::serve(&self.endpoints, &guests, &activities, &shared.metrics)
            .await
            .map_err(|e| Error::Endpoint(Box::new(e)))?;
        tokio::pin!(shutdown);

        // Startup handlers first: nothing else runs until they all succeed (KOPF.md §6.1).
        let startup = activities::of_kind(&guests, HandlerKind::Startup);
        if !startup.is_empty() {
            tokio::select! {
                finished = activities::run_all(&startup, &activities, None) => {
                    let failed: Vec<String> = startup
                        .iter()
                        .zip(finished)
                        .filter_map(|(a, f)| match f {
                            activities::Finished::Failed(e) => Some(format!("'{}' {e}", a.key)),
                            activities::Finished::Done(_) => None,
                        })
                        .collect();
                    if !failed.is_empty() {
                        return Err(Error::Startup(failed.join("; ")));
                    }
                }
                () = &mut shutdown => return Ok(()),
            }
        }

        let stop = CancellationToken::new();
        let trigger = stop.clone();
        let mut settings = self.settings;
        settings.limits = std::sync::Arc::clone(runtime.limits());
        let operator = reactor::run(client, &guests, settings, shared, stop);
        tokio::pin!(operator);
        let result = tokio::select! {
            result = &mut operator => result,
            () = &mut shutdown => {
                trigger.cancel();
                operator.await
            }
        };

        // Cleanup handlers last, bounded: a stopping operator must stop.
        let cleanup = activities::of_kind(&guests, HandlerKind::Cleanup);
        if !cleanup.is_empty() {
            let finished = activities::run_all(&cleanup, &activities, Some(CLEANUP_BUDGET));
            if tokio::time::timeout(CLEANUP_BUDGET, finished)
                .await
                .is_err()
            {
                tracing::warn!("Cleanup handlers did not finish within {CLEANUP_BUDGET:?}.");
            }
        }
        result.map_err(|e| Error::Operator(Box::new(e)))
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
    }
}
