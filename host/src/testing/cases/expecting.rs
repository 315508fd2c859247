//! Expectations: each looked at until it holds or its time is up; what the operator did
//! comes from its journal, what it wrote from the cluster, its health from liveness.

use std::time::Duration;

use kube::Client;
use serde_json::Value;

use super::format::{Expectation, Expected, HandlerOutcome, Target};
use super::matching;
use super::objects::{events_about, get};
use crate::Journal;
use crate::handlers::execution;
use crate::health::Liveness;
use crate::journal::Record;
use crate::testing::RunningOperator;

/// How often expectations look again.
const POLL: Duration = Duration::from_millis(20);

/// Why an expectation does not hold, as the report explains it.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unmet {
    /// It can never hold any more.
    #[error("{0}")]
    Broken(String),
    /// It did not hold within its time: why not, at the last look.
    #[error("not so after {} s:\n{why}", within.as_secs_f64())]
    NotWithin { within: Duration, why: String },
}

/// Polls until the expectation holds or its time is up.
pub(super) async fn expect(
    client: &Client,
    running: &RunningOperator,
    liveness: &Liveness,
    expectation: &Expectation,
) -> Result<(), Unmet> {
    let deadline = tokio::time::Instant::now() + expectation.within;
    let journal = running.journal();
    loop {
        let check = check(client, running, liveness, journal, &expectation.what).await;
        let last_chance = tokio::time::Instant::now() >= deadline;
        match check {
            Check::Holds => return Ok(()),
            Check::Broken(why) => return Err(Unmet::Broken(why)),
            Check::NotYet(why) if last_chance => {
                return Err(Unmet::NotWithin {
                    within: expectation.within,
                    why,
                });
            }
            _ => tokio::time::sleep(POLL).await,
        }
    }
}

/// One look at an expectation.
enum Check {
    Holds,
    /// Not yet: why not, for the report if time runs out.
    NotYet(String),
    /// Can never hold any more (a handler called too often, the operator gone).
    Broken(String),
}

/// One look at what is expected, by its subject.
async fn check(
    client: &Client,
    running: &RunningOperator,
    liveness: &Liveness,
    journal: &Journal,
    what: &Expected,
) -> Check {
    match what {
        Expected::Object { target, matches } => object_matches(client, target, matches).await,
        Expected::Gone(target) => gone(client, target).await,
        Expected::Event {
            about,
            event_type,
            reason,
            message,
        } => {
            event_seen(
                client,
                about,
                event_type.as_deref(),
                reason.as_deref(),
                message.as_deref(),
            )
            .await
        }
        Expected::Called { handler, times } => called(journal, handler, *times),
        Expected::NotCalled(handler) => match calls_of(journal, handler) {
            0 => Check::Holds,
            calls => Check::Broken(format!("{handler} was called {calls} times")),
        },
        Expected::Log { text, handler } => logged(journal, text, handler.as_deref()),
        Expected::Outcome {
            handler,
            outcome,
            times,
        } => ended(journal, handler, *outcome, *times),
        Expected::Healthy(healthy) => health(running, liveness, *healthy).await,
    }
}

/// `object` with `matches`: the object exists and contains the partial document.
async fn object_matches(client: &Client, target: &Target, matches: &Value) -> Check {
    match get(client, target).await {
        Err(e) => Check::NotYet(e.to_string()),
        Ok(None) => Check::NotYet(format!("  - {target} does not exist\n")),
        Ok(Some(object)) => {
            let found = matching::mismatches(matches, &object);
            if found.is_empty() {
                Check::Holds
            } else {
                Check::NotYet(matching::report(&found))
            }
        }
    }
}

/// `gone`: the object no longer exists.
async fn gone(client: &Client, target: &Target) -> Check {
    match get(client, target).await {
        Err(e) => Check::NotYet(e.to_string()),
        Ok(None) => Check::Holds,
        Ok(Some(object)) => Check::NotYet(format!(
            "  - {target} still exists (finalizers: {})\n",
            object["metadata"]["finalizers"]
        )),
    }
}

/// `event`: an Event about the object with the type and reason given, whose message
/// contains the one given.
async fn event_seen(
    client: &Client,
    about: &Target,
    event_type: Option<&str>,
    reason: Option<&str>,
    message: Option<&str>,
) -> Check {
    match events_about(client, about).await {
        Err(e) => Check::NotYet(e.to_string()),
        Ok(events) => {
            let fits = |e: &Value| {
                let field = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
                event_type.is_none_or(|t| field("type") == t)
                    && reason.is_none_or(|r| field("reason") == r)
                    && message.is_none_or(|m| field("message").contains(m))
            };
            if events.iter().any(fits) {
                Check::Holds
            } else {
                let seen: Vec<String> = events
                    .iter()
                    .map(|e| format!("  - {} {}: {}\n", e["type"], e["reason"], e["message"]))
                    .collect();
                Check::NotYet(if seen.is_empty() {
                    format!("  - no events about {about}\n")
                } else {
                    format!("  events about {about}:\n{}", seen.concat())
                })
            }
        }
    }
}

/// `called`: the handler was called (so many `times`, when given).
fn called(journal: &Journal, handler: &str, times: Option<usize>) -> Check {
    let calls = calls_of(journal, handler);
    match times {
        None if calls > 0 => Check::Holds,
        Some(n) if calls == n => Check::Holds,
        Some(n) if calls > n => {
            Check::Broken(format!("{handler} was called {calls} times, expected {n}"))
        }
        _ => Check::NotYet(format!("  - {handler} was called {calls} times\n")),
    }
}

/// `log`: a line a guest logged, or a handler's result message or error, contains the
/// text (of that handler only, when one is named).
fn logged(journal: &Journal, text: &str, who: Option<&str>) -> Check {
    let about = |handler: &String| who.is_none_or(|w| w == handler);
    let found = journal.records().iter().any(|r| match r {
        Record::GuestLog {
            handler, message, ..
        }
        | Record::HandlerFinished {
            handler, message, ..
        } => about(handler) && message.contains(text),
        Record::HandlerFailed { handler, error, .. } => about(handler) && error.contains(text),
        _ => false,
    });
    if found {
        Check::Holds
    } else {
        Check::NotYet(format!("  - no log line contains {text:?}\n"))
    }
}

/// `outcome`: the handler's attempts ended so (so many `times`, when given).
fn ended(journal: &Journal, handler: &str, outcome: HandlerOutcome, times: Option<usize>) -> Check {
    let ended = outcomes_of(journal, handler, outcome);
    match times {
        None if ended > 0 => Check::Holds,
        Some(n) if ended == n => Check::Holds,
        Some(n) if ended > n => {
            Check::Broken(format!("{handler} {outcome} {ended} times, expected {n}"))
        }
        _ => Check::NotYet(format!("  - {handler} {outcome} {ended} times\n")),
    }
}

/// `healthy`: liveness succeeds (or fails, for `healthy: false`); an operator that has
/// exited can never be either.
async fn health(running: &RunningOperator, liveness: &Liveness, healthy: bool) -> Check {
    if running.is_finished() {
        return Check::Broken("the operator has exited".into());
    }
    match (liveness.check().await, healthy) {
        (Ok(_), true) | (Err(_), false) => Check::Holds,
        (Err(error), true) => Check::NotYet(format!("  - liveness fails: {error}\n")),
        (Ok(results), false) => Check::NotYet(format!(
            "  - liveness succeeds: {}\n",
            Value::Object(results)
        )),
    }
}

/// How many attempts of `handler` ended with `outcome` (a give-up before an attempt is a
/// permanent failure too).
fn outcomes_of(journal: &Journal, handler: &str, outcome: HandlerOutcome) -> usize {
    let verdict = match outcome {
        HandlerOutcome::Succeeded => execution::Verdict::Success,
        HandlerOutcome::FailedTemporarily => execution::Verdict::Retry,
        HandlerOutcome::FailedPermanently => execution::Verdict::Failure,
        HandlerOutcome::Ignored => execution::Verdict::Ignored,
    }
    .as_str();
    journal
        .records()
        .iter()
        .filter(|r| match r {
            Record::HandlerFinished {
                handler: h,
                outcome: ended,
                ..
            } => h == handler && ended == verdict,
            Record::HandlerGaveUp { handler: h, .. } => {
                h == handler && outcome == HandlerOutcome::FailedPermanently
            }
            _ => false,
        })
        .count()
}

fn calls_of(journal: &Journal, handler: &str) -> usize {
    journal
        .records()
        .iter()
        .filter(|r| matches!(r, Record::HandlerCalled { handler: h, .. } if h == handler))
        .count()
}
