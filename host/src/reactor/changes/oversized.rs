//! Diff-bases too large for the object's annotations (not in Kopf).
//!
//! The API server allows 256 KiB of annotations per object, and the diff-base copies the
//! object's essence into one (two with the V1 keys). Kopf stores it whole, so an object
//! with more content than that fails with 422 at every cycle, for good. Kapsel stores
//! the essence with its largest values replaced by `kapsel-digest:sha256:<hex>` until it
//! fits, and reports that once. When the next essence is compared with a stored one, a
//! digest is put back to the fresh value it stands for if that value is unchanged
//! ([`restore`]), so unchanged large values cause no diff and changed ones show up as a
//! change from the digest to the new value.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::pyformat;

/// kube-apiserver's limit on the total size of an object's annotations (keys + values).
pub(crate) const ANNOTATIONS_LIMIT: usize = 256 * 1024;

/// Room left for annotations written after the diff-base (the wake-up marker).
const MARGIN: usize = 4 * 1024;

/// How a digested value starts: a value that is no digest cannot be mistaken for one
/// unless it spells this out.
const PREFIX: &str = "kapsel-digest:";

/// What [`shrink`] did, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shrunk {
    /// The encoded essence's size before and after, in bytes.
    pub(crate) from: usize,
    pub(crate) to: usize,
    /// The paths of the values stored as digests, dotted (`spec.data`).
    pub(crate) paths: Vec<String>,
}

impl Shrunk {
    /// The warning logged and posted as an Event.
    pub(crate) fn message(&self) -> String {
        format!(
            "The object's essence ({} bytes) is too large to be stored whole in its annotations \
             (the API server allows {ANNOTATIONS_LIMIT} bytes in all); stored {} bytes with these \
             values as digests: {}. Changes to them are still detected; handlers see the digest \
             as the old value of a changed one.",
            self.from,
            self.to,
            self.paths.join(", ")
        )
    }
}

/// `sha256:<hex>` of the parts, each prefixed with its length (no two splits collide).
pub(crate) fn digest(parts: &[&str]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part.as_bytes());
    }
    let hex: String = context
        .finish()
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// The digest that stands for a value in a stored essence. Keys are sorted first, so a
/// value the API server returns with its keys in another order keeps its digest.
fn digest_of(value: &Value) -> String {
    format!(
        "{PREFIX}{}",
        digest(&["essence", &canonical(value).to_string()])
    )
}

fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn is_digest(value: &Value) -> bool {
    value.as_str().is_some_and(|s| s.starts_with(PREFIX))
}

/// Whether a stored essence holds digests (it was shrunk when stored).
pub(crate) fn has_digests(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.values().any(has_digests),
        other => is_digest(other),
    }
}

/// The bytes one copy of the diff-base may take: what the limit leaves after every other
/// annotation the object will have once `changes` (a merge patch's annotations, `null`
/// removing one) are applied, shared by `copies` keys.
pub(crate) fn budget(
    annotations: Option<&Map<String, Value>>,
    changes: Option<&Map<String, Value>>,
    own_keys: &[String],
) -> usize {
    // The patch's value of a key replaces the body's.
    let mut after: HashMap<&str, &Value> = HashMap::new();
    for (key, value) in annotations.into_iter().chain(changes).flatten() {
        after.insert(key, value);
    }
    let others: usize = after
        .iter()
        .filter(|(key, _)| !own_keys.iter().any(|own| own == *key))
        .map(|(key, value)| match value {
            Value::Null => 0,
            Value::String(text) => key.len() + text.len(),
            other => key.len() + other.to_string().len(),
        })
        .sum();
    let own: usize = own_keys.iter().map(String::len).sum();
    let copies = own_keys.len().max(1);
    ANNOTATIONS_LIMIT.saturating_sub(others + own + MARGIN) / copies
}

/// Replaces values of the essence with their digests until its encoded form (plus the
/// newline) fits in `budget` bytes: each time the smallest value whose digest frees
/// enough, or else the largest one. Only values reached through mappings are candidates
/// (lists are compared whole, so a list is digested whole). `None` if it already fit.
pub(crate) fn shrink(essence: &mut Value, budget: usize) -> Option<Shrunk> {
    let from = pyformat::dumps(essence).len() + 1;
    let mut size = from;
    let mut paths = Vec::new();
    while size > budget {
        let excess = size - budget;
        let mut candidates = Vec::new();
        collect(essence, &mut Vec::new(), &mut candidates);
        let sufficient = candidates
            .iter()
            .filter(|c| c.saved >= excess)
            .min_by_key(|c| c.saved);
        let Some(chosen) = sufficient.or_else(|| candidates.iter().max_by_key(|c| c.saved)) else {
            break; // nothing left to digest: the budget is smaller than the bare skeleton
        };
        if chosen.saved == 0 {
            break;
        }
        let path = chosen.path.clone();
        if let Some(value) = lookup_mut(essence, &path) {
            *value = Value::String(digest_of(value));
        }
        paths.push(path.join("."));
        size = pyformat::dumps(essence).len() + 1;
    }
    (!paths.is_empty()).then_some(Shrunk {
        from,
        to: size,
        paths,
    })
}

/// The stored essence with each digest replaced by the fresh essence's value at the same
/// path when that value is the one digested (unchanged); digests of changed or removed
/// values stay.
pub(crate) fn restore(stored: Value, fresh: &Value) -> Value {
    match stored {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| {
                    let fresh_value = fresh.get(&key).unwrap_or(&Value::Null);
                    (key, restore(value, fresh_value))
                })
                .collect(),
        ),
        digested if is_digest(&digested) => {
            if !fresh.is_null() && Some(digest_of(fresh).as_str()) == digested.as_str() {
                fresh.clone()
            } else {
                digested
            }
        }
        other => other,
    }
}

struct Candidate {
    path: Vec<String>,
    /// Bytes saved by digesting it.
    saved: usize,
}

fn collect(value: &Value, path: &mut Vec<String>, out: &mut Vec<Candidate>) {
    let Value::Object(map) = value else {
        return;
    };
    for (key, child) in map {
        path.push(key.clone());
        if !is_digest(child) {
            let size = pyformat::dumps(child).len();
            let digest_size = PREFIX.len() + "sha256:".len() + 64 + 2;
            out.push(Candidate {
                path: path.clone(),
                saved: size.saturating_sub(digest_size),
            });
            collect(child, path, out);
        }
        path.pop();
    }
}

fn lookup_mut<'a>(value: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |value, key| value.get_mut(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn big(n: usize) -> String {
        "x".repeat(n)
    }

    #[test]
    fn small_essences_are_left_alone() {
        let mut essence = json!({"spec": {"a": big(100)}});
        let before = essence.clone();
        assert_eq!(shrink(&mut essence, 1000), None);
        assert_eq!(essence, before);
    }

    #[test]
    fn the_smallest_sufficient_value_is_digested() {
        let mut essence = json!({"spec": {"small": "s", "large": big(5000), "medium": big(2000)},
                                 "metadata": {"labels": {"a": "b"}}});
        let shrunk = shrink(&mut essence, 4000).expect("shrunk");
        assert_eq!(shrunk.paths, vec!["spec.large"]);
        assert!(shrunk.to <= 4000 && shrunk.from > 7000, "{shrunk:?}");
        assert_eq!(essence["spec"]["medium"], big(2000));
        assert_eq!(essence["spec"]["small"], "s");
        assert!(is_digest(&essence["spec"]["large"]));
        assert_eq!(essence["metadata"], json!({"labels": {"a": "b"}}));
    }

    #[test]
    fn many_values_none_sufficient_alone() {
        let items: Map<String, Value> = (0..10)
            .map(|i| (format!("k{i}"), Value::String(big(1000))))
            .collect();
        let mut essence = json!({"spec": {"items": items, "keep": 1}});
        // Digesting `items` whole is the smallest value that frees enough.
        let shrunk = shrink(&mut essence, 3000).expect("shrunk");
        assert_eq!(shrunk.paths, vec!["spec.items"]);
        assert_eq!(essence["spec"]["keep"], 1);
        // Where even that is not enough, several values go.
        let mut essence = json!({"a": big(3000), "b": big(3000), "c": big(3000)});
        let shrunk = shrink(&mut essence, 500).expect("shrunk");
        assert_eq!(shrunk.paths.len(), 3, "{shrunk:?}");
        assert!(shrunk.to <= 500);
    }

    #[test]
    fn an_impossible_budget_stops() {
        let mut essence = json!({"a": big(300)});
        let shrunk = shrink(&mut essence, 10).expect("shrunk what it could");
        assert!(shrunk.to > 10);
        assert_eq!(shrink(&mut json!({}), 0), None);
    }

    #[test]
    fn restoring_puts_back_unchanged_values_only() {
        let fresh = json!({"spec": {"large": big(5000), "x": 1},
                           "data": {"other": big(5000)},
                           "more": {"gone": big(5000)}});
        let mut stored = fresh.clone();
        let shrunk = shrink(&mut stored, 300).expect("shrunk");
        assert_eq!(shrunk.paths.len(), 3, "{shrunk:?}");
        assert!(has_digests(&stored));
        // Unchanged: everything comes back, the comparison sees no difference.
        assert_eq!(restore(stored.clone(), &fresh), fresh);
        // Key order does not matter for a digest.
        let mut reordered = fresh.clone();
        reordered["spec"] = json!({"x": 1, "large": big(5000)});
        assert_eq!(restore(stored.clone(), &reordered), fresh);
        // A changed or removed value keeps its digest; the others come back.
        let mut changed = fresh.clone();
        changed["spec"]["large"] = json!(big(5001));
        changed.as_object_mut().unwrap().remove("more");
        let restored = restore(stored.clone(), &changed);
        assert!(has_digests(&restored["spec"]), "changed: a digest");
        assert!(has_digests(&restored["more"]), "removed: a digest");
        assert_eq!(restored["data"], fresh["data"]);
    }

    #[test]
    fn ordinary_values_are_not_digests() {
        assert!(!has_digests(&json!({"a": "sha256:00", "b": [PREFIX]})));
        assert!(has_digests(
            &json!({"a": {"b": format!("{PREFIX}sha256:00")}})
        ));
    }

    #[test]
    fn the_budget_counts_the_other_annotations_after_the_patch() {
        let own = vec!["p/last".to_owned(), "q/last".to_owned()];
        let annotations = json!({"p/last": big(1000), "user": big(10_000), "p/h1": big(500)});
        let changes = json!({"p/h1": null, "p/h2": big(2000)});
        let budget = budget(annotations.as_object(), changes.as_object(), &own);
        let others = ("user".len() + 10_000) + ("p/h2".len() + 2000);
        assert_eq!(budget, (ANNOTATIONS_LIMIT - others - 12 - MARGIN) / 2);
        assert_eq!(super::budget(None, None, &[]), ANNOTATIONS_LIMIT - MARGIN);
    }
}
