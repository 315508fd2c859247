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
