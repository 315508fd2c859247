//! Property tests of patch application (merge patch, JSON patch, strategic merge,
//! server-side apply), of selector parsing, and of shard selectors (the shards of a
//! partition of the hash space partition every collection).
//!
//! `cargo test -p kapsel-apiserver` runs proptest's default 256 cases per property (under a
//! second); a longer run: `PROPTEST_CASES=20000 cargo test -p kapsel-apiserver --lib
//! proptests` (run for this commit: 20000 cases each, all passing, 70 s on 2 cores). They
//! found two bugs when written: a manager re-applying entries into a map it had applied
//! empty lost them, and strategic merge kept nulls inside newly added list items.

use crate::patch::{PatchType, apply, strategic};
use crate::shards::{ShardSelector, fnv1a64};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// JSON values over a small alphabet, so that keys and values collide often.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..4).prop_map(|n| json!(n)),
        prop::sample::select(vec!["", "x", "y", "a b", "é"]).prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c", "d", "metadata"]).prop_map(String::from)
}

fn json_object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(key(), json_value(), 0..5)
        .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>()))
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

proptest! {
    /// RFC 7386: null removes, non-objects replace, objects merge recursively, keys the
    /// patch does not name are kept; applying a patch twice is applying it once.
    #[test]
    fn merge_patch_laws(doc in json_object(), patch in json_object()) {
        let once = apply(PatchType::Merge, doc.clone(), &bytes(&patch)).unwrap();
        let twice = apply(PatchType::Merge, once.clone(), &bytes(&patch)).unwrap();
        prop_assert_eq!(&once, &twice);
        prop_assert_eq!(apply(PatchType::Merge, doc.clone(), b"{}").unwrap(), doc.clone());
        for (k, pv) in patch.as_object().unwrap() {
            match pv {
                Value::Null => prop_assert!(once.get(k).is_none()),
                Value::Object(_) => prop_assert!(once[k].is_object()),
                v => prop_assert_eq!(&once[k], v),
            }
        }
        for (k, dv) in doc.as_object().unwrap() {
            if patch.get(k).is_none() {
                prop_assert_eq!(&once[k], dv);
            }
        }
    }

    /// A JSON patch computed between two documents turns one into the other; any list
    /// of operations is applied or refused, never a panic.
    #[test]
    fn json_patch_round_trips(a in json_object(), b in json_object(), ops in json_value()) {
        let diff = json_patch::diff(&a, &b);
        let got = apply(PatchType::Json, a.clone(), &serde_json::to_vec(&diff).unwrap()).unwrap();
        prop_assert_eq!(got, b);
        let _ = apply(PatchType::Json, a.clone(), &bytes(&ops));
    }

    /// Strategic merge of keyed lists (containers by name): every item keeps one place,
    /// items the patch does not name stay in order, new ones follow; idempotent.
    #[test]
    fn strategic_merge_keeps_keyed_items(
        doc_items in prop::collection::btree_map(name(), json_value(), 0..4),
        patch_items in prop::collection::btree_map(name(), json_value(), 0..4),
    ) {
        let containers = |m: &std::collections::BTreeMap<String, Value>| -> Vec<Value> {
            m.iter().map(|(n, v)| json!({"name": n, "image": v})).collect()
        };
        let doc = json!({"spec": {"containers": containers(&doc_items)}});
        let patch = json!({"spec": {"containers": containers(&patch_items)}});
        let once = strategic(&doc, &patch);
        prop_assert_eq!(&strategic(&once, &patch), &once);
        let names: Vec<&str> = once["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        let mut want: Vec<&str> = doc_items.keys().map(String::as_str).collect();
        want.extend(patch_items.keys().map(String::as_str).filter(|n| !doc_items.contains_key(*n)));
        prop_assert_eq!(names, want);
        // Inside an item (no keyed lists below), strategic merge is a merge patch.
        for c in once["spec"]["containers"].as_array().unwrap() {
            let n = c["name"].as_str().unwrap();
            let mut expected = doc_items.get(n).cloned().unwrap_or(Value::Null);
            if let Some(p) = patch_items.get(n) {
                json_patch::merge(&mut expected, p);
            }
            prop_assert_eq!(&c["image"], &expected);
        }
    }

    /// Server-side apply: what is applied is there; the same apply again changes
    /// nothing; a second manager conflicts exactly when it would change another's field,
    /// and force makes its values win.
    #[test]
    fn apply_ownership(a in data(), b in data(), a2 in data()) {
        let rt = configmaps();
        let cm = |d: &Map<String, Value>| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": d});
        let live = crate::managed::apply(&rt, None, &cm(&a), &who("alpha"), false).unwrap();
        prop_assert_eq!(&live["data"], &Value::Object(a.clone()));
        let again = crate::managed::apply(&rt, Some(&live), &cm(&a), &who("alpha"), false).unwrap();
        prop_assert_eq!(&again, &live);
        let clash = b.iter().any(|(k, v)| a.get(k).is_some_and(|x| x != v));
        match crate::managed::apply(&rt, Some(&live), &cm(&b), &who("beta"), false) {
            Ok(both) => {
                prop_assert!(!clash);
                for (k, v) in a.iter().chain(b.iter()) {
                    prop_assert_eq!(&both["data"][k], v);
                }
            }
            Err(e) => {
                prop_assert!(clash);
                prop_assert_eq!(e.code, 409);
            }
        }
        let forced = crate::managed::apply(&rt, Some(&live), &cm(&b), &who("beta"), true).unwrap();
        for (k, v) in &b {
            prop_assert_eq!(&forced["data"][k], v);
        }
        // alone, a manager's new configuration is exactly what remains.
        let next = crate::managed::apply(&rt, Some(&live), &cm(&a2), &who("alpha"), false).unwrap();
        prop_assert_eq!(next.get("data").cloned().unwrap_or(json!({})), Value::Object(a2));
    }

    /// Any JSON as an apply configuration is applied or refused, never a panic.
    #[test]
    fn apply_never_panics(config in json_value(), live in json_object()) {
        let rt = configmaps();
        let _ = crate::managed::apply(&rt, Some(&live), &config, &who("x"), false);
        let _ = crate::managed::apply(&rt, None, &config, &who("x"), true);
    }

    /// Selectors: any text parses or is refused; what parses prints back to itself.
    #[test]
    fn selectors_round_trip(text in selector_text()) {
        if let Ok(sel) = crate::selectors::LabelSelector::parse(&text) {
            let again = crate::selectors::LabelSelector::parse(&sel.to_string());
            prop_assert_eq!(again, Ok(sel));
        }
        if let Ok(sel) = crate::selectors::FieldSelector::parse(&text, "pods") {
            let again = crate::selectors::FieldSelector::parse(&sel.to_string(), "pods");
            prop_assert_eq!(again, Ok(sel));
        }
    }

    /// Field selectors shaped like real ones (values with `=`, `!` and spaces in them)
    /// print back to themselves.
    #[test]
    fn field_selectors_round_trip(text in field_selector_text()) {
        if let Ok(sel) = crate::selectors::FieldSelector::parse(&text, "pods") {
            let again = crate::selectors::FieldSelector::parse(&sel.to_string(), "pods");
            prop_assert_eq!(again, Ok(sel));
        }
    }

    /// Selectors built from kube's grammar always parse.
    #[test]
    fn valid_label_selectors_parse(reqs in prop::collection::vec(label_requirement(), 0..4)) {
        let text = reqs.join(",");
        prop_assert!(crate::selectors::LabelSelector::parse(&text).is_ok(), "{}", text);
    }
}

proptest! {
    /// Ranges that partition the 64-bit hash space, dealt to shards (a shard may hold
    /// several, joined by `||`): every object, whatever its uid or namespace, is in
    /// exactly one shard, so the shards' lists together are the whole list, none twice.
    #[test]
    fn shards_of_a_partition_partition_every_collection(
        objects in prop::collection::vec(sharded_object(), 0..40),
        cuts in prop::collection::btree_set(1u64.., 0..6),
        dealt in prop::collection::vec(0..4usize, 7),
        by_namespace in any::<bool>(),
    ) {
        let field = if by_namespace { "object.metadata.namespace" } else { "object.metadata.uid" };
        let bounds: Vec<u128> = std::iter::once(0)
            .chain(cuts.iter().map(|c| u128::from(*c)))
            .chain(std::iter::once(1u128 << 64))
            .collect();
        let mut shards: Vec<Vec<String>> = vec![Vec::new(); 4];
        for (i, pair) in bounds.windows(2).enumerate() {
            shards[dealt[i]].push(format!(
                "shardRange({field}, '0x{:016x}', '0x{:016x}')",
                pair[0], pair[1]
            ));
        }
        let mut selectors = Vec::new();
        for ranges in shards.iter().filter(|ranges| !ranges.is_empty()) {
            let text = ranges.join(" || ");
            let selector = ShardSelector::parse(&text);
            prop_assert!(selector.is_ok(), "{}: {:?}", text, selector);
            let selector = selector.unwrap_or_else(|_| unreachable!());
            prop_assert_eq!(selector.to_string(), text, "kube's canonical text");
            selectors.push(selector);
        }
        for object in &objects {
            let holders = selectors.iter().filter(|s| s.matches(object)).count();
            prop_assert_eq!(holders, 1, "{} is in {} shards", object, holders);
        }
        let listed: usize = selectors
            .iter()
            .map(|s| objects.iter().filter(|o| s.matches(o)).count())
            .sum();
        prop_assert_eq!(listed, objects.len());
    }

    /// The hash is FNV-1a 64 as its definition says it (the offset basis, then for each
    /// byte: xor, then multiply by the FNV prime modulo 2^64), computed here apart.
    #[test]
    fn the_shard_hash_is_fnv1a_64(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut reference: u128 = 14_695_981_039_346_656_037;
        for byte in &bytes {
            reference ^= u128::from(*byte);
            reference = (reference * 1_099_511_628_211) % (1u128 << 64);
        }
        prop_assert_eq!(u128::from(fnv1a64(&bytes)), reference);
    }

    /// Any text made of CEL's pieces is a shard selector or refused with a message,
    /// never a panic; what parses prints back to text that parses to it.
    #[test]
    fn shard_selectors_parse_or_are_refused(text in shard_selector_text()) {
        if let Ok(selector) = ShardSelector::parse(&text) {
            prop_assert_eq!(ShardSelector::parse(&selector.to_string()), Ok(selector));
        }
    }
}

/// An object of any uid (a UUID, or any text) in one of a few namespaces, or in none.
fn sharded_object() -> impl Strategy<Value = Value> {
    let uid = prop_oneof![
        any::<u128>().prop_map(|n| uuid::Uuid::from_u128(n).to_string()),
        ".{0,12}",
    ];
    let namespace = prop::sample::select(vec!["", "default", "kube-system", "team-a", "é"]);
    (uid, namespace).prop_map(|(uid, ns)| {
        if ns.is_empty() {
            json!({"metadata": {"uid": uid}})
        } else {
            json!({"metadata": {"uid": uid, "namespace": ns}})
        }
    })
}

/// Text from the pieces of shard selectors and of CEL around them.
fn shard_selector_text() -> impl Strategy<Value = String> {
    let pieces = vec![
        "shardRange(",
        "object.metadata.uid",
        "object.metadata.namespace",
        ", ",
        "'0x0000000000000000'",
        "'0x8000000000000000'",
        "'0x10000000000000000'",
        "'0x0'",
        ")",
        " || ",
        " && ",
        "!",
        "-",
        "(",
        "[",
        "]",
        "{",
        "}",
        ":",
        "?",
        "1",
        "1.5",
        "2u",
        "\"",
        "'",
        "r'",
        "b\"",
        "'''",
        "\\x",
        ".",
        "x",
        "in",
        "é",
    ];
    prop::collection::vec(prop::sample::select(pieces), 0..14).prop_map(|p| p.concat())
}

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["app", "sidecar", "init", "proxy"]).prop_map(String::from)
}

fn data() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(
        prop::sample::select(vec!["k1", "k2", "k3"]).prop_map(String::from),
        prop::sample::select(vec!["1", "2"]).prop_map(|v| json!(v)),
        0..3,
    )
    .prop_map(|m| m.into_iter().collect())
}

fn configmaps() -> crate::registry::ResourceType {
    crate::builtins::builtins()
        .into_iter()
        .find(|t| t.plural == "configmaps")
        .unwrap_or_else(|| unreachable!("configmaps are built in"))
}

fn who(m: &str) -> crate::managed::Who {
    crate::managed::Who {
        manager: m.into(),
        subresource: None,
        user: None,
    }
}

/// Text from the selector alphabet (and a little beyond it).
fn selector_text() -> impl Strategy<Value = String> {
    let pieces = vec![
        "a",
        "b",
        "app",
        "x.io/k",
        "=",
        "==",
        "!=",
        "!",
        ",",
        " ",
        "in",
        "notin",
        "(",
        ")",
        ">",
        "<",
        "1",
        "-2",
        "metadata.name",
        "status.phase",
        "é",
        "\\",
    ];
    prop::collection::vec(prop::sample::select(pieces), 0..10).prop_map(|p| p.concat())
}

fn label_requirement() -> impl Strategy<Value = String> {
    let k = prop::sample::select(vec!["app", "tier", "example.com/role", "a.b-c_d"]);
    let v = prop::sample::select(vec!["web", "x", "v1.2", "a-b_c", ""]);
    (
        k,
        v,
        prop::collection::vec(prop::sample::select(vec!["p", "q", "r"]), 1..3),
        0..8usize,
        -5i64..5,
    )
        .prop_map(|(k, v, set, form, n)| match form {
            0 => format!("{k}={v}"),
            1 => format!("{k}=={v}"),
            2 => format!("{k}!={v}"),
            3 => format!("{k} in ({})", set.join(",")),
            4 => format!("{k} notin ({})", set.join(", ")),
            5 => k.to_string(),
            6 => format!("!{k}"),
            _ => format!("{k}>{n}"),
        })
}

fn field_selector_text() -> impl Strategy<Value = String> {
    let field = prop::sample::select(vec!["metadata.name", "status.phase", "spec.nodeName"]);
    let op = prop::sample::select(vec!["=", "==", "!="]);
    let value = prop::collection::vec(
        prop::sample::select(vec!["a", "=", "!", " ", "-", "x.y"]),
        0..4,
    )
    .prop_map(|p| p.concat());
    prop::collection::vec((field, op, value), 1..3).prop_map(|reqs| {
        reqs.into_iter()
            .map(|(f, o, v)| format!("{f}{o}{v}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}
