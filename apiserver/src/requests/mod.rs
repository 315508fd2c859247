//! Resource requests: list, watch, get, create, update, patch, delete and
//! deletecollection, with their query parameters and bodies (`writes`: the requests
//! that change existing objects); ServiceAccount tokens (`token`) and access reviews
//! (`review`).

mod review;
mod token;
mod writes;

use crate::field_validation::{FieldValidation, with_warnings};
use crate::list::ListParams;
use crate::managed::Who;
use crate::objects::{Fields, Presented, Scope};
use crate::selectors::{FieldSelector, LabelSelector, Selectors};
use crate::state::Shared;
use crate::status::{ApiError, json_response};
use crate::watch::WatchParams;
use axum::response::Response;
use http::Method;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use writes::{PatchRequest, ScaleWrite, delete, delete_collection, patch, scale_request};

/// A parsed resource path.
#[derive(Debug)]
pub(crate) struct ResPath {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) ns: Option<String>,
    pub(crate) plural: String,
    pub(crate) name: Option<String>,
    pub(crate) sub: Option<String>,
    /// The legacy `/watch/` path prefix.
    pub(crate) watch: bool,
}

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

/// A request for a resource, as the router parsed it.
pub(crate) struct ResourceRequest<'a> {
    pub(crate) method: &'a Method,
    pub(crate) path: ResPath,
    pub(crate) query: &'a HashMap<String, String>,
    /// `?watch=true` (or `1`).
    pub(crate) watch: bool,
    pub(crate) content_type: &'a str,
    pub(crate) body: &'a [u8],
    /// How the client wants objects: whole, as a table, or metadata only.
    pub(crate) view: crate::table::View,
    /// The `User-Agent`, whose prefix names a field manager that gave none.
    pub(crate) user_agent: &'a str,
    /// The user, when RBAC is checked.
    pub(crate) user: Option<Arc<crate::auth::User>>,
}

/// The answer to a write: the object written (shared with the store, not copied) as the
/// resource serves it, with field validation's warnings.
fn answer_written(code: u16, scope: &Scope, obj: &Value, warnings: &[String]) -> Response {
    with_warnings(
        json_response(code, &Presented::new(&scope.rt, obj)),
        warnings,
    )
}

pub(crate) fn resource_request(
    shared: &Arc<Shared>,
    request: ResourceRequest<'_>,
) -> Result<Response, ApiError> {
    let ResourceRequest {
        method,
        path: p,
        query: q,
        watch: watch_param,
        content_type: ct,
        body,
        view,
        user_agent,
        user,
    } = request;
    let path_err = || ApiError::no_route(&format!("{}/{}/{}", p.group, p.version, p.plural));
    if (p.group.as_str(), p.version.as_str(), p.plural.as_str())
        == ("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
        && p.ns.is_none()
        && p.name.is_none()
    {
        if *method != Method::POST {
            return Err(ApiError::method_not_allowed(&format!(
                "{method} on this resource"
            )));
        }
        return review::self_subject_access_review(
            shared,
            user.as_deref(),
            &parse_object(ct, body)?,
        );
    }
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
        Some("token") if rt.group.is_empty() && rt.plural == "serviceaccounts" => {
            let (Some(ns), Some(name)) = (&p.ns, &p.name) else {
                return Err(path_err());
            };
            if *method != Method::POST {
                return Err(ApiError::method_not_allowed(&format!(
                    "{method} on this resource"
                )));
            }
            return token::create(shared, ns, name, &parse_object(ct, body)?);
        }
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
        user,
    };
    if p.sub.as_deref() == Some("scale") {
        let paths = crate::scale::paths(&shared.lock(), &scope.rt).ok_or_else(path_err)?;
        let name = p.name.as_deref().ok_or_else(path_err)?;
        let write = ScaleWrite {
            method,
            content_type: ct,
            body,
            dry,
            paths: &paths,
            who: &who,
        };
        return scale_request(shared, &scope, name, &write);
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
            Ok(answer_written(201, &scope, &created, &warnings))
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
            Ok(answer_written(200, &scope, &updated, &warnings))
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
