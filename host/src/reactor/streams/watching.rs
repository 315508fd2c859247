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
}

impl Default for StreamSettings {
    fn default() -> Self {
        StreamSettings {
            // Kopf's `watching.inactivity_timeout`.
            inactivity_timeout: Duration::from_secs(70),
            page_size: Some(500),
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

/// Runs one stream until cancelled, sending its signals to `out`. Each number received on
/// `replays` sends every object known now again, as a listing, then `Replayed` with it
/// (the objects as last seen, in the order of the stream: no request to the API server).
///
/// kube-runtime's watcher reports "apply" for both additions and
/// modifications; the type Kopf reports is recovered from whether the object
/// was known. After a relist, objects that were known but not listed again
/// were deleted while the stream was down: they get a DELETED event, so
/// indexes and handlers do not keep ghosts (Kopf misses these).
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
    let api: Api<RawObject> = match &namespace {
        Some(ns) if resource.namespaced => Api::namespaced_with(client, ns, &api_resource),
        _ => Api::all_with(client, &api_resource),
    };
    let server_timeout = settings
        .inactivity_timeout
        .saturating_sub(KUBE_IDLE_MARGIN)
        .as_secs()
        .max(1);
    let mut config =
        watcher::Config::default().timeout(u32::try_from(server_timeout).unwrap_or(u32::MAX));
    config.page_size = settings.page_size;
    let mut events = watcher::watcher(api, config).default_backoff().boxed();

    // Every object the stream knows: the key tells an addition from a modification, and
    // the body (compressed) is that of the DELETED event of an object that vanished while
    // the stream was down, and of the objects a replay lists again. The event queued for
    // the object holds its text, parsed only once its turn comes.
    let mut known = Known::default();
    // The objects listed so far while a (re)listing is under way.
    let mut relisted: Option<HashSet<ObjectKey>> = None;
    let mut listings: u64 = 0;
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
                let known = known.bodies().map(|(key, text)| {
                    StreamSignal::Object(QueuedEvent {
                        event_type: EventType::Listed,
                        key: key.clone(),
                        text,
                    })
                });
                for signal in known.chain([StreamSignal::Replayed(seq)]) {
                    if out.send(signal).is_err() {
                        return;
                    }
                }
                continue;
            }
            next = events.next() => next,
        };
        let Some(next) = next else { return };
        let event = match next {
            Ok(event) => event,
            Err(err) => {
                tracing::warn!("Watch stream for {stream_name} failed, retrying: {err}");
                metrics.stream_restarted(&resource.key());
                continue;
            }
        };
        let signal = match event {
            Event::Init => {
                relisted = Some(HashSet::new());
                continue;
            }
            Event::InitApply(obj) => {
                let (key, text) = text_of(obj, &resource);
                if let Some(listed) = relisted.as_mut() {
                    listed.insert(key.clone());
                }
                known.insert(&key, &text);
                StreamSignal::Object(QueuedEvent {
                    event_type: EventType::Listed,
                    key,
                    text,
                })
            }
            Event::InitDone => {
                if let Some(listed) = relisted.take() {
                    let vanished: Vec<ObjectKey> = known
                        .keys()
                        .filter(|k| !listed.contains(*k))
                        .cloned()
                        .collect();
                    for key in vanished {
                        if let Some(text) = known.remove(&key) {
                            let deleted = QueuedEvent {
                                event_type: EventType::Deleted,
                                key,
                                text,
                            };
                            record(&recorder, &resource, &deleted);
                            if out.send(StreamSignal::Object(deleted)).is_err() {
                                return;
                            }
                        }
                    }
                }
                listings += 1;
                StreamSignal::Listed {
                    relisted: listings > 1,
                }
            }
            Event::Apply(obj) => {
                let (key, text) = text_of(obj, &resource);
                let event_type = if known.insert(&key, &text) {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                StreamSignal::Object(QueuedEvent {
                    event_type,
                    key,
                    text,
                })
            }
            Event::Delete(obj) => {
                let (key, text) = text_of(obj, &resource);
                known.forget(&key);
                StreamSignal::Object(QueuedEvent {
                    event_type: EventType::Deleted,
                    key,
                    text,
                })
            }
        };
        if let StreamSignal::Object(event) = &signal {
            record(&recorder, &resource, event);
        }
        if out.send(signal).is_err() {
            return;
        }
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
