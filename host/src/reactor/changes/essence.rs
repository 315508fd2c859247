//! The essence of an object and the stored diff-base (KOPF.md §4.2).
//!
//! The essence is what Kopf compares to decide whether an object changed: the body
//! minus `apiVersion`, `kind`, `metadata` and `status`, with labels and annotations
//! put back (minus Kopf's own and kubectl's bookkeeping), plus the fields that
//! `field=` handlers watch. It is stored after each fully handled change in
//! `<prefix>/last-handled-configuration` as compact Python-style JSON plus `\n`.
//! Key order matters for byte-identical annotations: Kopf deep-copies the body and
//! deletes keys, then re-adds `metadata` at the end, so `spec` precedes `metadata`.
//!
//! Unlike Kopf, the essence of a Secret holds a digest of each value of `data` and
//! `stringData` rather than the value: the annotation (and the causes' old/new/diff)
//! must not copy credentials out of the Secret. A change of a value still changes its
//! digest. Also unlike Kopf, an essence too large for the annotations is stored with its
//! largest values as digests (see `oversized`).

use serde_json::{Map, Value};

use super::keys::{KeyScheme, marked_prefixes};
use super::oversized::{self, Shrunk, digest};
use super::patch::{Patch, body_annotation, store_marker};
use super::progress::ProgressStorage;
use super::stanzas::{remove_annotations, remove_empty_stanzas};
use crate::pyformat;

/// kubectl's own copy of the applied manifest: never essential.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The top-level members an essence leaves out (labels and annotations are put back).
const NOT_ESSENTIAL: [&str; 4] = ["apiVersion", "kind", "metadata", "status"];

/// Where the diff-base lives: Kopf's default `AnnotationsDiffBaseStorage`, an annotation
/// under a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiffBaseStorage {
    /// The annotation prefix (`kopf.zalando.org`).
    pub(crate) prefix: String,
    /// Also write the V1 keys (`v1=True`).
    pub(crate) v1: bool,
    /// `last-handled-configuration`.
    pub(crate) key: String,
}

impl DiffBaseStorage {
    fn keys(&self) -> KeyScheme<'_> {
        KeyScheme {
            prefix: &self.prefix,
            v1: self.v1,
        }
    }

    /// Kopf's `AnnotationsDiffBaseStorage.build()`: the essence without this storage's
    /// own keys.
    pub(crate) fn build(&self, body: &Value, extra_fields: &[Vec<String>]) -> Value {
        // The body's members but these, in their order: copied one by one, so that
        // `metadata` (managed fields and all) and `status` are never copied to be dropped.
        let mut essence: Map<String, Value> = match body {
            Value::Object(map) => map
                .iter()
                .filter(|(key, _)| !NOT_ESSENTIAL.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
            _ => Map::new(),
        };
        // Re-added at the end, labels before annotations, as `dicts.cherrypick` does.
        for field in [["metadata", "labels"], ["metadata", "annotations"]] {
            cherrypick(body, &mut essence, &field.map(str::to_owned));
        }
        if let Some(Value::Object(annotations)) = essence
            .get_mut("metadata")
            .and_then(|m| m.get_mut("annotations"))
        {
            let ignored = marked_prefixes(annotations.keys().map(String::as_str));
            annotations.retain(|key, _| {
                let marked = ignored.iter().any(|p| key.starts_with(&format!("{p}/")));
                !marked && key != LAST_APPLIED
            });
        }
        for field in extra_fields {
            cherrypick(body, &mut essence, field);
        }
        if is_secret(body) {
            digest_secret_values(&mut essence, body);
        }
        remove_empty_stanzas(&mut essence);
        // The storage's own keys (relevant for non-`kopf.` prefixes without a marker yet).
        let own = self.keys().keys(&self.key);
        remove_annotations(&mut essence, |k| own.iter().any(|o| o == k));
        remove_empty_stanzas(&mut essence);
        Value::Object(essence)
    }

    /// The stored form: compact JSON plus a newline (kubectl's convention).
    pub(crate) fn encode(essence: &Value) -> String {
        let mut text = pyformat::dumps(essence);
        text.push('\n');
        text
    }

    /// Read the stored diff-base, V2 key first. A garbage value is skipped with a
    /// warning (Kopf would crash the processing of the object); no value means "create".
    pub(crate) fn fetch(&self, body: &Value) -> (Option<Value>, Vec<String>) {
        let mut warnings = Vec::new();
        for key in self.keys().keys(&self.key) {
            match body_annotation(body, &key) {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Null) => {}
                    Ok(value @ Value::Object(_)) => return (Some(value), warnings),
                    Ok(_) | Err(_) => {
                        warnings.push(format!("Ignoring the unparseable diff-base in {key}."))
                    }
                },
                Some(_) => warnings.push(format!("Ignoring the non-string diff-base in {key}.")),
            }
        }
        (None, warnings)
    }

    /// The stored essence (`None` for "create") and the fresh one, both cleared of the
    /// progress storage's records (Kopf's processing does so), with the stored one's
    /// digests of values that did not change put back (see `oversized`), and warnings
    /// about unreadable records.
    pub(crate) fn essences(
        &self,
        body: &Value,
        extra_fields: &[Vec<String>],
        progress: &ProgressStorage,
    ) -> (Option<Value>, Value, Vec<String>) {
        let (old, warnings) = self.fetch(body);
        let new = progress.clear(self.build(body, extra_fields));
        let old = old.map(|old| oversized::restore(progress.clear(old), &new));
        (old, new, warnings)
    }

    /// Put the diff-base into the patch under every key, plus the prefix marker. An
    /// essence too large for what the object's annotations leave (after the patch) is
    /// stored with digests; the first time that happens to the object (its stored
    /// diff-base has none yet), what was done is returned to be reported.
    pub(crate) fn store(&self, body: &Value, patch: &mut Patch, essence: &Value) -> Option<Shrunk> {
        let keys = self.keys().keys(&self.key);
        let budget = oversized::budget(body_annotations(body), patch_annotations(patch), &keys);
        let mut encoded = Self::encode(essence);
        let mut shrunk = None;
        if encoded.len() > budget {
            let mut smaller = essence.clone();
            shrunk = oversized::shrink(&mut smaller, budget);
            encoded = Self::encode(&smaller);
        }
        let reported_before = shrunk.is_some()
            && self
                .fetch(body)
                .0
                .is_some_and(|stored| oversized::has_digests(&stored));
        for key in keys {
            patch.set_annotation(&key, Value::String(encoded.clone()));
        }
        store_marker(&self.keys(), body, patch);
        shrunk.filter(|_| !reported_before)
    }
}

fn body_annotations(body: &Value) -> Option<&Map<String, Value>> {
    body.get("metadata")?.get("annotations")?.as_object()
}

fn patch_annotations(patch: &Patch) -> Option<&Map<String, Value>> {
    patch.merge.get("metadata")?.get("annotations")?.as_object()
}

/// Whether the body is a core/v1 Secret.
fn is_secret(body: &Value) -> bool {
    body.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && body.get("kind").and_then(Value::as_str) == Some("Secret")
}

/// Replaces each value of a Secret's `data` and `stringData` with `sha256:<hex>` of the
/// object's uid, the key and the value (salted with the uid, so equal values of two
/// Secrets do not look equal).
fn digest_secret_values(essence: &mut Map<String, Value>, body: &Value) {
    let uid = body
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    for stanza in ["data", "stringData"] {
        let Some(values) = essence.get_mut(stanza) else {
            continue;
        };
        match values {
            Value::Object(values) => {
                for (key, value) in values.iter_mut() {
                    *value = Value::String(digest(&[uid, key, &value.to_string()]));
                }
            }
            other => *other = Value::String(digest(&[uid, stanza, &other.to_string()])),
        }
    }
}

/// Copy `src[path]` into `dst[path]`, creating parents; silently skip absent values and
/// non-mapping parents (where Kopf would raise).
fn cherrypick(src: &Value, dst: &mut Map<String, Value>, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut found = src;
    for key in path {
        match found.as_object().and_then(|m| m.get(key)) {
            Some(v) => found = v,
            None => return,
        }
    }
    let mut target = dst;
    for key in parents {
        let entry = target
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        match entry {
            Value::Object(map) => target = map,
            _ => return,
        }
    }
    target.insert(last.clone(), found.clone());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reactor::changes::ChangeSettings;
    use serde_json::json;

    fn storage() -> DiffBaseStorage {
        DiffBaseStorage {
            prefix: "kopf.zalando.org".into(),
            v1: true,
            key: "last-handled-configuration".into(),
        }
    }

    #[test]
    fn the_captured_example() {
        let body = json!({
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": "kopf-example-1", "namespace": "default", "uid": "u", "resourceVersion": "1",
                         "labels": {"somelabel": "somevalue"},
                         "annotations": {"kopf.zalando.org/create_fn": "{}",
                                         "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
                         "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"]},
            "spec": {"field": "value", "items": ["a"]},
            "status": {"create_fn": {"message": "hello"}}
        });
        let essence = storage().build(&body, &[]);
        assert_eq!(
            DiffBaseStorage::encode(&essence),
            "{\"spec\":{\"field\":\"value\",\"items\":[\"a\"]},\"metadata\":{\"labels\":{\"somelabel\":\"somevalue\"}}}\n"
        );
    }

    #[test]
    fn kopf_managed_prefixes_are_not_essential() {
        let body = json!({
            "metadata": {"annotations": {
                "keep.io/a": "1",
                "x.kopf.zalando.org/b": "2",
                "other.io/kopf-managed": "yes", "other.io/c": "3",
            }},
            "data": {"k": "v"},
        });
        assert_eq!(
            storage().build(&body, &[]),
            json!({"data": {"k": "v"}, "metadata": {"annotations": {"keep.io/a": "1"}}})
        );
    }

    #[test]
    fn custom_prefix_strips_its_own_keys_even_without_marker() {
        let s = DiffBaseStorage {
            prefix: "example.com".into(),
            v1: true,
            key: "last-handled-configuration".into(),
        };
        let body = json!({"metadata": {"annotations": {"example.com/last-handled-configuration": "{}", "example.com/fn": "{}"}}, "spec": {}});
        assert_eq!(
            s.build(&body, &[]),
            json!({"spec": {}, "metadata": {"annotations": {"example.com/fn": "{}"}}}),
            "the diff-base storage strips only its own key"
        );
        let progress = ProgressStorage {
            prefix: "example.com".into(),
            v1: true,
            touch_key: "touch-dummy".into(),
        };
        let (old, new, _) = s.essences(&body, &[], &progress);
        assert_eq!(old, Some(json!({})));
        assert_eq!(
            new,
            json!({"spec": {}}),
            "the progress storage clears its prefix"
        );
    }

    #[test]
    fn extra_fields_and_empty_stanzas() {
        let body = json!({"metadata": {"labels": {}, "annotations": {}}, "status": {"phase": "Running", "x": 1}, "spec": {"a": 1}});
        let fields = vec![
            vec!["status".to_owned(), "phase".to_owned()],
            vec!["status".to_owned(), "missing".to_owned()],
        ];
        assert_eq!(
            storage().build(&body, &fields),
            json!({"spec": {"a": 1}, "status": {"phase": "Running"}})
        );
        assert_eq!(storage().build(&body, &[]), json!({"spec": {"a": 1}}));
    }

    #[test]
    fn odd_bodies_do_not_panic() {
        assert_eq!(storage().build(&json!("text"), &[]), json!({}));
        assert_eq!(
            storage().build(
                &json!({"metadata": 5, "spec": 1}),
                &[vec!["metadata".into(), "x".into()]]
            ),
            json!({"spec": 1})
        );
        assert_eq!(
            storage().build(&json!({"metadata": {"annotations": "x"}}), &[]),
            json!({"metadata": {"annotations": "x"}})
        );
    }

    #[test]
    fn fetching_tolerates_garbage() {
        let s = storage();
        let stored = "{\"spec\":{\"field\":\"value\"}}\n";
        let body = json!({"metadata": {"annotations": {"kopf.zalando.org/last-handled-configuration": stored}}});
        assert_eq!(
            s.fetch(&body),
            (Some(json!({"spec": {"field": "value"}})), vec![])
        );
        let body = json!({"metadata": {"annotations": {"kopf.zalando.org/last-handled-configuration": "{garbage"}}});
        let (found, warnings) = s.fetch(&body);
        assert_eq!(found, None);
        assert_eq!(warnings.len(), 1);
        assert_eq!(s.fetch(&json!({})), (None, vec![]));
        let body = json!({"metadata": {"annotations": {"kopf.zalando.org/last-handled-configuration": 5}}});
        assert_eq!(s.fetch(&body).0, None);
    }

    #[test]
    fn storing_writes_every_key_and_the_marker() {
        let s = DiffBaseStorage {
            prefix: "example.com".into(),
            v1: true,
            key: "last-handled-configuration".into(),
        };
        let mut patch = Patch::default();
        s.store(&json!({}), &mut patch, &json!({"spec": 1}));
        assert_eq!(
            Value::Object(patch.merge),
            json!({"metadata": {"annotations": {
                "example.com/last-handled-configuration": "{\"spec\":1}\n",
                "example.com/kopf-managed": "yes"}}})
        );
    }

    #[test]
    fn secrets_keep_digests_not_values() {
        let secret = |password: &str| {
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "s", "uid": "u-1", "labels": {"a": "b"}},
                   "type": "Opaque",
                   "data": {"password": password, "user": "YWRtaW4="},
                   "stringData": {"token": "plain-text"}})
        };
        let essence = storage().build(
            &secret("aHVudGVyMg=="),
            &[vec!["data".into(), "user".into()]],
        );
        let stored = DiffBaseStorage::encode(&essence);
        for value in ["aHVudGVyMg==", "YWRtaW4=", "plain-text"] {
            assert!(!stored.contains(value), "{value} copied into {stored}");
        }
        assert_eq!(essence["type"], "Opaque");
        assert_eq!(essence["metadata"]["labels"]["a"], "b");
        let password = essence["data"]["password"].as_str().expect("a digest");
        assert!(
            password.starts_with("sha256:") && password.len() == 7 + 64,
            "{password}"
        );
        let same = storage().build(&secret("aHVudGVyMg=="), &[]);
        assert_eq!(same["data"], essence["data"], "digests are stable");
        let changed = storage().build(&secret("c2VjcmV0"), &[]);
        assert_ne!(changed["data"]["password"], essence["data"]["password"]);
        assert_eq!(changed["data"]["user"], essence["data"]["user"]);
        // Other kinds keep their values, as in Kopf.
        let mut configmap = secret("x");
        configmap["kind"] = json!("ConfigMap");
        assert_eq!(storage().build(&configmap, &[])["data"]["password"], "x");
    }

    #[test]
    fn a_huge_essence_is_stored_with_digests_and_reported_once() {
        let s = storage();
        let key = "kopf.zalando.org/last-handled-configuration";
        let mut body = json!({"metadata": {"annotations": {"user": "u".repeat(100_000)}},
                              "spec": {"blob": "b".repeat(300_000), "f": 1}});
        let (old, new, _) = s.essences(&body, &[], &ChangeSettings::default().progress);
        assert_eq!(old, None);
        let mut patch = Patch::default();
        let shrunk = s.store(&body, &mut patch, &new).expect("reported");
        assert_eq!(shrunk.paths, vec!["spec.blob"]);
        let stored = patch.merge["metadata"]["annotations"][key]
            .as_str()
            .expect("stored")
            .to_owned();
        assert_eq!(stored.len(), shrunk.to);
        assert!(
            stored.len() + key.len() + 100_005 + 4096 <= oversized::ANNOTATIONS_LIMIT,
            "{}",
            stored.len()
        );
        // The next cycle: the stored digest stands for the unchanged blob, so nothing
        // changed; storing again is not reported again.
        body["metadata"]["annotations"][key] = json!(stored);
        let (old, new, warnings) = s.essences(&body, &[], &ChangeSettings::default().progress);
        assert!(warnings.is_empty());
        assert_eq!(old.as_ref(), Some(&new));
        assert_eq!(s.store(&body, &mut Patch::default(), &new), None);
        // A changed blob: the old essence keeps the digest, the change shows.
        body["spec"]["blob"] = json!("c".repeat(300_000));
        let (old, new, _) = s.essences(&body, &[], &ChangeSettings::default().progress);
        let old = old.expect("stored");
        assert!(
            old["spec"]["blob"]
                .as_str()
                .is_some_and(|d| d.starts_with("kapsel-digest:sha256:"))
        );
        assert_eq!(old["spec"]["f"], 1);
        assert_ne!(Some(old), Some(new));
    }
}
