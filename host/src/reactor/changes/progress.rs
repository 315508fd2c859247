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

use super::keys::KeyScheme;
use super::patch::{Patch, body_annotation, store_marker};
use super::stanzas::{remove_annotations, remove_empty_stanzas, remove_path};
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

/// Where progress records are kept: Kopf's default `SmartProgressStorage`, annotations
/// under a prefix (written and read) and the legacy `status.kopf.progress` (read and
/// purged only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProgressStorage {
    /// The annotation prefix (`kopf.zalando.org`).
    pub(crate) prefix: String,
    /// Also write the V1 keys (`v1=True`).
    pub(crate) v1: bool,
    /// `touch-dummy`.
    pub(crate) touch_key: String,
}

impl ProgressStorage {
    pub(crate) fn keys(&self) -> KeyScheme<'_> {
        KeyScheme {
            prefix: &self.prefix,
            v1: self.v1,
        }
    }

    /// Read a handler's record: annotations (V2, then V1), then `status.kopf.progress`.
    /// Unparseable annotation values are skipped with a warning.
    pub(crate) fn fetch(
        &self,
        body: &Value,
        id: &str,
        warnings: &mut Vec<String>,
    ) -> Option<Value> {
        for key in self.keys().keys(id) {
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
        let legacy = body.get("status")?.get("kopf")?.get("progress")?.get(id)?;
        legacy.is_object().then(|| legacy.clone())
    }

    /// Write a record under every key (and brand a custom prefix).
    pub(crate) fn store(&self, body: &Value, patch: &mut Patch, id: &str, record: &Value) {
        let encoded = pyformat::dumps(record);
        for key in self.keys().keys(id) {
            patch.set_annotation(&key, Value::String(encoded.clone()));
        }
        store_marker(&self.keys(), body, patch);
    }

    /// Remove a record: null the keys the body has; drop those only in the patch.
    /// A legacy record in `status.kopf.progress.<id>` is nulled too: Kopf's read-only
    /// status storage still purges, so pre-1.44 records do not outlive their cause.
    pub(crate) fn purge(&self, body: &Value, patch: &mut Patch, id: &str) {
        for key in self.keys().keys(id) {
            if body_annotation(body, &key).is_some() {
                patch.set_annotation(&key, Value::Null);
            } else if patch.annotation(&key).is_some() {
                patch.forget_annotation(&key);
            }
        }
        let legacy = body
            .get("status")
            .and_then(|s| s.get("kopf"))
            .and_then(|k| k.get("progress"));
        if legacy
            .and_then(|p| p.as_object())
            .is_some_and(|p| p.contains_key(id))
        {
            patch.set_status_path(&["kopf", "progress", id], Value::Null);
        }
    }

    /// Set the touch marker to `value` (or remove it with `None`) if the body differs:
    /// Kopf's `touch()`, used for the wake-up patch and to drop the marker whenever
    /// anything else is patched.
    pub(crate) fn touch(&self, body: &Value, patch: &mut Patch, value: Option<&str>) {
        let wanted = value.map_or(Value::Null, |v| Value::String(v.to_owned()));
        let keys = self.keys();
        for key in keys.keys(&self.touch_key) {
            let current = body_annotation(body, &key).cloned().unwrap_or(Value::Null);
            if current != wanted {
                patch.set_annotation(&key, wanted.clone());
                if value.is_some() {
                    store_marker(&keys, body, patch);
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

    /// Kopf's `clear()`: drop this prefix's annotations and the legacy
    /// `status.kopf.progress` from an essence (the stored one and the fresh one alike).
    pub(crate) fn clear(&self, essence: Value) -> Value {
        let Value::Object(mut essence) = essence else {
            return essence;
        };
        let prefix = format!("{}/", self.prefix);
        remove_annotations(&mut essence, |k| k.starts_with(&prefix));
        remove_path(&mut essence, &["status", "kopf", "progress"]);
        remove_empty_stanzas(&mut essence);
        Value::Object(essence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage() -> ProgressStorage {
        ProgressStorage {
            prefix: "kopf.zalando.org".into(),
            v1: true,
            touch_key: "touch-dummy".into(),
        }
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
}
