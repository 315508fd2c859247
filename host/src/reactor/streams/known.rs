//! Every object a watch stream knows, as its JSON text compressed against another object
//! of the same stream.
//!
//! The stream keeps each object's last body for as long as the object lives (for the
//! DELETED event of an object that vanished while the stream was down, and for a replay
//! after a reload), so this is the largest memory an operator spends per object. Objects
//! of one resource share most of their text (keys, labels, managed fields, the same spec
//! shapes): compressed with LZ4 against another object of the stream as a dictionary, a
//! 1,136-byte kopfexample takes ~100 bytes; compressing it takes about a microsecond,
//! restoring it a seventh of that. A body is restored only for those rare uses.
//!
//! The dictionary follows the bodies: objects change shape once an operator handles them
//! (its annotations, the status its handlers wrote, their managed fields), and a handled
//! kopfexample compressed against an unhandled one still takes ~430 bytes. After
//! [`POOR_IN_A_ROW`] bodies in a row compress poorly, the last of them becomes the
//! dictionary of those that follow. Each entry keeps the dictionary it was compressed
//! against, which lives as long as any entry uses it; bodies that compress poorly against
//! anything cost at most one dictionary per [`POOR_IN_A_ROW`] of them.

use std::collections::HashMap;
use std::sync::Arc;

use crate::handlers::ObjectKey;

/// The objects a stream knows, by key.
#[derive(Default)]
pub(super) struct Known {
    objects: HashMap<ObjectKey, Packed>,
    /// What the next bodies are compressed against: the first body stored, then the last
    /// of a run of poorly compressed ones.
    dictionary: Option<Arc<Dictionary>>,
    /// Bodies compressed poorly, in a row, against the current dictionary.
    poor: usize,
    /// Where bodies are compressed before they are stored (see [`Packed::new`]).
    scratch: Vec<u8>,
}

/// How many bodies in a row must compress poorly before the dictionary changes.
const POOR_IN_A_ROW: usize = 8;

/// LZ4 refers back at most 64 KiB: of a larger body only its end serves as dictionary.
const DICTIONARY_MAX: usize = 64 * 1024;

/// Bodies up to this size are compressed through the stream's scratch buffer, which
/// keeps the room of the largest of them; larger ones (rare) get room of their own.
const SCRATCH_MAX: usize = 64 * 1024;

/// A body that others are compressed against (its last [`DICTIONARY_MAX`] bytes).
struct Dictionary(Box<[u8]>);

impl Dictionary {
    fn of(text: &str) -> Arc<Dictionary> {
        let bytes = text.as_bytes();
        Arc::new(Dictionary(
            bytes[bytes.len().saturating_sub(DICTIONARY_MAX)..].into(),
        ))
    }
}

/// One body, compressed.
struct Packed {
    /// Its length as text.
    len: u32,
    bytes: Box<[u8]>,
    /// What it was compressed against.
    dictionary: Arc<Dictionary>,
}

impl Packed {
    /// `text` compressed against `dictionary`, through `scratch` (LZ4 wants room for the
    /// worst case: a body is compressed there, then copied out at its size, rather than
    /// allocated at the worst case and shrunk, for every event); known without a body if
    /// it is over 4 GiB (which cannot come from an API server).
    fn new(text: &str, dictionary: &Arc<Dictionary>, scratch: &mut Vec<u8>) -> Packed {
        let Ok(len) = u32::try_from(text.len()) else {
            return Packed {
                len: 0,
                bytes: Box::default(),
                dictionary: Arc::clone(dictionary),
            };
        };
        // As lz4_flex's own `compress_with_dict`: a dictionary under 4 bytes is none.
        let dict: &[u8] = if dictionary.0.len() <= 3 {
            b""
        } else {
            &dictionary.0
        };
        let input = text.as_bytes();
        let bytes = if input.len() <= SCRATCH_MAX {
            // Grown only: the room is zeroed once, not at every body.
            let room = lz4_flex::block::get_maximum_output_size(input.len());
            if scratch.len() < room {
                scratch.resize(room, 0);
            }
            match lz4_flex::block::compress_into_with_dict(input, scratch, dict) {
                Ok(written) => Box::from(&scratch[..written]),
                // Cannot happen with the room asked for; compressed the other way.
                Err(_) => lz4_flex::block::compress_with_dict(input, dict).into_boxed_slice(),
            }
        } else {
            lz4_flex::block::compress_with_dict(input, dict).into_boxed_slice()
        };
        Packed {
            len,
            bytes,
            dictionary: Arc::clone(dictionary),
        }
    }

    /// Whether it takes more than a quarter of its text.
    fn is_poor(&self) -> bool {
        self.bytes.len() * 4 > self.len as usize
    }
}

impl Known {
    /// Keeps `text` as the body of `key`; whether the key was known before.
    pub(super) fn insert(&mut self, key: &ObjectKey, text: &Arc<str>) -> bool {
        let dictionary = self.dictionary.get_or_insert_with(|| Dictionary::of(text));
        let mut packed = Packed::new(text, dictionary, &mut self.scratch);
        if packed.is_poor() {
            self.poor += 1;
            if self.poor == POOR_IN_A_ROW {
                let dictionary = Dictionary::of(text);
                packed = Packed::new(text, &dictionary, &mut self.scratch);
                self.dictionary = Some(dictionary);
                self.poor = 0;
            }
        } else {
            self.poor = 0;
        }
        self.objects.insert(key.clone(), packed).is_some()
    }

    /// Forgets `key`; its body, if it was known.
    pub(super) fn remove(&mut self, key: &ObjectKey) -> Option<Arc<str>> {
        let packed = self.objects.remove(key)?;
        unpack(key, &packed)
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
            .filter_map(|(key, packed)| Some((key, unpack(key, packed)?)))
    }
}

/// The body of `packed`; none (said in a log line) if it cannot be restored, which only
/// a bug here could cause.
fn unpack(key: &ObjectKey, packed: &Packed) -> Option<Arc<str>> {
    let restored = lz4_flex::block::decompress_with_dict(
        &packed.bytes,
        packed.len as usize,
        &packed.dictionary.0,
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

    /// `body` once an operator handled it: status, and the managed fields of its writes.
    fn handled(name: &str) -> Arc<str> {
        let unhandled = body(name, r#"{"field":"value","items":["item1","item2"]}"#);
        Arc::from(format!(
            r#"{},"status":{{"phase":"Created","create_fn":{{"message":"created {name}"}}}},"managedFields":[{{"manager":"kapsel","operation":"Update","apiVersion":"kopf.dev/v1","time":"2026-12-02T07:48:49Z","fieldsType":"FieldsV1","fieldsV1":{{"f:status":{{"f:create_fn":{{".":{{}},"f:message":{{}}}},"f:phase":{{}}}}}},"subresource":"status"}}]}}"#,
            unhandled.trim_end_matches('}')
        ))
    }

    #[test]
    fn the_dictionary_follows_the_bodies_when_their_shape_changes() {
        let mut known = Known::default();
        let names: Vec<String> = (0..40).map(|i| format!("object-{i}")).collect();
        for name in &names {
            known.insert(name, &body(name, r#"{"field":"value"}"#));
        }
        for name in &names {
            known.insert(name, &handled(name));
        }
        let poor = names
            .iter()
            .filter(|name| known.objects[*name].is_poor())
            .count();
        assert!(
            poor < POOR_IN_A_ROW,
            "{poor} of {} handled bodies compressed poorly",
            names.len()
        );
        for name in &names {
            assert_eq!(known.remove(name), Some(handled(name)));
        }
    }

    #[test]
    fn bodies_alike_in_nothing_cost_one_dictionary_per_run_of_poor_ones() {
        let mut known = Known::default();
        // Each body is its own random text: nothing compresses it.
        let bodies: Vec<Arc<str>> = (0..100u64)
            .map(|i| {
                let noise: String = (0..300)
                    .map(|j| {
                        let x = (i * 7919 + j * 104_729).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                        char::from(b'a' + (x >> 59) as u8 % 26)
                    })
                    .collect();
                Arc::from(format!(r#"{{"data":"{noise}"}}"#))
            })
            .collect();
        for (i, text) in bodies.iter().enumerate() {
            known.insert(&i.to_string(), text);
        }
        let dictionaries: std::collections::HashSet<*const Dictionary> = known
            .objects
            .values()
            .map(|packed| Arc::as_ptr(&packed.dictionary))
            .collect();
        assert!(
            dictionaries.len() <= bodies.len() / POOR_IN_A_ROW + 1,
            "{} dictionaries for {} bodies",
            dictionaries.len(),
            bodies.len()
        );
        for (i, text) in bodies.iter().enumerate() {
            assert_eq!(known.remove(&i.to_string()).as_ref(), Some(text));
        }
    }
}
