//! The `approval` subresource of CertificateSigningRequests (`certificates.k8s.io/v1`,
//! what `kubectl certificate approve|deny` updates): a PUT or PATCH changes only
//! `status.conditions`, checked as kube's approval validation checks them.

use super::{Call, answer_written, parse_object, reads};
use crate::meta::now;
use crate::objects::{Fields, commit_update};
use crate::patch::PatchType;
use crate::status::ApiError;
use axum::response::Response;
use http::Method;
use serde_json::{Value, json};

/// The condition types that may only be `True`, and never be removed.
const TRUE_ONLY: [&str; 3] = ["Approved", "Denied", "Failed"];

/// GET or PUT of `certificatesigningrequests/NAME/approval`.
pub(super) fn approval(call: &Call<'_>, method: &Method, name: &str) -> Result<Response, ApiError> {
    match *method {
        Method::GET => reads::get(call, name),
        Method::PUT | Method::PATCH => update_approval(call, method, name),
        _ => Err(ApiError::method_not_allowed(&format!(
            "{method} on this resource"
        ))),
    }
}

fn conditions(obj: &Value) -> Vec<Value> {
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
fn with_timestamps(new: &mut [Value], old: &[Value], now: &str) {
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

/// kube's checks of an approval update: each condition's type and status, Approved and
/// Denied exclusive, no type twice, no Approved, Denied or Failed removed.
fn check(new: &[Value], old: &[Value]) -> Vec<(String, String)> {
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

/// PUT or PATCH (JSON, merge or strategic merge; not server-side apply) of the approval:
/// the stored request with the new version's conditions.
fn update_approval(call: &Call<'_>, method: &Method, name: &str) -> Result<Response, ApiError> {
    let scope = &call.scope;
    let mut store = call.shared.lock();
    let old = crate::objects::get(&store, scope, name)?;
    let body = if *method == Method::PATCH {
        match PatchType::from_content_type(call.content_type)? {
            PatchType::Apply => return Err(ApiError::unsupported_media_type(call.content_type)),
            ty => crate::patch::apply(ty, old.clone(), call.body)?,
        }
    } else {
        parse_object(call.content_type, call.body)?
    };
    let old_conditions = conditions(&old);
    let mut new_conditions = conditions(&body);
    with_timestamps(&mut new_conditions, &old_conditions, &now());
    let causes = check(&new_conditions, &old_conditions);
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            scope.target(name),
            "CertificateSigningRequest.certificates.k8s.io",
            &causes,
        ));
    }
    let mut new = old;
    new["status"]["conditions"] = json!(new_conditions);
    let rv = crate::meta::meta_str(&body, "resourceVersion");
    if !rv.is_empty() {
        new["metadata"]["resourceVersion"] = json!(rv);
    }
    let written = commit_update(
        &mut store,
        scope,
        name,
        new,
        true,
        call.dry,
        Fields::Update(&call.who),
    )?;
    Ok(answer_written(200, scope, &written, &[]))
}
