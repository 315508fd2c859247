//! Per-object queues: events of one object are processed strictly in order,
//! objects in parallel (KOPF.md §6.3).
//!
//! Each object's events wait in its inbox. An object gets a worker (a task) only when a
//! turn of its stream is free (`objects::memory`): until then it costs its queued events
//! and an entry here, not a task with its future. A backlog of 10,000 objects listed at
//! start is 10,000 inboxes and a few dozen workers, not 10,000 tasks and channels, which
//! also left the allocator's pages half used once they ended (docs/performance.md).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::events::{EventType, QueuedEvent};
use super::memory::{TurnPermit, Turns};
use crate::handlers::ObjectKey;
use crate::metrics::Gauge;

/// Routes each object's events to that object's inbox, and starts a worker for an
/// object that has none as soon as one of the stream's turns is free. One router serves
/// one stream.
///
/// A worker with nothing to do for the idle timeout (`queueing.idle_timeout`, 5 s by
/// default, Kopf's) takes its inbox out of the map and ends: an idle object costs no task, no inbox and no entry here (its memory lives
/// on in `objects::memory`). Routing and retiring happen under the map's lock, so an
/// event is never left in an inbox whose worker is retiring.
pub(crate) struct Router<F> {
    shared: Arc<Shared<F>>,
    /// Starts the workers of waiting objects, one per free turn.
    starter: JoinHandle<()>,
}

struct Shared<F> {
    workers: Mutex<Workers>,
    process: F,
    /// The stream's turns: a worker starts holding one.
    turns: Turns,
    /// How long a worker waits for its object's next event before it leaves.
    idle_timeout: Duration,
    /// An object began to wait for a worker.
    waiting: Notify,
}

/// The inboxes by object, and those waiting for a worker in the order they came.
#[derive(Default)]
struct Workers {
    by_key: HashMap<ObjectKey, Arc<Inbox>>,
    waiting: VecDeque<Arc<Inbox>>,
    /// Counts the objects with events queued or in progress (a metric).
    gauge: Gauge,
    /// The router is shutting down: the starter ends once no object waits.
    stopping: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change under these locks is a single insert, remove or count: a panic cannot
    // tear them.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One object's events not yet processed, and whether a worker serves them.
struct Inbox {
    key: ObjectKey,
    state: Mutex<InboxState>,
    /// An event was queued, or the inbox was closed.
    arrived: Notify,
    gauge: Gauge,
}

#[derive(Default)]
struct InboxState {
    events: VecDeque<QueuedEvent>,
    /// Events routed and not yet processed: the queued ones and the one in progress.
    /// The gauge counts the inboxes with any: it goes up when this leaves 0 and down when
    /// it returns to 0, so that whatever the interleaving of routing, processing and a
    /// worker's end, each inbox adds 0 or 1.
    unfinished: usize,
    /// The object's deletion was routed: the worker ends once it has processed it (uids
    /// are never reused, so nothing else will come for this key).
    closed: bool,
    /// Its worker, once started; `ended` once that worker is gone.
    worker: Option<JoinHandle<()>>,
    ended: bool,
}

impl Inbox {
    fn new(key: ObjectKey, gauge: Gauge) -> Arc<Inbox> {
        Arc::new(Inbox {
            key,
            state: Mutex::default(),
            arrived: Notify::new(),
            gauge,
        })
    }

    fn state(&self) -> MutexGuard<'_, InboxState> {
        lock(&self.state)
    }

    fn push(&self, event: QueuedEvent) {
        let mut state = self.state();
        if event.event_type == EventType::Deleted {
            state.closed = true;
        }
        state.events.push_back(event);
        if state.unfinished == 0 {
            self.gauge.increment();
        }
        state.unfinished += 1;
        drop(state);
        self.arrived.notify_one();
    }

    /// No more events will come: its worker ends once it has processed those it has.
    fn close(&self) {
        self.state().closed = true;
        self.arrived.notify_one();
    }

    /// One event was processed.
    fn done(&self) {
        let mut state = self.state();
        if state.unfinished > 0 {
            state.unfinished -= 1;
            if state.unfinished == 0 {
                self.gauge.decrement();
            }
        }
    }

    /// Its worker ended (idle, closed, aborted at shutdown, or panicked), or it never
    /// started: nothing is pending any more.
    fn end(&self) {
        let mut state = self.state();
        state.ended = true;
        state.events.clear();
        if state.unfinished > 0 {
            state.unfinished = 0;
            self.gauge.decrement();
        }
    }
}

/// Ends a worker's inbox however its task ends.
struct EndOnDrop(Arc<Inbox>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.end();
    }
}

impl<F, Fut> Router<F>
where
    F: Fn(QueuedEvent, Option<TurnPermit>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    /// A router whose workers start holding one of `turns` (handed to `process` with the
    /// worker's first event), and leave after `idle_timeout` without an event.
    pub(crate) fn new(turns: Turns, idle_timeout: Duration, process: F) -> Self {
        let shared = Arc::new(Shared {
            workers: Mutex::default(),
            process,
            turns,
            idle_timeout,
            waiting: Notify::new(),
        });
        let starter = tokio::spawn(start_workers(Arc::clone(&shared)));
        Router { shared, starter }
    }

    /// Counts this router's objects with work in `gauge`.
    pub(crate) fn counted(self, gauge: Gauge) -> Self {
        lock(&self.shared.workers).gauge = gauge;
        self
    }

    /// Queues an event behind the object's earlier events.
    pub(crate) fn route(&mut self, event: QueuedEvent) {
        let deleted = event.event_type == EventType::Deleted;
        let mut workers = lock(&self.shared.workers);
        let live = workers
            .by_key
            .get(&event.key)
            .filter(|inbox| !inbox.state().ended)
            .cloned();
        let key = event.key.clone();
        let inbox = match live {
            Some(inbox) => inbox,
            // New, retired, or its worker died (panicked) without retiring: a new inbox
            // waits for a worker.
            None => {
                let inbox = Inbox::new(key.clone(), workers.gauge.clone());
                workers.by_key.insert(key.clone(), Arc::clone(&inbox));
                workers.waiting.push_back(Arc::clone(&inbox));
                self.shared.waiting.notify_one();
                inbox
            }
        };
        inbox.push(event);
        if deleted {
            // Its worker (or the starter) holds the inbox until the deletion is processed.
            workers.by_key.remove(&key);
        }
    }

    /// Stops routing; every object's events still queued are processed (the waiting
    /// objects' workers start as turns free up), bounded by `grace`; then the workers
    /// left are aborted. No worker runs once this returns.
    pub(crate) async fn shutdown(mut self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        let inboxes: Vec<Arc<Inbox>> = {
            let mut workers = lock(&self.shared.workers);
            workers.stopping = true;
            let mut inboxes: Vec<Arc<Inbox>> = workers.by_key.drain().map(|(_, i)| i).collect();
            inboxes.extend(workers.waiting.iter().cloned());
            inboxes
        };
        for inbox in &inboxes {
            inbox.close();
        }
        self.shared.waiting.notify_one();
        if tokio::time::timeout_at(deadline, &mut self.starter)
            .await
            .is_err()
        {
            self.starter.abort();
            // Ended at its next await: no worker starts after this.
            let _ = (&mut self.starter).await;
        }
        let workers: Vec<JoinHandle<()>> = inboxes
            .iter()
            .filter_map(|inbox| inbox.state().worker.take())
            .collect();
        let aborts: Vec<_> = workers.iter().map(JoinHandle::abort_handle).collect();
        let all = futures::future::join_all(workers);
        tokio::pin!(all);
        if tokio::time::timeout_at(deadline, &mut all).await.is_err() {
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
            all.await;
        }
        // Those that never started: their events are dropped uncounted.
        for inbox in &inboxes {
            inbox.end();
        }
    }
}

impl<F> Drop for Router<F> {
    fn drop(&mut self) {
        self.starter.abort();
    }
}

/// Starts the worker of the longest-waiting object each time a turn is free.
async fn start_workers<F, Fut>(shared: Arc<Shared<F>>)
where
    F: Fn(QueuedEvent, Option<TurnPermit>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        // Registered before the queue is looked at: an object queued in between wakes it.
        let queued = shared.waiting.notified();
        tokio::pin!(queued);
        queued.as_mut().enable();
        let (empty, stopping) = {
            let workers = lock(&shared.workers);
            (workers.waiting.is_empty(), workers.stopping)
        };
        if empty {
            if stopping {
                return;
            }
            queued.await;
            continue;
        }
        // The semaphores are never closed; if they were, objects would start without a turn.
        let turn = shared.turns.take().await;
        let mut workers = lock(&shared.workers);
        // Only this task takes from the queue (shutdown aside): it is still there.
        let Some(inbox) = workers.waiting.pop_front() else {
            continue;
        };
        let worker = tokio::spawn(work(Arc::clone(&shared), Arc::clone(&inbox), turn));
        inbox.state().worker = Some(worker);
    }
}

/// An object's worker: processes its inbox's events in order, the first one holding
/// `turn`, until the inbox is closed or has been idle for the idle timeout.
async fn work<F, Fut>(shared: Arc<Shared<F>>, inbox: Arc<Inbox>, turn: Option<TurnPermit>)
where
    F: Fn(QueuedEvent, Option<TurnPermit>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let _end = EndOnDrop(Arc::clone(&inbox));
    let mut turn = turn;
    while let Some(event) = next_event(&shared, &inbox).await {
        (shared.process)(event, turn.take()).await;
        inbox.done();
    }
}

/// The inbox's next event; none once it is closed and drained, or idle for the idle
/// timeout (then the inbox leaves the map, under its lock).
async fn next_event<F>(shared: &Shared<F>, inbox: &Arc<Inbox>) -> Option<QueuedEvent> {
    loop {
        let arrived = inbox.arrived.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        {
            let mut state = inbox.state();
            if let Some(event) = state.events.pop_front() {
                return Some(event);
            }
            if state.closed {
                return None;
            }
        }
        if tokio::time::timeout(shared.idle_timeout, arrived)
            .await
            .is_err()
        {
            let mut workers = lock(&shared.workers);
            let mut state = inbox.state();
            // Routed just before the lock was taken: not idle after all.
            if let Some(event) = state.events.pop_front() {
                return Some(event);
            }
            drop(state);
            // Out of the map under its lock: nothing more is routed here (the worker's
            // end marks the inbox ended).
            if workers
                .by_key
                .get(&inbox.key)
                .is_some_and(|live| Arc::ptr_eq(live, inbox))
            {
                workers.by_key.remove(&inbox.key);
            }
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;
    use tokio::sync::Semaphore;

    /// Kopf's default `queueing.idle_timeout`.
    const IDLE: Duration = Duration::from_secs(5);

    fn turns(objects: usize) -> Turns {
        Turns::new(objects, None)
    }

    fn ev(key: &str, n: u64) -> QueuedEvent {
        QueuedEvent {
            event_type: EventType::Modified,
            key: key.into(),
            text: Arc::from(json!({"n": n}).to_string()),
        }
    }

    #[tokio::test]
    async fn one_object_in_order_many_objects_in_parallel() {
        let seen: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
        let log = seen.clone();
        // "a" waits until "b" is done: only objects processed in parallel get there.
        let b_done = Arc::new(tokio::sync::Semaphore::new(0));
        let mut router = Router::new(turns(64), IDLE, move |e: QueuedEvent, _turn| {
            let (log, b_done) = (log.clone(), b_done.clone());
            async move {
                let n = e.clone().parsed(true).body["n"]
                    .as_u64()
                    .unwrap_or_default();
                if e.key == "a" && n == 0 {
                    let waited =
                        tokio::time::timeout(Duration::from_secs(10), b_done.acquire()).await;
                    assert!(waited.is_ok(), "b was not processed while a waited");
                }
                log.lock().unwrap().push((e.key.clone(), n));
                if e.key == "b" && n == 4 {
                    b_done.add_permits(1);
                }
            }
        });
        for n in 0..5 {
            router.route(ev("a", n));
            router.route(ev("b", n));
        }
        router.shutdown(Duration::from_secs(5)).await;
        let seen = seen.lock().unwrap().clone();
        let of = |k: &str| {
            seen.iter()
                .filter(|(key, _)| key == k)
                .map(|(_, n)| *n)
                .collect::<Vec<_>>()
        };
        assert_eq!(of("a"), vec![0, 1, 2, 3, 4]);
        assert_eq!(of("b"), vec![0, 1, 2, 3, 4]);
        assert_eq!(
            seen[..5],
            (0..5).map(|n| ("b".to_owned(), n)).collect::<Vec<_>>(),
            "objects are processed in parallel"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn idle_workers_leave_and_come_back() {
        let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
        let log = seen.clone();
        let mut router = Router::new(turns(64), IDLE, move |e: QueuedEvent, _turn| {
            let log = log.clone();
            async move {
                let n = e.clone().parsed(true).body["n"]
                    .as_u64()
                    .unwrap_or_default();
                log.lock().unwrap().push(n);
            }
        });
        router.route(ev("a", 0));
        tokio::time::sleep(IDLE * 2).await;
        assert_eq!(
            lock(&router.shared.workers).by_key.len(),
            0,
            "an idle worker keeps no task, queue or entry"
        );
        router.route(ev("a", 1));
        router.route(ev("a", 2));
        router.shutdown(Duration::from_secs(5)).await;
        assert_eq!(*seen.lock().unwrap(), vec![0, 1, 2]);
    }

    /// `queueing.idle_timeout`: a worker stays that long after its last event, and no
    /// longer.
    #[tokio::test(start_paused = true)]
    async fn workers_leave_after_the_idle_timeout_given() {
        let mut router = Router::new(turns(64), Duration::from_secs(30), |_, _turn| async {});
        router.route(ev("a", 0));
        let workers = |router: &Router<_>| lock(&router.shared.workers).by_key.len();
        tokio::time::sleep(IDLE * 2).await;
        assert_eq!(workers(&router), 1, "still waiting for an event at 10 s");
        tokio::time::sleep(Duration::from_secs(25)).await;
        assert_eq!(workers(&router), 0, "gone at 35 s");
        router.shutdown(Duration::from_secs(1)).await;
    }

    fn queued(metrics: &crate::metrics::Metrics) -> Option<String> {
        metrics
            .render()
            .lines()
            .find_map(|l| l.strip_prefix("kapsel_queue_objects{resource=\"r\"} "))
            .map(str::to_owned)
    }

    /// The gauge once it shows `expected`, or after 2 s.
    async fn eventually(metrics: &crate::metrics::Metrics, expected: &str) -> Option<String> {
        for _ in 0..200 {
            if queued(metrics).as_deref() == Some(expected) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        queued(metrics)
    }

    #[tokio::test]
    async fn the_gauge_counts_objects_with_work() {
        let metrics = crate::metrics::Metrics::default();
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let held = gate.clone();
        let mut router = Router::new(turns(64), IDLE, move |_: QueuedEvent, _turn| {
            let held = held.clone();
            async move {
                let _ = held.acquire().await.map(|p| p.forget());
            }
        })
        .counted(metrics.queue("r"));
        for n in 0..3 {
            router.route(ev("a", n));
        }
        router.route(ev("b", 0));
        assert_eq!(
            queued(&metrics).as_deref(),
            Some("2"),
            "two objects, four events"
        );
        gate.add_permits(3);
        assert_eq!(
            eventually(&metrics, "1").await.as_deref(),
            Some("1"),
            "one object still waits"
        );
        // Stopping aborts the waiting worker: nothing is left counted, and nothing runs
        // (its future, which holds the gate, is gone once shutdown returns).
        router.shutdown(Duration::from_millis(50)).await;
        assert_eq!(
            Arc::strong_count(&gate),
            1,
            "a worker outlived the shutdown"
        );
        assert_eq!(eventually(&metrics, "0").await.as_deref(), Some("0"));
    }

    #[tokio::test]
    async fn objects_wait_for_a_turn_as_events_without_a_worker() {
        let gate = Arc::new(Semaphore::new(0));
        let started: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
        let (log, held) = (started.clone(), gate.clone());
        let mut router = Router::new(turns(2), IDLE, move |e: QueuedEvent, turn| {
            let (log, held) = (log.clone(), held.clone());
            async move {
                log.lock().unwrap().push((e.key.clone(), turn.is_some()));
                let _turn = turn;
                let _ = held.acquire().await.map(|p| p.forget());
            }
        });
        for n in 0..5 {
            router.route(ev(&format!("o{n}"), 0));
        }
        // Until both turns are in use (at most 20 s on a loaded machine).
        for _ in 0..2000 {
            if started.lock().unwrap().len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        {
            let workers = lock(&router.shared.workers);
            let with_a_worker = workers
                .by_key
                .values()
                .filter(|inbox| inbox.state().worker.is_some())
                .count();
            assert_eq!(with_a_worker, 2, "one worker per turn");
            let waiting: Vec<&str> = workers.waiting.iter().map(|i| i.key.as_str()).collect();
            assert_eq!(waiting, ["o2", "o3", "o4"], "the others wait in order");
        }
        gate.add_permits(5);
        router.shutdown(Duration::from_secs(5)).await;
        let mut started = started.lock().unwrap().clone();
        started.sort();
        assert_eq!(
            started,
            (0..5).map(|n| (format!("o{n}"), true)).collect::<Vec<_>>(),
            "every object started holding a turn"
        );
    }
}
