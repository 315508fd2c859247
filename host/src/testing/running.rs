//! [`RunningOperator`]: an operator a test started in the background, its journal, its
//! handler time (when started on a manual clock), and the wait until it has settled —
//! the event that proves a negative ("nothing more happens") without a wall-clock window.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, ManualClock};
use crate::reactor::{Memories, Watched};
use crate::{Error, Journal, Operator};

/// How long [`RunningOperator::settle`] waits for the operator to settle.
const SETTLE_PATIENCE: Duration = Duration::from_secs(10);

/// How many looks in a row, 5 ms apart, must find the operator settled: an event between
/// two streams' tasks (received, not yet routed) is invisible to a single look.
const QUIET_LOOKS: usize = 3;

/// Why a test's wait on a [`RunningOperator`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettleError {
    /// It still had work after the wait's patience (a handler still running, an event
    /// not processed, a patch not echoed yet, or an object version not seen).
    #[error("the operator did not settle within {0:?}")]
    NotSettled(Duration),
    /// [`RunningOperator::advance`] on an operator that runs on the system clock.
    #[error(
        "the operator runs on the system clock; start it with `start_operator_on_handler_time`"
    )]
    SystemClock,
}

/// An operator running in the background.
#[derive(Debug)]
pub struct RunningOperator {
    journal: Journal,
    stop: CancellationToken,
    task: JoinHandle<Result<(), Error>>,
    /// Handler time as the operator sees it.
    clock: Arc<dyn Clock>,
    /// The same clock when the test moves it (`None`: the system clock).
    manual: Option<Arc<ManualClock>>,
    memories: Memories,
    watched: Watched,
    /// What the test breaks on purpose.
    #[cfg(feature = "faults")]
    faults: crate::faults::Faults,
    /// Whether the operator has started its watch streams.
    started: tokio::sync::watch::Receiver<bool>,
}

impl RunningOperator {
    /// Starts `operator` (whose client is set) in the background; on `manual` handler time
    /// when given.
    pub(super) fn start(mut operator: Operator, manual: Option<Arc<ManualClock>>) -> Self {
        if let Some(clock) = &manual {
            operator.shared.clock = clock.clone();
        }
        let journal = operator.journal();
        let clock = operator.shared.clock.clone();
        let memories = operator.shared.memories.clone();
        let watched = operator.shared.watched.clone();
        #[cfg(feature = "faults")]
        let faults = operator.shared.faults.clone();
        let started = operator.shared.started.subscribe();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(operator.run(async move { stopped.cancelled().await }));
        RunningOperator {
            journal,
            stop,
            task,
            clock,
            manual,
            memories,
            watched,
            #[cfg(feature = "faults")]
            faults,
            started,
        }
    }

    /// What the operator did so far.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Whether the operator has exited on its own (e.g. an error at start).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Waits until the operator has nothing left to do but wait: its streams run, every
    /// event they received has been processed, no handler or daemon call is busy, no
    /// patch awaits its echo, and nothing waits for a handler time that has come. After
    /// it, what has not happened will not happen until a new event arrives or handler time
    /// moves on.
    ///
    /// `seen` are objects (bodies with `metadata.uid` and `metadata.resourceVersion`, as
    /// written or as watched) the operator must have received first: the writes whose
    /// consequences the test is about to check. Only objects it watches.
    ///
    /// # Errors
    /// [`SettleError::NotSettled`] when that does not happen within 10 s.
    pub async fn settle<'a>(
        &self,
        seen: impl IntoIterator<Item = &'a Value>,
    ) -> Result<(), SettleError> {
        let versions: Vec<(String, String)> = seen
            .into_iter()
            .map(|body| {
                let field = |name: &str| {
                    body.pointer(&format!("/metadata/{name}"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                (field("uid"), field("resourceVersion"))
            })
            .collect();
        let memories = self.memories.clone();
        let settled = self
            .settle_within(SETTLE_PATIENCE, move || {
                versions
                    .iter()
                    .all(|(uid, version)| memories.has_seen(uid, version))
            })
            .await;
        if settled {
            Ok(())
        } else {
            Err(SettleError::NotSettled(SETTLE_PATIENCE))
        }
    }

    /// Moves handler time forward by `by`: first lets the operator settle, then moves the
    /// clock without waiting, then lets it settle again, so that what fell due has run
    /// (Kapsel's `advance` step of case files).
    ///
    /// # Errors
    /// The operator runs on the system clock, or does not settle (see [`Self::settle`]).
    pub async fn advance(&self, by: Duration) -> Result<(), SettleError> {
        let clock = self.manual.as_ref().ok_or(SettleError::SystemClock)?;
        self.settle([]).await?;
        clock.advance(by);
        self.settle([]).await
    }

    /// Makes the watch streams of `resource` (`plural.version.group`, e.g. `pods.v1`) die
    /// as a host bug would: their loops panic and are not reopened, and liveness fails
    /// from then on. For testing what the operator does when one of its loops dies.
    #[cfg(feature = "faults")]
    pub fn kill_streams(&self, resource: &str) {
        self.faults.kill_streams(resource);
    }

    /// What the watched resources are (keys as the journal names them), for `kapsel test`
    /// to tell which of its writes the operator sees.
    pub(crate) fn watches(&self, resource: &str) -> bool {
        self.watched.contains(resource)
    }

    /// Whether the operator has processed this version of an object (or forgot it, gone).
    pub(crate) fn has_seen(&self, uid: &str, version: &str) -> bool {
        self.memories.has_seen(&uid.to_owned(), version)
    }

    /// Waits, up to `limit`, until the operator has settled (see [`Self::settle`]) and
    /// `also` holds; answers whether it did.
    pub(crate) async fn settle_within(&self, limit: Duration, also: impl Fn() -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        // Before its streams exist, an operator has nothing to do yet, but not because it
        // is done; unless its startup handlers wait for a retry on handler time (nothing
        // else runs before they are done).
        while !*self.started.borrow() {
            if self
                .manual
                .as_ref()
                .is_some_and(|clock| clock.is_slept_on())
            {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut quiet = 0;
        while quiet < QUIET_LOOKS {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            quiet = if also() && self.memories.settled(self.clock.now()) {
                quiet + 1
            } else {
                0
            };
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Stops the operator gracefully and returns how it ended.
    ///
    /// # Errors
    /// The operator's own error; or, if it did not stop within 30 s, that.
    pub async fn stop(self) -> Result<(), Error> {
        self.stop.cancel();
        match tokio::time::timeout(Duration::from_secs(30), self.task).await {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => Err(Error::Operator(Box::new(join))),
            Err(_) => Err(Error::Operator(
                "the operator did not stop within 30 s".into(),
            )),
        }
    }
}
