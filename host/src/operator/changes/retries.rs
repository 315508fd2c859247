//! Turning one handler attempt into an outcome (KOPF.md §5.1, §5.2), plus the
//! per-object error throttling (§5.4) and the API request retry schedule (§5.5).
//!
//! The rules and messages are Kopf's `execute_handler_once`: `timeout` and `retries`
//! are checked strictly before an attempt, and after a failure a look-ahead makes it
//! final when the next attempt would exceed either limit, so `retries=N` means N
//! attempts in total. The messages end up in the progress records, hence the wording.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::progress::{HandlerState, seconds};
use super::pyjson::{py_repr_str, py_seconds};

/// Kopf's `DEFAULT_RETRY_DELAY` for arbitrary errors and `TemporaryError` without a delay argument.
pub(crate) const DEFAULT_RETRY_DELAY: f64 = 60.0;

/// How arbitrary errors are treated (Kopf's `ErrorsMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ErrorsMode {
    #[default]
    Temporary,
    Permanent,
    Ignored,
}

/// A handler's retry options.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct RetryPolicy {
    pub(crate) errors: ErrorsMode,
    /// Seconds since the first attempt after which the handler fails.
    pub(crate) timeout: Option<f64>,
    /// Total attempts allowed.
    pub(crate) retries: Option<u32>,
    /// Delay after an arbitrary error (default 60 s).
    pub(crate) backoff: Option<f64>,
}

/// What one call of the handler did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Attempt {
    /// Returned; the value goes to `status.<id>` (`Null` = nothing).
    Success(Value),
    /// `TemporaryError(message, delay)`; `delay: None` retries immediately.
    Temporary { message: String, delay: Option<f64> },
    /// `PermanentError(message)`.
    Permanent { message: String },
    /// Any other failure: an error, a trap, a timeout or memory overrun of the guest.
    Arbitrary { message: String },
    /// Sub-handlers are unfinished (Kopf's internal `HandlerChildrenRetry`).
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "sub-handlers are not in the contract yet")
    )]
    ChildrenRetry { delay: Option<f64> },
}

/// The in-memory result of one attempt (Kopf's `Outcome`).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Outcome {
    /// No more attempts for this cause.
    pub(crate) is_final: bool,
    /// Seconds until the next attempt (not final only).
    pub(crate) delay: Option<f64>,
    /// The handler's return value on success.
    pub(crate) result: Option<Value>,
    /// The error text, if it failed (`str(exception)`).
    pub(crate) error: Option<String>,
    pub(crate) subrefs: Vec<String>,
}

fn handler_name(id: &str) -> String {
    format!("Handler {}", py_repr_str(id))
}

/// Python's `str(timedelta)`: `H:MM:SS[.ffffff]`, with `N day(s), ` in front.
fn py_timedelta(delta: chrono::TimeDelta) -> String {
    let micros = delta.num_microseconds().unwrap_or(i64::MAX);
    let (days, rest) = (
        micros.div_euclid(86_400_000_000),
        micros.rem_euclid(86_400_000_000),
    );
    let (secs, frac) = (rest / 1_000_000, rest % 1_000_000);
    let mut out = String::new();
    if days != 0 {
        out.push_str(&format!(
            "{days} day{}, ",
            if days.abs() == 1 { "" } else { "s" }
        ));
    }
    out.push_str(&format!(
        "{}:{:02}:{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    ));
    if frac != 0 {
        out.push_str(&format!(".{frac:06}"));
    }
    out
}

/// The strict checks before an attempt: `Some(final outcome)` if the handler must not run.
pub(crate) fn precheck(
    id: &str,
    policy: &RetryPolicy,
    state: &HandlerState,
    now: DateTime<Utc>,
) -> Option<Outcome> {
    let runtime = state.runtime(now);
    let message = if policy.timeout.is_some_and(|t| seconds(runtime) >= t) {
        format!(
            "{} has timed out after {}.",
            handler_name(id),
            py_timedelta(runtime)
        )
    } else if policy.retries.is_some_and(|r| state.retries >= r) {
        format!(
            "{} has exceeded {} retries.",
            handler_name(id),
            state.retries
        )
    } else {
        return None;
    };
    Some(Outcome {
        is_final: true,
        error: Some(message),
        ..Outcome::default()
    })
}

/// The outcome of an attempt, per the handler's errors mode and limits.
pub(crate) fn outcome(
    id: &str,
    policy: &RetryPolicy,
    state: &HandlerState,
    now: DateTime<Utc>,
    attempt: Attempt,
) -> Outcome {
    let name = handler_name(id);
    let runtime = seconds(state.runtime(now));
    let backoff = policy.backoff.unwrap_or(DEFAULT_RETRY_DELAY);
    let over_timeout = |delay: f64| policy.timeout.is_some_and(|t| runtime + delay >= t);
    let over_retries = policy.retries.is_some_and(|r| state.retries + 1 >= r);
    let fail = |message: String| Outcome {
        is_final: true,
        error: Some(message),
        ..Outcome::default()
    };
    let retry = |message: String, delay: Option<f64>| Outcome {
        is_final: false,
        delay,
        error: Some(message),
        ..Outcome::default()
    };
    match attempt {
        Attempt::Success(result) => Outcome {
            is_final: true,
            result: Some(result),
            ..Outcome::default()
        },
        Attempt::ChildrenRetry { delay } => retry(String::new(), delay),
        Attempt::Temporary { message, delay } => {
            if over_timeout(delay.unwrap_or(0.0)) {
                let timeout = py_seconds(policy.timeout.unwrap_or_default());
                fail(format!(
                    "{name} failed temporarily but will time out after {timeout} seconds: {message}"
                ))
            } else if over_retries {
                let retries = policy.retries.unwrap_or_default();
                fail(format!(
                    "{name} failed temporarily but will exceed {retries} retries: {message}"
                ))
            } else {
                retry(message, delay)
            }
        }
        Attempt::Permanent { message } => fail(message),
        Attempt::Arbitrary { message } => match policy.errors {
            ErrorsMode::Ignored => Outcome {
                is_final: true,
                ..Outcome::default()
            },
            ErrorsMode::Temporary if over_timeout(backoff) => {
                let timeout = py_seconds(policy.timeout.unwrap_or_default());
                fail(format!(
                    "{name} failed with an exception and will stop now \
                     (it would time out in {timeout} seconds on the next attempt): {message}"
                ))
            }
            ErrorsMode::Temporary if over_retries => {
                let retries = policy.retries.unwrap_or_default();
                fail(format!(
                    "{name} failed with an exception and will stop now \
                     (it would exceed {retries} retries on the next attempt): {message}"
                ))
            }
            ErrorsMode::Temporary => retry(message, Some(backoff)),
            ErrorsMode::Permanent => fail(message),
        },
    }
}

/// The log line Kopf writes for an outcome (the integration logs it; also an event text).
pub(crate) fn log_line(
    id: &str,
    policy: &RetryPolicy,
    attempt: &Attempt,
    outcome: &Outcome,
) -> String {
    let name = handler_name(id);
    let err = outcome.error.clone().unwrap_or_default();
    match attempt {
        Attempt::Success(_) => format!("{name} succeeded."),
        Attempt::ChildrenRetry { .. } => {
            format!("{name} has unfinished sub-handlers. Will retry soon.")
        }
        Attempt::Temporary { message, .. } if !outcome.is_final => {
            format!("{name} failed temporarily: {message}")
        }
        Attempt::Temporary { .. } => err,
        Attempt::Permanent { message } => format!("{name} failed permanently: {message}"),
        Attempt::Arbitrary { message } => match policy.errors {
            ErrorsMode::Ignored => {
                format!("{name} failed with an exception and will ignore it: {message}")
            }
            ErrorsMode::Temporary if !outcome.is_final => format!(
                "{name} failed with an exception and will try again in {} seconds: {message}",
                py_seconds(policy.backoff.unwrap_or(DEFAULT_RETRY_DELAY))
            ),
            ErrorsMode::Temporary => err,
            ErrorsMode::Permanent => {
                format!("{name} failed with an exception and will stop now: {message}")
            }
        },
    }
}

/// Kopf's `queueing.error_delays`: 1, 1, 2, 3, 5, … 610 seconds.
pub(crate) const ERROR_DELAYS: [u64; 15] =
    [1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610];

/// Per-object throttling of unexpected errors: each error takes the next delay (the last
/// one repeats); the first success resets it. An empty list disables throttling.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Throttler {
    errors: usize,
}

impl Throttler {
    /// An unexpected error happened: how long to skip this object's events.
    pub(crate) fn on_error(&mut self, delays: &[u64]) -> Option<Duration> {
        let delay = delays.get(self.errors).or(delays.last()).copied()?;
        self.errors += 1;
        Some(Duration::from_secs(delay))
    }

    /// Processing succeeded: start over.
    pub(crate) fn on_success(&mut self) {
        self.errors = 0;
    }
}

/// Kopf's `networking.error_backoffs`: up to 9 attempts of an API request.
pub(crate) const REQUEST_BACKOFFS: [u64; 8] = [1, 1, 2, 3, 5, 8, 13, 21];

/// The pause before retry number `retry` (0-based) of a failed API request, or `None`
/// when the attempts are used up. A 429's `Retry-After` is honoured as a minimum
/// (or always, with `enforce_retry_after`).
pub(crate) fn request_backoff(
    retry: usize,
    retry_after: Option<u64>,
    enforce_retry_after: bool,
) -> Option<Duration> {
    let ours = *REQUEST_BACKOFFS.get(retry)?;
    let secs = match retry_after {
        Some(server) if enforce_retry_after => server,
        Some(server) => server.max(ours),
        None => ours,
    };
    Some(Duration::from_secs(secs))
}

/// Which API failures are retried: connection errors and timeouts (`status: None`),
/// 5xx, 403 (seen during cluster upgrades) and 429.
pub(crate) fn request_is_retried(status: Option<u16>) -> bool {
    match status {
        None => true,
        Some(code) => code >= 500 || code == 403 || code == 429,
    }
}

#[cfg(test)]
mod tests {
    use super::super::progress::{HandlerState, parse_time};
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> DateTime<Utc> {
        parse_time(&format!("2026-11-30T{s}+00:00")).expect("time")
    }

    fn state(retries: u32) -> HandlerState {
        HandlerState {
            retries,
            ..HandlerState::from_scratch(t("03:00:00"), Some("create"))
        }
    }

    #[test]
    fn success_and_plain_failures() {
        let p = RetryPolicy::default();
        let o = outcome(
            "fn",
            &p,
            &state(0),
            t("03:00:01"),
            Attempt::Success(json!({"a": 1})),
        );
        assert!(o.is_final && o.error.is_none() && o.result == Some(json!({"a": 1})));
        let o = outcome(
            "fn",
            &p,
            &state(0),
            t("03:00:01"),
            Attempt::Temporary {
                message: "not yet".into(),
                delay: Some(10.0),
            },
        );
        assert_eq!(
            (o.is_final, o.delay, o.error.as_deref()),
            (false, Some(10.0), Some("not yet"))
        );
        let o = outcome(
            "fn",
            &p,
            &state(0),
            t("03:00:01"),
            Attempt::ChildrenRetry { delay: Some(2.0) },
        );
        assert_eq!((o.is_final, o.delay), (false, Some(2.0)));
        let o = outcome(
            "fn",
            &p,
            &state(0),
            t("03:00:01"),
            Attempt::Permanent {
                message: "no".into(),
            },
        );
        assert_eq!((o.is_final, o.error.as_deref()), (true, Some("no")));
    }

    #[test]
    fn errors_modes() {
        let boom = || Attempt::Arbitrary {
            message: "boom".into(),
        };
        let now = t("03:00:01");
        let o = outcome("fn", &RetryPolicy::default(), &state(0), now, boom());
        assert_eq!((o.is_final, o.delay), (false, Some(60.0)));
        let p = RetryPolicy {
            backoff: Some(5.0),
            ..RetryPolicy::default()
        };
        assert_eq!(outcome("fn", &p, &state(0), now, boom()).delay, Some(5.0));
        assert_eq!(
            log_line(
                "fn",
                &p,
                &boom(),
                &outcome("fn", &p, &state(0), now, boom())
            ),
            "Handler 'fn' failed with an exception and will try again in 5 seconds: boom"
        );
        let p = RetryPolicy {
            errors: ErrorsMode::Permanent,
            ..RetryPolicy::default()
        };
        assert_eq!(
            outcome("fn", &p, &state(0), now, boom()).error.as_deref(),
            Some("boom")
        );
        let p = RetryPolicy {
            errors: ErrorsMode::Ignored,
            ..RetryPolicy::default()
        };
        let o = outcome("fn", &p, &state(0), now, boom());
        assert!(
            o.is_final && o.error.is_none() && o.result.is_none(),
            "ignored = success without result"
        );
    }

    #[test]
    fn retries_mean_total_attempts() {
        let p = RetryPolicy {
            retries: Some(3),
            ..RetryPolicy::default()
        };
        let temp = || Attempt::Temporary {
            message: "not yet".into(),
            delay: Some(1.0),
        };
        let now = t("03:00:01");
        assert!(!outcome("fn", &p, &state(0), now, temp()).is_final);
        assert!(!outcome("fn", &p, &state(1), now, temp()).is_final);
        let o = outcome("fn", &p, &state(2), now, temp());
        assert_eq!(
            o.error.as_deref(),
            Some("Handler 'fn' failed temporarily but will exceed 3 retries: not yet")
        );
        assert!(o.is_final);
        assert!(precheck("fn", &p, &state(2), now).is_none());
        assert_eq!(
            precheck("fn", &p, &state(3), now).and_then(|o| o.error),
            Some("Handler 'fn' has exceeded 3 retries.".into())
        );
        let o = outcome(
            "fn",
            &p,
            &state(2),
            now,
            Attempt::Arbitrary {
                message: "x".into(),
            },
        );
        assert_eq!(
            o.error.as_deref(),
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
        let o = outcome(
            "fn",
            &p,
            &state(0),
            t("03:00:10"),
            Attempt::Temporary {
                message: "x".into(),
                delay: Some(20.0),
            },
        );
        assert_eq!(
            o.error.as_deref(),
            Some("Handler 'fn' failed temporarily but will time out after 30 seconds: x")
        );
        let o = outcome(
            "fn",
            &p,
            &state(0),
            t("03:00:10"),
            Attempt::Temporary {
                message: "x".into(),
                delay: Some(5.0),
            },
        );
        assert!(!o.is_final);
        let o = outcome(
            "fn",
            &p,
            &state(0),
            t("03:00:10"),
            Attempt::Arbitrary {
                message: "x".into(),
            },
        );
        assert!(o.is_final, "the 60 s backoff would exceed the timeout");
        assert_eq!(
            precheck("fn", &p, &state(1), t("03:00:30.5")).and_then(|o| o.error),
            Some("Handler 'fn' has timed out after 0:00:30.500000.".into())
        );
        assert_eq!(
            py_timedelta(chrono::TimeDelta::seconds(90_061)),
            "1 day, 1:01:01"
        );
    }

    #[test]
    fn throttling_and_request_backoffs() {
        let mut th = Throttler::default();
        let got: Vec<u64> = (0..17)
            .filter_map(|_| th.on_error(&ERROR_DELAYS))
            .map(|d| d.as_secs())
            .collect();
        assert_eq!(&got[..5], &[1, 1, 2, 3, 5]);
        assert_eq!(&got[14..], &[610, 610, 610], "the last delay repeats");
        th.on_success();
        assert_eq!(th.on_error(&ERROR_DELAYS), Some(Duration::from_secs(1)));
        assert_eq!(th.on_error(&[]), None, "an empty list disables throttling");
        assert_eq!(
            request_backoff(0, None, false),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            request_backoff(7, None, false),
            Some(Duration::from_secs(21))
        );
        assert_eq!(request_backoff(8, None, false), None, "9 attempts in total");
        assert_eq!(
            request_backoff(2, Some(10), false),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            request_backoff(5, Some(1), false),
            Some(Duration::from_secs(8))
        );
        assert_eq!(
            request_backoff(5, Some(1), true),
            Some(Duration::from_secs(1))
        );
        assert!(
            request_is_retried(None)
                && request_is_retried(Some(503))
                && request_is_retried(Some(429))
        );
        assert!(!request_is_retried(Some(404)) && !request_is_retried(Some(422)));
    }
}
