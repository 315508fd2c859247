//! The `backlog` run: N objects exist before the operator starts; it handles them all.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::live::{Live, fresh_cluster, spawn};
use super::measures::{Requests, ServerCost};
use super::{Context, QUIET, SETTLE_WINDOW};
use crate::operators::{Kind, Startup};
use crate::procs::{Mapping, OutputSummary, Sample, Settled, settle};
use crate::stats::per_object;
use crate::workload::{self, Tracker};

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
