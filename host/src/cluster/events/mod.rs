//! Posting Kubernetes Events (`v1/events`) about objects, the way Kopf's
//! `kopf.event`/`info`/`warn`/`exception` do (KOPF.md §6.5).
//!
//! `Poster::post` never blocks and never fails: events are queued in memory
//! and posted in the background by one worker per involved object, so events
//! about one object go out in the order they were posted while objects do not
//! wait for each other (`poster`). A worker retires after a second without events.
//! Failures are retried as Kopf retries API requests; other failures and exhausted
//! retries are logged as warnings and the event is dropped. A guest's Events wait for
//! its pace in a bounded queue of their own, where identical ones are folded into one
//! with a count and what finds the queue full is dropped and counted (`pacing`);
//! nothing waits for them either. On shutdown, queued events get the exit timeout to go
//! out.
//!
//! The Event body is Kopf's, with Kapsel's names where Kopf names itself by default:
//! `reportingComponent` and `source.component` are `kapsel`, and so is
//! `reportingInstance` (Kopf's default is `dev`), and `metadata.generateName` is
//! `kapsel-event-` rather than Kopf's `kopf-event-`: the prefix only names the
//! Event object, which users find by its `involvedObject` (as `kubectl describe`
//! and `kubectl get events` do), and an Event named after Kopf from an operator
//! that is not Kopf would mislead whoever reads it. The settings
//! `posting.reporting_component`, `reporting_instance` and `event_name_prefix` change
//! them, as in Kopf (to Kopf's own, say, for tools that look for them).

mod pacing;
mod poster;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::runtime::{GuestEvent, Level};
use crate::settings::{Posting, PostingLevel};

pub(crate) use pacing::EventPace;
pub(crate) use poster::Poster;

/// Messages longer than this many characters are cut in the middle (Kopf's
/// `MAX_MESSAGE_LENGTH`), a common cause of rejected Events otherwise.
const MAX_MESSAGE_CHARS: usize = 1024;

/// The longest reason an Event may have: events.k8s.io/v1's limit. A reason is a short
/// word in CamelCase; one longer than this is refused rather than kept while it waits
/// for its turn.
const MAX_REASON_CHARS: usize = 128;

/// What replaces the middle of a cut message (Kopf's `CUT_MESSAGE_INFIX`).
const CUT_INFIX: &str = "...";

/// The Event types a handler may post: Kopf's `info`, `warn` and `exception`.
const EVENT_TYPES: [&str; 3] = ["Normal", "Warning", "Error"];

/// The object an Event is about (an Event's `involvedObject`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    pub(super) fn is_event(&self) -> bool {
        self.kind == "Event" && matches!(self.api_version.as_str(), "v1" | "events.k8s.io/v1")
    }

    /// What keeps one object's events in order: its uid, or its full name.
    pub(super) fn queue_key(&self) -> String {
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

/// One Event to post. Two Events equal in all of this are "the same" Event, which a
/// guest's queue folds into one (client-go's EventCorrelator's key: object, type,
/// reason, message).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PostedEvent {
    pub(crate) involved: ObjectRef,
    /// `Normal`, `Warning` or `Error`.
    pub(crate) event_type: String,
    pub(crate) reason: String,
    pub(crate) message: String,
}

impl PostedEvent {
    /// A Warning from the operator itself (not from a guest) about `involved`.
    pub(crate) fn warning(involved: ObjectRef, reason: &str, message: String) -> PostedEvent {
        PostedEvent {
            involved,
            event_type: "Warning".to_owned(),
            reason: reason.to_owned(),
            message,
        }
    }
}

/// Why a guest's Event is not posted: for the guest's log.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GuestEventError {
    #[error("the Event type {0:?} is none of {types}", types = EVENT_TYPES.join(", "))]
    UnknownType(String),
    /// The reason's length in characters.
    #[error("the Event reason is {0} characters long; Kubernetes allows {MAX_REASON_CHARS}")]
    LongReason(usize),
    #[error("the object of the call has no apiVersion, kind or name to post about")]
    CallObjectUnnamed,
    #[error("the Event's object is not JSON: {0}")]
    ObjectNotJson(#[source] serde_json::Error),
    #[error("the Event's object needs an apiVersion, a kind and a metadata.name to be referred to")]
    ObjectUnnamed,
}

/// The Event a guest's `post-event` import asks for. `current` is the body of
/// the object the call is about; the guest names another object by a reference
/// (JSON with `apiVersion`, `kind`, `metadata.name`, optionally
/// `metadata.namespace` and `metadata.uid`).
///
/// # Errors
/// Why, for the guest's log, when the type is not one of `Normal`, `Warning`,
/// `Error`, or the object reference is not JSON or lacks a part.
pub(crate) fn from_guest(
    current: &Value,
    event: GuestEvent,
) -> Result<PostedEvent, GuestEventError> {
    if !EVENT_TYPES.contains(&event.event_type.as_str()) {
        return Err(GuestEventError::UnknownType(event.event_type));
    }
    let reason_chars = event.reason.chars().count();
    if reason_chars > MAX_REASON_CHARS {
        return Err(GuestEventError::LongReason(reason_chars));
    }
    let involved = match &event.object {
        None => ObjectRef::of(current).ok_or(GuestEventError::CallObjectUnnamed)?,
        Some(json) => {
            let object: Value =
                serde_json::from_str(json).map_err(GuestEventError::ObjectNotJson)?;
            ObjectRef::of(&object).ok_or(GuestEventError::ObjectUnnamed)?
        }
    };
    Ok(PostedEvent {
        involved,
        event_type: event.event_type,
        reason: event.reason,
        // Cut now: the Event may wait for its turn, and only this much of it goes out.
        message: shorten(&event.message),
    })
}

/// The level `posting.level` compares a log line of `level` with.
pub(crate) fn posting_level(level: Level) -> PostingLevel {
    match level {
        Level::Debug => PostingLevel::Debug,
        Level::Info => PostingLevel::Info,
        Level::Warning => PostingLevel::Warning,
        Level::Error => PostingLevel::Error,
    }
}

/// What a handler logged at `level` about the object `current`, as Kopf posts it when
/// `posting.loggers` is on: reason `Logging`, a type by level (`Debug`, `Normal`,
/// `Warning`, `Error`); `None` when the object has no name to refer to.
pub(crate) fn from_log(current: &Value, level: Level, message: &str) -> Option<PostedEvent> {
    let event_type = match level {
        Level::Debug => "Debug",
        Level::Info => "Normal",
        Level::Warning => "Warning",
        Level::Error => "Error",
    };
    Some(PostedEvent {
        involved: ObjectRef::of(current)?,
        event_type: event_type.to_owned(),
        reason: "Logging".to_owned(),
        message: shorten(message),
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
pub(super) fn event_namespace(involved: &ObjectRef) -> &str {
    involved.namespace.as_deref().unwrap_or("default")
}

/// How often one Event happened, and when first and last: once for most; a guest's
/// Events that wait for its pace fold identical ones into one (`pacing`), which goes out
/// with their count, as client-go's EventCorrelator counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) count: u32,
    pub(crate) first: DateTime<Utc>,
    pub(crate) last: DateTime<Utc>,
}

impl Seen {
    /// Once, at `at`.
    pub(crate) fn once(at: DateTime<Utc>) -> Seen {
        Seen {
            count: 1,
            first: at,
            last: at,
        }
    }

    /// Once more, at `at`.
    pub(crate) fn again(&mut self, at: DateTime<Utc>) {
        self.count = self.count.saturating_add(1);
        self.last = self.last.max(at);
    }
}

/// The core/v1 Event body for `event`, `seen` as it was (KOPF.md §6.5), with the names
/// of `posting`, written out member by member: building it as a `Value` first cost every
/// Event a copy (docs/performance.md). An Event seen more than once has core/v1's
/// `count`, `firstTimestamp` and `lastTimestamp` of its first and last time, and its
/// `series` (the count and the last time, to the microsecond), as client-go's
/// correlator and events.k8s.io/v1 keep them; one seen once is Kopf's, without them.
pub(super) fn event_body<'a>(
    event: &'a PostedEvent,
    posting: &'a Posting,
    seen: Seen,
) -> EventBody<'a> {
    let r = &event.involved;
    let namespace = event_namespace(r);
    // `firstTimestamp`/`lastTimestamp` are metav1.Time (whole seconds); `eventTime`
    // and `lastObservedTime` are metav1.MicroTime.
    let seconds = |at: DateTime<Utc>| at.to_rfc3339_opts(SecondsFormat::Secs, true);
    let micros = |at: DateTime<Utc>| at.to_rfc3339_opts(SecondsFormat::Micros, true);
    let repeated = seen.count > 1;
    EventBody {
        api_version: "v1",
        kind: "Event",
        metadata: EventMeta {
            namespace,
            generate_name: &posting.event_name_prefix,
        },
        action: "Action?",
        event_type: &event.event_type,
        reason: &event.reason,
        message: shorten(&event.message),
        reporting_component: &posting.reporting_component,
        reporting_instance: &posting.reporting_instance,
        source: EventSource {
            component: &posting.reporting_component,
        },
        involved_object: Involved {
            api_version: &r.api_version,
            kind: &r.kind,
            name: &r.name,
            namespace,
            uid: r.uid.as_deref(),
        },
        first_timestamp: seconds(seen.first),
        last_timestamp: seconds(seen.last),
        event_time: micros(seen.first),
        count: repeated.then_some(seen.count),
        series: repeated.then(|| Series {
            count: seen.count,
            last_observed_time: micros(seen.last),
        }),
    }
}

/// An Event as it is sent: Kopf's members, in Kopf's order, then the count of one seen
/// more than once.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct EventBody<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: EventMeta<'a>,
    action: &'static str,
    #[serde(rename = "type")]
    event_type: &'a str,
    reason: &'a str,
    message: String,
    reporting_component: &'a str,
    reporting_instance: &'a str,
    source: EventSource<'a>,
    involved_object: Involved<'a>,
    first_timestamp: String,
    last_timestamp: String,
    event_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    series: Option<Series>,
}

/// core/v1's `EventSeries`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Series {
    count: u32,
    last_observed_time: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct EventMeta<'a> {
    namespace: &'a str,
    generate_name: &'a str,
}

#[derive(Debug, Serialize)]
struct EventSource<'a> {
    component: &'a str,
}

/// The Event's `involvedObject`; without `uid` where the object's is not known.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Involved<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    namespace: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a str>,
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use super::*;

    pub(crate) fn pod_ref() -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "web-0".into(),
            namespace: Some("team".into()),
            uid: Some("u-1".into()),
        }
    }

    pub(crate) fn event(involved: ObjectRef, reason: &str, message: &str) -> PostedEvent {
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
        let posting = Posting::default();
        let posted = event(pod_ref(), "Created", "all good");
        let body = event_body(&posted, &posting, Seen::once(now));
        let body = serde_json::to_value(body).unwrap();
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

    /// An Event seen more than once carries its count, its first and last times and a
    /// series, as client-go's correlator leaves them on core/v1 Events.
    #[test]
    fn a_repeated_event_has_its_count_and_series() {
        let at = |text: &str| {
            DateTime::parse_from_rfc3339(text)
                .unwrap()
                .with_timezone(&Utc)
        };
        let mut seen = Seen::once(at("2026-11-30T07:30:00.250Z"));
        seen.again(at("2026-11-30T07:30:09.500001Z"));
        seen.again(at("2026-11-30T07:30:05Z"));
        assert_eq!(seen.count, 3);
        let posting = Posting::default();
        let posted = event(pod_ref(), "Burst", "same");
        let body = serde_json::to_value(event_body(&posted, &posting, seen)).unwrap();
        assert_eq!(body["count"], 3);
        assert_eq!(body["firstTimestamp"], "2026-11-30T07:30:00Z");
        assert_eq!(body["lastTimestamp"], "2026-11-30T07:30:09Z");
        assert_eq!(body["eventTime"], "2026-11-30T07:30:00.250000Z");
        assert_eq!(
            body["series"],
            json!({"count": 3, "lastObservedTime": "2026-11-30T07:30:09.500001Z"})
        );
    }

    /// `posting.reporting_component`, `reporting_instance` and `event_name_prefix`:
    /// Kopf's own names, say.
    #[test]
    fn the_names_are_the_settings() {
        let posting = Posting {
            reporting_component: "kopf".into(),
            reporting_instance: "dev".into(),
            event_name_prefix: "kopf-event-".into(),
            ..Posting::default()
        };
        let posted = event(pod_ref(), "Created", "");
        let body = event_body(&posted, &posting, Seen::once(Utc::now()));
        let body = serde_json::to_value(body).unwrap();
        assert_eq!(body["metadata"]["generateName"], "kopf-event-");
        assert_eq!(body["reportingComponent"], "kopf");
        assert_eq!(body["source"], json!({"component": "kopf"}));
        assert_eq!(body["reportingInstance"], "dev");
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
        let posting = Posting::default();
        let posted = event(node, "Seen", "");
        let body = event_body(&posted, &posting, Seen::once(Utc::now()));
        let body = serde_json::to_value(body).unwrap();
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
            from_guest(&current, ask(None, "Warning")).ok(),
            Some(PostedEvent {
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

        let wrong_type = from_guest(&current, ask(None, "Info"))
            .unwrap_err()
            .to_string();
        assert!(wrong_type.contains("\"Info\""), "{wrong_type}");
        let not_json = from_guest(&current, ask(Some("{"), "Normal"))
            .unwrap_err()
            .to_string();
        assert!(not_json.contains("not JSON"), "{not_json}");
        let nameless = from_guest(&current, ask(Some(r#"{"kind": "Pod"}"#), "Normal"));
        assert!(nameless.is_err());
        assert!(from_guest(&json!({}), ask(None, "Normal")).is_err());

        // What may wait for its turn is small: the message is cut, a long reason refused.
        let long = GuestEvent {
            message: "m".repeat(60 << 10),
            ..ask(None, "Normal")
        };
        let kept = from_guest(&current, long).unwrap();
        assert_eq!(kept.message.chars().count(), MAX_MESSAGE_CHARS);
        let wordy = GuestEvent {
            reason: "R".repeat(129),
            ..ask(None, "Normal")
        };
        let refused = from_guest(&current, wordy).unwrap_err().to_string();
        assert_eq!(
            refused,
            "the Event reason is 129 characters long; Kubernetes allows 128"
        );
        let just = GuestEvent {
            reason: "R".repeat(128),
            ..ask(None, "Normal")
        };
        assert!(from_guest(&current, just).is_ok());
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
}
