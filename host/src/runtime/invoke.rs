//! One guest call: a fresh `Store` from the guest's `InstancePre`, bounded by a wall-clock
//! deadline and a memory cap, with the outcome mapped to a [`CallError`] that reads well in
//! logs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::{Store, Trap, UpdateDeadline};

use super::bindings::{
    AdmissionDeclaration, AdmissionRequest, Cause, DescribeOutput, GuestWorldPre, IndexOutcome,
    Reply, SpawningOptions,
};
use super::deadline::Deadline;
use super::engine::{Runtime, mib_to_bytes};
use super::guest::Guest;
use super::services::{CallContext, Caller, GUEST_LOG_TARGET};
use super::state::{AdmissionCall, Admitted, HostState};
use super::turns::CallTurns;
use crate::limits::Limits;

/// How long past its deadline a call may take before the host drops it. The epoch stops a
/// computing guest at its deadline; this catches a guest parked in a host call that never
/// returns (a hung Kubernetes request).
const HOST_CALL_GRACE: Duration = Duration::from_millis(500);

/// Stderr quoted in a [`CallError::Trap`]: the end of a panic message and a few lines before.
const STDERR_TAIL_CHARS: usize = 2048;

/// Why a guest call failed. The operator treats every variant as the handler's failure
/// (retried per its policy); the host and the other calls go on.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CallError {
    /// The call ran past its wall-clock deadline and was stopped.
    #[error("ran past its deadline of {} ms and was stopped", deadline.as_millis())]
    Timeout {
        /// The deadline the call had.
        deadline: Duration,
    },
    /// The guest tried to grow its memory past its cap and was stopped.
    #[error("tried to use more than its memory cap of {limit_mib} MiB and was stopped")]
    MemoryExceeded {
        /// The cap the call had.
        limit_mib: u32,
    },
    /// The guest handed the host more than a limit allows (a log line, an Event, a
    /// result, a patch, a memo, index entries, random bytes ...): nothing of it is kept.
    #[error("{0}")]
    LimitExceeded(String),
    /// The guest trapped: a panic, an abort, an invalid value crossing the boundary, ...
    #[error("{message}{}", stderr_note(message, stderr_tail))]
    Trap {
        /// What went wrong, e.g. `the guest panicked: boom`.
        message: String,
        /// The end of the guest's stderr (a panic message is written there).
        stderr_tail: String,
    },
    /// The host failed to run the call; not the guest's fault.
    #[error("the host could not run the call: {0}")]
    HostBug(String),
}

/// Adds the last stderr line to a trap's message when the message does not already say it.
fn stderr_note(message: &str, stderr_tail: &str) -> String {
    // Rust's `note: run with RUST_BACKTRACE=1` hint says nothing about this failure.
    let last = stderr_tail.lines().rev().find(|line| {
        let line = line.trim();
        !line.is_empty() && !line.starts_with("note: ")
    });
    match last {
        Some(line) if !message.contains(line.trim()) => format!(" (stderr: {})", line.trim()),
        _ => String::new(),
    }
}

/// The budget of one call.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    pub(super) deadline: Duration,
    pub(super) memory_mib: u32,
}

/// The export to call.
pub(super) enum Export {
    Describe,
    Invoke(Cause),
    Index(Cause),
    When(Cause),
    /// `when`, asking a timer's or daemon's initial delay (the cause's reason says so).
    InitialDelay(Cause),
    /// `invoke` of an admission handler, answering this admission request.
    Admit(Cause, AdmissionRequest),
    /// `when` of an admission handler, about this admission request.
    AdmitWhen(Cause, AdmissionRequest),
}

/// What a guest declares during `describe` through the imports beside its output.
#[derive(Debug, Default)]
pub(super) struct Declared {
    /// The further options of its timers and daemons (`spawning.declare`).
    pub(super) spawning: Vec<SpawningOptions>,
    /// The ids of its login handlers (`login.declare`).
    pub(super) logins: Vec<String>,
    /// The ids of its handlers that select every resource (`selection.everything`).
    pub(super) everything: Vec<String>,
    /// The ids of its handlers whose resources it chooses (`selection.chosen`).
    pub(super) chosen: Vec<String>,
    /// Its admission handlers (`admission.declare`).
    pub(super) admissions: Vec<AdmissionDeclaration>,
}

/// What the export answered.
pub(super) enum Returned {
    /// `describe`'s output, with what the guest declared beside it during the call.
    Describe(DescribeOutput, Declared),
    Reply(Reply),
    Index(IndexOutcome),
    When(bool),
    /// The initial delay the guest answered, if it did.
    InitialDelay(Option<f64>),
    /// An admission handler's reply, with what it answered beside it.
    Admitted(Reply, Admitted),
}

impl Guest {
    /// Calls the guest's `invoke` export for the handler named by `cause.handler_id`.
    ///
    /// The call's deadline and memory cap come from that handler's registration, else
    /// from the runtime's defaults. The reply's JSON strings are passed on as given.
    ///
    /// # Errors
    /// [`CallError`] when the guest timed out, ran out of memory or trapped.
    pub(crate) async fn invoke(&self, cause: Cause, ctx: CallContext) -> Result<Reply, CallError> {
        let budget = self.budget(&cause.handler_id);
        match self.call(budget, ctx, Export::Invoke(cause)).await? {
            Returned::Reply(reply) => Ok(reply),
            _ => Err(mismatch()),
        }
    }

    /// Calls the guest's `index` export for the index handler named by `cause.handler_id`.
    ///
    /// # Errors
    /// As [`Guest::invoke`].
    pub(crate) async fn index(
        &self,
        cause: Cause,
        ctx: CallContext,
    ) -> Result<IndexOutcome, CallError> {
        let budget = self.budget(&cause.handler_id);
        match self.call(budget, ctx, Export::Index(cause)).await? {
            Returned::Index(outcome) => Ok(outcome),
            _ => Err(mismatch()),
        }
    }

    /// Calls the guest's `when` export: whether the handler named by `cause.handler_id`
    /// applies to this cause.
    ///
    /// # Errors
    /// As [`Guest::invoke`].
    pub(crate) async fn when(&self, cause: Cause, ctx: CallContext) -> Result<bool, CallError> {
        let budget = self.budget(&cause.handler_id);
        match self.call(budget, ctx, Export::When(cause)).await? {
            Returned::When(applies) => Ok(applies),
            _ => Err(mismatch()),
        }
    }

    /// Asks the guest (through its `when` export) for the initial delay of the timer or
    /// daemon named by `cause.handler_id`, whose reason must be `initial-delay`; `None`
    /// when it answered none.
    ///
    /// # Errors
    /// As [`Guest::invoke`].
    pub(crate) async fn initial_delay(
        &self,
        cause: Cause,
        ctx: CallContext,
    ) -> Result<Option<f64>, CallError> {
        let budget = self.budget(&cause.handler_id);
        match self.call(budget, ctx, Export::InitialDelay(cause)).await? {
            Returned::InitialDelay(delay) => Ok(delay),
            _ => Err(mismatch()),
        }
    }

    /// The budget of a call to `handler_id`: its registration's, else the defaults; never
    /// above the maxima (a guest declaring more is refused at load already).
    pub(super) fn budget(&self, handler_id: &str) -> Budget {
        let limits = self.runtime().limits();
        let registration = self.describe().handlers.iter().find(|r| r.id == handler_id);
        Budget {
            deadline: registration
                .and_then(|r| r.deadline_ms)
                .map_or(limits.call_deadline, |ms| {
                    Duration::from_millis(ms.into()).min(limits.max_call_deadline)
                }),
            memory_mib: registration
                .and_then(|r| r.memory_mib)
                .map_or(limits.call_memory_mib, |mib| {
                    mib.min(limits.max_call_memory_mib)
                }),
        }
    }

    pub(super) async fn call(
        &self,
        budget: Budget,
        ctx: CallContext,
        export: Export,
    ) -> Result<Returned, CallError> {
        call_export(
            self.runtime(),
            self.shared_name(),
            self.pre(),
            budget,
            ctx,
            export,
        )
        .await
    }
}

pub(super) fn mismatch() -> CallError {
    CallError::HostBug("the export answered with another export's type".to_owned())
}

/// Runs `export` in a fresh instance of `pre`, within `budget`.
pub(super) async fn call_export(
    runtime: &Runtime,
    guest: &Arc<str>,
    pre: &GuestWorldPre<HostState>,
    budget: Budget,
    ctx: CallContext,
    export: Export,
) -> Result<Returned, CallError> {
    // Waiting for slots is not part of the call's budget: the guest has not started.
    let limits = runtime.limits();
    let slot = runtime
        .slots()
        .acquire(
            ctx.pool,
            guest,
            &ctx.handler_id,
            limits.slots_for(budget.memory_mib),
        )
        .await
        .map_err(|_| CallError::HostBug("the runtime is shutting down".to_owned()))?;
    let deadline = Deadline::new(Instant::now() + budget.deadline);
    let turns = CallTurns::new(&runtime.inner.turns, ctx.pool);
    let mut state = HostState::new(
        Arc::clone(guest),
        ctx,
        mib_to_bytes(budget.memory_mib),
        deadline.clone(),
        Arc::clone(limits),
        turns.clone(),
    );
    // The epoch advances while the instance lives: its deadline is counted in ticks.
    let ticking = runtime.inner.ticker.ticking();
    state.spawning.describing = matches!(export, Export::Describe);
    state.spawning.asking_initial_delay = matches!(export, Export::InitialDelay(_));
    let mut store = Store::new(&runtime.inner.engine, state);
    store.limiter(|state| &mut state.limiter);
    // Check the clock at every epoch tick: interrupt at the deadline, otherwise give the
    // CPU turn back and queue for the next one, so a computing guest holds neither a
    // worker thread nor a turn for longer than a tick while others wait.
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut store| {
        let state = store.data_mut();
        if Instant::now() >= state.deadline.get() {
            state.timed_out = true;
            return Ok(UpdateDeadline::Interrupt);
        }
        let turns = state.turns.clone();
        turns.pause();
        Ok(UpdateDeadline::YieldCustom(
            1,
            Box::pin(async move {
                tokio::task::yield_now().await;
                turns.compute().await;
            }),
        ))
    });

    let call = async {
        turns.compute().await;
        let returned = run(&mut store, pre, export).await;
        turns.pause();
        returned
    };
    let outcome = bounded(call, &deadline).await;
    turns.pause();
    let result = match outcome {
        Ok(Ok(mut returned)) => within_limits(limits, &returned).map(|()| {
            if let Returned::Reply(reply) | Returned::Admitted(reply, _) = &mut returned {
                super::returned::bound_message(limits, reply);
            }
            returned
        }),
        Ok(Err(error)) => Err(classify(&error, store.data(), budget)),
        Err(_elapsed) => Err(CallError::Timeout {
            deadline: budget.deadline,
        }),
    };
    let mut state = store.into_data();
    drop(ticking);
    drop(slot);
    log_output(&state);
    // What the guest answered through the `spawning` imports goes with the export's.
    result.map(|returned| match returned {
        Returned::Describe(output, declared) => Returned::Describe(
            output,
            Declared {
                spawning: std::mem::take(&mut state.spawning.declared),
                ..declared
            },
        ),
        Returned::InitialDelay(_) => Returned::InitialDelay(state.spawning.initial_delay),
        returned => returned,
    })
}

/// Runs the call until it ends or its deadline (plus [`HOST_CALL_GRACE`]) has passed,
/// looking again whenever a daemon's sleep has moved the deadline on.
async fn bounded<T>(
    call: impl std::future::Future<Output = T>,
    deadline: &Deadline,
) -> Result<T, tokio::time::error::Elapsed> {
    tokio::pin!(call);
    loop {
        let until = tokio::time::Instant::from_std(deadline.get() + HOST_CALL_GRACE);
        match tokio::time::timeout_at(until, &mut call).await {
            Ok(done) => return Ok(done),
            Err(elapsed) if deadline.get() + HOST_CALL_GRACE <= Instant::now() => {
                return Err(elapsed);
            }
            Err(_) => {}
        }
    }
}

/// Whether what the guest returned is within the limits; else what went past which.
/// Checked before anything of the reply is parsed or kept.
fn within_limits(limits: &Limits, returned: &Returned) -> Result<(), CallError> {
    match returned {
        Returned::Reply(reply) | Returned::Admitted(reply, _) => {
            super::returned::reply_within_limits(limits, reply)
        }
        Returned::Index(IndexOutcome::Entries(entries)) => {
            super::returned::index_within_limits(limits, entries)
        }
        Returned::Describe(..)
        | Returned::Index(_)
        | Returned::When(_)
        | Returned::InitialDelay(_) => Ok(()),
    }
    .map_err(CallError::LimitExceeded)
}

async fn run(
    store: &mut Store<HostState>,
    pre: &GuestWorldPre<HostState>,
    export: Export,
) -> wasmtime::Result<Returned> {
    // Only the export called is looked up and its type checked: bindgen's `instantiate`
    // checks all four at every call (the load checked them once already), which was
    // about a tenth of a handler call (`make bench`'s invocation figure).
    let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
    Ok(match export {
        Export::Describe => {
            let describe =
                instance.get_typed_func::<(), (DescribeOutput,)>(&mut *store, "describe")?;
            store.data_mut().logins = Some(Vec::new());
            store.data_mut().everything = Some(Vec::new());
            store.data_mut().chosen = Some(Vec::new());
            store.data_mut().admissions = Some(Vec::new());
            let output = describe.call_async(&mut *store, ()).await?.0;
            let logins = store.data_mut().logins.take().unwrap_or_default();
            let everything = store.data_mut().everything.take().unwrap_or_default();
            let chosen = store.data_mut().chosen.take().unwrap_or_default();
            let admissions = store.data_mut().admissions.take().unwrap_or_default();
            Returned::Describe(
                output,
                Declared {
                    logins,
                    everything,
                    chosen,
                    admissions,
                    ..Declared::default()
                },
            )
        }
        Export::Invoke(cause) => {
            let invoke = instance.get_typed_func::<(&Cause,), (Reply,)>(&mut *store, "invoke")?;
            Returned::Reply(invoke.call_async(&mut *store, (&cause,)).await?.0)
        }
        Export::Index(cause) => {
            let index =
                instance.get_typed_func::<(&Cause,), (IndexOutcome,)>(&mut *store, "index")?;
            Returned::Index(index.call_async(&mut *store, (&cause,)).await?.0)
        }
        Export::When(cause) => {
            let when = instance.get_typed_func::<(&Cause,), (bool,)>(&mut *store, "when")?;
            Returned::When(when.call_async(&mut *store, (&cause,)).await?.0)
        }
        Export::InitialDelay(cause) => {
            let when = instance.get_typed_func::<(&Cause,), (bool,)>(&mut *store, "when")?;
            when.call_async(&mut *store, (&cause,)).await?;
            Returned::InitialDelay(None)
        }
        Export::AdmitWhen(cause, request) => {
            let when = instance.get_typed_func::<(&Cause,), (bool,)>(&mut *store, "when")?;
            store.data_mut().admission = Some(AdmissionCall {
                request,
                warnings: Vec::new(),
                rejected: None,
            });
            Returned::When(when.call_async(&mut *store, (&cause,)).await?.0)
        }
        Export::Admit(cause, request) => {
            let invoke = instance.get_typed_func::<(&Cause,), (Reply,)>(&mut *store, "invoke")?;
            store.data_mut().admission = Some(AdmissionCall {
                request,
                warnings: Vec::new(),
                rejected: None,
            });
            let reply = invoke.call_async(&mut *store, (&cause,)).await?.0;
            let call = store.data_mut().admission.take();
            let admitted = call.map_or_else(Admitted::default, |call| Admitted {
                warnings: call.warnings,
                rejected: call.rejected,
            });
            Returned::Admitted(reply, admitted)
        }
    })
}

/// Tells a timeout, an out-of-memory and a trap apart. A Rust guest that runs out of memory
/// aborts with the same `unreachable` trap as a panic; the limiter's record decides.
fn classify(error: &wasmtime::Error, state: &HostState, budget: Budget) -> CallError {
    if let Some(message) = &state.exceeded {
        return CallError::LimitExceeded(message.clone());
    }
    let root = error.root_cause().to_string();
    if root.starts_with("requested len") && root.contains("exceeds limit") {
        // wasmtime-wasi's own refusal of a `get-random-bytes` call past our bound.
        return CallError::LimitExceeded(format!(
            "asked WASI for too many random bytes: {root} (--max-random-bytes)"
        ));
    }
    let trap = error.downcast_ref::<Trap>();
    if state.timed_out || trap == Some(&Trap::Interrupt) {
        return CallError::Timeout {
            deadline: budget.deadline,
        };
    }
    if state.limiter.refused.is_some() {
        return CallError::MemoryExceeded {
            limit_mib: budget.memory_mib,
        };
    }
    let (stderr, _) = state.stderr.contents();
    let stderr_tail = tail_chars(&stderr, STDERR_TAIL_CHARS);
    let message = if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        format!("the guest exited with status {}", exit.0)
    } else if let Some(panic) = panic_message(&stderr) {
        format!("the guest panicked: {panic}")
    } else if let Some(trap) = trap {
        format!("the guest trapped: {trap}")
    } else {
        // Not a trap: the guest broke the canonical ABI (an invalid string or enum), or its
        // instantiation failed. Still the guest's fault; say what wasmtime said.
        format!("the guest failed: {}", error.root_cause())
    };
    CallError::Trap {
        message,
        stderr_tail,
    }
}

/// The message of the last Rust panic on `stderr` (`thread '...' panicked at file:line:col:`
/// followed by the message lines, up to the `note:` line).
fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.rfind("panicked at ")?;
    let after_header = &stderr[start..];
    let body = after_header.split_once('\n').map_or("", |(_, rest)| rest);
    let message: Vec<&str> = body
        .lines()
        .take_while(|line| !line.starts_with("note: "))
        .collect();
    let message = message.join("\n").trim().to_owned();
    (!message.is_empty()).then_some(message)
}

/// The last `max` characters of `text`, starting at a character boundary.
fn tail_chars(text: &str, max: usize) -> String {
    let count = text.chars().count();
    text.chars()
        .skip(count.saturating_sub(max))
        .collect::<String>()
        .trim_end()
        .to_owned()
}

/// Sends what the guest printed to the host log, line by line, with the call's context.
fn log_output(state: &HostState) {
    let caller: &Caller = &state.caller;
    for (stream, pipe) in [("stdout", &state.stdout), ("stderr", &state.stderr)] {
        let (text, dropped) = pipe.contents();
        let (guest, handler, object) = (
            &*caller.guest,
            caller.handler_id.as_str(),
            caller.object_ref(),
        );
        if dropped > 0 {
            tracing::warn!(
                target: GUEST_LOG_TARGET, guest, handler, object, stream, dropped,
                "the guest wrote more than the host keeps; older output was dropped",
            );
        }
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            if stream == "stdout" {
                tracing::info!(target: GUEST_LOG_TARGET, guest, handler, object, stream, "{line}");
            } else {
                tracing::warn!(target: GUEST_LOG_TARGET, guest, handler, object, stream, "{line}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_are_found_on_stderr() {
        let stderr = "some output\nthread '<unnamed>' panicked at src/lib.rs:97:23:\nboom\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(panic_message(stderr).as_deref(), Some("boom"));
        assert_eq!(panic_message("no panic here"), None);
    }

    #[test]
    fn errors_read_well() {
        let timeout = CallError::Timeout {
            deadline: Duration::from_millis(200),
        };
        assert_eq!(
            timeout.to_string(),
            "ran past its deadline of 200 ms and was stopped"
        );
        let memory = CallError::MemoryExceeded { limit_mib: 16 };
        assert_eq!(
            memory.to_string(),
            "tried to use more than its memory cap of 16 MiB and was stopped"
        );
        let trap = CallError::Trap {
            message: "the guest trapped: wasm `unreachable` instruction executed".to_owned(),
            stderr_tail: "line one\nsomething odd\n".to_owned(),
        };
        assert_eq!(
            trap.to_string(),
            "the guest trapped: wasm `unreachable` instruction executed (stderr: something odd)"
        );
        let panic = CallError::Trap {
            message: "the guest panicked: boom".to_owned(),
            stderr_tail: "panicked at x:\nboom".to_owned(),
        };
        assert_eq!(panic.to_string(), "the guest panicked: boom");
    }
}
