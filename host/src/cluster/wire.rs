//! Objects as the operator reads them off the wire, through kube's `Api`: a watched
//! object as the API server wrote it ([`RawObject`]), and a body to work on ([`Body`]).
//!
//! kube's `DynamicObject` is read through serde's buffer for its flattened fields (every
//! value built twice) and its `ObjectMeta` typed, and the operator then turned it into a
//! `Value`, and for a watched object back into text: together about a tenth of the
//! operator's CPU (docs/performance.md). These read each
//! response once: a watched object stays the text it came as, checked to be JSON while it
//! is read, with only its `apiVersion`, `kind` and identifying metadata parsed; a patched
//! object is read into a `Value` only as far as the operator reads it (the fields it
//! wrote, what its next write needs), the rest skipped unbuilt.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use kube::api::{ApiResource, ObjectMeta};
use kube::core::{DynamicResourceScope, Resource};
use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// One object of a list or a watch event: its text, and what a stream reads of it.
#[derive(Debug, Clone)]
pub(crate) struct RawObject {
    /// Its name, namespace, uid and `resourceVersion` (kube's watcher reads the last).
    meta: ObjectMeta,
    /// `metadata.creationTimestamp`, as written.
    created: Option<String>,
    api_version: Option<String>,
    kind: Option<String>,
    text: Box<RawValue>,
}

/// What is parsed of a watched object's text.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head {
    api_version: Option<String>,
    kind: Option<String>,
    metadata: Option<HeadMeta>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeadMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<String>,
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Box::<RawValue>::deserialize(deserializer)?;
        // As strict as kube's `ObjectMeta` on these fields: a name that is no string
        // fails the list or the event, as before.
        let head: Head = serde_json::from_str(text.get()).map_err(D::Error::custom)?;
        let (meta, created) = head
            .metadata
            .map(|meta| {
                let kept = ObjectMeta {
                    name: meta.name,
                    namespace: meta.namespace,
                    uid: meta.uid,
                    resource_version: meta.resource_version,
                    ..ObjectMeta::default()
                };
                (kept, meta.creation_timestamp)
            })
            .unwrap_or_default();
        Ok(RawObject {
            meta,
            created,
            api_version: head.api_version,
            kind: head.kind,
            text,
        })
    }
}

impl RawObject {
    pub(crate) fn name(&self) -> Option<&str> {
        self.meta.name.as_deref()
    }

    pub(crate) fn namespace(&self) -> Option<&str> {
        self.meta.namespace.as_deref()
    }

    pub(crate) fn uid(&self) -> Option<&str> {
        self.meta.uid.as_deref()
    }

    pub(crate) fn created(&self) -> Option<&str> {
        self.created.as_deref()
    }

    pub(crate) fn api_version(&self) -> Option<&str> {
        self.api_version.as_deref()
    }

    pub(crate) fn kind(&self) -> Option<&str> {
        self.kind.as_deref()
    }

    /// Its text, with `apiVersion` and `kind` put first where it lacks them (the items
    /// of a list may): these, when asked for. Copied once, from what was read.
    pub(crate) fn into_text(self, api_version: &str, kind: &str) -> Arc<str> {
        let text = self.text.get();
        let mut missing = String::new();
        for (name, given, value) in [
            ("apiVersion", &self.api_version, api_version),
            ("kind", &self.kind, kind),
        ] {
            if given.is_none() {
                // A string always serialises.
                let value = serde_json::to_string(value).unwrap_or_default();
                missing.push_str(&format!("\"{name}\":{value},"));
            }
        }
        // The text is an object (its head parsed as one): its first `{` opens it.
        let Some(open) = text.find('{').filter(|_| !missing.is_empty()) else {
            return Arc::from(text);
        };
        let rest = &text[open + 1..];
        if rest.trim_start().starts_with('}') {
            // No member follows the ones put first.
            missing.pop();
        }
        Arc::from(format!("{{{missing}{rest}"))
    }
}

/// An object as an API server answered a write with it: its text (checked to be JSON
/// while read), read as far as the operator needs ([`Body::read`]); or an object to
/// send, written once ([`Body::of`]).
#[derive(Debug, Clone)]
pub(crate) struct Body {
    text: Box<RawValue>,
    /// Empty: kube's `Api` reads no metadata of what a patch returns.
    meta: ObjectMeta,
}

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Body {
            text: Box::<RawValue>::deserialize(deserializer)?,
            meta: ObjectMeta::default(),
        })
    }
}

impl Serialize for Body {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.text.serialize(serializer)
    }
}

impl Body {
    /// `object` to send as it is: kube's `DynamicObject` would be built from it (its
    /// metadata typed) and written out again, and the answer read whole, where the
    /// Event poster, for one, reads nothing of it.
    pub(crate) fn of(object: &impl Serialize) -> Body {
        Body {
            // What is sent here (a `Value`, an Event's body) always writes out as JSON;
            // were it not to, the server would refuse the `null` with a clear error.
            text: serde_json::to_string(object)
                .ok()
                .and_then(|text| RawValue::from_string(text).ok())
                .unwrap_or_else(|| RawValue::NULL.to_owned()),
            meta: ObjectMeta::default(),
        }
    }

    /// The object whole, or only what `shape` names: the members `shape` has, each read
    /// as far as its own shape names (where that is an object) or whole (anything else);
    /// the other members are skipped, never built. What the operator reads of its own
    /// patch's answer is a few fields of a whole object: building all of it as a `Value`
    /// was most of the cost of reading it.
    pub(crate) fn read(&self, shape: Option<&Value>) -> Result<Value, serde_json::Error> {
        let mut read = serde_json::Deserializer::from_str(self.text.get());
        let value = match shape {
            Some(shape) => Shaped(shape).deserialize(&mut read)?,
            None => Value::deserialize(&mut read)?,
        };
        read.end()?;
        Ok(value)
    }
}

/// The member of a watched object that no stage of the operator reads (`ObjectEvent`'s
/// body): every writer's field sets, most of an object's members once the operator has
/// written to it (80 of the 130 values of a handled kopfexample). The guests get the
/// object's text, whole.
pub(crate) const UNREAD_MEMBER: [&str; 2] = ["metadata", "managedFields"];

/// An object's text parsed whole but for the member at `path`, which is skipped unbuilt
/// where there is one (where a value on the path is no object, that value is read whole).
pub(crate) fn parse_without(text: &str, path: &[&str]) -> Result<Value, serde_json::Error> {
    let mut read = serde_json::Deserializer::from_str(text);
    let value = Without(path).deserialize(&mut read)?;
    read.end()?;
    Ok(value)
}

/// A value read as far as its shape names (see [`Body::read`]).
struct Shaped<'s>(&'s Value);

impl<'de> DeserializeSeed<'de> for Shaped<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        match self.0 {
            Value::Object(members) => deserializer.deserialize_any(Members::Named(members)),
            _ => Value::deserialize(deserializer),
        }
    }
}

/// A value read whole but for the member at a path (see [`parse_without`]).
struct Without<'s>(&'s [&'s str]);

impl<'de> DeserializeSeed<'de> for Without<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        match self.0.split_first() {
            Some((left_out, below)) => {
                deserializer.deserialize_any(Members::AllBut(left_out, below))
            }
            None => Value::deserialize(deserializer),
        }
    }
}

/// Which members of an object are read; any other value (where an object was expected)
/// is read whole.
#[derive(Clone, Copy)]
enum Members<'s> {
    /// Those a shape names, each as far as its own shape names.
    Named(&'s Map<String, Value>),
    /// All but one: skipped where nothing is below it, else read but for what is.
    AllBut(&'s str, &'s [&'s str]),
}

impl<'de> Visitor<'de> for Members<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        while let Some(Key(key)) = map.next_key()? {
            let value = match self {
                Members::Named(shape) => match shape.get(&*key) {
                    Some(shape) => Some(map.next_value_seed(Shaped(shape))?),
                    None => None,
                },
                Members::AllBut(left_out, below) if *key == *left_out => match below {
                    [] => None,
                    below => Some(map.next_value_seed(Without(below))?),
                },
                Members::AllBut(..) => Some(map.next_value()?),
            };
            match value {
                Some(value) => {
                    kept.insert(key.into_owned(), value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// A member's key, borrowed from the text unless it holds an escape.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }

            fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// kube's `Resource` for an object whose kind is known at run time, as for
/// `DynamicObject`.
macro_rules! dynamic_resource {
    ($($object:ty),*) => {$(
        impl Resource for $object {
            type DynamicType = ApiResource;
            type Scope = DynamicResourceScope;

            fn kind(resource: &ApiResource) -> Cow<'_, str> {
                resource.kind.as_str().into()
            }

            fn group(resource: &ApiResource) -> Cow<'_, str> {
                resource.group.as_str().into()
            }

            fn version(resource: &ApiResource) -> Cow<'_, str> {
                resource.version.as_str().into()
            }

            fn api_version(resource: &ApiResource) -> Cow<'_, str> {
                resource.api_version.as_str().into()
            }

            fn plural(resource: &ApiResource) -> Cow<'_, str> {
                resource.plural.as_str().into()
            }

            fn meta(&self) -> &ObjectMeta {
                &self.meta
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.meta
            }
        }
    )*};
}

dynamic_resource!(RawObject, Body);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_watched_object_keeps_its_text_and_gets_the_type_it_lacks() {
        let text = r#"{"metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"7","creationTimestamp":"2026-01-01T00:00:00Z","labels":{"x":"y"}},"spec":{"z":1.50}}"#;
        let object: RawObject = serde_json::from_str(text).unwrap();
        assert_eq!(
            (
                object.name(),
                object.namespace(),
                object.uid(),
                object.created()
            ),
            (
                Some("a"),
                Some("n"),
                Some("u"),
                Some("2026-01-01T00:00:00Z")
            )
        );
        assert_eq!(object.meta().resource_version.as_deref(), Some("7"));
        assert_eq!((object.api_version(), object.kind()), (None, None));
        let filled = object.into_text("v1", "Pod");
        assert_eq!(
            *filled,
            format!(r#"{{"apiVersion":"v1","kind":"Pod",{}"#, &text[1..])
        );

        let typed: RawObject =
            serde_json::from_str(r#"{"kind":"Pod","apiVersion":"v1","metadata":{}}"#).unwrap();
        assert_eq!(
            &*typed.into_text("x", "y"),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{}}"#
        );
        let only_kind: RawObject = serde_json::from_str(r#" { "kind": "Pod" } "#).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&only_kind.into_text("v1", "y")).unwrap(),
            json!({"apiVersion": "v1", "kind": "Pod"})
        );
        let empty: RawObject = serde_json::from_str("{}").unwrap();
        assert_eq!(
            &*empty.into_text("v\"1", "K"),
            r#"{"apiVersion":"v\"1","kind":"K"}"#
        );
    }

    #[test]
    fn a_written_object_is_read_as_far_as_its_shape_names_or_whole() {
        let answer = json!({
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": "a", "resourceVersion": "8", "finalizers": ["f"],
                         "annotations": {"kopf.zalando.org/last-handled-configuration": "{}", "x": "y"},
                         "managedFields": [{"manager": "m"}]},
            "spec": {"size": 1.5, "big": 18446744073709551615_u64, "neg": -3},
            "status": {"create_fn": {"message": "created a", "more": [1, {"b": null}]}, "phase": "Created"}
        });
        let text = answer.to_string().replace("\"phase\"", "\"ph\\u0061se\"");
        let body: Body = serde_json::from_str(&text).unwrap();
        assert_eq!(body.read(None).unwrap(), answer);
        let shape = json!({
            "metadata": {"resourceVersion": null, "finalizers": null,
                         "annotations": {"kopf.zalando.org/last-handled-configuration": "..."}},
            "spec": {"size": null, "big": null, "neg": null, "absent": null},
            "status": {"create_fn": {"message": "created a"}, "phase": "Created"},
            // A shape that expects an object where the answer has another value.
            "kind": {"x": null},
        });
        assert_eq!(
            body.read(Some(&shape)).unwrap(),
            json!({
                "kind": "KopfExample",
                "metadata": {"resourceVersion": "8", "finalizers": ["f"],
                             "annotations": {"kopf.zalando.org/last-handled-configuration": "{}"}},
                "spec": {"size": 1.5, "big": 18446744073709551615_u64, "neg": -3},
                "status": {"create_fn": {"message": "created a"}, "phase": "Created"}
            })
        );
        let list: Body = serde_json::from_str(r#"[true, 1, "x", {"a": 1}]"#).unwrap();
        assert_eq!(
            list.read(Some(&json!({"a": null}))).unwrap(),
            json!([true, 1, "x", {"a": 1}])
        );
        for broken in ["{", r#"{"a": tru}"#, "[1,]"] {
            assert!(serde_json::from_str::<Body>(broken).is_err(), "{broken}");
        }
    }

    #[test]
    fn an_object_to_send_is_written_out_as_given() {
        let event = json!({"apiVersion": "v1", "kind": "Event",
                           "metadata": {"generateName": "kopf-event-", "namespace": "n"},
                           "message": "caf\u{e9} \"quoted\"", "count": 1.5});
        let body = Body::of(&event);
        let sent = serde_json::to_string(&body).unwrap();
        assert_eq!(sent, event.to_string());
        assert_eq!(
            serde_json::from_str::<Body>(&sent)
                .unwrap()
                .read(None)
                .unwrap(),
            event
        );
    }

    #[test]
    fn a_watched_object_is_parsed_without_its_managed_fields() {
        let object = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a",
                         "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {".": {}}}}],
                         "labels": {"x": "y"}},
            "spec": {"managedFields": [1], "size": 1.5, "big": 18446744073709551615_u64},
        });
        let without = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "labels": {"x": "y"}},
            "spec": {"managedFields": [1], "size": 1.5, "big": 18446744073709551615_u64},
        });
        let text = object.to_string();
        let parsed = parse_without(&text, &UNREAD_MEMBER).unwrap();
        // In the order written.
        assert_eq!(parsed.to_string(), without.to_string());
        let escaped = text.replace(r#""managedFields":[{"#, r#""managed\u0046ields":[{"#);
        assert_ne!(escaped, text);
        assert_eq!(parse_without(&escaped, &UNREAD_MEMBER).unwrap(), without);
        // Where the path meets no object, the value is read whole.
        for odd in [
            json!({"metadata": "m", "spec": {}}),
            json!({"metadata": null}),
            json!({"metadata": ["managedFields"]}),
            json!([{"metadata": {"managedFields": []}}]),
            json!({}),
        ] {
            assert_eq!(
                parse_without(&odd.to_string(), &UNREAD_MEMBER).unwrap(),
                odd
            );
        }
        for broken in ["{", r#"{"metadata": {"managedFields": [}}"#, "{} x", ""] {
            assert!(parse_without(broken, &UNREAD_MEMBER).is_err(), "{broken}");
        }
    }

    #[test]
    fn what_is_no_object_or_has_odd_identity_is_refused_with_serdes_reason() {
        for text in [
            "[]",
            r#"{"metadata": {"name": 5}}"#,
            r#"{"metadata": {"name": "a"}"#,
            r#"{"kind": null, "metadata": {"name": "a"}} x"#,
        ] {
            assert!(serde_json::from_str::<RawObject>(text).is_err(), "{text}");
        }
    }
}
