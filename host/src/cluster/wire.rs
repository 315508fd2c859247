//! Objects as the operator reads them off the wire, through kube's `Api`: a watched
//! object as the API server wrote it ([`RawObject`]), and a body to work on ([`Body`]).
//!
//! kube's `DynamicObject` is read through serde's buffer for its flattened fields (every
//! value built twice) and its `ObjectMeta` typed, and the operator then turned it into a
//! `Value`, and for a watched object back into text: together about a tenth of the
//! operator's CPU (`make bench`, 1,000 objects created while running, 3 runs each
//! alternated: 0.74–1.03 -> 0.64–0.67 ms per handled object). These read each
//! response once: a watched object stays the text it came as, checked to be JSON while it
//! is read, with only its `apiVersion`, `kind` and identifying metadata parsed; a patched
//! object is parsed straight into the `Value` the operator works on.

use std::borrow::Cow;
use std::sync::Arc;

use kube::api::{ApiResource, ObjectMeta};
use kube::core::{DynamicResourceScope, Resource};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

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

/// An object's body, parsed once, straight into a `Value` (an API server's answer to a
/// patch: the operator works on it as the freshest body).
#[derive(Debug, Clone)]
pub(crate) struct Body {
    body: Value,
    /// Empty: kube's `Api` reads no metadata of what a patch returns.
    meta: ObjectMeta,
}

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Body {
            body: Value::deserialize(deserializer)?,
            meta: ObjectMeta::default(),
        })
    }
}

impl Body {
    pub(crate) fn into_value(self) -> Value {
        self.body
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

    #[test]
    fn a_patched_body_is_the_servers_json() {
        let body: Body = serde_json::from_str(r#"{"kind":"K","spec":{"a":[1,2]}}"#).unwrap();
        assert_eq!(
            body.into_value(),
            json!({"kind": "K", "spec": {"a": [1, 2]}})
        );
    }
}
