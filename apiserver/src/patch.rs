//! The four patch formats kube-apiserver accepts.

use crate::status::ApiError;
use serde_json::{Map, Value, json};

/// A patch body's format, from its Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub(crate) fn from_content_type(ct: &str) -> Result<Self, ApiError> {
        let base = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match base.as_str() {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(PatchType::Apply),
            _ => Err(ApiError::unsupported_media_type(ct)),
        }
    }
}

/// Parses a JSON body (patches other than apply) into a value.
pub(crate) fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// Parses a server-side apply body: YAML (JSON is YAML too).
pub(crate) fn parse_apply(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request("apply patch must be an object"));
    }
    // kube-apiserver types the configuration by its apiVersion and kind: without a kind it
    // has no type (GroupVersionKind's text: `group/version, Kind=`).
    if v.get("kind")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let api_version = v
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        return Err(ApiError::bad_request(format!(
            "invalid object type: {group}/{version}, Kind="
        )));
    }
    Ok(v)
}

/// kube's generic 422 of a JSON patch that does not apply (NewGenericServerResponse):
/// its message, empty details.
fn json_patch_failed() -> ApiError {
    let mut err = ApiError::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    );
    err.details = Some(Box::new(json!({})));
    err
}

/// A JSON patch's operations. As kube-apiserver: a body that is not a list is 400 with Go's
/// decoding error; a list with an operation that is not one fails only when applied (422).
fn json_patch_of(body: &[u8]) -> Result<json_patch::Patch, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding json patch: {e}")))?;
    let go_type = match &value {
        Value::Array(_) => return serde_json::from_value(value).map_err(|_| json_patch_failed()),
        Value::Object(_) => "object",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => return Ok(json_patch::Patch(Vec::new())),
    };
    Err(ApiError::bad_request(format!(
        "error decoding patch: json: cannot unmarshal {go_type} into Go value of type []handlers.jsonPatchOp"
    )))
}

/// Applies a patch of `ty` to `doc` (the object as currently served).
pub(crate) fn apply(ty: PatchType, doc: Value, body: &[u8]) -> Result<Value, ApiError> {
    let mut out = doc;
    match ty {
        PatchType::Json => {
            let p = json_patch_of(body)?;
            // kube answers a failed operation (a failed `test` included) with 422 built by
            // NewGenericServerResponse: reason Invalid, the generic message, empty details
            // (the operation's error is not sent).
            json_patch::patch(&mut out, &p).map_err(|_| json_patch_failed())?;
        }
        PatchType::Merge => {
            let p = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::bad_request("merge patch must be a JSON object"));
            }
            json_patch::merge(&mut out, &p);
        }
        PatchType::Strategic => {
            let p = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::bad_request(
                    "strategic merge patch must be a JSON object",
                ));
            }
            out = strategic(&out, &p);
        }
        PatchType::Apply => {
            // Server-side apply with field ownership is `managed::apply`; this merge serves
            // the scale subresource, whose fields are all scalars.
            let p = parse_apply(body)?;
            out = strategic(&out, &p);
        }
    }
    if !out.is_object() {
        return Err(ApiError::bad_request("the patched object is not an object"));
    }
    Ok(out)
}

/// The merge key kube's strategic merge uses for a list field, by field name and items.
pub(crate) fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    let has = |k: &str| items.iter().all(|i| i.get(k).is_some());
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets" => Some("name"),
        "hostAliases" => Some("ip"),
        "volumeMounts" | "volumeDevices" => Some("mountPath"),
        "ports" if has("containerPort") => Some("containerPort"),
        "ports" => Some("port"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "envFrom" | "tolerations" | "args" | "command" => None,
        _ => None,
    }
}

/// Lists of scalars kube merges as sets (patchStrategy "merge" on primitives).
fn is_primitive_merge(field: &str) -> bool {
    field == "finalizers"
}

/// Strategic merge patch: merge-patch semantics plus keyed list merging and the `$patch`
/// directives (`replace`, `delete`, `merge`) and `$deleteFromPrimitiveList/…`;
/// `$setElementOrder/…` and `$retainKeys` are accepted and ignored.
pub(crate) fn strategic(doc: &Value, patch: &Value) -> Value {
    let Some(pm) = patch.as_object() else {
        return patch.clone();
    };
    match pm.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut p = pm.clone();
            p.remove("$patch");
            return Value::Object(p);
        }
        Some("delete") => return Value::Null,
        _ => {}
    }
    let mut out: Map<String, Value> = doc.as_object().cloned().unwrap_or_default();
    for (k, pv) in pm {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(f) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(cur), Some(del)) =
                (out.get_mut(f).and_then(Value::as_array_mut), pv.as_array())
            {
                cur.retain(|x| !del.contains(x));
            }
            continue;
        }
        if pv.is_null() {
            out.remove(k);
            continue;
        }
        let cur = out.get(k).cloned().unwrap_or(Value::Null);
        let merged = match (cur, pv) {
            (_, Value::Object(_)) => {
                // Over a missing or non-object value, the patch's object starts afresh.
                let base = out
                    .get(k)
                    .filter(|v| v.is_object())
                    .cloned()
                    .unwrap_or(json!({}));
                let m = strategic(&base, pv);
                if m.is_null() {
                    out.remove(k);
                    continue;
                }
                m
            }
            (Value::Array(cur), Value::Array(items)) => merge_list(k, &cur, items),
            (_, Value::Array(items)) => merge_list(k, &[], items),
            (_, v) => v.clone(),
        };
        out.insert(k.clone(), merged);
    }
    Value::Object(out)
}

fn merge_list(field: &str, cur: &[Value], items: &[Value]) -> Value {
    if is_primitive_merge(field) {
        let mut out = cur.to_vec();
        for i in items {
            if !out.contains(i) {
                out.push(i.clone());
            }
        }
        return Value::Array(out);
    }
    // `[{"$patch": "replace"}, ...]` replaces the whole list with the other items.
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .cloned()
                .collect(),
        );
    }
    let Some(key) = merge_key(field, items).filter(|_| items.iter().all(Value::is_object)) else {
        return Value::Array(
            items
                .iter()
                .filter(|i| !i.is_object() || i.get("$patch").is_none())
                .cloned()
                .collect(),
        );
    };
    let mut out: Vec<Value> = cur.to_vec();
    for item in items {
        let id = item.get(key);
        let pos = out
            .iter()
            .position(|c| c.get(key).is_some() && c.get(key) == id);
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(p), true) => {
                out.remove(p);
            }
            (None, true) => {}
            (Some(p), false) => {
                let m = strategic(&out[p], item);
                out[p] = m;
            }
            (None, false) => {
                // A new item: kube discards the nulls that match nothing (and directives).
                out.push(strategic(&json!({}), item));
            }
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategic_lists_merge_by_key() {
        let doc = json!({"spec": {"containers": [{"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}]}, {"name": "b", "image": "y"}]}, "metadata": {"finalizers": ["f1"]}});
        let p = json!({"spec": {"containers": [{"name": "a", "image": "z", "env": [{"name": "F", "value": "2"}]}, {"name": "b", "$patch": "delete"}]}, "metadata": {"finalizers": ["f2"]}});
        let out = strategic(&doc, &p);
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "a", "image": "z", "env": [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}]}])
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["f1", "f2"]));
        let out = strategic(&doc, &json!({"spec": {"$patch": "replace", "x": 1}}));
        assert_eq!(out["spec"], json!({"x": 1}));
        let out = strategic(
            &doc,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!([]));
        let out = strategic(&doc, &json!({"spec": null}));
        assert!(out.get("spec").is_none());
    }
}
