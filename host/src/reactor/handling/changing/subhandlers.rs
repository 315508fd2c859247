//! [`Subhandlers`]: the sub-handlers of one changing handler's call, as the guest's
//! `subhandlers` imports reach them — the pure core's [`Children`] on handler time, with
//! Kopf's log lines about the object.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use crate::clock::Clock;
use crate::handlers::Subhandling;
use crate::handlers::execution::Verdict;
use crate::object_log::object_log;
use crate::persistence::ProgressStorage;
use crate::reactor::changes::{Children, Lifecycle, Patch};
use crate::runtime::{Declaration, Due, HandlerKind, Outcome};

/// The sub-handlers of one call of a changing handler about one object.
pub(super) struct Subhandlers {
    children: Mutex<Children>,
    root: String,
    /// The object as the cycle read it: where the sub-handlers' records are.
    body: Arc<Value>,
    storage: ProgressStorage,
    clock: Arc<dyn Clock>,
    /// `namespace/name`, as log lines name the object.
    object: String,
}

/// What a call of a top-level handler is, for its sub-handlers.
pub(super) struct Parent<'a> {
    pub(super) id: &'a str,
    pub(super) kind: HandlerKind,
    /// The cause's reason.
    pub(super) purpose: &'a str,
    /// The handler's shortest retry delay, and its default backoff, in seconds.
    pub(super) min_delay: f64,
    pub(super) default_backoff: f64,
}

impl Subhandlers {
    pub(super) fn new(
        parent: &Parent<'_>,
        (body, object): (&Arc<Value>, &str),
        (storage, lifecycle): (ProgressStorage, Lifecycle),
        clock: Arc<dyn Clock>,
    ) -> Subhandlers {
        let children = Children::new(
            (parent.id, parent.kind),
            parent.purpose,
            lifecycle,
            (parent.min_delay, parent.default_backoff),
        );
        Subhandlers {
            children: Mutex::new(children),
            root: parent.id.to_owned(),
            body: Arc::clone(body),
            storage,
            clock,
            object: object.to_owned(),
        }
    }

    /// A guest that trapped while the lock was held cannot leave it half-changed: every
    /// change is made after the checks, under one lock.
    fn children(&self) -> MutexGuard<'_, Children> {
        self.children.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The records and results of the call's sub-handlers, into the cycle's patch.
    pub(super) fn store(&self, patch: &mut Patch) {
        self.children().store(&self.body, patch, &self.storage);
    }

    /// Every sub-handler declared in the call: the top-level handler's `subrefs`.
    pub(super) fn subrefs(&self) -> Vec<String> {
        self.children().subrefs()
    }
}

impl Subhandling for Subhandlers {
    fn execute(&self, parent: &str, declared: Vec<Declaration>) -> Result<Vec<Due>, String> {
        let now = self.clock.now();
        let planned =
            self.children()
                .execute((&self.body, &self.storage), parent, declared, now)?;
        for line in planned.given_up {
            object_log!(error, &self.object, "{line}");
        }
        Ok(planned.due)
    }

    fn finished(&self, id: &str, outcome: Outcome) {
        let now = self.clock.now();
        let decision = self.children().finished(id, outcome, now);
        let object = &self.object;
        match decision {
            Ok(decision) => {
                let line = decision.line;
                match decision.verdict {
                    Verdict::Success => object_log!(info, object, "{line}"),
                    Verdict::Pending => object_log!(debug, object, "{line}"),
                    _ => object_log!(error, object, "{line}"),
                }
            }
            // Not the SDK's way: a guest reporting on what it was not handed.
            Err(message) => object_log!(
                warn,
                object,
                "Handler '{}' reported on a sub-handler wrongly: {message}",
                self.root
            ),
        }
    }

    fn pending(&self, parent: &str) -> Option<f64> {
        self.children().pending(parent, self.clock.now())
    }

    fn interrupted(&self, message: &str) -> bool {
        let running = self.children().running();
        let Some((innermost, around)) = running.split_last() else {
            return false;
        };
        self.finished(innermost, Outcome::Failed(message.to_owned()));
        for id in around.iter().rev() {
            // Returned, as far as it knows: waiting for the one that failed.
            self.finished(id, Outcome::Done(None));
        }
        true
    }
}
