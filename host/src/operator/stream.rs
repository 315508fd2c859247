//! One watch stream per (resource × namespace): kube-runtime's watcher (list+watch,
//! bookmarks, 410 → relist, backoff, idle timeout) turned into Kopf's raw events.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::discovery::Resource;
use super::indexes::ObjectKey;
use crate::metrics::Metrics;

/// A raw event's type as handlers see it (Kopf's `type` kwarg).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    /// Seen in a listing (Kopf's `type=None`).
    Listed,
    Added,
    Modified,
    Deleted,
}

impl EventType {
    /// Kopf's spelling: `None` for listings.
    pub(crate) fn as_kopf(self) -> Option<&'static str> {
        match self {
            EventType::Listed => None,
            EventType::Added => Some("ADDED"),
            EventType::Modified => Some("MODIFIED"),
            EventType::Deleted => Some("DELETED"),
        }
    }
}

/// One object event, ready for its object's queue.
#[derive(Debug, Clone)]
pub(crate) struct ObjectEvent {
    pub(crate) event_type: EventType,
    pub(crate) key: ObjectKey,
    /// The object with `apiVersion` and `kind` filled in.
    pub(crate) body: Arc<Value>,
}

/// What a stream reports besides object events.
#[derive(Debug)]
pub(crate) enum StreamSignal {
    Object(ObjectEvent),
    /// The initial listing (or a relisting) is complete.
    Listed,
}

/// Settings of the watch streams (KOPF.md §6.2).
#[derive(Debug, Clone)]
pub(crate) struct StreamSettings {
    /// A stream that shows no event (bookmarks included) for this long is
    /// closed and reopened: load balancers drop idle connections silently.
    pub(crate) inactivity_timeout: Duration,
    /// `limit` for list pages.
    pub(crate) page_size: Option<u32>,
    /// Where the streams and their queues report restarts, queue depth and panics.
    pub(crate) metrics: Metrics,
    /// Where `--record` writes the events the streams receive.
    pub(crate) recorder: crate::recording::Recorder,
}

impl Default for StreamSettings {
    fn default() -> Self {
        StreamSettings {
            // Kopf's `watching.inactivity_timeout`.
            inactivity_timeout: Duration::from_secs(70),
            page_size: Some(500),
            metrics: Metrics::default(),
            recorder: crate::recording::Recorder::default(),
        }
    }
}

/// kube-runtime closes a silent stream after the server-side `timeoutSeconds`
/// plus this margin; the server timeout is set so the sum is our inactivity timeout.
const KUBE_IDLE_MARGIN: Duration = Duration::from_secs(5);

/// The stable identity of an object: its uid, or Kopf's fallback for uid-less ones.
pub(crate) fn object_key(body: &Value) -> ObjectKey {
    let meta = body.get("metadata");
    let field = |name: &str| {
        meta.and_then(|m| m.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let uid = field("uid");
    if !uid.is_empty() {
        return uid;
    }
    let text = |name: &str| body.get(name).and_then(Value::as_str).unwrap_or_default();
    format!(
        "{}//{}//{}//{}//{}",
        text("kind"),
        text("apiVersion"),
        field("name"),
        field("namespace"),
        field("creationTimestamp")
    )
}

/// Runs one stream until cancelled, sending its signals to `out`.
///
/// kube-runtime's watcher reports "apply" for both additions and
/// modifications; the type Kopf reports is recovered from whether the object
/// was known. After a relist, objects that were known but not listed again
/// were deleted while the stream was down: they get a DELETED event, so
/// indexes and handlers do not keep ghosts (Kopf misses these).
pub(crate) async fn run(
    client: kube::Client,
    resource: Arc<Resource>,
    namespace: Option<String>,
    settings: StreamSettings,
    out: tokio::sync::mpsc::UnboundedSender<StreamSignal>,
    cancel: CancellationToken,
) {
    let api_resource = resource.api_resource();
    let api: Api<DynamicObject> = match &namespace {
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

    let mut known: HashMap<ObjectKey, Arc<Value>> = HashMap::new();
    let mut relisted: Option<HashMap<ObjectKey, Arc<Value>>> = None;
    let stream_name = match &namespace {
        Some(ns) => format!("{} in {ns}", resource.key()),
        None => resource.key(),
    };
    // A stream that dies of a host bug is never reopened: liveness must fail.
    let _alive = settings
        .metrics
        .loop_watch(format!("the watch stream for {stream_name}"));
    loop {
        let next = tokio::select! {
            () = cancel.cancelled() => return,
            next = events.next() => next,
        };
        let Some(next) = next else { return };
        let event = match next {
            Ok(event) => event,
            Err(err) => {
                tracing::warn!("Watch stream for {stream_name} failed, retrying: {err}");
                settings.metrics.stream_restarted(&resource.key());
                continue;
            }
        };
        let signal = match event {
            Event::Init => {
                relisted = Some(HashMap::new());
                continue;
            }
            Event::InitApply(obj) => {
                let body = body_of(obj, &resource);
                let key = object_key(&body);
                if let Some(listed) = relisted.as_mut() {
                    listed.insert(key.clone(), body.clone());
                }
                known.insert(key.clone(), body.clone());
                StreamSignal::Object(ObjectEvent {
                    event_type: EventType::Listed,
                    key,
                    body,
                })
            }
            Event::InitDone => {
                if let Some(listed) = relisted.take() {
                    let vanished: Vec<ObjectKey> = known
                        .keys()
                        .filter(|k| !listed.contains_key(*k))
                        .cloned()
                        .collect();
                    for key in vanished {
                        if let Some(body) = known.remove(&key) {
                            let deleted = ObjectEvent {
                                event_type: EventType::Deleted,
                                key,
                                body,
                            };
                            record(&settings, &resource, &deleted);
                            if out.send(StreamSignal::Object(deleted)).is_err() {
                                return;
                            }
                        }
                    }
                }
                StreamSignal::Listed
            }
            Event::Apply(obj) => {
                let body = body_of(obj, &resource);
                let key = object_key(&body);
                let event_type = if known.insert(key.clone(), body.clone()).is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                StreamSignal::Object(ObjectEvent {
                    event_type,
                    key,
                    body,
                })
            }
            Event::Delete(obj) => {
                let body = body_of(obj, &resource);
                let key = object_key(&body);
                known.remove(&key);
                StreamSignal::Object(ObjectEvent {
                    event_type: EventType::Deleted,
                    key,
                    body,
                })
            }
        };
        if let StreamSignal::Object(event) = &signal {
            record(&settings, &resource, event);
        }
        if out.send(signal).is_err() {
            return;
        }
    }
}

fn record(settings: &StreamSettings, resource: &Resource, event: &ObjectEvent) {
    let event_type = event.event_type.as_kopf().unwrap_or("LISTED");
    settings.recorder.watch(resource, event_type, &event.body);
}

/// The object as JSON, with `apiVersion`/`kind` filled in (list items may lack them).
fn body_of(obj: DynamicObject, resource: &Resource) -> Arc<Value> {
    let mut body = serde_json::to_value(&obj).unwrap_or(Value::Null);
    if let Some(map) = body.as_object_mut() {
        for (key, value) in [
            ("apiVersion", resource.api_version()),
            ("kind", resource.kind.clone()),
        ] {
            if !map.get(key).is_some_and(Value::is_string) {
                map.insert(key.to_owned(), Value::String(value));
            }
        }
    }
    Arc::new(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_prefer_uids_and_fall_back_like_kopf() {
        assert_eq!(
            object_key(&json!({"metadata": {"uid": "u1", "name": "a"}})),
            "u1"
        );
        assert_eq!(
            object_key(&json!({"kind": "Pod", "apiVersion": "v1",
                "metadata": {"name": "a", "namespace": "ns", "creationTimestamp": "t"}})),
            "Pod//v1//a//ns//t"
        );
    }
}
