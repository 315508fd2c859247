//! Indexes (Kopf's `@kopf.index`, KOPF.md §7): declare one with the
//! [`#[kapsel::index(...)]`](macro@crate::index) attribute, read any with the
//! functions here.
//!
//! An index is named by its handler's id. Keys and values are JSON: a key may be
//! a string, a number, an array (a tuple), or `null`.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//!
//! #[kapsel::index("pods")]
//! fn pods_by_namespace(cause: &kapsel::Cause) -> BTreeMap<String, String> {
//!     let mut entries = BTreeMap::new();
//!     if let (Some(ns), Some(name)) = (cause.namespace(), cause.name()) {
//!         entries.insert(ns.to_owned(), name.to_owned());
//!     }
//!     entries
//! }
//!
//! #[kapsel::on::event("pods")]
//! fn log_neighbours(cause: &kapsel::Cause) {
//!     let ns = cause.namespace().unwrap_or_default();
//!     let names: Vec<String> = kapsel::index::get("pods_by_namespace", ns);
//!     kapsel::info!("pods in {ns}: {names:?}");
//! }
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::host;

fn key_json<K: Serialize + ?Sized>(key: &K) -> Option<String> {
    serde_json::to_string(key).ok()
}

fn decode<V: DeserializeOwned>(index: &str, json: &str) -> Option<V> {
    match serde_json::from_str(json) {
        Ok(value) => Some(value),
        Err(error) => {
            crate::log::log(
                crate::log::Level::Warning,
                &format!("index `{index}`: skipping {json}, which does not deserialise: {error}"),
            );
            None
        }
    }
}

/// The values stored under `key` in the index `index` (one per contributing
/// object, in no particular order); empty when there are none.
///
/// # Caveats
/// Values that do not deserialise into `V` are skipped, with a warning logged.
/// Use `V = serde_json::Value` to see every value as it is.
pub fn get<V: DeserializeOwned>(index: &str, key: &(impl Serialize + ?Sized)) -> Vec<V> {
    let Some(key) = key_json(key) else {
        return Vec::new();
    };
    host::index_lookup(index, &key)
        .unwrap_or_default()
        .iter()
        .filter_map(|json| decode(index, json))
        .collect()
}

/// `true` when the index holds at least one value under `key`.
pub fn contains(index: &str, key: &(impl Serialize + ?Sized)) -> bool {
    key_json(key)
        .and_then(|key| host::index_lookup(index, &key))
        .is_some_and(|values| !values.is_empty())
}

/// Every key of the index (as `K`; keys that do not deserialise are skipped,
/// with a warning logged).
pub fn keys<K: DeserializeOwned>(index: &str) -> Vec<K> {
    host::index_keys(index)
        .iter()
        .filter_map(|json| decode(index, json))
        .collect()
}

/// Every key and its values, as JSON values.
pub fn entries(index: &str) -> Vec<(Value, Vec<Value>)> {
    host::index_keys(index)
        .iter()
        .filter_map(|json| {
            let key: Value = decode(index, json)?;
            let values = host::index_lookup(index, json)
                .unwrap_or_default()
                .iter()
                .filter_map(|value| decode(index, value))
                .collect();
            Some((key, values))
        })
        .collect()
}
