//! The requests that read: get one object, list a collection (a page of it), and watch a
//! collection or one object; each answered whole, as a Table (`kubectl get`) or as
//! metadata only, as the client asks.

use std::time::Duration;

use axum::response::Response;
use serde_json::{Value, json};

use super::{Call, parse_bool, selectors};
use crate::list::ListParams;
use crate::selectors::FieldSelector;
use crate::status::{ApiError, json_response};
use crate::table::{Columns, View};
use crate::watch::WatchParams;

/// The Table columns of the type, when the client asks for a Table.
fn columns(call: &Call<'_>) -> Option<Columns> {
    (call.view == View::Table).then(|| {
        Columns::new(
            &call.shared.lock(),
            &call.scope,
            call.query.get("includeObject").map(String::as_str),
        )
    })
}

/// GET of a collection with `watch`: its changes, streamed.
pub(super) fn watch(call: Call<'_>) -> Result<Response, ApiError> {
    let q = call.query;
    let timeout = match q.get("timeoutSeconds").filter(|s| !s.is_empty()) {
        Some(t) => Some(Duration::from_secs(t.parse::<u64>().map_err(|_| {
            ApiError::bad_request("timeoutSeconds must be a non-negative integer")
        })?)),
        None => None,
    };
    let params = WatchParams {
        selectors: selectors(&call)?,
        resource_version: q.get("resourceVersion").cloned(),
        timeout,
        bookmarks: parse_bool(q, "allowWatchBookmarks")?.unwrap_or(false),
        send_initial_events: parse_bool(q, "sendInitialEvents")?,
        rv_match: q.get("resourceVersionMatch").cloned(),
        table: columns(&call),
        meta_only: call.view == View::Meta,
    };
    crate::watch::start(call.shared, call.scope, params)
}

/// GET of one object with `watch`: a watch with a field selector on its name.
pub(super) fn watch_one(call: Call<'_>, name: &str) -> Result<Response, ApiError> {
    let q = call.query;
    let mut params = WatchParams {
        selectors: selectors(&call)?,
        resource_version: q.get("resourceVersion").cloned(),
        bookmarks: parse_bool(q, "allowWatchBookmarks")?.unwrap_or(false),
        table: columns(&call),
        meta_only: call.view == View::Meta,
        ..WatchParams::default()
    };
    params.selectors.fields =
        FieldSelector::parse(&format!("metadata.name={name}"), &call.scope.rt.plural)
            .map_err(ApiError::bad_request)?;
    crate::watch::start(call.shared, call.scope, params)
}

/// GET of a collection: its objects (a page of them, with `limit`).
pub(super) fn list(call: &Call<'_>) -> Result<Response, ApiError> {
    let q = call.query;
    let rv = q.get("resourceVersion").map_or("", String::as_str);
    if q.get("resourceVersionMatch").is_some_and(|m| !m.is_empty()) && rv.is_empty() {
        return Err(ApiError::invalid_options(
            "ListOptions",
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    // kube-apiserver serves resourceVersion 0 from its watch cache, whole: no pages.
    let paged = rv != "0";
    let limit = match q.get("limit").filter(|s| !s.is_empty() && paged) {
        Some(l) => Some(
            l.parse::<i64>()
                .map_err(|_| ApiError::bad_request("limit must be an integer"))?
                .max(0) as usize,
        ),
        None => None,
    };
    let params = ListParams {
        selectors: selectors(call)?,
        limit,
        continue_token: q.get("continue").cloned(),
    };
    let store = call.shared.lock();
    let list = crate::list::list(&store, &call.scope, &params)?;
    drop(store);
    match columns(call) {
        Some(cols) => {
            let items = list["items"].as_array().cloned().unwrap_or_default();
            Ok(json_response(
                200,
                &cols.table(&call.scope, &items, list["metadata"].clone()),
            ))
        }
        None if call.view == View::Meta => {
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

/// GET of one object.
pub(super) fn get(call: &Call<'_>, name: &str) -> Result<Response, ApiError> {
    let obj = crate::objects::get(&call.shared.lock(), &call.scope, name)?;
    match columns(call) {
        Some(cols) => {
            let rv = crate::store::meta_str(&obj, "resourceVersion").to_string();
            let meta = json!({"resourceVersion": rv});
            Ok(json_response(200, &cols.table(&call.scope, &[obj], meta)))
        }
        None if call.view == View::Meta => Ok(json_response(200, &crate::table::partial(&obj))),
        None => Ok(json_response(200, &obj)),
    }
}
