//! Posting Kubernetes Events (`v1/events`) about objects, the way Kopf's
//! `kopf.event`/`info`/`warn`/`exception` do (KOPF.md §6.5).
//!
//! [`Poster::post`] never blocks and never fails: events are queued in memory
//! and posted in the background by one worker per involved object, so events
//! about one object go out in the order they were posted while objects do not
//! wait for each other. A worker retires after [`IDLE_TIMEOUT`] without events.
//! Retriable failures (connection errors, 5xx, 429, 403) are retried after
//! Kopf's default backoffs; other failures and exhausted retries are logged as
//! warnings and the event is dropped. On shutdown, queued events get
//! [`EXIT_GRACE`] to go out.
//!
//! The Event body is Kopf's, with Kapsel's names where Kopf names itself:
//! `reportingComponent` and `source.component` are `kapsel`, and so is
//! `reportingInstance` (Kopf's default is `dev`), and `metadata.generateName` is
//! `kapsel-event-` rather than Kopf's `kopf-event-`: the prefix only names the
//! Event object, which users find by its `involvedObject` (as `kubectl describe`
//! and `kubectl get events` do), and an Event named after Kopf from an operator
//! that is not Kopf would mislead whoever reads it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::runtime::GuestEvent;

/// How long a worker waits for more events about its object before it retires
/// (Kopf's `posting.idle_timeout`).
const IDLE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long queued events may take to go out once the operator stops (Kopf's
/// `queueing.exit_timeout`, which also bounds its poster).
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Delays between attempts, in seconds (Kopf's `posting.default_backoffs`): up
/// to nine attempts in all.
const BACKOFFS: [u64; 8] = [1, 1, 2, 3, 5, 8, 13, 21];

/// Messages longer than this many characters are cut in the middle (Kopf's
/// `MAX_MESSAGE_LENGTH`), a common cause of rejected Events otherwise.
const MAX_MESSAGE_CHARS: usize = 1024;

/// What replaces the middle of a cut message (Kopf's `CUT_MESSAGE_INFIX`).
const CUT_INFIX: &str = "...";

/// The name of the posting component, in `reportingComponent`, `source.component`
/// and (until peering names each instance) `reportingInstance`.
const COMPONENT: &str = "kapsel";

/// The prefix of the Events' generated names (Kopf's `posting.event_name_prefix`).
const NAME_PREFIX: &str = "kapsel-event-";

/// The Event types a handler may post: Kopf's `info`, `warn` and `exception`.
const EVENT_TYPES: [&str; 3] = ["Normal", "Warning", "Error"];

/// The object an Event is about (an Event's `involvedObject`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectRef {
    pub(crate) api_version: String,
    pub(crate) kind: String,
    pub(crate) name: String,
    /// `None` for cluster-scoped objects.
    pub(crate) namespace: Option<String>,
    pub(crate) uid: Option<String>,
}

impl ObjectRef {
    /// The reference of an object body (or of a bare reference with
    /// `apiVersion`, `kind` and `metadata`); `None` unless it has an apiVersion,
    /// a kind and a name.
    pub(crate) fn of(body: &Value) -> Option<ObjectRef> {
        let text = |value: Option<&Value>| {
            value
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let meta = body.get("metadata");
        Some(ObjectRef {
            api_version: text(body.get("apiVersion"))?,
            kind: text(body.get("kind"))?,
            name: text(meta.and_then(|m| m.get("name")))?,
            namespace: text(meta.and_then(|m| m.get("namespace"))),
            uid: text(meta.and_then(|m| m.get("uid"))),
        })
    }

    /// Events are objects too: posting Events about them would be noise at
    /// best and an endless loop at worst (an operator handling Events), so Kopf
    /// skips them; so does Kapsel, for both Event APIs.
    fn is_event(&self) -> bool {
        self.kind == "Event" && matches!(self.api_version.as_str(), "v1" | "events.k8s.io/v1")
    }

    /// What keeps one object's events in order: its uid, or its full name.
    fn queue_key(&self) -> String {
        match &self.uid {
            Some(uid) => uid.clone(),
            None => format!(
                "{}//{}//{}//{}",
                self.kind,
                self.api_version,
                self.name,
                self.namespace.as_deref().unwrap_or_default()
            ),
        }
    }
}

/// One Event to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PostedEvent {
    pub(crate) involved: ObjectRef,
    /// `Normal`, `Warning` or `Error`.
    pub(crate) event_type: String,
    pub(crate) reason: String,
    pub(crate) message: String,
}

/// The Event a guest's `post-event` import asks for. `current` is the body of
/// the object the call is about; the guest names another object by a reference
/// (JSON with `apiVersion`, `kind`, `metadata.name`, optionally
/// `metadata.namespace` and `metadata.uid`).
///
/// # Errors
/// A message for the guest's log when the type is not one of `Normal`,
/// `Warning`, `Error`, or the object reference is not JSON or lacks a part.
pub(crate) fn from_guest(current: &Value, event: GuestEvent) -> Result<PostedEvent, String> {
    if !EVENT_TYPES.contains(&event.event_type.as_str()) {
        return Err(format!(
            "the Event type {:?} is none of {}",
            event.event_type,
            EVENT_TYPES.join(", ")
        ));
    }
    let involved = match &event.object {
        None => ObjectRef::of(current)
            .ok_or("the object of the call has no apiVersion, kind or name to post about")?,
        Some(json) => {
            let object: Value = serde_json::from_str(json)
                .map_err(|e| format!("the Event's object is not JSON: {e}"))?;
            ObjectRef::of(&object).ok_or(
                "the Event's object needs an apiVersion, a kind and a metadata.name to be referred to",
            )?
        }
    };
    Ok(PostedEvent {
        involved,
        event_type: event.event_type,
        reason: event.reason,
        message: event.message,
    })
}

/// The message, cut to its first and last halves around `...` when it is longer
/// than [`MAX_MESSAGE_CHARS`] characters (to exactly that many, as Kopf does).
fn shorten(message: &str) -> String {
    let chars = message.chars().count();
    if chars <= MAX_MESSAGE_CHARS {
        return message.to_owned();
    }
    let infix = CUT_INFIX.chars().count();
    let head = MAX_MESSAGE_CHARS / 2 - infix / 2;
    let tail = MAX_MESSAGE_CHARS / 2 - (infix - infix / 2);
    let mut cut: String = message.chars().take(head).collect();
    cut.push_str(CUT_INFIX);
    cut.extend(message.chars().skip(chars - tail));
    cut
}

/// The namespace an Event about this object lives in: the object's, or
/// `default` for cluster-scoped objects (which have no namespace to hold it).
fn event_namespace(involved: &ObjectRef) -> &str {
    involved.namespace.as_deref().unwrap_or("default")
}

/// The core/v1 Event body for `event` at `now` (KOPF.md §6.5).
fn event_body(event: &PostedEvent, now: DateTime<Utc>) -> Value {
    let r = &event.involved;
    let namespace = event_namespace(r);
    let mut involved = json!({
        "apiVersion": r.api_version,
        "kind": r.kind,
        "name": r.name,
        "namespace": namespace,
    });
    if let Some(uid) = &r.uid {
        involved["uid"] = json!(uid);
    }
    // `firstTimestamp`/`lastTimestamp` are metav1.Time (whole seconds); `eventTime`
    // is metav1.MicroTime. All three are the same instant.
    let seconds = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    let micros = now.to_rfc3339_opts(SecondsFormat::Micros, true);
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": namespace, "generateName": NAME_PREFIX},
        "action": "Action?",
        "type": event.event_type,
        "reason": event.reason,
        "message": shorten(&event.message),
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "source": {"component": COMPONENT},
        "involvedObject": involved,
        "firstTimestamp": seconds,
        "lastTimestamp": seconds,
        "eventTime": micros,
    })
}

/// How a failed attempt to post ends.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// Worth another attempt, after at least this long (a server's Retry-After).
    Retriable(Duration),
    /// Retrying will not help (validation, permissions that cannot come).
    Final,
}

/// Kopf's retry rule for API requests (KOPF.md §5.5): connection errors, 5xx,
/// 429 (honouring the server's wait) and 403 (seen during upgrades) are retried.
fn classify(error: &kube::Error) -> Failure {
    match error {
        kube::Error::Api(status) => match status.code {
            429 => Failure::Retriable(Duration::from_secs(u64::from(
                status.details.as_ref().map_or(0, |d| d.retry_after_seconds),
            ))),
            403 | 500..=599 => Failure::Retriable(Duration::ZERO),
            _ => Failure::Final,
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            Failure::Retriable(Duration::ZERO)
        }
        _ => Failure::Final,
    }
}

/// One object's queue, as `post` sees it.
struct Worker {
    queue: mpsc::UnboundedSender<PostedEvent>,
    task: AbortHandle,
}

/// What the poster's handles and workers share.
struct Shared {
    client: Client,
    runtime: tokio::runtime::Handle,
    /// The live workers by queue key. `post` sends and workers retire under this
    /// lock, so an event is never left in the queue of a retiring worker.
    workers: Mutex<Workers>,
    /// Signalled whenever a worker retires (the shutdown waits for none to be left).
    retired: Notify,
    /// Events posted but not yet sent or given up on, for the shutdown's warning.
    pending: AtomicUsize,
    /// Cancelled when the operator stops: workers stop idling.
    shutdown: CancellationToken,
}

#[derive(Default)]
struct Workers {
    by_key: HashMap<String, Worker>,
    /// Set once the shutdown grace is over: later events are dropped.
    closed: bool,
}

impl Shared {
    fn workers(&self) -> MutexGuard<'_, Workers> {
        // Every change under this lock is a single insert/remove: a panic cannot leave it torn.
        self.workers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Posts Kubernetes Events in the background; cheap to clone.
#[derive(Clone)]
pub(crate) struct Poster {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Poster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poster").finish_non_exhaustive()
    }
}

impl Poster {
    /// Starts posting with `client` until `shutdown` is cancelled. The task
    /// returned ends once the queued events went out or [`EXIT_GRACE`] passed.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub(crate) fn start(
        client: Client,
        shutdown: CancellationToken,
    ) -> (Poster, tokio::task::JoinHandle<()>) {
        let shared = Arc::new(Shared {
            client,
            runtime: tokio::runtime::Handle::current(),
            workers: Mutex::default(),
            retired: Notify::new(),
            pending: AtomicUsize::new(0),
            shutdown,
        });
        let task = tokio::spawn(drain_on_shutdown(shared.clone()));
        (Poster { shared }, task)
    }

    /// Queues an Event; returns at once. Events about Events are skipped.
    pub(crate) fn post(&self, event: PostedEvent) {
        if event.involved.is_event() {
            return;
        }
        let shared = &self.shared;
        let key = event.involved.queue_key();
        let mut workers = shared.workers();
        if workers.closed {
            tracing::warn!(
                "Event {:?} about {}/{} not posted: the operator has stopped.",
                event.reason,
                event.involved.kind,
                event.involved.name
            );
            return;
        }
        shared.pending.fetch_add(1, Ordering::Relaxed);
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
        let task = shared
            .runtime
            .spawn(work(shared.clone(), key.clone(), rx))
            .abort_handle();
        workers.by_key.insert(key, Worker { queue, task });
    }
}

/// One object's worker: posts its events in order, retires when idle.
async fn work(shared: Arc<Shared>, key: String, mut queue: mpsc::UnboundedReceiver<PostedEvent>) {
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
            Some(event) => {
                deliver(&shared.client, &event).await;
                shared.pending.fetch_sub(1, Ordering::Relaxed);
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

/// Posts one Event, retrying what may succeed later; logs what cannot be posted.
async fn deliver(client: &Client, event: &PostedEvent) {
    let body = event_body(event, Utc::now());
    let object: DynamicObject = match serde_json::from_value(body) {
        Ok(object) => object,
        Err(error) => {
            tracing::warn!("Failed to build an Event for {}: {error}", describe(event));
            return;
        }
    };
    let resource = ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), event_namespace(&event.involved), &resource);
    let mut backoffs = BACKOFFS.iter();
    loop {
        let error = match api.create(&PostParams::default(), &object).await {
            Ok(_) => return,
            Err(error) => error,
        };
        let wait = match (classify(&error), backoffs.next()) {
            (Failure::Retriable(at_least), Some(&seconds)) => {
                at_least.max(Duration::from_secs(seconds))
            }
            (Failure::Retriable(_), None) => {
                tracing::warn!(
                    "Failed to post an Event for {} after {} attempts: {error}",
                    describe(event),
                    BACKOFFS.len() + 1
                );
                return;
            }
            (Failure::Final, _) => {
                tracing::warn!("Failed to post an Event for {}: {error}", describe(event));
                return;
            }
        };
        tracing::debug!(
            "Posting an Event for {} failed, retrying in {wait:?}: {error}",
            describe(event)
        );
        tokio::time::sleep(wait).await;
    }
}

/// `Kind namespace/name: reason`, for log lines.
fn describe(event: &PostedEvent) -> String {
    let r = &event.involved;
    match &r.namespace {
        Some(ns) => format!("{} {ns}/{} ({})", r.kind, r.name, event.reason),
        None => format!("{} {} ({})", r.kind, r.name, event.reason),
    }
}

/// Waits for the shutdown, gives the queued events [`EXIT_GRACE`] to go out,
/// then stops the workers that are still busy.
async fn drain_on_shutdown(shared: Arc<Shared>) {
    shared.shutdown.cancelled().await;
    let drained = tokio::time::timeout(EXIT_GRACE, async {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_ref() -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "web-0".into(),
            namespace: Some("team".into()),
            uid: Some("u-1".into()),
        }
    }

    fn event(involved: ObjectRef, reason: &str, message: &str) -> PostedEvent {
        PostedEvent {
            involved,
            event_type: "Normal".into(),
            reason: reason.into(),
            message: message.into(),
        }
    }

    #[test]
    fn body_is_kopfs() {
        let now = DateTime::parse_from_rfc3339("2026-11-30T07:30:00.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        let body = event_body(&event(pod_ref(), "Created", "all good"), now);
        assert_eq!(
            body,
            json!({
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"namespace": "team", "generateName": "kapsel-event-"},
                "action": "Action?",
                "type": "Normal",
                "reason": "Created",
                "message": "all good",
                "reportingComponent": "kapsel",
                "reportingInstance": "kapsel",
                "source": {"component": "kapsel"},
                "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "web-0",
                                   "namespace": "team", "uid": "u-1"},
                "firstTimestamp": "2026-11-30T07:30:00Z",
                "lastTimestamp": "2026-11-30T07:30:00Z",
                "eventTime": "2026-11-30T07:30:00.123456Z",
            })
        );
    }

    #[test]
    fn cluster_scoped_objects_get_events_in_default() {
        let node = ObjectRef {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: "n1".into(),
            namespace: None,
            uid: None,
        };
        let body = event_body(&event(node, "Seen", ""), Utc::now());
        assert_eq!(body["metadata"]["namespace"], "default");
        assert_eq!(
            body["involvedObject"],
            json!({"apiVersion": "v1", "kind": "Node", "name": "n1", "namespace": "default"})
        );
    }

    #[test]
    fn long_messages_are_cut_in_the_middle() {
        assert_eq!(shorten("short"), "short");
        let exact = "x".repeat(1024);
        assert_eq!(shorten(&exact), exact);
        // 600 'a's then 600 'b's: 511 'a's, "...", 510 'b's (Kopf's slicing).
        let long = format!("{}{}", "a".repeat(600), "b".repeat(600));
        let cut = shorten(&long);
        assert_eq!(cut.chars().count(), 1024);
        assert_eq!(cut, format!("{}...{}", "a".repeat(511), "b".repeat(510)));
        // Characters, not bytes: multi-byte text is never split inside a character.
        let wide = "é".repeat(2000);
        assert_eq!(shorten(&wide).chars().count(), 1024);
    }

    #[test]
    fn references_from_bodies() {
        let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                          "metadata": {"name": "kopf-example-1", "namespace": "default",
                                       "uid": "abc", "labels": {"x": "y"}},
                          "spec": {}});
        assert_eq!(
            ObjectRef::of(&body),
            Some(ObjectRef {
                api_version: "kopf.dev/v1".into(),
                kind: "KopfExample".into(),
                name: "kopf-example-1".into(),
                namespace: Some("default".into()),
                uid: Some("abc".into()),
            })
        );
        for incomplete in [
            json!({"kind": "Pod", "metadata": {"name": "p"}}),
            json!({"apiVersion": "v1", "metadata": {"name": "p"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ""}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 5}}),
            json!("not an object"),
        ] {
            assert_eq!(ObjectRef::of(&incomplete), None, "{incomplete}");
        }
    }

    #[test]
    fn guest_events() {
        let current = json!({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": "web-0", "namespace": "team", "uid": "u-1"}});
        let ask = |object: Option<&str>, event_type: &str| GuestEvent {
            object: object.map(str::to_owned),
            event_type: event_type.into(),
            reason: "Why".into(),
            message: "What".into(),
        };
        assert_eq!(
            from_guest(&current, ask(None, "Warning")),
            Ok(PostedEvent {
                involved: pod_ref(),
                event_type: "Warning".into(),
                reason: "Why".into(),
                message: "What".into(),
            })
        );
        let other = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}"#;
        let posted = from_guest(&current, ask(Some(other), "Error")).unwrap();
        assert_eq!(
            (posted.involved.kind.as_str(), posted.involved.namespace),
            ("Node", None)
        );

        let wrong_type = from_guest(&current, ask(None, "Info")).unwrap_err();
        assert!(wrong_type.contains("\"Info\""), "{wrong_type}");
        let not_json = from_guest(&current, ask(Some("{"), "Normal")).unwrap_err();
        assert!(not_json.contains("not JSON"), "{not_json}");
        let nameless = from_guest(&current, ask(Some(r#"{"kind": "Pod"}"#), "Normal"));
        assert!(nameless.is_err());
        assert!(from_guest(&json!({}), ask(None, "Normal")).is_err());
    }

    #[test]
    fn events_about_events_are_skipped() {
        let mut reference = pod_ref();
        reference.kind = "Event".into();
        assert!(reference.is_event());
        reference.api_version = "events.k8s.io/v1".into();
        assert!(reference.is_event());
        assert!(!pod_ref().is_event());
    }

    #[test]
    fn retry_rules() {
        let api = |code: u16, retry_after: Option<u32>| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                details: retry_after.map(|s| kube::core::response::StatusDetails {
                    name: String::new(),
                    group: String::new(),
                    kind: String::new(),
                    uid: String::new(),
                    causes: Vec::new(),
                    retry_after_seconds: s,
                }),
                ..Default::default()
            }))
        };
        assert_eq!(
            classify(&api(500, None)),
            Failure::Retriable(Duration::ZERO)
        );
        assert_eq!(
            classify(&api(403, None)),
            Failure::Retriable(Duration::ZERO)
        );
        assert_eq!(
            classify(&api(429, Some(7))),
            Failure::Retriable(Duration::from_secs(7))
        );
        assert_eq!(classify(&api(422, None)), Failure::Final);
        assert_eq!(classify(&api(404, None)), Failure::Final);
    }

    mod against_the_api_server {
        use k8s_openapi::api::core::v1::Event;
        use kapsel_apiserver::{ApiServer, Config, Fault, RequestMatcher};
        use kube::api::ListParams;

        use super::*;

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

        #[tokio::test]
        async fn posts_in_order_and_retries() {
            let server = ApiServer::start(Config::default()).await.unwrap();
            let client =
                kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
            let shutdown = CancellationToken::new();
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            let team = serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
            namespaces
                .create(&PostParams::default(), &team)
                .await
                .unwrap();
            let (poster, task) = Poster::start(client.clone(), shutdown.clone());

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
            tokio::time::sleep(IDLE_TIMEOUT + Duration::from_millis(300)).await;
            assert!(poster.shared.workers().by_key.is_empty());
            poster.post(event(pod_ref(), "Later", "after idling"));
            // Queued events go out during the shutdown's grace.
            shutdown.cancel();
            task.await.unwrap();
            let team = events_in(&client, "team").await;
            assert_eq!(team.len(), 4);
            assert_eq!(team[3].reason.as_deref(), Some("Later"));
            // After the shutdown, events are dropped (and logged).
            poster.post(event(pod_ref(), "TooLate", "after stopping"));
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert_eq!(events_in(&client, "team").await.len(), 4);
        }

        #[tokio::test]
        async fn final_failures_are_not_retried() {
            let server = ApiServer::start(Config::default()).await.unwrap();
            let client =
                kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
            let shutdown = CancellationToken::new();
            let (poster, task) = Poster::start(client.clone(), shutdown.clone());
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
            shutdown.cancel();
            tokio::time::timeout(EXIT_GRACE + Duration::from_secs(1), task)
                .await
                .unwrap()
                .unwrap();
        }
    }
}
