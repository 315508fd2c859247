//! The processes of one run: a fresh cluster, and the operator spawned on it; both
//! stopped when the run ends, however it ends.

use std::path::PathBuf;

use super::Context;
use crate::cluster::Cluster;
use crate::operators::{Kind, Startup};
use crate::procs::{OutputSummary, Proc};

/// The processes of one run, stopped when it ends however it ends.
#[derive(Default)]
pub(super) struct Live {
    pub(super) cluster: Option<Cluster>,
    pub(super) operator: Option<Proc>,
}

impl Live {
    pub(super) fn cluster(&self) -> Result<&Cluster, String> {
        self.cluster.as_ref().ok_or_else(|| "no cluster".to_owned())
    }

    pub(super) fn operator(&mut self) -> Result<&mut Proc, String> {
        self.operator
            .as_mut()
            .ok_or_else(|| "no operator".to_owned())
    }

    pub(super) fn parts(&mut self) -> Result<(&mut Cluster, &mut Proc), String> {
        match (self.cluster.as_mut(), self.operator.as_mut()) {
            (Some(c), Some(o)) => Ok((c, o)),
            _ => Err("no cluster or no operator".to_owned()),
        }
    }

    pub(super) async fn stop(self) -> (Option<OutputSummary>, Option<PathBuf>) {
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
pub(super) async fn fresh_cluster(ctx: &Context, name: &str) -> Result<Cluster, String> {
    let dir = ctx.dir.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = Cluster::start(&ctx.operators.kapsel, &dir).await?;
    cluster.prepare().await?;
    Ok(cluster)
}

/// Spawns the operator of a run.
pub(super) async fn spawn(
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
