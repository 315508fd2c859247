//! What the server's own tasks (the simulated kubelet, the namespace controller) wait for
//! besides the store's events: the first of their timers.

use tokio::time::Instant;

/// Sleeps until `at`, the first of a task's timers; for ever when it has none (the task's
/// other branch, the store's events, wakes it then).
pub(crate) async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
