//! CertificateSigningRequests' conditions as kube's strategy and validation treat them:
//! timestamps filled in, and the checks of an update of the approval.

use serde_json::{Value, json};

/// The condition types that may only be `True`, and never be removed.
const TRUE_ONLY: [&str; 3] = ["Approved", "Denied", "Failed"];

/// A request's `status.conditions`.
pub(crate) fn conditions(obj: &Value) -> Vec<Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn count(conditions: &[Value], kind: &str) -> usize {
    conditions.iter().filter(|c| c["type"] == kind).count()
}

/// kube's `populateConditionTimestamps`: a condition without `lastUpdateTime` is updated
/// now; one without `lastTransitionTime` keeps the old one of the same type and status,
/// or is now.
pub(crate) fn with_timestamps(new: &mut [Value], old: &[Value], now: &str) {
    for c in new.iter_mut() {
        if c.get("lastUpdateTime").is_none_or(Value::is_null) {
            c["lastUpdateTime"] = json!(now);
        }
        if c.get("lastTransitionTime").is_none_or(Value::is_null) {
            let kept = old
                .iter()
                .find(|o| o["type"] == c["type"] && o["status"] == c["status"])
                .and_then(|o| o.get("lastTransitionTime"))
                .filter(|t| !t.is_null());
            c["lastTransitionTime"] = kept.cloned().unwrap_or_else(|| json!(now));
        }
    }
}

/// kube's checks of an approval update (`ValidateCertificateSigningRequestApprovalUpdate`): each condition's type and status, Approved and
/// Denied exclusive, no type twice, no Approved, Denied or Failed removed.
pub(crate) fn check_approval(new: &[Value], old: &[Value]) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    let (mut approved, mut denied) = (false, false);
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in new.iter().enumerate() {
        let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
        let status = c.get("status").and_then(Value::as_str).unwrap_or("");
        let at = format!("status.conditions[{i}]");
        if kind.is_empty() {
            causes.push((format!("{at}.type"), "Required value".into()));
        }
        let allowed: &[&str] = if TRUE_ONLY.contains(&kind) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if status.is_empty() {
            causes.push((format!("{at}.status"), "Required value".into()));
        } else if !allowed.contains(&status) {
            let values: Vec<String> = allowed.iter().map(|v| format!("{v:?}")).collect();
            causes.push((
                format!("{at}.status"),
                format!(
                    "Unsupported value: {status:?}: supported values: {}",
                    values.join(", ")
                ),
            ));
        }
        approved |= kind == "Approved";
        denied |= kind == "Denied";
        if approved && denied && matches!(kind, "Approved" | "Denied") {
            causes.push((
                "status.conditions".into(),
                format!(
                    "Invalid value: {kind:?}: Approved and Denied conditions are mutually exclusive"
                ),
            ));
        }
        if seen.contains(&kind) {
            causes.push((format!("{at}.type"), format!("Duplicate value: {kind:?}")));
        }
        seen.push(kind);
    }
    for kind in TRUE_ONLY {
        if count(new, kind) < count(old, kind) {
            causes.push((
                "status.conditions".into(),
                format!("Forbidden: updates may not remove a condition of type {kind:?}"),
            ));
        }
    }
    causes
}

/// kube's status strategy and validation of a request's `status` update, on `new` (the
/// stored request with the new status): the Approved and Denied conditions keep their
/// stored instances (approval is the `approval` subresource's), none of Approved,
/// Denied and Failed is removed, timestamps are filled in, and a certificate once
/// written stays. Returns the causes of refusal, if any.
pub(crate) fn check_status_update(
    new: &mut Value,
    old: &Value,
    now: &str,
) -> Vec<(String, String)> {
    let old_conditions = conditions(old);
    let mut new_conditions = conditions(new);
    for kind in ["Approved", "Denied"] {
        let at = |cs: &[Value]| -> Vec<usize> {
            cs.iter()
                .enumerate()
                .filter(|(_, c)| c["type"] == kind)
                .map(|(i, _)| i)
                .collect()
        };
        let (old_at, new_at) = (at(&old_conditions), at(&new_conditions));
        if old_at.len() == new_at.len() {
            for (o, n) in old_at.iter().zip(&new_at) {
                new_conditions[*n] = old_conditions[*o].clone();
            }
        }
    }
    with_timestamps(&mut new_conditions, &old_conditions, now);
    let mut causes = check_approval(&new_conditions, &old_conditions);
    for kind in ["Approved", "Denied"] {
        if count(&new_conditions, kind) > count(&old_conditions, kind) {
            causes.push((
                "status.conditions".into(),
                format!("Forbidden: updates may not add a condition of type {kind:?}"),
            ));
        }
    }
    let certificate = |v: &Value| {
        v.pointer("/status/certificate")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (old_certificate, new_certificate) = (certificate(old), certificate(new));
    if !old_certificate.is_empty() && old_certificate != new_certificate {
        causes.push((
            "status.certificate".into(),
            "Forbidden: updates may not modify existing certificate content".into(),
        ));
    }
    if new.get("status").is_some_and(Value::is_object) && !new_conditions.is_empty() {
        new["status"]["conditions"] = json!(new_conditions);
    }
    causes
}
