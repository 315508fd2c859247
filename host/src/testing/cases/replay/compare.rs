//! What the guest did differently from the recording: handler outcomes, Kubernetes
//! calls, and the last state of every watched object.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Map, Value};

use super::super::matching;
use super::{Address, address_of, describe, strip_server_fields};
use crate::recording::Entry;

/// Where the replay did differently than the recording, one line each.
pub(super) fn differences(recorded: &[Entry], replayed: &[Entry]) -> Vec<String> {
    let mut found = Vec::new();
    let sequences = [
        ("handler", outcomes(recorded), outcomes(replayed)),
        (
            "Kubernetes calls of",
            calls(recorded, &uid_names(recorded)),
            calls(replayed, &uid_names(replayed)),
        ),
    ];
    for (what, before, after) in &sequences {
        for key in keys(before, after) {
            let (before, after) = (before.get(&key), after.get(&key));
            if before != after {
                found.push(format!(
                    "{what} {} on {}: recorded {}, replayed {}",
                    key.1,
                    key.0,
                    list(before),
                    list(after)
                ));
            }
        }
    }
    let (states_before, states_after) = (
        last_states(recorded, &uid_names(recorded)),
        last_states(replayed, &uid_names(replayed)),
    );
    for key in keys(&states_before, &states_after) {
        let name = describe(&key);
        match (states_before.get(&key), states_after.get(&key)) {
            (Some(Some(_)), None) => {
                found.push(format!("{name}: recorded, but never seen in the replay"));
            }
            (None, Some(Some(_))) => {
                found.push(format!("{name}: seen in the replay, but not recorded"));
            }
            (Some(Some(_)), Some(None)) => {
                found.push(format!(
                    "{name}: recorded as existing at the end, deleted in the replay"
                ));
            }
            (Some(None), Some(Some(_))) => {
                found.push(format!(
                    "{name}: recorded as deleted, still exists in the replay"
                ));
            }
            (Some(Some(before)), Some(Some(after))) => {
                let expected = exact(before, after);
                let mismatches = matching::mismatches(&expected, after);
                for mismatch in mismatches {
                    found.push(format!("{name}: {}", replace_wording(&mismatch)));
                }
            }
            _ => {}
        }
    }
    found
}

/// A mismatch, worded for a replay: "recorded X, replayed Y".
fn replace_wording(mismatch: &matching::Mismatch) -> String {
    mismatch
        .to_string()
        .replacen(": expected ", ": recorded ", 1)
        .replacen(", got ", ", replayed ", 1)
}

fn keys<K: Ord + Clone, A, B>(a: &BTreeMap<K, A>, b: &BTreeMap<K, B>) -> BTreeSet<K> {
    a.keys().chain(b.keys()).cloned().collect()
}

fn list(items: Option<&Vec<String>>) -> String {
    match items {
        None => "none".to_owned(),
        Some(items) => format!("[{}]", items.join(", ")),
    }
}

/// How each handler's calls ended, per (object, handler), in order.
fn outcomes(entries: &[Entry]) -> BTreeMap<(String, String), Vec<String>> {
    let mut found: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for entry in entries {
        if let Entry::Handler {
            handler,
            object,
            outcome,
            ..
        } = entry
        {
            found
                .entry((object.clone(), handler.clone()))
                .or_default()
                .push(outcome.clone());
        }
    }
    found
}

/// The Kubernetes calls each handler made, per (object, handler), in order.
fn calls(entries: &[Entry], uids: &UidNames) -> BTreeMap<(String, String), Vec<String>> {
    let mut found: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for entry in entries {
        if let Entry::Call {
            handler,
            object,
            verb,
            target,
            namespace,
            name,
            body,
            error,
            ..
        } = entry
        {
            let mut call = format!("{verb} {target}");
            if let Some(ns) = namespace {
                call.push_str(&format!(" in {ns}"));
            }
            if let Some(name) = name {
                call.push_str(&format!(" {name}"));
            }
            if let Some(body) = body {
                call.push_str(&format!(" {}", normalize(body, uids)));
            }
            match error {
                None => call.push_str(" → ok"),
                Some(e) => call.push_str(&format!(" → {} {}", e.code, e.reason)),
            }
            found
                .entry((object.clone().unwrap_or_default(), handler.clone()))
                .or_default()
                .push(call);
        }
    }
    found
}

/// The last recorded state of every watched object: `None` once deleted.
fn last_states(entries: &[Entry], uids: &UidNames) -> BTreeMap<Address, Option<Value>> {
    let mut found = BTreeMap::new();
    for entry in entries {
        if let Entry::Watch {
            resource,
            event_type,
            object,
            ..
        } = entry
        {
            let state = (event_type != "DELETED").then(|| normalize(object, uids));
            found.insert(address_of(resource, object), state);
        }
    }
    found
}

/// The uids a run's objects had, each with the object it names.
type UidNames = HashMap<String, String>;

/// Every uid the entries show (of watched objects, and of objects the guests read or
/// wrote), named by its object: the replay's cluster gives new uids, so an owner
/// reference or a result holding one compares by the object it names.
fn uid_names(entries: &[Entry]) -> UidNames {
    let mut names = UidNames::new();
    let mut note = |object: &Value| {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
        if let (Some(uid), Some(kind), Some(name)) =
            (text("/metadata/uid"), text("/kind"), text("/metadata/name"))
        {
            // A generated name differs between runs as much as the uid does.
            let name = text("/metadata/generateName")
                .map_or_else(|| name.to_owned(), |prefix| format!("{prefix}*"));
            let name = match text("/metadata/namespace") {
                Some(ns) => format!("<uid of {kind} {ns}/{name}>"),
                None => format!("<uid of {kind} {name}>"),
            };
            names.insert(uid.to_owned(), name);
        }
    };
    for entry in entries {
        match entry {
            Entry::Watch { object, .. } => note(object),
            Entry::Call {
                result: Some(result),
                ..
            } => {
                note(result);
                for item in result
                    .get("items")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    note(item);
                }
            }
            _ => {}
        }
    }
    names
}

/// `value` with every string that is a known uid replaced by the object it names.
fn name_uids(value: &mut Value, uids: &UidNames) {
    match value {
        Value::String(text) => {
            if let Some(name) = uids.get(text.as_str()) {
                text.clone_from(name);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| name_uids(v, uids)),
        Value::Object(map) => map.values_mut().for_each(|v| name_uids(v, uids)),
        _ => {}
    }
}

/// An object without what differs on every run: server-set metadata, times in Kopf's
/// progress records, the touch-dummy annotation; uids named by their objects.
fn normalize(object: &Value, uids: &UidNames) -> Value {
    let mut object = strip_server_fields(object);
    name_uids(&mut object, uids);
    if let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.retain(|key, _| !key.ends_with("/touch-dummy"));
        for value in annotations.values_mut() {
            let Some(text) = value.as_str() else { continue };
            let Ok(Value::Object(mut record)) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            for time in ["started", "stopped", "delayed"] {
                record.remove(time);
            }
            *value = Value::Object(record);
        }
    }
    object
}

/// `expected`, with an explicit `null` for every key only `actual` has, so that the
/// partial matching of case files compares exactly.
fn exact(expected: &Value, actual: &Value) -> Value {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            let mut out = Map::new();
            for (key, value) in want {
                let inner = match have.get(key) {
                    Some(h) => exact(value, h),
                    None => value.clone(),
                };
                out.insert(key.clone(), inner);
            }
            for key in have.keys() {
                out.entry(key.clone()).or_insert(Value::Null);
            }
            Value::Object(out)
        }
        (want, _) => want.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixtures::*;
    use super::*;

    #[test]
    fn differences_name_handlers_calls_and_fields() {
        let handler = |outcome: &str| Entry::Handler {
            at: 1.0,
            handler: "create_fn".into(),
            handler_kind: "create".into(),
            object: "ns/kex".into(),
            outcome: outcome.into(),
        };
        let progress = r#"{"started":"2026-11-30T10:00:00.5","success":true}"#;
        let recorded = vec![
            header(),
            handler("retry"),
            handler("success"),
            watch(
                1.0,
                "MODIFIED",
                kex(
                    "7",
                    json!({"status": {"create_fn": {"n": 1}},
                "metadata": {"name": "kex", "namespace": "ns", "annotations": {"p/x": progress}}}),
                ),
            ),
        ];
        let same = vec![
            header(),
            handler("retry"),
            handler("success"),
            watch(
                1.0,
                "MODIFIED",
                kex(
                    "9",
                    json!({"status": {"create_fn": {"n": 1}},
                "metadata": {"name": "kex", "namespace": "ns",
                             "annotations": {"p/x": r#"{"started":"2026-11-30T10:00:00.7","success":true}"#}}}),
                ),
            ),
        ];
        assert_eq!(differences(&recorded, &same), Vec::<String>::new());
        // Uids differ between runs; what they name does not.
        let owned = |uid: &str, other: &str| {
            let mut object = kex("3", json!({"status": {"made": [uid, other]}}));
            object["metadata"]["uid"] = json!(uid);
            watch(2.0, "MODIFIED", object)
        };
        assert_eq!(
            differences(&[header(), owned("u1", "x")], &[header(), owned("u2", "x")]),
            Vec::<String>::new()
        );
        assert_eq!(
            differences(
                &[header(), owned("u1", "u1")],
                &[header(), owned("u2", "x")]
            ),
            vec![
                "kopfexamples.v1.kopf.dev ns/kex: status.made[1]: recorded \"<uid of KopfExample ns/kex>\", replayed \"x\""
            ]
        );
        let other = vec![
            header(),
            handler("success"),
            watch(
                1.0,
                "MODIFIED",
                kex(
                    "9",
                    json!({"status": {"create_fn": {"n": 2}, "extra": 1},
                "metadata": {"name": "kex", "namespace": "ns", "annotations": {"p/x": progress}}}),
                ),
            ),
        ];
        assert_eq!(
            differences(&recorded, &other),
            vec![
                "handler create_fn on ns/kex: recorded [retry, success], replayed [success]",
                "kopfexamples.v1.kopf.dev ns/kex: status.create_fn.n: recorded 1, replayed 2",
                "kopfexamples.v1.kopf.dev ns/kex: status.extra: recorded absent, replayed 1",
            ]
        );
    }
}
