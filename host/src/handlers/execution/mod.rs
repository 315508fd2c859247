//! One handler attempt, for every kind of handler (Kopf's `execute_handler_once`): the
//! guest is called, its reply (or the sandbox's verdict) becomes one [`Attempt`], and
//! [`decide`] turns the attempt into an [`Outcome`] by the handler's [`RetryPolicy`], with
//! the line Kopf logs and the [`Verdict`] the journal and metrics count.
//!
//! The rules and messages are Kopf's (KOPF.md §5.1, §5.2): `timeout` and `retries` are
//! checked strictly before an attempt ([`precheck`]), and after a failure a look-ahead
//! makes it final when the next attempt would exceed either limit, so `retries=N` means
//! N attempts in total. The messages end up in progress records, hence the wording.

mod attempt;
mod replies;

use std::time::{Duration, Instant};

use chrono::TimeDelta;
use serde_json::{Map, Value};
use tracing::Instrument;

pub(crate) use attempt::{Attempted, Called, Retrying, Standing, attempt};
pub(crate) use replies::taken;

use super::spec::HandlerSpec;
use crate::clock::LONGEST_WAIT;
use crate::pyformat::{py_repr_str, py_seconds, py_timedelta, seconds};
use crate::runtime::{
    AdmissionRequest, Admitted, CallContext, CallError, Cause, ErrorsMode, Guest, HandlerKind,
    IndexOutcome,
};

/// Kopf's `DEFAULT_RETRY_DELAY`, in seconds: the delay after an arbitrary failure (unless
/// the handler's `backoff` says otherwise) and of a `TemporaryError` without a usable one.
pub(crate) const DEFAULT_RETRY_DELAY: f64 = 60.0;

/// A handler's retry options (KOPF.md §5.2).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RetryPolicy {
    /// What an arbitrary failure means.
    pub(crate) errors: ErrorsMode,
    /// Seconds since the first attempt after which the handler fails.
    pub(crate) timeout: Option<f64>,
    /// Total attempts allowed.
    pub(crate) retries: Option<u32>,
    /// Seconds to wait after an arbitrary failure (default `default_backoff`).
    pub(crate) backoff: Option<f64>,
    /// Seconds to wait after an arbitrary failure when `backoff` says nothing (Kopf's
    /// `execution.default_backoff`: [`DEFAULT_RETRY_DELAY`] unless set).
    pub(crate) default_backoff: f64,
    /// The host's shortest retry delay in seconds (`Limits::min_retry_delay`): a guest
    /// asking to be retried sooner waits this long, so a failing handler cannot loop.
    pub(crate) min_delay: f64,
}

impl RetryPolicy {
    /// How a handler's failures are retried (KOPF.md §5.1–§5.3).
    pub(crate) fn of(spec: &HandlerSpec) -> RetryPolicy {
        RetryPolicy {
            errors: spec.errors.unwrap_or(default_errors(spec.kind)),
            timeout: spec.timeout_seconds,
            retries: spec.retries,
            backoff: spec.backoff_seconds.filter(|s| s.is_finite() && *s >= 0.0),
            default_backoff: spec.default_backoff,
            min_delay: spec.min_retry_delay,
        }
    }
}

/// Kopf's default errors mode of a kind (KOPF.md §5.3): raw events and indexes ignore
/// arbitrary failures, everything else retries them.
fn default_errors(kind: HandlerKind) -> ErrorsMode {
    match kind {
        HandlerKind::Event | HandlerKind::Index => ErrorsMode::Ignored,
        _ => ErrorsMode::Temporary,
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            errors: ErrorsMode::Temporary,
            timeout: None,
            retries: None,
            backoff: None,
            default_backoff: DEFAULT_RETRY_DELAY,
            min_delay: 0.0,
        }
    }
}

/// What one call of the handler did. `T` is what a success carries: a JSON result for
/// most handlers, index entries for index handlers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Attempt<T = Value> {
    /// Returned; the value goes to `status.<id>` (`Null` = nothing).
    Success(T),
    /// `TemporaryError(message, delay)`; `delay: None` retries immediately.
    Temporary { message: String, delay: Option<f64> },
    /// `PermanentError(message)`.
    Permanent { message: String },
    /// Any other failure: an error, a trap, a timeout or memory overrun of the guest.
    Arbitrary { message: String },
    /// Returned, but sub-handlers it declared are unfinished (Kopf's internal
    /// `HandlerChildrenRetry`): called again after the delay.
    ChildrenRetry { delay: Option<f64> },
}

/// The in-memory result of one attempt (Kopf's `Outcome`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome<T = Value> {
    /// No more attempts for this cause.
    pub(crate) is_final: bool,
    /// Seconds until the next attempt (not final only).
    pub(crate) delay: Option<f64>,
    /// The handler's return value on success.
    pub(crate) result: Option<T>,
    /// The error text, if it failed (`str(exception)`).
    pub(crate) error: Option<String>,
    pub(crate) subrefs: Vec<String>,
}

impl<T> Default for Outcome<T> {
    fn default() -> Self {
        Outcome {
            is_final: false,
            delay: None,
            result: None,
            error: None,
            subrefs: Vec::new(),
        }
    }
}

/// How an attempt ended, as the journal and the metrics count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Success,
    /// Failed; it will be retried.
    Retry,
    /// Failed for good.
    Failure,
    /// Failed, and the failure is ignored (errors mode `ignored`).
    Ignored,
    /// Returned while sub-handlers it declared are unfinished: called again, quietly
    /// (Kopf logs it at debug level and posts nothing).
    Pending,
}

impl Verdict {
    /// The journal's spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Success => "success",
            Verdict::Retry => "retry",
            Verdict::Failure => "failure",
            Verdict::Ignored => "ignored",
            Verdict::Pending => "pending",
        }
    }
}

/// What [`decide`] made of an attempt.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decision<T = Value> {
    pub(crate) outcome: Outcome<T>,
    pub(crate) verdict: Verdict,
    /// The line Kopf logs for it (at `info` for a success, else at `error`).
    pub(crate) line: String,
}

/// How Kopf names a handler in its messages: `Handler 'x'`, `Timer 'x'`, `Daemon 'x'`,
/// `Activity 'x'`.
pub(crate) fn display_name(kind: HandlerKind, id: &str) -> String {
    let title = match kind {
        HandlerKind::Timer => "Timer",
        HandlerKind::Daemon => "Daemon",
        HandlerKind::Probe | HandlerKind::Startup | HandlerKind::Cleanup => "Activity",
        _ => "Handler",
    };
    format!("{title} {}", py_repr_str(id))
}

/// The strict checks before an attempt (`retries` attempts made so far, `runtime` since
/// the first one): `Some(final outcome)` if the handler must not run again.
pub(crate) fn precheck<T>(
    name: &str,
    policy: &RetryPolicy,
    retries: u32,
    runtime: TimeDelta,
) -> Option<Outcome<T>> {
    let message = if policy.timeout.is_some_and(|t| seconds(runtime) >= t) {
        format!("{name} has timed out after {}.", py_timedelta(runtime))
    } else if policy.retries.is_some_and(|r| retries >= r) {
        format!("{name} has exceeded {retries} retries.")
    } else {
        return None;
    };
    Some(Outcome {
        is_final: true,
        error: Some(message),
        ..Outcome::default()
    })
}

/// The outcome of an attempt (`retries` attempts made before it, `runtime` since the
/// first one) per the handler's errors mode and limits, with Kopf's log line.
pub(crate) fn decide<T>(
    name: &str,
    policy: &RetryPolicy,
    retries: u32,
    runtime: TimeDelta,
    attempt: Attempt<T>,
) -> Decision<T> {
    let judge = Judge {
        name,
        policy,
        retries,
        runtime: seconds(runtime),
    };
    match attempt {
        Attempt::Success(result) => Decision {
            outcome: Outcome {
                is_final: true,
                result: Some(result),
                ..Outcome::default()
            },
            verdict: Verdict::Success,
            line: format!("{name} succeeded."),
        },
        // Not floored by the shortest retry delay: the delay is the host's, from the
        // sub-handlers' own (floored) delays, and 0 means one of them is due now.
        Attempt::ChildrenRetry { delay } => Decision {
            verdict: Verdict::Pending,
            ..retry(
                String::new(),
                delay,
                format!("{name} has unfinished sub-handlers. Will retry soon."),
            )
        },
        Attempt::Temporary { message, delay } => judge.temporary(message, delay),
        Attempt::Permanent { message } => {
            let line = format!("{name} failed permanently: {message}");
            fail(message, line)
        }
        Attempt::Arbitrary { message } => judge.arbitrary(message),
    }
}

/// What a failure is judged by: the handler's name and policy, and where it stands.
struct Judge<'a> {
    name: &'a str,
    policy: &'a RetryPolicy,
    retries: u32,
    /// Seconds since the first attempt.
    runtime: f64,
}

impl Judge<'_> {
    /// Whether an attempt `delay` seconds from now would start past the timeout.
    fn over_timeout(&self, delay: f64) -> bool {
        self.policy
            .timeout
            .is_some_and(|t| self.runtime + delay >= t)
    }

    /// Whether another attempt would exceed the retries.
    fn over_retries(&self) -> bool {
        self.policy.retries.is_some_and(|r| self.retries + 1 >= r)
    }

    /// The timeout as Kopf prints it.
    fn timeout(&self) -> String {
        py_seconds(self.policy.timeout.unwrap_or_default())
    }

    /// A `TemporaryError`: retried after its delay, unless that would pass a limit.
    fn temporary<T>(&self, message: String, delay: Option<f64>) -> Decision<T> {
        let name = self.name;
        let delay = at_least(delay, self.policy.min_delay);
        let line = if self.over_timeout(delay.unwrap_or(0.0)) {
            format!(
                "{name} failed temporarily but will time out after {} seconds: {message}",
                self.timeout()
            )
        } else if self.over_retries() {
            let limit = self.policy.retries.unwrap_or_default();
            format!("{name} failed temporarily but will exceed {limit} retries: {message}")
        } else {
            let line = format!("{name} failed temporarily: {message}");
            return retry(message, delay, line);
        };
        fail(line.clone(), line)
    }

    /// Any other failure: as the errors mode says, within the limits.
    fn arbitrary<T>(&self, message: String) -> Decision<T> {
        let name = self.name;
        let backoff = self
            .policy
            .backoff
            .unwrap_or(self.policy.default_backoff)
            .max(self.policy.min_delay);
        match self.policy.errors {
            ErrorsMode::Ignored => Decision {
                outcome: Outcome {
                    is_final: true,
                    ..Outcome::default()
                },
                verdict: Verdict::Ignored,
                line: format!("{name} failed with an exception and will ignore it: {message}"),
            },
            ErrorsMode::Temporary if self.over_timeout(backoff) => {
                let line = format!(
                    "{name} failed with an exception and will stop now \
                     (it would time out in {} seconds on the next attempt): {message}",
                    self.timeout()
                );
                fail(line.clone(), line)
            }
            ErrorsMode::Temporary if self.over_retries() => {
                let limit = self.policy.retries.unwrap_or_default();
                let line = format!(
                    "{name} failed with an exception and will stop now \
                     (it would exceed {limit} retries on the next attempt): {message}"
                );
                fail(line.clone(), line)
            }
            ErrorsMode::Temporary => {
                let line = format!(
                    "{name} failed with an exception and will try again in {} seconds: {message}",
                    py_seconds(backoff)
                );
                retry(message, Some(backoff), line)
            }
            ErrorsMode::Permanent => {
                let line = format!("{name} failed with an exception and will stop now: {message}");
                fail(message, line)
            }
        }
    }
}

/// A final failure: `message` is stored, `line` logged.
fn fail<T>(message: String, line: String) -> Decision<T> {
    Decision {
        outcome: Outcome {
            is_final: true,
            error: Some(message),
            ..Outcome::default()
        },
        verdict: Verdict::Failure,
        line,
    }
}

/// A failure retried after `delay` seconds: `message` is stored, `line` logged.
fn retry<T>(message: String, delay: Option<f64>, line: String) -> Decision<T> {
    Decision {
        outcome: Outcome {
            delay,
            error: Some(message),
            ..Outcome::default()
        },
        verdict: Verdict::Retry,
        line,
    }
}

/// A retry delay no shorter than the host's minimum (none stays none without one).
fn at_least(delay: Option<f64>, min_delay: f64) -> Option<f64> {
    match delay {
        Some(delay) => Some(delay.max(min_delay)),
        None if min_delay > 0.0 => Some(min_delay),
        None => None,
    }
}

/// A delay in seconds from a guest, if it is a usable duration; else Kopf's default.
pub(crate) fn usable_delay(seconds: f64) -> f64 {
    if seconds.is_finite() && seconds >= 0.0 {
        seconds.min(LONGEST_DELAY)
    } else {
        DEFAULT_RETRY_DELAY
    }
}

/// The longest delay a handler gets, in seconds: the clock's [`LONGEST_WAIT`].
pub(crate) const LONGEST_DELAY: f64 = LONGEST_WAIT.as_secs_f64();

/// What one call of a handler produced.
#[derive(Debug)]
pub(crate) struct Executed<T = Value> {
    pub(crate) attempt: Attempt<T>,
    /// The handler's merge-patch for its object.
    pub(crate) patch: Option<Map<String, Value>>,
    /// The memo for later calls, JSON.
    pub(crate) memo: Option<String>,
    /// What the sandbox stopped, if anything: `trap`, `timeout`, `memory` or `limit`.
    pub(crate) fault: Option<&'static str>,
    /// How long the call took.
    pub(crate) elapsed: Duration,
}

/// What the sandbox stopped, for the metrics: `timeout`, `memory`, `trap` or `limit` (the
/// guest handed over more than a limit allows); `None` when the host failed (not the
/// guest's fault).
fn sandbox_fault(error: &CallError) -> Option<&'static str> {
    match error {
        CallError::Timeout { .. } => Some("timeout"),
        CallError::MemoryExceeded { .. } => Some("memory"),
        CallError::Trap { .. } => Some("trap"),
        CallError::LimitExceeded(_) => Some("limit"),
        CallError::HostBug(_) => None,
    }
}

/// The span every handler call runs in: which guest, handler and object.
fn span(guest: &Guest, context: &CallContext) -> tracing::Span {
    tracing::debug_span!(
        "handler",
        guest = %guest.name(),
        handler = %context.handler_id,
        object = context.object.as_deref().unwrap_or("-"),
    )
}

/// Calls a handler (the guest's `invoke`) and turns the reply into an [`Attempt`].
pub(crate) async fn invoke(guest: &Guest, cause: Cause, context: CallContext) -> Executed {
    let started = Instant::now();
    let span = span(guest, &context);
    let answer = guest.invoke(cause, context).instrument(span).await;
    let elapsed = started.elapsed();
    match answer {
        Ok(reply) => {
            let (attempt, patch) = taken(reply.outcome, reply.patch);
            Executed {
                attempt,
                patch,
                memo: reply.memo,
                fault: None,
                elapsed,
            }
        }
        Err(error) => failed(&error, elapsed),
    }
}

/// Calls an admission handler (the guest's `invoke`, answering `request`) and turns the
/// reply into an [`Attempt`]; with what it answered beside it (warnings, a refusal's code).
pub(crate) async fn admit(
    guest: &Guest,
    cause: Cause,
    request: AdmissionRequest,
    context: CallContext,
) -> (Executed, Admitted) {
    let started = Instant::now();
    let span = span(guest, &context);
    let answer = guest.admit(cause, request, context).instrument(span).await;
    let elapsed = started.elapsed();
    match answer {
        Ok((reply, admitted)) => {
            let (attempt, patch) = taken(reply.outcome, reply.patch);
            let executed = Executed {
                attempt,
                patch,
                memo: reply.memo,
                fault: None,
                elapsed,
            };
            (executed, admitted)
        }
        Err(error) => (failed(&error, elapsed), Admitted::default()),
    }
}

/// What an index handler contributed for an object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum IndexEntries {
    /// Nothing: the object's previous values stay (KOPF.md §7).
    Keep,
    /// Key/value pairs, both JSON.
    Entries(Vec<(String, String)>),
}

/// Calls an index handler (the guest's `index`) and turns the answer into an [`Attempt`].
pub(crate) async fn index(
    guest: &Guest,
    cause: Cause,
    context: CallContext,
) -> Executed<IndexEntries> {
    let started = Instant::now();
    let span = span(guest, &context);
    let answer = guest.index(cause, context).instrument(span).await;
    let elapsed = started.elapsed();
    let attempt = match answer {
        Ok(IndexOutcome::Keep) => Attempt::Success(IndexEntries::Keep),
        Ok(IndexOutcome::Entries(entries)) => Attempt::Success(IndexEntries::Entries(entries)),
        Ok(IndexOutcome::Temporary((message, seconds))) => Attempt::Temporary {
            message,
            delay: Some(usable_delay(seconds)),
        },
        Ok(IndexOutcome::Permanent(message)) => Attempt::Permanent { message },
        Ok(IndexOutcome::Failed(message)) => Attempt::Arbitrary { message },
        Err(error) => return failed(&error, elapsed),
    };
    Executed {
        attempt,
        patch: None,
        memo: None,
        fault: None,
        elapsed,
    }
}

/// A call the sandbox stopped (or the host could not make): an arbitrary failure.
fn failed<T>(error: &CallError, elapsed: Duration) -> Executed<T> {
    Executed {
        attempt: Attempt::Arbitrary {
            message: error.to_string(),
        },
        patch: None,
        memo: None,
        fault: sandbox_fault(error),
        elapsed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secs(s: i64) -> TimeDelta {
        TimeDelta::seconds(s)
    }

    fn temp(delay: f64) -> Attempt {
        Attempt::Temporary {
            message: "not yet".into(),
            delay: Some(delay),
        }
    }

    fn boom() -> Attempt {
        Attempt::Arbitrary {
            message: "boom".into(),
        }
    }

    const FN: &str = "Handler 'fn'";

    #[test]
    fn success_and_plain_failures() {
        let p = RetryPolicy::default();
        let d = decide(FN, &p, 0, secs(1), Attempt::Success(json!({"a": 1})));
        assert!(d.outcome.is_final && d.outcome.error.is_none());
        assert_eq!(d.outcome.result, Some(json!({"a": 1})));
        assert_eq!(
            (d.verdict, d.line.as_str()),
            (Verdict::Success, "Handler 'fn' succeeded.")
        );
        let d = decide(FN, &p, 0, secs(1), temp(10.0));
        assert_eq!(
            (
                d.outcome.is_final,
                d.outcome.delay,
                d.outcome.error.as_deref()
            ),
            (false, Some(10.0), Some("not yet"))
        );
        assert_eq!(d.line, "Handler 'fn' failed temporarily: not yet");
        let d = decide(
            FN,
            &p,
            0,
            secs(1),
            Attempt::<Value>::ChildrenRetry { delay: Some(2.0) },
        );
        assert_eq!((d.outcome.is_final, d.outcome.delay), (false, Some(2.0)));
        let d = decide(
            FN,
            &p,
            0,
            secs(1),
            Attempt::<Value>::Permanent {
                message: "no".into(),
            },
        );
        assert_eq!(
            (d.outcome.is_final, d.outcome.error.as_deref(), d.verdict),
            (true, Some("no"), Verdict::Failure)
        );
        assert_eq!(d.line, "Handler 'fn' failed permanently: no");
    }

    #[test]
    fn errors_modes() {
        let d = decide(FN, &RetryPolicy::default(), 0, secs(1), boom());
        assert_eq!((d.outcome.is_final, d.outcome.delay), (false, Some(60.0)));
        let p = RetryPolicy {
            backoff: Some(5.0),
            ..RetryPolicy::default()
        };
        let d = decide(FN, &p, 0, secs(1), boom());
        assert_eq!(d.outcome.delay, Some(5.0));
        assert_eq!(
            d.line,
            "Handler 'fn' failed with an exception and will try again in 5 seconds: boom"
        );
        let p = RetryPolicy {
            errors: ErrorsMode::Permanent,
            ..RetryPolicy::default()
        };
        assert_eq!(
            decide(FN, &p, 0, secs(1), boom()).outcome.error.as_deref(),
            Some("boom")
        );
        let p = RetryPolicy {
            errors: ErrorsMode::Ignored,
            ..RetryPolicy::default()
        };
        let d = decide(FN, &p, 0, secs(1), boom());
        assert!(
            d.outcome.is_final && d.outcome.error.is_none() && d.outcome.result.is_none(),
            "ignored = success without result"
        );
        assert_eq!(d.verdict, Verdict::Ignored);
    }

    #[test]
    fn retries_mean_total_attempts() {
        let p = RetryPolicy {
            retries: Some(3),
            ..RetryPolicy::default()
        };
        assert!(!decide(FN, &p, 0, secs(1), temp(1.0)).outcome.is_final);
        assert!(!decide(FN, &p, 1, secs(1), temp(1.0)).outcome.is_final);
        let d = decide(FN, &p, 2, secs(1), temp(1.0));
        assert_eq!(
            d.outcome.error.as_deref(),
            Some("Handler 'fn' failed temporarily but will exceed 3 retries: not yet")
        );
        assert!(d.outcome.is_final);
        assert!(precheck::<Value>(FN, &p, 2, secs(1)).is_none());
        assert_eq!(
            precheck::<Value>(FN, &p, 3, secs(1)).and_then(|o| o.error),
            Some("Handler 'fn' has exceeded 3 retries.".into())
        );
        let d = decide(
            FN,
            &p,
            2,
            secs(1),
            Attempt::<Value>::Arbitrary {
                message: "x".into(),
            },
        );
        assert_eq!(
            d.outcome.error.as_deref(),
            Some(
                "Handler 'fn' failed with an exception and will stop now (it would exceed 3 retries on the next attempt): x"
            )
        );
    }

    #[test]
    fn timeouts_with_look_ahead() {
        let p = RetryPolicy {
            timeout: Some(30.0),
            ..RetryPolicy::default()
        };
        let d = decide(FN, &p, 0, secs(10), temp(20.0));
        assert_eq!(
            d.outcome.error.as_deref(),
            Some("Handler 'fn' failed temporarily but will time out after 30 seconds: not yet")
        );
        assert!(!decide(FN, &p, 0, secs(10), temp(5.0)).outcome.is_final);
        let d = decide(FN, &p, 0, secs(10), boom());
        assert!(
            d.outcome.is_final,
            "the 60 s backoff would exceed the timeout"
        );
        assert_eq!(
            precheck::<Value>(FN, &p, 1, TimeDelta::milliseconds(30_500)).and_then(|o| o.error),
            Some("Handler 'fn' has timed out after 0:00:30.500000.".into())
        );
    }

    #[test]
    fn retry_delays_are_never_shorter_than_the_hosts_minimum() {
        let p = RetryPolicy {
            min_delay: 1.0,
            backoff: Some(0.0),
            ..RetryPolicy::default()
        };
        assert_eq!(
            decide(FN, &p, 0, secs(1), temp(0.0)).outcome.delay,
            Some(1.0)
        );
        assert_eq!(
            decide(FN, &p, 0, secs(1), temp(5.0)).outcome.delay,
            Some(5.0)
        );
        let none = Attempt::<Value>::Temporary {
            message: "now".into(),
            delay: None,
        };
        assert_eq!(decide(FN, &p, 0, secs(1), none).outcome.delay, Some(1.0));
        let d = decide(FN, &p, 0, secs(1), boom());
        assert_eq!(d.outcome.delay, Some(1.0));
        assert_eq!(
            d.line,
            "Handler 'fn' failed with an exception and will try again in 1 seconds: boom"
        );
    }

    #[test]
    fn names_and_delays_are_kopfs() {
        assert_eq!(display_name(HandlerKind::Create, "fn"), "Handler 'fn'");
        assert_eq!(display_name(HandlerKind::Timer, "t"), "Timer 't'");
        assert_eq!(display_name(HandlerKind::Daemon, "d"), "Daemon 'd'");
        assert_eq!(display_name(HandlerKind::Probe, "p"), "Activity 'p'");
        assert_eq!(usable_delay(1.5), 1.5);
        assert_eq!(usable_delay(-1.0), DEFAULT_RETRY_DELAY);
        assert_eq!(usable_delay(f64::NAN), DEFAULT_RETRY_DELAY);
        assert_eq!(usable_delay(f64::INFINITY), DEFAULT_RETRY_DELAY);
        assert_eq!(usable_delay(1e15), LONGEST_DELAY);
    }
}
