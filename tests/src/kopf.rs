//! What Kopf stores on an object (KOPF.md §4), read back and checked byte for byte:
//! the finalizer, the diff-base, the progress records and their exact format.

use std::collections::BTreeMap;

use serde_json::Value;

/// The annotation prefix.
pub const PREFIX: &str = "kopf.zalando.org";
/// Kopf's finalizer.
pub const FINALIZER: &str = "kopf.zalando.org/KopfFinalizerMarker";
/// The diff-base annotation.
pub const DIFF_BASE: &str = "kopf.zalando.org/last-handled-configuration";
/// The wake-up marker.
pub const TOUCH: &str = "kopf.zalando.org/touch-dummy";

/// The fields of a progress record, in the order Kopf writes them (§4.4).
const RECORD_FIELDS: [&str; 9] = [
    "started", "stopped", "delayed", "purpose", "retries", "success", "failure", "message",
    "subrefs",
];

/// All annotations of an object.
pub fn annotations(body: &Value) -> BTreeMap<String, String> {
    body["metadata"]["annotations"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The annotation keys under `kopf.zalando.org/`, sorted.
pub fn kopf_keys(body: &Value) -> Vec<String> {
    annotations(body)
        .into_keys()
        .filter(|k| k.starts_with(&format!("{PREFIX}/")))
        .collect()
}

/// The Kopf annotations other than the diff-base: progress records (and the touch marker).
pub fn progress_keys(body: &Value) -> Vec<String> {
    kopf_keys(body)
        .into_iter()
        .filter(|k| k != DIFF_BASE)
        .collect()
}

/// `metadata.finalizers`.
pub fn finalizers(body: &Value) -> Vec<String> {
    body["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The stored diff-base, verbatim.
pub fn diff_base(body: &Value) -> Option<String> {
    annotations(body).remove(DIFF_BASE)
}

/// The progress record under an annotation key, parsed after checking its format.
pub fn record_at(body: &Value, key: &str) -> Option<Value> {
    annotations(body).get(key).map(|text| check_record(text))
}

/// The progress record of a handler with a short id (key = prefix + safe id, §4.3).
pub fn record(body: &Value, id: &str) -> Option<Value> {
    record_at(body, &format!("{PREFIX}/{}", id.replace('/', ".")))
}

/// `status.<id>`.
pub fn status<'a>(body: &'a Value, id: &str) -> &'a Value {
    &body["status"][id]
}

/// Handling is complete: the diff-base is stored and these handlers' results have
/// arrived. (The host sends the annotations and `/status` as two merge-patches, §4.7,
/// so the diff-base alone does not mean the results are there yet.)
pub fn handled_with(body: &Value, results: &[&str]) -> bool {
    diff_base(body).is_some() && results.iter().all(|id| !status(body, id).is_null())
}

/// Checks that a progress record is what Kopf writes (§4.4): compact JSON, fields in
/// Kopf's order, no nulls, timestamps in ISO-8601 UTC with `+00:00`; returns it parsed.
///
/// # Panics
/// On any deviation.
pub fn check_record(text: &str) -> Value {
    let record: Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("record is not JSON ({e}): {text}"));
    let fields = record
        .as_object()
        .unwrap_or_else(|| panic!("record is not an object: {text}"));
    assert_eq!(
        serde_json::to_string(&record).expect("json"),
        text,
        "records are compact JSON"
    );
    let order: Vec<usize> = fields
        .keys()
        .map(|k| {
            RECORD_FIELDS
                .iter()
                .position(|f| f == k)
                .unwrap_or_else(|| panic!("unknown field {k} in record {text}"))
        })
        .collect();
    assert!(order.is_sorted(), "fields out of Kopf's order: {text}");
    for required in ["started", "purpose", "retries", "success", "failure"] {
        assert!(fields.contains_key(required), "no {required}: {text}");
    }
    for (k, v) in fields {
        match k.as_str() {
            "started" | "stopped" | "delayed" => {
                kopf_time(v.as_str().unwrap_or_default());
            }
            "purpose" | "message" => assert!(v.is_string(), "{k}: {text}"),
            "retries" => assert!(v.is_u64(), "{k}: {text}"),
            "success" | "failure" => assert!(v.is_boolean(), "{k}: {text}"),
            _ => assert!(v.is_array(), "{k}: {text}"),
        }
    }
    record
}

/// Seconds since the epoch of a Kopf timestamp (`2026-11-30T03:32:51.611056+00:00`;
/// Python's `isoformat()` leaves the fraction out when it is zero).
///
/// # Panics
/// When the text is not in that format.
pub fn kopf_time(text: &str) -> f64 {
    let bad = || panic!("not a Kopf timestamp: {text:?}");
    let Some(local) = text.strip_suffix("+00:00") else {
        bad()
    };
    let (whole, micros) = match local.split_once('.') {
        Some((whole, fraction)) if fraction.len() == 6 => {
            (whole, fraction.parse::<u32>().unwrap_or_else(|_| bad()))
        }
        Some(_) => bad(),
        None => (local, 0),
    };
    let number = |range: std::ops::Range<usize>| -> i64 {
        whole
            .get(range)
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| bad())
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if whole.len() != 19 || separators.iter().any(|(i, c)| whole.as_bytes()[*i] != *c) {
        bad();
    }
    let (y, m, d) = (number(0..4), number(5..7), number(8..10));
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + number(11..13) * 3600 + number(14..16) * 60 + number(17..19);
    // Epoch seconds fit in an f64 exactly.
    let seconds = seconds as f64;
    seconds + f64::from(micros) / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kopf_times() {
        assert_eq!(kopf_time("1970-01-01T00:00:01+00:00"), 1.0);
        // date -u -d 2026-11-30T03:32:51 +%s
        assert!(
            (kopf_time("2026-11-30T03:32:51.611056+00:00") - 1_796_009_571.611_056).abs() < 1e-5
        );
    }

    #[test]
    #[should_panic(expected = "not a Kopf timestamp")]
    fn zulu_is_not_kopf() {
        kopf_time("2026-11-30T03:32:51.611056Z");
    }

    #[test]
    fn records() {
        let r = check_record(
            r#"{"started":"2026-11-30T03:32:51.611056+00:00","delayed":"2026-11-30T03:32:51.623181+00:00","purpose":"create","retries":1,"success":false,"failure":false,"message":"not yet"}"#,
        );
        assert_eq!(r["retries"], 1);
    }

    #[test]
    #[should_panic(expected = "out of Kopf's order")]
    fn records_keep_kopfs_order() {
        check_record(
            r#"{"purpose":"create","started":"2026-11-30T03:32:51.611056+00:00","retries":1,"success":false,"failure":false}"#,
        );
    }
}
