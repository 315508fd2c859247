//! A record of what the operator did: handler calls, their outcomes, guest
//! log lines. Tests and `kapsel test` assert on it instead of scraping logs.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

/// One thing the operator did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Record {
    /// A handler was called for an object.
    HandlerCalled {
        /// The guest's name (its file stem).
        guest: String,
        /// The handler id.
        handler: String,
        /// `event`, `index`, ...
        kind: String,
        /// The resource, `plural.version.group`.
        resource: String,
        /// `namespace/name`, or `name` for cluster-scoped objects.
        object: String,
        /// The raw event type (`None` for the initial listing).
        event_type: Option<String>,
    },
    /// A handler call failed (trap, timeout, memory cap, or an error it returned).
    HandlerFailed {
        /// The guest's name.
        guest: String,
        /// The handler id.
        handler: String,
        /// The object reference.
        object: String,
        /// What went wrong, as logged.
        error: String,
    },
    /// A guest logged a line.
    GuestLog {
        /// The guest's name.
        guest: String,
        /// The handler id.
        handler: String,
        /// The object reference, if the call was about an object.
        object: Option<String>,
        /// `debug`, `info`, `warning` or `error`.
        level: String,
        /// The message.
        message: String,
    },
    /// A guest could not be loaded.
    GuestRejected {
        /// The file.
        path: String,
        /// Why.
        error: String,
    },
}

/// A shared, append-only list of [`Record`]s that can be waited on.
#[derive(Debug, Clone)]
pub struct Journal {
    records: Arc<Mutex<Vec<Record>>>,
    changed: watch::Sender<usize>,
}

impl Default for Journal {
    fn default() -> Self {
        Journal {
            records: Arc::default(),
            changed: watch::Sender::new(0),
        }
    }
}

impl Journal {
    fn lock(&self) -> MutexGuard<'_, Vec<Record>> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn push(&self, record: Record) {
        let len = {
            let mut records = self.lock();
            records.push(record);
            records.len()
        };
        self.changed.send_replace(len);
    }

    /// A copy of every record so far.
    pub fn records(&self) -> Vec<Record> {
        self.lock().clone()
    }

    /// Waits until `check` holds for the records, or `timeout` passes.
    ///
    /// # Errors
    /// The records at the timeout, when `check` never held.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&[Record]) -> bool,
    ) -> Result<(), Vec<Record>> {
        let mut rx = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if check(&self.lock()) {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return Err(self.records());
            }
        }
    }
}
