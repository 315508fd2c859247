//! Per-handler progress records (KOPF.md §4.4).
//!
//! Each selected handler of a cause has a record in an annotation, written as compact
//! JSON with Kopf's field order (`started, stopped, delayed, purpose, retries, success,
//! failure, message, subrefs`, nulls omitted) and Kopf's timestamps
//! (`2026-11-30T03:32:51.611056+00:00`). Records are read from the V2 key, then the V1
//! key, then the legacy `status.kopf.progress.<id>` (read-only since Kopf 1.44), and
//! re-written only when they change, so a Kopf-written record is taken over verbatim.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use super::keys::{KeyScheme, collision_marked};
use super::patch::{Patch, body_annotation, store_marker};
use super::stanzas::{field_path, remove_annotations, remove_empty_stanzas, remove_path, resolve};
use crate::persistence::{AnnotationsProgress, ProgressStorage, StatusProgress};
use crate::pyformat;

pub(crate) use crate::pyformat::seconds;

/// Kopf's timestamp format: ISO-8601 with microseconds and `+00:00`.
pub(crate) fn format_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, false)
}

/// Parse Kopf's timestamps (and tolerate `Z`, other offsets, or no offset = UTC).
pub(crate) fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.with_timezone(&Utc));
    }
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|t| t.and_utc())
}

/// The fields of a record, in Kopf's order.
const RECORD_FIELDS: [&str; 9] = [
    "started", "stopped", "delayed", "purpose", "retries", "success", "failure", "message",
    "subrefs",
];

/// One handler's persisted state (Kopf's `progression.HandlerState`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HandlerState {
    /// Part of the current cause's handlers (counted in done/delays) or only carried over.
    pub(crate) active: bool,
    pub(crate) started: Option<DateTime<Utc>>,
    pub(crate) stopped: Option<DateTime<Utc>>,
    pub(crate) delayed: Option<DateTime<Utc>>,
    pub(crate) purpose: Option<String>,
    pub(crate) retries: u32,
    pub(crate) success: bool,
    pub(crate) failure: bool,
    pub(crate) message: Option<String>,
    pub(crate) subrefs: Vec<String>,
    /// The record as read, to write it back only when it changed.
    pub(crate) origin: Option<Value>,
}

impl HandlerState {
    /// A fresh record for a newly selected handler: `retries: 0`.
    pub(crate) fn from_scratch(now: DateTime<Utc>, purpose: Option<&str>) -> Self {
        HandlerState {
            active: true,
            started: Some(now),
            stopped: None,
            delayed: None,
            purpose: purpose.map(str::to_owned),
            retries: 0,
            success: false,
            failure: false,
            message: None,
            subrefs: Vec::new(),
            origin: None,
        }
    }

    /// A stored record; odd field types are read as absent. `None` if not a mapping.
    pub(crate) fn from_record(record: &Value, now: DateTime<Utc>) -> Option<Self> {
        let map = record.as_object()?;
        let time = |k: &str| map.get(k).and_then(Value::as_str).and_then(parse_time);
        Some(HandlerState {
            active: false,
            started: Some(time("started").unwrap_or(now)),
            stopped: time("stopped"),
            delayed: time("delayed"),
            purpose: map
                .get("purpose")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            retries: map
                .get("retries")
                .and_then(Value::as_u64)
                .and_then(|r| u32::try_from(r).ok())
                .unwrap_or(0),
            success: map.get("success").and_then(Value::as_bool).unwrap_or(false),
            failure: map.get("failure").and_then(Value::as_bool).unwrap_or(false),
            message: map
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
            subrefs: map
                .get("subrefs")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            origin: Some(record.clone()),
        })
    }

    /// The record as Kopf stores it: fixed field order, `None`s omitted, subrefs sorted.
    pub(crate) fn to_record(&self) -> Value {
        let mut m = Map::new();
        let mut time = |k: &str, t: Option<DateTime<Utc>>| {
            if let Some(t) = t {
                m.insert(k.into(), json!(format_time(t)));
            }
        };
        time("started", self.started);
        time("stopped", self.stopped);
        time("delayed", self.delayed);
        if let Some(p) = &self.purpose {
            m.insert("purpose".into(), json!(p));
        }
        m.insert("retries".into(), json!(self.retries));
        m.insert("success".into(), json!(self.success));
        m.insert("failure".into(), json!(self.failure));
        if let Some(msg) = &self.message {
            m.insert("message".into(), json!(msg));
        }
        if !self.subrefs.is_empty() {
            let mut subrefs = self.subrefs.clone();
            subrefs.sort();
            subrefs.dedup();
            m.insert("subrefs".into(), json!(subrefs));
        }
        Value::Object(m)
    }

    /// Kopf's `for_storage()`: every field in its order, the empty ones null, as the
    /// storages are handed it (the annotations drop the nulls, the status keeps them to
    /// remove what an older record had).
    pub(crate) fn for_storage(&self) -> Value {
        let mut record = Map::new();
        for field in RECORD_FIELDS {
            record.insert(field.into(), Value::Null);
        }
        let Value::Object(set) = self.to_record() else {
            return Value::Object(record);
        };
        record.extend(set);
        Value::Object(record)
    }

    /// Succeeded or failed for good.
    pub(crate) fn finished(&self) -> bool {
        self.success || self.failure
    }

    /// Not finished and its retry time has not come yet.
    pub(crate) fn sleeping(&self, now: DateTime<Utc>) -> bool {
        !self.finished() && self.delayed.is_some_and(|d| d > now)
    }

    /// Due to run: not finished, and no delay or the delay has passed.
    pub(crate) fn awakened(&self, now: DateTime<Utc>) -> bool {
        !self.finished() && !self.sleeping(now)
    }

    /// Time since the first attempt (the `runtime` kwarg; checked against `timeout`).
    /// The stages read it from their `Standing` instead.
    #[cfg(test)]
    pub(crate) fn runtime(&self, now: DateTime<Utc>) -> chrono::TimeDelta {
        now - self.started.unwrap_or(now)
    }

    /// Whether the record must be (re-)written: Kopf compares with what it read.
    pub(crate) fn changed(&self) -> bool {
        self.origin
            .as_ref()
            .is_none_or(|o| !pyformat::py_eq(o, &self.to_record()))
    }
}

impl ProgressStorage {
    /// Read a handler's record from the first storage that has one. Unparseable
    /// annotation values are skipped with a warning.
    pub(crate) fn fetch(
        &self,
        body: &Value,
        id: &str,
        warnings: &mut Vec<String>,
    ) -> Option<Value> {
        match self {
            ProgressStorage::Annotations(annotations) => annotations.fetch(body, id, warnings),
            ProgressStorage::Status(status) => status.fetch(body, id),
            ProgressStorage::Smart {
                annotations,
                status,
            } => annotations
                .fetch(body, id, warnings)
                .or_else(|| status.fetch(body, id)),
            ProgressStorage::Multi(storages) => storages
                .iter()
                .find_map(|storage| storage.fetch(body, id, warnings)),
        }
    }

    /// Write a record (Kopf's full record: every field, the empty ones null).
    pub(crate) fn store(&self, body: &Value, patch: &mut Patch, id: &str, record: &Value) {
        match self {
            ProgressStorage::Annotations(annotations)
            | ProgressStorage::Smart { annotations, .. } => {
                annotations.store(body, patch, id, record);
            }
            ProgressStorage::Status(status) => status.store(patch, id, record),
            ProgressStorage::Multi(storages) => {
                for storage in storages {
                    storage.store(body, patch, id, record);
                }
            }
        }
    }

    /// Remove a record: null what the body has; drop what only the patch has. Smart's
    /// status records (from Kopf before 1.44) are purged too, so that they do not
    /// outlive their cause.
    pub(crate) fn purge(&self, body: &Value, patch: &mut Patch, id: &str) {
        match self {
            ProgressStorage::Annotations(annotations) => annotations.purge(body, patch, id),
            ProgressStorage::Status(status) => status.purge(body, patch, id),
            ProgressStorage::Smart {
                annotations,
                status,
            } => {
                annotations.purge(body, patch, id);
                status.purge(body, patch, id);
            }
            ProgressStorage::Multi(storages) => {
                for storage in storages {
                    storage.purge(body, patch, id);
                }
            }
        }
    }

    /// Set the touch marker to `value` (or remove it with `None`) where the body differs:
    /// Kopf's `touch()`, used for the wake-up patch and to drop the marker whenever
    /// anything else is patched.
    pub(crate) fn touch(&self, body: &Value, patch: &mut Patch, value: Option<&str>) {
        match self {
            ProgressStorage::Annotations(annotations)
            | ProgressStorage::Smart { annotations, .. } => annotations.touch(body, patch, value),
            ProgressStorage::Status(status) => status.touch(body, patch, value),
            ProgressStorage::Multi(storages) => {
                for storage in storages {
                    storage.touch(body, patch, value);
                }
            }
        }
    }

    /// The end-of-cycle rule: if anything is patched, remove `touch-dummy` too.
    pub(crate) fn finalize(&self, body: &Value, patch: &mut Patch) {
        if !patch.is_empty() {
            self.touch(body, patch, None);
        }
    }

    /// Kopf's `clear()`: drop the storage's records (and the touch marker) from an
    /// essence, the stored one and the fresh one alike.
    pub(crate) fn clear(&self, essence: Value) -> Value {
        let Value::Object(mut essence) = essence else {
            return essence;
        };
        self.clear_map(&mut essence);
        Value::Object(essence)
    }

    /// [`ProgressStorage::clear`] in place.
    pub(crate) fn clear_map(&self, essence: &mut Map<String, Value>) {
        match self {
            ProgressStorage::Annotations(annotations) => annotations.clear(essence),
            ProgressStorage::Status(status) => status.clear(essence),
            ProgressStorage::Smart {
                annotations,
                status,
            } => {
                annotations.clear(essence);
                status.clear(essence);
            }
            ProgressStorage::Multi(storages) => {
                for storage in storages {
                    storage.clear_map(essence);
                }
            }
        }
    }
}

impl AnnotationsProgress {
    /// The keys of `body`'s records (a ReplicaSet of a Deployment's are marked).
    fn keys(&self, body: &Value) -> KeyScheme<'_> {
        KeyScheme {
            prefix: &self.prefix,
            v1: self.v1,
            marked: collision_marked(body),
        }
    }

    /// The record under the V2 key, else the V1 key.
    fn fetch(&self, body: &Value, id: &str, warnings: &mut Vec<String>) -> Option<Value> {
        for key in self.keys(body).keys(id) {
            match body_annotation(body, &key) {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Null) => {}
                    Ok(value @ Value::Object(_)) => return Some(value),
                    Ok(_) | Err(_) => {
                        warnings.push(format!("Ignoring the unparseable progress in {key}."))
                    }
                },
                Some(_) => warnings.push(format!("Ignoring the non-string progress in {key}.")),
            }
        }
        None
    }

    /// Under every key, as compact JSON without its nulls unless verbose; and the
    /// prefix's brand.
    fn store(&self, body: &Value, patch: &mut Patch, id: &str, record: &Value) {
        let encoded = if self.verbose {
            pyformat::dumps(record)
        } else {
            pyformat::dumps(&without_nulls(record))
        };
        for key in self.keys(body).keys(id) {
            patch.set_annotation(&key, Value::String(encoded.clone()));
        }
        store_marker(&self.keys(body), body, patch);
    }

    fn purge(&self, body: &Value, patch: &mut Patch, id: &str) {
        for key in self.keys(body).keys(id) {
            if body_annotation(body, &key).is_some() {
                patch.set_annotation(&key, Value::Null);
            } else if patch.annotation(&key).is_some() {
                patch.forget_annotation(&key);
            }
        }
    }

    /// Any change of the marker brands the prefix, as in Kopf.
    fn touch(&self, body: &Value, patch: &mut Patch, value: Option<&str>) {
        let wanted = value.map_or(Value::Null, |v| Value::String(v.to_owned()));
        let keys = self.keys(body);
        for key in keys.keys(&self.touch_key) {
            let current = body_annotation(body, &key).unwrap_or(&Value::Null);
            if *current != wanted {
                patch.set_annotation(&key, wanted.clone());
                store_marker(&keys, body, patch);
            }
        }
    }

    fn clear(&self, essence: &mut Map<String, Value>) {
        let prefix = format!("{}/", self.prefix);
        remove_annotations(essence, |k| k.starts_with(&prefix));
        remove_empty_stanzas(essence);
    }
}

impl StatusProgress {
    fn fetch(&self, body: &Value, id: &str) -> Option<Value> {
        let record = resolve(body, &field_path(&self.field))?.get(id)?;
        record.is_object().then(|| record.clone())
    }

    /// The full record, nulls included: they remove what an older record had.
    fn store(&self, patch: &mut Patch, id: &str, record: &Value) {
        let mut path = field_path(&self.field);
        path.push(id);
        patch.set_at(&path, record.clone());
    }

    fn purge(&self, body: &Value, patch: &mut Patch, id: &str) {
        let mut path = field_path(&self.field);
        path.push(id);
        if resolve(body, &path).is_some() {
            patch.set_at(&path, Value::Null);
        } else if patch.at(&path).is_some() {
            patch.forget_at(&path);
        }
    }

    fn touch(&self, body: &Value, patch: &mut Patch, value: Option<&str>) {
        let path = field_path(&self.touch_field);
        let current = resolve(body, &path).unwrap_or(&Value::Null);
        let wanted = value.map_or(Value::Null, |v| Value::String(v.to_owned()));
        if *current != wanted {
            patch.set_at(&path, wanted);
        }
    }

    fn clear(&self, essence: &mut Map<String, Value>) {
        remove_path(essence, &field_path(&self.field));
        remove_empty_stanzas(essence);
    }
}

/// A record without its null fields (what the annotations keep unless verbose).
fn without_nulls(record: &Value) -> Value {
    match record {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage() -> ProgressStorage {
        ProgressStorage::default()
    }

    const CAPTURED: &str = r#"{"started":"2026-11-30T03:32:51.611056+00:00","delayed":"2026-11-30T03:32:51.623181+00:00","purpose":"create","retries":1,"success":false,"failure":false,"message":"not yet"}"#;

    #[test]
    fn timestamps_like_kopf() {
        let t = parse_time("2026-11-30T03:32:51.611056+00:00").expect("parses");
        assert_eq!(format_time(t), "2026-11-30T03:32:51.611056+00:00");
        assert_eq!(parse_time("2026-11-30T03:32:51.611056Z"), Some(t));
        assert_eq!(
            parse_time("2026-11-30T03:32:51.611056"),
            Some(t),
            "pre-tz Kopf wrote naive UTC"
        );
        assert_eq!(parse_time("garbage"), None);
        let whole = parse_time("2026-11-30T03:32:51+00:00").expect("parses");
        assert_eq!(format_time(whole), "2026-11-30T03:32:51.000000+00:00");
    }

    #[test]
    fn the_captured_record_round_trips_byte_for_byte() {
        let now = parse_time("2026-11-30T04:00:00+00:00").expect("parses");
        let record: Value = serde_json::from_str(CAPTURED).expect("json");
        let state = HandlerState::from_record(&record, now).expect("a mapping");
        assert_eq!(state.retries, 1);
        assert!(
            !state.changed(),
            "read back unchanged, so it is not re-written"
        );
        assert_eq!(pyformat::dumps(&state.to_record()), CAPTURED);
        assert!(state.awakened(now));
        let before = parse_time("2026-11-30T03:32:51.62+00:00").expect("parses");
        assert!(state.sleeping(before));
        assert_eq!(state.runtime(now).num_seconds(), 1628);
    }

    #[test]
    fn fresh_records_and_finished_ones() {
        let now = parse_time("2026-11-30T03:32:51.611056+00:00").expect("parses");
        let mut s = HandlerState::from_scratch(now, Some("create"));
        assert_eq!(
            pyformat::dumps(&s.to_record()),
            r#"{"started":"2026-11-30T03:32:51.611056+00:00","purpose":"create","retries":0,"success":false,"failure":false}"#
        );
        s.success = true;
        s.subrefs = vec!["b".into(), "a".into(), "a".into()];
        assert!(s.finished() && !s.awakened(now));
        assert_eq!(s.to_record()["subrefs"], json!(["a", "b"]));
    }

    #[test]
    fn fetching_in_order_and_tolerating_garbage() {
        let st = storage();
        let mut warnings = vec![];
        let long = "a".repeat(50);
        let v1 = format!("kopf.zalando.org/{}-koaVtw", "a".repeat(39));
        let body = json!({"metadata": {"annotations": {v1: CAPTURED}}});
        assert!(
            st.fetch(&body, &long, &mut warnings).is_some(),
            "V1 key is read when V2 is absent"
        );
        let body = json!({"metadata": {"annotations": {"kopf.zalando.org/fn": "{nope"}},
                          "status": {"kopf": {"progress": {"fn": {"retries": 3}}}}});
        assert_eq!(
            st.fetch(&body, "fn", &mut warnings),
            Some(json!({"retries": 3})),
            "legacy status"
        );
        assert_eq!(warnings.len(), 1);
        assert_eq!(
            st.fetch(&json!({"metadata": null}), "fn", &mut warnings),
            None
        );
        let odd = HandlerState::from_record(
            &json!({"retries": "x", "success": 1, "started": 5}),
            Utc::now(),
        );
        assert!(odd.is_some_and(|s| s.retries == 0 && !s.success));
        assert!(HandlerState::from_record(&json!([1]), Utc::now()).is_none());
    }

    #[test]
    fn touch_dummy_rules() {
        let st = storage();
        let body = json!({"metadata": {"annotations": {"kopf.zalando.org/touch-dummy": "t0"}}});
        let mut p = Patch::default();
        st.finalize(&body, &mut p);
        assert!(p.is_empty(), "nothing patched, nothing to untouch");
        p.set_annotation("kopf.zalando.org/x", json!("1"));
        st.finalize(&body, &mut p);
        assert_eq!(
            p.annotation("kopf.zalando.org/touch-dummy"),
            Some(&Value::Null)
        );
        let mut p = Patch::default();
        st.finalize(&json!({}), &mut p);
        st.touch(&json!({}), &mut p, Some("2026-11-30T03:32:52.000000+00:00"));
        assert_eq!(
            Value::Object(p.merge),
            json!({"metadata": {"annotations": {"kopf.zalando.org/touch-dummy": "2026-11-30T03:32:52.000000+00:00"}}})
        );
    }

    #[test]
    fn purging_nulls_existing_and_forgets_pending() {
        let st = storage();
        let body = json!({"metadata": {"annotations": {"kopf.zalando.org/a": "{}"}}});
        let mut patch = Patch::default();
        st.store(&body, &mut patch, "b", &json!({"retries": 0}));
        st.purge(&body, &mut patch, "a");
        st.purge(&body, &mut patch, "b");
        st.purge(&body, &mut patch, "c");
        assert_eq!(
            Value::Object(patch.merge),
            json!({"metadata": {"annotations": {"kopf.zalando.org/a": null}}})
        );
    }

    fn status_and_annotations() -> ProgressStorage {
        ProgressStorage::Multi(vec![
            ProgressStorage::Annotations(AnnotationsProgress {
                prefix: "example.com".into(),
                ..AnnotationsProgress::default()
            }),
            ProgressStorage::Status(StatusProgress::default()),
        ])
    }

    #[test]
    fn the_full_record_has_every_field_in_kopfs_order() {
        let now = parse_time("2026-11-30T03:32:51.611056+00:00").expect("parses");
        let state = HandlerState::from_scratch(now, Some("create"));
        assert_eq!(
            pyformat::dumps(&state.for_storage()),
            r#"{"started":"2026-11-30T03:32:51.611056+00:00","stopped":null,"delayed":null,"purpose":"create","retries":0,"success":false,"failure":false,"message":null,"subrefs":null}"#
        );
        let verbose = ProgressStorage::Annotations(AnnotationsProgress {
            verbose: true,
            ..AnnotationsProgress::default()
        });
        let mut patch = Patch::default();
        verbose.store(&json!({}), &mut patch, "fn", &state.for_storage());
        assert!(
            patch
                .annotation("kopf.zalando.org/fn")
                .is_some_and(|v| v.as_str().is_some_and(|t| t.contains(r#""stopped":null"#)))
        );
    }

    #[test]
    fn status_records_are_mappings_with_their_nulls() {
        let st = ProgressStorage::Status(StatusProgress::default());
        let record = json!({"started": "t", "stopped": null, "retries": 1});
        let mut patch = Patch::default();
        st.store(&json!({}), &mut patch, "parent/child", &record);
        assert_eq!(
            Value::Object(patch.merge.clone()),
            json!({"status": {"kopf": {"progress": {"parent/child": record}}}}),
            "the raw id, no annotation key forming; nulls remove older fields"
        );
        let body =
            json!({"status": {"kopf": {"progress": {"parent/child": {"retries": 1}, "odd": 5}}}});
        let mut warnings = vec![];
        assert_eq!(
            st.fetch(&body, "parent/child", &mut warnings),
            Some(json!({"retries": 1}))
        );
        assert_eq!(st.fetch(&body, "odd", &mut warnings), None);
        assert_eq!(st.fetch(&json!({"status": 1}), "x", &mut warnings), None);
        let mut patch = Patch::default();
        st.store(&body, &mut patch, "new", &json!({}));
        st.purge(&body, &mut patch, "parent/child");
        st.purge(&body, &mut patch, "new");
        st.purge(&body, &mut patch, "absent");
        assert_eq!(
            Value::Object(patch.merge),
            json!({"status": {"kopf": {"progress": {"parent/child": null}}}})
        );
        let mut patch = Patch::default();
        st.touch(&json!({}), &mut patch, Some("t1"));
        assert_eq!(
            Value::Object(patch.merge.clone()),
            json!({"status": {"kopf": {"dummy": "t1"}}})
        );
        st.finalize(&json!({"status": {"kopf": {"dummy": "t0"}}}), &mut patch);
        assert_eq!(patch.at(&["status", "kopf", "dummy"]), Some(&Value::Null));
        assert!(warnings.is_empty());
    }

    #[test]
    fn smart_reads_status_but_writes_annotations_and_multi_writes_all() {
        let smart = storage();
        let body = json!({"status": {"kopf": {"progress": {"fn": {"retries": 2}}}}});
        let mut patch = Patch::default();
        smart.store(
            &body,
            &mut patch,
            "fn",
            &json!({"retries": 3, "message": null}),
        );
        smart.touch(&body, &mut patch, Some("t"));
        assert_eq!(
            Value::Object(patch.merge),
            json!({"metadata": {"annotations": {
                "kopf.zalando.org/fn": "{\"retries\":3}",
                "kopf.zalando.org/touch-dummy": "t"}}}),
            "no status written"
        );
        let multi = status_and_annotations();
        let mut patch = Patch::default();
        multi.store(
            &json!({}),
            &mut patch,
            "fn",
            &json!({"retries": 3, "message": null}),
        );
        multi.touch(&json!({}), &mut patch, Some("t"));
        assert_eq!(
            Value::Object(patch.merge.clone()),
            json!({
                "metadata": {"annotations": {
                    "example.com/fn": "{\"retries\":3}",
                    "example.com/kopf-managed": "yes",
                    "example.com/touch-dummy": "t"}},
                "status": {"kopf": {"progress": {"fn": {"retries": 3, "message": null}}, "dummy": "t"}}
            })
        );
        // Read from the first that has one.
        let mut body = Value::Object(patch.merge);
        body["status"]["kopf"]["progress"]["fn"] = json!({"retries": 9});
        assert_eq!(
            multi.fetch(&body, "fn", &mut vec![]),
            Some(json!({"retries": 3}))
        );
        body["metadata"]["annotations"] = json!({});
        assert_eq!(
            multi.fetch(&body, "fn", &mut vec![]),
            Some(json!({"retries": 9}))
        );
    }

    #[test]
    fn clearing_drops_each_storages_records() {
        let essence = json!({
            "spec": {"a": 1},
            "metadata": {"annotations": {"example.com/fn": "{}", "keep.io/x": "1"}},
            "status": {"kopf": {"progress": {"fn": {}}}, "phase": "Running"},
        });
        assert_eq!(
            status_and_annotations().clear(essence.clone()),
            json!({"spec": {"a": 1}, "metadata": {"annotations": {"keep.io/x": "1"}},
                   "status": {"phase": "Running"}})
        );
        assert_eq!(
            storage().clear(essence.clone())["metadata"]["annotations"]["example.com/fn"],
            "{}",
            "another prefix is not this storage's"
        );
    }

    #[test]
    fn removing_the_touch_marker_brands_a_custom_prefix_too() {
        let st = status_and_annotations();
        let body = json!({"metadata": {"annotations": {"example.com/touch-dummy": "t"}}});
        let mut patch = Patch::default();
        st.touch(&body, &mut patch, None);
        assert_eq!(
            Value::Object(patch.merge),
            json!({"metadata": {"annotations": {
                "example.com/touch-dummy": null,
                "example.com/kopf-managed": "yes"}}}),
            "as Kopf's touch() does on any change"
        );
    }
}
