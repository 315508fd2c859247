//! What the operator remembers about each object between its events (KOPF.md §6.3):
//! whether it was first seen in a listing, whether it was fully handled once, its memo,
//! the error throttler, the resourceVersion its last patch produced, and a finalizer
//! change the server refused (422) that the next cycle retries, and its own writes in a
//! row (`self_triggers`).
//!
//! Memories outlive the per-object workers (which idle out: `queueing.idle_timeout`) and
//! the watch streams (which stop while paused); they are forgotten when the object is
//! deleted.
//! Each memory also counts the events routed to the object, so that the object's sleeps
//! (delays, consistency waits, throttling) end as soon as a newer event is queued.
//!
//! Objects take turns: at most [`OBJECTS_IN_FLIGHT`] of a stream are handled at once, the
//! others wait for a turn in the order their events came (a backlog of N objects listed
//! at start is handled a few dozen at a time, not as N futures with their bodies and
//! causes all at once; an object without a worker waits in `objects::queue` as its
//! events only, and its worker starts holding the turn it was given). An object gives its
//! turn back while it sleeps or waits for the indexes, so a sleeping object never holds
//! up the others; each stream has turns of its own, so a slow resource never holds up
//! another. With `queueing.worker_limit`, an object also takes one of the operator's turns,
//! which all streams share ([`Turns`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use chrono::{DateTime, Utc};

use super::self_triggers::{SelfTriggers, Streak};
use super::tasks::ObjectTasks;
use crate::clock::{Clock, Sleep};
use crate::handlers::ObjectKey;
use crate::metrics::Gauge;
use crate::reactor::changes::FinalizerChange;

/// Every object's memory, shared by all streams (keys are uids: unique cluster-wide).
#[derive(Debug, Clone, Default)]
pub(crate) struct Memories {
    map: Arc<Mutex<HashMap<ObjectKey, Arc<ObjectMemory>>>>,
    /// Objects forgotten lately (deleted): all their versions count as seen.
    forgotten: Arc<Mutex<VecDeque<ObjectKey>>>,
    /// How many objects are remembered, for the metrics.
    gauge: Gauge,
}

/// How many objects of a stream are handled at once by default
/// (`queueing.objects_in_flight`): several times the default call slots (16), so that the
/// guests stay busy while other objects' patches are on their way.
#[cfg(test)]
pub(crate) const OBJECTS_IN_FLIGHT: usize = 64;

/// `objects` turns to share (see the module's documentation): a stream's, or the
/// operator's.
pub(crate) fn turns(objects: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(objects.clamp(1, Semaphore::MAX_PERMITS)))
}

/// Where a stream's objects take their turns: the stream's own turns
/// (`queueing.objects_in_flight`), and the operator's, which all streams share, when
/// `queueing.worker_limit` bounds the objects handled at once across the operator.
#[derive(Debug, Clone)]
pub(crate) struct Turns {
    stream: Arc<Semaphore>,
    operator: Option<Arc<Semaphore>>,
}

/// One object's turn: one of its stream's, and one of the operator's if they are
/// bounded. Given back when dropped.
#[derive(Debug)]
pub(crate) struct TurnPermit {
    stream: OwnedSemaphorePermit,
    operator: Option<OwnedSemaphorePermit>,
}

impl Turns {
    /// `objects` turns for one stream, within the operator's turns if any.
    pub(crate) fn new(objects: usize, operator: Option<Arc<Semaphore>>) -> Turns {
        Turns {
            stream: turns(objects),
            operator,
        }
    }

    /// Waits for a turn: the stream's first, then the operator's, always in this
    /// order, so that no two objects each hold what the other waits for. `None` only
    /// if a semaphore were closed (none ever is): handling without a turn.
    pub(crate) async fn take(&self) -> Option<TurnPermit> {
        let stream = Arc::clone(&self.stream).acquire_owned().await.ok()?;
        let operator = match &self.operator {
            Some(operator) => Some(Arc::clone(operator).acquire_owned().await.ok()?),
            None => None,
        };
        Some(TurnPermit { stream, operator })
    }
}

impl TurnPermit {
    /// Where it came from, to take another one there.
    fn turns(&self) -> Turns {
        Turns {
            stream: Arc::clone(self.stream.semaphore()),
            operator: self.operator.as_ref().map(|p| Arc::clone(p.semaphore())),
        }
    }
}

/// How many deleted objects [`Memories::has_seen`] remembers as seen.
const FORGOTTEN: usize = 256;

impl Memories {
    /// Memories that count themselves on `gauge`.
    pub(crate) fn counted(gauge: Gauge) -> Memories {
        Memories {
            gauge,
            ..Memories::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ObjectKey, Arc<ObjectMemory>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An event for this object was queued: wake its sleeps.
    pub(crate) fn arrived(&self, key: &ObjectKey) {
        let memory = self.get(key);
        memory.arrivals.fetch_add(1, Ordering::SeqCst);
        memory.arrived.notify_waiters();
    }

    /// The object's memory, created on first use.
    pub(crate) fn get(&self, key: &ObjectKey) -> Arc<ObjectMemory> {
        self.lock()
            .entry(key.clone())
            .or_insert_with(|| {
                self.gauge.increment();
                Arc::default()
            })
            .clone()
    }

    /// The object is gone: forget it.
    pub(crate) fn forget(&self, key: &ObjectKey) {
        if self.lock().remove(key).is_some() {
            self.gauge.decrement();
        }
        let mut forgotten = self.forgotten.lock().unwrap_or_else(|p| p.into_inner());
        if forgotten.len() == FORGOTTEN {
            forgotten.pop_front();
        }
        forgotten.push_back(key.clone());
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    #[cfg(feature = "testing")]
    /// Nothing is happening: every routed event was processed, no worker is busy (a
    /// worker sleeping on handler time is idle), and no patch awaits its echo. `kapsel
    /// test` waits for this before it advances handler time.
    pub(crate) fn settled(&self, now: DateTime<Utc>) -> bool {
        self.lock().values().all(|m| {
            let state = m.state();
            !m.working.load(Ordering::SeqCst)
                && m.arrivals.load(Ordering::SeqCst) == state.processed
                && state.expected_version.is_none()
                && state.sleeping_until.is_none_or(|until| until > now)
                && m.tasks.settled(now)
        })
    }

    #[cfg(feature = "testing")]
    /// Whether the object's event with this resourceVersion (or a later one) was seen,
    /// or the object is gone from memory after being seen.
    pub(crate) fn has_seen(&self, key: &ObjectKey, version: &str) -> bool {
        let map = self.lock();
        let Some(memory) = map.get(key) else {
            return self
                .forgotten
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(key);
        };
        let state = memory.state();
        state
            .newest_version
            .as_deref()
            .is_some_and(|newest| is_at_least(newest, version))
    }
}

/// Whether the resourceVersion `newest` is `version` or later. The versions of the
/// embedded API server (and of etcd) are counters, compared as numbers; any other is only
/// known to be itself. One version per object instead of a history: the memory of every
/// object known is kept for as long as the object lives.
#[cfg(feature = "testing")]
fn is_at_least(newest: &str, version: &str) -> bool {
    match (newest.parse::<u64>(), version.parse::<u64>()) {
        (Ok(newest), Ok(version)) => newest >= version,
        _ => newest == version,
    }
}

/// One object's memory.
#[derive(Debug)]
pub(crate) struct ObjectMemory {
    /// Events routed to the object so far.
    arrivals: AtomicU64,
    /// Signalled at every arrival, for a sleep that a newer event ends. Kept in the memory
    /// itself (a channel would be another allocation of ~350 bytes for every object known).
    arrived: Notify,
    /// A worker is processing one of its events (not counting sleeps on handler time).
    working: AtomicBool,
    state: Mutex<MemoryState>,
    /// Its running timers and daemons (KOPF.md §1.9, §1.10).
    pub(crate) tasks: ObjectTasks,
    /// The turn its worker holds to be handled (its stream's, and the operator's if bounded).
    turn: Mutex<Option<TurnPermit>>,
}

impl Default for ObjectMemory {
    fn default() -> Self {
        ObjectMemory {
            arrivals: AtomicU64::new(0),
            arrived: Notify::new(),
            working: AtomicBool::new(false),
            state: Mutex::default(),
            tasks: ObjectTasks::default(),
            turn: Mutex::default(),
        }
    }
}

/// Gives the object's turn back however its handling ends (returned, or dropped when
/// its stream stopped): a turn is never lost.
pub(crate) struct Turn<'a>(&'a ObjectMemory);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.give_turn();
    }
}

/// The remembered facts; only the object's worker changes them, one event at a time,
/// through [`ObjectMemory`]'s methods, which keep them consistent.
#[derive(Debug, Default)]
struct MemoryState {
    /// Events processed so far (compared with the arrivals to spot newer events).
    processed: u64,
    /// Whether the first event of the object in this process came from a listing.
    noticed_by_listing: Option<bool>,
    /// A changing cycle finished (or had nothing to do) once: no resuming any more.
    fully_handled_once: bool,
    /// The operator-side memo handlers share for this object (JSON).
    memo: Option<String>,
    /// Throttling of unexpected errors (KOPF.md §5.4).
    throttler: Throttler,
    /// The resourceVersion of our last patch, until its event arrives (KOPF.md §4.8).
    expected_version: Option<(String, tokio::time::Instant)>,
    /// A finalizer change the server refused; retried in the next cycle.
    carried_finalizer: Option<FinalizerChange>,
    /// We released the deleting object (removed our finalizer): the events still in
    /// flight from before the release must not start its deletion handlers again.
    released: bool,
    /// A write of ours found the object gone (404). Its uid never comes back, so the
    /// events still queued from before the deletion change nothing more: a handler run
    /// for them would act for an object that no longer exists (with results written to
    /// `/status` but the object's patch refused, an echo says its cause is unhandled).
    gone: bool,
    /// The resourceVersion of its latest event (for `kapsel test`'s waits).
    newest_version: Option<Box<str>>,
    /// Until when its worker sleeps on handler time, if it does.
    sleeping_until: Option<DateTime<Utc>>,
    /// Timers or daemons match the object as last seen: they need the finalizer (KOPF.md §4.6).
    daemons_match: bool,
    /// Patches the operator sent for the object (a change of this count: it wrote).
    writes: u64,
    /// The handlers whose patch went into the current event's write, for reports.
    patched_by: Vec<String>,
    /// A changing handler concluded (succeeded, or failed for good) during the current
    /// event: its write records progress through the handlers, which is no loop.
    progressed: bool,
    /// Whether its handlers re-trigger themselves through their own patches.
    self_triggers: SelfTriggers,
}

impl ObjectMemory {
    fn turn(&self) -> MutexGuard<'_, Option<TurnPermit>> {
        self.turn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the object's turn to be handled; it lasts until the returned guard is
    /// dropped, except while the object sleeps ([`ObjectMemory::sleep_unless_newer`]) or
    /// [`ObjectMemory::waits_outside_its_turn`].
    pub(crate) async fn take_turn(&self, turns: &Turns) -> Turn<'_> {
        self.hold_turn(turns).await;
        Turn(self)
    }

    /// Hands the object a turn its worker started with (kept unless it holds one).
    pub(crate) fn hand_turn(&self, turn: TurnPermit) {
        self.turn().get_or_insert(turn);
    }

    async fn hold_turn(&self, turns: &Turns) {
        if self.turn().is_none() {
            let permit = turns.take().await;
            *self.turn() = permit;
        }
    }

    /// Gives the turn back: where it came from, if it held one.
    fn give_turn(&self) -> Option<Turns> {
        self.turn().take().map(|permit| permit.turns())
    }

    /// Waits for `wait` without holding a turn (others are handled meanwhile), then
    /// takes the turn back if it held one.
    pub(crate) async fn waits_outside_its_turn<T>(&self, wait: impl Future<Output = T>) -> T {
        let held = self.give_turn();
        let result = wait.await;
        if let Some(turns) = held {
            self.hold_turn(&turns).await;
        }
        result
    }

    /// The remembered facts.
    fn state(&self) -> MutexGuard<'_, MemoryState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks one more event (of this resourceVersion) as being processed; returns its
    /// sequence number. [`ObjectMemory::end_event`] marks the end.
    pub(crate) fn begin_event(&self, version: Option<&str>) -> u64 {
        self.working.store(true, Ordering::SeqCst);
        let mut state = self.state();
        state.processed += 1;
        if let Some(version) = version {
            state.newest_version = Some(version.into());
        }
        state.processed
    }

    /// An event of the object starts being handled (`listed`: it came from a listing):
    /// whether it is (part of) the echo of our last patch, and the count of our writes
    /// so far ([`ObjectMemory::note_writes`] compares with it afterwards).
    pub(crate) fn event_arrived(&self, listed: bool) -> (bool, u64) {
        let mut state = self.state();
        state.noticed_by_listing.get_or_insert(listed);
        state.patched_by.clear();
        state.progressed = false;
        (state.expected_version.is_some(), state.writes)
    }

    /// Whether a write of ours found the object gone: events from before its deletion
    /// change nothing more.
    pub(crate) fn is_gone(&self) -> bool {
        self.state().gone
    }

    /// Whether we released the deleting object (removed our finalizer).
    pub(crate) fn is_released(&self) -> bool {
        self.state().released
    }

    /// An event with this resourceVersion is being handled: if it is the echo of our
    /// last patch, the state is consistent again (KOPF.md §4.8).
    pub(crate) fn echo_arrived(&self, version: Option<&str>) {
        let mut state = self.state();
        if state
            .expected_version
            .as_ref()
            .is_some_and(|(expected, _)| version == Some(expected.as_str()))
        {
            state.expected_version = None;
        }
    }

    /// The resourceVersion our last patch produced and when it was sent, until its echo
    /// arrives.
    pub(crate) fn awaited_echo(&self) -> Option<(String, tokio::time::Instant)> {
        self.state().expected_version.clone()
    }

    /// The echo of our last patch is no longer waited for (it did not come in time).
    pub(crate) fn stop_awaiting_echo(&self) {
        self.state().expected_version = None;
    }

    /// Whether timers or daemons match the object as last seen (they need the finalizer).
    pub(crate) fn daemons_match(&self) -> bool {
        self.state().daemons_match
    }

    /// Notes whether timers or daemons match the object as now seen.
    pub(crate) fn set_daemons_match(&self, matching: bool) {
        self.state().daemons_match = matching;
    }

    /// Whether the object's changes are part of the operator's initial listing and no
    /// cycle finished yet: resuming handlers apply.
    pub(crate) fn is_initial(&self) -> bool {
        let state = self.state();
        state.noticed_by_listing == Some(true) && !state.fully_handled_once
    }

    /// A changing cycle finished (or had nothing to do): no resuming any more.
    pub(crate) fn handled_fully(&self) {
        self.state().fully_handled_once = true;
    }

    /// Takes the finalizer change the server refused last time, to try it again.
    pub(crate) fn take_carried_finalizer(&self) -> Option<FinalizerChange> {
        self.state().carried_finalizer.take()
    }

    /// The server refused a finalizer change, sending nothing of ours: the next cycle
    /// tries it again.
    pub(crate) fn release_refused(&self, change: Option<FinalizerChange>) {
        self.state().carried_finalizer = change;
    }

    /// A write of ours found the object gone (404): its queued events change nothing.
    pub(crate) fn gone(&self) {
        self.state().gone = true;
    }

    /// A write of ours was sent and answered: counts it; remembers the version it
    /// produced (its echo is awaited unless the object is being removed by it), a
    /// release that went through, and the finalizer change of the write when it was
    /// refused (`Some`: retried in the next cycle).
    pub(crate) fn wrote(
        &self,
        produced: Option<&str>,
        releasing: bool,
        refused: Option<Option<FinalizerChange>>,
    ) {
        let mut state = self.state();
        state.writes += 1;
        let was_refused = refused.is_some();
        if releasing && !was_refused {
            state.released = true;
        }
        if let Some(change) = refused {
            state.carried_finalizer = change;
        }
        // Releasing a deleting object's last finalizer deletes it: that version never arrives.
        state.expected_version = match produced {
            Some(version) if !releasing || was_refused => {
                Some((version.to_owned(), tokio::time::Instant::now()))
            }
            _ => None,
        };
    }

    /// A changing handler concluded during the current event (see `progressed`).
    pub(crate) fn progressed(&self) {
        self.state().progressed = true;
    }

    /// The memo handlers share for the object (JSON).
    pub(crate) fn memo(&self) -> Option<String> {
        self.state().memo.clone()
    }

    /// A handler returned the memo.
    pub(crate) fn set_memo(&self, memo: String) {
        self.state().memo = Some(memo);
    }

    /// A handler's patch goes into the event's write (named in reports).
    pub(crate) fn patched_by(&self, handler: &str) {
        let mut state = self.state();
        if !state.patched_by.iter().any(|id| id == handler) {
            state.patched_by.push(handler.to_owned());
        }
    }

    /// Handling the object failed unexpectedly: how long to throttle it (KOPF.md §5.4).
    pub(crate) fn throttle(&self, delays: &[Duration]) -> Option<Duration> {
        self.state().throttler.on_error(delays)
    }

    /// Handling the object succeeded: the throttling starts over.
    pub(crate) fn unthrottle(&self) {
        self.state().throttler.on_success();
    }

    /// How long to wait before handling an echo, while its handlers re-trigger
    /// themselves (see `SelfTriggers::backoff`).
    pub(crate) fn self_trigger_backoff(&self, min_delay: Duration, limit: u32) -> Option<Duration> {
        self.state().self_triggers.backoff(min_delay, limit)
    }

    /// After an event that was (`echo`) or was not the echo of our last write, handled
    /// after backing off for `waited`: the streak of self-triggering writes it makes (a
    /// write of ours for it, if our write count moved past `writes`, as
    /// [`ObjectMemory::event_arrived`] said it, is `quick` when it came that soon after
    /// the previous one; a write that records a changing handler's conclusion ends any
    /// streak: going through a list of handlers, one per cycle, is progress, not a loop),
    /// and which handlers' patches went into the write.
    pub(crate) fn note_writes(
        &self,
        writes: u64,
        (echo, waited): (bool, Duration),
        (quick, limit): (Duration, u32),
    ) -> (Streak, Vec<String>) {
        let mut state = self.state();
        let streak = if state.writes == writes {
            state.self_triggers.settled()
        } else {
            let continues = echo && !state.progressed;
            state
                .self_triggers
                .written(continues, Instant::now(), waited, quick, limit)
        };
        (streak, state.patched_by.clone())
    }

    /// The event's processing has ended.
    pub(crate) fn end_event(&self) {
        self.working.store(false, Ordering::SeqCst);
    }

    /// Whether an event newer than `seq` has been queued for the object.
    pub(crate) fn has_newer(&self, seq: u64) -> bool {
        self.arrivals.load(Ordering::SeqCst) > seq
    }

    /// Sleeps until `sleep` completes, or until an event newer than `seq` is queued.
    /// Returns `true` if a newer event ended the sleep.
    /// The object's turn is given back meanwhile.
    pub(crate) async fn sleep_unless_newer(&self, seq: u64, sleep: Sleep) -> bool {
        self.waits_outside_its_turn(async {
            let mut sleep = sleep;
            loop {
                // Registered before the count is read: an arrival in between still wakes it.
                let arrival = self.arrived.notified();
                tokio::pin!(arrival);
                arrival.as_mut().enable();
                if self.has_newer(seq) {
                    return true;
                }
                tokio::select! {
                    () = arrival => {}
                    () = &mut sleep => return self.has_newer(seq),
                }
            }
        })
        .await
    }

    /// Like [`ObjectMemory::sleep_unless_newer`], for sleeps on handler time until
    /// `deadline`: the worker counts as idle meanwhile, so that `kapsel test` may advance
    /// the clock; and as busy again as soon as the deadline has passed, even before the
    /// sleep's task has run (so that an advance is not mistaken for "nothing to do").
    pub(crate) async fn idle_unless_newer(
        &self,
        seq: u64,
        clock: &dyn Clock,
        deadline: DateTime<Utc>,
    ) -> bool {
        self.state().sleeping_until = Some(deadline);
        self.working.store(false, Ordering::SeqCst);
        let newer = self
            .sleep_unless_newer(seq, clock.sleep_until(deadline))
            .await;
        self.working.store(true, Ordering::SeqCst);
        self.state().sleeping_until = None;
        newer
    }
}

/// Per-object throttling of unexpected errors (KOPF.md §5.4): each error takes the next
/// delay (the last one repeats); the first success resets it. An empty list disables
/// throttling.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Throttler {
    errors: usize,
}

impl Throttler {
    /// An unexpected error happened: how long to skip this object's events.
    pub(crate) fn on_error(&mut self, delays: &[Duration]) -> Option<Duration> {
        let delay = delays.get(self.errors).or(delays.last()).copied()?;
        self.errors += 1;
        Some(delay)
    }

    /// Processing succeeded: start over.
    pub(crate) fn on_success(&mut self) {
        self.errors = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleep(duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }

    #[cfg(feature = "testing")]
    #[test]
    fn a_version_counts_as_seen_once_it_or_a_later_one_was() {
        let memories = Memories::default();
        let key: ObjectKey = "uid-1".to_owned();
        memories.get(&key).begin_event(Some("41"));
        assert!(memories.has_seen(&key, "40"));
        assert!(memories.has_seen(&key, "41"));
        assert!(!memories.has_seen(&key, "42"));
        memories.get(&key).begin_event(Some("opaque"));
        assert!(memories.has_seen(&key, "opaque"));
        assert!(
            !memories.has_seen(&key, "41"),
            "not comparable: only itself"
        );
    }

    #[tokio::test]
    async fn sleeps_end_when_a_newer_event_arrives() {
        let memories = Memories::default();
        let key: ObjectKey = "uid-1".into();
        memories.arrived(&key);
        let memory = memories.get(&key);
        let seq = memory.begin_event(None);
        assert!(!memory.has_newer(seq));

        let waker = memories.clone();
        let wake_key = key.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            waker.arrived(&wake_key);
        });
        let started = std::time::Instant::now();
        assert!(
            memory
                .sleep_unless_newer(seq, sleep(Duration::from_secs(30)))
                .await
        );
        assert!(started.elapsed() < Duration::from_secs(10));

        // Already newer: no sleep at all.
        assert!(
            memory
                .sleep_unless_newer(seq, sleep(Duration::from_secs(30)))
                .await
        );
        // The next event is the newest: the sleep runs out.
        let seq = memory.begin_event(None);
        assert!(
            !memory
                .sleep_unless_newer(seq, sleep(Duration::from_millis(10)))
                .await
        );
    }

    #[tokio::test]
    async fn objects_take_turns_and_give_them_back_while_sleeping() {
        let memories = Memories::default();
        let stream = Turns::new(OBJECTS_IN_FLIGHT, None);
        let keys: Vec<ObjectKey> = (0..=OBJECTS_IN_FLIGHT)
            .map(|n| format!("uid-{n}"))
            .collect();
        let held: Vec<_> = keys[..OBJECTS_IN_FLIGHT]
            .iter()
            .map(|key| memories.get(key))
            .collect();
        let mut turns = Vec::new();
        for memory in &held {
            turns.push(memory.take_turn(&stream).await);
        }
        let last = memories.get(&keys[OBJECTS_IN_FLIGHT]);
        let waiting =
            tokio::time::timeout(Duration::from_millis(50), last.take_turn(&stream)).await;
        assert!(waiting.is_err(), "every turn is taken");
        drop(waiting);

        // A sleeping object lets another one in, and has its turn again after.
        let sleeper = &held[0];
        let seq = sleeper.begin_event(None);
        let sleeping = sleeper.sleep_unless_newer(seq, sleep(Duration::from_millis(200)));
        let other = async {
            let turn = last.take_turn(&stream).await;
            drop(turn);
        };
        let (newer, ()) = tokio::join!(sleeping, other);
        assert!(!newer);
        assert!(sleeper.turn().is_some(), "the sleeper took its turn back");

        // Dropped turns (handling ended, or its future was dropped) are given back.
        drop(turns);
        let all: Vec<_> =
            futures::future::join_all(held.iter().map(|m| m.take_turn(&stream))).await;
        assert_eq!(all.len(), OBJECTS_IN_FLIGHT);
    }

    /// `queueing.worker_limit`: the operator's turns bound the objects of every stream
    /// together, each stream's own turns still bounding its objects; a sleeping object
    /// gives back both.
    #[tokio::test]
    async fn the_operators_turns_bound_all_streams_together() {
        let memories = Memories::default();
        let operator = turns(2);
        let (a, b) = (
            Turns::new(2, Some(Arc::clone(&operator))),
            Turns::new(2, Some(Arc::clone(&operator))),
        );
        let objects: Vec<Arc<ObjectMemory>> =
            (0..3).map(|n| memories.get(&format!("uid-{n}"))).collect();
        let first = objects[0].take_turn(&a).await;
        let second = objects[1].take_turn(&b).await;
        let third = tokio::time::timeout(Duration::from_millis(50), objects[2].take_turn(&b));
        assert!(
            third.await.is_err(),
            "two objects of two streams take both turns"
        );
        assert_eq!(a.stream.available_permits(), 1, "stream a still has one");

        let seq = objects[0].begin_event(None);
        let sleeping = objects[0].sleep_unless_newer(seq, sleep(Duration::from_millis(200)));
        let other = async {
            drop(objects[2].take_turn(&b).await);
        };
        let (newer, ()) = tokio::join!(sleeping, other);
        assert!(!newer, "the sleeper let another stream's object in");
        drop((first, second));
        assert_eq!(operator.available_permits(), 2, "every turn is back");
    }

    #[test]
    fn throttling_follows_kopfs_delays() {
        let delays: Vec<Duration> = crate::settings::Settings::default()
            .queueing
            .error_delays
            .into_iter()
            .map(crate::settings::seconds)
            .collect();
        let mut th = Throttler::default();
        let got: Vec<u64> = (0..17)
            .filter_map(|_| th.on_error(&delays))
            .map(|d| d.as_secs())
            .collect();
        assert_eq!(&got[..5], &[1, 1, 2, 3, 5]);
        assert_eq!(&got[14..], &[610, 610, 610], "the last delay repeats");
        th.on_success();
        assert_eq!(th.on_error(&delays), Some(Duration::from_secs(1)));
        assert_eq!(th.on_error(&[]), None, "an empty list disables throttling");
    }

    #[test]
    fn memories_survive_until_forgotten() {
        let memories = Memories::default();
        let key: ObjectKey = "uid-1".into();
        memories.get(&key).state().fully_handled_once = true;
        assert!(memories.get(&key).state().fully_handled_once);
        memories.forget(&key);
        assert!(!memories.get(&key).state().fully_handled_once);
        assert_eq!(memories.len(), 1);
    }
}
