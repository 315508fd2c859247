//! Sub-handlers in native tests: the progress the fake host keeps for each, across calls
//! (public face of the fake host's records).

use super::{Outcome, outcome_from_raw};
use crate::host::fake::subhandlers::{self as fake, State};

/// A sub-handler's progress as the fake host keeps it across calls (Kopf's progress
/// record, `status.kopf.progress.<full id>`).
#[derive(Debug, Clone, PartialEq)]
pub struct SubhandlerProgress {
    /// The full id (`create_fn/item-a`).
    pub id: String,
    /// Its attempts so far (Kopf's `retries`: every outcome counts, also a success).
    pub retries: u32,
    /// How each attempt ended, in order; the result of a successful one is what the
    /// host stores in `status.<full id>`.
    pub outcomes: Vec<Outcome>,
    /// Where it stands.
    pub state: SubhandlerState,
}

/// Where a sub-handler stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubhandlerState {
    /// Not finished: due again at the parent's next call (after its delay, on the
    /// real host).
    Pending,
    /// Finished successfully (an `errors = ignored` failure included).
    Succeeded,
    /// Finished with a failure, for this reason (a permanent error, retries or time
    /// exhausted).
    Failed(String),
}

/// Every sub-handler declared on this thread so far, in the order first declared, with
/// its progress.
pub fn subhandlers() -> Vec<SubhandlerProgress> {
    fake::records()
        .into_iter()
        .map(|record| SubhandlerProgress {
            id: record.id,
            retries: record.retries,
            outcomes: record.outcomes.into_iter().map(outcome_from_raw).collect(),
            state: match record.state {
                State::Pending => SubhandlerState::Pending,
                State::Succeeded => SubhandlerState::Succeeded,
                State::Failed(reason) => SubhandlerState::Failed(reason),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    // Sub-handlers through the SDK's own API and `testing::invoke`, as a guest's native
    // test drives them: here, above both the SDK's sub-handlers and the fake host.
    use std::cell::Cell;

    use serde_json::{Value, json};

    use super::*;
    use crate::testing::{self, Level};
    use crate::{Cause, ErrorKind, ErrorsMode, Reason, TemporaryError};

    fn call(id: &str, reason: Reason) -> Cause {
        testing::cause().handler_id(id).changing(reason).build()
    }

    fn progress(id: &str) -> SubhandlerProgress {
        let all = subhandlers();
        let found = all.iter().find(|p| p.id == id);
        found
            .cloned()
            .unwrap_or_else(|| panic!("no {id} in {all:?}"))
    }

    #[crate::on::create("kopfexamples")]
    fn implicit(_cause: &mut Cause) -> &'static str {
        for item in ["a", "b"] {
            crate::subhandler(format!("item-{item}"))
                .retries(3)
                .register(move |cause: &mut Cause| -> crate::Result<Value> {
                    let id = cause.handler_id().to_owned();
                    cause.patch.set_at(&["status", "items", item], id);
                    Ok(json!({"item": item, "retry": cause.retry()}))
                });
        }
        "parent"
    }

    #[test]
    fn declared_sub_handlers_run_after_the_parent_with_its_cause_as_theirs() {
        testing::reset();
        let mut cause = testing::cause()
            .handler_id("implicit")
            .changing(Reason::Create)
            .retry(7)
            .build();
        let reply = testing::invoke(&mut cause);
        assert_eq!(reply.outcome, Outcome::Done(Some(json!("parent"))));
        assert_eq!(
            reply.patch,
            Some(json!({"status": {"items": {"a": "implicit/item-a", "b": "implicit/item-b"}}}))
        );
        assert_eq!((cause.handler_id(), cause.retry()), ("implicit", 7));
        let a = progress("implicit/item-a");
        assert_eq!((a.retries, &a.state), (1, &SubhandlerState::Succeeded));
        assert_eq!(
            a.outcomes,
            [Outcome::Done(Some(json!({"item": "a", "retry": 0})))]
        );
        assert_eq!(subhandlers().len(), 2);
    }

    thread_local! {
        static FLAKY_CALLS: Cell<u32> = const { Cell::new(0) };
    }

    #[crate::on::update("kopfexamples")]
    fn explicit(cause: &mut Cause) -> crate::Result<&'static str> {
        crate::register("flaky", |cause: &mut Cause| -> crate::Result<()> {
            FLAKY_CALLS.set(FLAKY_CALLS.get() + 1);
            if cause.retry() < 2 {
                return Err(TemporaryError::new("not yet").with_delay(3.0).into());
            }
            Ok(())
        });
        crate::execute(cause)?;
        cause.patch.set_at(&["status", "after"], true);
        Ok("done")
    }

    #[test]
    fn the_parent_goes_on_after_execute_once_its_sub_handlers_are_finished() {
        testing::reset();
        for cycle in 1..=2 {
            let reply = testing::invoke(&mut call("explicit", Reason::Update));
            // Unfinished children: a quiet done without the result, and nothing after
            // `execute`; executed once per call, not again after the parent returned.
            assert_eq!((reply.outcome, reply.patch), (Outcome::Done(None), None));
            assert_eq!(FLAKY_CALLS.get(), cycle);
        }
        let reply = testing::invoke(&mut call("explicit", Reason::Update));
        assert_eq!(reply.outcome, Outcome::Done(Some(json!("done"))));
        assert_eq!(reply.patch, Some(json!({"status": {"after": true}})));
        let flaky = progress("explicit/flaky");
        assert_eq!(
            (flaky.retries, flaky.state),
            (3, SubhandlerState::Succeeded)
        );
        assert_eq!(flaky.outcomes[0], Outcome::Temporary("not yet".into(), 3.0));
        // Finished in an earlier call: not called again, and the parent is done.
        let reply = testing::invoke(&mut call("explicit", Reason::Update));
        assert_eq!(reply.outcome, Outcome::Done(Some(json!("done"))));
        assert_eq!(FLAKY_CALLS.get(), 3);
    }

    #[test]
    fn execute_fails_as_a_temporary_error_until_the_sub_handlers_are_finished() {
        testing::reset();
        // Called directly, not through `invoke`: the parent is the cause's handler.
        let error = explicit(&mut call("explicit", Reason::Update)).unwrap_err();
        assert_eq!(
            (error.kind(), error.delay()),
            (ErrorKind::Temporary, Some(3.0))
        );
        assert_eq!(progress("explicit/flaky").state, SubhandlerState::Pending);
        // Each direct call is a call of its own: the sub-handler is declared and run again.
        assert!(explicit(&mut call("explicit", Reason::Update)).is_err());
        assert_eq!(explicit(&mut call("explicit", Reason::Update)), Ok("done"));
    }

    #[crate::on::create("kopfexamples")]
    fn failing(_cause: &mut Cause) -> crate::Result<()> {
        crate::register("never", |_: &mut Cause| -> crate::Result<()> {
            panic!("a sub-handler of a failed parent ran")
        });
        Err(TemporaryError::new("parent failed").with_delay(1.0).into())
    }

    #[test]
    fn a_failing_parent_runs_no_sub_handlers() {
        testing::reset();
        let reply = testing::invoke(&mut call("failing", Reason::Create));
        assert_eq!(
            reply.outcome,
            Outcome::Temporary("parent failed".into(), 1.0)
        );
        assert!(subhandlers().is_empty());
        // Dropped with the call: the next one starts with none declared.
        assert_eq!(
            testing::invoke(&mut call("implicit", Reason::Create)).outcome,
            Outcome::Done(Some(json!("parent")))
        );
        assert_eq!(subhandlers().len(), 2);
    }

    #[crate::on::resume("kopfexamples")]
    fn nesting(_cause: &mut Cause) {
        crate::register("sub", |_: &mut Cause| -> crate::Result<()> {
            crate::subhandler("subsub").backoff(2.0).register(
                |cause: &mut Cause| -> crate::Result<String> {
                    if cause.retry() == 0 {
                        return Err(crate::Error::msg("an arbitrary error"));
                    }
                    Ok(cause.handler_id().to_owned())
                },
            );
            Ok(())
        });
    }

    #[test]
    fn sub_handlers_nest_and_wait_for_their_own() {
        testing::reset();
        let reply = testing::invoke(&mut call("nesting", Reason::Resume));
        assert_eq!(reply.outcome, Outcome::Done(None));
        let ids: Vec<String> = subhandlers().into_iter().map(|p| p.id).collect();
        assert_eq!(ids, ["nesting/sub", "nesting/sub/subsub"]);
        // The sub-handler returned, its own child did not finish: it is retried too.
        let sub = progress("nesting/sub");
        assert_eq!((sub.retries, sub.state), (1, SubhandlerState::Pending));
        testing::invoke(&mut call("nesting", Reason::Resume));
        let subsub = progress("nesting/sub/subsub");
        assert_eq!(
            subsub.outcomes,
            [
                Outcome::Failed("an arbitrary error".into()),
                Outcome::Done(Some(json!("nesting/sub/subsub")))
            ]
        );
        assert_eq!(progress("nesting/sub").state, SubhandlerState::Succeeded);
    }

    #[crate::on::event("configmaps")]
    fn misuse(cause: &mut Cause) -> String {
        crate::register("x", |_: &mut Cause| -> crate::Result<()> { Ok(()) });
        let error = crate::execute(cause).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Arbitrary);
        error.to_string()
    }

    #[crate::on::timer("configmaps", interval = 1)]
    fn forgetful(_cause: &mut Cause) {
        crate::register("x", |_: &mut Cause| -> crate::Result<()> { Ok(()) });
    }

    #[test]
    fn only_changing_handlers_have_sub_handlers() {
        testing::reset();
        let mut event = testing::cause().handler_id("misuse").build();
        assert_eq!(
            testing::invoke(&mut event).outcome,
            Outcome::Done(Some(json!(
                "sub-handlers are only for changing handlers (create, update, delete, \
                 resume, field), not for `misuse` (event)"
            )))
        );
        let mut timer = testing::cause()
            .handler_id("forgetful")
            .kind(crate::HandlerKind::Timer)
            .build();
        let Outcome::Failed(message) = testing::invoke(&mut timer).outcome else {
            panic!("a timer's sub-handler did not fail it");
        };
        assert!(message.contains("not for `forgetful` (timer)"), "{message}");
        assert!(subhandlers().is_empty());
    }

    #[crate::on::field("kopfexamples", field = "spec.x")]
    fn twice(cause: &mut Cause) -> String {
        crate::register("same", |_: &mut Cause| -> crate::Result<()> { Ok(()) });
        crate::subhandler("same")
            .errors(ErrorsMode::Ignored)
            .register(|_: &mut Cause| -> crate::Result<()> { Ok(()) });
        crate::execute(cause).unwrap_err().to_string()
    }

    #[test]
    fn the_hosts_refusal_is_an_arbitrary_error() {
        testing::reset();
        let mut cause = testing::cause()
            .handler_id("twice/spec.x")
            .changing(Reason::Update)
            .kind(crate::HandlerKind::Field)
            .build();
        assert_eq!(
            testing::invoke(&mut cause).outcome,
            Outcome::Done(Some(json!(
                "`twice/spec.x` declares the sub-handler `same` twice"
            )))
        );
    }

    #[crate::on::delete("kopfexamples")]
    fn late(cause: &mut Cause) -> crate::Result<()> {
        crate::execute(cause)?;
        crate::register("late", |_: &mut Cause| -> crate::Result<()> {
            panic!("a sub-handler declared after execute ran")
        });
        crate::execute(cause)
    }

    #[test]
    fn sub_handlers_declared_after_execute_do_not_run() {
        testing::reset();
        let reply = testing::invoke(&mut call("late", Reason::Delete));
        assert_eq!(reply.outcome, Outcome::Done(None));
        let warning = &testing::logs()[0];
        assert_eq!(warning.level, Level::Warning);
        assert!(warning.message.contains("`late` is declared after"));
        assert!(subhandlers().is_empty());
    }
}
