//! [`Poster`]: Events posted in the background, one worker per involved object, so that
//! Events about one object go out in order while objects do not wait for each other.
//! A guest's Events first wait for its pace in its lane (`pacing`), each guest's let out
//! by a task of its own while any wait; the shutdown sends what waits at once, and gives
//! every queued Event the exit timeout to go out. At most [`MAX_SENDING`] Events wait to
//! be sent; past it, and when posting one fails for good, an Event is dropped and counted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::Utc;
use kube::Client;
use kube::api::{Api, ApiResource, PostParams};
use tokio::sync::{Notify, mpsc};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use super::pacing::{Drops, EventPace, Lane, Offered, QUEUE_FULL, Waiting};
use super::{PostedEvent, Seen, event_body, event_namespace};
use crate::cluster::requests::{Retries, retried};
use crate::cluster::wire::Body;
use crate::metrics::Metrics;
use crate::settings::{Posting, PostingLevel};

/// How long a worker waits for more events about its object before it retires
/// (Kopf's `posting.idle_timeout`).
const IDLE_TIMEOUT: Duration = Duration::from_secs(1);

/// The most Events queued to be sent at once, the operator's own and those the guests'
/// paces let out together: past it (an API server too slow to take them), Events are
/// dropped, counted and logged, rather than kept without bound.
const MAX_SENDING: usize = 10_000;

/// Why an Event was dropped: the API server refused it, or its retries ran out.
const FAILED: &str = "failed";

/// One object's queue, as `post` sees it.
struct Worker {
    queue: mpsc::UnboundedSender<Queued>,
    task: AbortHandle,
}

/// An Event, how often and when it was posted, the names it goes out with, and whose it
/// is (`None`: the operator's own).
struct Queued {
    guest: Option<Arc<str>>,
    event: PostedEvent,
    seen: Seen,
    posting: Arc<Posting>,
}

/// What the poster's handles and workers share.
struct Shared {
    client: Client,
    /// How each Event is retried (`networking.error_backoffs`).
    retries: Retries,
    runtime: tokio::runtime::Handle,
    /// The live workers by queue key. `post` sends and workers retire under this
    /// lock, so an event is never left in the queue of a retiring worker.
    workers: Mutex<Workers>,
    /// Signalled whenever a worker retires (the shutdown waits for none to be left).
    retired: Notify,
    /// The guests' Events waiting for their paces, by guest.
    lanes: Mutex<Lanes>,
    /// How long queued Events may take to go out once the operator stops
    /// (`queueing.exit_timeout`).
    grace: Duration,
    /// Events posted but not yet sent or given up on: at most [`MAX_SENDING`].
    pending: AtomicUsize,
    /// Where dropped Events are counted.
    metrics: Metrics,
    /// Events dropped for [`MAX_SENDING`], for the warning.
    drops: Mutex<Drops>,
    /// Cancelled when the operator stops: workers stop idling.
    shutdown: CancellationToken,
}

#[derive(Default)]
struct Workers {
    by_key: HashMap<String, Worker>,
    /// Set once the shutdown grace is over: later events are dropped.
    closed: bool,
}

#[derive(Default)]
struct Lanes {
    by_guest: HashMap<Arc<str>, Lane>,
    /// Set once the operator stops: what is posted then goes out at once.
    closed: bool,
}

impl Shared {
    fn workers(&self) -> MutexGuard<'_, Workers> {
        // Every change under this lock is a single insert/remove: a panic cannot leave it torn.
        self.workers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts an Event of `guest` (`None`: the operator's) dropped for `reason`.
    fn dropped(&self, guest: Option<&str>, reason: &str) {
        self.metrics
            .event_dropped(guest.unwrap_or_default(), reason);
    }

    fn drops(&self) -> MutexGuard<'_, Drops> {
        // Two numbers, each changed at once.
        self.drops.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lanes(&self) -> MutexGuard<'_, Lanes> {
        // A lane's methods keep it whole between their steps, none of which panics.
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Posts Kubernetes Events in the background; cheap to clone.
#[derive(Clone)]
pub(crate) struct Poster {
    shared: Arc<Shared>,
    /// Which of the guests' Events are posted, and the names every Event has (shared:
    /// a poster is cloned for every call).
    posting: Arc<Posting>,
}

impl std::fmt::Debug for Poster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poster").finish_non_exhaustive()
    }
}

impl Poster {
    /// Starts posting with `client` until `shutdown` is cancelled, each Event retried as
    /// `retries` says. The task returned ends once the queued events went out or `grace`
    /// (the exit timeout) passed.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub(crate) fn start(
        client: Client,
        (retries, grace): (Retries, Duration),
        metrics: Metrics,
        shutdown: CancellationToken,
    ) -> (Poster, tokio::task::JoinHandle<()>) {
        let shared = Arc::new(Shared {
            client,
            retries,
            runtime: tokio::runtime::Handle::current(),
            workers: Mutex::default(),
            retired: Notify::new(),
            lanes: Mutex::default(),
            grace,
            pending: AtomicUsize::new(0),
            metrics,
            drops: Mutex::default(),
            shutdown,
        });
        let task = tokio::spawn(drain_on_shutdown(shared.clone()));
        (
            Poster {
                shared,
                posting: Arc::default(),
            },
            task,
        )
    }

    /// This poster, posting the guests' Events as `posting` says.
    pub(crate) fn with_posting(mut self, posting: Posting) -> Poster {
        self.posting = Arc::new(posting);
        self
    }

    /// Whether a guest's Event of this type is posted (Kopf's `posting.enabled` and
    /// `posting.level`: Normal Events are `info`, Warning ones `warning`, others `error`).
    pub(crate) fn admits(&self, event_type: &str) -> bool {
        let level = match event_type {
            "Normal" => PostingLevel::Info,
            "Warning" => PostingLevel::Warning,
            _ => PostingLevel::Error,
        };
        self.posting.enabled && level >= self.posting.level
    }

    /// Whether a handler's log line at `level` is posted as an Event too (Kopf's
    /// `posting.loggers`, with `posting.enabled` and `posting.level`).
    pub(crate) fn admits_log(&self, level: PostingLevel) -> bool {
        self.posting.enabled && self.posting.loggers && level >= self.posting.level
    }

    /// Queues an Event to go out; returns at once. Events about Events are skipped.
    pub(crate) fn post(&self, event: PostedEvent) {
        if event.involved.is_event() {
            return;
        }
        let seen = Seen::once(Utc::now());
        self.shared
            .queue(None, event, seen, Arc::clone(&self.posting));
    }

    /// Queues an Event of a guest to go out at the guest's pace (`pace`): at once while its
    /// budget lasts, else when its turn comes; folded into an identical one waiting, or
    /// dropped when too many wait (`pacing`). Returns at once. Events about Events are
    /// skipped.
    pub(crate) fn post_paced(&self, event: PostedEvent, pace: EventPace) {
        if event.involved.is_event() {
            return;
        }
        let shared = &self.shared;
        let now = Utc::now();
        let mut lanes = shared.lanes();
        if lanes.closed {
            drop(lanes);
            let posting = Arc::clone(&self.posting);
            return shared.queue(Some(pace.guest), event, Seen::once(now), posting);
        }
        let guest = Arc::clone(&pace.guest);
        let lane = lanes
            .by_guest
            .entry(Arc::clone(&guest))
            .or_insert_with(|| Lane::new(pace.clone()));
        match lane.offer(pace, event, &self.posting, now) {
            Offered::Now(waiting) => {
                drop(lanes);
                shared.queue_waiting(*waiting);
            }
            Offered::QueuedFirst => {
                shared.runtime.spawn(let_out(shared.clone(), guest));
            }
            Offered::Queued | Offered::Folded | Offered::Dropped => {}
        }
    }
}

impl Shared {
    fn queue_waiting(self: &Arc<Self>, waiting: Waiting) {
        let Waiting {
            guest,
            event,
            seen,
            posting,
        } = waiting;
        self.queue(Some(guest), event, seen, posting);
    }

    /// Hands an Event of `guest` (`None`: the operator's) to the worker of its object
    /// (started if there is none); drops it when [`MAX_SENDING`] wait to be sent.
    fn queue(
        self: &Arc<Self>,
        guest: Option<Arc<str>>,
        event: PostedEvent,
        seen: Seen,
        posting: Arc<Posting>,
    ) {
        let key = event.involved.queue_key();
        let mut workers = self.workers();
        if workers.closed {
            tracing::warn!(
                "Event {:?} about {}/{} not posted: the operator has stopped.",
                event.reason,
                event.involved.kind,
                event.involved.name
            );
            return;
        }
        if self.pending.load(Ordering::Relaxed) >= MAX_SENDING {
            drop(workers);
            self.dropped(guest.as_deref(), QUEUE_FULL);
            warn_dropped(self.drops().one());
            return;
        }
        self.pending.fetch_add(1, Ordering::Relaxed);
        let event = Queued {
            guest,
            event,
            seen,
            posting,
        };
        // A worker's queue is closed only once it was aborted; then start afresh.
        let event = match workers.by_key.get(&key) {
            Some(worker) => match worker.queue.send(event) {
                Ok(()) => return,
                Err(mpsc::error::SendError(event)) => event,
            },
            None => event,
        };
        let (queue, rx) = mpsc::unbounded_channel();
        // The receiver is alive until the worker below ends, which it cannot do
        // before it takes this lock.
        let _ = queue.send(event);
        let task = self
            .runtime
            .spawn(work(self.clone(), key.clone(), rx))
            .abort_handle();
        workers.by_key.insert(key, Worker { queue, task });
    }
}

/// Logs `dropped` Events (dropped for [`MAX_SENDING`]), if any.
fn warn_dropped(dropped: Option<u64>) {
    if let Some(dropped) = dropped {
        tracing::warn!(
            "{dropped} Event(s) not posted: {MAX_SENDING} others were waiting to be sent \
             (the API server takes Events more slowly than they come)."
        );
    }
}

/// A guest's lane while Events wait in it: lets each out when the guest's pace gives it
/// its turn; ends once none waits, or once the operator stops (whose drain takes them).
async fn let_out(shared: Arc<Shared>, guest: Arc<str>) {
    loop {
        let turn = match shared.lanes().by_guest.get_mut(&guest) {
            Some(lane) => lane.next_turn(),
            None => None,
        };
        let Some(limiter) = turn else { return };
        tokio::select! {
            _ = limiter.take(None) => {}
            () = shared.shutdown.cancelled() => return,
        }
        let mut lanes = shared.lanes();
        if lanes.closed {
            return;
        }
        let next = lanes.by_guest.get_mut(&guest).and_then(Lane::pop);
        drop(lanes);
        if let Some(waiting) = next {
            shared.queue_waiting(waiting);
        }
    }
}

/// One object's worker: posts its events in order, retires when idle.
async fn work(shared: Arc<Shared>, key: String, mut queue: mpsc::UnboundedReceiver<Queued>) {
    loop {
        let next = if shared.shutdown.is_cancelled() {
            queue.try_recv().ok()
        } else {
            // Idle or stopping: `None` retires the worker unless events are queued,
            // which the next turn then takes without waiting.
            tokio::select! {
                event = queue.recv() => event,
                () = tokio::time::sleep(IDLE_TIMEOUT) => None,
                () = shared.shutdown.cancelled() => None,
            }
        };
        match next {
            Some(queued) => {
                if !deliver(&shared.client, &shared.retries, &queued).await {
                    shared.dropped(queued.guest.as_deref(), FAILED);
                }
                shared.pending.fetch_sub(1, Ordering::Relaxed);
                // Drops of a run that has ended are logged too, an interval after the last.
                warn_dropped(shared.drops().due());
            }
            None => {
                let mut workers = shared.workers();
                // An event may have come in since the check above: then carry on.
                if queue.is_empty() {
                    workers.by_key.remove(&key);
                    drop(workers);
                    shared.retired.notify_waiters();
                    return;
                }
            }
        }
    }
}

/// Posts one Event, retrying what may succeed later (Kopf's request retries); logs what
/// cannot be posted, and answers whether it was.
async fn deliver(client: &Client, retries: &Retries, queued: &Queued) -> bool {
    let event = &queued.event;
    // Sent as written, the answer only checked to be JSON: nothing of it is read.
    let object = Body::of(&event_body(event, &queued.posting, queued.seen));
    let resource = ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    };
    let api: Api<Body> =
        Api::namespaced_with(client.clone(), event_namespace(&event.involved), &resource);
    let params = PostParams::default();
    let posted = retried("posting an Event", retries, || api.create(&params, &object)).await;
    if let Err(error) = &posted {
        tracing::warn!("Failed to post an Event for {}: {error}", describe(event));
    }
    posted.is_ok()
}

/// `Kind namespace/name: reason`, for log lines.
fn describe(event: &PostedEvent) -> String {
    let r = &event.involved;
    match &r.namespace {
        Some(ns) => format!("{} {ns}/{} ({})", r.kind, r.name, event.reason),
        None => format!("{} {} ({})", r.kind, r.name, event.reason),
    }
}

/// Waits for the shutdown, sends what waits for the guests' paces at once, gives the
/// queued events the grace (the exit timeout) to go out, then stops the workers that are
/// still busy: what they had not posted is lost, and its number logged.
async fn drain_on_shutdown(shared: Arc<Shared>) {
    shared.shutdown.cancelled().await;
    let waiting: Vec<Waiting> = {
        let mut lanes = shared.lanes();
        lanes.closed = true;
        lanes.by_guest.values_mut().flat_map(Lane::drain).collect()
    };
    for waiting in waiting {
        shared.queue_waiting(waiting);
    }
    let drained = tokio::time::timeout(shared.grace, async {
        loop {
            let retired = shared.retired.notified();
            if shared.workers().by_key.is_empty() {
                return;
            }
            retired.await;
        }
    })
    .await;
    let mut workers = shared.workers();
    workers.closed = true;
    if drained.is_err() {
        for worker in workers.by_key.values() {
            worker.task.abort();
        }
        workers.by_key.clear();
        tracing::warn!(
            "{} Event(s) were not posted before the operator stopped.",
            shared.pending.load(Ordering::Relaxed)
        );
    }
}

/// Posting against a real API server: order, retries, shutdown.
#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Event;
    use kapsel_apiserver::{ApiServer, Config, Fault, RequestMatcher};
    use kube::api::ListParams;
    use serde_json::json;

    use super::*;
    use crate::cluster::events::ObjectRef;
    use crate::cluster::events::tests::{event, pod_ref};
    use crate::metrics::Metrics;

    /// Kopf's default exit timeout.
    const GRACE: Duration = Duration::from_secs(2);

    /// An API server and a client of it.
    async fn cluster() -> (ApiServer, Client) {
        let server = ApiServer::start(Config::default()).await.unwrap();
        let client =
            kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
        (server, client)
    }

    /// The Events in `namespace`, in the order they were created. (Lists come in
    /// name order, and generated names are random.)
    async fn events_in(client: &Client, namespace: &str) -> Vec<Event> {
        let api: Api<Event> = Api::namespaced(client.clone(), namespace);
        let mut events = api.list(&ListParams::default()).await.unwrap().items;
        events.sort_by_key(|e| {
            e.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        });
        events
    }

    /// Polls until `n` Events are in `namespace` (or 10 s passed).
    async fn wait_for_events(client: &Client, namespace: &str, n: usize) -> Vec<Event> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let events = events_in(client, namespace).await;
            if events.len() >= n || tokio::time::Instant::now() > deadline {
                return events;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kopf's `K8sPoster.filter`: a log line is posted only with `posting.enabled` and
    /// `posting.loggers` on, at `posting.level` or above.
    #[tokio::test]
    async fn log_lines_are_posted_only_when_loggers_are_on() {
        let (_server, client) = cluster().await;
        let (poster, _task) = Poster::start(
            client,
            (Retries::default(), GRACE),
            Metrics::default(),
            CancellationToken::new(),
        );
        let with = |enabled: bool, loggers: bool, level: PostingLevel| {
            poster.clone().with_posting(Posting {
                enabled,
                level,
                loggers,
                ..Posting::default()
            })
        };
        let (debug, info, error) = (PostingLevel::Debug, PostingLevel::Info, PostingLevel::Error);
        assert!(
            !with(true, false, debug).admits_log(error),
            "off by default"
        );
        assert!(with(true, true, info).admits_log(info));
        assert!(!with(true, true, info).admits_log(debug), "below the level");
        assert!(with(true, true, debug).admits_log(debug));
        assert!(
            !with(false, true, debug).admits_log(error),
            "posting disabled"
        );
        assert!(
            with(true, false, info).admits("Normal"),
            "a handler's own Events need no loggers"
        );
    }

    #[tokio::test]
    async fn posts_in_order_and_retries() {
        let (server, client) = cluster().await;
        let shutdown = CancellationToken::new();
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        let team = serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
        namespaces
            .create(&PostParams::default(), &team)
            .await
            .unwrap();
        let (poster, task) = Poster::start(
            client.clone(),
            (Retries::default(), GRACE),
            Metrics::default(),
            shutdown.clone(),
        );

        // The first attempt fails with a 500; the retry (after 1 s) succeeds.
        server.faults().fail_next(
            1,
            RequestMatcher::any().verb("create").plural("events"),
            Fault::InternalError,
        );
        for i in 0..3 {
            poster.post(event(pod_ref(), &format!("Step{i}"), &format!("step {i}")));
        }
        let node = ObjectRef {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: "n1".into(),
            namespace: None,
            uid: None,
        };
        poster.post(PostedEvent {
            event_type: "Warning".into(),
            ..event(node, "Odd", &"z".repeat(3000))
        });
        let mut about_an_event = pod_ref();
        about_an_event.kind = "Event".into();
        poster.post(event(about_an_event, "Loop", "never posted"));

        let team = wait_for_events(&client, "team", 3).await;
        let reasons: Vec<_> = team.iter().filter_map(|e| e.reason.as_deref()).collect();
        assert_eq!(reasons, ["Step0", "Step1", "Step2"]);
        let first = &team[0];
        assert_eq!(first.type_.as_deref(), Some("Normal"));
        assert_eq!(first.message.as_deref(), Some("step 0"));
        assert_eq!(first.action.as_deref(), Some("Action?"));
        assert_eq!(first.reporting_component.as_deref(), Some("kapsel"));
        assert!(
            first
                .metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("kapsel-event-"))
        );
        assert_eq!(first.involved_object.uid.as_deref(), Some("u-1"));
        assert_eq!(first.involved_object.name.as_deref(), Some("web-0"));
        assert!(first.event_time.is_some() && first.first_timestamp.is_some());

        let default = wait_for_events(&client, "default", 1).await;
        assert_eq!(default.len(), 1);
        assert_eq!(default[0].type_.as_deref(), Some("Warning"));
        assert_eq!(
            default[0].message.as_deref().map(|m| m.chars().count()),
            Some(1024)
        );
        assert_eq!(default[0].involved_object.kind.as_deref(), Some("Node"));

        // Workers retire after a second idle; a later event starts a new one.
        let retired = async {
            loop {
                // Created before the look: a retirement in between still wakes it.
                let retired = poster.shared.retired.notified();
                if poster.shared.workers().by_key.is_empty() {
                    break;
                }
                retired.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), retired)
            .await
            .expect("the idle workers retire");
        poster.post(event(pod_ref(), "Later", "after idling"));
        // Queued events go out during the shutdown's grace.
        shutdown.cancel();
        task.await.unwrap();
        let team = events_in(&client, "team").await;
        assert_eq!(team.len(), 4);
        assert_eq!(team[3].reason.as_deref(), Some("Later"));
        // After the shutdown, events are dropped (and logged) at once: nothing is queued.
        poster.post(event(pod_ref(), "TooLate", "after stopping"));
        assert_eq!(poster.shared.pending.load(Ordering::Relaxed), 0);
        assert!(poster.shared.workers().by_key.is_empty());
        assert_eq!(events_in(&client, "team").await.len(), 4);
    }

    /// A guest's pace: `burst` at once, then one every `every`.
    fn pace(metrics: &Metrics, every: Duration, burst: u32, max_queued: usize) -> EventPace {
        EventPace {
            guest: Arc::from("g"),
            limiter: Arc::new(crate::rate::RateLimiter::new(
                1.0 / every.as_secs_f64(),
                burst,
            )),
            max_queued,
            metrics: metrics.clone(),
        }
    }

    /// A paced Event waits for its turn without holding up the poster or other Events;
    /// identical ones waiting go out as one with their count; once the operator stops,
    /// what still waits goes out at once.
    #[tokio::test]
    async fn paced_events_go_out_at_their_turn_folded_or_at_the_shutdown() {
        let (_server, client) = cluster().await;
        let shutdown = CancellationToken::new();
        let grace = Duration::from_secs(2);
        let metrics = Metrics::default();
        let (poster, task) = Poster::start(
            client.clone(),
            (Retries::default(), grace),
            metrics.clone(),
            shutdown.clone(),
        );
        let mut pod = pod_ref();
        pod.namespace = Some("default".into());
        let posted = tokio::time::Instant::now();
        // A second a turn, one at once: the first goes, the next three wait as two.
        let pace = pace(&metrics, Duration::from_secs(1), 1, 8);
        for reason in ["First", "Paced", "Paced", "Paced"] {
            poster.post_paced(event(pod.clone(), reason, "at its turn"), pace.clone());
        }
        let mut other = pod.clone();
        other.uid = Some("u-2".into());
        poster.post(event(other, "Unpaced", "at once"));
        let two = wait_for_events(&client, "default", 2).await;
        let reasons: Vec<_> = two.iter().filter_map(|e| e.reason.as_deref()).collect();
        assert!(
            reasons.contains(&"First") && reasons.contains(&"Unpaced"),
            "{reasons:?}"
        );
        let three = wait_for_events(&client, "default", 3).await;
        let paced = &three[2];
        assert_eq!(paced.reason.as_deref(), Some("Paced"));
        assert_eq!(paced.count, Some(3));
        assert_eq!(paced.series.as_ref().and_then(|s| s.count), Some(3));
        assert!(posted.elapsed() >= Duration::from_millis(900));

        // An hour a turn: only the shutdown sends it.
        let slow = EventPace {
            guest: Arc::from("slow"),
            ..self::pace(&metrics, Duration::from_secs(3600), 1, 8)
        };
        poster.post_paced(event(pod.clone(), "Burst", "at once"), slow.clone());
        poster.post_paced(event(pod, "Stopping", "in the grace"), slow);
        wait_for_events(&client, "default", 4).await;
        shutdown.cancel();
        tokio::time::timeout(grace + Duration::from_secs(1), task)
            .await
            .expect("within the grace")
            .expect("the drain ends");
        let all = events_in(&client, "default").await;
        assert_eq!(all.len(), 5);
        assert_eq!(all[4].reason.as_deref(), Some("Stopping"));
        assert_eq!(all[4].count, None, "seen once");
    }

    #[tokio::test]
    async fn final_failures_are_not_retried() {
        let (_server, client) = cluster().await;
        let shutdown = CancellationToken::new();
        let metrics = Metrics::default();
        let (poster, task) = Poster::start(
            client.clone(),
            (Retries::default(), GRACE),
            metrics.clone(),
            shutdown.clone(),
        );
        // A namespace that does not exist: 404, final. The next event still goes out.
        let mut missing = pod_ref();
        missing.namespace = Some("nowhere".into());
        missing.uid = None;
        poster.post(event(missing.clone(), "Lost", "no namespace"));
        missing.namespace = Some("default".into());
        poster.post(event(missing, "Found", "fine"));
        let default = wait_for_events(&client, "default", 1).await;
        assert_eq!(default.len(), 1);
        assert_eq!(default[0].reason.as_deref(), Some("Found"));
        // Counted as the operator's own (no guest), failed.
        let failed = "kapsel_events_dropped_total{guest=\"\",reason=\"failed\"} 1\n";
        assert!(metrics.render().contains(failed), "{}", metrics.render());
        shutdown.cancel();
        tokio::time::timeout(GRACE + Duration::from_secs(1), task)
            .await
            .unwrap()
            .unwrap();
    }

    /// Past [`MAX_SENDING`] Events waiting to be sent (an API server that does not take
    /// them), more are dropped and counted, not kept.
    #[tokio::test]
    async fn past_the_bound_events_are_dropped_and_counted() {
        let (server, client) = cluster().await;
        // The first Event's request hangs: those behind it about the same object wait.
        server.faults().fail_next(
            1,
            RequestMatcher::any().verb("create").plural("events"),
            Fault::Slow(Duration::from_secs(3600)),
        );
        let shutdown = CancellationToken::new();
        let metrics = Metrics::default();
        let (poster, task) = Poster::start(
            client,
            (Retries::default(), Duration::ZERO),
            metrics.clone(),
            shutdown.clone(),
        );
        for i in 0..=MAX_SENDING {
            poster.post(event(pod_ref(), "Many", &format!("event {i}")));
        }
        let dropped = "kapsel_events_dropped_total{guest=\"\",reason=\"queue_full\"} 1\n";
        assert!(metrics.render().contains(dropped), "{}", metrics.render());
        assert_eq!(poster.shared.pending.load(Ordering::Relaxed), MAX_SENDING);
        // No grace: what waits is given up at once.
        shutdown.cancel();
        task.await.expect("the drain ends");
    }
}
