//! [`Operator`]: an operator as an application runs it — its settings, built with chained
//! setters, and [`Operator::run`], which assembles it all (Kopf's `running.py`): the
//! guests loaded, the startup handlers, the endpoints, the reactor and the reload loop
//! beside it (`reloading`), and the cleanup handlers when it stops.

mod lifecycle;

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::admission::AdmissionServer;
use crate::cluster::{Poster, Scope, Vault};
use crate::journal::{Journal, Record};
use crate::limits::Limits;
use crate::reloading::{Reloader, Reporting};
use crate::runtime::{self, Library, ServedGuests};
use crate::settings::Settings;
use crate::{Error, activities, health, peering, reactor, recording, reloading};
pub(crate) use lifecycle::activities_context;
use lifecycle::{check_persistence, keep_logged_in, run_cleanup, run_startup};

/// How often the guests' paths are rescanned for hot reload, by default.
const RELOAD_INTERVAL: Duration = Duration::from_secs(5);

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
    /// Kopf's settings, as the user gave them: what startup handlers start from
    /// (`shared.settings`), taken into `settings` once they are done.
    user_settings: Settings,
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
    /// Where compiled guests are kept between starts (`--cache-dir`).
    cache_dir: Option<PathBuf>,
    compiler: Option<runtime::CompileCommand>,
    /// How often the guests' paths are rescanned (none: no hot reload).
    reload_interval: Option<Duration>,
    /// The pod the operator runs in (namespace, name), for Events about it.
    pod: Option<(String, String)>,
    /// The admission webhooks it serves, if asked to.
    admission: Option<AdmissionServer>,
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
            user_settings: Settings::default(),
            shared,
            limits: Limits::default(),
            preloaded: None,
            record_to: None,
            endpoints: health::Endpoints::default(),
            cache_dir: None,
            compiler: None,
            reload_interval: Some(RELOAD_INTERVAL),
            pod: reloading::pod_from_environment(),
            admission: None,
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
    /// [`crate::kube_client`] builds one as the operator's own: kube's, with a bounded pool
    /// of idle connections. Like the inferred one, it is a fallback: when a guest declares
    /// login handlers (`#[kapsel::on::login]`, Kopf's `on.login`), they are the operator's
    /// only way in, and this client is not used.
    pub fn client(mut self, client: kube::Client) -> Operator {
        self.client = Some(client);
        self
    }

    /// Reconnect a watch stream that was silent (not even a bookmark) this long. Default
    /// 70 s. (The setting `watching.inactivity_timeout`.)
    pub fn inactivity_timeout(mut self, timeout: Duration) -> Operator {
        self.user_settings.watching.inactivity_timeout = timeout.as_secs_f64();
        self
    }

    /// Kopf's settings ([`Settings`]: watching, queueing, persistence, posting,
    /// peering), replacing those given before. The guests' startup handlers start from
    /// these and may change them (`kapsel::settings`) before the operator runs with them.
    ///
    /// ```
    /// let mut settings = kapsel_host::Settings::default();
    /// settings.watching.label_selectors = Some("app=web".into());
    /// settings.set("queueing.exit_timeout", "5")?;
    /// let operator = kapsel_host::Operator::new(["handlers/"]).settings(settings);
    /// # Ok::<(), kapsel_host::SettingsError>(())
    /// ```
    pub fn settings(mut self, settings: Settings) -> Operator {
        self.user_settings = settings;
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

    /// Keep compiled guests in this folder (`--cache-dir`; created if missing), so that a
    /// restart, or a reload that finds a guest unchanged, does not compile it again.
    /// Entries are keyed by the guest's content hash and the WebAssembly engine's
    /// compatibility (wasmtime version, CPU features, settings); a damaged or foreign
    /// entry is ignored with a warning and the guest compiled again. The folder must be
    /// writable by the operator alone (in Kubernetes, an `emptyDir`). Default: none,
    /// guests are compiled at every start.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Operator {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Compile guests in a separate process: `command`, given a component on stdin,
    /// writes its compilation ([`compile_guest`](crate::compile_guest)) on stdout
    /// (`kapsel run` uses its own `kapsel compile-guest`). Compiling takes megabytes of
    /// code and memory that would otherwise stay in the operator's resident set for as
    /// long as it runs. A helper that fails is warned about and the guest compiled in
    /// this process. Default: compiled in this process.
    pub fn compile_in(mut self, command: crate::CompileCommand) -> Operator {
        self.compiler = Some(command);
        self
    }

    /// Rescan the guests' paths this often for hot reload (`--reload-interval-ms`; default
    /// 5 s; zero turns it off). A guest file added, replaced or removed — a mounted
    /// ConfigMap the kubelet updates, a file renamed into place — is loaded, checked and
    /// swapped in without a restart, once two scans in a row found it the same; a new
    /// version that fails to load is refused while the version before it keeps serving.
    /// The README's "Updating handlers without a restart" says what happens to
    /// finalizers, timers and daemons of handlers that disappear.
    pub fn reload_interval(mut self, interval: Duration) -> Operator {
        self.reload_interval = Some(interval).filter(|i| !i.is_zero());
        self
    }

    /// The pod this operator runs in, whose Warning Events tell about guests a reload
    /// refused. Default: the pod named by the environment variable `POD_NAME` (or else
    /// `POD_ID`) in the namespace `POD_NAMESPACE` (or that of the pod's service
    /// account), as `deploy/` sets them from the downward API; without one (run outside
    /// a pod), the Events are about the operator's peering object, if it peers.
    pub fn pod(mut self, namespace: impl Into<String>, name: impl Into<String>) -> Operator {
        self.pod = Some((namespace.into(), name.into()));
        self
    }

    /// Serve the guests' admission handlers (`on::validate`, `on::mutate`) as webhooks
    /// (`--admission-listen` and the options beside it; Kopf's `settings.admission`).
    /// Peering never pauses them. Without this, admission handlers are loaded but never
    /// called (a warning says so).
    pub fn admission(mut self, server: AdmissionServer) -> Operator {
        self.admission = Some(server);
        self
    }

    /// Serve liveness at this URL (`--liveness`, e.g. `http://0.0.0.0:8080/healthz`):
    /// GET answers 200 with the probe handlers' results as a JSON object (cached 10 s),
    /// or 500 when a probe fails or one of the operator's loops died. The metrics are
    /// served beside it, at `/metrics`. Only `http://`; the host defaults to `localhost`,
    /// the port to 80. Nothing is served unless asked for, and nothing (the metrics
    /// neither) before the startup handlers are done, as in Kopf.
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

    /// Kopf's `memo=`: what the operator-wide memo starts as (any JSON value; a mapping
    /// is what Kopf's `kopf.Memo` is). Startup, cleanup and probe handlers get it and may
    /// change it; each object's handlers start from it until they leave the object a
    /// memo of their own.
    pub fn memo(self, memo: serde_json::Value) -> Operator {
        self.shared.memo.update(None, &memo.to_string());
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
    /// When the persistence settings are out of range, no cluster connection can be
    /// made, the guests' login handlers fail for good (at start or when logging in
    /// again), the WebAssembly runtime cannot start, no guest can be loaded, or the
    /// initial discovery fails.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), Error> {
        check_persistence(&self.user_settings.persistence)?;
        tokio::pin!(shutdown);
        let (runtime, library) = self.load_guests().await?;
        let guests = library.guests();
        let mut shared = self.shared.clone();
        shared.traffic.set_pace(runtime.limits());
        self.start_recording(&mut shared, &guests)?;
        // Startup handlers may change the user's settings until they are put in force.
        shared.settings.start_with(self.user_settings.clone());
        let served = ServedGuests::new(guests.clone());
        // Login first: nothing touches the cluster before it (KOPF.md §1.12).
        let (client, vault) = tokio::select! {
            connected = self.connect(&guests, &shared) => connected?,
            () = &mut shutdown => return Ok(()),
        };
        // Every request within the settings' time limits, as they are when it starts.
        let client = crate::cluster::bounded(client, shared.settings.clone());
        let activities = activities_context(&client, &shared, &self.settings.scope);
        // Logs in again when the API server refuses the credentials; stopped when dropped.
        let (login_failed, _stop_logins) = keep_logged_in(vault.clone(), &served, &activities);
        tokio::pin!(login_failed);

        // Startup handlers first: nothing else runs until they all succeed (KOPF.md §6.1).
        // The endpoints neither: as in Kopf, a liveness probe gets no answer while the
        // operator starts (the probe's initialDelaySeconds covers a long startup).
        tokio::select! {
            started = run_startup(&guests, &activities) => started?,
            () = &mut shutdown => return Ok(()),
            failed = &mut login_failed => return Err(Error::Login(failed)),
        }
        // Only startup handlers change the settings: from now on they are in force.
        let in_force = shared.settings.put_in_force();
        if in_force.persistence != self.user_settings.persistence {
            // Changed by a startup handler: checked when merged; warned of here.
            check_persistence(&in_force.persistence)?;
        }
        // Stopped when dropped, on every way out of this function.
        let _endpoints = health::serve(&self.endpoints, &served, &activities, &shared.metrics)
            .await
            .map_err(|e| Error::Endpoint(Box::new(e)))?;

        let admission = self
            .serve_admission(&client, &served, &runtime, &activities)
            .await?;

        // The reload loop runs beside the reactor, and stops before it (kept in a guard
        // so that every way out of this function stops it).
        let reloads = CancellationToken::new();
        let _stop_reloading = reloads.clone().drop_guard();
        let events = CancellationToken::new();
        let _stop_events = events.clone().drop_guard();
        // The reloader takes the runtime; the reactor reads the same bounds.
        let limits = std::sync::Arc::clone(runtime.limits());
        let reporting = Reporting {
            journal: shared.journal.clone(),
            served: served.clone(),
            activities: activities.clone(),
            events: None,
        };
        let retries = crate::cluster::Retries::of(&in_force.networking);
        let swapped = self.start_reloading(
            (&client, retries),
            (runtime, library, vault),
            reporting,
            (&reloads, events),
        );
        let stop = CancellationToken::new();
        let trigger = stop.clone();
        let mut settings = self.settings;
        settings.limits = limits;
        settings.adopt(&in_force);
        let operator = reactor::run(client, &guests, swapped, settings, shared, stop);
        tokio::pin!(operator);
        let result = tokio::select! {
            result = &mut operator => result.map_err(|e| Error::Operator(Box::new(e))),
            () = &mut shutdown => {
                reloads.cancel();
                trigger.cancel();
                operator.await.map_err(|e| Error::Operator(Box::new(e)))
            }
            failed = &mut login_failed => {
                reloads.cancel();
                trigger.cancel();
                // Its requests fail now: how it ends is not the news.
                let _ = operator.await;
                Err(Error::Login(failed))
            }
        };
        reloads.cancel();
        if let Some(admission) = admission {
            admission.stop().await;
        }
        // Those of the guests served at the end (a reload may have changed them).
        run_cleanup(&served.guests(), &activities).await;
        result
    }

    /// The operator's client, and its credentials vault when it logs in: with the login
    /// handlers when a guest declares any (Kopf: only then, whatever else is there), else
    /// the client given, else the one the environment names (kubeconfig, in-cluster).
    async fn connect(
        &self,
        guests: &[runtime::Guest],
        shared: &reactor::Shared,
    ) -> Result<(kube::Client, Option<Vault>), Error> {
        if !activities::logins(guests).is_empty() {
            if self.client.is_some() {
                tracing::info!("The guests' login handlers log in: the client given is not used.");
            }
            let vault = Vault::new();
            // The login handlers have no cluster access: the context's client is unused.
            let context = activities::Context {
                kube: None,
                ..activities_context(&vault.client(), shared, &self.settings.scope)
            };
            activities::log_in(&vault, guests, &context, false)
                .await
                .map_err(Error::Login)?;
            return Ok((vault.client(), Some(vault)));
        }
        let client = match self.client.clone() {
            Some(client) => client,
            None => crate::cluster::default_kube_client()
                .await
                .map_err(|e| Error::Connect(Box::new(e)))?,
        };
        Ok((client, None))
    }

    /// Records into the file `--record` names, if any, from now on.
    fn start_recording(
        &self,
        shared: &mut reactor::Shared,
        guests: &[runtime::Guest],
    ) -> Result<(), Error> {
        if let Some(path) = &self.record_to {
            let names: Vec<String> = guests.iter().map(|g| g.name().to_string()).collect();
            shared.recorder =
                recording::Recorder::to_file(path, &names).map_err(|source| Error::Recording {
                    path: path.clone(),
                    source,
                })?;
        }
        shared.recorder.observe(&shared.journal);
        Ok(())
    }

    /// Serves the admission webhooks when asked to; warns when guests have admission
    /// handlers nothing will call.
    async fn serve_admission(
        &self,
        client: &kube::Client,
        served: &ServedGuests,
        runtime: &runtime::Runtime,
        activities: &activities::Context,
    ) -> Result<Option<crate::admission::Serving>, Error> {
        let Some(config) = &self.admission else {
            if served.guests().iter().any(|g| !g.admissions().is_empty()) {
                tracing::warn!(
                    "Admission handlers exist, but no admission server is configured \
                     (--admission-listen): they are never called."
                );
            }
            return Ok(None);
        };
        let namespace = self
            .pod
            .as_ref()
            .map_or("default", |(namespace, _)| namespace);
        let operator = crate::admission::Operator {
            client,
            served,
            limits: std::sync::Arc::clone(runtime.limits()),
            context: activities.clone(),
            namespace,
        };
        crate::admission::serve(config, operator)
            .await
            .map(Some)
            .map_err(|e| Error::Admission(Box::new(e)))
    }

    /// The runtime and the guests: preloaded, or loaded from the operator's paths (those
    /// that cannot be loaded are reported, and at least one must load).
    async fn load_guests(&self) -> Result<(runtime::Runtime, Library), Error> {
        let (runtime, library, errors) = match &self.preloaded {
            Some((runtime, guests)) => (runtime.clone(), Library::of(guests.clone()), Vec::new()),
            None => {
                let runtime = runtime::Runtime::with_cache(
                    self.limits.clone(),
                    self.cache_dir.clone(),
                    self.compiler.clone(),
                )
                .map_err(|e| Error::Runtime(Box::new(e)))?;
                let (library, errors) = Library::load(&runtime, &self.guests).await;
                (runtime, library, errors)
            }
        };
        let shared = &self.shared;
        let slots = std::sync::Arc::clone(runtime.slots());
        shared.metrics.report_slots(move || slots.load());
        for error in &errors {
            tracing::error!("{error}");
            shared.journal.push(Record::GuestRejected {
                path: error.path().display().to_string(),
                error: error.to_string(),
            });
        }
        let guests = library.guests();
        if guests.is_empty() {
            return Err(Error::NoGuests(
                errors.iter().map(ToString::to_string).collect(),
            ));
        }
        for guest in &guests {
            tracing::info!(
                "Loaded guest '{}' from {} ({} handler registrations), {}.",
                guest.name(),
                guest.path().display(),
                guest.describe().handlers.len(),
                guest.compilation()
            );
            let (cached, took) = guest.compilation().parts();
            shared.journal.push(Record::GuestLoaded {
                guest: guest.name().to_owned(),
                path: guest.path().display().to_string(),
                cached,
                seconds: took.as_secs_f64(),
            });
        }
        Ok((runtime, library))
    }

    /// Starts the reload loop when the guests come from paths and reloading is on; the
    /// reactor receives what it swaps in. It stops with `reloads`; its Events (about the
    /// operator's own object, when there is one) with `events`.
    fn start_reloading(
        &self,
        (client, retries): (&kube::Client, crate::cluster::Retries),
        (runtime, library, vault): (runtime::Runtime, Library, Option<Vault>),
        mut reporting: Reporting,
        (reloads, events): (&CancellationToken, CancellationToken),
    ) -> mpsc::Receiver<reactor::Swap> {
        let (swaps, swapped) = mpsc::channel(1);
        if let Some(interval) = self.reload_interval.filter(|_| library.has_paths()) {
            let involved = reloading::reported_object(
                self.pod.clone(),
                &self.settings.peering,
                &self.settings.scope,
            );
            reporting.events = involved.map(|involved| {
                let grace = self.settings.exit_grace;
                let metrics = self.shared.metrics.clone();
                let poster = Poster::start(client.clone(), (retries, grace), metrics, events).0;
                (poster, involved)
            });
            let reloader = Reloader {
                runtime,
                library,
                interval,
                swaps,
                reporting,
                vault,
            };
            tokio::spawn(reloader.run(reloads.clone()));
        }
        swapped
    }
}
