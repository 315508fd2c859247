//! The requests that write: create, update (PUT), patches (every type, server-side apply
//! included) and deletions (one, or a collection).

use std::collections::HashMap;

use axum::response::Response;
use serde_json::{Value, json};

use super::{Call, answer_written, json_body, parse_bool, parse_object, selectors};
use crate::field_validation::{FieldValidation, with_warnings};
use crate::gc::Propagation;
use crate::objects::{Fields, present};
use crate::patch::PatchType;
use crate::status::{ApiError, json_response};
use crate::store::meta_str;

/// POST of a new object to a collection.
pub(super) async fn create(call: &Call<'_>) -> Result<Response, ApiError> {
    let (scope, ct, body) = (&call.scope, call.content_type, call.body);
    let fv = FieldValidation::from_query(call.query)?;
    let obj = parse_object(ct, body)?;
    let mut warnings = fv.check(&scope.rt, &obj, None, json_body(ct, body))?;
    let created =
        super::admitted::create(call, obj, Fields::Update(&call.who), &mut warnings).await?;
    Ok(answer_written(call, 201, &created, &warnings))
}

/// PUT of an object (or of its status): its new version.
pub(super) async fn update(call: &Call<'_>, name: &str) -> Result<Response, ApiError> {
    let (scope, ct, body) = (&call.scope, call.content_type, call.body);
    let fv = FieldValidation::from_query(call.query)?;
    let obj = parse_object(ct, body)?;
    let current = crate::objects::get(&call.shared.lock(), scope, name).ok();
    let mut warnings = fv.check(&scope.rt, &obj, current.as_ref(), json_body(ct, body))?;
    // Custom resources and CRDs refuse unconditional updates (their strategies'
    // AllowUnconditionalUpdate is false); most built-ins accept them.
    let crd = (scope.rt.group.as_str(), scope.rt.plural.as_str()) == crate::store::CRDS;
    if (scope.rt.custom || crd) && crate::store::meta_str(&obj, "resourceVersion").is_empty() {
        let cause = (
            "metadata.resourceVersion".to_string(),
            "Invalid value: 0x0: must be specified for an update".to_string(),
        );
        return Err(ApiError::invalid(
            scope.target(name),
            &scope.rt.kind,
            &[cause],
        ));
    }
    let mut current = current.ok_or_else(|| ApiError::not_found(scope.target(name)))?;
    let who = Fields::Update(&call.who);
    if !meta_str(&obj, "resourceVersion").is_empty() {
        let updated =
            super::admitted::update(call, name, obj, &current, who, &mut warnings).await?;
        return Ok(answer_written(call, 200, &updated, &warnings));
    }
    // An unconditional update is written over whatever version is current when it is
    // stored, as kube's storage loop writes it: a write that lands during its webhook
    // calls makes it admitted again over the newer version, not refused.
    let mut attempts = 1;
    loop {
        let mut said = warnings.clone();
        match super::admitted::update(call, name, obj.clone(), &current, who, &mut said).await {
            Err(e) if e.code == 409 && e.reason == "Conflict" && attempts < MAX_PATCH_ATTEMPTS => {
                attempts += 1;
                current = crate::objects::get(&call.shared.lock(), scope, name)?;
            }
            updated => {
                let updated = updated?;
                return Ok(answer_written(call, 200, &updated, &said));
            }
        }
    }
}

/// PATCH of an object (or of its status), of any patch type; server-side apply creates
/// what does not exist yet.
pub(super) async fn patch(call: &Call<'_>, name: &str) -> Result<Response, ApiError> {
    let (scope, q) = (&call.scope, call.query);
    let fv = FieldValidation::from_query(q)?;
    let force = parse_bool(q, "force")?;
    let field_manager = q.get("fieldManager").filter(|m| !m.is_empty()).is_some();
    let ty = PatchType::from_content_type(call.content_type)?;
    if ty == PatchType::Apply && !field_manager {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            "fieldManager",
            "Required value: is required for apply patch",
        ));
    }
    if ty != PatchType::Apply && force.is_some() {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            "force",
            "Forbidden: may not be specified for non-apply patch",
        ));
    }
    if scope.rt.custom && ty == PatchType::Strategic {
        // kube: custom resources have no patch strategies to merge by.
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    // kube-apiserver applies a patch inside its storage's optimistic-concurrency loop: when
    // another write lands between the read and the write (a webhook call is a long
    // window), the patch is applied again to the newer version, and admitted again. Only a
    // resourceVersion the patch itself names makes the conflict the client's.
    let mut attempts = 1;
    loop {
        match patch_once(call, name, ty, &fv, force.unwrap_or(false)).await {
            Err(Attempt::Stale(conflict)) if attempts >= MAX_PATCH_ATTEMPTS => {
                return Err(conflict);
            }
            Err(Attempt::Stale(_)) => attempts += 1,
            Err(Attempt::Failed(e)) => return Err(e),
            Ok(answer) => return Ok(answer),
        }
    }
}

/// How often a patch (or an unconditional update) is applied again to a newer version
/// before its conflict is answered
/// (kube's storage retries without a bound; a bound keeps a hot object from pinning a
/// request).
const MAX_PATCH_ATTEMPTS: u32 = 16;

/// Why one application of a patch failed.
enum Attempt {
    /// Another write came first: apply the patch again to the newer version.
    Stale(ApiError),
    /// The answer for the client.
    Failed(ApiError),
}

impl From<ApiError> for Attempt {
    fn from(e: ApiError) -> Self {
        Self::Failed(e)
    }
}

impl Attempt {
    /// `e`, stale when it is a conflict with a write that came after the version the
    /// patch was applied to (`based_on`, its resourceVersion), unless the patched object
    /// names another resourceVersion itself (`patched_rv`): that conflict is the client's.
    fn of_update(e: ApiError, based_on: &str, patched_rv: &str) -> Self {
        if e.code == 409 && e.reason == "Conflict" && based_on == patched_rv {
            Self::Stale(e)
        } else {
            Self::Failed(e)
        }
    }
}

/// Applies the patch once to the stored version of `name` and writes the result.
async fn patch_once(
    call: &Call<'_>,
    name: &str,
    ty: PatchType,
    fv: &FieldValidation,
    force: bool,
) -> Result<Response, Attempt> {
    let scope = &call.scope;
    // The stored version itself (shared, not copied: the write replaces it).
    let stored = call
        .shared
        .lock()
        .shared(&scope.res(), &scope.key(name))
        .cloned();
    if ty == PatchType::Apply {
        let current = stored.map(|o| present(&scope.rt, &o));
        return apply(call, name, current, fv, force).await;
    }
    let stored = stored.ok_or_else(|| ApiError::not_found(scope.target(name)))?;
    // The one copy a patch makes: the version as served, patched in place.
    let new = crate::patch::apply(ty, present(&scope.rt, &stored), call.body)?;
    // Duplicates only in merge-like JSON bodies (a JSON patch is a list of operations).
    let dup_body = matches!(ty, PatchType::Merge | PatchType::Strategic)
        .then(|| json_body(call.content_type, call.body))
        .flatten();
    // Unknown fields the stored version has already are not the patch's (apiVersion and
    // kind, which only the served version carries, are never unknown).
    let mut warnings = fv.check(&scope.rt, &new, Some(&stored), dup_body)?;
    let old = present(&scope.rt, &stored);
    let who = Fields::Update(&call.who);
    let (based_on, patched_rv) = (meta_str(&stored, "resourceVersion"), rv_of(&new));
    let updated = super::admitted::update(call, name, new, &old, who, &mut warnings)
        .await
        .map_err(|e| Attempt::of_update(e, based_on, &patched_rv))?;
    Ok(answer_written(call, 200, &updated, &warnings))
}

/// The resourceVersion an object names.
fn rv_of(object: &Value) -> String {
    meta_str(object, "resourceVersion").to_owned()
}

/// A server-side apply patch of `current` (the object as served, if it exists): this
/// manager's configuration merged in, the object created when there is none.
async fn apply(
    call: &Call<'_>,
    name: &str,
    current: Option<Value>,
    fv: &FieldValidation,
    force: bool,
) -> Result<Response, Attempt> {
    let scope = &call.scope;
    let config = crate::patch::parse_apply(call.body)?;
    // kube-apiserver checks the name of the applied result (`checkName`): a
    // configuration without a name keeps the existing object's, and creates nothing.
    let body_name = crate::store::meta_str(&config, "name");
    let result_name = match (body_name, &current) {
        ("", Some(current)) => crate::store::meta_str(current, "name"),
        _ => body_name,
    };
    if result_name != name {
        return Err(Attempt::Failed(ApiError::bad_request(format!(
            "the name of the object ({result_name}) does not match the name on the URL ({name})"
        ))));
    }
    if current.is_none() && call.status_only() {
        return Err(ApiError::not_found(scope.target(name)).into());
    }
    let who = &call.who;
    let new = crate::managed::apply(&scope.rt, current.as_ref(), &config, who, force)?;
    let mut warnings = fv.check(&scope.rt, &new, current.as_ref(), None)?;
    let fields = Fields::Applied(who);
    let (code, written) = match current {
        // Server-side apply creates what does not exist yet; when another request
        // created it first, the configuration is applied again to what it created.
        None => match super::admitted::create(call, new, fields, &mut warnings).await {
            Err(e) if e.code == 409 && e.reason == "AlreadyExists" => {
                return Err(Attempt::Stale(e));
            }
            created => (201, created?),
        },
        Some(old) => {
            let (based_on, patched_rv) = (rv_of(&old), rv_of(&new));
            let updated = super::admitted::update(call, name, new, &old, fields, &mut warnings)
                .await
                .map_err(|e| Attempt::of_update(e, &based_on, &patched_rv))?;
            (200, updated)
        }
    };
    Ok(answer_written(call, code, &written, &warnings))
}

/// Reads DeleteOptions from the query and the (optional) body.
pub(super) fn delete_options(
    q: &HashMap<String, String>,
    body: &[u8],
) -> Result<(Propagation, Value, bool), ApiError> {
    let opts: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    if !opts.is_object() {
        return Err(ApiError::bad_request("DeleteOptions must be an object"));
    }
    let policy = q.get("propagationPolicy").cloned().or_else(|| {
        opts.get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from)
    });
    let orphan = parse_bool(q, "orphanDependents")?
        .or_else(|| opts.get("orphanDependents").and_then(Value::as_bool));
    let propagation = match (policy.as_deref(), orphan) {
        (Some("Orphan"), _) | (None, Some(true)) => Propagation::Orphan,
        (Some("Foreground"), _) => Propagation::Foreground,
        (Some("Background") | None, _) => Propagation::Background,
        (Some(other), _) => {
            return Err(ApiError::new(
                422,
                "Invalid",
                format!(
                    "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
                ),
            ));
        }
    };
    let dry = opts
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x == "All"));
    let preconditions = opts.get("preconditions").cloned().unwrap_or(json!({}));
    Ok((propagation, preconditions, dry))
}

/// DELETE of one object, once admission webhooks admitted it: gone now, or marked for
/// deletion while finalizers or foreground-deleted dependents remain.
pub(super) async fn delete(call: &Call<'_>, name: &str) -> Result<Response, ApiError> {
    let (_, _, body_dry) = delete_options(call.query, call.body)?;
    let mut warnings = Vec::new();
    let current = crate::objects::get(&call.shared.lock(), &call.scope, name).ok();
    if let Some(old) = &current {
        let preconditions = || check_preconditions(call, name, old);
        super::admitted::delete(call, name, (old, body_dry), preconditions, &mut warnings).await?;
    }
    Ok(with_warnings(delete_admitted(call, name)?, &warnings))
}

/// The DELETE's preconditions (its DeleteOptions' `uid`, `resourceVersion`) against
/// `current`: kube's 409 when one does not hold.
fn check_preconditions(call: &Call<'_>, name: &str, current: &Value) -> Result<(), ApiError> {
    let (_, pre, _) = delete_options(call.query, call.body)?;
    preconditions_hold(&call.scope, name, &pre, current)
}

fn preconditions_hold(
    scope: &crate::objects::Scope,
    name: &str,
    pre: &Value,
    current: &Value,
) -> Result<(), ApiError> {
    // kube's BeforeDelete: the conflict is about the Kind (its details' kind too).
    let kind = crate::status::Target {
        group: &scope.rt.group,
        plural: &scope.rt.kind,
        name,
    };
    for (field, what, why) in [
        ("uid", "UID", "deleted and then recreated"),
        ("resourceVersion", "ResourceVersion", "modified"),
    ] {
        if let Some(want) = pre.get(field).and_then(Value::as_str)
            && want != crate::store::meta_str(current, field)
        {
            let mut e = ApiError::conflict(kind);
            let on = e.message.split(": ").next().unwrap_or_default().to_string();
            e.message = format!(
                "{on}: the {what} in the precondition ({want}) does not match the {what} in record ({}). The object might have been {why}",
                crate::store::meta_str(current, field)
            );
            return Err(e);
        }
    }
    Ok(())
}

/// DELETE of one object admission admitted.
fn delete_admitted(call: &Call<'_>, name: &str) -> Result<Response, ApiError> {
    let (scope, dry) = (&call.scope, call.dry);
    let (propagation, pre, body_dry) = delete_options(call.query, call.body)?;
    let protected = ["default", "kube-system", "kube-public"];
    if scope.rt.group.is_empty() && scope.rt.plural == "namespaces" && protected.contains(&name) {
        return Err(ApiError::forbidden(
            scope.target(name),
            "this namespace may not be deleted",
        ));
    }
    let mut store = call.shared.lock();
    let res = scope.res();
    let key = scope.key(name);
    let current = store
        .get(&res, &key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(scope.target(name)))?;
    preconditions_hold(scope, name, &pre, &current)?;
    if dry || body_dry {
        // Answered as the delete would be: a Success Status for an object that would go
        // at once (no finalizers, nor one this delete adds), else the object.
        let held = !crate::store::meta_str(&current, "deletionTimestamp").is_empty()
            || current
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty())
            || propagation != crate::gc::Propagation::Background;
        if !held && scope.rt.plural != "pods" {
            return Ok(json_response(200, &deleted_status(scope, name, &current)));
        }
        return Ok(json_response(200, &present(&scope.rt, &current)));
    }
    let grace = super::pods::grace_period(call.query, call.body)?;
    let Some((obj, gone)) = crate::gc::delete_graceful(&mut store, &res, &key, propagation, grace)
    else {
        return Err(ApiError::not_found(scope.target(name)));
    };
    if gone && scope.rt.plural != "pods" {
        // A Success Status (custom resources too); pods answer the object.
        return Ok(json_response(200, &deleted_status(scope, name, &obj)));
    }
    Ok(json_response(200, &present(&scope.rt, &obj)))
}

/// kube-apiserver's answer to the delete of an object gone at once.
fn deleted_status(scope: &crate::objects::Scope, name: &str, obj: &Value) -> Value {
    let mut details =
        json!({"name": name, "kind": scope.rt.plural, "uid": crate::store::meta_str(obj, "uid")});
    if !scope.rt.group.is_empty() {
        details["group"] = json!(scope.rt.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// DELETE of a collection: the objects its selectors match.
pub(super) async fn delete_collection(call: &Call<'_>) -> Result<Response, ApiError> {
    let (scope, q, dry) = (&call.scope, call.query, call.dry);
    if !scope.rt.verbs.iter().any(|v| v == "deletecollection") {
        return Err(ApiError::method_not_allowed(
            "deletecollection on this resource",
        ));
    }
    let (propagation, _, body_dry) = delete_options(q, call.body)?;
    let sel = selectors(call)?;
    let res = scope.res();
    let matched: Vec<_> = call
        .shared
        .lock()
        .list(&res, scope.ns.as_deref())
        .filter(|(_, o)| sel.matches(o))
        .map(|(k, o)| (k.clone(), present(&scope.rt, o)))
        .collect();
    // Each object's deletion is admitted as its own DELETE (kube's per-item validation
    // of a collection delete): the first refusal ends the request, the objects deleted
    // before it stay deleted.
    let mut warnings = Vec::new();
    let mut items = Vec::new();
    for (k, served) in matched {
        let name = crate::store::meta_str(&served, "name").to_owned();
        let preconditions = || check_preconditions(call, &name, &served);
        super::admitted::delete(
            call,
            &name,
            (&served, body_dry),
            preconditions,
            &mut warnings,
        )
        .await?;
        if dry || body_dry {
            items.push(served);
            continue;
        }
        let mut store = call.shared.lock();
        let grace = super::pods::grace_period(q, call.body)?;
        if let Some((o, _)) = crate::gc::delete_graceful(&mut store, &res, &k, propagation, grace) {
            items.push(present(&scope.rt, &o));
        }
    }
    let rv = call.shared.lock().rv().to_string();
    let list = json!({"kind": format!("{}List", scope.rt.kind), "apiVersion": scope.rt.api_version(), "metadata": {"resourceVersion": rv}, "items": items});
    Ok(with_warnings(json_response(200, &list), &warnings))
}
