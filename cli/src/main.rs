//! The `kapsel` binary: the command of [`kapsel_cli`], stopped by SIGINT/SIGTERM.

use std::process::ExitCode;

/// jemalloc rather than the system's malloc: after a burst of work (a backlog of objects
/// handled at start, many objects in flight at once) it gives most of the freed memory
/// back, where glibc's arenas kept it resident (`make bench`, backlog of 10,000).
#[cfg(all(unix, not(target_env = "msvc"), feature = "jemalloc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts (`_RJEM_MALLOC_CONF` in the environment still
/// overrides them). By default jemalloc returns freed pages only while the program keeps
/// allocating, so an operator that goes quiet after a burst of work kept them all
/// (figures: docs/performance.md).
/// - `background_thread`: a thread of jemalloc's returns them while the operator idles;
/// - `dirty_decay_ms`/`muzzy_decay_ms`: within half a second, and straight to the kernel;
/// - `narenas:1`: one arena for the few threads of tokio (jemalloc makes 4 per CPU),
///   fewer half-used pages.
#[cfg(all(unix, not(target_env = "msvc"), feature = "jemalloc"))]
#[allow(
    unsafe_code,
    reason = "jemalloc reads its settings from this exported symbol"
)]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &u8 =
    &b"background_thread:true,narenas:1,dirty_decay_ms:500,muzzy_decay_ms:0\0"[0];

#[tokio::main]
async fn main() -> ExitCode {
    kapsel_cli::main(shutdown_signal()).await
}

/// Completes on the first SIGINT or SIGTERM; a second one exits at once.
async fn shutdown_signal() {
    // Listened to from here on, by the same listeners for both signals: a second signal
    // sent as soon as the first is logged (and before the task below first ran) was
    // lost when that task began to listen only then.
    let mut signals = StopSignals::new();
    signals.recv().await;
    tracing::info!("Signal received: stopping gracefully (send another to exit at once).");
    tokio::spawn(async move {
        signals.recv().await;
        tracing::warn!("Second signal received: exiting now.");
        std::process::exit(130);
    });
}

/// SIGINT and SIGTERM, each received once per delivery from the listener's creation on.
struct StopSignals {
    #[cfg(unix)]
    unix: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl StopSignals {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let unix = signal(SignalKind::interrupt())
                .and_then(|interrupt| Ok((interrupt, signal(SignalKind::terminate())?)))
                .ok();
            StopSignals { unix }
        }
        #[cfg(not(unix))]
        {
            StopSignals {}
        }
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some((interrupt, terminate)) = &mut self.unix {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
        // Without signal handlers of our own (not Unix, or they could not be set up).
        let _ = tokio::signal::ctrl_c().await;
    }
}
