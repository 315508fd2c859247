//! A record of what the operator did: handler calls, their outcomes, guest
//! log lines. Tests and `kapsel test` assert on it instead of scraping logs.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
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
    /// A handler call ended (after [`Record::HandlerCalled`]).
    HandlerFinished {
        /// The guest's name.
        guest: String,
        /// The handler id.
        handler: String,
        /// `event`, `index`, `create`, ...
        kind: String,
        /// The object reference, if the call was about an object.
        object: Option<String>,
        /// How long the call took, in seconds.
        seconds: f64,
        /// `success`, `retry` (will be retried), `failure` (final) or `ignored`.
        outcome: String,
        /// What the sandbox stopped, if anything: `trap`, `timeout` or `memory`.
        fault: Option<String>,
        /// The line the operator logged for it (Kopf's: `Handler 'x' succeeded.`,
        /// `Handler 'x' failed temporarily: ...`).
        message: String,
    },
    /// A changing handler was given up on without another call: its timeout or its
    /// retry limit was reached before the attempt was due (its outcome is a failure).
    HandlerGaveUp {
        /// The guest's name.
        guest: String,
        /// The handler id.
        handler: String,
        /// The object reference.
        object: String,
        /// Kopf's line: `Handler 'x' has exceeded 3 retries.`
        message: String,
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
    /// A guest was loaded when the operator started.
    GuestLoaded {
        /// The guest's name.
        guest: String,
        /// The file.
        path: String,
        /// Whether its machine code came from the compiled-guest cache (`--cache-dir`)
        /// rather than from compiling it.
        cached: bool,
        /// How long compiling it, or reading it from the cache, took.
        seconds: f64,
    },
    /// A guest changed while the operator ran (hot reload of its file): from this record
    /// on, the next event of every object is handled by the guests as they are now.
    GuestReloaded {
        /// The guest's name.
        guest: String,
        /// The file.
        path: String,
        /// `added`, `replaced` or `removed`.
        change: String,
    },
    /// A new version of a guest found while the operator ran was not served (it could not
    /// be loaded, or its startup handlers failed); the version before it, if any, keeps
    /// serving.
    GuestRefused {
        /// The guest's name (the file's stem).
        guest: String,
        /// The file.
        path: String,
        /// Why.
        error: String,
    },
    /// A guest's file holds the version served again after a version of it was refused
    /// (the broken version was taken back): the refusal is over.
    GuestRecovered {
        /// The guest's name.
        guest: String,
        /// The file.
        path: String,
    },
    /// A watch stream started.
    StreamStarted {
        /// The resource, `plural.version.group`.
        resource: String,
        /// The namespace (none: cluster-wide).
        namespace: Option<String>,
    },
    /// A watch stream closed: the operator stopped or paused, its resource or namespace
    /// went, or a reload left it without handlers.
    StreamStopped {
        /// The resource, `plural.version.group`.
        resource: String,
        /// The namespace (none: cluster-wide).
        namespace: Option<String>,
    },
    /// The operator paused: its watch streams stopped (peering, KOPF.md §8).
    Paused {
        /// Who or what it pauses for.
        reason: String,
    },
    /// The operator resumed after [`Record::Paused`]: its streams relist.
    Resumed,
    /// A timer's or daemon's task for an object ended (Kopf's daemon runner ends): the
    /// reasons it was stopped for, as Kopf's `stopped.reason` has them then, `DONE`
    /// always among them (`DONE` alone: it exited on its own).
    TaskEnded {
        /// The guest's name.
        guest: String,
        /// The handler id.
        handler: String,
        /// The object reference.
        object: String,
        /// Kopf's flags: `RESOURCE_DELETED|DONE`.
        reasons: String,
    },
    /// A timer or daemon asked to stop, without a cancellation timeout, has not exited
    /// yet: one of the checks its `cancellation_polling` paces (Kopf's "is still
    /// exiting" line).
    TaskStillExiting {
        /// The guest's name.
        guest: String,
        /// The handler id.
        handler: String,
        /// The object reference.
        object: String,
    },
    /// A watch stream listed its objects again because its watch history had expired
    /// (410 Gone), while the operator ran: the objects gone meanwhile were reported as
    /// DELETED. Pushed once the listed objects were handed to their workers.
    Relisted {
        /// The resource, `plural.version.group`.
        resource: String,
        /// The stream's namespace (`None`: cluster-wide).
        namespace: Option<String>,
    },
}

/// How many records a journal keeps when nobody asked for the full history: enough to
/// look back at the last moments of a running operator, bounded so that an operator
/// running for months does not grow without end.
const RECENT_RECORDS: usize = 1000;

/// Something told of every record as it is pushed (e.g. the metrics).
type Observer = Arc<dyn Fn(&Record) + Send + Sync>;

/// A shared, append-only list of [`Record`]s that can be waited on.
///
/// By default it keeps only the most recent records (a bounded ring): an operator
/// nobody watches must not accumulate its history in memory. `Operator::journal`
/// (and so the `testing` harness) switches it to keep every record, which tests read.
#[derive(Clone)]
pub struct Journal {
    shared: Arc<Shared>,
    /// Counts pushes, so that waiters wake up on every new record.
    changed: watch::Sender<u64>,
}

struct Shared {
    records: Mutex<Ring>,
    /// Told of every record, in registration order, before it is stored.
    observers: RwLock<Vec<Observer>>,
}

/// The stored records and how many may be kept (`None`: all of them).
struct Ring {
    records: VecDeque<Record>,
    limit: Option<usize>,
}

impl Default for Journal {
    fn default() -> Self {
        Journal {
            shared: Arc::new(Shared {
                records: Mutex::new(Ring {
                    records: VecDeque::new(),
                    limit: Some(RECENT_RECORDS),
                }),
                observers: RwLock::default(),
            }),
            changed: watch::Sender::new(0),
        }
    }
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ring = self.lock();
        f.debug_struct("Journal")
            .field("records", &ring.records.len())
            .field("limit", &ring.limit)
            .finish_non_exhaustive()
    }
}

impl Journal {
    fn lock(&self) -> MutexGuard<'_, Ring> {
        self.shared
            .records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps every record from now on, instead of only the most recent ones.
    pub(crate) fn keep_everything(&self) {
        self.lock().limit = None;
    }

    /// Tells `observer` of every record pushed from now on.
    ///
    /// # Caveats
    /// Observers run inside [`Journal::push`], on the pushing task: they must be quick
    /// and must not push records themselves.
    pub(crate) fn observe(&self, observer: impl Fn(&Record) + Send + Sync + 'static) {
        self.shared
            .observers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::new(observer));
    }

    pub(crate) fn push(&self, record: Record) {
        for observer in self
            .shared
            .observers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            observer(&record);
        }
        {
            let mut ring = self.lock();
            if let Some(limit) = ring.limit {
                while ring.records.len() >= limit.max(1) {
                    ring.records.pop_front();
                }
            }
            ring.records.push_back(record);
        }
        self.changed.send_modify(|pushed| *pushed += 1);
    }

    /// A copy of the records kept so far: every record once `Operator::journal`
    /// was asked for, else the most recent ones.
    pub fn records(&self) -> Vec<Record> {
        self.lock().records.iter().cloned().collect()
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
            // Mark the current version seen before checking, so that a record pushed
            // right after the check still wakes us.
            rx.borrow_and_update();
            if check(self.lock().records.make_contiguous()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(n: usize) -> Record {
        Record::GuestRejected {
            path: format!("{n}.wasm"),
            error: String::new(),
        }
    }

    #[test]
    fn keeps_only_recent_records_unless_asked_for_everything() {
        let bounded = Journal::default();
        for n in 0..RECENT_RECORDS + 5 {
            bounded.push(rejected(n));
        }
        let records = bounded.records();
        assert_eq!(records.len(), RECENT_RECORDS);
        assert_eq!(records[0], rejected(5), "the oldest records go first");

        let full = Journal::default();
        full.keep_everything();
        for n in 0..RECENT_RECORDS + 5 {
            full.push(rejected(n));
        }
        assert_eq!(full.records().len(), RECENT_RECORDS + 5);
    }

    #[test]
    fn observers_see_every_record_even_those_not_kept() {
        let journal = Journal::default();
        let seen = Arc::new(Mutex::new(0_usize));
        let counter = seen.clone();
        journal.observe(move |_| *counter.lock().unwrap() += 1);
        for n in 0..RECENT_RECORDS * 2 {
            journal.push(rejected(n));
        }
        assert_eq!(*seen.lock().unwrap(), RECENT_RECORDS * 2);
    }

    #[tokio::test]
    async fn waiters_wake_up_on_new_records() {
        let journal = Journal::default();
        let pusher = journal.clone();
        let waiter = tokio::spawn(async move {
            journal
                .wait_for(Duration::from_secs(5), |records| records.len() == 3)
                .await
        });
        for n in 0..3 {
            tokio::task::yield_now().await;
            pusher.push(rejected(n));
        }
        assert!(waiter.await.unwrap().is_ok());
    }
}
