//! [`Slots`]: which guest calls may run now. Every call holds slots while its instance
//! lives, so the instance pool is never exhausted (calls wait instead of failing).
//!
//! Three pools, so that one kind of call cannot starve another: `Handlers` (event,
//! changing, index and `when` calls, each ending by its deadline), `Background` (timers
//! and daemons; a daemon holds its slot as long as it runs) and `Activities` (probes,
//! startup, cleanup, `describe`). Within a pool one guest may hold at most its share of
//! the slots and one handler its share, so a guest that spins on many objects leaves
//! the others room. A call takes one slot per default memory cap it declares (rounded
//! up), so the slots also bound the sum of the declared memory caps.
//!
//! Waiting is first come, first served at each level (handler, then guest, then pool):
//! tokio's semaphores are fair, and the levels are always taken in that order.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::limits::{Limits, share};
use crate::metrics::SlotLoad;

/// The pool a call takes its slots from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Pool {
    /// Event, changing, index and `when` calls.
    #[default]
    Handlers,
    /// Timers and daemons.
    Background,
    /// Probes, startup and cleanup handlers, and `describe` at load.
    Activities,
    /// Admission handlers: a write of the cluster waits for them.
    Admission,
}

impl Pool {
    const ALL: [Pool; 4] = [
        Pool::Handlers,
        Pool::Background,
        Pool::Activities,
        Pool::Admission,
    ];

    /// The pool's name in metrics and messages.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Pool::Handlers => "handlers",
            Pool::Background => "background",
            Pool::Activities => "activities",
            Pool::Admission => "admission",
        }
    }

    fn index(self) -> usize {
        match self {
            Pool::Handlers => 0,
            Pool::Background => 1,
            Pool::Activities => 2,
            Pool::Admission => 3,
        }
    }
}

/// The slots of every pool; shared by every call of a runtime.
#[derive(Debug)]
pub(crate) struct Slots {
    pools: [Arc<PoolSlots>; 4],
}

/// The runtime is shutting down: no more slots are handed out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Closed;

/// The slots one call holds; dropping it gives them back.
#[derive(Debug)]
pub(crate) struct Slot {
    pool: Arc<PoolSlots>,
    count: u32,
    _handler: OwnedSemaphorePermit,
    _guest: OwnedSemaphorePermit,
    _pool: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.pool.busy.fetch_sub(self.count, Ordering::Relaxed);
    }
}

impl Slots {
    pub(crate) fn new(limits: &Limits) -> Slots {
        let pool = |size: u32| {
            Arc::new(PoolSlots::new(
                size,
                share(size, limits.guest_share_percent),
                share(size, limits.handler_share_percent),
            ))
        };
        let activities = limits.activity_slots();
        Slots {
            pools: [
                pool(limits.call_slots),
                pool(limits.background_slots),
                // Few and the operator's own: any may take the whole pool.
                Arc::new(PoolSlots::new(activities, activities, activities)),
                pool(limits.admission_slots),
            ],
        }
    }

    /// Waits for `wanted` slots of `pool` for a call of `guest`'s `handler`, within the
    /// guest's and the handler's shares (a call never needs more than those shares: it
    /// then takes all it may have).
    pub(crate) async fn acquire(
        &self,
        pool: Pool,
        guest: &str,
        handler: &str,
        wanted: u32,
    ) -> Result<Slot, Closed> {
        let slots = &self.pools[pool.index()];
        // `Limits::check` makes every call fit in a handler's share; clamped all the same,
        // so that a call never waits for more than it may ever have.
        let count = wanted
            .min(slots.handler_share)
            .min(slots.guest_share)
            .min(slots.size)
            .max(1);
        let waiting = Waiting::start(slots);
        let (handler, guest) = slots.semaphores(guest, handler);
        let handler = handler
            .acquire_many_owned(count)
            .await
            .map_err(|_| Closed)?;
        let guest = guest.acquire_many_owned(count).await.map_err(|_| Closed)?;
        let all = Arc::clone(&slots.all)
            .acquire_many_owned(count)
            .await
            .map_err(|_| Closed)?;
        drop(waiting);
        slots.busy.fetch_add(count, Ordering::Relaxed);
        *slots.progress() = Instant::now();
        Ok(Slot {
            pool: Arc::clone(slots),
            count,
            _handler: handler,
            _guest: guest,
            _pool: all,
        })
    }

    /// Why handler calls are starved, if they are: some wait, and no slot was handed out
    /// for longer than `after`.
    pub(crate) fn starved(&self, after: Duration) -> Option<String> {
        let slots = &self.pools[Pool::Handlers.index()];
        let waiting = slots.waiting.load(Ordering::Relaxed);
        let stalled = slots.progress().elapsed();
        (waiting > 0 && stalled > after).then(|| {
            format!(
                "calls are starved: {waiting} handler call(s) wait for a call slot and none \
                 was handed out for {} s ({} of {} slots busy)",
                stalled.as_secs(),
                slots.busy.load(Ordering::Relaxed),
                slots.size
            )
        })
    }

    /// How busy each pool is.
    pub(crate) fn load(&self) -> Vec<SlotLoad> {
        Pool::ALL
            .iter()
            .map(|&pool| {
                let slots = &self.pools[pool.index()];
                SlotLoad {
                    pool: pool.as_str(),
                    size: slots.size,
                    busy: slots.busy.load(Ordering::Relaxed),
                    waiting: slots.waiting.load(Ordering::Relaxed),
                }
            })
            .collect()
    }
}

/// One pool: its slots, and the shares of the guests and handlers that used it.
#[derive(Debug)]
struct PoolSlots {
    size: u32,
    guest_share: u32,
    handler_share: u32,
    all: Arc<Semaphore>,
    /// One semaphore per guest and per handler that called; as many as there are
    /// registrations (plus `describe`), so these maps stay small.
    guests: Mutex<HashMap<String, Arc<Semaphore>>>,
    handlers: Mutex<HashMap<(String, String), Arc<Semaphore>>>,
    busy: AtomicU32,
    waiting: AtomicUsize,
    /// When a slot was last handed out, or the first call started waiting.
    last_progress: Mutex<Instant>,
}

impl PoolSlots {
    fn new(size: u32, guest_share: u32, handler_share: u32) -> PoolSlots {
        PoolSlots {
            size,
            guest_share,
            handler_share,
            all: Arc::new(Semaphore::new(size as usize)),
            guests: Mutex::default(),
            handlers: Mutex::default(),
            busy: AtomicU32::new(0),
            waiting: AtomicUsize::new(0),
            last_progress: Mutex::new(Instant::now()),
        }
    }

    fn progress(&self) -> MutexGuard<'_, Instant> {
        // Only an `Instant` is inside: a panic cannot leave it torn.
        self.last_progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The handler's and the guest's semaphores, created on first use.
    fn semaphores(&self, guest: &str, handler: &str) -> (Arc<Semaphore>, Arc<Semaphore>) {
        let handler = Arc::clone(
            self.handlers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry((guest.to_owned(), handler.to_owned()))
                .or_insert_with(|| Arc::new(Semaphore::new(self.handler_share as usize))),
        );
        let guest = Arc::clone(
            self.guests
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(guest.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.guest_share as usize))),
        );
        (handler, guest)
    }
}

/// Counts a call as waiting until it is dropped (served, or given up on).
struct Waiting<'a>(&'a PoolSlots);

impl<'a> Waiting<'a> {
    fn start(slots: &'a PoolSlots) -> Waiting<'a> {
        if slots.waiting.fetch_add(1, Ordering::Relaxed) == 0 {
            // Time spent idle is no stall: the clock starts with the first waiter.
            *slots.progress() = Instant::now();
        }
        Waiting(slots)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(slots: u32) -> Limits {
        Limits {
            call_slots: slots,
            call_memory_mib: 64,
            guest_share_percent: 75,
            handler_share_percent: 50,
            ..Limits::default()
        }
    }

    /// Whether a slot can be had at once.
    async fn at_once(slots: &Slots, guest: &str, handler: &str, wanted: u32) -> Option<Slot> {
        tokio::time::timeout(
            Duration::from_millis(20),
            slots.acquire(Pool::Handlers, guest, handler, wanted),
        )
        .await
        .ok()
        .and_then(Result::ok)
    }

    #[tokio::test]
    async fn a_handler_and_a_guest_get_their_share_and_no_more() {
        let slots = Slots::new(&limits(8));
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(
                at_once(&slots, "bad", "spin", 1)
                    .await
                    .expect("within the share"),
            );
        }
        assert!(
            at_once(&slots, "bad", "spin", 1).await.is_none(),
            "a handler holds at most half"
        );
        for _ in 0..2 {
            held.push(
                at_once(&slots, "bad", "other", 1)
                    .await
                    .expect("guest share"),
            );
        }
        assert!(
            at_once(&slots, "bad", "other", 1).await.is_none(),
            "a guest holds at most three quarters"
        );
        let good = at_once(&slots, "good", "ok", 1).await;
        assert!(good.is_some(), "another guest still gets a slot");
        assert_eq!(slots.load()[0].busy, 7);
        drop(held);
        assert_eq!(slots.load()[0].busy, 1);
    }

    #[tokio::test]
    async fn memory_hungry_calls_take_several_slots_within_the_shares() {
        let slots = Slots::new(&limits(8));
        let big = at_once(&slots, "g", "big", 100)
            .await
            .expect("clamped to the share");
        assert_eq!(slots.load()[0].busy, 4);
        assert!(at_once(&slots, "g", "big", 1).await.is_none());
        drop(big);
        assert_eq!(slots.load()[0].busy, 0);
    }

    #[tokio::test]
    async fn waiting_without_progress_is_starvation() {
        let slots = Arc::new(Slots::new(&limits(1)));
        assert_eq!(slots.starved(Duration::ZERO), None);
        let held = at_once(&slots, "g", "a", 1).await.expect("free");
        let waiter = {
            let slots = Arc::clone(&slots);
            tokio::spawn(async move { slots.acquire(Pool::Handlers, "h", "b", 1).await.is_ok() })
        };
        while slots.load()[0].waiting == 0 {
            tokio::task::yield_now().await;
        }
        std::thread::sleep(Duration::from_millis(5));
        let starved = slots.starved(Duration::from_millis(1)).expect("starved");
        assert!(starved.contains("1 handler call(s) wait"), "{starved}");
        assert_eq!(slots.starved(Duration::from_secs(60)), None);
        drop(held);
        assert!(waiter.await.expect("joined"));
        assert_eq!(slots.starved(Duration::ZERO), None);
    }
}
