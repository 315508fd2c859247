//! Every object a watch stream knows, as its compact JSON compressed against another
//! object of the same stream.
//!
//! The stream keeps each object's last body for as long as the object lives (for the
//! DELETED event of an object that vanished while the stream was down, and for a replay
//! after a reload), so this is the largest memory an operator spends per object. Objects
//! of one resource share most of their text (keys, labels, managed fields, the same spec
//! shapes): compressed with LZ4 against the stream's first object as a dictionary, a
//! 1,136-byte kopfexample takes 96 bytes; compressing it takes about a microsecond,
//! restoring it a seventh of that. A body is restored only for those rare uses.

use std::collections::HashMap;
use std::sync::Arc;

use crate::handlers::ObjectKey;

/// The objects a stream knows, by key.
#[derive(Default)]
pub(super) struct Known {
    objects: HashMap<ObjectKey, Packed>,
    /// The first body stored: what every other is compressed against. Kept while the
    /// stream lives (even once that object is gone), as every entry depends on it.
    dictionary: Option<Arc<str>>,
}

/// One body, compressed.
struct Packed {
    /// Its length as text.
    len: u32,
    bytes: Box<[u8]>,
}

impl Known {
    /// Keeps `text` as the body of `key`; whether the key was known before.
    pub(super) fn insert(&mut self, key: &ObjectKey, text: &Arc<str>) -> bool {
        let dictionary = self.dictionary.get_or_insert_with(|| Arc::clone(text));
        let packed = match u32::try_from(text.len()) {
            Ok(len) => Packed {
                len,
                bytes: lz4_flex::block::compress_with_dict(text.as_bytes(), dictionary.as_bytes())
                    .into_boxed_slice(),
            },
            // Over 4 GiB of JSON cannot come from an API server; known without a body.
            Err(_) => Packed {
                len: 0,
                bytes: Box::default(),
            },
        };
        self.objects.insert(key.clone(), packed).is_some()
    }

    /// Forgets `key`; its body, if it was known.
    pub(super) fn remove(&mut self, key: &ObjectKey) -> Option<Arc<str>> {
        let packed = self.objects.remove(key)?;
        self.unpack(key, &packed)
    }

    /// Forgets `key` (its deletion came with its body: nothing to restore).
    pub(super) fn forget(&mut self, key: &ObjectKey) {
        self.objects.remove(key);
    }

    /// The keys known, in no order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.objects.keys()
    }

    /// Every object known with its body, in no order.
    pub(super) fn bodies(&self) -> impl Iterator<Item = (&ObjectKey, Arc<str>)> {
        self.objects
            .iter()
            .filter_map(|(key, packed)| Some((key, self.unpack(key, packed)?)))
    }

    /// The body of `packed`; none (said in a log line) if it cannot be restored, which
    /// only a bug here could cause.
    fn unpack(&self, key: &ObjectKey, packed: &Packed) -> Option<Arc<str>> {
        let dictionary = self.dictionary.as_deref().unwrap_or_default();
        let restored = lz4_flex::block::decompress_with_dict(
            &packed.bytes,
            packed.len as usize,
            dictionary.as_bytes(),
        )
        .map_err(|error| error.to_string())
        .and_then(|bytes| String::from_utf8(bytes).map_err(|error| error.to_string()));
        match restored {
            Ok(text) => Some(Arc::from(text)),
            Err(error) => {
                tracing::error!(
                    "The last body of {key} could not be restored ({error}); it is left out."
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(name: &str, spec: &str) -> Arc<str> {
        Arc::from(format!(
            r#"{{"apiVersion":"kopf.dev/v1","kind":"KopfExample","metadata":{{"name":"{name}","namespace":"default","uid":"uid-{name}","resourceVersion":"17","annotations":{{"kopf.zalando.org/last-handled-configuration":"{{\"spec\":{{\"field\":\"value\"}}}}\n"}}}},"spec":{spec}}}"#
        ))
    }

    #[test]
    fn bodies_come_back_as_they_went_in_and_take_little_room() {
        let mut known = Known::default();
        let first = body("first", r#"{"field":"value","items":["item1","item2"]}"#);
        let second = body(
            "second",
            r#"{"field":"other","items":["item3"],"ünïcode":"✓"}"#,
        );
        let (a, b) = ("a".to_owned(), "b".to_owned());
        assert!(!known.insert(&a, &first), "a is new");
        assert!(!known.insert(&b, &second), "b is new");
        assert!(known.insert(&b, &second), "b was known");

        let packed = known.objects[&b].bytes.len();
        assert!(
            packed * 3 < second.len(),
            "{packed} bytes for a body of {}: compressed against the first",
            second.len()
        );
        let mut bodies: Vec<(ObjectKey, Arc<str>)> = known
            .bodies()
            .map(|(key, text)| (key.clone(), text))
            .collect();
        bodies.sort();
        assert_eq!(
            bodies,
            vec![(a.clone(), first.clone()), (b.clone(), second.clone())]
        );

        assert_eq!(known.remove(&a), Some(first));
        assert_eq!(known.remove(&a), None);
        known.insert(&a, &body("a", "{}"));
        known.forget(&a);
        assert_eq!(known.remove(&a), None, "forgotten");
        // The dictionary outlives the object it was.
        assert_eq!(known.remove(&b), Some(second));
        assert_eq!(known.keys().count(), 0);
    }

    #[test]
    fn a_body_unlike_the_dictionary_is_kept_whole() {
        let mut known = Known::default();
        let key = "k".to_owned();
        known.insert(&"d".to_owned(), &Arc::from("{}"));
        let odd: Arc<str> = Arc::from(format!("{{\"data\":\"{}\"}}", "xyz€".repeat(500)));
        known.insert(&key, &odd);
        assert_eq!(known.remove(&key), Some(odd));
    }
}
