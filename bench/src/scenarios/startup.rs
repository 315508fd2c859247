//! The `startup` run: one object exists; the operator is spawned, and timed until it
//! logs that it runs and until the object is handled.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::Context;
use super::live::{Live, fresh_cluster, spawn};
use crate::operators::{Kind, Startup};
use crate::workload::{self, Tracker};

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
