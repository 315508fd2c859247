//! One watch stream per (resource × namespace): kube-runtime's watcher (list+watch,
//! bookmarks, 410 → relist, backoff, idle timeout) turned into Kopf's raw events.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::cluster::Resource;
use crate::cluster::wire::RawObject;
use crate::handlers::ObjectKey;
use crate::metrics::Metrics;
use crate::reactor::objects::{EventType, KeyFields, QueuedEvent, key_from};
use crate::recording::Recorder;

use super::known::Known;

/// What a stream reports besides object events.
#[derive(Debug)]
pub(crate) enum StreamSignal {
    Object(QueuedEvent),
    /// A listing is complete: the first one (`relisted: false`), or one after the watch
    /// history expired (410 Gone), with the objects gone meanwhile reported as DELETED.
    Listed {
        relisted: bool,
    },
    /// The replay asked for with this number has been sent (its objects precede this).
    Replayed(u64),
}

/// Settings of the watch streams (KOPF.md §6.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamSettings {
    /// A stream that shows no event (bookmarks included) for this long is
    /// closed and reopened: load balancers drop idle connections silently.
    pub(crate) inactivity_timeout: Duration,
    /// `limit` for list pages.
    pub(crate) page_size: Option<u32>,
    /// `timeoutSeconds` of the watch requests; `None`: the inactivity timeout less
    /// kube-runtime's margin.
    pub(crate) server_timeout: Option<Duration>,
    /// Server-side selectors every list and watch sends.
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
    /// Kubernetes' `shardSelector` (sharded lists and watches), sent the same way.
    pub(crate) shard_selector: Option<String>,
    /// List by watching (`sendInitialEvents`).
    pub(crate) initial_streaming: bool,
    /// How many of the stream's objects are handled at once.
    pub(crate) objects_in_flight: usize,
    /// The pause before a stream lists again (Kopf's pause between its streams).
    pub(crate) reconnect_backoff: Duration,
    /// How many objects of all streams together are handled at once (`None`: no bound).
    pub(crate) worker_limit: Option<usize>,
    /// How long an object's worker waits for its next event before it leaves.
    pub(crate) idle_timeout: Duration,
}

impl StreamSettings {
    /// The streams' part of the user's settings (`watching`, `queueing.objects_in_flight`,
    /// `worker_limit`, `idle_timeout`).
    pub(crate) fn of(user: &crate::settings::Settings) -> StreamSettings {
        use crate::settings::seconds;
        let watching = &user.watching;
        StreamSettings {
            inactivity_timeout: seconds(watching.inactivity_timeout),
            page_size: watching.chunk_size,
            server_timeout: watching.server_timeout.map(seconds),
            label_selector: watching.label_selectors.clone(),
            field_selector: watching.field_selectors.clone(),
            shard_selector: watching.shard_selectors.clone(),
            initial_streaming: watching.initial_streaming,
            objects_in_flight: usize::try_from(user.queueing.objects_in_flight)
                .unwrap_or(usize::MAX),
            reconnect_backoff: seconds(watching.reconnect_backoff),
            worker_limit: user
                .queueing
                .worker_limit
                .map(|limit| usize::try_from(limit).unwrap_or(usize::MAX)),
            idle_timeout: seconds(user.queueing.idle_timeout),
        }
    }
}

/// One watch stream to run: what it watches, how, and where it reports.
pub(crate) struct Watch {
    pub(crate) client: kube::Client,
    pub(crate) resource: Arc<Resource>,
    /// `None`: cluster-wide.
    pub(crate) namespace: Option<String>,
    pub(crate) settings: StreamSettings,
    /// Where the stream reports restarts and its death.
    pub(crate) metrics: Metrics,
    /// Where `--record` writes the events the stream receives.
    pub(crate) recorder: Recorder,
}

/// kube-runtime closes a silent stream after the server-side `timeoutSeconds`
/// plus this margin; the server timeout is set so the sum is our inactivity timeout.
const KUBE_IDLE_MARGIN: Duration = Duration::from_secs(5);

/// Runs one stream until cancelled, sending its signals to `out` (what each event means:
/// [`Listing`]). Each number received on `replays` sends every object known now again, as
/// a listing, then `Replayed` with it (the objects as last seen, in the order of the
/// stream: no request to the API server).
pub(crate) async fn run(
    watch: Watch,
    out: tokio::sync::mpsc::UnboundedSender<StreamSignal>,
    mut replays: tokio::sync::mpsc::UnboundedReceiver<u64>,
    cancel: CancellationToken,
) {
    let Watch {
        client,
        resource,
        namespace,
        settings,
        metrics,
        recorder,
    } = watch;
    let api_resource = resource.api_resource();
    let client = match &settings.shard_selector {
        Some(selector) => sharded(client, selector),
        None => client,
    };
    let api: Api<RawObject> = match &namespace {
        Some(ns) if resource.namespaced => Api::namespaced_with(client, ns, &api_resource),
        _ => Api::all_with(client, &api_resource),
    };
    let server_timeout = settings
        .server_timeout
        .unwrap_or_else(|| settings.inactivity_timeout.saturating_sub(KUBE_IDLE_MARGIN))
        .as_secs()
        .max(1);
    let mut config =
        watcher::Config::default().timeout(u32::try_from(server_timeout).unwrap_or(u32::MAX));
    config.page_size = settings.page_size;
    if let Some(selector) = &settings.label_selector {
        config = config.labels(selector);
    }
    if let Some(selector) = &settings.field_selector {
        config = config.fields(selector);
    }
    if settings.initial_streaming {
        config = config.streaming_lists();
    }
    let mut events = watcher::watcher(api, config).default_backoff().boxed();

    let mut listing = Listing::default();
    let stream_name = match &namespace {
        Some(ns) => format!("{} in {ns}", resource.key()),
        None => resource.key(),
    };
    // A stream that dies of a host bug is never reopened: liveness must fail.
    let _alive = metrics.loop_watch(format!("the watch stream for {stream_name}"));
    let mut replaying = true;
    loop {
        let next = tokio::select! {
            () = cancel.cancelled() => return,
            replay = replays.recv(), if replaying => {
                let Some(seq) = replay else {
                    replaying = false;
                    continue;
                };
                // Not recorded: these come from memory, not from the cluster.
                for signal in listing.replay(seq) {
                    if out.send(signal).is_err() {
                        return;
                    }
                }
                continue;
            }
            next = events.next() => next,
        };
        let Some(next) = next else { return };
        // A listing again after a complete one (its watch history expired, or it failed):
        // Kopf pauses between its streams, each a listing and its watches.
        if matches!(next, Ok(Event::Init)) && listing.listings > 0 {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(settings.reconnect_backoff) => {}
            }
        }
        let event = match next {
            Ok(event) => keyed(event, &resource),
            Err(err) => {
                tracing::warn!("Watch stream for {stream_name} failed, retrying: {err}");
                metrics.stream_restarted(&resource.key());
                continue;
            }
        };
        let Classified { deleted, signal } = listing.classify(event);
        let signals = deleted.into_iter().map(StreamSignal::Object).chain(signal);
        for signal in signals {
            if let StreamSignal::Object(event) = &signal {
                record(&recorder, &resource, event);
            }
            if out.send(signal).is_err() {
                return;
            }
        }
    }
}

/// The stream's client, each of its requests (the watcher's lists and watches) with
/// `shardSelector` added: kube-runtime's watcher knows label and field selectors only.
fn sharded(client: kube::Client, selector: &str) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    // Percent-encoded but for the characters a query never needs encoded.
    let value: String = selector
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let service = tower::service_fn(move |mut request: http::Request<kube::client::Body>| {
        let client = client.clone();
        let uri = request.uri().clone();
        let with = match uri.query() {
            Some(query) if !query.is_empty() => {
                format!("{}?{query}&shardSelector={value}", uri.path())
            }
            _ => format!("{}?shardSelector={value}", uri.path()),
        };
        async move {
            let mut parts = uri.into_parts();
            parts.path_and_query = Some(with.parse()?);
            *request.uri_mut() = http::Uri::from_parts(parts)?;
            client.send(request).await.map_err(tower::BoxError::from)
        }
    });
    kube::Client::new(service, namespace)
}

/// A watcher's event with its objects keyed and as the API server's text.
type KeyedEvent = Event<(ObjectKey, Arc<str>)>;

/// The watcher's event about `resource`, its objects keyed and as text.
fn keyed(event: Event<RawObject>, resource: &Resource) -> KeyedEvent {
    match event {
        Event::Init => Event::Init,
        Event::InitApply(obj) => Event::InitApply(text_of(obj, resource)),
        Event::InitDone => Event::InitDone,
        Event::Apply(obj) => Event::Apply(text_of(obj, resource)),
        Event::Delete(obj) => Event::Delete(text_of(obj, resource)),
    }
}

/// What one watcher event means: objects found gone by a relisting (DELETED, before
/// anything else), and the event's own signal, if it has one.
#[derive(Debug, Default)]
struct Classified {
    deleted: Vec<QueuedEvent>,
    signal: Option<StreamSignal>,
}

/// What a stream knows of its objects, and what each of kube-runtime's watcher events
/// means for them (no I/O). The watcher reports "apply" for both additions and
/// modifications: the type Kopf reports is recovered from whether the object was known.
/// After a relist, objects that were known but not listed again were deleted while the
/// stream was down: they get a DELETED event, so indexes and handlers do not keep ghosts
/// (Kopf misses these).
#[derive(Default)]
struct Listing {
    /// Every object the stream knows: the key tells an addition from a modification, and
    /// the body (compressed) is that of the DELETED event of an object that vanished while
    /// the stream was down, and of the objects a replay lists again. The event queued for
    /// the object holds its text, parsed only once its turn comes.
    known: Known,
    /// The objects listed so far while a (re)listing is under way.
    relisted: Option<HashSet<ObjectKey>>,
    /// Listings completed.
    listings: u64,
}

impl Listing {
    /// What an event of the watcher means.
    fn classify(&mut self, event: KeyedEvent) -> Classified {
        let object = |event_type, (key, text)| {
            Some(StreamSignal::Object(QueuedEvent {
                event_type,
                key,
                text,
            }))
        };
        let mut deleted = Vec::new();
        let signal = match event {
            Event::Init => {
                self.relisted = Some(HashSet::new());
                None
            }
            Event::InitApply((key, text)) => {
                if let Some(listed) = self.relisted.as_mut() {
                    listed.insert(key.clone());
                }
                self.known.insert(&key, &text);
                object(EventType::Listed, (key, text))
            }
            Event::InitDone => {
                deleted = self.vanished();
                self.listings += 1;
                Some(StreamSignal::Listed {
                    relisted: self.listings > 1,
                })
            }
            Event::Apply((key, text)) => {
                let event_type = if self.known.insert(&key, &text) {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                object(event_type, (key, text))
            }
            Event::Delete((key, text)) => {
                self.known.forget(&key);
                object(EventType::Deleted, (key, text))
            }
        };
        Classified { deleted, signal }
    }

    /// A (re)listing ended: the known objects it did not list, forgotten, as DELETED.
    fn vanished(&mut self) -> Vec<QueuedEvent> {
        let Some(listed) = self.relisted.take() else {
            return Vec::new();
        };
        let gone: Vec<ObjectKey> = self
            .known
            .keys()
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        gone.into_iter()
            .filter_map(|key| {
                let text = self.known.remove(&key)?;
                Some(QueuedEvent {
                    event_type: EventType::Deleted,
                    key,
                    text,
                })
            })
            .collect()
    }

    /// Every object known now, as a listing, then `Replayed(seq)`.
    fn replay(&self, seq: u64) -> impl Iterator<Item = StreamSignal> + '_ {
        let known = self.known.bodies().map(|(key, text)| {
            StreamSignal::Object(QueuedEvent {
                event_type: EventType::Listed,
                key: key.clone(),
                text,
            })
        });
        known.chain([StreamSignal::Replayed(seq)])
    }
}

/// The object's key and its text, as the API server wrote it (with `apiVersion` and
/// `kind` filled in).
fn text_of(obj: RawObject, resource: &Resource) -> (ObjectKey, Arc<str>) {
    let api_version = resource.api_version();
    let key = key_from(&KeyFields {
        uid: obj.uid().unwrap_or_default(),
        kind: obj.kind().unwrap_or(&resource.kind),
        api_version: obj.api_version().unwrap_or(&api_version),
        name: obj.name().unwrap_or_default(),
        namespace: obj.namespace().unwrap_or_default(),
        creation_timestamp: obj.created().unwrap_or_default(),
    });
    (key, obj.into_text(&api_version, &resource.kind))
}

fn record(recorder: &Recorder, resource: &Resource, event: &QueuedEvent) {
    if !recorder.is_on() {
        return;
    }
    let event_type = event.event_type.as_kopf().unwrap_or("LISTED");
    let body = serde_json::from_str(&event.text).unwrap_or(Value::Null);
    recorder.watch(resource, event_type, &body);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queueing settings the streams' routers read come from the user's.
    #[test]
    fn stream_settings_take_the_users_queueing() {
        let mut user = crate::settings::Settings::default();
        let defaults = StreamSettings::of(&user);
        assert_eq!(defaults.idle_timeout, Duration::from_secs(5), "Kopf's");
        assert_eq!(defaults.worker_limit, None);
        assert_eq!(defaults.objects_in_flight, 64);
        user.set("queueing.idle_timeout", "0.25").unwrap();
        user.set("queueing.worker_limit", "3").unwrap();
        let settings = StreamSettings::of(&user);
        assert_eq!(settings.idle_timeout, Duration::from_millis(250));
        assert_eq!(settings.worker_limit, Some(3));
    }

    fn object(name: &str) -> (ObjectKey, Arc<str>) {
        (
            name.to_owned(),
            Arc::from(format!(r#"{{"metadata":{{"name":"{name}"}}}}"#)),
        )
    }

    /// What a signal says: `TYPE key` for an object (`TYPE text` with `text`), `LISTED!`
    /// for a listing's end, `RELISTED!` for a relisting's, `REPLAYED n`.
    fn line(signal: StreamSignal, text: bool) -> String {
        match signal {
            StreamSignal::Object(e) => {
                let what = if text { &*e.text } else { e.key.as_str() };
                format!("{} {what}", e.event_type.as_kopf().unwrap_or("LISTED"))
            }
            StreamSignal::Listed { relisted: false } => "LISTED!".to_owned(),
            StreamSignal::Listed { relisted: true } => "RELISTED!".to_owned(),
            StreamSignal::Replayed(seq) => format!("REPLAYED {seq}"),
        }
    }

    /// What the signals of an event say, in order.
    fn said(classified: Classified) -> Vec<String> {
        let deleted = classified.deleted.into_iter().map(StreamSignal::Object);
        deleted
            .chain(classified.signal)
            .map(|signal| line(signal, false))
            .collect()
    }

    #[test]
    fn watcher_events_become_kopfs_raw_events() {
        let mut listing = Listing::default();
        let mut feed = |event: KeyedEvent| said(listing.classify(event));
        assert!(feed(Event::Init).is_empty());
        assert_eq!(feed(Event::InitApply(object("a"))), ["LISTED a"]);
        assert_eq!(feed(Event::InitApply(object("b"))), ["LISTED b"]);
        assert_eq!(feed(Event::InitDone), ["LISTED!"]);
        // Apply is an addition or a modification, as the object was known or not.
        assert_eq!(feed(Event::Apply(object("c"))), ["ADDED c"]);
        assert_eq!(feed(Event::Apply(object("a"))), ["MODIFIED a"]);
        assert_eq!(feed(Event::Delete(object("c"))), ["DELETED c"]);
        assert_eq!(feed(Event::Apply(object("c"))), ["ADDED c"], "forgotten");
    }

    #[test]
    fn a_relisting_reports_what_vanished_meanwhile() {
        let mut listing = Listing::default();
        for event in [
            Event::Init,
            Event::InitApply(object("a")),
            Event::InitApply(object("b")),
            Event::InitDone,
            Event::Apply(object("c")),
        ] {
            listing.classify(event);
        }
        // The watch history expired; b and c went away while the stream was down.
        let mut feed = |event: KeyedEvent| said(listing.classify(event));
        assert!(feed(Event::Init).is_empty());
        assert_eq!(feed(Event::InitApply(object("a"))), ["LISTED a"]);
        // (In no particular order: the stream knows its objects by hash.)
        let mut ended = feed(Event::InitDone);
        ended[..2].sort();
        assert_eq!(ended, ["DELETED b", "DELETED c", "RELISTED!"]);
        assert_eq!(feed(Event::Apply(object("b"))), ["ADDED b"], "forgotten");
    }

    #[test]
    fn a_replay_lists_the_known_objects_as_last_seen() {
        let mut listing = Listing::default();
        for event in [
            Event::Init,
            Event::InitApply(object("a")),
            Event::InitDone,
            Event::Apply(object("b")),
        ] {
            listing.classify(event);
        }
        let mut replayed: Vec<String> =
            listing.replay(7).map(|signal| line(signal, true)).collect();
        replayed[..2].sort();
        assert_eq!(
            replayed,
            [
                r#"LISTED {"metadata":{"name":"a"}}"#,
                r#"LISTED {"metadata":{"name":"b"}}"#,
                "REPLAYED 7",
            ]
        );
    }
}
