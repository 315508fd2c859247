//! The `running` run: the operator idle on a fresh cluster, then N objects created while
//! it runs, then deleted.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::live::{Live, fresh_cluster, spawn};
use super::measures::{Latency, Requests, ServerCost, latency};
use super::{Context, QUIET, SETTLE_WINDOW};
use crate::cluster::{BENCH_CLIENT, Cluster};
use crate::operators::{Kind, Startup};
use crate::procs::{Mapping, OutputSummary, Proc, Sample, Settled, settle};
use crate::stats::per_object;
use crate::workload::{self, Tracker};

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
