//! Sub-handlers (Kopf's `@kopf.subhandler`, `kopf.register` and `kopf.execute`, KOPF.md
//! §1.8): the closures a changing handler declares during its call, kept on this thread
//! for that call only; and their execution, in which the host says which of them run now,
//! the SDK calls them with the parent's cause, and reports to the host how each ended.
//!
//! One frame per handler or sub-handler being called holds what it declared: a stack, as
//! a sub-handler may declare sub-handlers of its own (`parent/sub/subsub`).

use std::cell::{Cell, RefCell};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::error::ErrorsMode;
use crate::host::{self, Declaration, Due};
use crate::outcome::{Outcome, error_outcome, result_outcome};
use crate::{Cause, Error, HandlerKind, Result};

/// A sub-handler being declared (Kopf's `@kopf.subhandler(id=...)`): its options, then
/// [`register`](Self::register) with its function. See the crate documentation's
/// "Sub-handlers".
///
/// ```
/// #[kapsel::on::create("kopfexamples")]
/// fn create_volume(cause: &mut kapsel::Cause) {
///     // Kopf: @kopf.subhandler(id='volume', retries=3, backoff=5, errors=kopf.ErrorsMode.PERMANENT)
///     kapsel::subhandler("volume")
///         .retries(3)
///         .backoff(5.0)
///         .timeout(600.0)
///         .errors(kapsel::ErrorsMode::Permanent)
///         .register(|cause: &mut kapsel::Cause| -> kapsel::Result<()> {
///             cause.patch.set_at(&["status", "volume"], "ready");
///             Ok(())
///         });
/// }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a sub-handler is declared only by its `.register(f)`"]
pub struct Subhandler {
    declaration: Declaration,
}

/// Starts declaring the sub-handler `id` of the handler being called; its full id, and
/// the key of its result in `status`, is `<parent id>/<id>`.
pub fn subhandler(id: impl Into<String>) -> Subhandler {
    Subhandler {
        declaration: Declaration {
            id: id.into(),
            errors: None,
            timeout_seconds: None,
            retries: None,
            backoff_seconds: None,
        },
    }
}

impl Subhandler {
    /// How its arbitrary errors are treated (default: temporary).
    pub fn errors(mut self, mode: ErrorsMode) -> Self {
        self.declaration.errors = Some(mode);
        self
    }

    /// Fails for good once this many seconds passed since its first attempt.
    pub fn timeout(mut self, seconds: f64) -> Self {
        self.declaration.timeout_seconds = Some(seconds);
        self
    }

    /// Fails for good after this many attempts.
    pub fn retries(mut self, retries: u32) -> Self {
        self.declaration.retries = Some(retries);
        self
    }

    /// Seconds before retrying after an arbitrary error (the host's default backoff
    /// otherwise).
    pub fn backoff(mut self, seconds: f64) -> Self {
        self.declaration.backoff_seconds = Some(seconds);
        self
    }

    /// Declares it, with the function to call (Kopf's decorated function). It returns as
    /// a handler does: a result for `status.<full id>` (`null`: none), a
    /// [`TemporaryError`](crate::TemporaryError), a [`PermanentError`](crate::PermanentError)
    /// or another error (per [`errors`](Self::errors)).
    ///
    /// It is called with the parent's [`Cause`] (the same patch and memo), whose
    /// [`handler_id`](Cause::handler_id), [`retry`](Cause::retry),
    /// [`started`](Cause::started) and [`runtime`](Cause::runtime) are the
    /// sub-handler's while it runs. It runs when the parent calls [`execute`], or after the
    /// parent returns successfully, and only if the host says it is due; else it is
    /// dropped at the end of the call, and the host calls the parent again later to
    /// declare it again.
    ///
    /// Only changing handlers (create, update, delete, resume, field) have sub-handlers:
    /// declared in any other, [`execute`] fails, and so does the handler that returns
    /// successfully without calling it. Declared after the parent's `execute`, it never
    /// runs (as in Kopf); the SDK logs a warning.
    pub fn register<F, T, E>(self, f: F)
    where
        F: FnOnce(&mut Cause) -> Result<T, E> + 'static,
        T: Serialize,
        E: Into<Error>,
    {
        declare(Declared {
            declaration: self.declaration,
            call: Box::new(move |cause: &mut Cause| result_outcome(f(cause))),
        });
    }
}

/// Declares the sub-handler `id` with the function `f` and no options (Kopf's
/// `kopf.register(fn, id=...)`): [`subhandler(id).register(f)`](Subhandler::register).
pub fn register<F, T, E>(id: impl Into<String>, f: F)
where
    F: FnOnce(&mut Cause) -> Result<T, E> + 'static,
    T: Serialize,
    E: Into<Error>,
{
    subhandler(id).register(f);
}

/// Runs the sub-handlers the current handler declared so far, now, as far as the host
/// says they are due (Kopf's `kopf.execute()`); the code after it runs once they are all
/// finished.
///
/// ```
/// #[kapsel::on::update("kopfexamples")]
/// fn update_scale(cause: &mut kapsel::Cause) -> kapsel::Result<&'static str> {
///     kapsel::register("scale", |cause: &mut kapsel::Cause| -> kapsel::Result<()> {
///         cause.patch.set_at(&["status", "scaled"], true);
///         Ok(())
///     });
///     kapsel::execute(cause)?;
///     // Reached once `update_scale/scale` is finished (in this call or an earlier one).
///     Ok("all scaled")
/// }
/// ```
///
/// Only the first call per handler call executes; a later one only tells where the
/// sub-handlers stand. A handler that declared sub-handlers and returns successfully
/// without calling it has them executed after it returns (and its result is kept only
/// if they are all finished).
///
/// # Errors
/// - The sub-handlers are not all finished (also those finished in earlier calls count):
///   an error to return with `?` (Kopf's `HandlerChildrenRetry`), whose
///   [`kind`](Error::kind) is [`Temporary`](crate::ErrorKind::Temporary) and
///   [`delay`](Error::delay) the seconds until the next one is due. The host then calls
///   the handler again, quietly: not counted or logged as a failure.
/// - The handler is not a changing handler, or the host refuses the declarations (an
///   empty or a duplicate id): an arbitrary error with the reason.
pub fn execute(cause: &mut Cause) -> Result<()> {
    arm();
    // Taken first: refused, they are not executed again after the handler returns.
    let taken = take_declarations(cause);
    refuse_unless_changing(cause)?;
    let (parent, declared) = match taken {
        Declarations::First(parent, declared) => (parent, declared),
        Declarations::Again(parent) => return children_finished(&parent),
    };
    let (declarations, calls): (Vec<Declaration>, Vec<Call>) = declared
        .into_iter()
        .map(|d| (d.declaration, d.call))
        .unzip();
    let due = host::execute_subhandlers(&parent, &declarations).map_err(Error::msg)?;
    let mut calls: Vec<(String, Call)> = declarations
        .iter()
        .map(|d| format!("{parent}/{}", d.id))
        .zip(calls)
        .collect();
    for due in due {
        let outcome = match calls.iter().position(|(id, _)| *id == due.id) {
            Some(at) => call_due(cause, &due, calls.swap_remove(at).1),
            None => Outcome::Permanent(format!("no sub-handler `{}` is declared", due.id)),
        };
        host::subhandler_finished(&due.id, &outcome.into_host());
    }
    children_finished(&parent)
}

/// Calls the handler a host's `invoke` names, and then the sub-handlers it declared and
/// did not execute, if any.
pub(crate) fn call_handler(cause: &mut Cause, handler: fn(&mut Cause) -> Outcome) -> Outcome {
    // Natively a thread outlives calls: a new call starts with nothing of the last one.
    // A component gets a fresh instance for every call, its statics as built.
    #[cfg(not(target_arch = "wasm32"))]
    reset();
    INVOKING.set(true);
    let outcome = handler(cause);
    let outcome = match AFTER_HANDLER.get() {
        Some(after) => after(cause, outcome),
        None => outcome,
    };
    INVOKING.set(false);
    outcome
}

/// Forgets the sub-handlers declared on this thread (`kapsel::testing::reset`).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn reset() {
    let earlier = STACK.with_borrow_mut(std::mem::take);
    // Dropped outside the borrow: a closure's captures may run code of the guest's.
    drop(earlier);
    INVOKING.set(false);
    AFTER_HANDLER.set(None);
}

/// A declared sub-handler's function, its return value as an outcome.
type Call = Box<dyn FnOnce(&mut Cause) -> Outcome>;

struct Declared {
    declaration: Declaration,
    call: Call,
}

/// What one handler or sub-handler call declared.
struct Frame {
    /// The full id of the sub-handler being called; `None` for the handler itself, named
    /// by its cause at [`execute`] (its frame is made at its first declaration).
    parent: Option<String>,
    declared: Vec<Declared>,
    /// [`execute`] ran for this call (explicitly, or implicitly after it).
    executed: bool,
}

/// See `AFTER_HANDLER`.
type AfterHandler = fn(&mut Cause, Outcome) -> Outcome;

thread_local! {
    static STACK: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
    /// In a host's `invoke`, rather than in a handler a native test calls directly.
    static INVOKING: Cell<bool> = const { Cell::new(false) };
    /// What [`call_handler`] does after the handler returns: set by the call's first
    /// declaration or [`execute`], so that the code of sub-handlers is only in guests
    /// that use them (they made the smallest guest, examples/minimal, a fifth larger).
    static AFTER_HANDLER: Cell<Option<AfterHandler>> = const { Cell::new(None) };
}

fn arm() {
    AFTER_HANDLER.set(Some(finish_frame));
}

/// The handler's own frame, made at its first declaration or [`execute`].
fn handlers_frame(executed: bool) -> Frame {
    Frame {
        parent: None,
        declared: Vec::new(),
        executed,
    }
}

fn declare(declared: Declared) {
    arm();
    let late = STACK.with_borrow_mut(|stack| {
        if stack.is_empty() {
            stack.push(handlers_frame(false));
        }
        let frame = stack.last_mut()?;
        if frame.executed {
            return Some(declared);
        }
        frame.declared.push(declared);
        None
    });
    if let Some(late) = late {
        crate::log::log(
            crate::log::Level::Warning,
            &format!(
                "the sub-handler `{}` is declared after `kapsel::execute`: it does not run",
                late.declaration.id
            ),
        );
    }
}

/// What [`execute`] works on.
enum Declarations {
    /// The parent's full id and what it declared.
    First(String, Vec<Declared>),
    /// This call executed its sub-handlers already.
    Again(String),
}

fn take_declarations(cause: &Cause) -> Declarations {
    let invoking = INVOKING.get();
    STACK.with_borrow_mut(|stack| {
        let Some(frame) = stack.last_mut() else {
            if invoking {
                stack.push(handlers_frame(true));
            }
            return Declarations::First(cause.handler_id.clone(), Vec::new());
        };
        let parent = frame.parent.clone();
        let parent = parent.unwrap_or_else(|| cause.handler_id.clone());
        if frame.parent.is_none() && !invoking {
            // A handler a test calls directly: its frame goes, so that its next direct
            // call (the test's next cycle) starts afresh.
            let declared = stack.pop().map(|f| f.declared).unwrap_or_default();
            return Declarations::First(parent, declared);
        }
        if frame.executed {
            return Declarations::Again(parent);
        }
        frame.executed = true;
        Declarations::First(parent, std::mem::take(&mut frame.declared))
    })
}

/// Kopf refuses sub-handlers outside changing handlers: they have no retries or
/// progress to keep.
fn refuse_unless_changing(cause: &Cause) -> Result<()> {
    match cause.kind {
        HandlerKind::Create
        | HandlerKind::Update
        | HandlerKind::Delete
        | HandlerKind::Resume
        | HandlerKind::Field => Ok(()),
        kind => Err(Error::msg(format!(
            "sub-handlers are only for changing handlers (create, update, delete, resume, \
             field), not for `{}` ({})",
            cause.handler_id,
            // ASCII: Unicode's case tables would add kilobytes to the guest.
            format!("{kind:?}").to_ascii_lowercase()
        ))),
    }
}

/// `Ok` when every sub-handler of `parent` is finished, else the error that retries it.
fn children_finished(parent: &str) -> Result<()> {
    match host::subhandlers_pending(parent) {
        None => Ok(()),
        Some(delay) => Err(Error::children_retry(delay)),
    }
}

/// Calls a sub-handler with a frame for what it declares.
fn called(cause: &mut Cause, subhandler: Call) -> Outcome {
    STACK.with_borrow_mut(|stack| {
        stack.push(Frame {
            parent: Some(cause.handler_id.clone()),
            declared: Vec::new(),
            executed: false,
        });
    });
    let outcome = subhandler(cause);
    finish_frame(cause, outcome)
}

/// After a handler or sub-handler returned: executes what it declared if it returned
/// successfully and did not (Kopf's `subhandling_context`); what it declared and did not
/// execute goes with its frame.
fn finish_frame(cause: &mut Cause, mut outcome: Outcome) -> Outcome {
    let unexecuted = STACK.with_borrow(|stack| {
        stack
            .last()
            .is_some_and(|frame| !frame.executed && !frame.declared.is_empty())
    });
    if matches!(outcome, Outcome::Done(_))
        && unexecuted
        && let Err(error) = execute(cause)
    {
        outcome = error_outcome(error);
    }
    let frame = STACK.with_borrow_mut(Vec::pop);
    drop(frame);
    outcome
}

/// Calls a due sub-handler with the parent's cause, as the sub-handler's for the time of
/// the call.
fn call_due(cause: &mut Cause, due: &Due, call: Call) -> Outcome {
    let Some(started) = crate::time::parse_rfc3339(&due.started) else {
        return Outcome::Permanent(format!(
            "the host sent an invalid start time: `{}`",
            due.started
        ));
    };
    let parents = Identity {
        handler_id: due.id.clone(),
        retry: due.retry,
        started: (due.started.clone(), started),
        runtime: Duration::try_from_secs_f64(due.runtime_seconds).unwrap_or_default(),
    }
    .swap_into(cause);
    let outcome = called(cause, call);
    parents.swap_into(cause);
    outcome
}

/// Whom a cause is about: the handler or sub-handler, and where it stands in its retries.
struct Identity {
    handler_id: String,
    retry: u32,
    started: (String, SystemTime),
    runtime: Duration,
}

impl Identity {
    /// Gives the cause this identity; returns the one it had.
    fn swap_into(mut self, cause: &mut Cause) -> Self {
        std::mem::swap(&mut self.handler_id, &mut cause.handler_id);
        std::mem::swap(&mut self.retry, &mut cause.retry);
        std::mem::swap(&mut self.started, &mut cause.started);
        std::mem::swap(&mut self.runtime, &mut cause.runtime);
        self
    }
}
