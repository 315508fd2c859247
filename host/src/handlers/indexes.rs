//! The in-memory indexes `#[kapsel::index]` handlers build, per guest (KOPF.md §7), which
//! guests read through `index-lookup` and `index-keys`.

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

/// Identifies an object across events: its uid (or a fallback for uid-less ones).
pub(crate) type ObjectKey = String;

/// One index: key (JSON) → the values (JSON) contributed by each object.
///
/// Stores are never empty: a key vanishes with its last value. The reverse
/// map keeps per-object updates O(keys of that object).
#[derive(Debug, Default)]
struct Index {
    stores: BTreeMap<String, BTreeMap<ObjectKey, String>>,
    keys_of: HashMap<ObjectKey, BTreeSet<String>>,
    /// Objects whose indexing failed with a temporary (until then) or
    /// permanent (None) error: they are out of the index meanwhile.
    excluded: HashMap<ObjectKey, Option<DateTime<Utc>>>,
}

impl Index {
    fn remove_object(&mut self, object: &str) {
        for key in self.keys_of.remove(object).unwrap_or_default() {
            if let Some(store) = self.stores.get_mut(&key) {
                store.remove(object);
                if store.is_empty() {
                    self.stores.remove(&key);
                }
            }
        }
    }

    fn replace_object(&mut self, object: &str, entries: Vec<(String, String)>) {
        let new_keys: BTreeSet<String> = entries.iter().map(|(k, _)| k.clone()).collect();
        let old_keys = self.keys_of.get(object).cloned().unwrap_or_default();
        for gone in old_keys.difference(&new_keys) {
            if let Some(store) = self.stores.get_mut(gone) {
                store.remove(object);
                if store.is_empty() {
                    self.stores.remove(gone);
                }
            }
        }
        for (key, value) in entries {
            self.stores
                .entry(key)
                .or_default()
                .insert(object.to_owned(), value);
        }
        if new_keys.is_empty() {
            self.keys_of.remove(object);
        } else {
            self.keys_of.insert(object.to_owned(), new_keys);
        }
    }
}

/// What an index handler's call amounted to, for the store.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum IndexUpdate {
    /// The handler returned nothing: the object's previous values stay.
    Keep,
    /// The object's complete set of key/value pairs (JSON texts).
    Entries(Vec<(String, String)>),
    /// A temporary error: out of the index until this instant.
    ExcludeUntil(DateTime<Utc>),
    /// A permanent error: out of the index for the life of this process.
    ExcludeForever,
    /// An arbitrary error in `ignored` mode: stale values stay.
    Ignored,
}

/// Every index of every guest. Indexes are scoped per guest: a guest can read
/// only the indexes its own handlers build.
#[derive(Debug, Clone, Default)]
pub(crate) struct Indexes {
    inner: Arc<Mutex<HashMap<(String, String), Index>>>,
}

impl Indexes {
    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), Index>> {
        // A panic elsewhere while holding the lock must not take indexing down.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Declares an index so lookups find it empty rather than missing.
    pub(crate) fn declare(&self, guest: &str, index: &str) {
        self.lock()
            .entry((guest.to_owned(), index.to_owned()))
            .or_default();
    }

    /// Keeps only the indexes `keep` accepts (by guest and index id): those of handlers a
    /// reload took away are dropped.
    pub(crate) fn retain(&self, keep: impl Fn(&str, &str) -> bool) {
        self.lock().retain(|(guest, index), _| keep(guest, index));
    }

    /// Whether an object is excluded at `now` (handler time) because of an earlier error.
    pub(crate) fn is_excluded(
        &self,
        guest: &str,
        index: &str,
        object: &str,
        now: DateTime<Utc>,
    ) -> bool {
        let mut all = self.lock();
        let Some(idx) = all.get_mut(&(guest.to_owned(), index.to_owned())) else {
            return false;
        };
        match idx.excluded.get(object) {
            Some(None) => true,
            Some(Some(until)) if *until > now => true,
            Some(Some(_)) => {
                idx.excluded.remove(object);
                false
            }
            None => false,
        }
    }

    pub(crate) fn apply(&self, guest: &str, index: &str, object: &str, update: IndexUpdate) {
        let mut all = self.lock();
        let idx = all.entry((guest.to_owned(), index.to_owned())).or_default();
        match update {
            IndexUpdate::Keep | IndexUpdate::Ignored => {}
            IndexUpdate::Entries(entries) => {
                idx.excluded.remove(object);
                idx.replace_object(object, entries);
            }
            IndexUpdate::ExcludeUntil(until) => {
                idx.remove_object(object);
                idx.excluded.insert(object.to_owned(), Some(until));
            }
            IndexUpdate::ExcludeForever => {
                idx.remove_object(object);
                idx.excluded.insert(object.to_owned(), None);
            }
        }
    }

    /// Removes an object from one index (it stopped matching the filters).
    pub(crate) fn remove(&self, guest: &str, index: &str, object: &str) {
        if let Some(idx) = self.lock().get_mut(&(guest.to_owned(), index.to_owned())) {
            idx.remove_object(object);
        }
    }

    /// Removes a deleted object from every index, and forgets its errors.
    pub(crate) fn forget(&self, object: &str) {
        for idx in self.lock().values_mut() {
            idx.remove_object(object);
            idx.excluded.remove(object);
        }
    }

    /// Values under a key (None when the index does not exist).
    pub(crate) fn lookup(&self, guest: &str, index: &str, key: &str) -> Option<Vec<String>> {
        let all = self.lock();
        let idx = all.get(&(guest.to_owned(), index.to_owned()))?;
        Some(
            idx.stores
                .get(key)
                .map(|s| s.values().cloned().collect())
                .unwrap_or_default(),
        )
    }

    pub(crate) fn keys(&self, guest: &str, index: &str) -> Vec<String> {
        let all = self.lock();
        all.get(&(guest.to_owned(), index.to_owned()))
            .map(|idx| idx.stores.keys().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> IndexUpdate {
        IndexUpdate::Entries(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn returning_nothing_keeps_the_objects_values() {
        let ix = Indexes::default();
        ix.apply("g", "i", "o1", entries(&[("\"k\"", "1")]));
        ix.apply("g", "i", "o1", IndexUpdate::Keep);
        assert_eq!(ix.lookup("g", "i", "\"k\""), Some(vec!["1".into()]));
    }

    #[test]
    fn null_values_are_stored_and_missing_keys_removed() {
        let ix = Indexes::default();
        ix.apply("g", "i", "o1", entries(&[("\"a\"", "1"), ("\"b\"", "2")]));
        ix.apply("g", "i", "o1", entries(&[("\"a\"", "null")]));
        assert_eq!(ix.lookup("g", "i", "\"a\""), Some(vec!["null".into()]));
        assert_eq!(ix.lookup("g", "i", "\"b\""), Some(vec![]));
        assert_eq!(ix.keys("g", "i"), vec!["\"a\""]);
    }

    #[test]
    fn stores_collect_values_of_several_objects_and_deletion_removes_one() {
        let ix = Indexes::default();
        ix.apply("g", "i", "o1", entries(&[("\"ns\"", "\"a\"")]));
        ix.apply("g", "i", "o2", entries(&[("\"ns\"", "\"b\"")]));
        assert_eq!(ix.lookup("g", "i", "\"ns\"").map(|v| v.len()), Some(2));
        ix.forget("o1");
        assert_eq!(ix.lookup("g", "i", "\"ns\""), Some(vec!["\"b\"".into()]));
        ix.forget("o2");
        assert!(
            ix.keys("g", "i").is_empty(),
            "a key vanishes with its last value"
        );
    }

    #[test]
    fn errors_exclude_or_keep() {
        let ix = Indexes::default();
        ix.apply("g", "i", "o1", entries(&[("1", "1")]));
        ix.apply("g", "i", "o1", IndexUpdate::Ignored);
        assert_eq!(ix.keys("g", "i"), vec!["1"]);
        ix.apply("g", "i", "o1", IndexUpdate::ExcludeForever);
        assert!(ix.keys("g", "i").is_empty());
        let now = Utc::now();
        assert!(ix.is_excluded("g", "i", "o1", now));
        let later = now + chrono::TimeDelta::seconds(5);
        ix.apply("g", "i", "o2", IndexUpdate::ExcludeUntil(later));
        assert!(
            ix.is_excluded("g", "i", "o2", now),
            "until its delay is over"
        );
        assert!(
            !ix.is_excluded("g", "i", "o2", later),
            "a past delay no longer excludes"
        );
    }

    #[test]
    fn indexes_are_per_guest_and_declared_ones_are_empty() {
        let ix = Indexes::default();
        ix.declare("g", "i");
        assert_eq!(ix.lookup("g", "i", "1"), Some(vec![]));
        assert_eq!(ix.lookup("other", "i", "1"), None);
    }
}
