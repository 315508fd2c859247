//! The JSON merge patch a handler builds for its object (Kopf's `patch` kwarg).

use serde_json::{Map, Value};

/// A JSON merge patch (RFC 7386) for the handler's object, handed to the host in
/// the reply: the host applies it to the object (and to its `/status`).
///
/// ```
/// # use serde_json::json;
/// let mut patch = kapsel::Patch::default();
/// patch.set("status.phase", "Ready");
/// patch.set_at(&["metadata", "labels", "example.com/owner"], "me");
/// patch.remove("spec.obsolete");
/// assert_eq!(
///     patch.to_value(),
///     json!({"status": {"phase": "Ready"},
///            "metadata": {"labels": {"example.com/owner": "me"}},
///            "spec": {"obsolete": null}})
/// );
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Patch {
    root: Map<String, Value>,
}

impl Patch {
    /// Sets the value at a dotted path (`"status.phase"`), creating the objects
    /// on the way. Use [`Patch::set_at`] when a key contains dots (labels).
    pub fn set(&mut self, path: &str, value: impl Into<Value>) {
        let path: Vec<&str> = path.split('.').collect();
        self.set_at(&path, value);
    }

    /// Sets the value at a path given as its keys.
    ///
    /// # Caveats
    /// An empty path does nothing. A non-object met on the way is replaced by
    /// an object.
    pub fn set_at(&mut self, path: &[&str], value: impl Into<Value>) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut map = &mut self.root;
        for key in parents {
            let slot = map
                .entry((*key).to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            let Value::Object(inner) = slot else {
                return;
            };
            map = inner;
        }
        map.insert((*last).to_owned(), value.into());
    }

    /// Removes the field at a dotted path from the object (a `null` in the patch).
    pub fn remove(&mut self, path: &str) {
        self.set(path, Value::Null);
    }

    /// Removes the field at a path given as its keys.
    pub fn remove_at(&mut self, path: &[&str]) {
        self.set_at(path, Value::Null);
    }

    /// Merges a JSON object into the patch (RFC 7386 over the patch itself;
    /// `null`s are kept, as removals). A non-object is ignored.
    pub fn merge(&mut self, value: Value) {
        fn merge_into(target: &mut Map<String, Value>, source: Map<String, Value>) {
            for (key, value) in source {
                match (target.get_mut(&key), value) {
                    (Some(Value::Object(inner)), Value::Object(source)) => {
                        merge_into(inner, source)
                    }
                    (_, value) => {
                        target.insert(key, value);
                    }
                }
            }
        }
        if let Value::Object(source) = value {
            merge_into(&mut self.root, source);
        }
    }

    /// The patch's `status` object, to edit in place.
    pub fn status(&mut self) -> &mut Map<String, Value> {
        self.object("status")
    }

    /// The patch's `spec` object.
    pub fn spec(&mut self) -> &mut Map<String, Value> {
        self.object("spec")
    }

    /// The patch's `metadata` object.
    pub fn metadata(&mut self) -> &mut Map<String, Value> {
        self.object("metadata")
    }

    fn object(&mut self, key: &str) -> &mut Map<String, Value> {
        let slot = self
            .root
            .entry(key.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        match slot {
            Value::Object(map) => map,
            _ => unreachable!("replaced by an object above"),
        }
    }

    /// `true` when the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.root.is_empty()
    }

    /// The patch as a JSON value.
    pub fn to_value(&self) -> Value {
        Value::Object(self.root.clone())
    }

    /// The patch as JSON text for the host; `None` when empty.
    pub(crate) fn to_json(&self) -> Option<String> {
        (!self.is_empty()).then(|| Value::Object(self.root.clone()).to_string())
    }
}
