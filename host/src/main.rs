//! The `kapsel` command: parse the command line, set up logging and signals, run.

mod telemetry;

use std::process::ExitCode;

use clap::Parser;
use kapsel_host::Cli;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(&cli.logging());
    match cli.execute(shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(target: telemetry::COMMAND_TARGET, "{error}");
            ExitCode::from(error.exit_code())
        }
    }
}

/// Completes on the first SIGINT or SIGTERM; a second one exits at once.
async fn shutdown_signal() {
    wait_for_signal().await;
    tracing::info!("Signal received: stopping gracefully (send another to exit at once).");
    tokio::spawn(async {
        wait_for_signal().await;
        tracing::warn!("Second signal received: exiting now.");
        std::process::exit(130);
    });
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
