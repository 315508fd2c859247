//! [`CpuTurns`]: how many guest calls compute at once, and who computes next. A call
//! computes only while it holds a turn; it gives the turn back at every epoch tick
//! (10 ms) and while it waits for the host (a Kubernetes request, a daemon's sleep), and
//! queues for the next one. Fewer turns than executor threads leave the host's own work
//! (watches, patches, the API client) a thread however many guests spin.
//!
//! Short calls (handlers, activities) come first: a turn goes to a waiting background
//! call (timer, daemon) only once for every [`URGENT_FIRST`] turns handed to short calls
//! while both wait, so long-running calls never slow short ones much, and still progress.
//!
//! A guest can also wait inside WASI (a `poll` on a clock, i.e. a sleep), which the host
//! does not see: a turn held for longer than [`LEASE`] while others wait is taken back
//! and passed on. A holder that was in fact computing gives its stale turn up at its next
//! epoch tick, so at most one tick is computed without a turn.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
// Tokio's clock, so that the leases follow it when tests pause it (the same clock
// otherwise).
use tokio::time::Instant;

use super::slots::Pool;

/// Turns handed to waiting short calls before a waiting background call gets one.
const URGENT_FIRST: u32 = 4;

/// How long a turn may be held while others wait: several epoch ticks, so a computing
/// call (which gives its turn back at every tick) never loses it.
const LEASE: Duration = Duration::from_millis(50);

/// The turns of a runtime; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct CpuTurns {
    inner: Arc<Mutex<Queue>>,
}

#[derive(Debug)]
struct Queue {
    free: usize,
    urgent: VecDeque<oneshot::Sender<Turn>>,
    background: VecDeque<oneshot::Sender<Turn>>,
    /// Turns handed to short calls since a background call last got one.
    urgent_streak: u32,
    /// The turns held, by id: since when.
    held: HashMap<u64, Instant>,
    next_id: u64,
}

/// One turn; dropping it hands it to the next waiter (or frees it), unless it was taken
/// back meanwhile.
#[derive(Debug)]
pub(crate) struct Turn {
    turns: Option<CpuTurns>,
    id: u64,
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Some(turns) = self.turns.take() {
            turns.release(self.id);
        }
    }
}

impl CpuTurns {
    /// `count` turns (at least one).
    pub(crate) fn new(count: usize) -> CpuTurns {
        CpuTurns {
            inner: Arc::new(Mutex::new(Queue {
                free: count.max(1),
                urgent: VecDeque::new(),
                background: VecDeque::new(),
                urgent_streak: 0,
                held: HashMap::new(),
                next_id: 0,
            })),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Each change is a push, a pop or a count: a panic cannot leave it torn.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for a turn, in `pool`'s queue.
    pub(crate) async fn take(&self, pool: Pool) -> Turn {
        let waiting = {
            let mut queue = self.queue();
            let nobody_first = match pool {
                Pool::Background => queue.urgent.is_empty() && queue.background.is_empty(),
                Pool::Handlers | Pool::Activities | Pool::Admission => queue.urgent.is_empty(),
            };
            if queue.free > 0 && nobody_first {
                queue.free -= 1;
                return self.grant(&mut queue);
            }
            let (sender, receiver) = oneshot::channel();
            match pool {
                Pool::Background => queue.background.push_back(sender),
                Pool::Handlers | Pool::Activities | Pool::Admission => {
                    queue.urgent.push_back(sender);
                }
            }
            receiver
        };
        tokio::pin!(waiting);
        loop {
            tokio::select! {
                // A turn sent to a waiter that gave up comes back through its drop. The
                // sender is only dropped unsent with the queue, which `self` keeps alive:
                // then the turn counts for nothing.
                turn = &mut waiting => {
                    return turn.unwrap_or(Turn { turns: None, id: u64::MAX });
                }
                () = tokio::time::sleep(LEASE) => self.take_back_stale(),
            }
        }
    }

    /// A new turn, held from now on.
    fn grant(&self, queue: &mut Queue) -> Turn {
        let id = queue.next_id;
        queue.next_id = queue.next_id.wrapping_add(1);
        queue.held.insert(id, Instant::now());
        Turn {
            turns: Some(self.clone()),
            id,
        }
    }

    /// Turns held past their lease go to the waiters.
    fn take_back_stale(&self) {
        let mut queue = self.queue();
        let stale: Vec<u64> = queue
            .held
            .iter()
            .filter(|(_, since)| since.elapsed() > LEASE)
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            queue.held.remove(&id);
            self.pass_on(&mut queue);
        }
    }

    /// The turn `id` ended: the next waiter gets it, else it is free (nothing, when it
    /// was taken back already).
    fn release(&self, id: u64) {
        let mut queue = self.queue();
        if queue.held.remove(&id).is_some() {
            self.pass_on(&mut queue);
        }
    }

    /// One turn is to be had: the next waiter gets it, else it is free.
    fn pass_on(&self, queue: &mut Queue) {
        loop {
            let background_due = queue.urgent_streak >= URGENT_FIRST || queue.urgent.is_empty();
            let (sender, urgent) = if background_due && !queue.background.is_empty() {
                (queue.background.pop_front(), false)
            } else {
                (queue.urgent.pop_front(), true)
            };
            let Some(sender) = sender else {
                queue.free += 1;
                return;
            };
            let turn = self.grant(queue);
            match sender.send(turn) {
                // Only turns a call got count (a waiter that gave up is no turn served).
                Ok(()) => {
                    queue.urgent_streak = if urgent {
                        queue.urgent_streak.saturating_add(1)
                    } else {
                        0
                    };
                    return;
                }
                // That waiter gave up: disarm the turn (its drop would take this lock)
                // and try the next one.
                Err(mut turn) => {
                    queue.held.remove(&turn.id);
                    turn.turns = None;
                }
            }
        }
    }
}

/// One call's use of the turns: the turn it holds while it computes. Cheap to clone (the
/// epoch callback and the host imports share it).
#[derive(Debug, Clone)]
pub(crate) struct CallTurns {
    turns: CpuTurns,
    pool: Pool,
    held: Arc<Mutex<Option<Turn>>>,
}

impl CallTurns {
    /// A call of `pool` taking its turns from `turns`; it holds none yet.
    pub(crate) fn new(turns: &CpuTurns, pool: Pool) -> CallTurns {
        CallTurns {
            turns: turns.clone(),
            pool,
            held: Arc::default(),
        }
    }

    fn held(&self) -> MutexGuard<'_, Option<Turn>> {
        // Only an `Option` is inside: a panic cannot leave it torn.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until the call holds a turn (at once if it does).
    pub(crate) async fn compute(&self) {
        if self.held().is_some() {
            return;
        }
        let turn = self.turns.take(self.pool).await;
        *self.held() = Some(turn);
    }

    /// The call stops computing (it waits for the host, or yields): its turn goes on.
    pub(crate) fn pause(&self) {
        let turn = self.held().take();
        drop(turn);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn soon<T>(future: impl Future<Output = T>) -> Option<T> {
        tokio::time::timeout(Duration::from_millis(20), future)
            .await
            .ok()
    }

    // Paused: the leases (on tokio's clock) run out only when the test lets it advance.
    #[tokio::test(start_paused = true)]
    async fn short_calls_come_first_and_background_calls_still_progress() {
        let turns = CpuTurns::new(1);
        let held = turns.take(Pool::Handlers).await;
        assert!(soon(turns.take(Pool::Handlers)).await.is_none(), "one turn");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for (name, pool) in [("b1", Pool::Background)]
            .into_iter()
            .chain((0..6).map(|i| (["u0", "u1", "u2", "u3", "u4", "u5"][i], Pool::Handlers)))
        {
            let (turns, order) = (turns.clone(), Arc::clone(&order));
            waiters.push(tokio::spawn(async move {
                let turn = turns.take(pool).await;
                order.lock().unwrap().push(name);
                tokio::task::yield_now().await;
                drop(turn);
            }));
            tokio::task::yield_now().await;
        }
        drop(held);
        for waiter in waiters {
            waiter.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(order, ["u0", "u1", "u2", "u3", "b1", "u4", "u5"]);
        assert!(soon(turns.take(Pool::Background)).await.is_some(), "freed");
    }

    #[tokio::test]
    async fn a_turn_held_while_others_wait_is_taken_back_after_its_lease() {
        let turns = CpuTurns::new(1);
        let sleeper = turns.take(Pool::Handlers).await;
        let started = Instant::now();
        let turn = turns.take(Pool::Handlers).await;
        assert!(started.elapsed() >= LEASE, "{:?}", started.elapsed());
        // The stale turn gives nothing back; the live one does. (Counted, not taken with
        // a timeout: under load the live turn could outlive its lease while a taker waits.)
        drop(sleeper);
        assert_eq!(turns.queue().free, 0);
        drop(turn);
        assert_eq!(turns.queue().free, 1);
        assert!(soon(turns.take(Pool::Handlers)).await.is_some());
    }
}
