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

use super::keys::{KeyScheme, collision_marked, marked_prefixes};
use super::oversized::{self, Shrunk, digest};
use super::patch::{Patch, body_annotation, store_marker};
use super::stanzas::{field_path, remove_annotations, remove_empty_stanzas, remove_path, resolve};
use crate::persistence::{AnnotationsDiffBase, DiffBaseStorage, ProgressStorage, StatusDiffBase};
use crate::pyformat;

/// kubectl's own copy of the applied manifest: never essential.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The top-level members an essence leaves out (labels and annotations are put back).
const NOT_ESSENTIAL: [&str; 4] = ["apiVersion", "kind", "metadata", "status"];

impl DiffBaseStorage {
    /// Kopf's `build()`: the essence of the body, without the storage's own record and
    /// its ignored fields.
    pub(crate) fn build(&self, body: &Value, extra_fields: &[Vec<String>]) -> Value {
        match self {
            DiffBaseStorage::Annotations(annotations) => {
                let mut essence = base_essence(body, extra_fields, &annotations.ignored_fields);
                annotations.strip_own(&mut essence, Some(collision_marked(body)));
                Value::Object(essence)
            }
            DiffBaseStorage::Status(status) => {
                let mut essence = base_essence(body, extra_fields, &status.ignored_fields);
                status.strip_own(&mut essence);
                Value::Object(essence)
            }
            // Each storage builds on what the previous left, as on a body.
            DiffBaseStorage::Multi(storages) => storages.iter().fold(
                Value::Object(base_essence(body, extra_fields, &[])),
                |essence, storage| storage.build(&essence, extra_fields),
            ),
        }
    }

    /// Drop the storage's own records from an essence-shaped value (under the keys of
    /// any object: marked or not).
    pub(crate) fn strip_own(&self, essence: &mut Map<String, Value>) {
        match self {
            DiffBaseStorage::Annotations(annotations) => annotations.strip_own(essence, None),
            DiffBaseStorage::Status(status) => status.strip_own(essence),
            DiffBaseStorage::Multi(storages) => {
                for storage in storages {
                    storage.strip_own(essence);
                }
            }
        }
    }

    /// Read the stored diff-base from the first storage that has one. A garbage value is
    /// skipped with a warning (Kopf would crash the processing of the object); no value
    /// means "create".
    pub(crate) fn fetch(&self, body: &Value) -> (Option<Value>, Vec<String>) {
        let mut warnings = Vec::new();
        let found = self.fetch_into(body, &mut warnings);
        (found, warnings)
    }

    fn fetch_into(&self, body: &Value, warnings: &mut Vec<String>) -> Option<Value> {
        match self {
            DiffBaseStorage::Annotations(annotations) => annotations.fetch(body, warnings),
            DiffBaseStorage::Status(status) => status.fetch(body, warnings),
            DiffBaseStorage::Multi(storages) => storages
                .iter()
                .find_map(|storage| storage.fetch_into(body, warnings)),
        }
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

    /// Put the diff-base into the patch, in every storage. What an annotation storage
    /// had to store with digests (see [`AnnotationsDiffBase`]'s `store`) is returned to
    /// be reported.
    pub(crate) fn store(&self, body: &Value, patch: &mut Patch, essence: &Value) -> Option<Shrunk> {
        match self {
            DiffBaseStorage::Annotations(annotations) => annotations.store(body, patch, essence),
            DiffBaseStorage::Status(status) => {
                status.store(patch, essence);
                None
            }
            DiffBaseStorage::Multi(storages) => storages
                .iter()
                .filter_map(|storage| storage.store(body, patch, essence))
                .reduce(|first, _| first),
        }
    }
}

/// Kopf's base `DiffBaseStorage.build()`.
fn base_essence(
    body: &Value,
    extra_fields: &[Vec<String>],
    ignored_fields: &[String],
) -> Map<String, Value> {
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
    for field in ignored_fields {
        remove_path(&mut essence, &field_path(field));
    }
    essence
}

impl AnnotationsDiffBase {
    /// The keys of `body`'s diff-base (a ReplicaSet of a Deployment's are marked).
    fn keys(&self, body: &Value) -> KeyScheme<'_> {
        self.scheme(collision_marked(body))
    }

    fn scheme(&self, marked: bool) -> KeyScheme<'_> {
        KeyScheme {
            prefix: &self.prefix,
            v1: self.v1,
            marked,
        }
    }

    /// Its own keys (relevant for non-`kopf.` prefixes without a marker yet), marked as
    /// said, or both.
    fn strip_own(&self, essence: &mut Map<String, Value>, marked: Option<bool>) {
        let own: Vec<String> = match marked {
            Some(marked) => self.scheme(marked).keys(&self.key),
            None => [false, true]
                .into_iter()
                .flat_map(|marked| self.scheme(marked).keys(&self.key))
                .collect(),
        };
        remove_annotations(essence, |k| own.iter().any(|o| o == k));
        remove_empty_stanzas(essence);
    }

    /// The stored form: compact JSON plus a newline (kubectl's convention).
    pub(crate) fn encode(essence: &Value) -> String {
        let mut text = pyformat::dumps(essence);
        text.push('\n');
        text
    }

    /// The V2 key first.
    fn fetch(&self, body: &Value, warnings: &mut Vec<String>) -> Option<Value> {
        for key in self.keys(body).keys(&self.key) {
            match body_annotation(body, &key) {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Null) => {}
                    Ok(value @ Value::Object(_)) => return Some(value),
                    Ok(_) | Err(_) => {
                        warnings.push(format!("Ignoring the unparseable diff-base in {key}."))
                    }
                },
                Some(_) => warnings.push(format!("Ignoring the non-string diff-base in {key}.")),
            }
        }
        None
    }

    /// Under every key, plus the prefix marker. An essence too large for what the
    /// object's annotations leave (after the patch) is stored with digests; the first
    /// time that happens to the object (its stored diff-base has none yet), what was done
    /// is returned to be reported.
    fn store(&self, body: &Value, patch: &mut Patch, essence: &Value) -> Option<Shrunk> {
        let keys = self.keys(body).keys(&self.key);
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
                .fetch(body, &mut Vec::new())
                .is_some_and(|stored| oversized::has_digests(&stored));
        for key in keys {
            patch.set_annotation(&key, Value::String(encoded.clone()));
        }
        store_marker(&self.keys(body), body, patch);
        shrunk.filter(|_| !reported_before)
    }
}

impl StatusDiffBase {
    fn strip_own(&self, essence: &mut Map<String, Value>) {
        remove_path(essence, &field_path(&self.field));
    }

    /// A string of JSON; anything else is skipped with a warning.
    fn fetch(&self, body: &Value, warnings: &mut Vec<String>) -> Option<Value> {
        match resolve(body, &field_path(&self.field))? {
            Value::Null => None,
            Value::String(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Null) => None,
                Ok(value @ Value::Object(_)) => Some(value),
                Ok(_) | Err(_) => {
                    warnings.push(format!(
                        "Ignoring the unparseable diff-base in {}.",
                        self.field
                    ));
                    None
                }
            },
            _ => {
                warnings.push(format!(
                    "Ignoring the non-string diff-base in {}.",
                    self.field
                ));
                None
            }
        }
    }

    /// Compact JSON without a newline, as one string: no merging with what was there.
    fn store(&self, patch: &mut Patch, essence: &Value) {
        patch.set_at(
            &field_path(&self.field),
            Value::String(pyformat::dumps(essence)),
        );
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
    use crate::persistence::AnnotationsProgress;

    use serde_json::json;

    fn storage() -> DiffBaseStorage {
        DiffBaseStorage::default()
    }

    fn example_com() -> DiffBaseStorage {
        DiffBaseStorage::Annotations(AnnotationsDiffBase {
            prefix: "example.com".into(),
            ..AnnotationsDiffBase::default()
        })
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
            AnnotationsDiffBase::encode(&essence),
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
        let s = example_com();
        let body = json!({"metadata": {"annotations": {"example.com/last-handled-configuration": "{}", "example.com/fn": "{}"}}, "spec": {}});
        assert_eq!(
            s.build(&body, &[]),
            json!({"spec": {}, "metadata": {"annotations": {"example.com/fn": "{}"}}}),
            "the diff-base storage strips only its own key"
        );
        let progress = ProgressStorage::Annotations(AnnotationsProgress {
            prefix: "example.com".into(),
            ..AnnotationsProgress::default()
        });
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
        let s = example_com();
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
        let stored = AnnotationsDiffBase::encode(&essence);
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
        let (old, new, _) = s.essences(&body, &[], &ProgressStorage::default());
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
        let (old, new, warnings) = s.essences(&body, &[], &ProgressStorage::default());
        assert!(warnings.is_empty());
        assert_eq!(old.as_ref(), Some(&new));
        assert_eq!(s.store(&body, &mut Patch::default(), &new), None);
        // A changed blob: the old essence keeps the digest, the change shows.
        body["spec"]["blob"] = json!("c".repeat(300_000));
        let (old, new, _) = s.essences(&body, &[], &ProgressStorage::default());
        let old = old.expect("stored");
        assert!(
            old["spec"]["blob"]
                .as_str()
                .is_some_and(|d| d.starts_with("kapsel-digest:sha256:"))
        );
        assert_eq!(old["spec"]["f"], 1);
        assert_ne!(Some(old), Some(new));
    }

    fn both() -> DiffBaseStorage {
        DiffBaseStorage::Multi(vec![
            DiffBaseStorage::Annotations(AnnotationsDiffBase {
                prefix: "example.com".into(),
                ignored_fields: vec!["spec.noise".into()],
                ..AnnotationsDiffBase::default()
            }),
            DiffBaseStorage::Status(StatusDiffBase::default()),
        ])
    }

    #[test]
    fn the_status_storage_keeps_a_string_without_newline() {
        let st = DiffBaseStorage::Status(StatusDiffBase::default());
        let mut patch = Patch::default();
        assert_eq!(
            st.store(&json!({}), &mut patch, &json!({"spec": {"a": 1}})),
            None
        );
        assert_eq!(
            Value::Object(patch.merge.clone()),
            json!({"status": {"kopf": {"last-handled-configuration": "{\"spec\":{\"a\":1}}"}}})
        );
        let body = Value::Object(patch.merge);
        assert_eq!(st.fetch(&body), (Some(json!({"spec": {"a": 1}})), vec![]));
        let odd = json!({"status": {"kopf": {"last-handled-configuration": {"spec": 1}}}});
        assert_eq!(st.fetch(&odd).0, None);
        assert_eq!(st.fetch(&odd).1.len(), 1);
        // Its own field is never essential, even when a handler watches the status.
        let body = json!({"spec": {}, "status": {"kopf": {"last-handled-configuration": "{}"}}});
        assert_eq!(
            st.build(&body, &[vec!["status".into()]]),
            json!({"spec": {}})
        );
    }

    #[test]
    fn multi_writes_every_storage_reads_the_first_and_ignores_fields() {
        let st = both();
        let body = json!({"metadata": {"labels": {"l": "1"}}, "spec": {"a": 1, "noise": 2}});
        let essence = st.build(&body, &[]);
        assert_eq!(
            essence,
            json!({"spec": {"a": 1}, "metadata": {"labels": {"l": "1"}}})
        );
        let mut patch = Patch::default();
        st.store(&body, &mut patch, &essence);
        assert_eq!(
            Value::Object(patch.merge.clone()),
            json!({
                "metadata": {"annotations": {
                    "example.com/last-handled-configuration": "{\"spec\":{\"a\":1},\"metadata\":{\"labels\":{\"l\":\"1\"}}}\n",
                    "example.com/kopf-managed": "yes"}},
                "status": {"kopf": {"last-handled-configuration": "{\"spec\":{\"a\":1},\"metadata\":{\"labels\":{\"l\":\"1\"}}}"}}
            })
        );
        let mut stored = Value::Object(patch.merge);
        stored["status"]["kopf"]["last-handled-configuration"] = json!("{\"spec\":2}");
        assert_eq!(
            st.fetch(&stored).0,
            Some(json!({"spec": {"a": 1}, "metadata": {"labels": {"l": "1"}}}))
        );
        stored["metadata"]["annotations"] = json!({});
        assert_eq!(st.fetch(&stored).0, Some(json!({"spec": 2})));
        // A change of an ignored field causes nothing.
        let mut noisy = body.clone();
        noisy["spec"]["noise"] = json!(3);
        assert_eq!(st.build(&noisy, &[]), essence);
    }
}
