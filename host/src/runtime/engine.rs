//! The one wasmtime `Engine` of a host, its `Linker`, and the epoch ticker that bounds calls.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::bindings::GuestWorld;
use super::cache::ComponentCache;
use super::compiler::{CompileCommand, engine_config};
use super::slots::Slots;
use super::state::HostState;
use super::turns::CpuTurns;
use crate::limits::{Limits, LimitsError};

/// How often the epoch advances. Deadlines are checked at this granularity, and a guest that
/// computes without calling the host yields to the executor this often.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Core instances a component may hold in one pool slot: a Rust `wasm32-wasip2` component has
/// its main module plus the shim and fixup modules `wit-component` adds.
const CORE_INSTANCES_PER_COMPONENT: u32 = 8;
/// Linear memories and tables per component, for the same reason.
const MEMORIES_PER_COMPONENT: u32 = 2;
const TABLES_PER_COMPONENT: u32 = 4;

/// How much of a memory slot is reset in place after a call, where Linux can tell which
/// pages the call wrote (`PAGEMAP_SCAN`, 6.7+): those pages are copied back from the
/// guest's image or zeroed, and stay mapped, instead of being given back to the kernel
/// (`madvise`) and faulted in again by the next call, with a TLB shootdown each time.
/// A handler call writes a few pages; this covers them three times over and bounds what
/// a slot keeps resident between calls. Without `PAGEMAP_SCAN` the pool would reset
/// this much whole at every call, so it keeps the default (`madvise` alone).
///
/// Check this still holds when upgrading wasmtime: 50.0.1's scan no longer asks for
/// present pages, so the untouched pages at the bottom of the guest's stack count as
/// written, fill this budget, and the rest of the memory is given back after every call
/// (figures: docs/performance.md). How: `kapsel-bench --only invocation` before and
/// after the upgrade, alternated; its targets (p99 of a fresh-instance call ≤ 100 µs,
/// ≥ 30,000 calls per second on one core) must still say YES, and `strace -c` of it must
/// show no `madvise` per call.
const KEEP_RESIDENT_PER_MEMORY: usize = 128 << 10;

/// The same for a table slot. Without it, every call ended with an `madvise` of each of
/// the instance's tables (the guest's function table and `wit-component`'s shim table),
/// each a TLB shootdown on the other cores, and the next call faulted the pages in again.
/// 16 KiB holds 2,048 function references; a guest's table holds tens to hundreds; only
/// the pages a call wrote are zeroed (figures: docs/performance.md).
const KEEP_RESIDENT_PER_TABLE: usize = 16 << 10;

/// The host could not set up its WebAssembly runtime.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RuntimeError {
    /// The configuration is out of range.
    #[error("invalid runtime configuration: {0}")]
    Config(#[source] LimitsError),
    /// wasmtime refused the engine settings (for example, not enough address space for the pool).
    #[error("cannot create the WebAssembly engine: {0:#}")]
    Engine(wasmtime::Error),
    /// Linking WASI or the `host` interface failed.
    #[error("cannot link the host interfaces: {0:#}")]
    Link(wasmtime::Error),
    /// The epoch ticker thread could not start.
    #[error("cannot start the epoch ticker thread: {0}")]
    Ticker(#[source] std::io::Error),
}

/// The WebAssembly runtime of a host: compiles guests once and bounds every call.
///
/// Cheap to clone (an `Arc` inside); every [`Guest`](super::Guest) keeps its runtime alive,
/// so the epoch ticker runs as long as any guest may be called and stops when the last
/// runtime handle and guest are dropped.
#[derive(Clone)]
pub(crate) struct Runtime {
    pub(super) inner: Arc<RuntimeInner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

/// What every guest of a host shares.
pub(super) struct RuntimeInner {
    /// Compiles components and owns the instance pool.
    pub(super) engine: Engine,
    /// WASI plus the `host` interface, linked once; each guest pre-instantiates against it.
    pub(super) linker: Linker<HostState>,
    /// The bounds on every call (and on what the guests ask of the host).
    pub(super) limits: Arc<Limits>,
    /// Every call holds slots while its instance lives: calls wait for slots instead of
    /// exhausting the instance pool, and share them fairly.
    pub(super) slots: Arc<Slots>,
    /// Which calls compute now: fewer than the executor's threads.
    pub(super) turns: CpuTurns,
    /// Compiled guests on disk, when asked for and usable.
    pub(super) cache: Option<ComponentCache>,
    /// The helper that compiles guests, when they are not compiled in this process.
    pub(super) compiler: Option<CompileCommand>,
    /// Advances the epoch while calls run; its `Drop` stops the thread.
    pub(super) ticker: EpochTicker,
}

impl Runtime {
    /// Builds the engine (pooling allocator, epoch interruption), links the host
    /// interfaces and starts the epoch ticker thread.
    ///
    /// # Errors
    /// A configuration out of range, or wasmtime refusing the engine (for example when the
    /// pool cannot reserve its address space).
    pub(crate) fn new(limits: Limits) -> Result<Runtime, RuntimeError> {
        Runtime::with_cache(limits, None, None)
    }

    /// As [`Runtime::new`], keeping compiled guests in `cache_dir` between starts (a
    /// folder that cannot be used is only warned about: the cache only saves time), and
    /// compiling them with `compiler` (none: in this process).
    ///
    /// # Errors
    /// As [`Runtime::new`].
    pub(crate) fn with_cache(
        limits: Limits,
        cache_dir: Option<PathBuf>,
        compiler: Option<CompileCommand>,
    ) -> Result<Runtime, RuntimeError> {
        limits.check().map_err(RuntimeError::Config)?;
        let engine = new_engine(&limits).map_err(RuntimeError::Engine)?;
        let linker = new_linker(&engine).map_err(RuntimeError::Link)?;
        let ticker = EpochTicker::start(engine.clone()).map_err(RuntimeError::Ticker)?;
        // The cache only saves time: a folder that cannot be used is worth a warning.
        let cache = cache_dir.as_ref().and_then(|dir| {
            ComponentCache::open(dir, &engine)
                .inspect_err(|error| {
                    tracing::warn!(
                        "Cannot use {} as the compiled-guest cache ({error}); guests are compiled at every start.",
                        dir.display()
                    );
                })
                .ok()
        });
        let slots = Arc::new(Slots::new(&limits));
        let turns = CpuTurns::new(limits.guest_threads as usize);
        tracing::debug!(
            "guest calls: {} call slots, {} background slots, {} admission slots, {} activity \
             slots; their declared memory caps add up to at most {} MiB; {} compute at once",
            limits.call_slots,
            limits.background_slots,
            limits.admission_slots,
            limits.activity_slots(),
            limits.memory_budget_mib(),
            limits.guest_threads
        );
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                engine,
                linker,
                limits: Arc::new(limits),
                slots,
                turns,
                cache,
                compiler,
                ticker,
            }),
        })
    }

    /// The bounds this runtime was built with.
    pub(crate) fn limits(&self) -> &Arc<Limits> {
        &self.inner.limits
    }

    /// The call slots: who runs now, who waits.
    pub(crate) fn slots(&self) -> &Arc<Slots> {
        &self.inner.slots
    }
}

fn new_engine(limits: &Limits) -> wasmtime::Result<Engine> {
    // Every live instance holds at least one slot: the pool can never run out.
    let instances = limits.total_slots();
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(instances)
        .total_core_instances(instances.saturating_mul(CORE_INSTANCES_PER_COMPONENT))
        .total_memories(instances.saturating_mul(MEMORIES_PER_COMPONENT))
        .total_tables(instances.saturating_mul(TABLES_PER_COMPONENT))
        .total_stacks(instances)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .max_tables_per_component(TABLES_PER_COMPONENT)
        .max_memory_size(mib_to_bytes(limits.max_call_memory_mib));
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        pool.pagemap_scan(Enabled::Yes)
            .linear_memory_keep_resident(KEEP_RESIDENT_PER_MEMORY)
            .table_keep_resident(KEEP_RESIDENT_PER_TABLE);
    }
    let mut wasm = engine_config();
    wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&wasm)
}

fn new_linker(engine: &Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    // A std guest imports WASI even when it does no I/O (stdio, clocks, random, exit).
    // The context built per call grants no files, env, args or sockets.
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    GuestWorld::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |state| state)?;
    Ok(linker)
}

/// Bytes in `mib` mebibytes.
pub(super) fn mib_to_bytes(mib: u32) -> usize {
    (mib as usize) << 20
}

/// Advances the engine's epoch every [`EPOCH_TICK`] from one thread while calls run, so
/// deadlines hold even when every executor thread is busy running guests. While no call
/// runs, the thread sleeps until one starts: an idle operator wakes no thread a hundred
/// times a second (the epoch only matters to a running call, whose deadline is one tick
/// after the epoch it starts at).
pub(super) struct EpochTicker {
    shared: Arc<TickerShared>,
    thread: Option<JoinHandle<()>>,
}

/// What the ticker thread and the calls share.
#[derive(Default)]
struct TickerShared {
    /// Calls running now ([`Ticking`] guards).
    calls: Mutex<usize>,
    /// Signalled when the first call starts, and at the stop.
    wake: Condvar,
    stop: AtomicBool,
    /// Epochs advanced so far.
    ticks: AtomicU64,
    /// The thread sleeps until a call starts.
    parked: AtomicBool,
}

impl TickerShared {
    fn calls(&self) -> MutexGuard<'_, usize> {
        // A count cannot be left half-changed by a panic.
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl EpochTicker {
    fn start(engine: Engine) -> std::io::Result<Self> {
        let shared = Arc::new(TickerShared::default());
        let ticker = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("kapsel-epoch".to_owned())
            .spawn(move || {
                loop {
                    {
                        let mut calls = ticker.calls();
                        while *calls == 0 && !ticker.stop.load(Ordering::Relaxed) {
                            ticker.parked.store(true, Ordering::Relaxed);
                            calls = ticker
                                .wake
                                .wait(calls)
                                .unwrap_or_else(PoisonError::into_inner);
                        }
                        ticker.parked.store(false, Ordering::Relaxed);
                    }
                    if ticker.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                    ticker.ticks.fetch_add(1, Ordering::Relaxed);
                }
            })?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Keeps the epoch advancing until the guard is dropped: held by every call while
    /// its guest may run.
    pub(super) fn ticking(&self) -> Ticking {
        let mut calls = self.shared.calls();
        *calls += 1;
        // Only a parked thread needs waking (`parked` changes under this lock): one between
        // two ticks sees the count at its next tick, and a notification without a waiter
        // is still a system call, at every call that starts when none runs.
        if *calls == 1 && self.shared.parked.load(Ordering::Relaxed) {
            self.shared.wake.notify_one();
        }
        Ticking(Arc::clone(&self.shared))
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        {
            // Set under the lock, so the thread cannot miss it between its check and its wait.
            let _calls = self.shared.calls();
            self.shared.stop.store(true, Ordering::Relaxed);
            self.shared.wake.notify_one();
        }
        if let Some(thread) = self.thread.take() {
            // The thread wakes within one tick; a panic there cannot have left anything behind.
            let _ = thread.join();
        }
    }
}

/// A running call's hold on the epoch ticker ([`EpochTicker::ticking`]).
pub(super) struct Ticking(Arc<TickerShared>);

impl Drop for Ticking {
    fn drop(&mut self) {
        let mut calls = self.0.calls();
        *calls = calls.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (polling; bounded) until `condition` holds.
    fn wait_for(what: &str, condition: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !condition() {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: not within 10 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_epoch_advances_only_while_calls_run() {
        let ticker = EpochTicker::start(Engine::default()).expect("ticker");
        let shared = Arc::clone(&ticker.shared);
        let ticks = || shared.ticks.load(Ordering::Relaxed);
        wait_for("parked at start", || shared.parked.load(Ordering::Relaxed));

        let first = ticker.ticking();
        let second = ticker.ticking();
        wait_for("ticking while calls run", || ticks() >= 3);
        drop(first);
        let before = ticks();
        wait_for("ticking while one call still runs", || {
            ticks() >= before + 3
        });
        drop(second);
        wait_for("parked once no call runs", || {
            shared.parked.load(Ordering::Relaxed)
        });

        let parked_at = ticks();
        // Ten ticks' time: a ticker that kept going would have advanced the epoch.
        std::thread::sleep(EPOCH_TICK * 10);
        assert_eq!(
            ticks(),
            parked_at,
            "the epoch advanced with no call running"
        );

        let _again = ticker.ticking();
        wait_for("ticking again when a call starts", || {
            ticks() >= parked_at + 2
        });
        drop(ticker);
    }
}
