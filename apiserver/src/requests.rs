//! Resource requests: list, watch, get, create, update, patch, delete and
//! deletecollection, with their query parameters and bodies.

use crate::field_validation::{FieldValidation, with_warnings};
use crate::gc::Propagation;
use crate::list::ListParams;
use crate::managed::Who;
use crate::objects::{Fields, Scope, present};
use crate::patch::PatchType;
use crate::selectors::{FieldSelector, LabelSelector, Selectors};
use crate::server::{ResPath, Shared};
use crate::status::{ApiError, json_response};
use crate::watch::WatchParams;
use axum::response::Response;
use http::Method;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Go's strconv.ParseBool, which kube uses for boolean query parameters.
fn parse_bool(q: &HashMap<String, String>, k: &str) -> Result<Option<bool>, ApiError> {
    match q.get(k).map(String::as_str) {
        None | Some("") => Ok(None),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(Some(true)),
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(Some(false)),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid boolean value for {k}: {other:?}"
        ))),
    }
}

fn selectors(q: &HashMap<String, String>, plural: &str) -> Result<Selectors, ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str), plural)
        .map_err(ApiError::bad_request)?;
    Ok(Selectors { labels, fields })
}

/// Parses a create/update body: JSON, or YAML when the client says so.
fn parse_object(ct: &str, body: &[u8]) -> Result<Value, ApiError> {
    if ct.contains("protobuf") {
        return crate::protobuf::decode(body);
    }
    if ct.contains("cbor") {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {ct:?})"
            ),
        ));
    }
    let v: Value = if ct.contains("yaml") {
        serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be an object",
        ));
    }
    Ok(v)
}

/// The body, for the duplicate-field check, when it is JSON (YAML and protobuf
/// bodies are not searched for duplicates).
fn json_body<'a>(ct: &str, body: &'a [u8]) -> Option<&'a [u8]> {
    (!ct.contains("yaml") && !ct.contains("protobuf") && !ct.contains("cbor")).then_some(body)
}

fn dry_run(q: &HashMap<String, String>) -> Result<bool, ApiError> {
    match q.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: {other:?}: supported values: \"All\""
        ))),
    }
}

#[allow(
    clippy::too_many_arguments,
    reason = "the parsed parts of one request, passed once"
)]
pub(crate) fn resource_request(
    shared: &Arc<Shared>,
    method: &Method,
    p: ResPath,
    q: &HashMap<String, String>,
    watch_param: bool,
    ct: &str,
    body: &[u8],
    view: crate::table::View,
    user_agent: &str,
) -> Result<Response, ApiError> {
    let path_err = || ApiError::no_route(&format!("{}/{}/{}", p.group, p.version, p.plural));
    let rt = shared
        .lock()
        .registry
        .find(&p.group, &p.version, &p.plural)
        .cloned()
        .ok_or_else(path_err)?;
    if !rt.namespaced && p.ns.is_some() || rt.namespaced && p.ns.is_none() && p.name.is_some() {
        return Err(path_err());
    }
    let status_only = match p.sub.as_deref() {
        None | Some("scale") => false,
        Some("status") if rt.has_status => true,
        Some(_) => return Err(path_err()),
    };
    let scope = Scope {
        rt,
        ns: p.ns.clone(),
    };
    let watch = p.watch || watch_param;
    let dry = dry_run(q)?;
    let who = Who {
        manager: Who::from_request(q.get("fieldManager").map(String::as_str), user_agent),
        subresource: match p.sub.as_deref() {
            Some("status") => Some("status"),
            Some("scale") => Some("scale"),
            _ => None,
        },
    };
    if p.sub.as_deref() == Some("scale") {
        let paths = crate::scale::paths(&shared.lock(), &scope.rt).ok_or_else(path_err)?;
        let name = p.name.as_deref().ok_or_else(path_err)?;
        return scale_request(shared, &scope, name, method, ct, body, dry, &paths, &who);
    }
    let columns = || {
        (view == crate::table::View::Table).then(|| {
            crate::table::Columns::new(
                &shared.lock(),
                &scope,
                q.get("includeObject").map(String::as_str),
            )
        })
    };
    match (method.clone(), p.name.as_deref()) {
        (Method::GET, None) if watch => {
            let timeout = match q.get("timeoutSeconds").filter(|s| !s.is_empty()) {
                Some(t) => Some(Duration::from_secs(t.parse::<u64>().map_err(|_| {
                    ApiError::bad_request("timeoutSeconds must be a non-negative integer")
                })?)),
                None => None,
            };
            let params = WatchParams {
                selectors: selectors(q, &scope.rt.plural)?,
                resource_version: q.get("resourceVersion").cloned(),
                timeout,
                bookmarks: parse_bool(q, "allowWatchBookmarks")?.unwrap_or(false),
                send_initial_events: parse_bool(q, "sendInitialEvents")?,
                rv_match: q.get("resourceVersionMatch").cloned(),
                table: columns(),
                meta_only: view == crate::table::View::Meta,
            };
            crate::watch::start(shared, scope, params)
        }
        (Method::GET, None) => {
            let limit = match q.get("limit").filter(|s| !s.is_empty()) {
                Some(l) => Some(
                    l.parse::<i64>()
                        .map_err(|_| ApiError::bad_request("limit must be an integer"))?
                        .max(0) as usize,
                ),
                None => None,
            };
            let params = ListParams {
                selectors: selectors(q, &scope.rt.plural)?,
                limit,
                continue_token: q.get("continue").cloned(),
            };
            let store = shared.lock();
            let list = crate::list::list(&store, &scope, &params)?;
            drop(store);
            match columns() {
                Some(cols) => {
                    let items = list["items"].as_array().cloned().unwrap_or_default();
                    Ok(json_response(
                        200,
                        &cols.table(&scope, &items, list["metadata"].clone()),
                    ))
                }
                None if view == crate::table::View::Meta => {
                    let items: Vec<Value> = list["items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(crate::table::partial)
                        .collect();
                    let meta = list["metadata"].clone();
                    let out = json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": items});
                    Ok(json_response(200, &out))
                }
                None => Ok(json_response(200, &list)),
            }
        }
        (Method::GET, Some(name)) if watch => {
            // A watch on one object: a field selector on its name.
            let mut params = WatchParams {
                selectors: selectors(q, &scope.rt.plural)?,
                resource_version: q.get("resourceVersion").cloned(),
                bookmarks: parse_bool(q, "allowWatchBookmarks")?.unwrap_or(false),
                table: columns(),
                meta_only: view == crate::table::View::Meta,
                ..WatchParams::default()
            };
            params.selectors.fields =
                FieldSelector::parse(&format!("metadata.name={name}"), &scope.rt.plural)
                    .map_err(ApiError::bad_request)?;
            crate::watch::start(shared, scope, params)
        }
        (Method::GET, Some(name)) => {
            let obj = crate::objects::get(&shared.lock(), &scope, name)?;
            match columns() {
                Some(cols) => {
                    let rv = crate::store::meta_str(&obj, "resourceVersion").to_string();
                    let meta = json!({"resourceVersion": rv});
                    Ok(json_response(200, &cols.table(&scope, &[obj], meta)))
                }
                None if view == crate::table::View::Meta => {
                    Ok(json_response(200, &crate::table::partial(&obj)))
                }
                None => Ok(json_response(200, &obj)),
            }
        }
        (Method::POST, None) if !status_only => {
            let fv = FieldValidation::from_query(q)?;
            let obj = parse_object(ct, body)?;
            let warnings = fv.check(&scope.rt, &obj, None, json_body(ct, body))?;
            let created =
                crate::objects::create(&mut shared.lock(), &scope, obj, dry, Fields::Update(&who))?;
            Ok(with_warnings(json_response(201, &created), &warnings))
        }
        (Method::PUT, Some(name)) => {
            let fv = FieldValidation::from_query(q)?;
            let obj = parse_object(ct, body)?;
            let current = crate::objects::get(&shared.lock(), &scope, name).ok();
            let warnings = fv.check(&scope.rt, &obj, current.as_ref(), json_body(ct, body))?;
            // Custom resources and CRDs refuse unconditional updates (their strategies'
            // AllowUnconditionalUpdate is false); most built-ins accept them.
            let crd = (scope.rt.group.as_str(), scope.rt.plural.as_str()) == crate::store::CRDS;
            if (scope.rt.custom || crd)
                && crate::store::meta_str(&obj, "resourceVersion").is_empty()
            {
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
            let updated = crate::objects::commit_update(
                &mut shared.lock(),
                &scope,
                name,
                obj,
                status_only,
                dry,
                Fields::Update(&who),
            )?;
            Ok(with_warnings(json_response(200, &updated), &warnings))
        }
        (Method::PATCH, Some(name)) => {
            let fv = FieldValidation::from_query(q)?;
            let req = PatchRequest {
                ct,
                body,
                status_only,
                dry,
                fv,
                force: parse_bool(q, "force")?,
                field_manager: q.get("fieldManager").filter(|m| !m.is_empty()).is_some(),
            };
            patch(shared, &scope, name, req, &who)
        }
        (Method::DELETE, Some(name)) if !status_only => delete(shared, &scope, name, q, body, dry),
        (Method::DELETE, None) => delete_collection(shared, &scope, q, body, dry),
        (m, _) => Err(ApiError::method_not_allowed(&format!(
            "{m} on this resource"
        ))),
    }
}

/// A PATCH request's parts.
struct PatchRequest<'a> {
    ct: &'a str,
    body: &'a [u8],
    status_only: bool,
    dry: bool,
    fv: FieldValidation,
    /// The `force` parameter (apply only).
    force: Option<bool>,
    /// Whether `fieldManager` was given (apply requires it).
    field_manager: bool,
}

/// kube's PatchOptions validation error (422, kind PatchOptions of meta.k8s.io).
fn invalid_patch_options(field: &str, reason: &str, message: &str) -> ApiError {
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

fn patch(
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
    let current = store
        .get(&scope.res(), &scope.key(name))
        .map(|o| present(&scope.rt, o));
    if ty == PatchType::Apply {
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
                crate::objects::create(&mut store, scope, new, req.dry, Fields::Applied)?,
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
                    Fields::Applied,
                )?,
            ),
        };
        return Ok(with_warnings(json_response(code, &written), &warnings));
    }
    let cur = current.ok_or_else(|| ApiError::not_found(scope.target(name)))?;
    let new = crate::patch::apply(ty, &cur, req.body)?;
    // Duplicates only in merge-like JSON bodies (a JSON patch is a list of operations).
    let dup_body = matches!(ty, PatchType::Merge | PatchType::Strategic)
        .then(|| json_body(req.ct, req.body))
        .flatten();
    let warnings = req.fv.check(&scope.rt, &new, Some(&cur), dup_body)?;
    let updated = crate::objects::commit_update(
        &mut store,
        scope,
        name,
        new,
        req.status_only,
        req.dry,
        Fields::Update(who),
    )?;
    Ok(with_warnings(json_response(200, &updated), &warnings))
}

/// Reads DeleteOptions from the query and the (optional) body.
fn delete_options(
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

fn delete(
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

fn delete_collection(
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
#[allow(
    clippy::too_many_arguments,
    reason = "the parsed parts of one request, passed once"
)]
fn scale_request(
    shared: &Shared,
    scope: &Scope,
    name: &str,
    method: &Method,
    ct: &str,
    body: &[u8],
    dry: bool,
    paths: &crate::scale::ScalePaths,
    who: &Who,
) -> Result<Response, ApiError> {
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
            crate::patch::apply(ty, &scale, body)?
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
