//! `kapsel run`'s options: the operator's scope, peering, endpoints, the guests' limits,
//! persistence and settings.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use kapsel_host::{
    AnnotationsDiffBase, AnnotationsProgress, DiffBaseStorage, Limits, Persistence,
    ProgressStorage, StatusDiffBase, StatusProgress,
};

/// Peering options of `run` (Kopf's, KOPF.md §8.2, §8.4). Without `--standalone`
/// or `--peering`, the peering object `default` is used if it exists.
#[derive(Debug, Args)]
pub(crate) struct RunPeeringArgs {
    /// Run without peering: never pause for other operators.
    #[arg(long, conflicts_with = "peering")]
    pub(crate) standalone: bool,
    /// Peer through this peering object; paused until it exists and no peer blocks this operator.
    #[arg(short = 'P', long, value_name = "NAME")]
    pub(crate) peering: Option<String>,
    /// Peering priority: operators pause while a live peer has a higher one (equal ones all pause).
    #[arg(short = 'p', long, default_value_t = 0, allow_negative_numbers = true)]
    pub(crate) priority: i64,
    /// Priority 666, for a development operator that pauses the deployed ones.
    #[arg(long)]
    pub(crate) dev: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Guests: .wasm files or directories of them (e.g. a mounted ConfigMap).
    #[arg(required = true)]
    pub(crate) guests: Vec<PathBuf>,
    /// Serve namespaces matching this pattern (repeatable; globs, `!` excludes).
    #[arg(short = 'n', long = "namespace", conflicts_with = "all_namespaces")]
    pub(crate) namespaces: Vec<String>,
    /// Serve all namespaces (cluster-wide).
    #[arg(short = 'A', long)]
    pub(crate) all_namespaces: bool,
    #[command(flatten)]
    pub(crate) peering: RunPeeringArgs,
    /// Start an in-memory API server in this process and run the operator on it.
    #[arg(long)]
    pub(crate) embedded: bool,
    /// Port of the in-memory API server of --embedded (0: any free port).
    #[arg(long, default_value_t = 0, requires = "embedded")]
    pub(crate) port: u16,
    /// The kubeconfig to reach the cluster with (as kubectl's --kubeconfig; default:
    /// in-cluster, then KUBECONFIG, then ~/.kube/config); with --embedded, where to write
    /// one for the in-memory API server.
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) persistence: PersistenceArgs,
    #[command(flatten)]
    pub(crate) limits: LimitArgs,
    #[command(flatten)]
    pub(crate) admission: AdmissionArgs,
    /// Serve liveness at this URL (e.g. http://0.0.0.0:8080/healthz), with the metrics at /metrics beside it.
    #[arg(short = 'L', long, value_name = "URL", value_parser = endpoint_url)]
    pub(crate) liveness: Option<String>,
    /// Serve the metrics (Prometheus text format) at this URL (e.g. http://0.0.0.0:9090/metrics).
    #[arg(long, value_name = "URL", value_parser = endpoint_url)]
    pub(crate) metrics: Option<String>,
    /// Record the watch events received, the patches sent and the guests' Kubernetes
    /// calls into this file (JSON Lines), for `kapsel test GUEST --replay FILE`.
    #[arg(long, value_name = "FILE")]
    pub(crate) record: Option<PathBuf>,
    /// Keep compiled guests in this folder (created if missing), so that a restart does
    /// not compile them again (in Kubernetes: an emptyDir).
    #[arg(long, value_name = "PATH")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// How often the guests' files and folders are rescanned, in milliseconds: guests
    /// added, replaced or removed are swapped in without a restart (0: never).
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub(crate) reload_interval_ms: u64,
    /// One of Kopf's settings (repeatable), e.g. `watching.server_timeout=60`,
    /// `watching.label_selectors=app=web`, `posting.enabled=false`; the value is read as
    /// YAML. The settings, their defaults and meaning: `kapsel_host::Settings`, README.
    #[arg(long = "setting", value_name = "KEY=VALUE", value_parser = setting)]
    pub(crate) settings: Vec<(String, String)>,
    /// Handle one shard of the objects, INDEX of COUNT (e.g. `0/3`, `1/3`, `2/3` for three
    /// replicas): the objects whose uid (`--shard-by`) hashes into that equal part of the
    /// 64-bit FNV-1a space, asked of the API server as Kubernetes' sharded lists and
    /// watches (1.36+); the same as `--setting watching.shard_selectors=` with the
    /// computed selector. Replicas with complementary shards share the objects; nothing
    /// moves a dead replica's shard to another.
    #[arg(long, value_name = "INDEX/COUNT", value_parser = shard)]
    pub(crate) shard: Option<(u64, u64)>,
    /// What `--shard` hashes: `uid` (objects spread evenly) or `namespace` (a namespace's
    /// objects stay together).
    #[arg(long, value_enum, default_value = "uid", requires = "shard")]
    pub(crate) shard_by: ShardBy,
}

/// What `--shard` hashes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum ShardBy {
    Uid,
    Namespace,
}

/// `INDEX/COUNT`, the index below the count.
fn shard(text: &str) -> Result<(u64, u64), String> {
    let parse = |part: &str, what: &str| {
        part.trim().parse::<u64>().map_err(|_| {
            format!("{text:?}: the {what} is not a whole number (INDEX/COUNT, e.g. 0/3)")
        })
    };
    let (index, count) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?} is not INDEX/COUNT (e.g. 0/3)"))?;
    let (index, count) = (parse(index, "index")?, parse(count, "count")?);
    if index >= count {
        return Err(format!(
            "{text:?}: the index counts from 0 and must be below the count (0/{count} to {}/{count})",
            count.saturating_sub(1)
        ));
    }
    Ok((index, count))
}

/// The admission webhooks (Kopf's `settings.admission`): the guests' `on::validate` and
/// `on::mutate` handlers served over HTTPS.
#[derive(Debug, Args)]
#[command(next_help_heading = "Admission webhooks")]
pub(crate) struct AdmissionArgs {
    /// Serve the admission webhooks over HTTPS on this address (e.g. 0.0.0.0:9443).
    #[arg(long, value_name = "HOST:PORT")]
    pub(crate) admission_listen: Option<std::net::SocketAddr>,
    /// Manage the ValidatingWebhookConfiguration and MutatingWebhookConfiguration of this
    /// name: a webhook per admission handler, pointing at --admission-service, else at
    /// --admission-url, else at the listen address.
    #[arg(long, value_name = "NAME", requires = "admission_listen")]
    pub(crate) admission_managed: Option<String>,
    /// The Service the managed configurations point at (its DNS names are in a generated
    /// certificate); the port defaults to 443.
    #[arg(long, value_name = "NAMESPACE/NAME[:PORT]", value_parser = service, requires = "admission_listen")]
    pub(crate) admission_service: Option<(String, String, u16)>,
    /// The URL the managed configurations point at (default: https://<listen address>).
    #[arg(
        long,
        value_name = "URL",
        requires = "admission_listen",
        conflicts_with = "admission_service"
    )]
    pub(crate) admission_url: Option<String>,
    /// The serving certificate (PEM, a chain whose last certificate is the CA bundle),
    /// read again when it changes; generated into a Secret when absent.
    #[arg(long, value_name = "FILE", requires_all = ["admission_listen", "admission_key"])]
    pub(crate) admission_cert: Option<PathBuf>,
    /// The serving certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "admission_cert")]
    pub(crate) admission_key: Option<PathBuf>,
    /// The Secret a generated certificate is kept in, shared by every replica (default:
    /// the operator's namespace, `<managed name or kapsel>-admission-tls`).
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = secret, requires = "admission_listen", conflicts_with = "admission_cert")]
    pub(crate) admission_secret: Option<(String, String)>,
    /// On exit, remove the webhooks of the handlers that are not persistent from the
    /// managed configurations (Kopf's cleanup); by default they stay.
    #[arg(long, requires = "admission_managed")]
    pub(crate) admission_remove_on_exit: bool,
    /// The most connections the webhook server keeps open at once; beyond them, a new
    /// connection waits until one ends.
    #[arg(long, value_name = "N", default_value_t = kapsel_host::AdmissionServer::DEFAULT_MAX_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..), requires = "admission_listen")]
    pub(crate) admission_connections: u32,
}

impl AdmissionArgs {
    /// The webhook server these flags ask for, if any.
    pub(crate) fn server(&self) -> Option<kapsel_host::AdmissionServer> {
        let mut server = kapsel_host::AdmissionServer::new(self.admission_listen?);
        if let (Some(cert), Some(key)) = (&self.admission_cert, &self.admission_key) {
            server = server.certificate(cert, key);
        }
        if let Some((namespace, name)) = &self.admission_secret {
            server = server.secret(namespace, name);
        }
        if let Some(name) = &self.admission_managed {
            server = server.managed(name);
        }
        if let Some((namespace, name, port)) = &self.admission_service {
            server = server.service(namespace, name, *port);
        }
        if let Some(url) = &self.admission_url {
            server = server.url(url);
        }
        if self.admission_remove_on_exit {
            server = server.remove_on_exit();
        }
        Some(server.max_connections(self.admission_connections))
    }
}

/// `NAMESPACE/NAME[:PORT]`.
fn service(text: &str) -> Result<(String, String, u16), String> {
    let (reference, port) = match text.rsplit_once(':') {
        Some((reference, port)) => {
            let port = port
                .parse()
                .map_err(|_| format!("{port:?} is not a port number"))?;
            (reference, port)
        }
        None => (text, 443),
    };
    let (namespace, name) = secret(reference)?;
    Ok((namespace, name, port))
}

/// `NAMESPACE/NAME`.
pub(super) fn secret(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((namespace, name))
            if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
        {
            Ok((namespace.to_owned(), name.to_owned()))
        }
        _ => Err(format!("{text:?} is not NAMESPACE/NAME")),
    }
}

/// `KEY=VALUE`, checked against the settings: an unknown key or a wrong value is a
/// usage error.
fn setting(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))?;
    kapsel_host::Settings::default()
        .set(key, value)
        .map_err(|e| e.to_string())?;
    Ok((key.to_owned(), value.to_owned()))
}

impl RunArgs {
    /// The settings: the persistence flags', then the `--setting` flags, in order, then
    /// the shard of `--shard`.
    pub(crate) fn settings(&self) -> Result<kapsel_host::Settings, String> {
        let mut settings = kapsel_host::Settings::default();
        settings.persistence = self.persistence.persistence();
        for (key, value) in &self.settings {
            settings.set(key, value).map_err(|e| e.to_string())?;
        }
        if let Some((index, count)) = self.shard {
            if settings.watching.shard_selectors.is_some() {
                return Err(
                    "--shard and --setting watching.shard_selectors both say which objects to \
                     handle: give one of them"
                        .into(),
                );
            }
            use kapsel_host::sharding::{ShardKey, ShardRange, shard_selector};
            let key = match self.shard_by {
                ShardBy::Uid => ShardKey::Uid,
                ShardBy::Namespace => ShardKey::Namespace,
            };
            let range = ShardRange::of(index, count).ok_or_else(|| {
                format!("--shard {index}/{count}: the index must be below the count")
            })?;
            settings.watching.shard_selectors = Some(shard_selector(key, &[range]).to_string());
        }
        Ok(settings)
    }
}

/// The bounds on the guests (`kapsel_host::Limits`; SECURITY.md explains each).
#[derive(Debug, Args)]
#[command(next_help_heading = "Guest limits")]
pub(crate) struct LimitArgs {
    /// The wall-clock budget of one handler call, in milliseconds, unless the handler declares one.
    #[arg(long, default_value_t = millis(Limits::default().call_deadline))]
    pub(crate) call_deadline_ms: u64,
    /// The longest budget a handler may declare (deadline_ms), in milliseconds.
    #[arg(long, default_value_t = millis(Limits::default().max_call_deadline))]
    pub(crate) max_call_deadline_ms: u64,
    /// The memory cap of one handler call, in MiB, unless the handler declares one.
    #[arg(long, default_value_t = Limits::default().call_memory_mib)]
    pub(crate) call_memory_mib: u32,
    /// The largest memory cap a handler may declare (memory_mib), in MiB.
    #[arg(long, default_value_t = Limits::default().max_call_memory_mib)]
    pub(crate) max_call_memory_mib: u32,
    /// Call slots for event, changing, index and `when` handlers (one per default memory cap).
    #[arg(long, default_value_t = Limits::default().call_slots)]
    pub(crate) call_slots: u32,
    /// Call slots for timers and daemons (a daemon holds one while it runs).
    #[arg(long, default_value_t = Limits::default().background_slots)]
    pub(crate) background_slots: u32,
    /// The wall-clock budget of one admission call, in milliseconds, unless the handler
    /// declares one (a write of the cluster waits for it).
    #[arg(long, default_value_t = millis(Limits::default().admission_deadline))]
    pub(crate) admission_deadline_ms: u64,
    /// Call slots for admission handlers (apart, so that watch handling never starves a
    /// write waiting for its review).
    #[arg(long, default_value_t = Limits::default().admission_slots)]
    pub(crate) admission_slots: u32,
    /// The share of a pool's slots one guest may hold, in percent.
    #[arg(long, default_value_t = Limits::default().guest_share_percent)]
    pub(crate) guest_share: u32,
    /// The share of a pool's slots one handler may hold, in percent.
    #[arg(long, default_value_t = Limits::default().handler_share_percent)]
    pub(crate) handler_share: u32,
    /// How many guest calls compute at once (default: the CPUs less one, at least one).
    #[arg(long, default_value_t = Limits::default().guest_threads)]
    pub(crate) guest_threads: u32,
    /// Liveness fails when handler calls wait and no slot was handed out for this many seconds.
    #[arg(long, default_value_t = Limits::default().starved_after.as_secs())]
    pub(crate) starved_after_s: u64,
    /// The longest log line a guest may write, in bytes.
    #[arg(long, default_value_t = Limits::default().max_log_line_bytes)]
    pub(crate) max_log_line_bytes: usize,
    /// What a guest may log in one call, in bytes.
    #[arg(long, default_value_t = Limits::default().max_log_bytes_per_call)]
    pub(crate) max_log_bytes_per_call: usize,
    /// Events a guest may post in one call.
    #[arg(long, default_value_t = Limits::default().max_events_per_call)]
    pub(crate) max_events_per_call: u32,
    /// The size of one Event a guest posts (reason, message, object), in bytes.
    #[arg(long, default_value_t = Limits::default().max_event_bytes)]
    pub(crate) max_event_bytes: usize,
    /// The size of a handler's memo, in bytes.
    #[arg(long, default_value_t = Limits::default().max_memo_bytes)]
    pub(crate) max_memo_bytes: usize,
    /// The size of an index handler's entries for one object, in bytes.
    #[arg(long, default_value_t = Limits::default().max_index_bytes)]
    pub(crate) max_index_bytes: usize,
    /// The size of a handler's result, in bytes.
    #[arg(long, default_value_t = Limits::default().max_result_bytes)]
    pub(crate) max_result_bytes: usize,
    /// The size of a handler's patch and of a guest's request body, in bytes.
    #[arg(long, default_value_t = Limits::default().max_patch_bytes)]
    pub(crate) max_patch_bytes: usize,
    /// The size of a list answer handed to a guest, in bytes: the list is read page by page
    /// and refused past this.
    #[arg(long, default_value_t = Limits::default().max_list_bytes)]
    pub(crate) max_list_bytes: usize,
    /// The random bytes one WASI request may ask for.
    #[arg(long, default_value_t = Limits::default().max_random_bytes)]
    pub(crate) max_random_bytes: u64,
    /// A guest's sustained pace of Kubernetes requests, per second.
    #[arg(long, default_value_t = Limits::default().guest_api_rate)]
    pub(crate) guest_api_rate: f64,
    /// How many requests a guest may make at once before its pace applies.
    #[arg(long, default_value_t = Limits::default().guest_api_burst)]
    pub(crate) guest_api_burst: u32,
    /// A guest's sustained pace of Events, per second.
    #[arg(long, default_value_t = Limits::default().guest_event_rate)]
    pub(crate) guest_event_rate: f64,
    /// How many Events a guest may post at once before their pace applies.
    #[arg(long, default_value_t = Limits::default().guest_event_burst)]
    pub(crate) guest_event_burst: u32,
    /// How many of a guest's Events may wait for its pace; past it, new ones are dropped
    /// (identical ones waiting are folded into one).
    #[arg(long, default_value_t = Limits::default().max_queued_events)]
    pub(crate) max_queued_events: u32,
    /// The shortest interval (and idle time) of a timer, in milliseconds.
    #[arg(long, default_value_t = millis(Limits::default().min_timer_interval))]
    pub(crate) min_timer_interval_ms: u64,
    /// The shortest delay before a failed handler is retried, in milliseconds.
    #[arg(long, default_value_t = millis(Limits::default().min_retry_delay))]
    pub(crate) min_retry_delay_ms: u64,
    /// Quick writes in a row caused by an object's own patches before its handling is backed off.
    #[arg(long, default_value_t = Limits::default().self_trigger_limit)]
    pub(crate) self_trigger_limit: u32,
    /// The sub-handlers one handler call may declare, at every level together.
    #[arg(long, default_value_t = Limits::default().max_subhandlers)]
    pub(crate) max_subhandlers: u32,
    /// The compiled-guest cache (--cache-dir) keeps the guests served and, of the others,
    /// the most recently used up to this many MiB (0: only the guests served).
    #[arg(long, default_value_t = Limits::default().max_cache_mib, value_name = "MIB")]
    pub(crate) max_cache_mib: u64,
}

impl LimitArgs {
    /// The limits these flags set.
    pub(crate) fn limits(&self) -> Limits {
        let mut limits = Limits::default();
        limits.call_deadline = Duration::from_millis(self.call_deadline_ms);
        limits.max_call_deadline = Duration::from_millis(self.max_call_deadline_ms);
        limits.call_memory_mib = self.call_memory_mib;
        limits.max_call_memory_mib = self.max_call_memory_mib;
        limits.call_slots = self.call_slots;
        limits.background_slots = self.background_slots;
        limits.admission_deadline = Duration::from_millis(self.admission_deadline_ms);
        limits.admission_slots = self.admission_slots;
        limits.guest_share_percent = self.guest_share;
        limits.handler_share_percent = self.handler_share;
        limits.guest_threads = self.guest_threads;
        limits.starved_after = Duration::from_secs(self.starved_after_s);
        limits.max_log_line_bytes = self.max_log_line_bytes;
        limits.max_log_bytes_per_call = self.max_log_bytes_per_call;
        limits.max_events_per_call = self.max_events_per_call;
        limits.max_event_bytes = self.max_event_bytes;
        limits.max_memo_bytes = self.max_memo_bytes;
        limits.max_index_bytes = self.max_index_bytes;
        limits.max_result_bytes = self.max_result_bytes;
        limits.max_patch_bytes = self.max_patch_bytes;
        limits.max_list_bytes = self.max_list_bytes;
        limits.max_random_bytes = self.max_random_bytes;
        limits.guest_api_rate = self.guest_api_rate;
        limits.guest_api_burst = self.guest_api_burst;
        limits.guest_event_rate = self.guest_event_rate;
        limits.guest_event_burst = self.guest_event_burst;
        limits.max_queued_events = self.max_queued_events;
        limits.min_timer_interval = Duration::from_millis(self.min_timer_interval_ms);
        limits.min_retry_delay = Duration::from_millis(self.min_retry_delay_ms);
        limits.self_trigger_limit = self.self_trigger_limit;
        limits.max_subhandlers = self.max_subhandlers;
        limits.max_cache_mib = self.max_cache_mib;
        limits
    }
}

/// A duration in whole milliseconds (for the flags' defaults).
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Where the operator keeps its state on objects (`kapsel_host::Persistence`, Kopf's
/// `settings.persistence`): the defaults are Kopf's, so an operator migrated from Kopf
/// with the same settings continues where Kopf left each object.
#[derive(Debug, Args)]
#[command(next_help_heading = "Persistence")]
pub(crate) struct PersistenceArgs {
    /// The annotation prefix of both storages; a prefix not under `kopf.` also gets the
    /// `<prefix>/kopf-managed` marker, by which other Kopf-based operators skip its annotations.
    #[arg(long, value_name = "DOMAIN",
          default_value_t = AnnotationsProgress::default().prefix, value_parser = prefix)]
    pub(crate) prefix: String,
    /// The finalizer that holds objects until their deletion handlers are done.
    #[arg(long, value_name = "NAME",
          default_value_t = Persistence::default().finalizer, value_parser = finalizer)]
    pub(crate) finalizer: String,
    /// Where handlers' progress is kept between cycles.
    #[arg(long, value_enum, value_name = "STORAGE",
          default_value_t = ProgressKind::Smart)]
    pub(crate) progress_storage: ProgressKind,
    /// Where the last handled state (the diff-base) is kept.
    #[arg(long, value_enum, value_name = "STORAGE",
          default_value_t = DiffBaseKind::Annotations)]
    pub(crate) diffbase_storage: DiffBaseKind,
}

/// Kopf's progress storages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ProgressKind {
    /// `<prefix>/<handler id>` annotations.
    Annotations,
    /// `status.kopf.progress.<handler id>` (the status schema must keep unknown fields).
    Status,
    /// Annotations, and read Kopf's older status records too (Kopf's default).
    Smart,
    /// Both annotations and status: written to both, read from the first that has one.
    Multi,
}

/// Kopf's diff-base storages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DiffBaseKind {
    /// The `<prefix>/last-handled-configuration` annotation (Kopf's default).
    Annotations,
    /// `status.kopf.last-handled-configuration` (the status schema must keep unknown fields).
    Status,
    /// Both: written to both, read from the annotation first.
    Multi,
}

impl PersistenceArgs {
    /// The host's settings these flags describe.
    pub(crate) fn persistence(&self) -> Persistence {
        let annotations = AnnotationsProgress {
            prefix: self.prefix.clone(),
            ..AnnotationsProgress::default()
        };
        let progress_storage = match self.progress_storage {
            ProgressKind::Annotations => ProgressStorage::Annotations(annotations),
            ProgressKind::Status => ProgressStorage::Status(StatusProgress::default()),
            ProgressKind::Smart => ProgressStorage::Smart {
                annotations,
                status: StatusProgress::default(),
            },
            ProgressKind::Multi => ProgressStorage::Multi(vec![
                ProgressStorage::Annotations(annotations),
                ProgressStorage::Status(StatusProgress::default()),
            ]),
        };
        let annotations = DiffBaseStorage::Annotations(AnnotationsDiffBase {
            prefix: self.prefix.clone(),
            ..AnnotationsDiffBase::default()
        });
        let status = DiffBaseStorage::Status(StatusDiffBase::default());
        let diffbase_storage = match self.diffbase_storage {
            DiffBaseKind::Annotations => annotations,
            DiffBaseKind::Status => status,
            DiffBaseKind::Multi => DiffBaseStorage::Multi(vec![annotations, status]),
        };
        Persistence {
            finalizer: self.finalizer.clone(),
            progress_storage,
            diffbase_storage,
            ..Persistence::default()
        }
    }
}

/// Rejects an annotation prefix Kubernetes would refuse, as a usage error.
fn prefix(prefix: &str) -> Result<String, String> {
    let persistence = Persistence {
        progress_storage: ProgressStorage::Annotations(AnnotationsProgress {
            prefix: prefix.to_owned(),
            ..AnnotationsProgress::default()
        }),
        ..Persistence::default()
    };
    persistence
        .check()
        .map(|()| prefix.to_owned())
        .map_err(|e| e.to_string())
}

/// Rejects a finalizer Kubernetes would refuse, as a usage error.
fn finalizer(finalizer: &str) -> Result<String, String> {
    let persistence = Persistence {
        finalizer: finalizer.to_owned(),
        ..Persistence::default()
    };
    persistence
        .check()
        .map(|()| finalizer.to_owned())
        .map_err(|e| e.to_string())
}

/// Rejects a URL the liveness or metrics endpoint cannot be served on, as a usage error.
fn endpoint_url(url: &str) -> Result<String, String> {
    kapsel_host::Endpoint::parse(url)
        .map(|_| url.to_owned())
        .map_err(|e| e.to_string())
}
