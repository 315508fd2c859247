//! The `kapsel` binary: the command of [`kapsel_cli`], stopped by SIGINT/SIGTERM.

use std::process::ExitCode;

/// jemalloc rather than the system's malloc: after a burst of work (a backlog of objects
/// handled at start, many objects in flight at once) it gives most of the freed memory
/// back, where glibc's arenas kept it resident (`make bench`, backlog of 10,000).
#[cfg(all(unix, not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    kapsel_cli::main(shutdown_signal()).await
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
