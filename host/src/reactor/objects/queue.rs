//! Per-object queues: events of one object are processed strictly in order,
//! objects in parallel (KOPF.md §6.3).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::events::{EventType, QueuedEvent};
use crate::handlers::ObjectKey;
use crate::metrics::Gauge;

/// Kopf's `queueing.idle_timeout`: a worker with nothing to do goes away.
const WORKER_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Routes each object's events to that object's worker, creating workers on
/// demand. One router serves one stream.
///
/// A worker with nothing to do for [`WORKER_IDLE_TIMEOUT`] takes itself out of the map
/// and ends: an idle object costs no task, no channel and no entry here (its memory
/// lives on in `objects::memory`). Routing and retiring happen under the map's lock, so
/// an event is never sent to a worker that is retiring.
pub(crate) struct Router<F> {
    workers: Arc<Mutex<Workers>>,
    process: Arc<F>,
    /// Counts the objects with events queued or in progress (a metric).
    gauge: Gauge,
}

/// The live workers by object, each with the generation that tells it from a later
/// worker of the same object.
#[derive(Default)]
struct Workers {
    by_key: HashMap<ObjectKey, Worker>,
    generation: u64,
}

struct Worker {
    tx: mpsc::UnboundedSender<QueuedEvent>,
    task: JoinHandle<()>,
    pending: Arc<Pending>,
    generation: u64,
}

fn lock(workers: &Mutex<Workers>) -> std::sync::MutexGuard<'_, Workers> {
    // Every change under this lock is a single insert or remove: a panic cannot tear it.
    workers
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The events routed to one worker and not yet processed. The gauge counts the workers
/// with any: it goes up when the count leaves 0 and down when it returns to 0, so that
/// whatever the interleaving of routing, processing and a worker's end, each worker
/// adds 0 or 1.
struct Pending {
    events: Mutex<usize>,
    gauge: Gauge,
}

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn add(&self) {
        let mut events = self.lock();
        if *events == 0 {
            self.gauge.increment();
        }
        *events += 1;
    }

    fn done(&self) {
        let mut events = self.lock();
        if *events > 0 {
            *events -= 1;
            if *events == 0 {
                self.gauge.decrement();
            }
        }
    }

    /// The worker ended (idle, aborted at shutdown, or panicked): nothing is pending.
    fn clear(&self) {
        let mut events = self.lock();
        if *events > 0 {
            *events = 0;
            self.gauge.decrement();
        }
    }
}

/// Clears a worker's [`Pending`] however its task ends.
struct ClearOnDrop(Arc<Pending>);

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        self.0.clear();
    }
}

impl<F, Fut> Router<F>
where
    F: Fn(QueuedEvent) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    pub(crate) fn new(process: F) -> Self {
        Router {
            workers: Arc::default(),
            process: Arc::new(process),
            gauge: Gauge::default(),
        }
    }

    /// Counts this router's objects with work in `gauge`.
    pub(crate) fn counted(mut self, gauge: Gauge) -> Self {
        self.gauge = gauge;
        self
    }

    /// Queues an event behind the object's earlier events.
    pub(crate) fn route(&mut self, event: QueuedEvent) {
        let key = event.key.clone();
        let deleted = event.event_type == EventType::Deleted;
        let mut workers = lock(&self.workers);
        let event = match workers.by_key.get(&key) {
            Some(worker) => {
                worker.pending.add();
                match worker.tx.send(event) {
                    Ok(()) => None,
                    // The worker died (panicked) without retiring: start a new one below.
                    Err(mpsc::error::SendError(event)) => {
                        worker.pending.done();
                        Some(event)
                    }
                }
            }
            None => Some(event),
        };
        if let Some(event) = event {
            workers.generation += 1;
            let generation = workers.generation;
            let worker = self.spawn(key.clone(), generation, event);
            workers.by_key.insert(key.clone(), worker);
        }
        if deleted {
            // The worker drains its queue and ends once the sender is gone;
            // uids are never reused, so nothing else will come for this key.
            workers.by_key.remove(&key);
        }
    }

    fn spawn(&self, key: ObjectKey, generation: u64, first: QueuedEvent) -> Worker {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let pending = Arc::new(Pending {
            events: Mutex::new(0),
            gauge: self.gauge.clone(),
        });
        pending.add();
        let _ = tx.send(first);
        let process = self.process.clone();
        let workers = self.workers.clone();
        let done = ClearOnDrop(pending.clone());
        let task = tokio::spawn(async move {
            loop {
                let event = match tokio::time::timeout(WORKER_IDLE_TIMEOUT, rx.recv()).await {
                    Ok(Some(event)) => event,
                    // Routed a deletion: the router let go of this worker.
                    Ok(None) => return,
                    Err(_idle) => {
                        let mut live = lock(&workers);
                        match rx.try_recv() {
                            // Routed just before the lock was taken: not idle after all.
                            Ok(event) => event,
                            Err(_) => {
                                if live
                                    .by_key
                                    .get(&key)
                                    .is_some_and(|w| w.generation == generation)
                                {
                                    live.by_key.remove(&key);
                                }
                                return;
                            }
                        }
                    }
                };
                process(event).await;
                done.0.done();
            }
        });
        Worker {
            tx,
            task,
            pending,
            generation,
        }
    }

    /// Stops routing; workers finish what they have (bounded by `grace`), then are aborted.
    pub(crate) async fn shutdown(self, grace: Duration) {
        let tasks: Vec<JoinHandle<()>> = std::mem::take(&mut lock(&self.workers).by_key)
            .into_values()
            .map(|w| w.task)
            .collect();
        let aborts: Vec<_> = tasks.iter().map(JoinHandle::abort_handle).collect();
        if tokio::time::timeout(grace, futures::future::join_all(tasks))
            .await
            .is_err()
        {
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

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
        let mut router = Router::new(move |e: QueuedEvent| {
            let (log, b_done) = (log.clone(), b_done.clone());
            async move {
                let n = e.clone().parsed().body["n"].as_u64().unwrap_or_default();
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
        let mut router = Router::new(move |e: QueuedEvent| {
            let log = log.clone();
            async move {
                let n = e.clone().parsed().body["n"].as_u64().unwrap_or_default();
                log.lock().unwrap().push(n);
            }
        });
        router.route(ev("a", 0));
        tokio::time::sleep(WORKER_IDLE_TIMEOUT * 2).await;
        assert_eq!(
            lock(&router.workers).by_key.len(),
            0,
            "an idle worker keeps no task, queue or entry"
        );
        router.route(ev("a", 1));
        router.route(ev("a", 2));
        router.shutdown(Duration::from_secs(5)).await;
        assert_eq!(*seen.lock().unwrap(), vec![0, 1, 2]);
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
        let mut router = Router::new(move |_: QueuedEvent| {
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
        // Stopping aborts the waiting worker: nothing is left counted.
        router.shutdown(Duration::from_millis(50)).await;
        assert_eq!(eventually(&metrics, "0").await.as_deref(), Some("0"));
    }
}
