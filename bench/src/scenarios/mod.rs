//! The runs, each on a fresh cluster with one operator process: `running` (idle, then
//! N creations while it runs, then N deletions), `backlog` (N objects exist before it
//! starts), `startup` (one object exists; spawn → handled) and `admission` (reviews sent
//! straight to its webhook server). Each run keeps what it measured even when a later
//! step fails, and says which step failed.

//!
//! `running`, `backlog` and `startup` are the runs; `live` their processes; `measures`
//! what a run works out from the API server's counts.

mod admission;
mod backlog;
mod live;
mod measures;
mod running;
mod startup;

use std::path::PathBuf;
use std::time::Duration;

use crate::operators::Operators;

pub(crate) use admission::{AdmissionRun, LoadFigures, RATE, admission};
pub(crate) use backlog::{BacklogRun, backlog};
pub(crate) use measures::{Latency, Requests};
pub(crate) use running::{RunningRun, running};
pub(crate) use startup::{StartupRun, startup};

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

/// Quiet for longer than the per-object workers' idle timeout (5 s, Kopf's
/// `queueing.idle_timeout`, in both operators): the RSS is that of the steady state, not
/// of the workers still waiting to retire after a burst (measured on a 10,000 backlog:
/// Kapsel's anonymous memory 109 MiB two seconds after the work, 71 MiB once they retired).
const SETTLE_WINDOW: Duration = Duration::from_secs(6);
/// At most 2 % of a core over the window counts as quiet.
const QUIET: f64 = 0.02;
