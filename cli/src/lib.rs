//! The `kapsel` command (`run`, `dev-cluster`, `test`, `inspect`, `rbac`, `new`,
//! `freeze`, `resume`) as a library: the binary adds only the process's signals ([`main`]), and
//! [`Runner`] runs the same command lines in-process for tests (Kopf's `KopfRunner`).
//!
//! Modules, one job each: `args` (the command line as clap parses it), `commands` (what
//! each command does and its exit code), `telemetry` (Kopf's log formats), `runner`
//! ([`Runner`]), `capture` (a runner's log lines, per thread), `scaffold` (`kapsel
//! new`: the guest template, carried in the binary) and `offline` (`kapsel rbac --crd`:
//! an in-process API server serving the given CRDs).

mod accounts;
mod args;
mod capture;
mod commands;
mod offline;
mod runner;
mod scaffold;
mod telemetry;

use std::future::Future;
use std::process::ExitCode;

pub use runner::{RunResult, Runner, RunnerError};

/// Parses the process's arguments, sets up logging and runs the command until it is
/// done or `shutdown` completes; returns the exit code (0, 1 for failures, 2 for usage
/// and input errors).
pub async fn main(shutdown: impl Future<Output = ()> + Send) -> ExitCode {
    let cli = args::Cli::from_process();
    if matches!(cli.command, args::Command::CompileGuest) {
        // Its stdout is the compiled guest: nothing else may be written there (no
        // logging set up); what went wrong goes to stderr alone.
        return match commands::compile_guest() {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("{error}");
                ExitCode::from(error.exit_code())
            }
        };
    }
    telemetry::init(&cli.logging());
    match cli.execute(shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(target: telemetry::COMMAND_TARGET, "{error}");
            ExitCode::from(error.exit_code())
        }
    }
}
