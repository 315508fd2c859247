//! The requests that change existing objects: patches (every type, server-side apply
//! included), deletions (one, or a collection) and the scale subresource.

use std::collections::HashMap;

use axum::response::Response;
use http::Method;
use serde_json::{Value, json};

use super::{answer_written, json_body, parse_bool, parse_object, selectors};
use crate::field_validation::FieldValidation;
use crate::gc::Propagation;
use crate::managed::Who;
use crate::objects::{Fields, Scope, present};
use crate::patch::PatchType;
use crate::state::Shared;
use crate::status::{ApiError, json_response};

/// A PATCH request's parts.
pub(super) struct PatchRequest<'a> {
    pub(super) ct: &'a str,
    pub(super) body: &'a [u8],
    pub(super) status_only: bool,
    pub(super) dry: bool,
    pub(super) fv: FieldValidation,
    /// The `force` parameter (apply only).
    pub(super) force: Option<bool>,
    /// Whether `fieldManager` was given (apply requires it).
    pub(super) field_manager: bool,
}

/// kube's PatchOptions validation error (422, kind PatchOptions of meta.k8s.io).
pub(super) fn invalid_patch_options(field: &str, reason: &str, message: &str) -> ApiError {
    let mut e = ApiError::new(
        422,
        "Invalid",
        format!("PatchOptions.meta.k8s.io \"\" is invalid: {field}: {message}"),
    );
    e.details = Some(Box::new(
        json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{"reason": reason, "message": message, "field": field}]}),
    ));
    e
}

pub(super) fn patch(
    shared: &Shared,
    scope: &Scope,
    name: &str,
    req: PatchRequest<'_>,
    who: &Who,
) -> Result<Response, ApiError> {
    let ty = PatchType::from_content_type(req.ct)?;
    if ty == PatchType::Apply && !req.field_manager {
        return Err(invalid_patch_options(
            "fieldManager",
            "FieldValueRequired",
            "Required value: is required for apply patch",
        ));
    }
    if ty != PatchType::Apply && req.force.is_some() {
        return Err(invalid_patch_options(
            "force",
            "FieldValueForbidden",
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
    let mut store = shared.lock();
    // The stored version itself (shared, not copied: the write replaces it).
    let stored = store.shared(&scope.res(), &scope.key(name)).cloned();
    if ty == PatchType::Apply {
        let current = stored.map(|o| present(&scope.rt, &o));
        let config = crate::patch::parse_apply(req.body)?;
        let body_name = crate::store::meta_str(&config, "name");
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if current.is_none() && req.status_only {
            return Err(ApiError::not_found(scope.target(name)));
        }
        let force = req.force.unwrap_or(false);
        let new = crate::managed::apply(&scope.rt, current.as_ref(), &config, who, force)?;
        let warnings = req.fv.check(&scope.rt, &new, current.as_ref(), None)?;
        let (code, written) = match current {
            // Server-side apply creates what does not exist yet.
            None => (
                201,
                crate::objects::create(&mut store, scope, new, req.dry, Fields::Applied(who))?,
            ),
            Some(_) => (
                200,
                crate::objects::commit_update(
                    &mut store,
                    scope,
                    name,
                    new,
                    req.status_only,
                    req.dry,
                    Fields::Applied(who),
                )?,
            ),
        };
        return Ok(answer_written(code, scope, &written, &warnings));
    }
    let stored = stored.ok_or_else(|| ApiError::not_found(scope.target(name)))?;
    // The one copy a patch makes: the version as served, patched in place.
    let new = crate::patch::apply(ty, present(&scope.rt, &stored), req.body)?;
    // Duplicates only in merge-like JSON bodies (a JSON patch is a list of operations).
    let dup_body = matches!(ty, PatchType::Merge | PatchType::Strategic)
        .then(|| json_body(req.ct, req.body))
        .flatten();
    // Unknown fields the stored version has already are not the patch's (apiVersion and
    // kind, which only the served version carries, are never unknown).
    let warnings = req.fv.check(&scope.rt, &new, Some(&stored), dup_body)?;
    let updated = crate::objects::commit_update(
        &mut store,
        scope,
        name,
        new,
        req.status_only,
        req.dry,
        Fields::Update(who),
    )?;
    Ok(answer_written(200, scope, &updated, &warnings))
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

pub(super) fn delete(
    shared: &Shared,
    scope: &Scope,
    name: &str,
    q: &HashMap<String, String>,
    body: &[u8],
    dry: bool,
) -> Result<Response, ApiError> {
    let (propagation, pre, body_dry) = delete_options(q, body)?;
    let protected = ["default", "kube-system", "kube-public"];
    if scope.rt.group.is_empty() && scope.rt.plural == "namespaces" && protected.contains(&name) {
        return Err(ApiError::forbidden(
            scope.target(name),
            "this namespace may not be deleted",
        ));
    }
    let mut store = shared.lock();
    let res = scope.res();
    let key = scope.key(name);
    let current = store
        .get(&res, &key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(scope.target(name)))?;
    for (field, what) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        if let Some(want) = pre.get(field).and_then(Value::as_str)
            && want != crate::store::meta_str(&current, field)
        {
            let mut e = ApiError::conflict(scope.target(name));
            e.message = format!(
                "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: {what} in precondition: {want}, {what} in object meta: {}",
                scope.rt.plural,
                crate::store::meta_str(&current, field)
            );
            return Err(e);
        }
    }
    if dry || body_dry {
        return Ok(json_response(200, &present(&scope.rt, &current)));
    }
    let Some((obj, gone)) = crate::gc::delete(&mut store, &res, &key, propagation) else {
        return Err(ApiError::not_found(scope.target(name)));
    };
    if gone && !scope.rt.custom && scope.rt.plural != "pods" {
        // Most built-ins answer a Success Status; pods and custom resources the object.
        let mut details = json!({"name": name, "kind": scope.rt.plural, "uid": crate::store::meta_str(&obj, "uid")});
        if !scope.rt.group.is_empty() {
            details["group"] = json!(scope.rt.group);
        }
        return Ok(json_response(
            200,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
        ));
    }
    Ok(json_response(200, &present(&scope.rt, &obj)))
}

pub(super) fn delete_collection(
    shared: &Shared,
    scope: &Scope,
    q: &HashMap<String, String>,
    body: &[u8],
    dry: bool,
) -> Result<Response, ApiError> {
    if !scope.rt.verbs.iter().any(|v| v == "deletecollection") {
        return Err(ApiError::method_not_allowed(
            "deletecollection on this resource",
        ));
    }
    let (propagation, _, body_dry) = delete_options(q, body)?;
    let sel = selectors(q, &scope.rt.plural)?;
    let mut store = shared.lock();
    let res = scope.res();
    let keys: Vec<_> = store
        .list(&res, scope.ns.as_deref())
        .filter(|(_, o)| sel.matches(o))
        .map(|(k, _)| k.clone())
        .collect();
    let mut items = Vec::new();
    for k in keys {
        if dry || body_dry {
            if let Some(o) = store.get(&res, &k) {
                items.push(present(&scope.rt, o));
            }
        } else if let Some((o, _)) = crate::gc::delete(&mut store, &res, &k, propagation) {
            items.push(present(&scope.rt, &o));
        }
    }
    let list = json!({"kind": format!("{}List", scope.rt.kind), "apiVersion": scope.rt.api_version(), "metadata": {"resourceVersion": store.rv().to_string()}, "items": items});
    Ok(json_response(200, &list))
}

/// GET, PUT and PATCH on `<resource>/scale`: the object seen and changed as an
/// `autoscaling/v1` Scale.
/// A request to the scale subresource.
pub(super) struct ScaleWrite<'a> {
    pub(super) method: &'a Method,
    pub(super) content_type: &'a str,
    pub(super) body: &'a [u8],
    pub(super) dry: bool,
    pub(super) paths: &'a crate::scale::ScalePaths,
    pub(super) who: &'a Who,
}

pub(super) fn scale_request(
    shared: &Shared,
    scope: &Scope,
    name: &str,
    write: &ScaleWrite<'_>,
) -> Result<Response, ApiError> {
    let ScaleWrite {
        method,
        content_type: ct,
        body,
        dry,
        paths,
        who,
    } = *write;
    let mut store = shared.lock();
    let current = store
        .get(&scope.res(), &scope.key(name))
        .map(|o| present(&scope.rt, o))
        .ok_or_else(|| ApiError::not_found(scope.target(name)))?;
    let scale = crate::scale::to_scale(&current, paths);
    let wanted = match *method {
        Method::GET => return Ok(json_response(200, &scale)),
        Method::PUT => parse_object(ct, body)?,
        Method::PATCH => {
            let ty = PatchType::from_content_type(ct)?;
            crate::patch::apply(ty, scale, body)?
        }
        _ => {
            return Err(ApiError::method_not_allowed(&format!(
                "{method} on a scale subresource"
            )));
        }
    };
    let new = crate::scale::apply_scale(scope, name, &current, &wanted, paths)?;
    let updated = crate::objects::commit_update(
        &mut store,
        scope,
        name,
        new,
        false,
        dry,
        Fields::Update(who),
    )?;
    Ok(json_response(200, &crate::scale::to_scale(&updated, paths)))
}
