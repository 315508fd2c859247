//! `HostState`: the data of one `Store`, i.e. of one guest call.

use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::{AdmissionDeclaration, AdmissionRequest, SpawningOptions};
use super::deadline::Deadline;
use super::pipe::TailPipe;
use super::services::{CallContext, Caller, HostServices};
use super::turns::CallTurns;
use crate::limits::Limits;

/// Table elements a guest may grow a table to; far above what compiled Rust needs, far below
/// what would let a guest use the table to get around its memory cap.
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// Everything one call's `Store` holds. A fresh one per call: nothing a guest does survives
/// the call except through the host interface.
pub(crate) struct HostState {
    /// WASI with no preopened directories, no environment, no arguments, no sockets;
    /// stdout and stderr go to [`Self::stdout`]/[`Self::stderr`].
    wasi: WasiCtx,
    /// WASI's resources (streams, pollables) for this call.
    table: ResourceTable,
    /// The call's memory cap; remembers a refused growth so an out-of-memory abort is told
    /// apart from a panic (both trap as `unreachable`).
    pub(super) limiter: MemoryLimiter,
    /// Who is calling, for logs and for the services.
    pub(super) caller: Caller,
    /// What the operator offers the guest during this call.
    pub(super) services: Arc<dyn HostServices>,
    /// The guest's stdout, logged after the call.
    pub(super) stdout: TailPipe,
    /// The guest's stderr, logged after the call and quoted in trap errors (panic messages).
    pub(super) stderr: TailPipe,
    /// When the call's wall-clock budget runs out; moved on by the time a daemon sleeps.
    pub(super) deadline: Deadline,
    /// Set by the epoch callback when it interrupted the guest at [`Self::deadline`].
    pub(super) timed_out: bool,
    /// What the guest may hand the host during the call.
    pub(super) limits: Arc<Limits>,
    /// What it handed over so far.
    pub(super) usage: Usage,
    /// The first limit the guest went past: the call fails with this message.
    pub(super) exceeded: Option<String>,
    /// The call's CPU turns: it computes only while it holds one.
    pub(super) turns: CallTurns,
    /// What the guest answered through the `spawning` imports.
    pub(super) spawning: SpawningAnswers,
    /// The login handlers the guest declared (`login.declare`); `None` outside
    /// `describe`, the only call that may declare them.
    pub(super) logins: Option<Vec<String>>,
    /// The handlers that select every resource (`selection.everything`); `None` outside
    /// `describe`, the only call that may declare them.
    pub(super) everything: Option<Vec<String>>,
    /// The handlers whose resources the guest chooses (`selection.chosen`); `None`
    /// outside `describe`.
    pub(super) chosen: Option<Vec<String>>,
    /// The admission handlers the guest declared (`admission.declare`); `None` outside
    /// `describe`, the only call that may declare them.
    pub(super) admissions: Option<Vec<AdmissionDeclaration>>,
    /// The admission request of an admission call, and what the guest answered beside
    /// its reply; `None` in every other call.
    pub(super) admission: Option<AdmissionCall>,
}

/// What an admission handler answered beside its reply, through the `admission` imports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Admitted {
    /// The warnings for the client, in order.
    pub(crate) warnings: Vec<String>,
    /// The code of the admission error its failure is (`admission.reject`), if it named one.
    pub(crate) rejected: Option<u16>,
}

/// An admission call's request, and what the guest adds to its reply through the
/// `admission` imports.
#[derive(Debug)]
pub(super) struct AdmissionCall {
    pub(super) request: AdmissionRequest,
    /// The warnings for the client (`admission.warn`), in order.
    pub(super) warnings: Vec<String>,
    /// The code of the admission error the call's failure is (`admission.reject`).
    pub(super) rejected: Option<u16>,
}

/// What a guest hands over through the `spawning` imports: the options of its timers and
/// daemons (during `describe`), an initial delay (during `when`).
#[derive(Debug, Default)]
pub(super) struct SpawningAnswers {
    /// The call is `describe`: it may declare options.
    pub(super) describing: bool,
    pub(super) declared: Vec<SpawningOptions>,
    /// The call is `when`, asked for an initial delay: it may answer one.
    pub(super) asking_initial_delay: bool,
    pub(super) initial_delay: Option<f64>,
}

/// What a guest handed the host during one call, counted against its [`Limits`].
#[derive(Debug, Default)]
pub(super) struct Usage {
    /// Bytes of log lines.
    pub(super) log_bytes: usize,
    /// Events posted.
    pub(super) events: u32,
    /// Sub-handlers declared.
    pub(super) subhandlers: u32,
}

impl HostState {
    /// State for one call of `guest`'s handler, capped at `memory_bytes`, due by `deadline`,
    /// within `limits`.
    pub(super) fn new(
        guest: Arc<str>,
        ctx: CallContext,
        memory_bytes: usize,
        deadline: Deadline,
        limits: Arc<Limits>,
        turns: CallTurns,
    ) -> Self {
        let stdout = TailPipe::default();
        let stderr = TailPipe::default();
        // Nothing is inherited from the host process: the builder starts with no env, args,
        // preopens or network, and stdin closed. Clocks are harmless; randomness is
        // generated in the host, synchronously, so one request is bounded.
        let wasi = WasiCtx::builder()
            .max_random_size(limits.max_random_bytes)
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                limit_bytes: memory_bytes,
                refused: None,
            },
            caller: Caller {
                guest,
                handler_id: ctx.handler_id,
                object: ctx.object,
                deadline: deadline.clone(),
            },
            services: ctx.services,
            stdout,
            stderr,
            deadline,
            timed_out: false,
            limits,
            usage: Usage::default(),
            exceeded: None,
            turns,
            spawning: SpawningAnswers::default(),
            logins: None,
            everything: None,
            chosen: None,
            admissions: None,
            admission: None,
        }
    }

    /// The guest went past a limit: the call fails with `message` (the first such
    /// message, if it goes on), through the trap this error causes.
    pub(super) fn refuse(&mut self, message: String) -> wasmtime::Error {
        self.exceeded.get_or_insert_with(|| message.clone());
        wasmtime::Error::msg(message)
    }
}

/// The message of a refused datum: what, how big, the limit and the flag that sets it.
pub(super) fn over_limit(what: &str, size: usize, limit: usize, flag: &str) -> String {
    format!("{what} of {size} bytes, above the limit of {limit} bytes (--{flag})")
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The memory cap of one call.
#[derive(Debug)]
pub(super) struct MemoryLimiter {
    /// Linear memory the guest may have, in bytes.
    pub(super) limit_bytes: usize,
    /// The size a refused growth asked for, if any.
    pub(super) refused: Option<usize>,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit_bytes {
            self.refused = Some(desired);
            // Refuse rather than trap: the guest sees `memory.grow` fail, as on a real
            // out-of-memory, and its allocator reports it on stderr before aborting.
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// The state of a call of handler `h` about `ns/obj`, with no services, within the
/// default limits: for the imports' unit tests.
#[cfg(test)]
pub(super) fn test_state() -> HostState {
    use super::services::NoServices;
    let ctx = CallContext::new("h", Some("ns/obj".to_owned()), Arc::new(NoServices));
    HostState::new(
        "g".into(),
        ctx,
        1 << 20,
        Deadline::new(std::time::Instant::now() + std::time::Duration::from_secs(1)),
        Arc::new(Limits::default()),
        CallTurns::new(
            &super::turns::CpuTurns::new(1),
            super::slots::Pool::Handlers,
        ),
    )
}
