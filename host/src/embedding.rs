//! Running an operator inside an application (KOPF.md §11): in the application's own
//! tokio runtime with [`Operator::run`], or in a thread of its own with
//! [`Operator::spawn`], stopped through the [`OperatorHandle`].
//!
//! An embedded operator never touches signals: those belong to the application (only
//! the `kapsel` binary's main thread handles SIGINT/SIGTERM).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::{Error, Journal, Operator};

/// Where a spawned operator is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Starting,
    Running,
    Ended,
}

#[derive(Debug, Default)]
struct Progress {
    phase: Mutex<Option<Phase>>,
    changed: Condvar,
}

impl Progress {
    fn lock(&self) -> MutexGuard<'_, Option<Phase>> {
        self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, phase: Phase) {
        let mut current = self.lock();
        // Once ended, an operator does not come back.
        if *current != Some(Phase::Ended) {
            *current = Some(phase);
        }
        self.changed.notify_all();
    }
}

/// Tells when an operator runs: its guests are loaded, its startup handlers are done and
/// its watch streams are started. Get it with [`Operator::readiness`] before running.
#[derive(Debug, Clone)]
pub struct Readiness(tokio::sync::watch::Receiver<bool>);

impl Readiness {
    /// Whether the operator runs now (it stays ready until it ends).
    pub fn is_ready(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until the operator runs (`true`), or has ended without running (`false`).
    pub async fn wait(&mut self) -> bool {
        self.0.wait_for(|ready| *ready).await.is_ok()
    }
}

impl Operator {
    /// What tells when this operator runs; take it before [`Operator::run`].
    pub fn readiness(&self) -> Readiness {
        Readiness(self.shared.started.subscribe())
    }
}

/// An operator running in a thread of its own; see [`Operator::spawn`].
#[derive(Debug)]
pub struct OperatorHandle {
    stop: CancellationToken,
    progress: Arc<Progress>,
    journal: Journal,
    /// Taken by [`OperatorHandle::stop`].
    thread: Option<JoinHandle<Result<(), Error>>>,
}

impl Operator {
    /// Runs the operator in a new thread with its own tokio runtime, for applications
    /// that keep their own main loop. It stops when [`OperatorHandle::stop`] is called
    /// (or the handle is dropped); signals are left to the application.
    ///
    /// # Errors
    /// The thread or its runtime could not be created.
    pub fn spawn(self) -> std::io::Result<OperatorHandle> {
        let stop = CancellationToken::new();
        let progress = Arc::new(Progress::default());
        // The shared journal as it is: its recent records only, unless the application
        // asked `Operator::journal` for all of them before. An embedded operator runs for
        // as long as its application, and nobody may ever read its records.
        let journal = self.shared.journal.clone();
        let mut ready = self.readiness();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kapsel-operator")
            .enable_all()
            .build()?;
        let (thread_stop, thread_progress) = (stop.clone(), progress.clone());
        let thread = std::thread::Builder::new()
            .name("kapsel-operator".into())
            .spawn(move || {
                thread_progress.set(Phase::Starting);
                let watcher = thread_progress.clone();
                runtime.spawn(async move {
                    if ready.wait().await {
                        watcher.set(Phase::Running);
                    }
                });
                let result =
                    runtime.block_on(self.run(async move { thread_stop.cancelled().await }));
                thread_progress.set(Phase::Ended);
                // Whatever is left (detached tasks) must not hold up the application.
                runtime.shutdown_timeout(Duration::from_secs(5));
                result
            })?;
        Ok(OperatorHandle {
            stop,
            progress,
            journal,
            thread: Some(thread),
        })
    }
}

impl OperatorHandle {
    /// Blocks until the operator has started its watch streams (`true`), has ended,
    /// or `timeout` passed (`false` for both).
    pub fn wait_ready(&self, timeout: Duration) -> bool {
        let phase = self.progress.lock();
        let (phase, _) = self
            .progress
            .changed
            .wait_timeout_while(phase, timeout, |p| {
                !matches!(p, Some(Phase::Running | Phase::Ended))
            })
            .unwrap_or_else(|p| p.into_inner());
        *phase == Some(Phase::Running)
    }

    /// Whether the operator has ended (stopped, or failed at start).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// What the operator did lately: its most recent records (a bounded ring), or every
    /// record when [`Operator::journal`] was asked for before [`Operator::spawn`].
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Stops the operator gracefully and waits for its thread.
    ///
    /// # Errors
    /// The operator's own error (e.g. no cluster, no loadable guest).
    pub fn stop(mut self) -> Result<(), Error> {
        self.stop.cancel();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(Error::Operator("the operator thread panicked".into())),
            None => Ok(()),
        }
    }
}

impl Drop for OperatorHandle {
    fn drop(&mut self) {
        // A forgotten handle still stops the operator (it does not wait for it).
        self.stop.cancel();
    }
}
