//! One object event as the stages see it: its raw type (Kopf's `type`), the object's
//! identity (its uid) and its body; and as it waits in its object's queue, with the body
//! only as text.

use std::sync::Arc;

use serde_json::Value;

use crate::cluster::wire;
use crate::handlers::ObjectKey;

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

/// One object event as the stages handle it.
#[derive(Debug, Clone)]
pub(crate) struct ObjectEvent {
    pub(crate) event_type: EventType,
    pub(crate) key: ObjectKey,
    /// The object with `apiVersion` and `kind` filled in, as far as the stages read it:
    /// without `metadata.managedFields` unless a handler's filter asks for them
    /// ([`QueuedEvent::parsed`]).
    pub(crate) body: Arc<Value>,
    /// The same as text, as the API server wrote it (see [`QueuedEvent::text`]); every
    /// call about the event hands it to guests.
    pub(crate) text: Arc<str>,
}

impl ObjectEvent {
    /// An event about `body`, its text written from it.
    #[cfg(test)]
    pub(crate) fn of(event_type: EventType, key: ObjectKey, body: Arc<Value>) -> ObjectEvent {
        let text = Arc::from(body.to_string());
        ObjectEvent {
            event_type,
            key,
            body,
            text,
        }
    }
}

/// One object event as it waits in its object's queue for the object's turn: the body
/// only as JSON text, shared with the stream's memory of the object. A parsed
/// body takes several times the memory of its text, and a backlog of thousands of
/// objects waits with one event each (measured: 10,000 objects listed at start).
#[derive(Debug, Clone)]
pub(crate) struct QueuedEvent {
    pub(crate) event_type: EventType,
    pub(crate) key: ObjectKey,
    /// The object as the API server wrote it, with `apiVersion` and `kind` put first
    /// where it lacks them (`cluster::wire::RawObject`).
    pub(crate) text: Arc<str>,
}

impl QueuedEvent {
    /// The event with its body parsed, once its turn has come: without
    /// `metadata.managedFields` ([`wire::UNREAD_MEMBER`]) unless `whole`. (The text was
    /// checked to be JSON when it was read: it parses.)
    pub(crate) fn parsed(self, whole: bool) -> ObjectEvent {
        let parsed = if whole {
            serde_json::from_str(&self.text)
        } else {
            wire::parse_without(&self.text, &wire::UNREAD_MEMBER)
        };
        let body = parsed.unwrap_or(Value::Null);
        ObjectEvent {
            event_type: self.event_type,
            key: self.key,
            body: Arc::new(body),
            text: self.text,
        }
    }
}

/// What an object's key is made of (empty: absent).
pub(crate) struct KeyFields<'a> {
    pub(crate) uid: &'a str,
    pub(crate) kind: &'a str,
    pub(crate) api_version: &'a str,
    pub(crate) name: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) creation_timestamp: &'a str,
}

/// The stable identity of an object: its uid, or Kopf's fallback for uid-less ones.
pub(crate) fn key_from(fields: &KeyFields<'_>) -> ObjectKey {
    if !fields.uid.is_empty() {
        return fields.uid.to_owned();
    }
    format!(
        "{}//{}//{}//{}//{}",
        fields.kind, fields.api_version, fields.name, fields.namespace, fields.creation_timestamp
    )
}

/// `namespace/name` (or `name`), as Kopf prefixes object log lines.
pub(crate) fn object_ref(body: &Value) -> String {
    let meta = body.get("metadata");
    let get = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    match get("namespace") {
        "" => get("name").to_owned(),
        ns => format!("{ns}/{}", get("name")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_prefer_uids_and_fall_back_like_kopf() {
        let fields = KeyFields {
            uid: "u1",
            kind: "Pod",
            api_version: "v1",
            name: "a",
            namespace: "ns",
            creation_timestamp: "t",
        };
        assert_eq!(key_from(&fields), "u1");
        assert_eq!(
            key_from(&KeyFields { uid: "", ..fields }),
            "Pod//v1//a//ns//t"
        );
    }
}
