//! [`attempt`]: one attempt of a handler, as every stage makes it (Kopf's
//! `execute_handler_once`): the strict checks of `retries` and `timeout`, the call, and
//! the decision by the handler's retry policy. The stages build the call and apply the
//! decision; how they log and journal it is theirs (about an object, or about nothing).

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Decision, Executed, RetryPolicy, Verdict, decide, display_name, precheck};
use crate::clock::{Clock, after_seconds};
use crate::handlers::spec::HandlerSpec;

/// Where a handler stands before an attempt (handler time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Standing {
    /// Attempts made before this one.
    pub(crate) retries: u32,
    /// When the first attempt started.
    pub(crate) started: DateTime<Utc>,
}

impl Standing {
    /// A first attempt, starting at `now`.
    pub(crate) fn first(now: DateTime<Utc>) -> Standing {
        Standing {
            retries: 0,
            started: now,
        }
    }
}

/// What becomes of a failure that the handler's policy would retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retrying {
    /// The stage calls again after the decision's delay.
    Later,
    /// Nothing brings the call back (a raw event is stored nowhere a retry could come
    /// from): every failure is logged and ignored.
    Never,
    /// Only if the next attempt would start before this time (an activity's budget);
    /// else the failure is final.
    Before(DateTime<Utc>),
}

/// What the guest's call was, when there was one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Called {
    /// How long the call took.
    pub(crate) elapsed: Duration,
    /// What the sandbox stopped, if anything (`Executed::fault`).
    pub(crate) fault: Option<&'static str>,
}

/// How an attempt ended: the decision (its verdict as [`Retrying`] makes it), and the
/// call, unless the strict checks gave up before it.
#[derive(Debug)]
pub(crate) struct Attempted<T> {
    pub(crate) decision: Decision<T>,
    pub(crate) called: Option<Called>,
}

/// One attempt: gives up (a final failure, Kopf's line) when the handler has run out of
/// `retries` or `timeout`, else awaits `call` and decides on its attempt, with the
/// runtime as it stands after the call.
pub(crate) async fn attempt<T>(
    spec: &HandlerSpec,
    standing: Standing,
    retrying: Retrying,
    clock: &dyn Clock,
    call: impl Future<Output = Executed<T>>,
) -> Attempted<T> {
    let name = display_name(spec.kind, &spec.id);
    let policy = RetryPolicy::of(spec);
    let runtime = |now: DateTime<Utc>| now - standing.started;
    if let Some(outcome) = precheck(&name, &policy, standing.retries, runtime(clock.now())) {
        let line = outcome.error.clone().unwrap_or_default();
        let decision = Decision {
            outcome,
            verdict: Verdict::Failure,
            line,
        };
        return Attempted {
            decision,
            called: None,
        };
    }
    let executed = call.await;
    let called = Called {
        elapsed: executed.elapsed,
        fault: executed.fault,
    };
    let mut decision = decide(
        &name,
        &policy,
        standing.retries,
        runtime(clock.now()),
        executed.attempt,
    );
    decision.verdict = match (retrying, decision.verdict) {
        (_, Verdict::Success) => Verdict::Success,
        (Retrying::Never, _) => Verdict::Ignored,
        (Retrying::Before(end), Verdict::Retry)
            if after_seconds(clock.now(), decision.outcome.delay.unwrap_or(0.0)) >= end =>
        {
            Verdict::Failure
        }
        (_, verdict) => verdict,
    };
    Attempted {
        decision,
        called: Some(called),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::Value;

    use super::*;
    use crate::clock::ManualClock;
    use crate::handlers::execution::Attempt;
    use crate::runtime::{ErrorsMode, HandlerKind};

    fn spec(kind: HandlerKind, retries: Option<u32>, errors: Option<ErrorsMode>) -> HandlerSpec {
        HandlerSpec {
            id: "h".to_owned(),
            kind,
            selectors: Vec::new(),
            filters: Default::default(),
            has_when: false,
            errors,
            backoff_seconds: Some(10.0),
            timeout_seconds: None,
            retries,
            optional: false,
            deleted: false,
            old: None,
            new: None,
            param: None,
            schedule: Default::default(),
            cancellation: Default::default(),
            min_retry_delay: 0.0,
            default_backoff: crate::settings::Execution::DEFAULT_BACKOFF,
        }
    }

    /// A call that fails arbitrarily, counting how often it is made.
    async fn failing(calls: &AtomicUsize) -> Executed<Value> {
        calls.fetch_add(1, Ordering::SeqCst);
        Executed {
            attempt: Attempt::Arbitrary {
                message: "boom".to_owned(),
            },
            patch: None,
            memo: None,
            fault: Some("trap"),
            elapsed: Duration::from_millis(3),
        }
    }

    #[tokio::test]
    async fn a_handler_out_of_retries_is_given_up_on_before_its_call() {
        let clock = ManualClock::new();
        let calls = AtomicUsize::new(0);
        let standing = Standing {
            retries: 3,
            started: clock.now(),
        };
        let spec = spec(HandlerKind::Timer, Some(3), None);
        let attempted = attempt(&spec, standing, Retrying::Later, &clock, failing(&calls)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 0, "not called");
        assert!(attempted.called.is_none());
        assert_eq!(attempted.decision.verdict, Verdict::Failure);
        assert_eq!(attempted.decision.line, "Timer 'h' has exceeded 3 retries.");
    }

    #[tokio::test]
    async fn what_becomes_of_a_failure_depends_on_who_retries() {
        let clock = ManualClock::new();
        let calls = AtomicUsize::new(0);
        let first = Standing::first(clock.now());
        let spec = spec(HandlerKind::Event, None, Some(ErrorsMode::Temporary));
        let later = attempt(&spec, first, Retrying::Later, &clock, failing(&calls)).await;
        assert_eq!(later.decision.verdict, Verdict::Retry);
        assert_eq!(later.decision.outcome.delay, Some(10.0));
        assert_eq!(
            later.called,
            Some(Called {
                elapsed: Duration::from_millis(3),
                fault: Some("trap"),
            })
        );
        // A raw event is stored nowhere a retry could come from.
        let never = attempt(&spec, first, Retrying::Never, &clock, failing(&calls)).await;
        assert_eq!(never.decision.verdict, Verdict::Ignored);
        // An activity's budget: a retry 10 s later must start before its end.
        let budget = |seconds| Retrying::Before(after_seconds(clock.now(), seconds));
        let within = attempt(&spec, first, budget(10.5), &clock, failing(&calls)).await;
        assert_eq!(within.decision.verdict, Verdict::Retry);
        let past = attempt(&spec, first, budget(10.0), &clock, failing(&calls)).await;
        assert_eq!(past.decision.verdict, Verdict::Failure);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn the_decision_sees_the_runtime_after_the_call() {
        let clock = ManualClock::new();
        let standing = Standing::first(clock.now());
        let mut spec = spec(HandlerKind::Timer, None, None);
        spec.timeout_seconds = Some(15.0);
        // The call takes 6 s of handler time: a retry 10 s later would pass the timeout.
        let call = async {
            clock.advance(Duration::from_secs(6));
            failing(&AtomicUsize::new(0)).await
        };
        let attempted = attempt(&spec, standing, Retrying::Later, &clock, call).await;
        assert_eq!(attempted.decision.verdict, Verdict::Failure);
    }
}
