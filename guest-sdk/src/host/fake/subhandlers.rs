//! The fake host's sub-handlers: each one's progress record, kept per thread across
//! calls (as the real host keeps them in the object between cycles), so that a test calls
//! the parent again and again as the host would, and Kopf's retry rules for each outcome
//! (`kopf/_core/actions/execution.py`). `kapsel::testing` documents it.
//!
//! Unlike the real host, which calls one sub-handler per cycle, the fake makes every
//! unfinished declared sub-handler due at once; and it has no clock: each retry comes
//! exactly its delay after the previous attempt, so a sub-handler's runtime is the sum of
//! its delays so far.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::error::ErrorsMode;
use crate::host::{Declaration, Due};
use crate::outcome::Outcome;

/// Kopf's default backoff after an arbitrary error (`settings.execution.default_backoff`).
const DEFAULT_BACKOFF: f64 = 60.0;

/// The first attempt's start of every sub-handler, as of the causes `kapsel::testing`
/// builds.
pub(crate) const STARTED: &str = "2026-01-01T00:00:00.000000+00:00";

/// Where a sub-handler stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum State {
    /// Not finished: due again after its delay.
    Pending,
    /// Finished successfully (also an ignored error).
    Succeeded,
    /// Finished with a failure, for this reason.
    Failed(String),
}

/// One sub-handler's progress record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    /// The full id (`create_fn/item-a`).
    pub(crate) id: String,
    /// Its latest declaration: retries, timeout, backoff, errors mode.
    declaration: Declaration,
    /// Attempts so far, each outcome counting (Kopf's `retries`).
    pub(crate) retries: u32,
    /// How each attempt ended, in order.
    pub(crate) outcomes: Vec<Outcome>,
    pub(crate) state: State,
    /// Seconds until the next attempt, while pending.
    delay: f64,
    /// Seconds since the first attempt, on the fake's clock.
    runtime: f64,
}

#[derive(Default)]
struct FakeSubhandlers {
    /// In the order first declared.
    records: Vec<Record>,
    /// A parent's full id → the full ids of the sub-handlers it declared last.
    children: BTreeMap<String, Vec<String>>,
}

thread_local! {
    static SUBHANDLERS: RefCell<FakeSubhandlers> = RefCell::new(FakeSubhandlers::default());
}

impl FakeSubhandlers {
    fn record(&mut self, id: &str) -> Option<&mut Record> {
        self.records.iter_mut().find(|r| r.id == id)
    }

    /// `None` when every child of `parent` is finished, else the shortest delay of the
    /// unfinished ones (Kopf's `State.delay`).
    fn pending(&self, parent: &str) -> Option<f64> {
        let children = self.children.get(parent)?;
        self.records
            .iter()
            .filter(|r| r.state == State::Pending && children.contains(&r.id))
            .map(|r| r.delay)
            .reduce(f64::min)
    }
}

/// Refuses what the host refuses (empty or duplicate ids), records the declarations and
/// makes every unfinished one due.
pub(crate) fn execute(parent: &str, declared: &[Declaration]) -> Result<Vec<Due>, String> {
    for (i, declaration) in declared.iter().enumerate() {
        if declaration.id.is_empty() {
            return Err(format!("a sub-handler of `{parent}` has an empty id"));
        }
        if declared[..i].iter().any(|d| d.id == declaration.id) {
            return Err(format!(
                "`{parent}` declares the sub-handler `{}` twice",
                declaration.id
            ));
        }
    }
    SUBHANDLERS.with_borrow_mut(|fake| {
        let ids: Vec<String> = declared
            .iter()
            .map(|d| format!("{parent}/{}", d.id))
            .collect();
        let mut due = Vec::new();
        for (id, declaration) in ids.iter().zip(declared) {
            let record = match fake.record(id) {
                Some(record) => record,
                None => {
                    fake.records.push(Record {
                        id: id.clone(),
                        declaration: declaration.clone(),
                        retries: 0,
                        outcomes: Vec::new(),
                        state: State::Pending,
                        delay: 0.0,
                        runtime: 0.0,
                    });
                    let last = fake.records.len() - 1;
                    &mut fake.records[last]
                }
            };
            record.declaration = declaration.clone();
            if let Some(reason) = record.exhausted() {
                record.state = State::Failed(reason);
            }
            if record.state == State::Pending {
                due.push(Due {
                    id: id.clone(),
                    retry: record.retries,
                    started: STARTED.to_owned(),
                    runtime_seconds: record.runtime,
                });
            }
        }
        fake.children.insert(parent.to_owned(), ids);
        Ok(due)
    })
}

/// Records an attempt's outcome and what it means, by Kopf's rules.
pub(crate) fn finished(id: &str, outcome: &Outcome) {
    SUBHANDLERS.with_borrow_mut(|fake| {
        let children_pending = fake.pending(id);
        let Some(record) = fake.record(id) else {
            return;
        };
        record.outcomes.push(outcome.clone());
        match outcome {
            // Kopf's HandlerChildrenRetry: the sub-handler's own children are unfinished.
            Outcome::Done(_) => match children_pending {
                Some(delay) => record.retry_after(delay),
                None => record.state = State::Succeeded,
            },
            Outcome::Temporary(message, delay) => record.fail_temporarily(message, *delay),
            Outcome::Permanent(message) | Outcome::Rejected(message, _) => {
                record.state = State::Failed(message.clone())
            }
            Outcome::Failed(message) => match record.declaration.errors {
                Some(ErrorsMode::Ignored) => record.state = State::Succeeded,
                Some(ErrorsMode::Permanent) => record.state = State::Failed(message.clone()),
                Some(ErrorsMode::Temporary) | None => {
                    let backoff = record.declaration.backoff_seconds;
                    record.fail_temporarily(message, backoff.unwrap_or(DEFAULT_BACKOFF));
                }
            },
        }
        record.retries += 1;
    });
}

impl Record {
    /// Why a pending sub-handler is not called again: out of time or retries (Kopf's
    /// strict checks before a call; a sub-handler retried for its children's sake is
    /// not checked ahead).
    fn exhausted(&self) -> Option<String> {
        if self.state != State::Pending {
            return None;
        }
        let id = &self.id;
        if let Some(timeout) = self.declaration.timeout_seconds
            && self.runtime >= timeout
        {
            return Some(format!(
                "`{id}` has timed out after {} seconds",
                self.runtime
            ));
        }
        let retries = self.declaration.retries?;
        (self.retries >= retries).then(|| format!("`{id}` has exceeded {} retries", self.retries))
    }

    fn retry_after(&mut self, delay: f64) {
        self.state = State::Pending;
        self.delay = delay;
        self.runtime += delay;
    }

    /// A temporary failure: retried after `delay`, unless the retry would come after
    /// the timeout or exceed the retries (Kopf's look-ahead checks).
    fn fail_temporarily(&mut self, message: &str, delay: f64) {
        if let Some(timeout) = self.declaration.timeout_seconds
            && self.runtime + delay >= timeout
        {
            self.state = State::Failed(format!(
                "`{}` failed temporarily but will time out after {timeout} seconds: {message}",
                self.id
            ));
        } else if let Some(retries) = self.declaration.retries
            && self.retries + 1 >= retries
        {
            self.state = State::Failed(format!(
                "`{}` failed temporarily but will exceed {retries} retries: {message}",
                self.id
            ));
        } else {
            self.retry_after(delay);
        }
    }
}

/// See [`FakeSubhandlers::pending`].
pub(crate) fn pending(parent: &str) -> Option<f64> {
    SUBHANDLERS.with_borrow(|fake| fake.pending(parent))
}

/// Every record, in the order first declared.
pub(crate) fn records() -> Vec<Record> {
    SUBHANDLERS.with_borrow(|fake| fake.records.clone())
}

/// Forgets every record.
pub(crate) fn reset() {
    SUBHANDLERS.with_borrow_mut(|fake| *fake = FakeSubhandlers::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(id: &str) -> Declaration {
        Declaration {
            id: id.to_owned(),
            errors: None,
            timeout_seconds: None,
            retries: None,
            backoff_seconds: None,
        }
    }

    fn due_ids(parent: &str, declarations: &[Declaration]) -> Vec<String> {
        let due = execute(parent, declarations).unwrap();
        due.into_iter().map(|d| d.id).collect()
    }

    fn state(id: &str) -> State {
        let record = records().into_iter().find(|r| r.id == id);
        record.map(|r| r.state).unwrap()
    }

    #[test]
    fn empty_and_duplicate_ids_are_refused() {
        reset();
        let error = execute("p", &[declared("a"), declared("")]).unwrap_err();
        assert_eq!(error, "a sub-handler of `p` has an empty id");
        let error = execute("p", &[declared("a"), declared("a")]).unwrap_err();
        assert_eq!(error, "`p` declares the sub-handler `a` twice");
        assert!(records().is_empty());
    }

    #[test]
    fn temporary_failures_are_retried_until_the_retries_are_exhausted() {
        reset();
        let limited = Declaration {
            retries: Some(2),
            ..declared("a")
        };
        let due = execute("p", std::slice::from_ref(&limited)).unwrap();
        assert_eq!((due[0].retry, due[0].runtime_seconds), (0, 0.0));
        finished("p/a", &Outcome::Temporary("later".into(), 4.0));
        assert_eq!((state("p/a"), pending("p")), (State::Pending, Some(4.0)));
        let due = execute("p", std::slice::from_ref(&limited)).unwrap();
        assert_eq!((due[0].retry, due[0].runtime_seconds), (1, 4.0));
        finished("p/a", &Outcome::Temporary("later".into(), 4.0));
        assert_eq!(
            state("p/a"),
            State::Failed("`p/a` failed temporarily but will exceed 2 retries: later".into())
        );
        assert_eq!(pending("p"), None);
        assert!(due_ids("p", &[limited]).is_empty());
    }

    #[test]
    fn arbitrary_errors_follow_the_errors_mode_and_the_backoff() {
        reset();
        let modes = [
            Declaration {
                backoff_seconds: Some(2.5),
                ..declared("temporary")
            },
            Declaration {
                errors: Some(ErrorsMode::Permanent),
                ..declared("permanent")
            },
            Declaration {
                errors: Some(ErrorsMode::Ignored),
                ..declared("ignored")
            },
            declared("default"),
        ];
        assert_eq!(due_ids("p", &modes).len(), 4);
        for mode in &modes {
            finished(&format!("p/{}", mode.id), &Outcome::Failed("oops".into()));
        }
        assert_eq!(state("p/temporary"), State::Pending);
        assert_eq!(state("p/permanent"), State::Failed("oops".into()));
        assert_eq!(state("p/ignored"), State::Succeeded);
        assert_eq!(pending("p"), Some(2.5));
        finished("p/temporary", &Outcome::Permanent("no".into()));
        assert_eq!(pending("p"), Some(DEFAULT_BACKOFF));
        assert_eq!(due_ids("p", &modes), ["p/default"]);
    }

    #[test]
    fn a_timeout_stops_the_retries() {
        reset();
        let timed = Declaration {
            timeout_seconds: Some(10.0),
            ..declared("a")
        };
        due_ids("p", std::slice::from_ref(&timed));
        finished("p/a", &Outcome::Temporary("later".into(), 6.0));
        due_ids("p", std::slice::from_ref(&timed));
        finished("p/a", &Outcome::Temporary("later".into(), 6.0));
        let State::Failed(reason) = state("p/a") else {
            panic!("not timed out");
        };
        assert!(
            reason.contains("will time out after 10 seconds"),
            "{reason}"
        );
    }

    #[test]
    fn a_sub_handler_with_unfinished_children_is_not_finished() {
        reset();
        due_ids("p", &[declared("a")]);
        due_ids("p/a", &[declared("b")]);
        finished("p/a/b", &Outcome::Temporary("later".into(), 1.5));
        finished("p/a", &Outcome::Done(Some("1".into())));
        assert_eq!((state("p/a"), pending("p")), (State::Pending, Some(1.5)));
        // Asked fewer retries than it made meanwhile: stopped before its next call.
        let strict = Declaration {
            retries: Some(1),
            ..declared("a")
        };
        assert!(due_ids("p", &[strict]).is_empty());
        assert_eq!(
            state("p/a"),
            State::Failed("`p/a` has exceeded 1 retries".into())
        );
    }
}
