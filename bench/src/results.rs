//! Everything one bench measured, as it is measured: the machine, the runs, the guest
//! sizes and what went wrong. Written out (JSON) after every run, so that a failure or
//! an interruption keeps what came before.

use serde::Serialize;

use crate::invocation::Invocation;
use crate::scenarios::{AdmissionRun, BacklogRun, RunningRun, StartupRun};
use crate::sizes::GuestSize;

/// The machine a bench ran on.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Machine {
    pub(crate) cpus: usize,
    pub(crate) cpu_model: String,
    pub(crate) memory_mib: u64,
    pub(crate) kernel: String,
    /// `/proc/loadavg`'s 1, 5 and 15 minute loads when the bench started and ended.
    pub(crate) load_at_start: String,
    pub(crate) load_at_end: String,
}

impl Machine {
    pub(crate) fn now() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let meminfo = read("/proc/meminfo");
        Machine {
            cpus: std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
                .unwrap_or_default(),
            memory_mib: meminfo
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|kib| kib.parse::<u64>().ok())
                .map_or(0, |kib| kib / 1024),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            load_at_start: load(),
            load_at_end: String::new(),
        }
    }
}

/// `/proc/loadavg`'s first three fields.
pub(crate) fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A run under way.
#[derive(Debug, Clone)]
pub(crate) enum InProgress {
    Running(Box<RunningRun>),
    Backlog(Box<BacklogRun>),
}

/// What the bench was asked to do.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Settings {
    pub(crate) sizes: Vec<usize>,
    pub(crate) startup_repetitions: usize,
    pub(crate) quick: bool,
    pub(crate) kapsel: String,
    pub(crate) guest: String,
    /// `--kapsel-env`: more environment for Kapsel's process.
    pub(crate) kapsel_env: Vec<String>,
}

/// Everything measured so far.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Results {
    pub(crate) machine: Machine,
    pub(crate) settings: Settings,
    /// The Kopf version used, or why Kopf did not run.
    pub(crate) kopf: Result<String, String>,
    pub(crate) guest_sizes: Result<Vec<GuestSize>, String>,
    pub(crate) invocation: Result<Invocation, String>,
    pub(crate) startup: Vec<StartupRun>,
    pub(crate) running: Vec<RunningRun>,
    pub(crate) backlog: Vec<BacklogRun>,
    pub(crate) admission: Vec<AdmissionRun>,
    /// The run under way, as far as it got (kept if the bench is interrupted).
    #[serde(skip)]
    pub(crate) in_progress: Option<InProgress>,
    /// Every failed step, in order.
    pub(crate) errors: Vec<String>,
    /// Whether the bench was interrupted before the end.
    pub(crate) interrupted: bool,
}

impl Results {
    pub(crate) fn new(machine: Machine, settings: Settings) -> Results {
        Results {
            machine,
            settings,
            kopf: Err("not installed yet".into()),
            guest_sizes: Err("not measured yet".into()),
            invocation: Err("not measured".into()),
            startup: Vec::new(),
            running: Vec::new(),
            backlog: Vec::new(),
            admission: Vec::new(),
            in_progress: None,
            errors: Vec::new(),
            interrupted: false,
        }
    }
}

impl Results {
    /// The bench was interrupted: the run under way is kept as far as it got.
    pub(crate) fn interrupt(&mut self) {
        self.interrupted = true;
        let error = "interrupted during this run".to_owned();
        match self.in_progress.take() {
            Some(InProgress::Running(mut run)) => {
                run.error = Some(error);
                self.running.push(*run);
            }
            Some(InProgress::Backlog(mut run)) => {
                run.error = Some(error);
                self.backlog.push(*run);
            }
            None => {}
        }
    }
}
