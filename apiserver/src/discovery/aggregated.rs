//! Aggregated discovery (`apidiscovery.k8s.io/v2`): `/api` and `/apis` answered in one
//! document each, every group with its versions and their resources, when the client asks
//! for it by media type (kubectl, client-go and kube-rs's `run_aggregated` do); a client
//! asking for plain JSON gets the legacy documents.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::served::{Served, served};
use crate::registry::{Registry, ResourceType};

/// The media type a client asks for aggregated discovery with, and the response's
/// `Content-Type` (client-go reads it to tell the two forms apart).
pub(crate) const MEDIA_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// `/api` (`core`) or `/apis` as an `APIGroupDiscoveryList`.
pub(crate) fn group_discovery_list(
    reg: &Registry,
    core: bool,
    has_scale: &dyn Fn(&ResourceType) -> bool,
) -> Value {
    let groups = if core {
        vec![String::new()]
    } else {
        reg.groups()
    };
    let items: Vec<Value> = groups
        .iter()
        .filter_map(|g| group_discovery(reg, g, has_scale))
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// One group's `APIGroupDiscovery`, versions by kube's priority; None when nothing is
/// served in it.
fn group_discovery(
    reg: &Registry,
    group: &str,
    has_scale: &dyn Fn(&ResourceType) -> bool,
) -> Option<Value> {
    let versions: Vec<Value> = reg
        .versions(group)
        .iter()
        .map(|v| {
            let resources: Vec<Value> = served(reg, group, v, has_scale)
                .iter()
                .map(resource_discovery)
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    if versions.is_empty() {
        return None;
    }
    // The core group has no name; Go omits the empty one.
    let metadata = if group.is_empty() {
        json!({})
    } else {
        json!({"name": group})
    };
    Some(json!({"metadata": metadata, "versions": versions}))
}

fn gvk_json(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

/// One resource's `APIResourceDiscovery`. A response kind names its group and version
/// only where they are not the resource's own (kube-apiserver leaves them empty).
fn resource_discovery(s: &Served<'_>) -> Value {
    let t = s.rt;
    let own =
        |group: &str, version: &str| (group, version) == (t.group.as_str(), t.version.as_str());
    let kind_json = |group: &str, version: &str, kind: &str| {
        if own(group, version) {
            gvk_json("", "", kind)
        } else {
            gvk_json(group, version, kind)
        }
    };
    let mut r = json!({
        "resource": t.plural,
        "responseKind": kind_json(&t.group, &t.version, &t.kind),
        "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": t.singular,
        "verbs": t.verbs,
    });
    if !t.short_names.is_empty() {
        r["shortNames"] = json!(t.short_names);
    }
    if !t.categories.is_empty() {
        r["categories"] = json!(t.categories);
    }
    if !s.subresources.is_empty() {
        let subs: Vec<Value> = s
            .subresources
            .iter()
            .map(|sub| {
                json!({
                    "subresource": sub.name,
                    "responseKind": kind_json(&sub.kind.group, &sub.kind.version, &sub.kind.kind),
                    "verbs": sub.verbs,
                })
            })
            .collect();
        r["subresources"] = json!(subs);
    }
    r
}

/// The answer with `doc`: tagged with a hash of its JSON (kube-apiserver's is SHA-512; a
/// client only compares it, so the shard hash serves), and 304 Not Modified when the
/// client already has it (`If-None-Match`), as kube-apiserver answers. The JSON is written
/// once, for the tag and the body.
pub(crate) fn response(doc: &Value, if_none_match: &str) -> Response {
    let text = doc.to_string();
    let tag = format!("\"{:016X}\"", crate::shards::fnv1a64(text.as_bytes()));
    let headers = [
        (header::ETAG, tag.clone()),
        (header::VARY, "Accept".to_string()),
        (header::CACHE_CONTROL, "public".to_string()),
    ];
    if if_none_match == tag {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    let mut resp = (headers, text).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(MEDIA_TYPE),
    );
    resp
}
