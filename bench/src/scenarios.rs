//! The runs, each on a fresh cluster with one operator process: `running` (idle, then
//! N creations while it runs, then N deletions), `backlog` (N objects exist before it
//! starts) and `startup` (one object exists; spawn → handled). Each run keeps what it
//! measured even when a later step fails, and says which step failed.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cluster::{BENCH_CLIENT, Cluster, Counts};
use crate::operators::{Kind, Operators, Startup};
use crate::procs::{Mapping, OutputSummary, Proc, Sample, Settled, settle};
use crate::stats::{per_object, percentile};
use crate::workload::{self, Tracker};

/// How a bench is run: where things are and how long to wait.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    pub(crate) operators: Operators,
    /// Where each run's kubeconfig and logs go.
    pub(crate) dir: PathBuf,
    /// How long to wait per object for handling or deletion (beyond a fixed 120 s).
    pub(crate) wait_per_object: Duration,
}

impl Context {
    fn limit(&self, n: usize) -> Duration {
        Duration::from_secs(120) + self.wait_per_object * n as u32
    }
}

/// The API server's own cost during a phase.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ServerCost {
    pub(crate) requests: u64,
    pub(crate) cpu_s: f64,
    /// CPU per request, µs.
    pub(crate) cpu_per_request_us: Option<f64>,
}

impl ServerCost {
    fn between(before: (&Counts, &Sample), after: (&Counts, &Sample)) -> ServerCost {
        let requests = after.0.since(before.0).total();
        let cpu_s = after.1.cpu_s - before.1.cpu_s;
        ServerCost {
            requests,
            cpu_s,
            cpu_per_request_us: (requests > 0).then(|| cpu_s / requests as f64 * 1e6),
        }
    }
}

/// The operator's requests during a phase, per object of the workload.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Requests {
    pub(crate) total_per_object: f64,
    /// By verb, per object.
    pub(crate) by_verb: std::collections::BTreeMap<String, f64>,
    /// By verb and resource (`patch kopfexamples/status`), per object.
    pub(crate) by_what: std::collections::BTreeMap<String, f64>,
    /// Answers ≥ 400 (counts, not per object): conflicts, throttling, errors.
    pub(crate) failures: std::collections::BTreeMap<String, u64>,
    /// The operator's client names (user agents) seen.
    pub(crate) clients: Vec<String>,
}

impl Requests {
    fn of(delta: &Counts, n: usize) -> Requests {
        let operator = delta.operator();
        let per = |map: std::collections::BTreeMap<String, u64>| {
            map.into_iter()
                .map(|(k, v)| (k, per_object(v as f64, n)))
                .collect()
        };
        Requests {
            total_per_object: per_object(operator.total() as f64, n),
            by_verb: per(operator.by_verb()),
            by_what: per(operator.by_what()),
            failures: operator.failures(),
            clients: operator.clients(),
        }
    }
}

/// Per-object latency, create sent → handled seen, seconds.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Latency {
    pub(crate) p50_s: f64,
    pub(crate) p95_s: f64,
    pub(crate) max_s: f64,
    pub(crate) samples: usize,
}

/// One `running` run: idle, N creations, N deletions.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunningRun {
    pub(crate) operator: Kind,
    pub(crate) n: usize,
    /// Spawn → the operator watches kopfexamples and pods (seen at the API server).
    pub(crate) spawn_to_watching_s: Option<f64>,
    pub(crate) idle_settled: Option<Settled>,
    pub(crate) idle: Option<Sample>,
    /// The largest mappings by resident memory, idle and after the creations.
    pub(crate) idle_mappings: Vec<Mapping>,
    pub(crate) after_created_mappings: Vec<Mapping>,
    pub(crate) created_failures: Vec<String>,
    /// First create sent → the last object handled.
    pub(crate) first_create_to_all_handled_s: Option<f64>,
    pub(crate) latency: Option<Latency>,
    pub(crate) after_created_settled: Option<Settled>,
    pub(crate) after_created: Option<Sample>,
    /// Operator CPU per handled object (after settling, minus idle), ms.
    pub(crate) cpu_per_object_ms: Option<f64>,
    pub(crate) requests_created: Option<Requests>,
    pub(crate) server_created: Option<ServerCost>,
    /// First delete sent → the last object gone.
    pub(crate) first_delete_to_all_gone_s: Option<f64>,
    pub(crate) after_deleted: Option<Sample>,
    pub(crate) requests_deleted: Option<Requests>,
    pub(crate) server_deleted: Option<ServerCost>,
    /// How often the bench's own watch had to relist (the server's history expired);
    /// objects gone during a relist count as gone when it ends.
    pub(crate) bench_watch_relists: u64,
    pub(crate) output: Option<OutputSummary>,
    pub(crate) log: Option<PathBuf>,
    /// The step that failed, and why.
    pub(crate) error: Option<String>,
}

/// One `backlog` run: N objects exist before the operator starts.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BacklogRun {
    pub(crate) operator: Kind,
    pub(crate) n: usize,
    pub(crate) spawn_to_first_handled_s: Option<f64>,
    pub(crate) spawn_to_all_handled_s: Option<f64>,
    pub(crate) settled: Option<Settled>,
    pub(crate) after: Option<Sample>,
    pub(crate) after_mappings: Vec<Mapping>,
    /// Operator CPU since its start, per object, ms.
    pub(crate) cpu_per_object_ms: Option<f64>,
    pub(crate) requests: Option<Requests>,
    pub(crate) server: Option<ServerCost>,
    pub(crate) output: Option<OutputSummary>,
    pub(crate) log: Option<PathBuf>,
    pub(crate) error: Option<String>,
}

/// One `startup` run: one object exists; the operator is spawned.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StartupRun {
    pub(crate) operator: Kind,
    pub(crate) variant: Startup,
    pub(crate) repetition: usize,
    /// Spawn → "The operator is running" (Kapsel only).
    pub(crate) spawn_to_running_log_s: Option<f64>,
    pub(crate) spawn_to_first_handled_s: Option<f64>,
    pub(crate) log: Option<PathBuf>,
    pub(crate) error: Option<String>,
}

/// The processes of one run, stopped when it ends however it ends.
#[derive(Default)]
struct Live {
    cluster: Option<Cluster>,
    operator: Option<Proc>,
}

impl Live {
    fn cluster(&self) -> Result<&Cluster, String> {
        self.cluster.as_ref().ok_or_else(|| "no cluster".to_owned())
    }

    fn operator(&mut self) -> Result<&mut Proc, String> {
        self.operator
            .as_mut()
            .ok_or_else(|| "no operator".to_owned())
    }

    fn parts(&mut self) -> Result<(&mut Cluster, &mut Proc), String> {
        match (self.cluster.as_mut(), self.operator.as_mut()) {
            (Some(c), Some(o)) => Ok((c, o)),
            _ => Err("no cluster or no operator".to_owned()),
        }
    }

    async fn stop(self) -> (Option<OutputSummary>, Option<PathBuf>) {
        let mut summary = (None, None);
        if let Some(operator) = self.operator {
            summary = (Some(operator.output()), Some(operator.log.clone()));
            operator.stop().await;
        }
        if let Some(cluster) = self.cluster {
            cluster.stop().await;
        }
        summary
    }
}

/// Starts a fresh cluster for a run in `dir/name`.
async fn fresh_cluster(ctx: &Context, name: &str) -> Result<Cluster, String> {
    let dir = ctx.dir.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = Cluster::start(&ctx.operators.kapsel, &dir).await?;
    cluster.prepare().await?;
    Ok(cluster)
}

/// Spawns the operator of a run.
async fn spawn(
    ctx: &Context,
    cluster: &Cluster,
    kind: Kind,
    startup: Startup,
    name: &str,
) -> Result<Proc, String> {
    let launch = ctx.operators.launch(kind, &cluster.kubeconfig, startup)?;
    Proc::spawn(
        kind.name(),
        &launch,
        &ctx.dir.join(name).join(format!("{}.log", kind.name())),
    )
    .await
}

/// Waits until the operator watches kopfexamples and pods (the watcher: both), as the
/// API server counts it; the seconds since its spawn.
async fn wait_watching(cluster: &Cluster, operator: &mut Proc, what: &str) -> Result<f64, String> {
    let limit = Duration::from_secs(120);
    let start = Instant::now();
    loop {
        let counts = cluster.counts().await?;
        if counts.operator_watches("kopfexamples") && counts.operator_watches("pods") {
            return Ok(operator.spawned.elapsed().as_secs_f64());
        }
        operator.check_alive()?;
        if start.elapsed() > limit {
            return Err(format!(
                "timed out after 120 s waiting for {what} to watch kopfexamples and pods (see {})",
                operator.log.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the bench's own watch is open.
async fn wait_tracking(cluster: &Cluster) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let counts = cluster.counts().await?;
        if counts
            .0
            .keys()
            .any(|k| k.client == BENCH_CLIENT && k.verb == "watch" && k.resource == "kopfexamples")
        {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(30) {
            return Err("timed out after 30 s waiting for the bench's own watch".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Quiet for longer than the per-object workers' idle timeout (5 s, Kopf's
/// `queueing.idle_timeout`, in both operators): the RSS is that of the steady state, not
/// of the workers still waiting to retire after a burst (measured on a 10,000 backlog:
/// Kapsel's anonymous memory 109 MiB two seconds after the work, 71 MiB once they retired).
const SETTLE_WINDOW: Duration = Duration::from_secs(6);
/// At most 2 % of a core over the window counts as quiet.
const QUIET: f64 = 0.02;

fn latency(samples: &mut [f64]) -> Option<Latency> {
    samples.sort_by(f64::total_cmp);
    Some(Latency {
        p50_s: percentile(samples, 50.0)?,
        p95_s: percentile(samples, 95.0)?,
        max_s: *samples.last()?,
        samples: samples.len(),
    })
}

/// Idle, then `n` creations while running, then `n` deletions.
pub(crate) async fn running(
    ctx: &Context,
    kind: Kind,
    n: usize,
    progress: &(dyn Fn(&RunningRun) + Sync),
) -> RunningRun {
    let mut run = RunningRun {
        operator: kind,
        n,
        spawn_to_watching_s: None,
        idle_settled: None,
        idle: None,
        idle_mappings: vec![],
        after_created_mappings: vec![],
        created_failures: vec![],
        first_create_to_all_handled_s: None,
        latency: None,
        after_created_settled: None,
        after_created: None,
        cpu_per_object_ms: None,
        requests_created: None,
        server_created: None,
        first_delete_to_all_gone_s: None,
        after_deleted: None,
        requests_deleted: None,
        server_deleted: None,
        bench_watch_relists: 0,
        output: None,
        log: None,
        error: None,
    };
    let mut live = Live::default();
    if let Err(e) = running_steps(ctx, kind, n, &mut run, &mut live, progress).await {
        run.error = Some(format!("{} running N={n}: {e}", kind.name()));
    }
    (run.output, run.log) = live.stop().await;
    run
}

async fn running_steps(
    ctx: &Context,
    kind: Kind,
    n: usize,
    run: &mut RunningRun,
    live: &mut Live,
    progress: &(dyn Fn(&RunningRun) + Sync),
) -> Result<(), String> {
    let name = format!("running-{n}-{}", kind.name());
    let what = kind.name();
    live.cluster = Some(
        fresh_cluster(ctx, &name)
            .await
            .map_err(|e| format!("cluster: {e}"))?,
    );
    let cluster = live.cluster()?;
    live.operator = Some(spawn(ctx, cluster, kind, Startup::NoCache, &name).await?);
    let (cluster, operator) = live.parts()?;
    run.spawn_to_watching_s = Some(wait_watching(cluster, operator, what).await?);
    run.idle_settled = Some(settle(operator, SETTLE_WINDOW, QUIET, Duration::from_secs(60)).await?);
    let idle = operator.sample()?;
    run.idle = Some(idle);
    run.idle_mappings = operator.mappings();
    progress(run);

    let tracker = Tracker::start(&cluster.client);
    wait_tracking(cluster).await?;
    let objects = workload::objects(n);
    let (counts0, server0) = (cluster.counts().await?, cluster.server.sample()?);
    let sent = workload::create(&cluster.client, &objects, Some(&tracker)).await;
    run.created_failures = sent.failures.clone();
    if sent.accepted == 0 {
        return Err(format!("no object could be created: {:?}", sent.failures));
    }
    if kind != Kind::Watcher {
        let limit = ctx.limit(n);
        let waiting = format!("{what} to handle {} created objects", sent.accepted);
        tracker
            .wait(&waiting, sent.accepted, limit, Tracker::handled, || {
                operator.check_alive()
            })
            .await?;
        if let (Some(first), Some((_, last))) = (sent.first, tracker.handled_span()) {
            run.first_create_to_all_handled_s =
                Some(last.saturating_duration_since(first).as_secs_f64());
        }
        run.latency = latency(&mut tracker.latencies());
        run.bench_watch_relists = tracker.relists();
        progress(run);
    }
    run.after_created_settled =
        Some(settle(operator, SETTLE_WINDOW, QUIET, Duration::from_secs(120)).await?);
    let after = operator.sample()?;
    run.after_created = Some(after);
    run.after_created_mappings = operator.mappings();
    run.cpu_per_object_ms = Some(per_object((after.cpu_s - idle.cpu_s) * 1000.0, n));
    let (counts1, server1) = (cluster.counts().await?, cluster.server.sample()?);
    run.requests_created = Some(Requests::of(&counts1.since(&counts0), n));
    run.server_created = Some(ServerCost::between(
        (&counts0, &server0),
        (&counts1, &server1),
    ));
    progress(run);
    if kind == Kind::Watcher {
        return Ok(());
    }

    let deleting = workload::delete(&cluster.client, &objects).await;
    if deleting.failed > 0 {
        run.created_failures.extend(deleting.failures.clone());
    }
    let waiting = format!("{what} to let {} deleted objects go", deleting.accepted);
    tracker
        .wait(
            &waiting,
            deleting.accepted,
            ctx.limit(n),
            Tracker::gone,
            || operator.check_alive(),
        )
        .await?;
    run.bench_watch_relists = tracker.relists();
    if let (Some(first), Some(last)) = (deleting.first, tracker.last_gone()) {
        run.first_delete_to_all_gone_s = Some(last.saturating_duration_since(first).as_secs_f64());
    }
    settle(operator, SETTLE_WINDOW, QUIET, Duration::from_secs(120)).await?;
    run.after_deleted = Some(operator.sample()?);
    let (counts2, server2) = (cluster.counts().await?, cluster.server.sample()?);
    run.requests_deleted = Some(Requests::of(&counts2.since(&counts1), n));
    run.server_deleted = Some(ServerCost::between(
        (&counts1, &server1),
        (&counts2, &server2),
    ));
    Ok(())
}

/// `n` objects exist; the operator starts and handles them all.
pub(crate) async fn backlog(
    ctx: &Context,
    kind: Kind,
    n: usize,
    progress: &(dyn Fn(&BacklogRun) + Sync),
) -> BacklogRun {
    let mut run = BacklogRun {
        operator: kind,
        n,
        spawn_to_first_handled_s: None,
        spawn_to_all_handled_s: None,
        settled: None,
        after: None,
        after_mappings: vec![],
        cpu_per_object_ms: None,
        requests: None,
        server: None,
        output: None,
        log: None,
        error: None,
    };
    let mut live = Live::default();
    if let Err(e) = backlog_steps(ctx, kind, n, &mut run, &mut live, progress).await {
        run.error = Some(format!("{} backlog N={n}: {e}", kind.name()));
    }
    (run.output, run.log) = live.stop().await;
    run
}

async fn backlog_steps(
    ctx: &Context,
    kind: Kind,
    n: usize,
    run: &mut BacklogRun,
    live: &mut Live,
    progress: &(dyn Fn(&BacklogRun) + Sync),
) -> Result<(), String> {
    let name = format!("backlog-{n}-{}", kind.name());
    let what = kind.name();
    live.cluster = Some(
        fresh_cluster(ctx, &name)
            .await
            .map_err(|e| format!("cluster: {e}"))?,
    );
    let cluster = live.cluster()?;
    let sent = workload::create(&cluster.client, &workload::objects(n), None).await;
    if sent.failed > 0 {
        return Err(format!(
            "the backlog could not be created: {:?}",
            sent.failures
        ));
    }
    let tracker = Tracker::start(&cluster.client);
    tracker
        .wait(
            "the bench's watch to list the backlog",
            n,
            Duration::from_secs(120),
            Tracker::present,
            || Ok(()),
        )
        .await?;
    let (counts0, server0) = (cluster.counts().await?, cluster.server.sample()?);
    live.operator = Some(spawn(ctx, cluster, kind, Startup::NoCache, &name).await?);
    let (cluster, operator) = live.parts()?;
    let spawned = operator.spawned;
    tracker
        .wait(
            &format!("{what} to handle its first object"),
            1,
            Duration::from_secs(120),
            Tracker::handled,
            || operator.check_alive(),
        )
        .await?;
    if let Some((first, _)) = tracker.handled_span() {
        run.spawn_to_first_handled_s = Some(first.saturating_duration_since(spawned).as_secs_f64());
    }
    progress(run);
    let waiting = format!("{what} to handle the backlog of {n}");
    tracker
        .wait(&waiting, n, ctx.limit(n), Tracker::handled, || {
            operator.check_alive()
        })
        .await?;
    if let Some((_, last)) = tracker.handled_span() {
        run.spawn_to_all_handled_s = Some(last.saturating_duration_since(spawned).as_secs_f64());
    }
    progress(run);
    run.settled = Some(settle(operator, SETTLE_WINDOW, QUIET, Duration::from_secs(120)).await?);
    let after = operator.sample()?;
    run.after = Some(after);
    run.after_mappings = operator.mappings();
    run.cpu_per_object_ms = Some(per_object(after.cpu_s * 1000.0, n));
    let (counts1, server1) = (cluster.counts().await?, cluster.server.sample()?);
    run.requests = Some(Requests::of(&counts1.since(&counts0), n));
    run.server = Some(ServerCost::between(
        (&counts0, &server0),
        (&counts1, &server1),
    ));
    Ok(())
}

/// One object exists; the operator is spawned: until it logs that it runs, and until
/// the object is handled.
pub(crate) async fn startup(
    ctx: &Context,
    kind: Kind,
    variant: Startup,
    repetition: usize,
) -> StartupRun {
    let mut run = StartupRun {
        operator: kind,
        variant,
        repetition,
        spawn_to_running_log_s: None,
        spawn_to_first_handled_s: None,
        log: None,
        error: None,
    };
    let mut live = Live::default();
    if let Err(e) = startup_steps(ctx, kind, variant, repetition, &mut run, &mut live).await {
        run.error = Some(format!(
            "{} start-up ({}): {e}",
            kind.name(),
            variant.label()
        ));
    }
    (_, run.log) = live.stop().await;
    run
}

async fn startup_steps(
    ctx: &Context,
    kind: Kind,
    variant: Startup,
    repetition: usize,
    run: &mut StartupRun,
    live: &mut Live,
) -> Result<(), String> {
    let name = format!(
        "startup-{}-{}-{repetition}",
        kind.name(),
        serde_json::to_value(variant)
            .unwrap_or_default()
            .as_str()
            .unwrap_or("x")
    );
    live.cluster = Some(
        fresh_cluster(ctx, &name)
            .await
            .map_err(|e| format!("cluster: {e}"))?,
    );
    let cluster = live.cluster()?;
    let one = &workload::objects(1)[..1];
    let sent = workload::create(&cluster.client, one, None).await;
    if sent.failed > 0 {
        return Err(format!(
            "the object could not be created: {:?}",
            sent.failures
        ));
    }
    let tracker = Tracker::start(&cluster.client);
    tracker
        .wait(
            "the bench's watch to list the object",
            1,
            Duration::from_secs(30),
            Tracker::present,
            || Ok(()),
        )
        .await?;
    live.operator = Some(spawn(ctx, cluster, kind, variant, &name).await?);
    let operator = live.operator()?;
    tracker
        .wait(
            &format!("{} to handle the object", kind.name()),
            1,
            Duration::from_secs(120),
            Tracker::handled,
            || operator.check_alive(),
        )
        .await?;
    if let Some((first, _)) = tracker.handled_span() {
        run.spawn_to_first_handled_s = Some(
            first
                .saturating_duration_since(operator.spawned)
                .as_secs_f64(),
        );
    }
    if kind == Kind::Kapsel {
        run.spawn_to_running_log_s = operator
            .mark(crate::operators::KAPSEL_RUNNING)
            .map(|t| t.saturating_duration_since(operator.spawned).as_secs_f64());
    }
    Ok(())
}
